"""Stage 6 (its numbers): the compiled module against the SymPy model and against identities.

On random states, with the default parameters:

* every compiled routine = its symbolic value (the same SymPy expressions printed
  as a NumPy function, evaluated independently of the C), to 1e-12 relative to
  the largest entry; a ``TreeSolve`` against ``numpy.linalg.solve`` of its
  matrix and right-hand side so evaluated. This part is driven by the routine
  table: a new routine is checked without touching this file;
* identities between routines, where the robot has them: M symmetric positive
  definite; Ṁ − 2C skew-symmetric (Ṁ by central differences along q̇);
  inverse ∘ forward dynamics = identity, with and without a tool wrench.

Every tolerance is relative to the magnitudes of the model's own values, so a
robot in millimetres and grams checks like one in metres and tonnes: the
symbolic comparison divides by the largest entry (of either side; for torques and accelerations at least
ZERO_FLOOR of the largest torque or acceleration, see FLOOR_QUANTITIES), the skew
check by the largest of Ṁ and C, and the inverse/forward round trip by the
largest term of M q̈ + C q̇ + g (its torques come from the model's inverse
dynamics, its wrenches are scaled to the same torques).

Joint positions are drawn inside the joint limits; a joint whose limits are
absent, or have zero width (exporters write lower = upper = 0 as a
placeholder), is drawn over ±π (revolute) or ± the robot's reach (prismatic;
the sum of its joint offsets, 1 m if that is zero).

With ``BuildOptions(selfcheck=False)`` nothing runs: the report is ``skipped()``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import sympy as sp

from ..model.numeric import NumPyPrograms
from ..model.program import needed_definitions
from ..model.routines import DerivativeSolve, Expressions, RoutineDefinition, RoutineSet, TreeSolve

SYMBOLIC_TOLERANCE = 1e-12
# An output that vanishes for every state while its terms do not (g and C of a robot whose centres of mass lie on
# axes gravity cannot turn) is rounding noise on both sides of the comparison: it is judged against at least
# ZERO_FLOOR of the largest value of its quantity among the routines. Rounding leaves about 1e-16 of the terms'
# size, which that largest value bounds, so such an output passes, while an error must still be below 1e-15 of it
# to pass unseen.
ZERO_FLOOR = 1e-3
#: The quantity of each output (routine -> one entry per output; None: judged on its own scale only). Quantities,
#: not the largest value of any routine: units differ between routines (a robot in millimetres and grams has
#: torques of 1e11 and an inverse inertia of 1e-10), and the floor must not cover a small quantity with a big one.
#: With the sampled velocities and accelerations of order 1, M and C are on the torques' scale.
FLOOR_QUANTITIES = {
    "mass_matrix": ("torque",), "coriolis_matrix": ("torque",), "gravity": ("torque",), "friction": ("torque",),
    "nonlinear_effects": ("torque",), "inverse_dynamics": ("torque",),
    "inverse_dynamics_derivatives": ("torque", "torque"),
    "forward_dynamics": ("acceleration",),
    "forward_dynamics_derivatives": ("acceleration", "acceleration", None),
}
IDENTITY_TOLERANCE = 1e-9
SKEW_TOLERANCE = 1e-6  # finite differences of M limit this one
DIFFERENCE_TOLERANCE = 1e-6  # derivatives against central differences, beyond the differences' own error
# Relative step of those differences: truncation ~1e-10 relative, and rounding kept low on robots whose torques
# are 1e5 times their inertias (tonnes and millimetres), where a step of 1e-6 gave 1e-6 of noise.
DIFFERENCE_STEP = 1e-5


@dataclass(frozen=True)
class Check:
    name: str
    error: float
    tolerance: float
    note: str = ""  # a figure worth reporting beside the error (closed chains: the nearest singularity)

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.error) and self.error <= self.tolerance)


def reach(description) -> float:
    """The robot's length scale: the sum of its joint offsets (translations of the joint placements and
    successors, at the default parameters); 1.0 when that is zero or not a number."""
    defaults = {p.symbol: p.default for p in description.parameters}
    total = 0.0
    for joint in description.joints:
        for transform in (joint.placement, joint.successor):
            try:
                offset = np.array([float(sp.sympify(transform[i, 3]).subs(defaults)) for i in range(3)])
            except (TypeError, ValueError, AttributeError, IndexError):
                continue
            total += float(np.linalg.norm(offset)) if np.all(np.isfinite(offset)) else 0.0
    return total if 0.0 < total < 1e12 else 1.0


def joint_range(joint, length: float) -> tuple[float, float]:
    """Where a joint's positions are sampled: its limits when they have a width, else ±π (revolute) or
    ±``length`` (prismatic), anchored on the one limit given when only one is."""
    half = np.pi if joint.kind == "revolute" else length
    lower, upper = joint.limits.lower, joint.limits.upper
    finite = [v is not None and np.isfinite(v) for v in (lower, upper)]
    if all(finite) and upper > lower:
        return float(lower), float(upper)
    if finite[0] and not finite[1]:
        return float(lower), float(lower) + 2 * half
    if finite[1] and not finite[0]:
        return float(upper) - 2 * half, float(upper)
    return -half, half


def _joint_samples(description, count: int, rng) -> np.ndarray:
    """Joint positions within the limits; a floating base's pose first (a position within the robot's reach,
    a uniformly random unit quaternion)."""
    q = np.empty((count, len(description.joints)))
    length = reach(description)
    for i, joint in enumerate(description.joints):
        low, high = joint_range(joint, length)
        q[:, i] = rng.uniform(low, high, count)
    if description.floating_base is None:
        return q
    quaternion = rng.normal(size=(count, 4))
    quaternion /= np.linalg.norm(quaternion, axis=1, keepdims=True)
    return np.hstack([rng.uniform(-length, length, (count, 3)), quaternion, q])


#: Closed chains are checked where they assemble and at least this far from their singularities (normalised
#: measures: sines of the angles that vanish there).
SINGULARITY_MARGIN = 0.1


def assembled_samples(robot, description, count: int, rng, margin: float = SINGULARITY_MARGIN) -> np.ndarray:
    """``count`` actuated positions of a closed chain, drawn within the joint limits, where it assembles in
    the robot's mode with both normalised singularity measures above ``margin``."""
    from robodyn.errors import SelfCheckError

    kept: list[np.ndarray] = []
    for _ in range(200):
        q = _joint_samples(description, 8 * count, rng)
        measures = robot.singularity_measures(q)
        x = robot.dgm_modes(q)[:, 0 if robot.assembly_mode == 1 else 1, :]
        good = np.all(np.isfinite(x), axis=1) & np.all(np.abs(measures[:, 2:]) > margin, axis=1)
        kept += list(q[good])
        if len(kept) >= count:
            return np.array(kept[:count])
    raise SelfCheckError(f"no configuration of {description.name} within its joint limits assembles at least "
                         f"{margin} away from its singularities; check the lengths and the limits of its joints")


def random_inputs(routines: RoutineSet, count: int, seed: int = 0, robot=None) -> dict[str, np.ndarray]:
    """A batch of ``count`` random values for every argument name used by the routines (a closed chain's
    positions where it assembles, with the compiled ``robot``'s geometry)."""
    rng = np.random.default_rng(seed)
    model = routines.model
    n = model.n
    if model.closed_chain is not None and robot is not None and model.closed_chain.closed_form is not None:
        q = assembled_samples(robot, model.description, count, rng)
    else:
        q = _joint_samples(model.description, count, rng)
    values = {"q": q, "qd": rng.uniform(-2.0, 2.0, (count, n)), "qdd": rng.uniform(-2.0, 2.0, (count, n)),
              "tau": rng.normal(0.0, 10.0, (count, n)), "h": rng.normal(0.0, 5.0, (count, 6))}
    if model.closed_chain is not None and robot is not None and model.closed_chain.closed_form is not None:
        values["x"] = robot.dgm(q)
        # The tree routines hold for any tree state: checked off the loops too, where h(qt) is not zero.
        values["qt"] = robot.tree_positions(q) + rng.normal(0.0, 0.1, (count, model.closed_chain.tree.n))
        values["qtd"] = rng.uniform(-2.0, 2.0, (count, model.closed_chain.tree.n))
    for definition in routines.definitions:  # arguments of routines added later: uniform in [-1, 1]
        for argument, symbols in zip(definition.routine.arguments, definition.inputs):
            if argument.name not in values:
                values[argument.name] = rng.uniform(-1.0, 1.0, (count, len(symbols)))
    return values


def rounding_floors(references: dict) -> dict:
    """routine name -> the smallest scale of each output's comparison (see FLOOR_QUANTITIES): ZERO_FLOOR times the
    largest finite value of its quantity among ``references`` (routine name -> its reference outputs, or None), 0
    for an output without one."""
    largest: dict[str, float] = {}
    for name, outputs in references.items():
        for quantity, output in zip(FLOOR_QUANTITIES.get(name, ()), outputs or ()):
            if quantity is not None:
                value = np.abs(np.asarray(output, dtype=float))
                largest[quantity] = max(largest.get(quantity, 0.0), float(np.max(value, initial=0.0,
                                                                                  where=np.isfinite(value))))
    return {name: [ZERO_FLOOR * largest[q] if q is not None and q in largest else 0.0
                   for q in (FLOOR_QUANTITIES.get(name, ()) + (None,) * len(outputs or ()))[:len(outputs or ())]]
            for name, outputs in references.items()}


def _relative(a: np.ndarray, b: np.ndarray, scale: float = 0.0) -> float:
    """max |a - b| relative to the largest entry of a or b (or ``scale`` if larger)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not a.size:
        return 0.0
    scale = max(float(scale), float(np.max(np.abs(b))), float(np.max(np.abs(a))))
    difference = float(np.max(np.abs(a - b)))
    return difference / scale if scale > 0 else difference


def _vectorised(routines: RoutineSet, definition: RoutineDefinition, matrices, inputs=None,
                programs: NumPyPrograms | None = None) -> callable:
    """f(inputs, params) -> list of arrays (samples, rows, cols), one per matrix; NumPy evaluates
    all samples at once (each symbol's argument is a column of the batch). ``inputs``: the symbols of each
    argument, if not the routine's; ``programs``: the functions' printer, shared by the routines of one check
    (each definition printed once)."""
    model = routines.model
    entries = [e for matrix in matrices for e in matrix.flat()]  # a list: item access is slow on large matrices
    own = definition.value.definitions if isinstance(definition.value, (Expressions, DerivativeSolve)) else ()
    definitions = tuple(model.definitions) + tuple(own)
    prelude = needed_definitions(definitions, entries) if definitions else []
    arguments = [list(symbols) for symbols in (definition.inputs if inputs is None else inputs)]
    arguments += [list(model.parameters)]
    function = (programs or NumPyPrograms()).function(arguments, prelude, entries)

    def evaluate(inputs: list[np.ndarray], params: np.ndarray) -> list[np.ndarray]:
        count = inputs[0].shape[0] if inputs else 1  # a routine without arguments: one value
        flat = function(*[x.T for x in inputs], params)
        values = np.empty((len(flat), count))  # entry by entry: a number fills its row
        for k, value in enumerate(flat):
            values[k] = value
        result, start = [], 0
        for matrix in matrices:
            rows, cols = matrix.shape
            result.append(np.ascontiguousarray(values[start:start + rows * cols].T).reshape(count, rows, cols))
            start += rows * cols
        return result

    return evaluate


def _reference(routines: RoutineSet, definition: RoutineDefinition, inputs: list[np.ndarray],
               params: np.ndarray, programs: NumPyPrograms | None = None) -> tuple[list[np.ndarray], float]:
    """The routine's outputs computed from its symbolic value, (samples, ...) each, and the condition
    number their rounding error scales with (the largest of the solved matrices'; 1 without a solve)."""
    value = definition.value
    programs = programs or NumPyPrograms()
    if isinstance(value, TreeSolve):
        matrix, rhs = _vectorised(routines, definition, [value.matrix, value.rhs], programs=programs)(inputs, params)
        return [np.linalg.solve(matrix, rhs)], float(np.max(np.linalg.cond(matrix)))
    if isinstance(value, DerivativeSolve):  # q, qd, tau: qdd by NumPy, the derivatives there, solved by NumPy
        matrix, rhs = _vectorised(routines, definition, [value.solve.matrix, value.solve.rhs],
                                  programs=programs)(inputs, params)
        qdd = np.linalg.solve(matrix, rhs)[..., 0]
        jacobians = _vectorised(routines, definition, list(value.jacobians),
                                inputs=list(definition.inputs[:2]) + [value.qdd],
                                programs=programs)(inputs[:2] + [qdd], params)
        return ([-np.linalg.solve(matrix, j) for j in jacobians] + [np.linalg.inv(matrix)],
                float(np.max(np.linalg.cond(matrix))))
    return _vectorised(routines, definition, list(value.outputs), programs=programs)(inputs, params), 1.0


def run_selfcheck(robot, routines: RoutineSet, samples: int = 20, seed: int = 0) -> list[Check]:
    """``robot`` is the compiled robot (a robodyn.Robot) with its default parameters."""
    params = np.array([p.default for p in routines.model.description.parameters], dtype=float)
    values = random_inputs(routines, samples, seed, robot)
    programs = NumPyPrograms()  # the routines' reference functions share the model's definitions: printed once
    checks: list[Check] = []
    compared = []  # (routine, compiled outputs, reference outputs, condition); None, None: no answer (singular M)
    for definition in routines.definitions:
        routine = definition.routine
        inputs = [values[a.name] for a in routine.arguments]
        try:
            compiled = getattr(robot, routine.method)(*inputs)
            compiled = [compiled] if len(routine.outputs) == 1 else list(compiled)
            reference, condition = _reference(routines, definition, inputs, params, programs)
        except ValueError:  # a singular M (a joint that moves no mass): forward dynamics has no answer
            compared.append((routine, None, None, np.inf))
            continue
        compared.append((routine, [np.asarray(c).reshape(r.shape) for c, r in zip(compiled, reference)], reference,
                         condition))
    floors = rounding_floors({routine.name: reference for routine, _, reference, _ in compared})
    for routine, compiled, reference, condition in compared:
        if compiled is None:
            checks.append(Check(f"compiled_vs_symbolic_{routine.name}", np.inf, SYMBOLIC_TOLERANCE))
            continue
        error = max(_relative(c, r, floor) for c, r, floor in zip(compiled, reference, floors[routine.name]))
        # Two solves of M x = b (the compiled factorisation, NumPy's LU) agree to about cond(M) ulps.
        tolerance = SYMBOLIC_TOLERANCE * max(1.0, condition) if np.isfinite(condition) else SYMBOLIC_TOLERANCE
        checks.append(Check(f"compiled_vs_symbolic_{routine.name}", error, tolerance))
    checks += _identities(robot, routines, values)
    if routines.model.closed_chain is not None:
        from .certificate import closed_chain_certificate, constrained_certificate

        if routines.model.closed_chain.closed_form is not None:
            checks += closed_chain_certificate(robot, routines, values, seed)
        else:
            checks += constrained_certificate(robot, routines, seed)
    return checks


def _identities(robot, routines: RoutineSet, values: dict[str, np.ndarray]) -> list[Check]:
    has = {d.routine.name for d in routines.definitions}
    q_all, qd_all, tau_all, h_all = values["q"], values["qd"], values["tau"], values["h"]
    if "inverse_dynamics" in has:  # torques of the model's own magnitude
        tau_all = robot.inverse_dynamics(q_all, qd_all, values["qdd"]) + tau_all * 1e-3
    if "tool_jacobian" in has:  # a wrench whose J^T h is of the same magnitude
        J = robot.jacobian(q_all)
        h_all = h_all / max(float(np.max(np.abs(h_all))), 1e-300) * float(np.max(np.abs(tau_all))) / max(
            float(np.max(np.abs(J))), 1e-300)
    checks = []
    # A closed chain in its tree coordinates may have massless links: its tree M need not be positive
    # definite (the certificate checks the multiplier model instead).
    chain = getattr(getattr(routines, "model", None), "closed_chain", None)
    tree_only = chain is not None and chain.closed_form is None
    if "mass_matrix" in has:
        M = robot.M(q_all)
        checks.append(Check("symmetric", max(_relative(m, m.T) for m in M), 0.0))
        if not tree_only:
            smallest = min(float(np.linalg.eigvalsh(m)[0]) for m in M)
            checks.append(Check("positive_definite", 0.0 if smallest > 0 else np.inf, 0.0))
    if {"mass_matrix", "coriolis_matrix"} <= has:
        eps = 1e-6
        worst = 0.0
        advance = _advance(robot)
        for q, qd in zip(q_all, qd_all):
            M_dot = (robot.M(advance(q, qd, eps)) - robot.M(advance(q, qd, -eps))) / (2 * eps)
            C = robot.C(q, qd)
            N = M_dot - 2 * C
            scale = max(float(np.max(np.abs(M_dot))), float(np.max(np.abs(C))))
            # The central difference carries ~|M| ulps / eps of rounding (2e-10 |M| at eps = 1e-6): where
            # Ṁ is tiny next to M (a light link beside a heavy one) that noise, not C, would set the error.
            scale = max(scale, 1e-2 * float(np.max(np.abs(robot.M(q)))) * max(float(np.max(np.abs(qd))), 1e-3))
            asymmetry = float(np.max(np.abs(N + N.T)))
            worst = max(worst, asymmetry / scale if scale > 0 else (0.0 if asymmetry == 0 else np.inf))
        checks.append(Check("skew", worst, SKEW_TOLERANCE))
    if {"inverse_dynamics", "forward_dynamics"} <= has:
        for name, h in (("inverse_forward", None), ("inverse_forward_wrench", h_all)):
            try:
                qdd = robot.forward_dynamics(q_all, qd_all, tau_all, h)
            except ValueError:  # M not positive definite: reported by that check, and here
                checks.append(Check(name, np.inf, IDENTITY_TOLERANCE))
                continue
            terms = _terms(robot, has, q_all, qd_all, qdd)
            error = max(_relative(t, r, s) for t, r, s in
                        zip(robot.inverse_dynamics(q_all, qd_all, qdd, h), tau_all, terms))
            checks.append(Check(name, error, IDENTITY_TOLERANCE))
    checks += _regressor_identities(robot, has, values)
    checks += _derivative_identities(robot, has, values)
    return checks


def _advance(robot):
    """(q, v, dt) -> the configuration reached at velocity v after dt: q + dt v, or along the floating base's
    exponential map."""
    if robot.is_floating_base:
        from robodyn.floating_base import integrate

        return integrate
    return lambda q, v, dt: q + dt * v


def _central_differences(function, arguments: list[np.ndarray], variable: int, step: float,
                         robot=None) -> tuple[np.ndarray, np.ndarray]:
    """∂function/∂arguments[variable] by central differences, one column per entry of that argument; with
    ``robot`` the configuration (variable 0) moves along its tangent space (``_advance``: a floating base's
    exponential map), one column per velocity coordinate. Also the differences' own error, estimated as their
    change when the step doubles: rounding (a robot of tonnes and millimetres has torques 1e5 times its
    inertias, and the noise of τ over the step is then 1e-6 of M) and truncation both show there."""
    along = _advance(robot) if robot is not None and variable == 0 else None
    point = arguments[variable]
    size = robot.n if along is not None else point.size

    def differences(h: float) -> np.ndarray:
        columns = []
        for e in np.eye(size) * h:
            plus, minus = list(arguments), list(arguments)
            if along is not None:
                plus[variable], minus[variable] = along(point, e, 1.0), along(point, e, -1.0)
            else:
                plus[variable], minus[variable] = point + e, point - e
            columns.append((function(*plus) - function(*minus)) / (2 * h))
        return np.column_stack(columns)

    difference = differences(step)
    return difference, np.abs(difference - differences(2 * step))


def _beyond(difference: np.ndarray, derivative: np.ndarray, noise: np.ndarray) -> float:
    """How far the derivative is from the differences beyond twice the differences' own error (its largest
    estimate: one entry's estimate can be small by chance)."""
    return float(max(np.max(np.abs(difference - derivative)) - 2.0 * np.max(noise), 0.0))


def _derivative_identities(robot, has: set, values: dict[str, np.ndarray]) -> list[Check]:
    """The inverse-dynamics derivatives against central differences of the compiled inverse dynamics (a
    velocity-dependent Coulomb term has no derivative at a sign change: samples with |qd| > 1e-3 only)."""
    if not {"inverse_dynamics", "inverse_dynamics_derivatives"} <= has:
        return []
    worst = 0.0
    for q, qd, qdd in zip(values["q"], values["qd"], values["qdd"]):
        if np.min(np.abs(qd)) < 1e-3:
            continue
        d_q, d_qd = robot.inverse_dynamics_derivatives(q, qd, qdd)
        for variable, derivative in ((0, d_q), (1, d_qd)):
            difference, noise = _central_differences(robot.inverse_dynamics, [q, qd, qdd], variable,
                                                     DIFFERENCE_STEP, robot)
            scale = max(float(np.max(np.abs(difference))), float(np.max(np.abs(robot.M(q)))), 1e-300)
            worst = max(worst, _beyond(difference, derivative, noise) / scale)
    checks = [Check("inverse_dynamics_derivatives_vs_differences", worst, DIFFERENCE_TOLERANCE)]
    if {"forward_dynamics", "forward_dynamics_derivatives"} <= has:
        checks.append(_forward_derivative_check(robot, values))
    return checks


def _forward_derivative_check(robot, values: dict[str, np.ndarray]) -> Check:
    """dqdd/dq, dqdd/dqd, dqdd/dtau against central differences of the compiled forward dynamics (at the
    inverse dynamics' torques when compiled, so the accelerations are of the model's own magnitude).

    dqdd/dq and dqdd/dqd are -M⁻¹ times the inverse-dynamics derivatives, whose check accepts an error of its
    tolerance times max |M| (their rounding scales with M's entries): so these are judged against at least
    max |M⁻¹| max |M|. Without that floor, derivatives that vanish (iris's rotors spin about their symmetric
    axes: every dqdd/dqd is -M⁻¹ times a difference of equal inertias) would be rounding noise of 1e-16 measured
    against itself."""
    worst = 0.0
    for q, qd, qdd, tau in zip(values["q"], values["qd"], values["qdd"], values["tau"]):
        if np.min(np.abs(qd)) < 1e-3:
            continue
        tau = robot.inverse_dynamics(q, qd, qdd)  # present: checked by the caller
        try:
            derivatives = robot.forward_dynamics_derivatives(q, qd, tau)
        except ValueError:  # M not positive definite: reported by that check
            return Check("forward_dynamics_derivatives_vs_differences", np.inf, DIFFERENCE_TOLERANCE)
        floor = float(np.max(np.abs(derivatives[2]))) * float(np.max(np.abs(robot.M(q))))  # max |M⁻¹| max |M|
        for variable, derivative in enumerate(derivatives):
            # The step relative to the variable's magnitude: torques of a heavy robot are large, positions
            # of a small one small (a fixed step would set the error by rounding, not by the derivative).
            magnitude = float(np.max(np.abs((q, qd, tau)[variable])))
            step = DIFFERENCE_STEP * (magnitude if magnitude > 0 else 1.0)
            difference, noise = _central_differences(robot.forward_dynamics, [q, qd, tau], variable, step, robot)
            scale = max(float(np.max(np.abs(difference))), float(np.max(np.abs(derivative))),
                        floor if variable < 2 else 0.0, 1e-300)
            worst = max(worst, _beyond(difference, derivative, noise) / scale)
    return Check("forward_dynamics_derivatives_vs_differences", worst, DIFFERENCE_TOLERANCE)


def _regressor_identities(robot, has: set, values: dict[str, np.ndarray]) -> list[Check]:
    """Y π = τ (friction included), Y = Y_base K, and the Slotine-Li regressor at q̇r = q̇, q̈r = q̈."""
    if not {"regressor", "base_regressor", "dynamic_parameters", "base_parameter_matrix"} <= has:
        return []
    q, qd, qdd = values["q"], values["qd"], values["qdd"]
    Y, Y_base = robot.regressor(q, qd, qdd), robot.base_regressor(q, qd, qdd)
    pi, K = robot.dynamic_parameters(), robot.base_parameter_matrix()
    checks = []
    if "inverse_dynamics" in has:
        tau = robot.inverse_dynamics(q, qd, qdd)
        scale = np.max(np.abs(Y * pi), axis=2)  # the largest term of each torque: what rounding is relative to
        checks.append(Check("regressor_times_parameters", max(_relative(a, b, s) for a, b, s in
                                                              zip(Y @ pi, tau, scale.max(axis=1))),
                            IDENTITY_TOLERANCE))
    checks.append(Check("regressor_base_times_matrix", max(_relative(a, b) for a, b in zip(Y_base @ K, Y)),
                        IDENTITY_TOLERANCE))
    if "slotine_li_regressor" in has:
        checks.append(Check("slotine_li_at_reference_equal_state",
                            max(_relative(a, b) for a, b in zip(robot.slotine_li_regressor(q, qd, qd, qdd), Y_base)),
                            IDENTITY_TOLERANCE))
    return checks


def _terms(robot, has: set, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """Per sample, the largest term of M q̈ + (C q̇ + g + friction): what rounding is relative to."""
    scale = np.zeros(q.shape[0])
    if "mass_matrix" in has:
        scale = np.maximum(scale, np.max(np.abs(np.einsum("kij,kj->ki", robot.M(q), qdd)), axis=1))
    if "nonlinear_effects" in has:
        scale = np.maximum(scale, np.max(np.abs(robot.nonlinear_effects(q, qd)), axis=1))
    return scale


def report(checks: list[Check]) -> dict:
    passed = all(c.passed for c in checks)
    return {"status": "passed" if passed else "failed", "passed": passed,
            "checks": [dict(asdict(c), passed=c.passed) for c in checks]}


def skipped() -> dict:
    """The report of a build made with selfcheck=False."""
    return {"status": "skipped", "passed": None, "checks": []}
