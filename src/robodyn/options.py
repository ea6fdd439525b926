"""Build options: how a description becomes a model, declared once.

``BuildOptions`` is shared by ``python -m codegen``, ``robodyn.load`` and every
``python -m robodyn`` subcommand: each field declares its command-line flag and
help, and ``add_arguments`` / ``from_arguments`` derive the command lines from
the fields, so every command accepts the same options. The options are part of
every robot's cache key.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

__all__ = ["BuildOptions", "METHODS", "FORWARD_METHODS", "BASES", "DERIVATIVES", "add_arguments", "from_arguments", "parse_assignments",
           "cache_arguments", "output_arguments"]

#: Derivation routes: closed forms by Euler-Lagrange, or recursive algorithms; "auto" picks by size.
METHODS = ("auto", "lagrange", "recursive")
#: Forward dynamics: M, bias and a sparse L^T D L solve, or the articulated-body algorithm.
FORWARD_METHODS = ("ltdl", "aba")
#: The root link: welded to the world, or free (six more degrees of freedom).
BASES = ("fixed", "floating")
#: Whether the derivative routines are compiled: "auto" builds them for fixed bases, not for floating ones.
DERIVATIVES = ("auto", "yes", "no")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")


def _option(flag: str, help: str, **argparse_options):
    return {"flag": flag, "help": help, "argparse": argparse_options}


@dataclass(frozen=True)
class BuildOptions:
    """How to derive and compile a robot (all optional; the defaults suit most robots)."""

    method: str = field(default="auto", metadata=_option(
        "--method", "derivation route: 'lagrange' (Euler-Lagrange closed forms with Christoffel symbols), "
        "'recursive' (Newton-Euler, composite rigid body, recursive Coriolis matrix) or 'auto' (Lagrange up to "
        "3 joints, recursive beyond; default)", choices=METHODS))
    forward: str = field(default="ltdl", metadata=_option(
        "--forward", "forward dynamics: 'ltdl' (M, bias and a sparse L^T D L solve; default, any robot) or 'aba' "
        "(articulated-body algorithm; recursive route, no motor rotors)", choices=FORWARD_METHODS))
    simplify: bool = field(default=True, metadata=_option(
        "--no-simplify", "skip trigonometric simplification on the Lagrange route (faster derivation, larger "
        "expressions)"))
    lock: tuple[tuple[str, float], ...] = field(default=(), metadata=_option(
        "--lock", "URDF: freeze a joint at a position (repeatable), e.g. --lock panda_finger_joint1=0",
        metavar="JOINT=VALUE"))
    runtime_parameters: bool = field(default=False, metadata=_option(
        "--runtime-parameters", "URDF: keep masses, centres of mass, inertias and friction as parameters settable "
        "at run time (default: compiled in as numbers)"))
    tool: str | None = field(default=None, metadata=_option(
        "--tool", "the link that carries the tool frame (fk, jacobian and the wrench h refer to its origin); "
        "default: the description's tool, else the last link", metavar="LINK"))
    tool_offset: tuple[float, ...] = field(default=(), metadata=_option(
        "--tool-offset", "a fixed offset of the tool frame from its link's origin: X,Y,Z metres, optionally "
        "followed by ROLL,PITCH,YAW radians (URDF rpy convention); replaces the description's tool offset",
        metavar="X,Y,Z[,R,P,Y]"))
    accept_invalid_inertia: bool = field(default=False, metadata=_option(
        "--accept-invalid-inertia", "accept inertia tensors that are physically impossible beyond rounding noise "
        "(not positive definite, triangle inequality violated) with a warning instead of an error"))
    assembly_mode: int = field(default=1, metadata=_option(
        "--assembly-mode", "closed chains: the assembly mode the dynamics are compiled for, +1 (default; the "
        "platform point to the left of the directed line from the first passive joint to the second, see "
        "docs/closed_chains.md) or -1", type=int, choices=(1, -1)))
    base: str = field(default="fixed", metadata=_option(
        "--base", "URDF: 'fixed' (default, the URDF convention: the root link is welded to the world) or 'floating' "
        "(the root link moves freely, as a legged robot's, a humanoid's or a mobile base's: q then starts with the "
        "base pose, see docs/floating_base.md); a YAML description declares a floating base itself",
        choices=BASES))
    derivatives: str = field(default="auto", metadata=_option(
        "--derivatives", "compile the derivative routines (inverse_dynamics_derivatives, forward_dynamics_derivatives; "
        "what linearize needs): 'yes', 'no', or 'auto' (default: yes for a fixed base, no for a floating base, whose "
        "kernels add about 4 s to Solo12's build: 7 -> 11 s)", choices=DERIVATIVES))
    selfcheck: bool = field(default=True, metadata=_option(
        "--no-selfcheck", "skip the post-build self-check of every routine against its symbolic value (for those "
        "who know the model is right; the cache entry records that it was not checked)"))
    exact_angles: bool = field(default=False, metadata=_option(
        "--exact-angles", "take every angle of the description (URDF origin and inertial rpy, lock positions, "
        "mimic offsets; YAML rpy, DH alpha and theta; the tool offset's rpy) that is within 1e-9 rad of a "
        "multiple of pi/2 as exactly that multiple, so that its sine and cosine are exactly 0 or +-1: e.g. the "
        "UR5 URDF's 1.57079632679 (cos = 4.9e-12), fewer operations; the model then differs from the file's "
        "numbers by up to 1e-9 rad (default: only doubles within 4 ulps of a multiple of pi/12 are exact)"))

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {self.method!r}")
        if self.forward not in FORWARD_METHODS:
            raise ValueError(f"forward: expected one of {', '.join(FORWARD_METHODS)}, got {self.forward!r}")
        for name in ("simplify", "runtime_parameters", "accept_invalid_inertia", "selfcheck", "exact_angles"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name}: expected True or False, got {getattr(self, name)!r}")
        object.__setattr__(self, "lock", _lock_pairs(self.lock))
        if self.tool is not None and (not isinstance(self.tool, str) or not _NAME.match(self.tool)):
            raise ValueError(f"tool: expected a link name, got {self.tool!r}")
        object.__setattr__(self, "tool_offset", _tool_offset(self.tool_offset))
        if self.base not in BASES:
            raise ValueError(f"base: expected one of {', '.join(BASES)}, got {self.base!r}")
        if self.derivatives not in DERIVATIVES:
            raise ValueError(f"derivatives: expected one of {', '.join(DERIVATIVES)}, got {self.derivatives!r}")
        if isinstance(self.assembly_mode, bool) or self.assembly_mode not in (1, -1):
            raise ValueError(f"assembly_mode: expected 1 or -1, got {self.assembly_mode!r}")
        object.__setattr__(self, "assembly_mode", int(self.assembly_mode))

    @property
    def lock_map(self) -> dict[str, float]:
        return dict(self.lock)

    def builds_derivatives(self, floating_base: bool) -> bool:
        """Whether the derivative routines are compiled for a robot with (or without) a floating base."""
        return self.derivatives == "yes" or (self.derivatives == "auto" and not floating_base)

    def replace(self, **changes) -> "BuildOptions":
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        unknown = set(changes) - set(values)
        if unknown:
            raise TypeError(f"unknown build option(s): {', '.join(sorted(unknown))}; "
                            f"known: {', '.join(values)}")
        values.update(changes)
        return BuildOptions(**values)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able values (the cache key and the manifest use this)."""
        return {"method": self.method, "forward": self.forward, "simplify": self.simplify,
                "lock": [[name, value] for name, value in self.lock], "runtime_parameters": self.runtime_parameters,
                "tool": self.tool, "tool_offset": list(self.tool_offset),
                "accept_invalid_inertia": self.accept_invalid_inertia, "selfcheck": self.selfcheck,
                "assembly_mode": self.assembly_mode, "base": self.base, "derivatives": self.derivatives,
                "exact_angles": self.exact_angles}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "BuildOptions":
        values = dict(values)
        values["lock"] = tuple(tuple(pair) for pair in values.get("lock", ()))
        values["tool_offset"] = tuple(values.get("tool_offset", ()))
        return cls(**values)

    def flags(self) -> list[str]:
        """These options as command-line flags (what to type to get them again)."""
        out = []
        default = BuildOptions()
        if self.method != default.method:
            out += ["--method", self.method]
        if self.forward != default.forward:
            out += ["--forward", self.forward]
        if not self.simplify:
            out.append("--no-simplify")
        for name, value in self.lock:
            out += ["--lock", f"{name}={value:g}"]
        if self.runtime_parameters:
            out.append("--runtime-parameters")
        if self.tool is not None:
            out += ["--tool", self.tool]
        if self.tool_offset:
            out += ["--tool-offset", ",".join(repr(v) for v in self.tool_offset)]
        if self.accept_invalid_inertia:
            out.append("--accept-invalid-inertia")
        if self.assembly_mode != default.assembly_mode:
            out += ["--assembly-mode", str(self.assembly_mode)]
        if self.base != default.base:
            out += ["--base", self.base]
        if self.derivatives != default.derivatives:
            out += ["--derivatives", self.derivatives]
        if not self.selfcheck:
            out.append("--no-selfcheck")
        if self.exact_angles:
            out.append("--exact-angles")
        return out


def _tool_offset(value) -> tuple[float, ...]:
    """() or 3 (x, y, z) or 6 (x, y, z, roll, pitch, yaw) finite numbers; a "X,Y,Z[,R,P,Y]" string too."""
    if isinstance(value, str):
        try:
            value = [float(part) for part in value.split(",")]
        except ValueError:
            raise ValueError(f"tool_offset: expected X,Y,Z or X,Y,Z,ROLL,PITCH,YAW numbers, got {value!r}") from None
    try:
        numbers = tuple(float(v) for v in value)
    except OverflowError:
        raise ValueError("tool_offset: the numbers must be at most 1e6 in magnitude") from None
    except (TypeError, ValueError):
        raise TypeError(f"tool_offset: expected 3 or 6 numbers, got {value!r}") from None
    if any(isinstance(v, (bool, str)) for v in value):
        raise TypeError(f"tool_offset: expected 3 or 6 numbers, got {value!r}")
    if len(numbers) not in (0, 3, 6):
        raise ValueError(f"tool_offset: expected 3 (x, y, z) or 6 (x, y, z, roll, pitch, yaw) numbers, "
                         f"got {len(numbers)}")
    if not all(math.isfinite(v) and abs(v) <= 1e6 for v in numbers):
        raise ValueError(f"tool_offset: the numbers must be finite and at most 1e6 in magnitude, got {value!r}")
    return numbers


def _lock_pairs(value) -> tuple[tuple[str, float], ...]:
    items: Iterable = value.items() if isinstance(value, Mapping) else (value or ())
    pairs = {}
    for item in items:
        try:
            name, position = item
        except (TypeError, ValueError):
            raise TypeError(f"lock: expected a mapping of joint names to positions, got {value!r}") from None
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"lock: {name!r} is not a joint name")
        if isinstance(position, bool) or not isinstance(position, (int, float)):
            try:
                import numpy as np

                ok = isinstance(position, (np.integer, np.floating))
            except ImportError:  # pragma: no cover - numpy is a dependency
                ok = False
            if not ok:
                raise TypeError(f"lock: {name}: expected a number, got {position!r}")
        try:
            position = float(position)
        except OverflowError:  # an int beyond the double range, such as 10**400
            digits = int(position.bit_length() * math.log10(2)) + 1
            raise ValueError(f"lock: {name}: the position is out of range (an integer of about {digits} digits)") from None
        if not math.isfinite(position):
            raise ValueError(f"lock: {name}: position must be finite, got {position}")
        if pairs.get(name, position) != position:
            raise ValueError(f"lock: {name}: given twice, as {pairs[name]!r} and {position!r}")
        pairs[name] = position
    return tuple(sorted(pairs.items()))


def parse_assignments(items: list[str], option: str) -> dict[str, float]:
    """NAME=NUMBER options (--lock, --set, --model-set) as a dict; ValueError names the option and item."""
    values = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            sep = ""
        else:
            if not math.isfinite(number):
                raise ValueError(f"{option} {item!r}: the value must be a finite number")
            if values.get(name.strip(), number) != number:  # the last one would win without a word
                raise ValueError(f"{option} {item!r}: {name.strip()} was already given as {values[name.strip()]!r}")
            values[name.strip()] = number
        if not sep or not name.strip():
            raise ValueError(f"{option} {item!r}: expected NAME=NUMBER")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The model options (one per BuildOptions field) and the cache options, on a parser."""
    group = parser.add_argument_group("model options (the same on every command)")
    for spec in fields(BuildOptions):
        meta = spec.metadata
        extra = dict(meta["argparse"])
        if spec.type in ("bool", bool) or isinstance(spec.default, bool):
            action = "store_false" if spec.default else "store_true"
            group.add_argument(meta["flag"], dest=spec.name, action=action, help=meta["help"])
        elif spec.name == "lock":
            group.add_argument(meta["flag"], dest=spec.name, action="append", default=[], help=meta["help"], **extra)
        else:
            group.add_argument(meta["flag"], dest=spec.name, default=spec.default, help=meta["help"], **extra)
    cache_arguments(parser)
    output_arguments(parser)


def output_arguments(parser: argparse.ArgumentParser) -> None:
    """--quiet and --debug (every command has them)."""
    group = parser.add_argument_group("output")
    group.add_argument("--quiet", action="store_true",
                       help="no progress or report: only errors, warnings and the result (status 0 means success)")
    group.add_argument("--debug", action="store_true",
                       help="on an error, also print the Python traceback (for bug reports)")


def _directory_name(text: str) -> str:
    """--cache-dir's value: a non-empty path (an empty one would silently mean the current directory)."""
    if not text.strip() or "\x00" in text:
        raise argparse.ArgumentTypeError("expected a directory name, got an empty string" if not text.strip()
                                         else "a directory name cannot contain a NUL byte")
    return text


def cache_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cache")
    group.add_argument("--cache-dir", "--out", dest="cache_dir", metavar="DIR", type=_directory_name,
                       help="where compiled robots live (default: $ROBODYN_CACHE_DIR, else $XDG_CACHE_HOME/robodyn, "
                            "else ~/.cache/robodyn)")
    group.add_argument("--force", action="store_true", help="rebuild even if the cache holds this robot")


def from_arguments(args: argparse.Namespace) -> BuildOptions:
    """BuildOptions from parsed arguments; ValueError names the bad option."""
    values = {}
    for spec in fields(BuildOptions):
        value = getattr(args, spec.name)
        if spec.name == "lock":
            value = tuple(parse_assignments(value, "--lock").items())
        values[spec.name] = value
    return BuildOptions(**values)
