"""Stage 2, identification: the dynamics written linear in the dynamic parameters, τ = Y(q, q̇, q̈) π.

The dynamic parameters π (``PARAMETER_LAYOUT``) are, per body of the kinematic tree, the ten
barycentric parameters about the link-frame origin — inertia XX XY XZ YY YZ ZZ (tensor entries),
first moments MX MY MZ = m c, mass M — in which the model is linear (it is not linear in the inertia
about the centre of mass); per motor rotor its spin inertia Ia; per tree joint its viscous and
Coulomb friction Fv, Fs. A rotor's mass and transverse inertia move with the link it rides on, so
they are lumped into that link's parameters; only its spin inertia has a column of its own, which
carries the full rotor model (the coupling k_r z·ω̇_parent and the gyroscopic terms, not k_r² Ia q̈).

Y is computed by a Newton-Euler pass (Atkeson, An & Hollerbach 1986): each body's wrench is linear in
its parameters, f = A(v, a) π_body, and each joint it loads takes the projection of f on its motion
subspace (the subspace carried down to the body, once per joint and body below it). With a reference velocity
q̇r and acceleration q̈r the same pass gives the Slotine-Li regressor
Y(q, q̇, q̇r, q̈r) π = M q̈r + C(q, q̇) q̇r + g + friction(q̇), with the Christoffel-consistent C (the
factorisation of Echeandia & Wensing 2021, as in recursive.py): f = I a_r + B(I, v) v_r.

Base parameters (``base_parameters``): the columns of Y that are linearly independent, chosen left to
right in the order above (so that, as in Khalil & Gautier's grouping rules, a link's parameters are
grouped into those of the links nearer the base: ZZ1R = ZZ1 + a1² M2), found numerically on stacked
regressors at random states and random values of the description's parameters, with each dependent
column's combination β then solved exactly (in the description's parameters when Y depends on them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import sympy as sp

from .. import geometry
from ..description.model import RobotDescription
from .common import BASE_TO_SPATIAL, Coupling, Progress
from .names import LINK_PARAMETERS, TEMPLATE_NAMES
from .program import Program, needed_definitions
from .recursive import _cross, _dot, _motion_to_child, _product, force_cross, motion_cross

#: (kind, name stems) of every parameter group, in the order of π.
PARAMETER_LAYOUT = (("link", LINK_PARAMETERS), ("rotor", ("Ia",)), ("viscous", ("Fv",)), ("coulomb", ("Fs",)))

# Columns whose best fit by the earlier ones leaves less than this (relative) are dependent.
_RANK_TOLERANCE = 1e-8


@dataclass(frozen=True)
class BaseParameters:
    independent: tuple[int, ...]  # columns of Y kept, in order
    names: tuple[str, ...]
    matrix: sp.ImmutableMatrix  # K (b x p): base = K π, Y = Y_base K
    expressions: tuple[str, ...]  # readable: "ZZ1 + a1**2*M2"
    known_zero: tuple[int, ...]  # base parameters made only of parameters the description fixes at zero
    symbolic: bool  # whether K depends on the description's parameters
    defaults_only: bool  # K found at the parameter defaults only (exact states did not reduce Y to numbers)
    seconds: float
    # The default gravity (x, y, z) when K holds only for gravity parallel to it (a fixed base whose
    # gravity can be tilted at run time: a first axis along gravity hides its link's first moments, which
    # a tilt shows); None when K holds for any gravity the parameters can set.
    gravity: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class Regressor:
    names: tuple[str, ...]  # dynamic parameter names, length p
    layout: tuple[tuple[str, str, int, int], ...]  # (kind, label, start, stop)
    values: sp.ImmutableMatrix  # π (p x 1) in the description's parameters
    Y: sp.ImmutableMatrix  # n x p, over ``definitions``, inputs q, qd, qdd
    slotine_li: sp.ImmutableMatrix  # n x p, inputs q, qd, qdr, qddr
    qdr: tuple[sp.Symbol, ...]
    qddr: tuple[sp.Symbol, ...]
    definitions: tuple
    base: BaseParameters
    seconds: float


_PI = sp.symbols(" ".join(TEMPLATE_NAMES), real=True)  # one body's inertial parameters, as placeholders


def _inertia_times() -> callable:
    """K(x) with I(π) x = K(x) π for the spatial inertia I(π) about the origin ([angular; linear])."""
    xx, xy, xz, yy, yz, zz, mx, my, mz, m = _PI
    inertia = sp.Matrix([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    h = sp.Matrix([mx, my, mz])
    spatial = sp.zeros(6, 6)
    spatial[:3, :3] = inertia
    spatial[:3, 3:] = _cross(h)
    spatial[3:, :3] = _cross(h).T
    spatial[3:, 3:] = m * sp.eye(3)
    x = sp.Matrix(sp.symbols("x0:6", real=True))
    template = (spatial * x).jacobian(sp.Matrix(_PI))

    def times(vector: sp.Matrix) -> sp.Matrix:
        return template.xreplace(dict(zip(x, vector)))

    return times


_INERTIA_TIMES = _inertia_times()


def barycentric(mass, com: sp.Matrix, inertia_com: sp.Matrix) -> list[sp.Expr]:
    """The ten parameters of a body from its mass, centre and inertia about the centre (same frame)."""
    c = sp.Matrix(com)
    about_origin = sp.Matrix(inertia_com) + mass * ((c.T * c)[0, 0] * sp.eye(3) - c * c.T)
    return [about_origin[0, 0], about_origin[0, 1], about_origin[0, 2], about_origin[1, 1], about_origin[1, 2],
            about_origin[2, 2], mass * c[0], mass * c[1], mass * c[2], mass]


def _parameter_values(description: RobotDescription) -> tuple[list[str], list, list[sp.Expr]]:
    """Names, layout and values of π: links (with the rotors they carry), rotors, friction."""
    tree = description.tree
    names, layout, values = [], [], []
    link_values = []
    floating = description.floating_base
    bodies = ([(-1, floating.inertial)] if floating is not None else []) + [(k, j.inertial) for k, j in enumerate(tree)]
    for k, inertial in bodies:
        value = barycentric(inertial.mass, inertial.com, inertial.inertia)
        for child in tree:  # rotors riding on this link: mass and transverse inertia move with it
            rotor = child.rotor
            if child.parent != k or rotor is None:
                continue
            placement = sp.Matrix(child.placement)
            R, p = placement[:3, :3], placement[:3, 3]
            centre, axis = R * sp.Matrix(rotor.com) + p, R * sp.Matrix(rotor.axis)
            transverse = rotor.transverse_inertia * (sp.eye(3) - axis * axis.T)
            value = [a + b for a, b in zip(value, barycentric(rotor.mass, centre, transverse))]
        link_values.append(value)
    if floating is not None:  # the base is body 0 (Khalil's numbering): its parameters are XX0 ... M0
        layout.append(("link", floating.link_name, 0, 10))
        names += [f"{stem}0" for stem in LINK_PARAMETERS]
        values += link_values.pop(0)
    for k, joint in enumerate(tree):
        layout.append(("link", joint.link_name, len(names), len(names) + 10))
        names += [f"{stem}{k + 1}" for stem in LINK_PARAMETERS]
        values += link_values[k]
    for k, joint in enumerate(tree):
        if joint.rotor is not None:
            layout.append(("rotor", joint.name, len(names), len(names) + 1))
            names.append(f"Ia{k + 1}")
            values.append(joint.rotor.inertia)
    for k, joint in enumerate(tree):
        layout.append(("viscous", joint.name, len(names), len(names) + 1))
        names.append(f"Fv{k + 1}")
        values.append(joint.viscous)
    for k, joint in enumerate(tree):
        layout.append(("coulomb", joint.name, len(names), len(names) + 1))
        names.append(f"Fs{k + 1}")
        values.append(joint.coulomb)
    return names, layout, [sp.expand(v) for v in values]


def _regressor_pass(description: RobotDescription, program: Program, q, qd, qdr, qddr, base=None,
                    shared: dict | None = None) -> sp.Matrix:
    """Y over the tree's joints (rows) and π (columns): f = I a_r + B(I, v) v_r per body, projected on the
    motion subspace of every joint it loads. With qdr = qd and qddr = qdd this is the inverse-dynamics regressor.

    ``shared``: a dict that passes at the same q in the same program share (what depends on q alone).

    ``base``: a floating base's (q, v, v_r, a_r) coordinates (q: position and quaternion; the others its six
    velocity coordinates, linear then angular, base frame). Its body comes first in π and its six rows (force,
    then moment, base frame) first in Y: every body's wrench is carried to it, and gravity is the base's
    acceleration −Rᵀg."""
    let_v = program.vector
    tree = description.tree
    n = len(tree)
    off = 6 if base is not None else 0
    first = 10 if base is not None else 0  # the first joint body's column
    if base is None:
        gravity = sp.Matrix(description.base)[:3, :3].T * sp.Matrix(description.gravity)
    else:
        rotation = program.matrix(geometry.quaternion_rotation(*base[0][3:7]))
        gravity = let_v(rotation.T * sp.Matrix(description.gravity))
    rotor_joints = [k for k, joint in enumerate(tree) if joint.rotor is not None]
    p = first + 10 * n + len(rotor_joints) + 2 * n
    Y = sp.zeros(off + n, p)

    local, subspace = [], []
    for joint in tree:
        t = program.matrix(sp.Matrix(joint.placement) * geometry.screw(joint.kind, sp.Matrix(joint.axis),
                                                                      q[len(local)]) * sp.Matrix(joint.successor))
        local.append((t[:3, :3], t[:3, 3]))
        successor = sp.Matrix(joint.successor)
        rt = successor[:3, :3].T
        direction, point = rt * sp.Matrix(joint.axis), -rt * successor[:3, 3]
        if joint.kind == "revolute":
            subspace.append(let_v([*direction, *point.cross(direction)]))
        else:
            subspace.append(let_v([0, 0, 0, *direction]))

    # Spatial transforms spelled out on lists: SymPy's matrix product converts to and from its domain
    # matrices at every call, which was most of a humanoid's regressor pass.
    def to_child(i: int, m) -> sp.Matrix:
        return let_v(_motion_to_child(*local[i], m))

    def wrench_block(v, v_r, a_r, parameters: sp.Matrix | None = None) -> list[sp.Matrix]:
        """Columns of A with f = A π_body = I(a_r − ½ v×v_r) + ½ v×*(I v_r) + ½ v_r×*(I v)."""
        same = v_r == v
        if same:
            block = _INERTIA_TIMES(a_r) + _product(force_cross(v), _INERTIA_TIMES(v))
        else:
            block = (_INERTIA_TIMES(a_r - _product(motion_cross(v), v_r) / 2)
                     + _product(force_cross(v), _INERTIA_TIMES(v_r)) / 2
                     + _product(force_cross(v_r), _INERTIA_TIMES(v)) / 2)
        if parameters is not None:  # a body whose ten parameters are fixed multiples of one (a rotor's spin)
            block = block * parameters
        return [let_v(block[:, c]) for c in range(block.cols)]

    zero = sp.zeros(6, 1)
    base_acceleration = sp.Matrix([0, 0, 0, *(-gravity)])
    root_v = root_vr = zero
    if base is not None:  # spatial vectors are (angular; linear): the base's coordinates are (linear, angular)
        _, v_b, vr_b, ar_b = base
        root_v = let_v([*v_b[3:6], *v_b[0:3]])
        root_vr = root_v if vr_b is v_b else let_v([*vr_b[3:6], *vr_b[0:3]])
        base_acceleration = let_v([*ar_b[3:6], *(sp.Matrix(ar_b[0:3]) - gravity)])
    velocity, velocity_r, acceleration_r = [], [], []
    for i, joint in enumerate(tree):
        if joint.parent < 0:
            v_p, vr_p, ar_p = to_child(i, root_v), to_child(i, root_vr), to_child(i, base_acceleration)
        else:
            v_p, vr_p, ar_p = (to_child(i, velocity[joint.parent]), to_child(i, velocity_r[joint.parent]),
                               to_child(i, acceleration_r[joint.parent]))
        v = let_v(v_p + subspace[i] * qd[i])
        v_r = v if qdr is qd else let_v(vr_p + subspace[i] * qdr[i])
        velocity.append(v)
        velocity_r.append(v_r)
        acceleration_r.append(let_v(ar_p + subspace[i] * qddr[i] + motion_cross(v) * subspace[i] * qdr[i]))

    def on_base(columns: list[sp.Matrix], start: int) -> None:
        """A floating base's rows: the wrench on it (base frame) as force, then moment."""
        for c, column in enumerate(columns):
            for k in range(6):
                Y[k, start + c] = program.let(Y[k, start + c] + column[BASE_TO_SPATIAL[k]])

    # Row j of Y takes S_jᵀ X*_j f for the wrench f of every body below joint j (X*_j carrying it up to j), which
    # is (X_j S_j)ᵀ f with X_j the motion transform down to the body: each joint's subspace is carried down to each
    # body below it once (one transform per pair, shared by both passes), not each body's ten wrench columns up
    # (twenty transforms per pair). TIAGo (48 joints): the pass took 14 s instead of 4 s, and the regressor had
    # three times the operations (108,856 against 34,331). A floating base's rows are its six unit motions.
    shared = {} if shared is None else shared
    if "subspaces below" not in shared:
        below: list[dict] = []
        for i, joint in enumerate(tree):
            if joint.parent >= 0:
                above = below[joint.parent]
            elif base is not None:  # row k: the base wrench's spatial component BASE_TO_SPATIAL[k]
                above = {k - off: let_v([int(r == BASE_TO_SPATIAL[k]) for r in range(6)]) for k in range(6)}
            else:
                above = {}
            mine = {row: to_child(i, axis) for row, axis in above.items()}
            mine[i] = subspace[i]
            below.append(mine)
        shared["subspaces below"] = below
    below = shared["subspaces below"]

    def carry(link: int, columns: list[sp.Matrix], start: int) -> None:
        """Add to each row of a joint above ``link`` (itself included, and a floating base's rows) its subspace's
        share of the body wrench columns."""
        for row, axis in below[link].items():
            for c, column in enumerate(columns):
                Y[off + row, start + c] = program.let(Y[off + row, start + c] + _dot(axis, column))

    if base is not None:
        on_base(wrench_block(root_v, root_vr, base_acceleration), 0)
    for i in range(n):
        carry(i, wrench_block(velocity[i], velocity_r[i], acceleration_r[i]), first + 10 * i)

    for r, i in enumerate(rotor_joints):
        joint, rotor = tree[i], tree[i].rotor
        placement = sp.Matrix(joint.placement)
        R, pos = placement[:3, :3], placement[:3, 3]
        centre, axis = R * sp.Matrix(rotor.com) + pos, R * sp.Matrix(rotor.axis)
        psi = let_v(rotor.gear_ratio * sp.Matrix([*axis, *centre.cross(axis)]))  # parent coordinates
        parent = joint.parent
        if parent < 0:
            v_p, vr_p, ar_p = root_v, root_vr, base_acceleration
        else:
            v_p, vr_p, ar_p = velocity[parent], velocity_r[parent], acceleration_r[parent]
        v_m = let_v(v_p + psi * qd[i])
        v_mr = v_m if qdr is qd else let_v(vr_p + psi * qdr[i])
        a_mr = let_v(ar_p + psi * qddr[i] + motion_cross(v_p) * psi * qdr[i])
        spin = sp.Matrix(barycentric(0, sp.zeros(3, 1), axis * axis.T))  # unit spin inertia about its axis
        (column,) = wrench_block(v_m, v_mr, a_mr, spin)
        index = first + 10 * n + r
        Y[off + i, index] = program.let(Y[off + i, index] + (psi.T * column)[0, 0])
        if parent >= 0:
            carry(parent, [column], index)
        elif base is not None:
            on_base([column], index)

    friction_start = first + 10 * n + len(rotor_joints)
    for i in range(n):
        Y[off + i, friction_start + i] = qd[i]
        Y[off + i, friction_start + n + i] = sp.sign(qd[i])
    return Y


def derive_regressor(description: RobotDescription, simplify: bool = True,
                     progress: Progress | None = None, seed: int = 0) -> Regressor:
    """The regressors (inverse dynamics and Slotine-Li), the dynamic parameters and the base parameters."""
    from .common import model_symbols

    start = time.perf_counter()
    say = progress or (lambda message: None)
    n_model = description.n
    floating = description.floating_base is not None
    off = 6 if floating else 0
    q, qd, qdd, _, _ = model_symbols(n_model, floating)
    qdr = sp.symbols(f"qdr1:{n_model + 1}", real=True)
    qddr = sp.symbols(f"qddr1:{n_model + 1}", real=True)
    if floating:
        qdr, qddr = sp.symbols("qdrb1:7", real=True) + qdr, sp.symbols("qddrb1:7", real=True) + qddr
    coupling = Coupling(description)
    program = Program(prefix="y")
    tree_q = coupling.positions(q[len(q) - n_model:])

    def projected(rows: sp.Matrix) -> sp.Matrix:
        if coupling.identity:
            return rows
        out = sp.zeros(off + n_model, rows.cols)
        out[:off, :] = rows[:off, :]
        for c in range(rows.cols):
            out[off:, c] = coupling.vector(list(rows[off:, c])).applyfunc(program.let)
        return out

    def base(velocity, reference, acceleration):
        if not floating:
            return None
        own = velocity[:6]
        return q[:7], own, own if reference is velocity else reference[:6], acceleration[:6]

    # The friction columns of a coupled joint see its own rate: G q̇ enters Y through qd (tree rates).
    rates = coupling.rates(qd[off:])
    shared: dict = {}
    Y = projected(_regressor_pass(description, program, tree_q, rates, rates, coupling.rates(qdd[off:]),
                                  base(qd, qd, qdd), shared))
    Y_sl = projected(_regressor_pass(description, program, tree_q, rates, coupling.rates(qdr[off:]),
                                     coupling.rates(qddr[off:]), base(qd, qdr, qddr), shared))
    names, layout, values = _parameter_values(description)
    say(_pass_message(names, program.definitions, time.perf_counter() - start))
    definitions = tuple(program.definitions)
    zeros = {j for j, value in enumerate(values) if value == 0}
    base = base_parameters(description, Y, definitions, (q, qd, qdd), names, layout, seed=seed, zeros=zeros)
    say(_base_message(base, names, layout))
    return Regressor(tuple(names), tuple(layout), sp.ImmutableMatrix(values), sp.ImmutableMatrix(Y),
                     sp.ImmutableMatrix(Y_sl), qdr, qddr, definitions, base, time.perf_counter() - start)


def regressor_messages(regressor: Regressor, how: str) -> list[str]:
    """derive_regressor's progress lines, told after the fact (``how``: where it was derived)."""
    base = regressor.base
    return [_pass_message(regressor.names, regressor.definitions, regressor.seconds - base.seconds, how),
            _base_message(base, regressor.names, regressor.layout)]


def _pass_message(names, definitions, seconds: float, how: str = "") -> str:
    return (f"  regressor: {len(names)} dynamic parameters, {len(definitions)} intermediate values "
            f"({seconds:.2f} s{', ' + how if how else ''})")


def _base_message(base: BaseParameters, names, layout) -> str:
    return f"  base parameters: {len(base.names)} of {len(names)} ({base_summary(base, layout)}; {base.seconds:.2f} s)"


def base_summary(base: BaseParameters, layout) -> str:
    """'6 inertial, 4 friction; MY1, MY2 fixed at zero by the description'"""
    kind_of = {}
    for kind, _, start, stop in layout:
        for j in range(start, stop):
            kind_of[j] = {"link": "inertial", "rotor": "rotor", "viscous": "friction", "coulomb": "friction"}[kind]
    counts = {}
    for column in base.independent:
        counts[kind_of[column]] = counts.get(kind_of[column], 0) + 1
    text = ", ".join(f"{counts[k]} {k}" for k in ("inertial", "rotor", "friction") if k in counts)
    if base.known_zero:
        text += "; fixed at zero by the description: " + ", ".join(base.names[i] for i in base.known_zero)
    return text


# ---------------------------------------------------------------------------------------------------
# Base parameters


def _evaluator(description, Y: sp.Matrix, definitions, inputs):
    """NumPy function (q, qd, qdd, params) -> Y for a batch (samples, n, p)."""
    from .numeric import numpy_function

    entries = list(Y)
    prelude = needed_definitions(list(definitions), entries)
    parameters = [p.symbol for p in description.parameters]
    function = numpy_function([list(s) for s in inputs] + [parameters], prelude, entries)
    rows, cols = Y.shape

    def evaluate(q, qd, qdd, params):
        count = q.shape[0]
        flat = function(q.T, qd.T, qdd.T, params)
        out = np.empty((count, len(flat)), dtype=np.result_type(q.dtype, np.float64))
        for k, value in enumerate(flat):  # an entry that is a number (a constant, a zero) fills its column
            out[:, k] = value
        return out.reshape(count, rows, cols)

    evaluate.columns = cols
    return evaluate


def _random_states(description, count: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Joint angles in [-π, π], rates and accelerations in [-2, 2]; a floating base at a random position and
    a random unit quaternion."""
    n = description.n
    if description.floating_base is None:
        return (rng.uniform(-np.pi, np.pi, (count, n)), rng.uniform(-2, 2, (count, n)),
                rng.uniform(-2, 2, (count, n)))
    quaternion = rng.normal(size=(count, 4))
    q = np.hstack([rng.uniform(-1, 1, (count, 3)), quaternion / np.linalg.norm(quaternion, axis=1, keepdims=True),
                   rng.uniform(-np.pi, np.pi, (count, n))])
    return q, rng.uniform(-2, 2, (count, n + 6)), rng.uniform(-2, 2, (count, n + 6))


def _random_parameters(description, rng) -> np.ndarray:
    """Generic values of the description's parameters: each default scaled by a random factor."""
    defaults = np.array([float(p.default) for p in description.parameters], dtype=float)
    return defaults * rng.uniform(0.6, 1.4, defaults.shape)


def _column_factor(W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(active, norms, R): the columns of W with an effect (norm above 1e-12 of the largest), every column's norm,
    and the triangular factor of an unpivoted Householder QR of the active columns, each normalised (a square
    matrix of their count: W's rows do not matter beyond it).

    Columns without effect are left out of the factorisation: such a column would get a row of R of its own, and
    every later column's part in that row would be counted as explained."""
    import scipy.linalg

    norms = np.linalg.norm(W, axis=0)
    active = np.flatnonzero(norms > 1e-12 * max(norms.max(), 1e-300))
    if not active.size:
        return active, norms, np.zeros((0, 0))
    (R,) = scipy.linalg.qr(W[:, active] / norms[active], mode="r", overwrite_a=True)  # R only: no Q
    return active, norms, np.array(R[:active.size])


def _independent_columns(W: np.ndarray, factor=None) -> tuple[list[int], np.ndarray]:
    """Greedy left-to-right choice of independent columns of W (each normalised), and the relative
    distance of every column from the span of the earlier ones. ``factor``: W's _column_factor, if known."""
    active, _, R = factor if factor is not None else _column_factor(W)
    distance = np.zeros(W.shape[1])
    distance[active] = np.abs(np.diag(R))
    return [j for j in range(W.shape[1]) if distance[j] > _RANK_TOLERANCE], distance


def base_parameters(description, Y, definitions, inputs, names, layout, seed: int = 0,
                    zeros: set[int] = frozenset()) -> BaseParameters:
    """The base parameters of Y: independent columns, and K with Y = Y[:, independent] K.

    ``zeros``: dynamic parameters the description fixes at zero whatever its parameter values (a centre
    of mass on a link axis, a planar link's inertia, no Coulomb friction): base parameters made only of
    such are reported as known (``known_zero``), for estimators that take the description's structure
    as given.

    The linear algebra runs on one BLAS thread: a multithreaded BLAS sums in an order that depends on
    the thread count, and K (hence the generated files) must not depend on the machine's cores (1,307 of
    TIAGo's K entries differed at rounding level between one and two OpenBLAS threads)."""
    import scipy.linalg  # noqa: F401  (loaded first: the limit applies to the BLAS libraries loaded when it is set)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _base_parameters(description, Y, definitions, inputs, names, layout, seed, zeros)


def _base_parameters(description, Y, definitions, inputs, names, layout, seed, zeros) -> BaseParameters:
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    evaluate = _evaluator(description, Y, definitions, inputs)
    p = Y.cols
    # As many states as columns: the root joint's row alone sees every body of a tree, so stacking
    # fewer states than columns can make independent columns look dependent there.
    samples = p + 10

    def stacked(params):
        W = evaluate(*_random_states(description, samples, rng), params)
        return W.reshape(-1, p)

    generic = [_random_parameters(description, rng) for _ in range(2)]
    stacks = [stacked(params) for params in generic]
    first = _column_factor(stacks[0])
    independent, _ = _independent_columns(stacks[0], first)
    if _independent_columns(stacks[1])[0] != independent:
        independent, _ = _independent_columns(np.vstack(stacks))
    dependent = [j for j in range(p) if j not in independent]
    geometric = _parameters_in(Y, definitions, description)
    # K is found at the default gravity. Y is linear in g and a dependency of Y's columns holds for every q, q̇,
    # q̈, so it holds for every multiple of g too; _verify samples its magnitude, _gravity_restriction its
    # direction (a floating base sees g as its own acceleration v̇ − Rᵀg: any direction keeps K).
    gravity = set().union(*(sp.sympify(g).free_symbols for g in description.gravity)) - _symbols_beyond_gravity(
        description)
    fixed = {symbol: _exact(sp.sympify(description.defaults[symbol])) for symbol in geometric if symbol in gravity}
    geometric = [symbol for symbol in geometric if symbol not in fixed]

    def numeric_beta(W, factor=None):
        """β of the dependent columns, entries that contribute less than 1e-9 of a column zeroed. ``factor``: W's
        _column_factor, if known: with W's active columns normalised = Q R, the least-squares problem in W's
        columns is the one in R's, a few hundred rows instead of tens of thousands (TIAGo: 0.85 s less)."""
        if not dependent:
            return np.zeros((len(independent), 0))
        norms = np.linalg.norm(W, axis=0)
        silent = norms <= 1e-12 * norms.max()  # columns without effect: their parameters drop out
        norms = np.where(norms > 0, norms, 1.0)
        if factor is not None and np.isin(independent, factor[0]).all():
            active, _, R = factor
            position = {column: k for k, column in enumerate(active)}
            heard = [d for d in dependent if d in position]  # the others are silent
            scaled = np.zeros((len(independent), len(dependent)))
            if heard:
                # W's own cutoff for small singular values (rcond=None would scale it by R's rows, not W's).
                solution = np.linalg.lstsq(R[:, [position[j] for j in independent]],
                                           R[:, [position[d] for d in heard]],
                                           rcond=np.finfo(float).eps * max(W.shape))[0]
                scaled[:, [dependent.index(d) for d in heard]] = solution
        else:
            scaled = np.linalg.lstsq(W[:, independent] / norms[independent], W[:, dependent] / norms[dependent],
                                     rcond=None)[0]
        scaled[np.abs(scaled) < 1e-9] = 0.0
        scaled[:, silent[dependent]] = 0.0
        return scaled * norms[dependent][None, :] / norms[independent][:, None]

    K = [[sp.Integer(0)] * p for _ in independent]  # rows of lists: SymPy's item access is slow in these loops
    for row, column in enumerate(independent):
        K[row][column] = sp.Integer(1)
    symbolic, exact = bool(geometric), True
    defaults = np.array([float(p.default) for p in description.parameters], dtype=float)
    try:  # β found numerically at one generic point, then exactly in the parameters Y has, if any
        if not dependent:
            beta = []
        elif geometric:
            beta = _exact_combinations(description, Y, definitions, inputs, independent, dependent,
                                       numeric_beta(stacks[0], first), rng, fixed)
        else:
            beta = _precise_combinations(evaluate, description, independent, dependent, numeric_beta(stacks[0], first),
                                         rng)
    except _NotExact:
        exact = False
        beta_numeric = numeric_beta(stacked(defaults) if geometric else np.vstack(stacks))
        beta = [[sp.Float(beta_numeric[row, d], 17) if beta_numeric[row, d] != 0 else sp.Integer(0)
                 for row in range(len(independent))] for d in range(len(dependent))]
    defaults_only = symbolic and not exact
    symbolic = symbolic and exact
    for d_index, column in enumerate(dependent):
        for row in range(len(independent)):
            value = beta[d_index][row]
            # Exact binary fractions of URDF numbers: as doubles (exact to rounding) in the C code.
            K[row][column] = sp.Float(value, 17) if isinstance(value, sp.Rational) and value.q > 10**9 else value
    K_matrix = sp.ImmutableMatrix(K)
    K_function = _matrix_function(description, K_matrix)
    _verify(description, evaluate, K_function, independent, rng, defaults_only)
    restriction = _gravity_restriction(description, evaluate, K_function, independent, rng)

    base_names, expressions = [], []
    symbols = sp.symbols(" ".join(names), real=True) if len(names) > 1 else (sp.Symbol(names[0], real=True),)
    for row, column in enumerate(independent):
        grouped = any(K[row][d] != 0 for d in dependent)
        base_names.append(names[column] + ("R" if grouped else ""))
        # One sum of all the terms: adding them one by one sorts the growing sum again at each term.
        expression = sp.Add(*[_readable(K[row][j]) * symbols[j] for j in range(p) if K[row][j] != 0])
        expressions.append(sp.sstr(expression, order="none"))
    known_zero = tuple(row for row in range(len(independent))
                       if all(K[row][j] == 0 or j in zeros for j in range(p)))
    return BaseParameters(tuple(independent), tuple(base_names), K_matrix, tuple(expressions),
                          known_zero, symbolic, defaults_only, time.perf_counter() - start, restriction)


def _parameters_in(Y, definitions, description) -> list[sp.Symbol]:
    """The description's parameters Y depends on (geometry, gravity, gear ratios)."""
    wanted = set(p.symbol for p in description.parameters)
    found = set()
    for expr in list(Y):
        found |= expr.free_symbols & wanted
    for _, value in needed_definitions(list(definitions), list(Y)):
        found |= value.free_symbols & wanted
    return [p.symbol for p in description.parameters if p.symbol in found]


def _readable(value: sp.Expr) -> sp.Expr:
    """A coefficient for display: exact when short (9/100, a1**2), else 12 significant digits."""
    if isinstance(value, sp.Rational) and value.q > 10**9:
        return sp.Float(value, 12)
    if isinstance(value, sp.Float):
        return sp.Float(value, 12)
    return value


# Points on the unit circle with rational coordinates (Pythagorean triples): exact sin and cos.
_CIRCLE = [(sp.Rational(3, 5), sp.Rational(4, 5)), (sp.Rational(5, 13), sp.Rational(12, 13)),
           (sp.Rational(8, 17), sp.Rational(15, 17)), (sp.Rational(7, 25), sp.Rational(24, 25)),
           (sp.Rational(20, 29), sp.Rational(21, 29)), (sp.Rational(12, 37), sp.Rational(35, 37))]


#: Unit quaternions with rational coordinates: (a, b, c, d) / e with a² + b² + c² + d² = e².
_QUATERNIONS = [tuple(sp.Rational(k, e) for k in ks) for ks, e in
                (((1, 2, 2, 4), 5), ((2, 4, 5, 6), 9), ((2, 3, 6, 0), 7), ((1, 2, 4, 10), 11), ((2, 5, 6, 8), 13))]


def _exact_combinations(description, Y, definitions, inputs, independent, dependent, beta_numeric, rng,
                        fixed: dict | None = None):
    """β of each dependent column as exact expressions in the description's parameters.

    Only the independent columns that the numerical β uses take part (a few per dependent column);
    Y is evaluated exactly at states whose sines and cosines are rational, with the parameters
    symbolic (but those in ``fixed``, set to its values), and the small square system is solved by fraction-free
    elimination."""
    fixed = fixed or {}
    q, qd, qdd = inputs
    floating = description.floating_base is not None
    rows_needed = max(np.count_nonzero(beta_numeric, axis=0).max(initial=0), 1)
    states = []
    for s in range(rows_needed + 3):  # enough equations even where a column appears in one row per state
        values = dict(fixed)
        joints = q[7:] if floating else q
        if floating:  # a rational position and a rational unit quaternion (a Pythagorean quintuple)
            quaternion = list(_QUATERNIONS[int(rng.integers(len(_QUATERNIONS)))])
            rng.shuffle(quaternion)
            for k in range(3):
                values[q[k]] = sp.Rational(int(rng.integers(-9, 10)), 7)
            for k in range(4):
                values[q[3 + k]] = (1 if rng.random() < 0.5 else -1) * quaternion[k]
        for symbol in joints:
            cos_, sin_ = _CIRCLE[int(rng.integers(len(_CIRCLE)))]
            sign_c, sign_s = (1 if rng.random() < 0.5 else -1), (1 if rng.random() < 0.5 else -1)
            values[sp.cos(symbol)] = sign_c * cos_
            values[sp.sin(symbol)] = sign_s * sin_
            values[symbol] = sp.Rational(int(rng.integers(-9, 10)), 7)
        for rate, acceleration in zip(qd, qdd):
            values[rate] = sp.Rational(int(rng.integers(-9, 10)), 5)
            values[acceleration] = sp.Rational(int(rng.integers(-9, 10)), 3)
        states.append(values)
    columns = sorted(set(independent) | set(dependent))
    needed = needed_definitions(list(definitions), [Y[r, c] for r in range(Y.rows) for c in columns])
    rows = []  # per state and joint: {column: exact value}
    for values in states:
        known = dict(values)
        for symbol, value in needed:
            known[symbol] = sp.expand(_exact(value).xreplace(known))
        for r in range(Y.rows):
            rows.append({c: sp.expand(_exact(Y[r, c]).xreplace(known)) for c in columns})
    for row in rows:
        for value in row.values():
            if value.has(sp.sin, sp.cos, sp.Function):
                raise _NotExact()
    import scipy.linalg
    from sympy.polys.matrices import DomainMatrix

    point = {p.symbol: sp.Float(float(p.default) * float(rng.uniform(0.6, 1.4)))
             for p in description.parameters}
    result = []
    for d_index, d in enumerate(dependent):
        support = [k for k in range(len(independent)) if beta_numeric[k, d_index] != 0]
        beta = [sp.Integer(0)] * len(independent)
        if support:
            A = sp.Matrix([[row[independent[k]] for k in support] for row in rows])
            b = sp.Matrix([row[d] for row in rows])
            # A square, well-conditioned subsystem (rows chosen at a generic numerical point), solved
            # exactly over the field of rational functions in the parameters.
            numeric = np.array(A.xreplace(point).evalf(), dtype=float)
            _, _, pivots = scipy.linalg.qr(numeric.T, pivoting=True)
            chosen = sorted(pivots[:len(support)])
            k = len(support)
            augmented = DomainMatrix.from_Matrix(A.extract(chosen, list(range(k))).row_join(b.extract(chosen, [0])))
            augmented = augmented.to_field()
            system, rhs = augmented.extract(list(range(k)), list(range(k))), augmented.extract(list(range(k)), [k])
            solution = system.lu_solve(rhs).to_Matrix()
            for k, value in zip(support, solution):
                beta[k] = sp.factor(sp.cancel(value))
        result.append(beta)
    return result


def _precise_combinations(evaluate, description, independent, dependent, beta_numeric, rng):
    """β of each dependent column when Y has no symbolic parameters: a small square system per column
    (rows chosen by pivoted QR among the equations of a few random states), solved in double precision
    and refined once with residuals in extended precision (long double), so that β is right to the
    last bit of a double (the compiled K, and through it Y_base K = Y, are exact to rounding). A
    column whose solution does not fit every equation (a true coefficient below the float fit's noise
    was left out of its support) is solved again on all independent columns."""
    supports = [[k for k in range(len(independent)) if beta_numeric[k, d] != 0] for d in range(len(dependent))]
    needed = max((len(support) for support in supports), default=1)
    # A body's columns appear only in the rows of its joint and its ancestors (a few in a wide tree):
    # as many states as unknowns guarantees enough equations.
    count = needed + 3
    states = [np.asarray(x, dtype=np.longdouble) for x in _random_states(description, count, rng)]
    params = np.array([float(p.default) for p in description.parameters], dtype=np.longdouble)
    rows = evaluate(*states, params).reshape(-1, evaluate.columns)  # long double where NumPy keeps it
    maxima: dict = {}  # per sample set, each column's largest entry: what a coefficient's effect is relative to

    def column_maxima(used: np.ndarray) -> np.ndarray:
        if id(used) not in maxima:
            maxima[id(used)] = np.abs(used).max(axis=0).astype(float)
        return maxima[id(used)]

    def keep(beta: list, support: list[int], x, used: np.ndarray, d: int) -> None:
        """β's entries from the solution on ``support``, those that contribute more than 1e-14 of the column."""
        largest = column_maxima(used)
        scale = float(largest[d]) or 1.0
        for position, k in enumerate(support):
            contribution = abs(float(x[position])) * float(largest[independent[k]])
            if contribution > 1e-14 * scale:
                beta[k] = _rounded(float(x[position]))

    result = [[sp.Integer(0)] * len(independent) for _ in dependent]
    unfit = []  # columns whose support left a misfit: solved on every independent column, after the others
    for d_index, d in enumerate(dependent):
        support = supports[d_index]
        if support:
            x, fits = _RefinedSolver(rows, [independent[k] for k in support]).solve(d)
            if fits:
                keep(result[d_index], support, x, rows, d)
            else:  # a true coefficient below the float fit's noise was dropped: take every column
                unfit.append(d_index)
    if unfit:
        # Equations enough for every independent column at once, and one factorisation for all these columns; a
        # solution on every column needs no fit check (no column is left out).
        extra = [np.asarray(x, dtype=np.longdouble) for x in _random_states(description, len(independent) + 3, rng)]
        solver = _RefinedSolver(evaluate(*extra, params).reshape(-1, evaluate.columns), list(independent))
        everything = list(range(len(independent)))
        for d_index in unfit:
            keep(result[d_index], everything, solver.solve(dependent[d_index], check=False)[0], solver.rows,
                 dependent[d_index])
    return result


class _RefinedSolver:
    """x with rows[:, columns] x = rows[:, target] for any target column, on a square subsystem (rows chosen and
    factorised once for all targets), refined twice with long double residuals."""

    def __init__(self, rows, columns: list[int]):
        import scipy.linalg

        self.rows, self.A_long = rows, rows[:, columns]
        # Equations where none of the columns appear cannot be among the chosen: leaving them out keeps the
        # factorisations small (a body's columns appear only in its ancestors' rows).
        informative = np.flatnonzero(np.any(self.A_long != 0, axis=1))
        A = self.A_long[informative].astype(float)
        rows, factors = _chosen_rows(A)
        self.chosen = informative[rows]
        self.A_chosen = self.A_long[self.chosen]
        self.lu = factors if factors is not None else scipy.linalg.lu_factor(self.A_chosen.astype(float))

    def solve(self, target: int, check: bool = True):
        """(x, whether x fits every row to 1e-12 of the target column; True unchecked when not ``check``)."""
        import scipy.linalg

        b_long = self.rows[:, target]
        b_chosen = b_long[self.chosen]
        x = scipy.linalg.lu_solve(self.lu, b_chosen.astype(float)).astype(np.longdouble)
        for _ in range(2):
            residual = b_chosen - self.A_chosen @ x
            x = x + scipy.linalg.lu_solve(self.lu, residual.astype(float))
        if not check:
            return x, True
        misfit = float(np.abs(b_long - self.A_long @ x).max())
        return x, misfit <= 1e-12 * max(float(np.abs(b_long).max()), 1e-300)


#: A row choice whose square system has a reciprocal condition number (1-norm estimate) below this is replaced by
#: pivoted QR's.
_ROW_CHOICE_RCOND = 1e-10


def _chosen_rows(A: np.ndarray) -> tuple[np.ndarray, tuple | None]:
    """(rows, factors): sorted indices of A.shape[1] rows of A (full column rank) that make a well-conditioned square
    system, and that system's LU factors (scipy.linalg.lu_factor's form) when they were computed here. The rows: the
    pivot rows of LU with partial pivoting (blocked, BLAS-3), or, when their system is ill-conditioned, pivoted QR's
    (rank-revealing, but BLAS-2 for half its work: on TIAGo's 19,632 x 406 system of all independent columns,
    1.4 s against 0.11 s, and a condition number of 5.3e3 against LU's 3.6e3)."""
    import scipy.linalg
    from scipy.linalg import lapack

    k = A.shape[1]
    lu, swaps, info = lapack.dgetrf(A)
    if info >= 0:
        order = np.arange(A.shape[0])
        for i, j in enumerate(swaps[:k]):  # LAPACK's row interchanges, in order: the rows that became pivots
            order[i], order[j] = order[j], order[i]
        chosen = np.sort(order[:k])
        square_lu, square_swaps, info = lapack.dgetrf(A[chosen])
        if info == 0:
            rcond, info = lapack.dgecon(square_lu, np.abs(A[chosen]).sum(axis=0).max(), norm="1")
            if info == 0 and rcond >= _ROW_CHOICE_RCOND:
                return chosen, (square_lu, square_swaps)
    _, pivots = scipy.linalg.qr(A.T, mode="r", pivoting=True)  # the row choice only: no Q
    return np.sort(pivots[:k]), None


def _rounded(value: float) -> sp.Expr:
    """A double as an exact rational when it is one to the last bit with a short decimal expansion
    (0.0825**2 from a URDF) or a small denominator (4/3), else a Float."""
    from fractions import Fraction

    fraction = Fraction(value).limit_denominator(1000)
    if fraction.denominator > 1 and abs(float(fraction) - value) <= 2.3e-16 * abs(value):
        return sp.Rational(fraction.numerator, fraction.denominator)
    for digits in range(0, 13):
        scaled = round(value * 10**digits)
        if abs(scaled) < 10**15:
            candidate = sp.Rational(scaled, 10**digits)
            if abs(float(candidate) - value) <= 2.3e-16 * abs(value):
                return candidate
    return sp.Float(value, 17)


def _exact(expr: sp.Expr) -> sp.Expr:
    """Floats (URDF numbers) as the exact rationals they are, so that elimination is exact."""
    floats = expr.atoms(sp.Float)
    return expr.xreplace({f: sp.Rational(f) for f in floats}) if floats else expr


class _NotExact(Exception):
    """The regressor has functions that exact states do not reduce to numbers (mimic offsets)."""


def _matrix_function(description, K: sp.Matrix):
    """params -> K as a float array. K's entries are numbers (most of them) or expressions in the description's
    parameters: only the latter are evaluated per call."""
    from .numeric import numpy_function

    constant = np.zeros(K.shape)
    variable = []
    for index, entry in enumerate(K.flat()):  # a list: the matrix's item access is slow on K's 10⁵ entries
        if entry is sp.S.Zero:  # most of them
            continue
        if entry.is_number:
            constant.flat[index] = float(entry)
        else:
            variable.append((index, entry))
    function = numpy_function([[p.symbol for p in description.parameters]], [], [e for _, e in variable])

    def evaluate(params: np.ndarray) -> np.ndarray:
        value = constant.copy()
        for (index, _), entry in zip(variable, function(params)):
            value.flat[index] = float(entry)
        return value

    return evaluate


def _verify(description, evaluate, K_function, independent, rng, defaults_only: bool = False) -> None:
    """Y = Y_base K at fresh random states and parameter values (the structural claim); at the
    defaults only when β could only be found there. ``K_function``: params -> K (``_matrix_function``)."""
    defaults = np.array([float(p.default) for p in description.parameters], dtype=float)
    for _ in range(2):
        params = defaults if defaults_only else _random_parameters(description, rng)
        W = evaluate(*_random_states(description, 8, rng), params)
        K_value = np.asarray(K_function(params), dtype=float)
        residual = np.abs(W - W[:, :, independent] @ K_value).max()
        scale = max(np.abs(W).max(), 1e-300)
        if residual > 1e-9 * scale:
            raise RuntimeError(f"base parameters: Y - Y_base K = {residual:.2e} (scale {scale:.2e}) at random "
                               "values of the description's parameters; the dependencies found are not structural")


def _symbols_beyond_gravity(description) -> set:
    """The description's symbols outside its gravity (geometry, inertia, friction, gear ratios): a gravity
    g0/(a1 + a2) may be fixed at its default to find K, but its a1 and a2 may not."""
    import dataclasses

    found: set = set()
    pending: list = [getattr(description, field.name) for field in dataclasses.fields(description)
                     if field.name not in ("parameters", "gravity")]
    while pending:
        item = pending.pop()
        if isinstance(item, sp.Basic):
            found |= item.free_symbols
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            pending += [getattr(item, field.name) for field in dataclasses.fields(item)]
        elif isinstance(item, (tuple, list)):
            pending += list(item)
        elif isinstance(item, dict):
            pending += list(item.keys()) + list(item.values())
    return found


def _gravity_restriction(description, evaluate, K_function, independent, rng) -> tuple[float, float, float] | None:
    """The default gravity when the parameters can tilt gravity and K then fails (Y ≠ Y_base K), else None. A
    zero default gravity is returned as (0, 0, 0) when some gravity breaks K (any gravity then "tilts" it).

    The gravity's parameters are drawn anywhere in ±2 max(|default|, 1) (a zero default too, unlike
    _random_parameters), the others at their defaults."""
    gravity = sp.Matrix(description.gravity)
    symbols = set().union(*(g.free_symbols for g in gravity))
    if not symbols:
        return None
    parameters = [p.symbol for p in description.parameters]
    default = np.array([float(p.default) for p in description.parameters], dtype=float)
    g0 = np.array([float(g) for g in gravity.xreplace(description.defaults)], dtype=float)
    g_of = sp.lambdify([parameters], list(gravity), "numpy")
    for _ in range(3):
        params = default.copy()
        for k, symbol in enumerate(parameters):
            if symbol in symbols:
                params[k] = rng.uniform(-2, 2) * max(abs(default[k]), 1.0)
        g = np.array(g_of(params), dtype=float)
        if not np.any(g0) and not np.any(g):
            continue
        if np.any(g0) and np.linalg.norm(np.cross(g, g0)) <= 1e-6 * np.linalg.norm(g) * np.linalg.norm(g0):
            continue  # this draw did not tilt gravity (a magnitude-only parameter such as g0)
        W = evaluate(*_random_states(description, 8, rng), params)
        residual = np.abs(W - W[:, :, independent] @ np.asarray(K_function(params), dtype=float)).max()
        if residual > 1e-9 * max(np.abs(W).max(), 1e-300):
            return tuple(float(v) for v in g0)
    return None


__all__ = ["Regressor", "BaseParameters", "derive_regressor", "LINK_PARAMETERS", "PARAMETER_LAYOUT", "barycentric"]
