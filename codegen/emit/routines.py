"""Stage 3: turn a SymbolicModel into C99 sources (text only, no files).

Each routine is a list of output assignments; common subexpressions are
eliminated across all outputs of a routine. Forward dynamics solves
M q'' = tau - (C q' + g + friction) + J^T h with a sparse L^T D L factorisation
unrolled for the robot's kinematic tree.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field

import sympy as sp

from .. import __version__
from ..model.lagrange import SymbolicModel
from ..model.program import needed_definitions
from .printer import RobotCPrinter, count_operations, fold_constants


@dataclass(frozen=True)
class Argument:
    name: str
    size: str  # human-readable size for the header comment
    doc: str


@dataclass(frozen=True)
class RoutineSpec:
    name: str  # without the robot prefix
    arguments: tuple[Argument, ...]  # inputs, in order, before p and out
    output: Argument
    returns_status: bool = False


@dataclass(frozen=True)
class GeneratedSources:
    """Everything the build stage needs; file name -> text, plus metadata."""

    robot: str
    files: dict
    metadata: dict
    operation_counts: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)


def _args(*names_sizes_docs) -> tuple[Argument, ...]:
    return tuple(Argument(*item) for item in names_sizes_docs)


def routine_specs(n: int) -> list[RoutineSpec]:
    q = ("q", f"{n}", "joint positions [rad or m]")
    qd = ("qd", f"{n}", "joint velocities")
    qdd = ("qdd", f"{n}", "joint accelerations")
    tau = ("tau", f"{n}", "joint torques/forces")
    h = ("h", "6 or NULL", "wrench on the tool origin from the environment: force, moment (base frame)")
    return [
        RoutineSpec("mass_matrix", _args(q), Argument("out", f"{n}x{n}", "M(q), row-major")),
        RoutineSpec("coriolis_matrix", _args(q, qd), Argument("out", f"{n}x{n}", "C(q, qd) from Christoffel symbols, row-major")),
        RoutineSpec("gravity", _args(q), Argument("out", f"{n}", "g(q) = dP/dq")),
        RoutineSpec("friction", _args(qd), Argument("out", f"{n}", "Fv qd + Fs sgn(qd)")),
        RoutineSpec("nonlinear_effects", _args(q, qd), Argument("out", f"{n}", "C(q, qd) qd + g(q) + friction(qd)")),
        RoutineSpec("inverse_dynamics", _args(q, qd, qdd, h), Argument("out", f"{n}", "tau = M qdd + C qd + g + friction - J^T h")),
        RoutineSpec("forward_dynamics", _args(q, qd, tau, h), Argument("out", f"{n}", "qdd solving M qdd = tau + J^T h - C qd - g - friction (sparse L^T D L)"), True),
        RoutineSpec("kinetic_energy", _args(q, qd), Argument("out", "1", "0.5 qd^T M qd")),
        RoutineSpec("potential_energy", _args(q), Argument("out", "1", "gravitational potential energy, zero at the base origin")),
        RoutineSpec("tool_pose", _args(q), Argument("out", "4x4", "homogeneous transform base -> tool, row-major")),
        RoutineSpec("tool_jacobian", _args(q), Argument("out", f"6x{n}", "geometric Jacobian of the tool: linear, then angular (base frame), row-major")),
    ]


def _signature(prefix: str, spec: RoutineSpec) -> str:
    params = [f"const double *restrict {a.name}" if a.name != "h" else "const double *h" for a in spec.arguments]
    params += ["const double *restrict p", f"double *restrict {spec.output.name}"]
    result = "int" if spec.returns_status else "void"
    return f"{result} {prefix}_{spec.name}({', '.join(params)})"


class _Emitter:
    def __init__(self, model: SymbolicModel):
        self.model = model
        names: dict[sp.Symbol, str] = {}
        for group, cname in ((model.q, "q"), (model.qd, "qd"), (model.qdd, "qdd"), (model.tau, "tau"),
                             (model.wrench, "hw"), (model.parameters, "p")):
            for index, symbol in enumerate(group):
                names[symbol] = f"{cname}[{index}]"
        self.names = names
        self.operation_counts: dict[str, int] = {}
        self.cse_seconds = 0.0

    def block(self, assignments: list[tuple[str, sp.Expr]], tag: str, indent: str = "    ",
              declare: bool = False) -> list[str]:
        """CSE over all right-hand sides, then C statements ``target = value;``
        (``declare``: the targets are new const locals)."""
        targets = [t for t, _ in assignments]
        exprs = [fold_constants(e if isinstance(e, sp.Basic) else sp.Float(e)) for _, e in assignments]
        temporaries = sp.numbered_symbols(f"{tag}_")
        # Recursive route: the outputs refer to a program's intermediates, which are emitted
        # first, in order (the program already shares repeated subexpressions).
        started = time.perf_counter()
        prelude = needed_definitions(self.model.definitions, exprs) if self.model.definitions else []
        replacements, reduced = sp.cse(exprs, symbols=temporaries, optimizations="basic", order="canonical")
        replacements = [(symbol, fold_constants(value)) for symbol, value in prelude] + list(replacements)
        self.cse_seconds += time.perf_counter() - started
        names = dict(self.names)
        for symbol, _ in replacements:
            names[symbol] = symbol.name
        printer = RobotCPrinter(names)
        lines = []
        ops = 0
        for symbol, value in replacements:
            text = printer.expression(value)
            lines.append(f"{indent}const double {symbol.name} = {text};")
            ops += count_operations(text)
        for target, value in zip(targets, reduced):
            lhs = f"const double {target}" if declare else target
            text = printer.expression(value)
            lines.append(f"{indent}{lhs} = {text};")
            ops += count_operations(text)
        self.operation_counts[tag] = self.operation_counts.get(tag, 0) + int(ops)
        return lines


def _matrix_assignments(matrix: sp.Matrix, target: str) -> list[tuple[str, sp.Expr]]:
    rows, cols = matrix.shape
    return [(f"{target}[{i * cols + j}]", matrix[i, j]) for i in range(rows) for j in range(cols)]


def _wrench_term(model: SymbolicModel) -> sp.Matrix:
    return model.tool_jacobian.T * sp.Matrix(model.wrench)


def _ltdl_solve(parents: list[int], indent: str = "    ") -> list[str]:
    """Unrolled sparse factorisation M = Lᵀ D L and solve M x = rhs (Featherstone's LTDL).

    Factoring from the last joint to the first, with parents numbered before their
    children, creates no fill-in: only entries (i, j) with j an ancestor of i are ever
    touched, so a kinematic tree costs less than a dense LDLᵀ. The lower triangle of M
    is read from ``m_i_j`` (i >= j) and the right-hand side from ``rhs_i``.
    Returns -1 when a pivot is not positive (M not positive definite)."""
    n = len(parents)

    def ancestors(i: int) -> list[int]:
        chain = []
        i = parents[i]
        while i >= 0:
            chain.append(i)
            i = parents[i]
        return chain

    lines = [f"{indent}/* M = L^T D L, unrolled for this kinematic tree (no fill-in). */"]
    versions: dict[str, int] = {}

    def fresh(prefix: str, expression: str) -> str:
        """A new const local (C has no reassignment of const: each update gets a new name)."""
        versions[prefix] = versions.get(prefix, 0) + 1
        name = f"{prefix}_{versions[prefix]}"
        lines.append(f"{indent}const double {name} = {expression};")
        return name

    current = {(i, j): f"m_{i}_{j}" for i in range(n) for j in [i, *ancestors(i)]}
    for k in reversed(range(n)):
        lines.append(f"{indent}if (!({current[(k, k)]} > 0.0)) return -1;")
        for i in ancestors(k):
            ratio = fresh(f"a_{k}_{i}", f"{current[(k, i)]} / {current[(k, k)]}")
            for j in [i, *ancestors(i)]:
                current[(i, j)] = fresh(f"f_{i}_{j}", f"{current[(i, j)]} - {ratio} * {current[(k, j)]}")
            current[(k, i)] = ratio
    lines.append(f"{indent}/* Solve L^T y = rhs, then D z = y, then L x = z. */")
    value = {i: f"rhs_{i}" for i in range(n)}
    for i in reversed(range(n)):
        for j in ancestors(i):
            value[j] = fresh(f"x_{j}", f"{value[j]} - {current[(i, j)]} * {value[i]}")
    for i in range(n):
        value[i] = fresh(f"x_{i}", f"{value[i]} / {current[(i, i)]}")
    for i in range(n):
        terms = " - ".join(f"{current[(i, j)]} * out[{j}]" for j in ancestors(i))
        lines.append(f"{indent}out[{i}] = {value[i]}{' - ' + terms if terms else ''};")
    lines.append(f"{indent}return 0;")
    return lines


def _routine_bodies(model: SymbolicModel, emitter: _Emitter, forward: str) -> dict[str, list[str]]:
    n = model.n
    bias = model.nonlinear_effects()
    bodies: dict[str, list[str]] = {}
    bodies["mass_matrix"] = emitter.block(_matrix_assignments(model.M, "out"), "mass_matrix")
    bodies["coriolis_matrix"] = emitter.block(_matrix_assignments(model.C, "out"), "coriolis_matrix")
    bodies["gravity"] = emitter.block(_matrix_assignments(model.g, "out"), "gravity")
    bodies["friction"] = emitter.block(_matrix_assignments(model.friction, "out"), "friction")
    bodies["nonlinear_effects"] = emitter.block(_matrix_assignments(bias, "out"), "nonlinear_effects")

    # The wrench term is always computed (h = NULL reads zeros): it shares the tool
    # kinematics with the rest, and one branch-free block is smaller than two.
    tau = model.inverse_dynamics(with_wrench=True)
    body = ["    const double *restrict hw = h ? h : zero_wrench;"]
    body += emitter.block(_matrix_assignments(tau, "out"), "inverse_dynamics")
    bodies["inverse_dynamics"] = body

    # M's lower triangle and the right-hand side τ + Jᵀh − bias share subexpressions: one CSE block.
    parents = [joint.parent for joint in model.description.joints]

    def related(i: int, j: int) -> bool:  # j is i or one of its ancestors
        while i > j:
            i = parents[i]
        return i == j

    lower = [(f"m_{i}_{j}", model.M[i, j]) for i in range(n) for j in range(i + 1) if related(i, j)]
    rhs_expr = sp.Matrix(model.tau) - bias + _wrench_term(model)
    rhs = [(f"rhs_{i}", rhs_expr[i]) for i in range(n)]
    if forward == "aba" and model.aba is not None:
        # Articulated-body algorithm: no mass matrix, no factorisation; a pivot D_i <= 0
        # means M is not positive definite.
        qdd_aba, pivots = model.aba
        body = ["    const double *restrict hw = h ? h : zero_wrench;"]
        body += emitter.block([(f"pivot_{i}", d) for i, d in enumerate(pivots)]
                              + [(f"qdd_{i}", qdd_aba[i]) for i in range(n)], "forward_dynamics", declare=True)
        body += [f"    if (!(pivot_{i} > 0.0)) return -1;" for i in range(n)]
        body += [f"    out[{i}] = qdd_{i};" for i in range(n)] + ["    return 0;"]
    else:
        body = ["    const double *restrict hw = h ? h : zero_wrench;"]
        body += emitter.block(lower + rhs, "forward_dynamics", declare=True)
        body += _ltdl_solve(parents)
    bodies["forward_dynamics"] = body

    bodies["kinetic_energy"] = emitter.block([("out[0]", model.kinetic_energy)], "kinetic_energy")
    bodies["potential_energy"] = emitter.block([("out[0]", model.potential_energy)], "potential_energy")
    bodies["tool_pose"] = emitter.block(_matrix_assignments(model.tool_pose, "out"), "tool_pose")
    bodies["tool_jacobian"] = emitter.block(_matrix_assignments(model.tool_jacobian, "out"), "tool_jacobian")
    return bodies


def _c_string(text: str, width: int = 100) -> str:
    """A C string literal, split into lines of at most ``width`` characters between escapes."""
    tokens = ["\\\\" if c == "\\" else '\\"' if c == '"' else "\\?" if c == "?" else c for c in text]
    lines, current = [], ""
    for token in tokens:
        if len(current) + len(token) > width:
            lines.append(current)
            current = ""
        current += token
    lines.append(current)
    return "\n".join(f'    "{line}"' for line in lines)


def build_metadata(model: SymbolicModel) -> dict:
    description = model.description
    return {
        "generator": "robodyn-codegen",
        "generator_version": __version__,
        "robot": description.name,
        "summary": description.summary,
        "source_sha256": description.source_sha256,
        "n": model.n,
        "joint_names": [j.name for j in description.joints],
        "joint_types": [j.kind for j in description.joints],
        "link_names": [j.link_name for j in description.joints],
        "limits": [{"lower": j.limits.lower, "upper": j.limits.upper, "velocity": j.limits.velocity,
                    "effort": j.limits.effort} for j in description.joints],
        "parameters": [{"name": p.name, "default": p.default} for p in description.parameters],
        "method": model.method,
    }


FORWARD_METHODS = ("ltdl", "aba")


def emit(model: SymbolicModel, forward: str = "ltdl") -> GeneratedSources:
    """Generate the C header, the C source and the Cython declarations.

    ``forward``: forward dynamics by M, the bias and a sparse LᵀDL solve ("ltdl"), or by the
    articulated-body algorithm ("aba", recursive models without rotors only)."""
    if forward not in FORWARD_METHODS:
        raise ValueError(f"unknown forward-dynamics method {forward!r}; expected one of {FORWARD_METHODS}")
    start = time.perf_counter()
    description = model.description
    prefix = description.name
    macro = prefix.upper()
    n = model.n
    emitter = _Emitter(model)
    specs = routine_specs(n)
    bodies = _routine_bodies(model, emitter, forward)
    metadata = build_metadata(model)
    metadata["operation_counts"] = dict(sorted(emitter.operation_counts.items()))
    metadata_json = json.dumps(metadata, sort_keys=True, separators=(",", ":"))

    parameter_lines = [f" *   p[{i}] = {p.name} (default {p.default!r})" for i, p in enumerate(description.parameters)]
    if not parameter_lines:
        parameter_lines = [" *   (none; p may be any pointer, it is not read)"]
    routine_lines = []
    for spec in specs:
        routine_lines.append(f" *   {_signature(prefix, spec)}")
        for argument in (*spec.arguments, Argument("p", str(len(description.parameters)), "parameters"), spec.output):
            routine_lines.append(f" *       {argument.name:<4} [{argument.size}] {argument.doc}")
    header_comment = "\n".join([
        "/*",
        f" * Dynamics of robot '{prefix}', generated by robodyn codegen {__version__}.",
        f" * Description SHA-256: {description.source_sha256}",
        " * Do not edit: regenerate from the description instead.",
        " *",
        f" * Model: M(q) qdd + C(q, qd) qd + g(q) + Fv qd + Fs sgn(qd) = tau + J(q)^T h   (n = {n})",
        " * Joint order: " + ", ".join(f"{i}:{j.name}({j.kind})" for i, j in enumerate(description.joints)),
        " * Arrays are double, row-major; outputs must not overlap inputs.",
        " * Parameters (runtime-settable, array p):",
        *parameter_lines,
        " * Routines (arguments in order):",
        *routine_lines,
        " */",
    ])

    header = "\n".join([
        header_comment,
        f"#ifndef {macro}_DYNAMICS_H",
        f"#define {macro}_DYNAMICS_H",
        "",
        f"#define {macro}_NDOF {n}",
        f"#define {macro}_NPARAMS {len(description.parameters)}",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        f"extern const char {prefix}_metadata_json[];",
        *[_signature(prefix, spec) + ";" for spec in specs],
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "",
        f"#endif /* {macro}_DYNAMICS_H */",
        "",
    ])

    source_parts = [
        header_comment,
        "#include <math.h>",
        f'#include "{prefix}_dynamics.h"',
        "",
        "static const double zero_wrench[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};",
        "",
        f"const char {prefix}_metadata_json[] =",
        _c_string(metadata_json) + ";",
        "",
    ]
    for spec in specs:
        body = bodies[spec.name]
        unused = [a.name for a in spec.arguments] + ["p"]
        source_parts.append(_signature(prefix, spec) + " {")
        used_text = "\n".join(body)
        for name in unused:
            if f"{name}[" not in used_text and not (name == "h" and "h ? h" in used_text):
                source_parts.append(f"    (void){name};")
        source_parts.extend(body)
        source_parts.append("}")
        source_parts.append("")
    source = "\n".join(source_parts)

    pxd_lines = [
        f"# Generated by robodyn codegen {__version__} for robot '{prefix}'; maps the static bridge's",
        f"# names onto this robot's prefixed C symbols. Description SHA-256: {description.source_sha256}",
        f'cdef extern from "{prefix}_dynamics.h" nogil:',
        f'    enum: NDOF "{macro}_NDOF"',
        f'    enum: NPARAMS "{macro}_NPARAMS"',
        f'    const char* METADATA_JSON "{prefix}_metadata_json"',
    ]
    for spec in specs:
        params = [f"const double* {a.name}" for a in spec.arguments] + ["const double* p", "double* out"]
        result = "int" if spec.returns_status else "void"
        pxd_lines.append(f'    {result} {spec.name} "{prefix}_{spec.name}"({", ".join(params)})')
    pxd = "\n".join(pxd_lines) + "\n"

    files = {f"{prefix}_dynamics.h": header, f"{prefix}_dynamics.c": source, "robot_api.pxd": pxd}
    content_hash = hashlib.sha256("".join(files[k] for k in sorted(files)).encode()).hexdigest()
    return GeneratedSources(robot=prefix, files=files, metadata=dict(metadata, content_sha256=content_hash),
                            operation_counts=dict(emitter.operation_counts),
                            timings={"emit_s": time.perf_counter() - start, "cse_s": emitter.cse_seconds})
