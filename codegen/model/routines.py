"""Stage 3: what each routine of the table computes, as SymPy values (no C yet).

For every entry of the runtime's routine table (``robodyn.routines.TABLE``) the
model stage defines its value here, in ``DEFINITIONS``: a function of the
SymbolicModel that returns the routine's outputs, either as expressions
(``Expressions``) or as the solution of a linear system with the mass matrix
(``TreeSolve``), plus one line saying which algorithm produced it (it heads the
generated C file). A routine without a definition, or whose definition returns
None for a robot, is not compiled for it.

Adding a routine: its table entry, and its definition here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Union

import sympy as sp
from robodyn.options import BuildOptions
from robodyn.routines import TABLE, Routine

from .lagrange import SymbolicModel


@dataclass(frozen=True)
class Expressions:
    """Outputs given as expressions (a scalar output is a 1x1 matrix).

    ``guards``: values that must be positive, else the routine fails (the articulated-body
    algorithm's pivots: M positive definite)."""

    outputs: tuple[sp.ImmutableMatrix, ...]
    guards: tuple[sp.Expr, ...] = ()
    definitions: tuple = ()  # intermediate symbols of the routine's own program (the regressor's), in order


@dataclass(frozen=True)
class TreeSolve:
    """The output solves matrix · out = rhs, matrix symmetric positive definite with the sparsity of the
    kinematic tree (``parents``): a sparse L^T D L factorisation unrolled for the tree, no inverse."""

    matrix: sp.ImmutableMatrix
    rhs: sp.ImmutableMatrix
    parents: tuple[int, ...]


@dataclass(frozen=True)
class DerivativeSolve:
    """Forward-dynamics derivatives from one factorisation of M: q̈ solves ``solve`` (M q̈ = rhs, as a
    TreeSolve); the ``jacobians`` (expressions in the model's q̈ symbols ``qdd``, over ``definitions``) are
    evaluated at that q̈ and each is replaced by -M⁻¹ jacobian; a last output is M⁻¹.

    The jacobians are the outputs of the routine ``jacobians_routine`` (inputs q, q̇, q̈): the compiled routine
    calls its kernel rather than carrying a second copy of that program. The Panda's C went from 187 to 55 kB, its
    GCC time from 1.35 to 0.43 s, the two derivative routines' definition and emission from 0.99 to 0.51 s, for 7 %
    more instructions per call (9,879 instead of 9,208). ``jacobians``, ``qdd`` and ``definitions`` are read by the
    self-check's reference evaluation, not by the emitter."""

    solve: TreeSolve
    qdd: tuple[sp.Symbol, ...]
    jacobians: tuple[sp.ImmutableMatrix, ...]
    jacobians_routine: str
    definitions: tuple = ()


Value = Union[Expressions, TreeSolve, DerivativeSolve]


@dataclass(frozen=True)
class RoutineDefinition:
    routine: Routine
    value: Value
    algorithm: str  # how it is computed: the header line of its generated C file
    inputs: tuple[tuple[sp.Symbol, ...], ...]  # the symbols of each argument, in order


@dataclass(frozen=True)
class RoutineSet:
    """The model and the definitions of the routines it will be compiled with, in table order."""

    model: SymbolicModel
    options: BuildOptions
    definitions: tuple[RoutineDefinition, ...]
    seconds: dict = field(default_factory=dict, compare=False)  # routine name -> time its definition took


def argument_symbols(model: SymbolicModel) -> dict[str, tuple[sp.Symbol, ...]]:
    """The model's symbols for each argument name of the table."""
    symbols = {"q": model.q, "qd": model.qd, "qdd": model.qdd, "tau": model.tau, "h": model.wrench}
    if model.regressor is not None:
        symbols |= {"qdr": model.regressor.qdr, "qddr": model.regressor.qddr}
    chain = model.closed_chain
    if chain is not None:
        symbols |= {"qt": chain.tree.q, "qtd": chain.tree.qd}
        if chain.closed_form is not None:
            symbols["x"] = TASK_SYMBOLS
    return symbols


#: The task coordinates as the inverse geometric model's input (the model's own ξ are defined by its DGM).
TASK_SYMBOLS = sp.symbols("task1 task2", real=True)


def dimensions(model: SymbolicModel) -> dict[str, int]:
    """The sizes the routine table's shapes name: n joints, p dynamic and b base parameters."""
    dims = {"n": model.n, "nq": model.nq, "f": len(model.description.frames)}
    if model.regressor is not None:
        dims |= {"p": len(model.regressor.names), "b": len(model.regressor.base.names)}
    chain = model.closed_chain
    if chain is not None:
        dims |= {"t": len(chain.tree.q), "k": chain.constraint.rows, "np": len(chain.passive)}
        if chain.closed_form is not None:
            dims |= {"e": len(chain.closed_form.xi), "am": len(chain.assembly_modes),
                     "wm": len(chain.closed_form.working_modes)}
    return dims


def _matrix(value) -> sp.ImmutableMatrix:
    if isinstance(value, sp.MatrixBase):
        return sp.ImmutableMatrix(value)
    return sp.ImmutableMatrix([[value]])


def _route(model: SymbolicModel, lagrange: str, recursive: str) -> str:
    chain = model.closed_chain
    if chain is not None:
        tree = lagrange if chain.tree.method == "lagrange" else recursive
        if chain.closed_form is None:
            return f"{tree}, of the virtual tree (the loops: loop_residual, loop_jacobian, robodyn.closed_chain)"
        return (f"projected from the virtual tree ({tree}) on the actuated coordinates with G = [I; Jp]: "
                "M = G^T M_x G, C = G^T (M_x Gdot + C_x G), g = G^T g_x")
    return lagrange if model.method == "lagrange" else recursive


def _mass_matrix(model, options):
    return Expressions((_matrix(model.M),)), _route(
        model, "M(q) = sum of m Jv^T Jv + Jw^T R I R^T Jw over links and rotors (Euler-Lagrange, closed form)",
        "M(q) by the composite-rigid-body algorithm (recursive route)")


def _coriolis_matrix(model, options):
    return Expressions((_matrix(model.C),)), _route(
        model, "C(q, qd) from the Christoffel symbols of M (Euler-Lagrange, closed form)",
        "C(q, qd) by the recursive Coriolis-matrix algorithm of Echeandia & Wensing (2021)")


def _gravity(model, options):
    return Expressions((_matrix(model.g),)), _route(
        model, "g(q) = dP/dq (Euler-Lagrange, closed form)", "g(q) by Newton-Euler with qd = qdd = 0")


def _friction(model, options):
    return Expressions((_matrix(model.friction),)), "Fv qd + Fs sgn(qd), joint by joint"


def _nonlinear_effects(model, options):
    return Expressions((_matrix(model.nonlinear_effects()),)), _route(
        model, "C(q, qd) qd + g(q) + friction (Euler-Lagrange, closed form)",
        "C(q, qd) qd + g(q) by recursive Newton-Euler with qdd = 0, plus friction")


def _inverse_dynamics(model, options):
    return Expressions((_matrix(model.inverse_dynamics(with_wrench=True)),)), _route(
        model, "tau = M qdd + C qd + g + friction - J^T h (Euler-Lagrange, closed form)",
        "tau by recursive Newton-Euler, plus friction - J^T h")


def _has_forward_dynamics(model) -> bool:
    """False for a closed chain without a closed form: the tree's unconstrained accelerations would mislead
    (robodyn.closed_chain solves the loops)."""
    chain = model.closed_chain
    return chain is None or chain.closed_form is not None


def _tree_parents(model) -> tuple[int, ...]:
    """The parent of each coordinate in the sparsity of M: a floating base's six form a chain that every joint
    hangs from (its 6 x 6 block is dense and each joint's column has base entries)."""
    parents = tuple(joint.parent for joint in model.description.joints)
    if model.description.floating_base is None:
        return parents
    return (-1, 0, 1, 2, 3, 4) + tuple(5 if parent < 0 else 6 + parent for parent in parents)


def _forward_dynamics(model, options):
    if not _has_forward_dynamics(model):
        return None
    rhs = sp.Matrix(model.tau) - model.nonlinear_effects() + model.tool_jacobian.T * sp.Matrix(model.wrench)
    if options.forward == "aba":
        if model.aba is None:
            from robodyn.errors import BuildError

            raise BuildError("forward dynamics by the articulated-body algorithm needs the recursive route and a "
                             "robot without motor rotors and without coupled (mimic) joints; use the default "
                             "(--forward ltdl)")
        qdd, pivots = model.aba
        return (Expressions((_matrix(qdd),), guards=tuple(pivots)),
                "qdd by the articulated-body algorithm (Featherstone); fails if a pivot D_i <= 0")
    return (TreeSolve(sp.ImmutableMatrix(model.M), sp.ImmutableMatrix(rhs), _tree_parents(model)),
            "qdd solving M qdd = tau + J^T h - bias by a sparse L^T D L factorisation of M unrolled for the "
            "kinematic tree (no fill-in); fails if M is not positive definite")


#: Values several routines of the last model share (its inverse-dynamics derivatives, its frames), derived once.
_LAST_MODEL: dict = {}


def _shared(model, key, derive):
    """``derive()`` once per model and key: routines defined in turn for one model share it."""
    if _LAST_MODEL.get("model") is not model:
        _LAST_MODEL.clear()
        _LAST_MODEL["model"] = model
    if key not in _LAST_MODEL:
        _LAST_MODEL[key] = derive()
    return _LAST_MODEL[key]


def _id_derivatives(model):
    """(definitions, dtau/dq, dtau/dqd, algorithm) of the inverse dynamics without the wrench, in the model's
    q, q̇, q̈ symbols: derived once for both derivative routines."""
    from . import rnea_derivatives

    analytical = rnea_derivatives.applies(model)
    return _shared(model, "derivatives", lambda: _derive_id_derivatives(model) if analytical else _forward_mode(model))


def _derive_id_derivatives(model):
    from . import rnea_derivatives

    result = rnea_derivatives.rnea_derivatives(model)
    return (result.definitions, sp.ImmutableMatrix(result.d_q), sp.ImmutableMatrix(result.d_qd),
            "analytical derivatives of recursive Newton-Euler in the world frame (Carpentier & Mansard 2018): "
            "S_i^T (I^C Psi'' + B^C Psi') per pair of joints; Coulomb friction's derivative is zero")


def _forward_mode(model):
    from .derivatives import differentiate, tangent_seeds

    n = model.n
    floating = model.description.floating_base is not None
    directions, seeds = tangent_seeds(model.q, model.qd, floating)
    definitions, jacobian = differentiate(model.definitions, list(model.inverse_dynamics(with_wrench=False)),
                                          directions, seeds=seeds)
    jacobian = sp.Matrix(jacobian)
    tangent = ("; a floating base's columns along its tangent space (p + R dnu, quaternion x exp(dw/2)), "
               "as Pinocchio's" if floating else "")
    return (tuple(definitions), sp.ImmutableMatrix(jacobian[:, :n]), sp.ImmutableMatrix(jacobian[:, n:]),
            "forward-mode differentiation of the inverse-dynamics program, intermediate by intermediate "
            f"(chain rule); sgn' = 0{tangent}")


def _inverse_dynamics_derivatives(model, options):
    if not options.builds_derivatives(model.description.floating_base is not None):
        return None
    definitions, d_q, d_qd, algorithm = _id_derivatives(model)
    return Expressions((d_q, d_qd), definitions=definitions), algorithm


def _forward_dynamics_derivatives(model, options):
    if not _has_forward_dynamics(model) or not options.builds_derivatives(model.description.floating_base is not None):
        return None
    definitions, d_q, d_qd, algorithm = _id_derivatives(model)
    solve = TreeSolve(sp.ImmutableMatrix(model.M), sp.ImmutableMatrix(sp.Matrix(model.tau) - model.nonlinear_effects()),
                      _tree_parents(model))
    return (DerivativeSolve(solve, tuple(model.qdd), (d_q, d_qd), "inverse_dynamics_derivatives", definitions),
            "qdd by the sparse L^T D L factorisation of M (as forward_dynamics), the inverse-dynamics derivatives "
            f"at (q, qd, qdd) by that routine's kernel ({algorithm}), then -M^-1 dtau/dq, -M^-1 dtau/dqd and M^-1 "
            "by the same factorisation; fails if M is not positive definite")


def _kinetic_energy(model, options):
    return Expressions((_matrix(model.kinetic_energy),)), "0.5 qd^T M(q) qd"


def _potential_energy(model, options):
    return Expressions((_matrix(model.potential_energy),)), "sum of -m g^T c over links and rotors"


def _tool_pose(model, options):
    return Expressions((_matrix(model.tool_pose),)), "product of the joint transforms to the tool frame"


def _tool_jacobian(model, options):
    return Expressions((_matrix(model.tool_jacobian),)), "geometric Jacobian: z x (p_tool - p_joint), z per joint"


def _frames(model):
    """The frame model of the description (three routines use it)."""
    from .frames import derive_frames

    return _shared(model, "frames", lambda: derive_frames(model.description))


def _frame_value(attribute: str, algorithm: str):
    def define(model, options):
        if model.closed_chain is not None:
            return None  # a closed chain's coordinates are its motors: frames would need the loops solved
        frames = _frames(model)
        if frames is None:
            return None
        return Expressions((getattr(frames, attribute),), definitions=frames.definitions), algorithm
    return define


def _floating_base_rows(model):
    """(R, p, c, m, rows): a floating base's rotation and position, the centre of mass (world), the total mass
    and M's first six rows (the spatial momentum per velocity coordinate, base frame: force, then moment about
    the base origin)."""
    from .. import geometry

    R = geometry.quaternion_rotation(*model.q[3:7])
    p = sp.Matrix(model.q[:3])
    M = sp.Matrix(model.M)
    mass = M[0, 0]
    # M's linear-angular block is m [c]x^T = -m [c]x for the centre c in base coordinates.
    local = sp.Matrix([M[1, 5], -M[0, 5], M[0, 4]]) / mass
    return R, p, p + R * local, mass, M[:6, :]


def _to_centroid(R, p, c, wrench: sp.Matrix) -> sp.Matrix:
    """A (force, moment about the base origin) in base coordinates, as (force, moment about c) in world axes."""
    force = R * wrench[:3, 0]
    return sp.Matrix([*force, *(R * wrench[3:, 0] + (p - c).cross(force))])


def _center_of_mass(model, options):
    rows = _floating_base_rows(model)
    return Expressions((sp.ImmutableMatrix(rows[2]),)), "c = p + R M_lin,ang / m: from M's base block"


def _center_of_mass_jacobian(model, options):
    rows = _floating_base_rows(model)
    R, _, _, mass, top = rows
    return Expressions((sp.ImmutableMatrix(R * top[:3, :] / mass),)), (
        "Jc = R M[0:3, :] / m: the linear momentum rows of M (base frame) over the mass")


def _centroidal_momentum_matrix(model, options):
    rows = _floating_base_rows(model)
    R, p, c, _, top = rows
    columns = [_to_centroid(R, p, c, top[:, k]) for k in range(top.cols)]
    return Expressions((sp.ImmutableMatrix(sp.Matrix.hstack(*columns)),)), (
        "Ag = X*(c) M[0:6, :]: M's base rows are the spatial momentum per coordinate, moved to the centre of mass")


def _centroidal_momentum_bias(model, options):
    rows = _floating_base_rows(model)
    R, p, c, _, _ = rows
    wrench = sp.Matrix(model.nonlinear_effects()[:6, 0]) - sp.Matrix(model.g[:6, 0])  # no friction on the base
    return Expressions((sp.ImmutableMatrix(_to_centroid(R, p, c, wrench)),)), (
        "Agdot qd = X*(c) (C qd)[0:6]: the base rows of Newton-Euler at qdd = 0 without gravity are the rate of "
        "change of the momentum")


def _regressor(model, options):
    r = model.regressor
    return (Expressions((sp.ImmutableMatrix(r.Y),), definitions=r.definitions),
            "Y by a Newton-Euler pass linear in each body's ten parameters (Atkeson, An & Hollerbach 1986)")


def _base_regressor(model, options):
    r = model.regressor
    return (Expressions((sp.ImmutableMatrix(r.Y.extract(list(range(r.Y.rows)), list(r.base.independent))),),
                        definitions=r.definitions),
            "the linearly independent columns of Y (base parameters found at build time)")


def _slotine_li_regressor(model, options):
    r = model.regressor
    Y = r.slotine_li.extract(list(range(r.slotine_li.rows)), list(r.base.independent))
    return (Expressions((sp.ImmutableMatrix(Y),), definitions=r.definitions),
            "f = I a_r + B(I, v) v_r per body (Christoffel-consistent C), base columns")


def _dynamic_parameters(model, options):
    return Expressions((sp.ImmutableMatrix(model.regressor.values),)), (
        "barycentric parameters of each link (rotors lumped), rotor spin inertias, friction")


def _base_parameter_matrix(model, options):
    return Expressions((model.regressor.base.matrix,)), "K = [I | beta] by columns: Y_dependent = Y_base beta"


def _closed_form(model):
    chain = model.closed_chain
    return chain.closed_form if chain is not None else None


def _direct_geometry(model, options):
    form = _closed_form(model)
    if form is None:
        return None
    return (Expressions((sp.ImmutableMatrix.vstack(*[m.T for m in form.dgm]),)),
            "platform point where the circles about the two anchors meet, on side +1 then -1 of anchor 1 -> 2")


def _inverse_geometry(model, options):
    form = _closed_form(model)
    if form is None:
        return None
    rows = [m.T.xreplace(dict(zip(form.xi, TASK_SYMBOLS))) for m in form.igm]
    return (Expressions((sp.ImmutableMatrix.vstack(*rows),)),
            "each actuated coordinate from the platform point (a line or a circle meeting a circle), per working mode")


def _passive_geometry(model, options):
    form = _closed_form(model)
    if form is None:
        return None
    rows = [m.T.xreplace(dict(zip(form.xi, dgm))) for m, dgm in zip(form.passive, form.dgm)]
    return Expressions((sp.ImmutableMatrix.vstack(*rows),)), "atan2 of the distal links' directions, per assembly mode"


def _loop_matrices(model, options):
    form = _closed_form(model)
    if form is None:
        return None
    return Expressions((form.A, form.B)), "A = dh/dx, B = dh/dq of h_i = |P - C_i|^2 - L_i^2"


def _chain_value(attribute: str, algorithm: str):
    def define(model, options):
        chain = model.closed_chain
        value = getattr(chain, attribute, None) if chain is not None else None
        if value is None:
            return None
        return Expressions((_matrix(value),)), algorithm
    return define


def _singularity_measures(model, options):
    form = _closed_form(model)
    if form is None:
        return None
    return Expressions((form.singularity,)), "det A, det B and their normalised forms"


def _tree_routine(build):
    def define(model, options):
        chain = model.closed_chain
        if chain is None:
            return None
        value, algorithm = build(chain)
        return Expressions(tuple(_matrix(v) for v in value), definitions=tuple(chain.tree.definitions)), algorithm
    return define


#: Routine name -> definition: (model, options) -> (value, algorithm) or None (not for this robot).
DEFINITIONS: dict[str, Callable[[SymbolicModel, BuildOptions], tuple[Value, str] | None]] = {
    "mass_matrix": _mass_matrix,
    "coriolis_matrix": _coriolis_matrix,
    "gravity": _gravity,
    "friction": _friction,
    "nonlinear_effects": _nonlinear_effects,
    "inverse_dynamics": _inverse_dynamics,
    "forward_dynamics": _forward_dynamics,
    "inverse_dynamics_derivatives": _inverse_dynamics_derivatives,
    "forward_dynamics_derivatives": _forward_dynamics_derivatives,
    "kinetic_energy": _kinetic_energy,
    "potential_energy": _potential_energy,
    "tool_pose": _tool_pose,
    "tool_jacobian": _tool_jacobian,
    "frame_placements": _frame_value("placements", "world pose of each link frame: product of the joint transforms"),
    "frame_jacobians": _frame_value("jacobians", "geometric Jacobian of each frame's origin, world-aligned"),
    "frame_bias_accelerations": _frame_value(
        "accelerations", "velocity-product accelerations of the bodies (Newton-Euler, qdd = 0), shifted to each "
                         "frame's origin: classical acceleration a + w x v, world axes"),
    "center_of_mass": _center_of_mass,
    "center_of_mass_jacobian": _center_of_mass_jacobian,
    "centroidal_momentum_matrix": _centroidal_momentum_matrix,
    "centroidal_momentum_bias": _centroidal_momentum_bias,
    "regressor": _regressor,
    "base_regressor": _base_regressor,
    "slotine_li_regressor": _slotine_li_regressor,
    "dynamic_parameters": _dynamic_parameters,
    "base_parameter_matrix": _base_parameter_matrix,
    "direct_geometry": _direct_geometry,
    "inverse_geometry": _inverse_geometry,
    "passive_geometry": _passive_geometry,
    "loop_matrices": _loop_matrices,
    "task_jacobian": _chain_value("task_jacobian", "J = -A^-1 B (adjugate over det A)"),
    "task_jacobian_derivative": _chain_value("task_jacobian_dot", "Jdot = -A^-1 (Adot J + Bdot)"),
    "task_bias": _chain_value("task_bias", "b = Jdot qd"),
    "passive_jacobian": _chain_value("passive_jacobian", "Jp = -A_x^-1 B_x of the tree's loop equations"),
    "passive_jacobian_derivative": _chain_value("passive_jacobian_dot", "Jpdot = -A_x^-1 (Adot_x Jp + Bdot_x)"),
    "singularity_measures": _singularity_measures,
    "tree_mass_matrix": _tree_routine(lambda chain: ((chain.tree.M,), "M of the virtual tree")),
    "tree_nonlinear_effects": _tree_routine(lambda chain: ((chain.tree.nonlinear_effects(),),
                                                           "C qd + g + friction of the virtual tree")),
    "tree_potential_energy": _tree_routine(lambda chain: ((chain.tree.potential_energy,),
                                                          "sum of -m g^T c over the tree's links")),
    "loop_residual": _tree_routine(lambda chain: ((chain.constraint,), "loop-closure equations h(qt)")),
    "loop_jacobian": _tree_routine(lambda chain: ((chain.constraint_jacobian,), "H = dh/dqt")),
    "loop_bias": _tree_routine(lambda chain: ((chain.constraint_bias,), "Hdot qtd")),
}
#: The definitions above as they come: only these are known to need no regressor outside _NEEDS_REGRESSOR, so only
#: these are defined early (define_early); a routine registered or replaced later may read the regressor.
_BUILT_IN = dict(DEFINITIONS)


#: The centre of mass and the centroidal momentum come from a floating base's rows of M.
_NEEDS_FLOATING_BASE = {"center_of_mass", "center_of_mass_jacobian", "centroidal_momentum_matrix",
                        "centroidal_momentum_bias"}
_NEEDS_REGRESSOR = {"regressor", "base_regressor", "slotine_li_regressor", "dynamic_parameters",
                    "base_parameter_matrix"}


def _define(routine, model: SymbolicModel, options: BuildOptions):
    """(definition result or None when this robot does not have the routine, seconds it took)."""
    define = DEFINITIONS.get(routine.name)
    if routine.name in _NEEDS_REGRESSOR and model.regressor is None:
        define = None
    if routine.name in _NEEDS_FLOATING_BASE and model.description.floating_base is None:
        define = None
    started = time.perf_counter()
    result = define(model, options) if define is not None else None
    return result, time.perf_counter() - started


def define_early(model: SymbolicModel, options: BuildOptions) -> dict:
    """The definitions of the built-in routines that do not need the regressor (routines registered later are
    defined with the final model: they may read it), from a model whose regressor is still being derived
    (codegen.model.derive_model's ``meanwhile``), for define_routines' ``early``: TIAGo's derivative routines and
    frame placements take 3.5 s, which the wait for its identification pass absorbs."""
    import robodyn.routines

    return {routine.name: _define(routine, model, options) for routine in robodyn.routines.TABLE
            if routine.name not in _NEEDS_REGRESSOR and routine.name in _BUILT_IN
            and DEFINITIONS.get(routine.name) is _BUILT_IN[routine.name]}


def define_routines(model: SymbolicModel, options: BuildOptions, early: dict | None = None) -> RoutineSet:
    """Stage 3: SymbolicModel -> RoutineSet (the value of every table routine this robot has). ``early``: routines
    already defined by define_early (from the same model, before its regressor was there)."""
    import robodyn.routines

    symbols = argument_symbols(model)
    early = early or {}
    definitions = []
    seconds: dict[str, float] = {}
    for routine in robodyn.routines.TABLE:  # read at call time: routines registered later count too
        result, seconds[routine.name] = early[routine.name] if routine.name in early else _define(
            routine, model, options)
        if result is None:
            continue
        value, algorithm = result
        inputs = tuple(symbols[a.name] for a in routine.arguments)
        if isinstance(value, Expressions):
            outputs = value.outputs
        elif isinstance(value, DerivativeSolve):
            outputs = value.jacobians + (value.solve.matrix,)
        else:
            outputs = (value.rhs,)
        if len(outputs) != len(routine.outputs):
            raise ValueError(f"routine {routine.name}: the table declares {len(routine.outputs)} outputs, "
                             f"its definition gives {len(outputs)}")
        definitions.append(RoutineDefinition(routine, value, algorithm, inputs))
    return RoutineSet(model, options, tuple(definitions),
                      {d.routine.name: seconds[d.routine.name] for d in definitions})


__all__ = ["Expressions", "TreeSolve", "DerivativeSolve", "RoutineDefinition", "RoutineSet", "DEFINITIONS", "define_routines",
           "define_early", "argument_symbols", "dimensions", "TABLE"]
