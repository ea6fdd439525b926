"""Stage 1: read and validate a robot description (YAML) into RobotDescription.

This is the only stage that reads user input. Every rejection is a
DescriptionError naming the file, the line and the field path.
"""

from __future__ import annotations

import hashlib
import keyword
import math
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp

from .. import geometry
from ..model import names as model_names
from ..errors import DescriptionError, DescriptionErrors
from .expressions import CONSTANTS, FUNCTIONS, MAX_QUANTITY, ExpressionError, parse_expression, parse_number_literal
from .model import ClosedChain, FloatingBase, Frame, Inertial, Joint, Limits, LoopClosure, Parameter, RobotDescription, Rotor
from .yaml_source import Located, check_size, load_yaml

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUMBER_TEXT = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_ROBOT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float
for goto if inline int long register restrict return short signed sizeof static struct switch typedef
union unsigned void volatile while _Bool _Complex _Imaginary""".split())
_RESERVED_NAMES = frozenset(FUNCTIONS) | frozenset(CONSTANTS) | _C_KEYWORDS

TOP_KEYS = {"name", "description", "parameters", "gravity", "base", "joints", "tool", "loops", "actuated"}
JOINT_KEYS = {"name", "type", "parent", "dh", "mdh", "origin", "axis", "link", "friction", "motor", "limits"}
TOOL_KEYS = {"link", "xyz", "rpy"}
DH_KEYS = {"a", "alpha", "d", "theta"}
DH_ANGLES = {"alpha", "theta"}
ORIGIN_KEYS = {"xyz", "rpy"}
FLOATING_BASE_KEYS = {"floating", "link"}
LINK_KEYS = {"name", "mass", "com", "inertia"}
INERTIA_KEYS = {"xx", "yy", "zz", "xy", "xz", "yz"}
FRICTION_KEYS = {"viscous", "coulomb"}
MOTOR_KEYS = {"inertia", "gear_ratio", "mass", "com", "axis", "transverse_inertia"}
LIMIT_KEYS = {"lower", "upper", "velocity", "effort"}
JOINT_TYPES = ("revolute", "prismatic")
LOOP_KEYS = {"name", "type", "links", "points", "axis"}

TOLERANCE = 1e-12


class _Node:
    """A position in the YAML tree: its value, line and dotted field path."""

    def __init__(self, located: Located, field: str, ctx: "_Context"):
        self.located = located
        self.value = located.value
        self.line = located.line
        self.field = field
        self.ctx = ctx

    def error(self, message: str) -> DescriptionError:
        return DescriptionError(self.ctx.path, self.line, self.field, message)

    def child_field(self, key) -> str:
        if isinstance(key, int):
            return f"{self.field}[{key}]"
        return f"{self.field}.{key}" if self.field else str(key)

    def mapping(self, allowed: set[str], required: tuple[str, ...] = ()) -> "_Node":
        """This node, checked to be a mapping; every unknown key and missing field is reported at once."""
        if not isinstance(self.value, dict):
            raise self.error(f"expected a mapping with keys {sorted(allowed)}, got {_describe(self.value)}")
        errors = []
        for key in self.value:
            if key not in allowed:
                child = self.located.children[key]
                hint = _closest(key, allowed)
                errors.append(DescriptionError(self.ctx.path, child.line, self.child_field(key),
                                               f"unknown key{hint}; allowed keys: {', '.join(sorted(allowed))}"))
        errors += [self.error(f"missing required field '{key}'") for key in required if key not in self.value]
        if errors:
            raise DescriptionError.combine(errors)
        return self

    def has(self, key: str) -> bool:
        return isinstance(self.value, dict) and key in self.value

    def get(self, key) -> "_Node":
        return _Node(self.located.children[key], self.child_field(key), self.ctx)

    def items(self):
        for key in self.value:
            yield key, self.get(key)

    def sequence(self, length: int | None = None) -> list["_Node"]:
        if not isinstance(self.value, list):
            raise self.error(f"expected a list, got {_describe(self.value)}")
        if length is not None and len(self.value) != length:
            raise self.error(f"expected a list of {length} values, got {len(self.value)}")
        return [self.get(i) for i in range(len(self.value))]

    def string(self) -> str:
        if not isinstance(self.value, str):
            raise self.error(f"expected a string, got {_describe(self.value)}")
        return self.value

    def expression(self, bounded: bool = True) -> sp.Expr:
        """The field's number or expression; ``bounded``: a quantity of the model, whose value at the parameters'
        defaults must be a finite real number of magnitude at most MAX_QUANTITY (a joint limit is not one)."""
        value = self.value
        if isinstance(value, bool) or value is None:
            raise self.error(f"expected a number or an expression, got {_describe(value)}")
        if isinstance(value, (int, float)):
            expr = self.literal()
        elif isinstance(value, str):
            try:
                expr = parse_expression(value, self.ctx.symbols)
            except ExpressionError as exc:
                shown = value if len(value) <= 60 else value[:40] + "..." + value[-10:]
                raise self.error(f"invalid expression {shown!r}: {exc}") from None
        else:
            raise self.error(f"expected a number or an expression, got {_describe(value)}")
        if bounded:
            magnitude = abs(float(expr)) if expr.is_Number else abs(self.numeric(expr))
            if magnitude > MAX_QUANTITY:
                raise self.error(f"{magnitude:.3g} (at the parameters' defaults) is beyond {MAX_QUANTITY:g}: no robot "
                                 "needs it in any units, and the model's products of such values overflow double "
                                 "precision")
        return expr

    def literal(self) -> sp.Rational:
        """The exact value of a YAML integer or float, within the range of ``parse_number_literal``."""
        value = self.value
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error("value must be finite")
        try:
            return parse_number_literal(repr(value))
        except ExpressionError as exc:
            raise self.error(str(exc)) from None

    def constant(self, bounded: bool = True) -> sp.Expr:
        """An expression that must not depend on parameters."""
        expr = self.expression(bounded)
        if expr.free_symbols:
            names = ", ".join(sorted(s.name for s in expr.free_symbols))
            raise self.error(f"must be a constant, but depends on parameter(s) {names}")
        return expr

    def vector3(self) -> sp.ImmutableMatrix:
        return sp.ImmutableMatrix([node.expression() for node in self.sequence(3)])

    def angle(self) -> sp.Expr:
        """An angle (rad): with ``exact_angles`` (set on the parse context) a constant within 1e-9 of a
        multiple of pi/2 is taken as that multiple (``geometry.nearest_quarter_turn``)."""
        value = self.expression()
        return geometry.snap_quarter_turn(value) if self.ctx.exact_angles else value

    def angles3(self) -> sp.ImmutableMatrix:
        """Three angles: roll, pitch, yaw."""
        return sp.ImmutableMatrix([node.angle() for node in self.sequence(3)])

    def numeric(self, expr: sp.Expr) -> float:
        """Value of ``expr`` at the parameter defaults (for physical checks)."""
        try:
            value = complex(sp.N(expr.xreplace(self.ctx.defaults), 30))
        except (TypeError, ValueError, OverflowError):  # zoo, nan, a value beyond a double
            value = complex(math.nan)
        if abs(value.imag) > 1e-12 * max(1.0, abs(value.real)) or not math.isfinite(value.real):
            raise self.error(f"does not evaluate to a finite real number at the parameter defaults (got {value})")
        return value.real


class _Context:
    def __init__(self, path: str, accept_invalid_inertia: bool = False, exact_angles: bool = False):
        self.path = path
        self.accept_invalid_inertia = accept_invalid_inertia
        self.exact_angles = exact_angles
        self.symbols: dict[str, sp.Symbol] = {}
        self.defaults: dict[sp.Symbol, float] = {}


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _closest(key: Any, allowed: set[str]) -> str:
    import difflib

    match = difflib.get_close_matches(str(key), sorted(allowed), n=1)
    return f" (did you mean '{match[0]}'?)" if match else ""


# Joint, link and loop names are not symbols of the model, but a joint q2 would read as another joint's angle.
_ARGUMENT_LIKE = re.compile(rf"^(?:{'|'.join(sorted(model_names.ARGUMENT_STEMS, key=len, reverse=True))})b?\d*$")


def _check_identifier(node: _Node, what: str, symbol: bool = False) -> str:
    """``symbol``: the name becomes a SymPy symbol of the model (a parameter), so it must not be one of the
    generator's own (codegen.model.names)."""
    name = node.string()
    if not _IDENTIFIER.match(name):
        raise node.error(f"{what} {name!r} is not an identifier (letters, digits, underscore; not starting with a digit)")
    if keyword.iskeyword(name) or name in _RESERVED_NAMES or _ARGUMENT_LIKE.match(name):
        raise node.error(f"{what} {name!r} is a reserved name")
    if symbol and model_names.is_reserved(name):
        other = re.sub(r"(\d+)$", r"_\1", name) if name[-1].isdigit() else name + "_"
        raise node.error(f"{what} {name!r} is a reserved name: the generator names its own symbols so "
                         f"(q1, qd1, w12, k3, x1, h_fx, ...); choose another, e.g. {other!r}")
    return name


def _parse_parameters(root: _Node, ctx: _Context, problems: DescriptionErrors) -> tuple[Parameter, ...]:
    """Each parameter is checked on its own; one with a bad default or a reserved name still gets its symbol
    (default 1), so that the expressions using it are not reported as well."""
    if not root.has("parameters"):
        return ()
    node = root.get("parameters")
    if node.value is None:
        return ()
    if not isinstance(node.value, dict):
        raise node.error(f"expected a mapping of parameter names to default values, got {_describe(node.value)}")
    parameters = []
    for key, child in node.items():
        with problems.section():
            key_node = _Node(Located(key, child.line), child.field, ctx)
            try:
                name = _check_identifier(key_node, "parameter name", symbol=True)
            except DescriptionError:
                if isinstance(key, str) and _IDENTIFIER.match(key):  # known to the expressions, never built
                    ctx.defaults[ctx.symbols.setdefault(key, sp.Symbol(key, real=True))] = 1.0
                raise
            symbol = ctx.symbols[name] = sp.Symbol(name, real=True)
            ctx.defaults[symbol] = 1.0
            value = child.value
            if isinstance(value, str) and _NUMBER_TEXT.match(value.strip()):
                # YAML 1.1 reads 1e5 (no dot) as a string; a number everywhere else in a description.
                try:
                    value = float(parse_number_literal(value.strip()))
                except ExpressionError as exc:
                    raise child.error(str(exc)) from None
                child = _Node(Located(value, child.line, child.located.children), child.field, ctx)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise child.error(f"a parameter default must be a number, got {_describe(value)}")
            if isinstance(value, float) and not math.isfinite(value):
                raise child.error("a parameter default must be finite")
            default = float(child.literal())
            parameters.append(Parameter(name, default, symbol))
            ctx.defaults[symbol] = default
    return tuple(parameters)


def _parse_origin(node: _Node) -> sp.Matrix:
    node.mapping(ORIGIN_KEYS)
    xyz = node.get("xyz").vector3() if node.has("xyz") else sp.zeros(3, 1)
    angles = node.get("rpy").angles3() if node.has("rpy") else sp.zeros(3, 1)
    return geometry.homogeneous(geometry.rpy(*angles), xyz)


def _parse_axis(node: _Node) -> sp.ImmutableMatrix:
    components = [child.constant(bounded=False) for child in node.sequence(3)]  # a direction: any length
    norm_squared = sum(c**2 for c in components)
    length = math.sqrt(abs(node.numeric(norm_squared)))
    if length < 1e-6:
        raise node.error("axis must not be the zero vector" + (f" (its length is {length:.3g})" if length else ""))
    return sp.ImmutableMatrix(geometry.unit_vector(components, norm_squared))


def _parse_inertial(node: _Node) -> tuple[str | None, Inertial]:
    node.mapping(LINK_KEYS, required=("mass",))
    name = _check_identifier(node.get("name"), "link name") if node.has("name") else None
    mass_node = node.get("mass")
    mass = mass_node.expression()
    if mass_node.numeric(mass) < 0:
        raise mass_node.error(f"mass must not be negative (got {mass_node.numeric(mass):g} at the parameter defaults)")
    com = node.get("com").vector3() if node.has("com") else sp.ImmutableMatrix([0, 0, 0])
    planar = False
    inertia = sp.zeros(3, 3)
    if node.has("inertia"):
        inertia_node = node.get("inertia").mapping(INERTIA_KEYS)
        given = set(inertia_node.value)
        if not given:
            raise inertia_node.error("give at least one component (xx, yy, zz, xy, xz, yz)")
        planar = given == {"zz"}
        index = {"xx": (0, 0), "yy": (1, 1), "zz": (2, 2), "xy": (0, 1), "xz": (0, 2), "yz": (1, 2)}
        for key, child in inertia_node.items():
            i, j = index[key]
            inertia[i, j] = inertia[j, i] = child.expression()
        _check_inertia(inertia_node, inertia, planar)
    return name, Inertial(mass, com, sp.ImmutableMatrix(inertia), planar)


def _check_inertia(node: _Node, inertia: sp.Matrix, planar: bool, mass: float | None = None) -> None:
    """The tensor (at the parameter defaults) must be physically possible within the tolerance of
    ``physical.check_mass_properties``; with ``accept_invalid_inertia`` (set on the parse context)
    an impossible one is accepted with a DescriptionWarning."""
    import warnings

    from ..errors import DescriptionWarning
    from .physical import check_mass_properties, describe_violations

    values = np.array([[node.numeric(inertia[i, j]) for j in range(3)] for i in range(3)])
    violations = check_mass_properties(mass, values, planar)
    if not violations:
        return
    message = describe_violations(violations)
    if not getattr(node.ctx, "accept_invalid_inertia", False):
        raise node.error(message + " (--accept-invalid-inertia accepts it with a warning)")
    warnings.warn(DescriptionWarning(node.ctx.path, node.line, node.field,
                                     message + "; accepted (accept_invalid_inertia)"), stacklevel=2)


def _parse_rotor(node: _Node, joint_axis: sp.ImmutableMatrix) -> Rotor:
    node.mapping(MOTOR_KEYS, required=("inertia",))
    fields = {}
    for key in ("inertia", "mass", "transverse_inertia"):
        if node.has(key):
            child = node.get(key)
            fields[key] = child.expression()
            if child.numeric(fields[key]) < 0:
                raise child.error(f"{key} must not be negative")
        else:
            fields[key] = sp.Integer(0)
    if node.has("gear_ratio"):
        child = node.get("gear_ratio")
        gear_ratio = child.expression()
        if child.numeric(gear_ratio) == 0:
            raise child.error("gear_ratio must not be zero")
    else:
        gear_ratio = sp.Integer(1)
    com = node.get("com").vector3() if node.has("com") else sp.ImmutableMatrix([0, 0, 0])
    axis = _parse_axis(node.get("axis")) if node.has("axis") else joint_axis
    return Rotor(fields["inertia"], gear_ratio, fields["mass"], com, axis, fields["transverse_inertia"])


def _optional_float(node: _Node, key: str) -> float | None:
    if not node.has(key):
        return None
    child = node.get(key)
    return child.numeric(child.expression(bounded=False))


def _parse_joint(node: _Node, index: int, names: dict[str, int], link_names: dict[str, int],
                 problems: DescriptionErrors) -> Joint | None:
    """The joint, or None after recording its problems (each part of it is checked on its own)."""
    before = len(problems.errors)
    with problems.section():
        node.mapping(JOINT_KEYS, required=("name", "type", "link"))
    if not isinstance(node.value, dict):
        return None
    name = kind = None
    with problems.section():
        if node.has("name"):
            name_node = node.get("name")
            name = _check_identifier(name_node, "joint name")
            if name in names:
                raise name_node.error(f"duplicate joint name {name!r} (first used by joints[{names[name]}])")
    parent = index - 1
    with problems.section():
        if node.has("parent"):
            # Kinematic trees: the parent is an earlier joint (its link) or a link name, or "base".
            parent_node = node.get("parent")
            parent_name = parent_node.string()
            if parent_name == "base":
                parent = -1
            elif parent_name in names:
                parent = names[parent_name]
            elif parent_name in link_names:
                parent = link_names[parent_name]
            else:
                raise parent_node.error(f"unknown parent {parent_name!r}: name an earlier joint or link, or 'base' "
                                        "(parents must come before their children)")
    if name is not None:
        names[name] = index
    with problems.section():
        if node.has("type"):
            type_node = node.get("type")
            kind = type_node.string()
            if kind not in JOINT_TYPES:
                hint = " (fixed, continuous, floating and planar joints are not supported in descriptions)" \
                    if kind in ("fixed", "continuous", "floating", "planar") else ""
                raise type_node.error(f"unknown joint type {kind!r}; expected one of {', '.join(JOINT_TYPES)}{hint}")

    placement = successor = sp.eye(4)
    axis = sp.ImmutableMatrix([0, 0, 1])
    with problems.section():
        forms = [key for key in ("dh", "mdh", "origin") if node.has(key)]
        if len(forms) > 1:
            raise node.error(f"give only one of dh, mdh or origin/axis (got {', '.join(forms)})")
        if forms and forms[0] in ("dh", "mdh"):
            if node.has("axis"):
                raise node.get("axis").error(f"'axis' cannot be combined with '{forms[0]}': DH joints move along/about z")
            dh_node = node.get(forms[0]).mapping(DH_KEYS)
            values = {key: (dh_node.get(key).angle() if key in DH_ANGLES else dh_node.get(key).expression())
                      if dh_node.has(key) else sp.Integer(0) for key in DH_KEYS}
            build = geometry.dh_standard if forms[0] == "dh" else geometry.dh_modified
            placement, successor = build(values["a"], values["alpha"], values["d"], values["theta"])
        else:
            if not node.has("axis"):
                raise node.error("missing required field 'axis' (or give 'dh' or 'mdh' parameters)")
            with problems.section():
                placement = _parse_origin(node.get("origin")) if node.has("origin") else sp.eye(4)
            axis = _parse_axis(node.get("axis"))

    link_name = inertial = None
    with problems.section():
        if node.has("link"):
            link_node = node.get("link")
            link_name, inertial = _parse_inertial(link_node)
            link_name = link_name or f"{name}_link"
            if link_name in link_names:
                raise link_node.error(f"duplicate link name {link_name!r}")
            link_names[link_name] = index

    viscous = coulomb = sp.Integer(0)
    with problems.section():
        if node.has("friction"):
            friction = node.get("friction").mapping(FRICTION_KEYS)
            for key in sorted(FRICTION_KEYS, reverse=True):
                if friction.has(key):
                    with problems.section():
                        child = friction.get(key)
                        value = child.expression()
                        if child.numeric(value) < 0:
                            raise child.error(f"{key} friction must not be negative")
                        if key == "viscous":
                            viscous = value
                        else:
                            coulomb = value
    rotor = None
    with problems.section():
        rotor = _parse_rotor(node.get("motor"), axis) if node.has("motor") else None

    limits = Limits(None, None, None, None)
    with problems.section():
        if node.has("limits"):
            limits_node = node.get("limits").mapping(LIMIT_KEYS)
            limits = Limits(*(_optional_float(limits_node, key) for key in ("lower", "upper", "velocity", "effort")))
            if limits.lower is not None and limits.upper is not None and limits.lower > limits.upper:
                raise limits_node.error("lower limit is above upper limit")

    if len(problems.errors) > before:
        return None
    return Joint(name=name, kind=kind, parent=parent, placement=sp.ImmutableMatrix(placement), axis=axis,
                 successor=sp.ImmutableMatrix(successor), link_name=link_name, inertial=inertial,
                 viscous=viscous, coulomb=coulomb, rotor=rotor, limits=limits, line=node.line)


def parse_text(text: str, path: str = "<string>", data: bytes | None = None,
               tool_override: str | None = None, accept_invalid_inertia: bool = False,
               exact_angles: bool = False) -> RobotDescription:
    """Parse description text; ``path`` is used in messages and for the default name. ``exact_angles``:
    every constant angle (origin, base and tool rpy; DH alpha and theta) within 1e-9 rad of a multiple of
    pi/2 is taken as that multiple.

    Independent parts (each top-level key, each parameter, each joint and its parts) are checked on
    their own, so one DescriptionError lists every problem found (up to DescriptionError.MAX_PROBLEMS)."""
    ctx = _Context(path, accept_invalid_inertia, exact_angles)
    root = _Node(load_yaml(text, path), "", ctx)
    problems = DescriptionErrors()
    with problems.section():
        root.mapping(TOP_KEYS, required=("joints",))
    if not isinstance(root.value, dict):
        problems.raise_if_any()

    name = ""
    with problems.section():
        if root.has("name"):
            name_node = root.get("name")
            name = name_node.string()
            if not _ROBOT_NAME.match(name):
                raise name_node.error(f"robot name {name!r} must be lower case letters, digits and '_', "
                                      "starting with a letter, at most 40 characters (it prefixes C symbols)")
            if model_names.clashes_with_runtime(name):
                raise name_node.error(f"robot name {name!r} is reserved: it prefixes C symbols, and "
                                      f"{' and '.join(p + '_' for p in model_names.RUNTIME_C_PREFIXES)} are the runtime's")
        else:
            name = re.sub(r"[^a-z0-9_]", "_", Path(path).stem.lower())
            if not _ROBOT_NAME.match(name) or model_names.clashes_with_runtime(name):
                raise root.error(f"cannot derive a robot name from the file name ({name!r} "
                                 + ("is reserved" if _ROBOT_NAME.match(name) else "is not one") + "); add a 'name' field")
    summary = ""
    with problems.section():
        summary = root.get("description").string() if root.has("description") else ""

    parameters: tuple[Parameter, ...] = ()
    with problems.section():
        parameters = _parse_parameters(root, ctx, problems)
    gravity = sp.ImmutableMatrix([0, 0, sp.Rational(-981, 100)])
    with problems.section():
        if root.has("gravity"):
            gravity = root.get("gravity").vector3()
    base, floating_base = sp.eye(4), None
    with problems.section():
        if root.has("base"):
            base_node = root.get("base")
            if base_node.has("floating"):
                floating_base = _parse_floating_base(base_node)
            else:
                base = _parse_origin(base_node)
    tool, tool_node = sp.eye(4), None
    with problems.section():
        if root.has("tool"):
            tool_node = root.get("tool").mapping(TOOL_KEYS)
            xyz = tool_node.get("xyz").vector3() if tool_node.has("xyz") else sp.zeros(3, 1)
            angles = tool_node.get("rpy").angles3() if tool_node.has("rpy") else sp.zeros(3, 1)
            tool = geometry.homogeneous(geometry.rpy(*angles), xyz)

    items: list[_Node] = []
    with problems.section():
        if root.has("joints"):
            joints_node = root.get("joints")
            items = joints_node.sequence()
            if not items:
                raise joints_node.error("a robot needs at least one joint")
    names: dict[str, int] = {}
    link_names: dict[str, int] = {}
    joints = tuple(_parse_joint(item, i, names, link_names, problems) for i, item in enumerate(items))
    tool_link = -1
    with problems.section():
        if tool_node is not None and tool_node.has("link"):
            link_node = tool_node.get("link")
            link = link_node.string()
            tool_link = link_names.get(link, names.get(link, -2))
            if tool_link == -2:
                raise link_node.error(f"unknown link {link!r} (give a link or joint name)")
    closure, actuated = None, None
    with problems.section():
        closure = _parse_closure(root, names, link_names, problems)
    with problems.section():
        actuated = _parse_open_chain_actuation(root, names)
    with problems.section():
        if floating_base is not None and closure is not None:
            raise root.get("loops").error("closed chains on a floating base are not supported: fix the base "
                                          "(remove 'floating' from 'base') or open the loops")
    problems.raise_if_any()
    _check_planar_inertias(items, joints, base, floating_base is not None)
    if closure is None:  # a closed chain's tree may carry massless links: its loops hold them
        _check_massless_subtrees(items, joints, ctx)
    loop_points = [point for loop in closure.loops for point in loop.points] if closure else []
    base_body = ([floating_base.inertial.com, floating_base.inertial.inertia, sp.Matrix([floating_base.inertial.mass])]
                 if floating_base is not None else [])
    _check_unused_parameters(root, parameters, joints, gravity, base, tool, *loop_points, *base_body)
    if tool_override is not None:  # the build option replaces the description's tool frame
        tool, tool_link = sp.eye(4), link_names.get(tool_override, names.get(tool_override, -2))
        if tool_link == -2:
            raise DescriptionError(path, None, "tool", f"unknown link {tool_override!r} (give a link or joint name; "
                                   f"links: {', '.join(link_names)})")

    digest = hashlib.sha256(data if data is not None else text.encode()).hexdigest()
    return RobotDescription(name=name, path=path, source_sha256=digest, summary=summary,
                            parameters=parameters, gravity=gravity, base=sp.ImmutableMatrix(base),
                            joints=joints, tool=sp.ImmutableMatrix(tool), tool_link=tool_link, closure=closure,
                            actuated=actuated, floating_base=floating_base, frames=_yaml_frames(joints, floating_base))


def _yaml_frames(joints: tuple[Joint, ...], floating_base: FloatingBase | None) -> tuple[Frame, ...]:
    """The base and each joint's link, at the link frame's origin."""
    identity = sp.ImmutableMatrix(sp.eye(4))
    frames = [Frame(floating_base.link_name if floating_base is not None else "base", -1, identity)]
    names = {frames[0].name}
    for i, joint in enumerate(joints):
        if joint.link_name not in names:
            names.add(joint.link_name)
            frames.append(Frame(joint.link_name, i, identity))
    return tuple(frames)


def _parse_floating_base(node: _Node) -> FloatingBase | None:
    """``base: {floating: true, link: {name, mass, com, inertia}}``: a root body that moves freely (``floating:
    false`` is a base fixed at the origin). Its pose is then part of q, not of the description."""
    node.mapping(FLOATING_BASE_KEYS, required=("floating",))
    flag = node.get("floating")
    if not isinstance(flag.value, bool):
        raise flag.error(f"expected true or false, got {_describe(flag.value)}")
    if not flag.value:
        if node.has("link"):
            raise node.get("link").error("a fixed base has no body of its own (its links do not move); remove "
                                         "'link' or set floating: true")
        return None
    if not node.has("link"):
        raise node.error("a floating base needs its body: link: {mass: ..., com: [...], inertia: {...}}")
    link_node = node.get("link")
    name, inertial = _parse_inertial(link_node)
    mass = link_node.get("mass")
    if mass.numeric(inertial.mass) <= 0:
        raise mass.error("a floating base's mass must be positive (nothing else holds the robot up)")
    if inertial.planar:
        raise link_node.get("inertia").error("a floating base turns about every axis: give its full inertia "
                                             "(xx, yy, zz at least), not only zz")
    return FloatingBase(name or "base", inertial, node.line)


def _link_index(node: _Node, names: dict[str, int], link_names: dict[str, int], what: str) -> int:
    """A link named by its own name or its joint's, or 'base' (-1)."""
    name = node.string()
    if name == "base":
        return -1
    if name in link_names:
        return link_names[name]
    if name in names:
        return names[name]
    raise node.error(f"unknown {what} {name!r}; give a link or joint name, or 'base' (links: {', '.join(link_names)})")


def _parse_actuated(root: _Node, names: dict[str, int]) -> tuple[int, ...]:
    """'actuated': the motorised joints, as indices in the joint list, in the order given."""
    actuated_node = root.get("actuated")
    actuated: list[int] = []
    for node in actuated_node.sequence():
        name = node.string()
        if name not in names:
            raise node.error(f"unknown joint {name!r}; joints: {', '.join(names)}")
        if names[name] in actuated:
            raise node.error(f"joint {name!r} is listed twice")
        actuated.append(names[name])
    if not actuated:
        raise actuated_node.error("give at least one actuated joint")
    return tuple(actuated)


def _parse_open_chain_actuation(root: _Node, names: dict[str, int]) -> tuple[int, ...] | None:
    """A serial or tree robot's 'actuated' list, in joint order; None when absent (every joint has a motor).
    The joints left out are passive: they stay coordinates of the model, with zero torque."""
    if root.has("loops") or not root.has("actuated"):
        return None
    actuated = tuple(sorted(_parse_actuated(root, names)))
    return None if len(actuated) == len(names) else actuated


def _parse_closure(root: _Node, names: dict[str, int], link_names: dict[str, int],
                   problems: DescriptionErrors) -> ClosedChain | None:
    """'loops' (the cut joints) and 'actuated' (the motors) of a closed-chain mechanism, or None."""
    if not root.has("loops"):
        return None
    loops_node = root.get("loops")
    items = loops_node.sequence()
    if not items:
        raise loops_node.error("give at least one loop closure, or remove 'loops'")
    loops = []
    loop_names: set[str] = set()
    for index, item in enumerate(items):
        with problems.section():
            item.mapping(LOOP_KEYS, required=("name", "type", "links"))
            name_node = item.get("name")
            name = _check_identifier(name_node, "loop name")
            if name in names or name in link_names or name in loop_names or name == "base":
                raise name_node.error(f"loop name {name!r} is already used by a joint, a link or another loop "
                                      "('base' names the ground)")
            loop_names.add(name)
            type_node = item.get("type")
            kind = type_node.string()
            if kind not in JOINT_TYPES:
                raise type_node.error(f"unknown cut-joint type {kind!r}; expected one of {', '.join(JOINT_TYPES)}")
            links_node = item.get("links")
            link_nodes = links_node.sequence(2)
            links = tuple(_link_index(node, names, link_names, "link") for node in link_nodes)
            if links[0] == links[1]:
                raise links_node.error("a loop closure connects two different links")
            points = (sp.ImmutableMatrix([0, 0, 0]),) * 2
            if item.has("points"):
                points = tuple(node.vector3() for node in item.get("points").sequence(2))
            axis = _parse_axis(item.get("axis")) if item.has("axis") else sp.ImmutableMatrix([0, 0, 1])
            loops.append(LoopClosure(name, kind, links, points, axis, item.line))
    if not root.has("actuated"):
        raise loops_node.error("a closed chain needs 'actuated': the list of its motorised joints")
    actuated = _parse_actuated(root, names)
    return ClosedChain(tuple(loops), actuated, loops_node.line, root.get("actuated").line)


def _check_massless_subtrees(items: list[_Node], joints: tuple[Joint, ...], ctx: _Context) -> None:
    """A joint that moves nothing massive (no mass, and for a revolute joint no inertia, anywhere beyond it, and no
    motor rotor) makes M singular: refused at its link, with the parameters at their defaults, as a URDF's is.
    Values that do not evaluate to numbers are taken as massive (the other checks report them)."""
    def at_defaults(expr) -> float | None:
        try:
            value = complex(sp.N(expr.xreplace(ctx.defaults), 20))  # SymPy expressions of the description
        except (TypeError, ValueError, AttributeError):
            return None
        return abs(value) if value.imag == 0 else None

    mass = [at_defaults(joint.inertial.mass) for joint in joints]
    turning = [any(at_defaults(entry) != 0.0 for entry in joint.inertial.inertia) for joint in joints]
    rotor = [joint.rotor is not None for joint in joints]
    for index in reversed(range(len(joints))):  # children come after their parents: sum the subtrees upwards
        parent = joints[index].parent
        if parent >= 0:
            mass[parent] = None if mass[parent] is None or mass[index] is None else mass[parent] + mass[index]
            turning[parent] = turning[parent] or turning[index]
            rotor[parent] = rotor[parent] or rotor[index]
    for index, joint in enumerate(joints):
        if mass[index] == 0.0 and (joint.kind == "prismatic" or not turning[index]) and not rotor[index]:
            link = items[index].get("link") if items[index].has("link") else items[index]
            raise link.error(f"joint {joint.name!r} moves nothing massive (its link and every link beyond have no "
                             f"mass{'' if joint.kind == 'prismatic' else ' and no inertia'} at the parameters' "
                             "defaults): M would be singular; give the link a mass, or remove the joint (fold its "
                             "link's frame into the next joint's placement)")


def _check_planar_inertias(items: list[_Node], joints: tuple[Joint, ...], base: sp.Matrix,
                           floating: bool = False) -> None:
    """Giving only Izz is allowed for links whose z axis keeps a fixed direction (never on a floating base).

    The direction is compared numerically (30 digits) at a few pseudo-random joint positions and
    parameter values, a generic-point test of "constant in q for every parameter value" that, unlike
    ``simplify`` of the symbolic derivative, cannot take unbounded time on strange constants."""
    if not any(joint.inertial.planar for joint in joints):
        return
    if floating:
        i = next(i for i, joint in enumerate(joints) if joint.inertial.planar)
        raise items[i].get("link").get("inertia").error(
            "only zz was given, which is enough only for a link turning about a fixed axis; on a floating base "
            "every link turns about every axis, so give the full tensor (xx, yy, zz and products)")
    rng = random.Random(0)
    matrices = [base] + [m for joint in joints for m in (joint.placement, joint.successor)]
    parameters = sorted(set().union(*(sp.Matrix(m).free_symbols for m in matrices)), key=str)
    directions = []
    for _ in range(3):
        values = {symbol: sp.Float(rng.uniform(0.5, 2.0), 30) for symbol in parameters}

        def numeric(matrix) -> sp.Matrix:
            return sp.Matrix(matrix)[:3, :3].xreplace(values).evalf(30)

        rotations: list[sp.Matrix] = []
        for joint in joints:
            parent = numeric(base) if joint.parent < 0 else rotations[joint.parent]
            angle = sp.Float(rng.uniform(-3.0, 3.0), 30)
            motion = geometry.screw(joint.kind, sp.Matrix(joint.axis), angle)[:3, :3].evalf(30)
            rotations.append((parent * numeric(joint.placement) * motion * numeric(joint.successor)).evalf(30))
        directions.append([rotation[:, 2] for rotation in rotations])
    for i, joint in enumerate(joints):
        # A link whose z axis keeps its direction rotates about that axis only, so only Izz matters.
        turns = max(abs(float(a - b)) for other in directions[1:] for a, b in zip(directions[0][i], other[i]))
        if joint.inertial.planar and turns > 1e-12:
            inertia = items[i].get("link").get("inertia")
            raise inertia.error("only zz was given, which is enough only for a link whose z axis keeps its "
                                "direction; this link's z axis turns, so give the full tensor "
                                "(xx, yy, zz and products)")


def _check_unused_parameters(root: _Node, parameters, joints, *matrices) -> None:
    used: set[sp.Symbol] = set()
    for matrix in matrices:
        used |= matrix.free_symbols
    for joint in joints:
        for item in (joint.placement, joint.successor, joint.inertial.mass, joint.inertial.com,
                     joint.inertial.inertia, joint.viscous, joint.coulomb):
            used |= item.free_symbols
        if joint.rotor is not None:
            for item in (joint.rotor.inertia, joint.rotor.gear_ratio, joint.rotor.mass, joint.rotor.com,
                         joint.rotor.transverse_inertia):
                used |= item.free_symbols
    params_node = root.get("parameters") if root.has("parameters") else None
    unused = [DescriptionError(root.ctx.path, params_node.located.children[parameter.name].line,
                               f"parameters.{parameter.name}", "parameter is declared but never used")
              for parameter in parameters if parameter.symbol not in used]
    if unused:
        raise DescriptionError.combine(unused[:DescriptionError.MAX_PROBLEMS], truncated=len(unused) > DescriptionError.MAX_PROBLEMS)


def parse_file(path: str | Path) -> RobotDescription:
    path = Path(path)
    try:
        check_size(path.stat().st_size, str(path))
        data = path.read_bytes()
    except OSError as exc:
        raise DescriptionError(str(path), None, "", f"cannot read the description: {exc.strerror}") from None
    return parse_text(decode_description(data, str(path)), str(path), data)


def decode_description(data: bytes, path: str) -> str:
    check_size(len(data), path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DescriptionError(path, line, "", f"the description is not UTF-8 text "
                               f"({exc.reason} at column {column})") from None
