"""Stage 4: a RoutineSet becomes C99 sources (text only; no files are written here).

Files, for a robot named ``rr``:

* ``rr_dynamics.h``: the robot's C API. Its header comment states the generator
  version, the description's SHA-256, the model, the joint and parameter order
  and every routine's argument order.
* ``rr_<routine>.c``: one routine per file, headed by the algorithm that produced
  it and its operation count (one file each: they compile in parallel). The
  forward-dynamics derivatives call the inverse-dynamics derivatives' kernel
  (``rr_inverse_dynamics_derivatives.c``) rather than repeat its program.
* ``rr_table.c``: the ``rd_robot`` table the runtime calls through
  (``robodyn/native/robodyn_abi.h``): each routine wrapped in the uniform kernel
  signature, its shapes and cost, the parameter defaults and the metadata JSON.
* ``robot_table.h``: what the static Cython binding needs to export the table.

Each routine's outputs are assigned after common-subexpression elimination
over its whole program, intermediates and outputs together (codegen.emit.cse);
a ``TreeSolve`` is unrolled as a sparse L^T D L factorisation for the kinematic
tree.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import time
from dataclasses import dataclass, field
from typing import Callable

import sympy as sp
from robodyn._version import __version__

from ..model.program import needed_definitions
from ..model.routines import DerivativeSolve, Expressions, RoutineDefinition, RoutineSet, TreeSolve, dimensions
from .cse import eliminate
from .printer import TRIG_FUNCTIONS, RobotCPrinter, TrigTable, count_operations, fold_constants
from .schedule import order


@dataclass(frozen=True)
class GeneratedSources:
    """Everything the compile stage needs: file name -> text, which of them to compile, metadata."""

    robot: str
    files: dict
    metadata: dict
    operation_counts: dict = field(default_factory=dict)  # by routine
    timings: dict = field(default_factory=dict)
    build_tiers: dict = field(default_factory=dict)  # C file -> "pressure", "quick" or "large" (QUICK_BUILD_OPERATIONS);
    # the others compile for speed


def _output_names(definition: RoutineDefinition) -> list[str]:
    count = len(definition.routine.outputs)
    return ["out"] if count == 1 else [f"out{k}" for k in range(count)]


def signature(prefix: str, definition: RoutineDefinition) -> str:
    routine = definition.routine
    params = [f"const double *{a.name}" if a.optional else f"const double *restrict {a.name}"
              for a in routine.arguments]
    params += ["const double *restrict p"] + [f"double *restrict {name}" for name in _output_names(definition)]
    result = "int" if routine.failure else "void"
    return f"{result} {prefix}_{routine.name}({', '.join(params)})"


class _Block:
    """CSE and printing of assignment blocks for one routine."""

    def __init__(self, definition: RoutineDefinition, routines: RoutineSet):
        self.model = routines.model
        names: dict[sp.Symbol, str] = {}
        for argument, symbols in zip(definition.routine.arguments, definition.inputs):
            cname = f"{argument.name}_or_zero" if argument.optional else argument.name
            for index, symbol in enumerate(symbols):
                names[symbol] = f"{cname}[{index}]"
        for index, symbol in enumerate(self.model.parameters):
            names[symbol] = f"p[{index}]"
        self.names = names
        self.trig = TrigTable(set(names))  # angles of inputs and parameters: sin and cos at the start
        # A DerivativeSolve's definitions are its callee's program (``jacobians_routine``): not read here.
        own = definition.value.definitions if isinstance(definition.value, Expressions) else ()
        self.definitions = tuple(self.model.definitions) + tuple(own)
        self.emitted: set[sp.Symbol] = set()  # program intermediates already declared by an earlier block
        self.operations = 0
        self.cse_seconds = 0.0

    def assign(self, assignments: list[tuple[str, sp.Expr]], tag: str, declare: bool = False) -> list[str]:
        """CSE over all right-hand sides, then C statements ``target = value;``
        (``declare``: the targets are new const locals)."""
        indent = "    "
        targets = [t for t, _ in assignments]
        exprs = [fold_constants(e if isinstance(e, sp.Basic) else sp.Float(e)) for _, e in assignments]
        started = time.perf_counter()
        # Recursive route: the outputs refer to a program's intermediates, emitted first, in order.
        prelude = needed_definitions(self.definitions, exprs) if self.definitions else []
        prelude = [(symbol, value) for symbol, value in prelude if symbol not in self.emitted]
        self.emitted.update(symbol for symbol, _ in prelude)
        self.names.update({symbol: symbol.name for symbol, _ in prelude})
        # One elimination over the program's intermediates and the outputs together (codegen.emit.cse).
        values = [fold_constants(value) for _, value in prelude]
        replacements, reduced = eliminate(values + exprs, sp.numbered_symbols(f"{tag}_"))
        replacements = _topological(list(replacements) + [(symbol, value) for (symbol, _), value
                                                          in zip(prelude, reduced[:len(values)])])
        reduced = reduced[len(values):]
        self.cse_seconds += time.perf_counter() - started
        names = dict(self.names)
        for symbol, _ in replacements:
            names[symbol] = symbol.name
        printer = RobotCPrinter(names, self.trig)
        lines = []
        for kind, item, value in order(replacements, list(zip(targets, reduced)), keep_outputs=declare):
            text = printer.expression(value)
            if kind == "value":
                lines.append(f"{indent}const double {item.name} = {text};")
            else:
                lines.append(f"{indent}{'const double ' + item if declare else item} = {text};")
            self.operations += count_operations(text)
        return lines


def _post_order(roots: list, reads, done: set, visit) -> None:
    """Depth first from each root in turn: ``visit(node)`` once everything ``reads(node)`` lists (in that order)
    has been visited; ``done`` holds the visited nodes."""
    stack = [(root, False) for root in reversed(roots)]
    while stack:
        node, expanded = stack.pop()
        if node in done:
            continue
        if expanded:
            done.add(node)
            visit(node)
            continue
        stack.append((node, True))
        stack.extend((s, False) for s in reversed(reads(node)) if s not in done)


def _topological(values: list) -> list:
    """(symbol, value) pairs reordered so that each comes after the values it reads (ties: given order)."""
    defined = {symbol: k for k, (symbol, _) in enumerate(values)}
    order: list = []
    _post_order(list(range(len(values))), lambda k: sorted(defined[s] for s in values[k][1].free_symbols
                                                           if s in defined), set(),
                lambda k: order.append(values[k]))
    return order


def _entries(matrix: sp.MatrixBase, target: str) -> list[tuple[str, sp.Expr]]:
    # Row-major like the output; tolist() reads the entries at once (item access is slow on TIAGo's 3e5 of them).
    return [(f"{target}[{k}]", value) for k, value in enumerate(v for row in matrix.tolist() for v in row)]


def _ancestors(parents: tuple[int, ...], i: int) -> list[int]:
    chain = []
    i = parents[i]
    while i >= 0:
        chain.append(i)
        i = parents[i]
    return chain


def ltdl_solve(parents: tuple[int, ...], indent: str = "    ", target: str | None = None,
               factor: dict | None = None) -> list[str]:
    """Unrolled sparse factorisation M = Lᵀ D L and solve M x = rhs (Featherstone's LTDL).

    Factoring from the last joint to the first, with parents numbered before their
    children, creates no fill-in: only entries (i, j) with j an ancestor of i are ever
    touched, so a kinematic tree costs less than a dense LDLᵀ. The lower triangle of M
    is read from ``m_i_j`` (i >= j) and the right-hand side from ``rhs_i``.
    Returns -1 when a pivot is not positive (M not positive definite).

    ``target``: x goes to new const locals ``<target>_i`` instead of ``out`` (and nothing is returned);
    ``factor``, a dict, receives the factorisation's entries: (i, j) -> the C name of L's (i, j), j an
    ancestor of i, and (i, i) -> D's pivot i (for ``ltdl_columns``)."""
    n = len(parents)

    def ancestors(i: int) -> list[int]:
        return _ancestors(parents, i)

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
        if target is None:
            terms = " - ".join(f"{current[(i, j)]} * out[{j}]" for j in ancestors(i))
            lines.append(f"{indent}out[{i}] = {value[i]}{' - ' + terms if terms else ''};")
        else:
            terms = " - ".join(f"{current[(i, j)]} * {target}_{j}" for j in ancestors(i))
            lines.append(f"{indent}const double {target}_{i} = {value[i]}{' - ' + terms if terms else ''};")
    if factor is not None:
        factor.update(current)
    if target is None:
        lines.append(f"{indent}return 0;")
    return lines


def ltdl_columns(parents: tuple[int, ...], factor: dict, outputs: list[tuple[str, bool]],
                 indent: str = "    ") -> list[str]:
    """Solve M X = B in place, column by column, with the factorisation ``factor`` (from ``ltdl_solve``) of
    M: each (array, negate) of ``outputs`` is an n x n row-major B replaced by X (by -X when negate). One loop
    over the columns, the tree unrolled inside it: the code grows as n², not n³."""
    n = len(parents)
    lines = [f"{indent}const double inv_d_{i} = 1.0 / {factor[(i, i)]};" for i in range(n)]
    for array, negate in outputs:
        inner = indent + "    "
        lines.append(f"{indent}for (int c = 0; c < {n}; ++c) {{")
        lines += [f"{inner}double y_{i} = {array}[{i * n} + c];" for i in range(n)]
        for i in reversed(range(n)):
            lines += [f"{inner}y_{j} -= {factor[(i, j)]} * y_{i};" for j in _ancestors(parents, i)]
        lines += [f"{inner}y_{i} *= inv_d_{i};" for i in range(n)]
        for i in range(n):
            lines += [f"{inner}y_{i} -= {factor[(i, j)]} * y_{j};" for j in _ancestors(parents, i)]
            lines.append(f"{inner}{array}[{i * n} + c] = {'-' if negate else ''}y_{i};")
        lines.append(f"{indent}}}")
    return lines


def _quaternion_guard(definition: RoutineDefinition, routines: RoutineSet) -> list[str]:
    """A floating base's quaternion q[3..6] must have unit norm within QUATERNION_TOLERANCE: else the routine
    fails (the runtime says why) rather than return the dynamics of a scaled rotation."""
    if routines.model.description.floating_base is None or "q" not in [a.name for a in definition.routine.arguments]:
        return []
    from robodyn.floating_base import QUATERNION_TOLERANCE

    low, high = (1.0 - QUATERNION_TOLERANCE) ** 2, (1.0 + QUATERNION_TOLERANCE) ** 2
    return ["    /* The base quaternion q[3..6] must have unit norm (robodyn.floating_base.QUATERNION_TOLERANCE). */",
            "    {",
            "        const double norm2 = q[3] * q[3] + q[4] * q[4] + q[5] * q[5] + q[6] * q[6];",
            f"        if (!(norm2 >= {low!r} && norm2 <= {high!r})) return -1;",
            "    }"]


#: The routines that use the base parameters: they fail when gravity is tilted away from the direction those
#: were derived for (BaseParameters.gravity).
_BASE_PARAMETER_ROUTINES = ("base_regressor", "slotine_li_regressor")


def _gravity_guard(definition: RoutineDefinition, routines: RoutineSet, block: "_Block") -> list[str]:
    """Where the base parameters hold only for gravity parallel to the default (BaseParameters.gravity), the
    routines built on them fail for any other direction instead of returning a regressor that no longer
    reproduces the torques. Parallel within 1e-9 (relative), either sense, or zero, passes."""
    regressor = routines.model.regressor
    if (definition.routine.name not in _BASE_PARAMETER_ROUTINES or regressor is None
            or regressor.base.gravity is None):
        return []
    printer = RobotCPrinter({symbol: name for symbol, name in block.names.items() if name.startswith("p[")})
    g = [printer.expression(fold_constants(sp.sympify(value))) for value in routines.model.description.gravity]
    g0 = [repr(float(v)) for v in regressor.base.gravity]
    norm2 = repr(float(sum(float(v) ** 2 for v in regressor.base.gravity)))
    if float(norm2) == 0.0:  # derived without gravity: any gravity breaks them
        return ["    /* The base parameters were derived without gravity: any gravity fails. */",
                f"    if (({g[0]}) != 0.0 || ({g[1]}) != 0.0 || ({g[2]}) != 0.0) return -1;"]
    return [f"    /* The base parameters were derived for gravity along ({', '.join(g0)}): another direction fails. */",
            "    {",
            f"        const double gx = {g[0]}, gy = {g[1]}, gz = {g[2]};",
            f"        const double cx = gy * {g0[2]} - gz * {g0[1]}, cy = gz * {g0[0]} - gx * {g0[2]}, "
            f"cz = gx * {g0[1]} - gy * {g0[0]};",
            f"        if (!(cx * cx + cy * cy + cz * cz <= 1e-18 * (gx * gx + gy * gy + gz * gz) * {norm2})) return -1;",
            "    }"]


def _routine_definition(routines: RoutineSet, name: str, outputs: int) -> RoutineDefinition:
    """The definition of routine ``name`` in the set, whose kernel another routine's C calls with (q, qd, qdd) for
    ``outputs`` outputs."""
    for definition in routines.definitions:
        if definition.routine.name == name:
            arguments = tuple(a.name for a in definition.routine.arguments)
            if arguments != ("q", "qd", "qdd") or len(definition.routine.outputs) != outputs:
                raise ValueError(f"routine {name} is called with (q, qd, qdd) for {outputs} outputs; it takes "
                                 f"{list(arguments)} and has {len(definition.routine.outputs)}")
            return definition
    raise ValueError(f"routine {name}, whose kernel another routine calls, is not in the routine set")


def _body(definition: RoutineDefinition, routines: RoutineSet) -> tuple[list[str], int, float]:
    """C statements of one routine, its operation count and its CSE time."""
    prefix = routines.model.description.name
    routine, value = definition.routine, definition.value
    block = _Block(definition, routines)
    lines: list[str] = _quaternion_guard(definition, routines) + _gravity_guard(definition, routines, block)
    outputs = _output_names(definition)
    if isinstance(value, (TreeSolve, DerivativeSolve)):
        solve = value.solve if isinstance(value, DerivativeSolve) else value
        parents = solve.parents

        def related(i: int, j: int) -> bool:  # j is i or one of its ancestors
            while i > j:
                i = parents[i]
            return i == j

        n = len(parents)
        lower = [(f"m_{i}_{j}", solve.matrix[i, j]) for i in range(n) for j in range(i + 1) if related(i, j)]
        rhs = [(f"rhs_{i}", solve.rhs[i]) for i in range(n)]
        # M's lower triangle and the right-hand side share subexpressions: one CSE block.
        lines += block.assign(lower + rhs, routine.name, declare=True)
        if isinstance(value, TreeSolve):
            lines += ltdl_solve(parents)
        else:
            # qdd, then the jacobians there by their own routine's kernel (one compiled copy of that program),
            # then -M^-1 of each and M^-1 with the same factorisation.
            factor: dict = {}
            lines += ltdl_solve(parents, target="acc", factor=factor)
            callee = _routine_definition(routines, value.jacobians_routine, len(value.jacobians))
            jacobian_outputs = outputs[:len(value.jacobians)]
            lines += [f"    /* The jacobians at (q, qd, qdd): {callee.routine.name}'s kernel (declared above; not a "
                      "copy of its program). */",
                      "    {",
                      f"        const double acc[{n}] = {{{', '.join(f'acc_{i}' for i in range(n))}}};",
                      "        const double *const at[3] = {q, qd, acc};",
                      f"        double *const into[{len(jacobian_outputs)}] = {{{', '.join(jacobian_outputs)}}};",
                      f"        const int called = {prefix}_{callee.routine.name}_kernel(at, p, into);",
                      "        if (called != 0) return called;",
                      "    }"]
            last = outputs[len(value.jacobians)]
            lines.append(f"    for (int i = 0; i < {n * n}; ++i) {last}[i] = 0.0;")
            lines += [f"    {last}[{i * (n + 1)}] = 1.0;" for i in range(n)]
            lines.append("    /* -M^-1 times each derivative, and M^-1, by the factorisation of M. */")
            lines += ltdl_columns(parents, factor, [(name, True) for name in outputs[:len(value.jacobians)]]
                                  + [(last, False)])
            lines.append("    return 0;")
    elif value.guards:
        guards = [(f"guard_{i}", g) for i, g in enumerate(value.guards)]
        results = [(f"result_{k}_{i}", e) for k, matrix in enumerate(value.outputs) for i, e in enumerate(matrix)]
        lines += block.assign(guards + results, routine.name, declare=True)
        lines += [f"    if (!(guard_{i} > 0.0)) return -1;" for i in range(len(guards))]
        for k, matrix in enumerate(value.outputs):
            lines += [f"    {outputs[k]}[{i}] = result_{k}_{i};" for i in range(len(matrix))]
        lines.append("    return 0;")
    else:
        assignments = []
        for k, matrix in enumerate(value.outputs):
            every = _entries(matrix, outputs[k])
            zeros = [target for target, e in every if e == 0]
            constants = [(index, e) for index, (_, e) in enumerate(every) if e != 0 and e.is_Number]
            entries = every
            if len(zeros) >= _ZERO_LOOP:  # one loop, not thousands of stores (regressors, K): compile time
                lines.append(f"    for (int i = 0; i < {len(every)}; ++i) {outputs[k]}[i] = 0.0;")
                entries = [(target, e) for target, e in entries if e != 0]
            if len(constants) >= _CONSTANT_TABLE:  # a URDF robot's K: a table and a loop, not thousands of stores
                literal = RobotCPrinter({}).expression
                name = f"{outputs[k]}_constants"
                lines += [f"    static const int {name}_at[{len(constants)}] = "
                          f"{{{', '.join(str(index) for index, _ in constants)}}};",
                          f"    static const double {name}[{len(constants)}] = "
                          f"{{{', '.join(literal(e) for _, e in constants)}}};",
                          f"    for (int i = 0; i < {len(constants)}; ++i) {outputs[k]}[{name}_at[i]] = {name}[i];"]
                entries = [(target, e) for target, e in entries if not (e != 0 and e.is_Number)]
            assignments += entries
        lines += block.assign(assignments, routine.name)
        if routine.failure:
            lines.append("    return 0;")
    trig, renumber = block.trig.declarations(RobotCPrinter(block.names))
    if renumber is not None:  # the angles are read in place: slot k is now the k-th of their range
        lines = [_TRIG_SLOT.sub(lambda m: f"trig_{m.group(1)}[{renumber[int(m.group(2))]}]", line) for line in lines]
    used = "\n".join(trig + lines)
    # An optional argument the outputs read is read through an alias that is zeros when it is NULL.
    aliases = [f"    const double *restrict {a.name}_or_zero = {a.name} ? {a.name} : zero_{a.name};"
               for a in routine.arguments if a.optional and f"{a.name}_or_zero[" in used]
    unused = [f"    (void){a.name};" for a in routine.arguments
              if f"{a.name}[" not in used and f"{a.name}_or_zero[" not in used]
    if "p[" not in used:
        unused.append("    (void)p;")
    # sin and cos of each angle (rd_sincos_block counts them as two operations, as two calls did).
    return unused + aliases + trig + lines, block.operations + 2 * len(block.trig.angles), block.cse_seconds


#: From this many structurally zero entries on, an output is cleared by a loop first and only its
#: other entries are assigned: iCub's base-parameter map K (106,000 entries, 99 % zeros) took 130 s
#: to compile as one store per entry.
_ZERO_LOOP = 16
#: From this many numeric entries on, an output's constant entries are written from a static table by a loop:
#: TIAGo's base-parameter map K had 3,100 of them, 3.7 s of GCC time as separate stores.
_CONSTANT_TABLE = 64


def _kernel_signature(prefix: str, routine, suffix: str = "_kernel") -> str:
    return (f"int {prefix}_{routine.name}{suffix}(const double *const *inputs, const double *restrict p, "
            "double *const *outputs)")


#: A routine with operations in this range has its arithmetic also compiled for x86-64-v3 (AVX2, FMA), chosen at
#: load time (GCC's target_clones; elsewhere the plain build only). SSE2's two-operand arithmetic needs a register
#: copy for every value used twice, and a multiply-add is two instructions: on the Panda (callgrind, kernels only)
#: M takes 1,048 instructions instead of 1,503, inverse dynamics 1,887 instead of 3,052, forward dynamics 2,714
#: instead of 4,344, g 689 instead of 1,013; the derivative kernels shrank from 82 and 100 kB to 51 and 63 kB. The
#: tiniest routines keep one build (except SPEED_ROUTINES: the UR5's g, 231 operations, took 737 instructions
#: with one build and 373 with both), and so do the largest (a second build of them would add tens of seconds).
_CLONE_OPERATIONS = (300, 40000)
#: At most this many operations of a robot's other routines (not SPEED_ROUTINES) are cloned, in the table's
#: order: a humanoid has a dozen routines in that range, and cloning all of them doubled its compile time.
_CLONE_BUDGET = 60000
#: The routines of control loops: built for speed whatever their size (-O2 and clones up to 40,000 operations).
#: The others are compiled for build time above QUICK_BUILD_OPERATIONS ("quick": -O1 with the few -O2 passes this
#: code needs, codegen.extension.compile.QUICK_FLAGS): GCC's full -O2 takes 15-50 % longer on such straight-line
#: code for 0.2-3 % fewer instructions (callgrind, the Panda's derivatives and regressors), and it is those routines
#: (the Panda's inverse-dynamics derivatives) that a build waits for. Above LARGE_BUILD_OPERATIONS ("large",
#: LARGE_FLAGS: a humanoid's regressors and derivatives) without the register allocator's expensive optimisations
#: too, about a tenth of GCC's time on such files, as before these tiers (TIAGo: 4.5 s for its largest file).
SPEED_ROUTINES = ("mass_matrix", "coriolis_matrix", "gravity", "nonlinear_effects", "inverse_dynamics",
                  "forward_dynamics")
#: Control-loop routines compiled with GCC's scheduling before register allocation, aware of register pressure
#: (tier "pressure", codegen.extension.compile.PRESSURE_FLAGS): their values outlive x86-64's 16 vector registers
#: (the Panda's C: about 460 spill moves in 2,400 instructions), and ordering the statements for fewer live values
#: saves more time than the few more instructions it takes. Measured in C, ns a call, medians of interleaved runs:
#: the Panda's C 247 -> 226 (+6 % instructions), nonlinear effects 133 -> 117, M 79 -> 77; the UR5's C, M and
#: nonlinear effects faster or equal too. Not g, inverse or forward dynamics: 2-3 % slower on the Panda. Only up to
#: PRESSURE_OPERATIONS: TIAGo's (48 joints) C, M and nonlinear effects, 8,000 to 55,000 operations, were no faster
#: and took GCC 2.4 s longer.
PRESSURE_ROUTINES = ("mass_matrix", "coriolis_matrix", "nonlinear_effects")
PRESSURE_OPERATIONS = 5000
#: Identification's routines, evaluated over recorded data sets rather than in control loops: one build only. The
#: Panda's regressor kernel takes 4,808 instructions instead of 3,008 (about 0.1 us more per sample), and the
#: build saves 0.36 s of its 5.2 s of GCC time.
OFFLINE_ROUTINES = ("regressor", "base_regressor")
QUICK_BUILD_OPERATIONS = 1000
LARGE_BUILD_OPERATIONS = 16000

_CLONE_MACRO = [
    "/* x86-64-v3 (AVX2, FMA) and baseline builds of the arithmetic, chosen at load time (GCC, glibc). */",
    "#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && defined(__GNUC__) \\",
    "    && !defined(__clang__) && !defined(__INTEL_COMPILER) && __GNUC__ >= 11",
    '#define RD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))',
    "#else",
    "#define RD_CLONES",
    "#endif",
    "",
]


#: A kernel of more operations than _SPLIT_OPERATIONS is compiled as a sequence of functions of about
#: _PART_OPERATIONS each (``_split``): GCC's register allocation grows faster than linearly with a function's size
#: (half of the Panda's forward-dynamics derivatives' compile time was LRA's hard-register assignment), and one
#: huge straight-line function is where a large robot's build spends its time. Measured on the Panda (callgrind,
#: compile time at -O2 with both builds, when the forward-dynamics derivatives still carried their own copy of the
#: inverse-dynamics derivatives): parts of 1,000 operations compiled the two derivative routines in 1.6 s instead
#: of 6 s and ran them in fewer instructions (6,944 and 9,653 instead of 7,217 and 10,025), C too (3,150 instead
#: of 3,185); forward dynamics (2,242 operations) split ran 4 % more, so it stays whole.
_SPLIT_OPERATIONS = 3000
_PART_OPERATIONS = 1000
#: Values that cross from one part to a later one go through an array: on the stack up to this many, else on the
#: heap (a 50-joint chain's derivatives cross 10^5 values; kept whole, GCC took 7.5 minutes and 9 GB on it).
_STACK_SPILLED = 16384
_DECLARATION = re.compile(r"^\s*const double (\w+) = ")
_TRIG_BLOCK = re.compile(r"(rd_sincos_(?:block|range))\(trig_values,(?=.*, (\d+)\);$)")
_TRIG_SLOT = re.compile(r"\btrig_(sin|cos)\[(\d+)\]")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_POINTER = re.compile(r"^\s*(?:const )?double \*(?:restrict )?(\w+) = ")


def _statements(lines: list[str]) -> list[list[str]]:
    """Lines grouped into statements: a braced block (a guard, a loop) is one."""
    groups, current, depth = [], [], 0
    for line in lines:
        current.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def _split(statements: list[str]) -> tuple[list[list[str]], int] | None:
    """The statements in parts of about _PART_OPERATIONS operations each, every value a later part reads stored
    to ``spill`` after its definition and read back in that part just before its first reader; and the spill
    size. None: one part."""
    groups = _statements(statements)
    parts: list[list[list[str]]] = [[]]
    size = 0
    for group in groups:
        cost = sum(count_operations(line) for line in group)
        if parts[-1] and size + cost > _PART_OPERATIONS:
            parts.append([])
            size = 0
        parts[-1].append(group)
        size += cost
    if len(parts) < 2:
        return None
    defined_in: dict[str, int] = {}
    reads: list[set[str]] = []
    for index, part in enumerate(parts):
        used: set[str] = set()
        for group in part:
            for line in group:
                match = _DECLARATION.match(line) if len(group) == 1 else None
                used.update(_IDENTIFIER.findall(line[match.end():] if match else line))
                if match:
                    defined_in[match.group(1)] = index
        reads.append(used)
    slots: dict[str, int] = {}
    for index, used in enumerate(reads):
        crossing = sorted((name for name in used if defined_in.get(name, index) < index), key=lambda n: (len(n), n))
        for name in crossing:
            slots.setdefault(name, len(slots))
    # A value from an earlier part is read back just before the first statement that reads it, not at the top:
    # GCC keeps the order, and a load at the top keeps a register (or a stack slot) busy until that statement.
    result = []
    for index, part in enumerate(parts):
        lines: list[str] = []
        loaded: set[str] = set()
        for group in part:
            for line in group:
                match = _DECLARATION.match(line) if len(group) == 1 else None
                for name in _IDENTIFIER.findall(line[match.end():] if match else line):
                    if name not in loaded and defined_in.get(name, index) < index:
                        loaded.add(name)
                        lines.append(f"    const double {name} = spill[{slots[name]}];")
            lines += group
            match = _DECLARATION.match(group[0]) if len(group) == 1 else None
            if match and match.group(1) in slots:
                lines.append(f"    spill[{slots[match.group(1)]}] = {match.group(1)};")
        result.append(lines)
    return result, max(len(slots), 1)


def _kernel_definition(prefix: str, definition: RoutineDefinition, body: list[str], operations: int,
                       clones: bool) -> list[str]:
    """The kernel: the routine in the table's signature; with ``clones`` its body compiled twice (_CLONE_MACRO),
    and a very large one is a sequence of parts (``_split``)."""
    routine = definition.routine
    ending = [] if routine.failure else ["    return 0;"]
    header = list(itertools.takewhile(lambda line: line.startswith(("    (void)", "    const double *", "    double trig_values[")),
                                       body))
    split = _split(body[len(header):] + ending) if operations > _SPLIT_OPERATIONS else None
    if split is not None:
        parts, spilled = split
        name = f"{prefix}_{routine.name}_part"
        # The angles' sines and cosines: computed by the first part that reads them into the kernel's array
        # ``trig``, read from there by the others (rather than recomputed in every part).
        trig = next((line for line in header if _TRIG_BLOCK.search(line)), None)
        width = int(_TRIG_BLOCK.search(trig).group(2)) if trig else 0
        signature = (f"static int {name}%d(const double *const *inputs, const double *restrict p, "
                     "double *const *outputs, double *restrict spill" + (", double *restrict trig)" if trig else ")"))
        lines = [*_CLONE_MACRO] if clones else []
        computed = False
        for index, part in enumerate(parts):
            declarations = _declarations_used(_kernel_aliases(definition) + header, part)
            if trig in declarations:
                at = declarations.index(trig)
                if computed:  # its angles' pointer declarations may now be unused: keep only what is read
                    declarations = _declarations_used(declarations[:at] + declarations[at + 1:], part)
                    declarations.insert(0, "    const double *restrict trig_sin = trig;")
                else:
                    declarations[at] = _TRIG_BLOCK.sub(r"\1(trig,", trig)
                    computed = True
            lines += [("RD_CLONES " if clones else "") + signature % index, "{", *declarations, "    (void)spill;",
                      *(["    (void)trig;"] if trig else []), *part,
                      *([] if part[-1].strip().startswith("return") else ["    return 0;"]), "}", ""]
        arguments = "inputs, p, outputs, spill" + (", trig" if trig else "")
        lines += [_kernel_signature(prefix, routine), "{"]
        if trig:
            lines.append(f"    double trig[{2 * width}]; /* the angles' sines, then cosines */")
        if spilled <= _STACK_SPILLED:
            lines += [f"    double spill[{spilled}]; /* values computed in one part and read in a later one */",
                      "    int status;"]
            lines += [f"    if ((status = {name}{index}({arguments})) != 0) return status;"
                      for index in range(len(parts) - 1)]
            lines += [f"    return {name}{len(parts) - 1}({arguments});", "}"]
        else:
            lines += [f"    double *spill = malloc({spilled} * sizeof(double)); /* values crossing parts */",
                      "    if (spill == NULL) return -1;",
                      "    int status = 0;"]
            lines += [f"    if (status == 0) status = {name}{index}({arguments});" for index in range(len(parts))]
            lines += ["    free(spill);", "    return status;", "}"]
        return lines
    lines = ["{", *_kernel_aliases(definition), *body, *ending, "}"]
    if not clones:
        return [_kernel_signature(prefix, routine), *lines]
    # The body is a static function of its own, so that the clones stay inside the kernel's symbol.
    return [*_CLONE_MACRO, "RD_CLONES static " + _kernel_signature(prefix, routine, "_body"), *lines, "",
            _kernel_signature(prefix, routine), "{",
            f"    return {prefix}_{routine.name}_body(inputs, p, outputs);", "}"]


def _declarations_used(declarations: list[str], statements: list[str]) -> list[str]:
    """The pointer declarations that ``statements`` read, directly or through a later declaration: each part of
    a split kernel declares only those (an unused one draws a -Wall warning per part)."""
    needed = set(_IDENTIFIER.findall("\n".join(statements)))
    kept = []
    for line in reversed(declarations):
        match = _POINTER.match(line)
        if match is not None and match.group(1) in needed:
            kept.append(line)
            needed.update(_IDENTIFIER.findall(line[match.end():]))
    return kept[::-1]



def _kernel_aliases(definition: RoutineDefinition) -> list[str]:
    """The kernel's array arguments under the names the routine's body uses."""
    routine = definition.routine
    lines = [f"    const double *{'' if a.optional else 'restrict '}{a.name} = inputs[{k}];"
             for k, a in enumerate(routine.arguments)] or ["    (void)inputs;"]
    lines += [f"    double *restrict {name} = outputs[{k}];" for k, name in enumerate(_output_names(definition))]
    return lines


def _public_body(prefix: str, definition: RoutineDefinition) -> list[str]:
    """The C API function: the kernel, called with its arguments gathered in arrays."""
    routine = definition.routine
    inputs = ", ".join(a.name for a in routine.arguments)
    outputs = ", ".join(_output_names(definition))
    call = f"{prefix}_{routine.name}_kernel(inputs, p, outputs)"
    if not routine.arguments:  # C99 has no empty arrays
        return [f"    double *const outputs[{len(routine.outputs)}] = {{{outputs}}};",
                f"    return {call.replace('(inputs,', '((const double *const *)0,')};" if routine.failure
                else f"    (void){call.replace('(inputs,', '((const double *const *)0,')};"]
    return [f"    const double *inputs[{len(routine.arguments)}] = {{{inputs}}};",
            f"    double *const outputs[{len(routine.outputs)}] = {{{outputs}}};",
            f"    return {call};" if routine.failure else f"    (void){call};"]


def _c_char_array(text: str, per_line: int = 24) -> str:
    """A C initializer ``{...}`` of the UTF-8 bytes of ``text`` and a terminating 0: C99 guarantees
    string literals of only 4095 characters, and the metadata of a robot with many joints is longer."""
    data = list(text.encode("utf-8")) + [0]
    lines = [", ".join(str(b) for b in data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "{\n" + ",\n".join(f"    {line}" for line in lines) + "\n}"


def build_metadata(routines: RoutineSet, operation_counts: dict) -> dict:
    model = routines.model
    description = model.description
    return {
        "generator": "robodyn-codegen",
        "generator_version": __version__,
        "robot": description.name,
        "summary": description.summary,
        "source_sha256": description.source_sha256,
        "n": model.n,
        "nq": model.nq,
        **_floating_base_metadata(description),
        "joint_names": [j.name for j in description.joints],
        "joint_types": [j.kind for j in description.joints],
        "link_names": [j.link_name for j in description.joints],
        "frame_names": [f.name for f in description.frames],
        "limits": [{"lower": j.limits.lower, "upper": j.limits.upper, "velocity": j.limits.velocity,
                    "effort": j.limits.effort} for j in description.joints],
        "parameters": [{"name": p.name, "default": p.default} for p in description.parameters],
        "actuated": _actuated_coordinates(model),
        "method": model.method,
        "options": routines.options.as_dict(),
        "routines": {d.routine.name: {"algorithm": d.algorithm, "operations": operation_counts[d.routine.name]}
                     for d in routines.definitions},
        **_identification_metadata(model),
        **_closed_chain_metadata(model),
    }


def _floating_base_metadata(description) -> dict:
    """A floating base's link and mass properties (robodyn.Robot: is_floating_base, base_link)."""
    base = description.floating_base
    if base is None:
        return {}
    inertial = base.inertial
    return {"floating_base": {"link": base.link_name, "mass": _number(inertial.mass),
                              "com": [_number(c) for c in inertial.com],
                              "inertia": [[_number(inertial.inertia[i, j]) for j in range(3)] for i in range(3)]}}


def _number(value) -> float | str:
    """A value for JSON metadata: a float, or its text when it depends on parameters."""
    return float(value) if value.is_number else str(value)


def _actuated_coordinates(model) -> list[int]:
    """The coordinates that have a motor, ascending: a passive joint is a coordinate with zero torque. A closed
    chain's reduced model has its actuated joints as coordinates; its multiplier model (no closed form) every
    joint of its tree. A floating base's six velocity coordinates have none."""
    description, chain = model.description, model.closed_chain
    off = model.n - description.n
    if chain is not None:
        return sorted(chain.actuated) if chain.closed_form is None else list(range(model.n))
    if description.actuated is not None:
        return [off + i for i in description.actuated]
    return list(range(off, model.n))


def _closed_chain_metadata(model) -> dict:
    """Loops, joints of the virtual tree, modes and singularity loci of a closed chain (robodyn.Robot)."""
    chain = model.closed_chain
    if chain is None:
        return {}
    from ..model.routines import dimensions

    tree = chain.tree.description
    closure = model.description.closure
    form = chain.closed_form
    info = {
        "tree_joint_names": [j.name for j in tree.joints],
        "tree_joint_types": [j.kind for j in tree.joints],
        "tree_link_names": [j.link_name for j in tree.joints],
        "actuated": list(chain.actuated),
        "passive": list(chain.passive),
        "loops": [{"name": loop.name, "type": loop.kind,
                   "links": [tree.joints[k].link_name if k >= 0 else "base" for k in loop.links]}
                  for loop in closure.loops],
        "constraints": chain.constraint.rows,
        "closed_form": form is not None,
        "reason": chain.reason,
        "assembly_mode": chain.assembly_mode,
        "dimensions": {k: v for k, v in dimensions(model).items() if k != "n"},
    }
    if form is not None:
        axes = "xyz"
        first, second = form.plane[1], form.plane[2]
        info |= {
            "task_coordinates": [axes[first], axes[second]],
            "assembly_modes": list(chain.assembly_modes),
            "working_modes": [list(m) for m in form.working_modes],
            "assembly_meaning": (f"+1: the platform point lies to the left of the directed line from the passive joint "
                                 f"of {tree.joints[form.branches[0].passive].name} to that of "
                                 f"{tree.joints[form.branches[1].passive].name}, seen from +{axes[form.plane[0]]}; "
                                 "-1: to the right"),
            "working_meaning": [_working_meaning(tree, b, axes[form.plane[0]]) for b in form.branches],
            "loci": list(form.loci),
        }
    return {"closed_chain": info}


def _working_meaning(tree, branch, normal: str) -> str:
    name = tree.joints[branch.actuated].name
    if branch.actuated_kind == "prismatic":
        return (f"sigma for {name}: +1 when the passive joint it carries is ahead of the platform point along the "
                "joint's axis, -1 behind")
    return (f"sigma for {name}: +1 when the passive joint it carries is counter-clockwise (about "
            f"{'+' if branch.actuated_sign > 0 else '-'}{normal}) of the ray from {name}'s axis to the platform point, "
            "-1 clockwise")


def _identification_metadata(model) -> dict:
    """Names and layout of the dynamic and base parameters (robodyn.Robot exposes them)."""
    r = model.regressor
    if r is None:
        return {}
    return {"dynamic_parameters": {
        "names": list(r.names),
        "layout": [list(entry) for entry in r.layout],
        "base_names": list(r.base.names),
        "base_columns": list(r.base.independent),
        "base_expressions": list(r.base.expressions),
        "base_known_zero": list(r.base.known_zero),
        "base_symbolic": r.base.symbolic,
        "base_at_defaults_only": r.base.defaults_only,
        "base_gravity": None if r.base.gravity is None else list(r.base.gravity),
    }}


def _header_comment(routines: RoutineSet, prefix: str, title: str, extra: list[str]) -> str:
    model = routines.model
    description = model.description
    return "\n".join([
        "/*",
        f" * {title}",
        f" * Generated by robodyn codegen {__version__} from a description with SHA-256",
        f" * {description.source_sha256}. Do not edit: regenerate from the description instead.",
        *[f" * {line}" if line else " *" for line in extra],
        " */",
    ])


def _api_header(routines: RoutineSet, prefix: str, signatures: dict[str, str]) -> str:
    model = routines.model
    description = model.description
    macro = prefix.upper()
    n = model.n
    parameter_lines = [f"  p[{i}] = {p.name} (default {p.default!r})" for i, p in enumerate(description.parameters)]
    routine_lines = []
    for definition in routines.definitions:
        routine = definition.routine
        routine_lines.append(f"  {signatures[routine.name]}")
        routine_lines.append(f"      {routine.doc}")
        dims = dimensions(model)
        for argument, symbols in zip(routine.arguments, definition.inputs):
            note = ", may be NULL (zeros)" if argument.optional else ""
            routine_lines.append(f"      {argument.name:<5} [{len(symbols)}] {argument.doc}{note}")
        routine_lines.append(f"      {'p':<5} [{len(description.parameters)}] parameters")
        for name, output in zip(_output_names(definition), routine.outputs):
            shape = "x".join(str(s) for s in routine.shape(output, dims)) or "1"
            routine_lines.append(f"      {name:<5} [{shape}] {output.doc}")
        if routine.failure:
            routine_lines.append(f"      returns 0, or -1 when {routine.failure}")
        routine_lines.append(f"      algorithm: {definition.algorithm}")
    comment = _header_comment(routines, prefix, f"Dynamics of robot '{prefix}': C API.", [
        "",
        f"Model: M(q) qdd + C(q, qd) qd + g(q) + Fv qd + Fs sgn(qd) = tau + J(q)^T h   (n = {n}),",
        f"derived by the {model.method} route. Arrays are double, row-major; outputs must not overlap inputs.",
        "Joint order: " + ", ".join(f"{i}:{j.name}({j.kind})" for i, j in enumerate(description.joints)),
        "Parameters (settable at run time, array p):",
        *(parameter_lines or ["  (none; p may be any pointer, it is not read)"]),
        "Routines, arguments in order:",
        *routine_lines,
    ])
    return "\n".join([
        comment,
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
        *[signatures[d.routine.name] + ";" for d in routines.definitions],
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "",
        f"#endif /* {macro}_DYNAMICS_H */",
        "",
    ])


def _table_source(routines: RoutineSet, prefix: str, metadata: dict, counts: dict) -> str:
    model = routines.model
    description = model.description
    dims = dimensions(model)
    lines = [
        _header_comment(routines, prefix, f"Dynamics of robot '{prefix}': the routine table of the robodyn runtime.", [
            "",
            "Each routine wrapped in the uniform kernel signature of robodyn_abi.h, with its",
            "argument sizes, output shapes and operation count; the parameter defaults and the",
            "metadata (JSON) the runtime reads.",
        ]),
        '#include "robodyn_abi.h"',
        f'#include "{prefix}_dynamics.h"',
        "",
    ]
    lines += [_kernel_signature(prefix, d.routine) + ";" for d in routines.definitions] + [""]
    entries = []
    for definition in routines.definitions:
        routine = definition.routine
        sizes = ", ".join(str(len(symbols)) for symbols in definition.inputs) or "0"
        ranks = ", ".join(str(len(o.shape)) for o in routine.outputs)
        shapes = []
        for output in routine.outputs:
            shape = list(routine.shape(output, dims)) + [1, 1, 1]
            shapes.append(f"{{{shape[0]}, {shape[1]}, {shape[2]}}}")
        entries.append(f'    {{"{routine.name}", {prefix}_{routine.name}_kernel, {len(routine.arguments)}, {{{sizes}}}, '
                       f'{len(routine.outputs)}, {{{ranks}}}, {{{", ".join(shapes)}}}, {counts[routine.name]}L}},')
    defaults = ", ".join(repr(float(p.default)) for p in description.parameters)
    lines += [
        f"static const rd_routine {prefix}_routines[{len(entries)}] = {{",
        *entries,
        "};",
        "",
    ]
    if description.parameters:
        lines += [f"static const double {prefix}_param_defaults[{len(description.parameters)}] = {{{defaults}}};", ""]
    lines += [
        f"/* {json.dumps(metadata, sort_keys=True, separators=(',', ':'))[:60].replace('*/', '* /')}... (JSON) */",
        f"static const char {prefix}_metadata_json[] = "
        + _c_char_array(json.dumps(metadata, sort_keys=True, separators=(",", ":"))) + ";",
        "",
        f"const rd_robot {prefix}_robot = {{",
        f'    "{prefix}", {model.n}, {len(description.parameters)}, '
        f'{prefix + "_param_defaults" if description.parameters else "0"}, {prefix}_metadata_json,',
        f"    {len(entries)}, {prefix}_routines,",
        "};",
        "",
    ]
    return "\n".join(lines)


def emit(routines: RoutineSet, ready: Callable[[str, str, str], None] | None = None) -> GeneratedSources:
    """Stage 4: RoutineSet -> GeneratedSources.

    ``ready(name, text, tier)``, if given, receives each file as soon as it is final (``tier``: "speed",
    "pressure" (PRESSURE_ROUTINES), or "quick" and "large" to compile it for build time, see
    QUICK_BUILD_OPERATIONS), so that the compile stage can
    compile a routine while the next one is emitted: first the headers every translation unit includes, then
    one routine's file at a time, the table last (it holds every routine's operation count)."""
    from robodyn._native import ABI_HASH as abi_hash

    start = time.perf_counter()
    model = routines.model
    prefix = model.description.name
    hand_over = ready or (lambda name, text, tier: None)
    signatures = {d.routine.name: signature(prefix, d) for d in routines.definitions}
    files: dict[str, str] = {
        f"{prefix}_dynamics.h": _api_header(routines, prefix, signatures),
        "robot_table.h": "\n".join([
            f"/* The routine table of robot '{prefix}' (generated by robodyn codegen {__version__}). */",
            '#include "robodyn_abi.h"',
            f"#define ROBODYN_ROBOT_TABLE {prefix}_robot",
            f'#define ROBODYN_CAPSULE_NAME "robodyn.rd_robot:{abi_hash}"',
            f"extern const rd_robot {prefix}_robot;",
            "",
        ]),
    }
    for name, text in files.items():
        hand_over(name, text, "speed")
    build_tiers: dict[str, str] = {}
    counts: dict[str, int] = {}
    cse_seconds = 0.0
    routine_seconds: dict[str, float] = {}  # per routine: its definition (model stage) and its C
    clone_budget = _CLONE_BUDGET
    for definition in routines.definitions:
        routine = definition.routine
        started = time.perf_counter()
        body, operations, seconds = _body(definition, routines)
        routine_seconds[routine.name] = routines.seconds.get(routine.name, 0.0) + time.perf_counter() - started
        # A routine that calls another's kernel (DerivativeSolve) counts that kernel's operations too: the
        # table's counts are per call. Cloning and splitting go by its own C (``operations``).
        called = definition.value.jacobians_routine if isinstance(definition.value, DerivativeSolve) else None
        if called and called not in counts:
            raise ValueError(f"routine {routine.name} calls {called}, which the table must list before it")
        counts[routine.name] = operations + (counts[called] if called else 0)
        cse_seconds += seconds
        speed = routine.name in SPEED_ROUTINES
        clones = operations <= _CLONE_OPERATIONS[1] and (speed or (
            operations >= _CLONE_OPERATIONS[0] and operations <= clone_budget and routine.name not in OFFLINE_ROUTINES))
        clone_budget -= operations if clones and not speed else 0
        zeros = [f"static const double zero_{a.name}[{len(symbols)}] = {{0.0}};"
                 for a, symbols in zip(routine.arguments, definition.inputs)
                 if a.optional and f"zero_{a.name};" in "\n".join(body)]
        name = f"{prefix}_{routine.name}.c"
        files[name] = "\n".join([
            _header_comment(routines, prefix, f"Robot '{prefix}': {routine.name} ({routine.doc})", [
                "",
                f"Algorithm: {definition.algorithm}.",
                f"Operations after common-subexpression elimination: {operations}"
                + (f", and {counts[called]} in {called}, which it calls." if called else "."),
                f"See {prefix}_dynamics.h for the arguments.",
            ]),
            "#include <math.h>",
            "#include <stdlib.h>",
            f'#include "{prefix}_dynamics.h"',
            "",
            *([TRIG_FUNCTIONS] if any(call in line for line in body for call in ("rd_sin(", "rd_cos(", "rd_sincos_block(", "rd_sincos_range("))
              else []),
            *zeros,
            *([""] if zeros else []),
            *([f"/* The kernel of {called}, which this routine calls. */",
               _kernel_signature(prefix, _routine_definition(routines, called, len(definition.value.jacobians))
                                 .routine) + ";", ""] if called else []),
            "/* The routine, in the uniform signature of the runtime's table (robodyn_abi.h). */",
            *_kernel_definition(prefix, definition, body, operations, clones),
            "",
            "/* The C API (see the header): the same routine with named arguments. */",
            signatures[routine.name],
            "{",
            *_public_body(prefix, definition),
            "}",
            "",
        ])
        tier = ("pressure" if routine.name in PRESSURE_ROUTINES and operations <= PRESSURE_OPERATIONS else
                "speed" if speed or operations <= QUICK_BUILD_OPERATIONS else
                "large" if operations > LARGE_BUILD_OPERATIONS else "quick")
        if tier != "speed":
            build_tiers[name] = tier
        hand_over(name, files[name], tier)
    metadata = build_metadata(routines, counts)
    table = f"{prefix}_table.c"
    files[table] = _table_source(routines, prefix, metadata, counts)
    hand_over(table, files[table], "speed")
    content_hash = hashlib.sha256("".join(files[k] for k in sorted(files)).encode()).hexdigest()
    return GeneratedSources(robot=prefix, files=files,
                            metadata=dict(metadata, content_sha256=content_hash), operation_counts=counts,
                            timings={"emit_s": time.perf_counter() - start, "cse_s": cse_seconds,
                                     "routine_seconds": routine_seconds}, build_tiers=build_tiers)
