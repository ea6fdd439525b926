"""Stage 2 for closed chains: the model of a mechanism in its actuated coordinates.

A closed-chain description is a kinematic tree (every joint, actuated and passive: the loops cut at
their cut joints) plus loop closures (``description.closure``). This module

1. derives the tree's model as for any tree robot (``derive_model`` without the closure), in tree
   coordinates x;
2. writes the loop equations h(x) = 0 (the cut joint's position and orientation conditions, rows that
   vanish identically in a planar loop dropped);
3. where the loop is a planar dyad — two branches from the base, each an actuated joint (prismatic in
   the plane, or revolute about the plane's normal) followed by a passive revolute about the normal,
   joined by a revolute cut joint — solves the geometry in closed form: the platform point P is where
   two circles meet (assembly mode ω: the side of the line anchor 1 → anchor 2), each actuated joint
   from P on a line or a circle (working mode σ_i), each passive angle by atan2;
4. projects the tree's dynamics on the actuated coordinates with G = ∂x/∂qa = [I; Jp]:
   M = Gᵀ M_x G, C = Gᵀ (M_x Ġ + C_x(x, G q̇a) G) (so Ṁ − 2C stays skew-symmetric), g = Gᵀ g_x,
   friction: the actuated joints' own, plus the passive joints' Jpᵀ f_p(Jp q̇a) in the bias,
   Jp = −A_x⁻¹ B_x from h(x), J̇p = −A_x⁻¹ (Ȧ_x Jp + Ḃ_x).

The user-facing first-order kinematics are the notes' task-space form: with ξ the in-plane coordinates
of P and h_i(ξ, qa) = |P − C_i(qa_i)|² − L_i² (one per branch, C_i the anchor of branch i),
A ξ̇ + B q̇a = 0, A = ∂h/∂ξ, B = ∂h/∂qa, J = −A⁻¹B; type-2 singularities det A = 0, type-1 det B = 0.

Mechanisms of another shape get the loop equations and the tree routines only (the multiplier model of
``robodyn.closed_chain``); ``ClosedChainModel.closed_form`` is then None and ``reason`` says why.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import sympy as sp

from .. import geometry
from ..description.model import RobotDescription
from ..errors import DescriptionError
from .common import Progress, model_symbols
from .lagrange import SymbolicModel
from .program import Program


@dataclass(frozen=True)
class Branch:
    """One side of a planar dyad: actuated joint -> passive revolute -> the cut point."""

    actuated: int  # index in the tree
    passive: int
    anchor: sp.Matrix  # in-plane position (2x1) of the passive joint's axis, function of the actuated coordinate
    reference: sp.Matrix  # in-plane direction (2x1, length L) from the anchor to the cut point at passive angle 0
    length_squared: sp.Expr  # L²
    passive_sign: int  # +1 if the passive axis is the plane normal, -1 if opposite
    actuated_kind: str
    # Prismatic: anchor = start + q * direction. Revolute: anchor = centre + R(sign * q) (start - centre).
    start: sp.Matrix
    direction: sp.Matrix
    centre: sp.Matrix
    actuated_sign: int


@dataclass(frozen=True)
class ClosedForm:
    """The closed-form geometry of one planar dyad (symbols: the model's q and the task coordinates ξ)."""

    plane: tuple[int, int, int]  # normal axis, first and second in-plane axes of the base frame
    branches: tuple[Branch, Branch]
    xi: tuple[sp.Symbol, sp.Symbol]
    dgm: tuple[sp.ImmutableMatrix, ...]  # per assembly mode (+1, -1): ξ(q)
    igm: tuple[sp.ImmutableMatrix, ...]  # per working mode: q(ξ), ξ given as ``xi``
    passive: tuple[sp.ImmutableMatrix, ...]  # per assembly mode: passive positions (tree order) in q and ξ
    A: sp.ImmutableMatrix  # in q and ξ
    B: sp.ImmutableMatrix
    singularity: sp.ImmutableMatrix  # det A, det B, det A / (4 L1 L2), det B / (4 L1 L2 |C1'| |C2'|)
    working_modes: tuple[tuple[int, ...], ...]
    loci: tuple[str, ...]  # the singularity loci in words and formulas (build report)


@dataclass(frozen=True)
class ClosedChainModel:
    """What the routines of a closed chain need besides the reduced SymbolicModel."""

    tree: SymbolicModel  # the tree's model in its own symbols (the tree routines use it)
    actuated: tuple[int, ...]
    passive: tuple[int, ...]
    constraint: sp.ImmutableMatrix  # h(x) in the tree model's symbols q
    constraint_jacobian: sp.ImmutableMatrix  # ∂h/∂x
    constraint_bias: sp.ImmutableMatrix  # Ḣ ẋ
    closed_form: ClosedForm | None
    reason: str  # why there is no closed form ("" when there is one)
    assembly_mode: int
    # Reduced-model routines' values (closed form only), over the model's definitions:
    task_jacobian: sp.ImmutableMatrix | None = None
    task_jacobian_dot: sp.ImmutableMatrix | None = None
    task_bias: sp.ImmutableMatrix | None = None
    passive_jacobian: sp.ImmutableMatrix | None = None
    passive_jacobian_dot: sp.ImmutableMatrix | None = None

    @property
    def assembly_modes(self) -> tuple[int, ...]:
        return (1, -1)


def _error(description: RobotDescription, message: str, field_: str = "loops", line: int | None = None):
    return DescriptionError(description.path, line if line is not None else description.closure.line, field_, message)


def _frames(description: RobotDescription, x) -> tuple[list[sp.Matrix], list[sp.Matrix]]:
    """Joint frames (before the motion) and link frames of the tree, base frame, in positions x."""
    joint_frames, link_frames = [], []
    for i, joint in enumerate(description.joints):
        parent = sp.Matrix(description.base) if joint.parent < 0 else link_frames[joint.parent]
        frame = parent * sp.Matrix(joint.placement)
        joint_frames.append(frame)
        link_frames.append(frame * geometry.screw(joint.kind, sp.Matrix(joint.axis), x[i]) * sp.Matrix(joint.successor))
    return joint_frames, link_frames


def _simple(expr):
    return sp.trigsimp(sp.expand(expr))


def loop_equations(description: RobotDescription, x) -> sp.Matrix:
    """h(x): per loop, the cut joint's conditions, rows that vanish identically dropped.

    Revolute cut: the two points coincide (3 rows) and the two axes are parallel (the cross product of
    the axis seen from each link: 3 rows, rank 2). Prismatic cut: the second point stays on the line
    through the first along the axis (cross product: 3 rows, rank 2) and the links keep their relative
    orientation (the vector part of R_a R_bᵀ: 3 rows)."""
    _, link_frames = _frames(description, x)
    base = sp.Matrix(description.base)
    rows = []
    for loop in description.closure.loops:
        frames = [base if k < 0 else link_frames[k] for k in loop.links]
        points = [(frame * sp.Matrix([*point, 1]))[:3, 0] for frame, point in zip(frames, loop.points)]
        axis_a = frames[0][:3, :3] * sp.Matrix(loop.axis)
        if loop.kind == "revolute":
            rows += list(points[0] - points[1])
            # The axis as fixed in link b (where it is at assembly: equal to axis_a).
            axis_b = frames[1][:3, :3] * sp.Matrix(loop.axis)
            rows += list(axis_a.cross(axis_b))
        else:
            rows += list((points[1] - points[0]).cross(axis_a))
            relative = frames[0][:3, :3] * frames[1][:3, :3].T
            rows += [(relative[2, 1] - relative[1, 2]) / 2, (relative[0, 2] - relative[2, 0]) / 2,
                     (relative[1, 0] - relative[0, 1]) / 2]
    kept = []
    for row in rows:
        row = _simple(row)
        if row != 0:
            kept.append(row)
    return sp.Matrix(kept)


def _plane(description: RobotDescription, vectors) -> int | None:
    """The base axis (0, 1, 2) every vector is parallel to (same or opposite direction), or None."""
    axis = None
    for v in vectors:
        v = v.applyfunc(_simple)
        nonzero = [k for k in range(3) if v[k] != 0]
        if len(nonzero) != 1 or not v[nonzero[0]].is_number or abs(v[nonzero[0]]) != 1:
            return None
        if axis is not None and nonzero[0] != axis:
            return None
        axis = nonzero[0]
    return axis


def _dyad(description: RobotDescription, joint_frames, link_frames) -> tuple[tuple | None, str]:
    """(plane, branches) of a planar dyad, or (None, why not)."""
    closure = description.closure
    joints = description.joints
    if len(closure.loops) != 1:
        return None, "the closed form covers a single loop"
    loop = closure.loops[0]
    if loop.kind != "revolute":
        return None, "the closed form needs a revolute cut joint"
    if min(loop.links) < 0:
        return None, "the closed form needs the loop to close between two moving links"
    passive = set(closure.passive(len(joints)))
    sides = []
    for link in loop.links:
        chain = description.chain(link)  # tip first
        if len(chain) != 2 or chain[0] not in passive or chain[1] not in closure.actuated:
            return None, ("the closed form needs each side of the loop to be an actuated joint on the base "
                          "followed by a passive joint")
        if joints[chain[0]].kind != "revolute":
            return None, "the closed form needs passive revolute joints next to the cut joint"
        sides.append(chain)
    if sides[0][1] == sides[1][1] or set(closure.actuated) != {sides[0][1], sides[1][1]}:
        return None, "the closed form needs the two sides of the loop to be driven by its two actuated joints"
    axes = [joint_frames[p][:3, :3] * sp.Matrix(joints[p].axis) for p, _ in sides]
    axes.append(link_frames[loop.links[0]][:3, :3] * sp.Matrix(loop.axis))
    normal = _plane(description, axes)
    revolute_axes = [joint_frames[a][:3, :3] * sp.Matrix(joints[a].axis) for _, a in sides
                     if joints[a].kind == "revolute"]
    if normal is None or (revolute_axes and _plane(description, revolute_axes + axes) != normal):
        return None, ("the closed form needs a planar loop whose revolute axes are parallel to one axis of the "
                      "base link's frame")
    for _, a in sides:
        if joints[a].kind == "prismatic":
            direction = (joint_frames[a][:3, :3] * sp.Matrix(joints[a].axis)).applyfunc(_simple)
            if direction[normal] != 0:
                return None, "the closed form needs prismatic actuators that move in the loop's plane"
    return (normal, sides), ""


def _rot90(v: sp.Matrix) -> sp.Matrix:
    return sp.Matrix([-v[1], v[0]])


def _cross2(a, b):
    return a[0] * b[1] - a[1] * b[0]


def _closed_form(description: RobotDescription, q, plane_sides, joint_frames, link_frames, x) -> ClosedForm | None:
    """The dyad's geometry; ``joint_frames``/``link_frames`` are in tree positions ``x`` (x[actuated] = q).
    None when it degenerates (a distal link of zero length, an anchor on its motor's axis)."""
    normal, sides = plane_sides
    first, second = (normal + 1) % 3, (normal + 2) % 3
    closure = description.closure
    joints = description.joints
    loop = closure.loops[0]
    actuated_index = {tree: k for k, tree in enumerate(closure.actuated)}
    at = {x[tree]: q[k] for tree, k in actuated_index.items()}

    def plane2(v) -> sp.Matrix:
        return sp.Matrix([_simple(v[first]), _simple(v[second])])

    branches = []
    for (passive, actuated), point in zip(sides, loop.points):
        frame = joint_frames[passive].xreplace(at)
        axis_world = (frame[:3, :3] * sp.Matrix(joints[passive].axis)).applyfunc(_simple)
        passive_sign = int(axis_world[normal])
        offset = sp.Matrix(joints[passive].successor) * sp.Matrix([*point, 1])
        reference = plane2(frame[:3, :3] * offset[:3, 0])
        anchor = plane2(frame[:3, 3])
        qk = q[actuated_index[actuated]]
        kind = joints[actuated].kind
        act_frame = joint_frames[actuated].xreplace(at)
        act_axis = (act_frame[:3, :3] * sp.Matrix(joints[actuated].axis)).applyfunc(_simple)
        start = anchor.xreplace({qk: 0}).applyfunc(_simple)
        direction = plane2(act_axis) if kind == "prismatic" else sp.zeros(2, 1)
        centre = plane2(act_frame[:3, 3]) if kind == "revolute" else sp.zeros(2, 1)
        actuated_sign = int(act_axis[normal]) if kind == "revolute" else 1
        branches.append(Branch(actuated, passive, anchor, reference, _simple(reference.dot(reference)), passive_sign,
                               kind, start, direction, centre, actuated_sign))
    # The cut points must lie at the same height along the normal (else the loop never closes).
    heights = []
    for (passive, _), point in zip(sides, loop.points):
        heights.append((link_frames[passive] * sp.Matrix([*point, 1]))[normal, 0])
    if _simple(heights[0] - heights[1]) != 0:
        raise _error(description, "the two points of the loop closure are at different heights along the loop's "
                     "normal, so the loop can never close", line=loop.line)

    b1, b2 = branches
    for b in branches:  # a degenerate dyad: the solver below would divide by zero
        radius = _simple((b.start - b.centre).dot(b.start - b.centre)) if b.actuated_kind == "revolute" else 1
        if b.length_squared == 0 or radius == 0:
            return None
    xi = sp.symbols("xi1 xi2", real=True)
    P = sp.Matrix(xi)
    # DGM: P on the circle of radius L_i about each anchor, on side ω of the line anchor 1 -> anchor 2.
    e = b2.anchor - b1.anchor
    s2 = _simple(e.dot(e))
    s = sp.sqrt(s2)
    along = (s2 + b1.length_squared - b2.length_squared) / (2 * s)
    height = sp.sqrt(b1.length_squared - along**2)
    dgm = tuple(sp.ImmutableMatrix(b1.anchor + along * e / s + omega * height * _rot90(e) / s) for omega in (1, -1))

    # Passive angles: from the reference direction to P - anchor, about the normal.
    def passive_angles(p: sp.Matrix) -> list[sp.Expr]:
        return [b.passive_sign * sp.atan2(_cross2(b.reference, p - b.anchor), b.reference.dot(p - b.anchor))
                for b in branches]

    passive = tuple(sp.ImmutableMatrix(passive_angles(P)) for _ in (1, -1))

    # IGM: each actuated coordinate from P, one branch at a time (working mode σ_i = sign B_ii).
    def actuated_solutions(b: Branch, sigma: int) -> sp.Expr:
        if b.actuated_kind == "prismatic":
            w = P - b.start
            along_ = b.direction.dot(w)
            return along_ + sigma * sp.sqrt(along_**2 - w.dot(w) + b.length_squared)
        radius_squared = _simple((b.start - b.centre).dot(b.start - b.centre))
        e_ = P - b.centre
        d2 = e_.dot(e_)
        d = sp.sqrt(d2)
        a_ = (d2 + radius_squared - b.length_squared) / (2 * d)
        h_ = sp.sqrt(radius_squared - a_**2)
        anchor = b.centre + a_ * e_ / d + sigma * b.actuated_sign * h_ * _rot90(e_) / d
        r0, r = b.start - b.centre, anchor - b.centre
        return b.actuated_sign * sp.atan2(_cross2(r0, r), r0.dot(r))

    n = len(closure.actuated)
    working = tuple(itertools.product((1, -1), repeat=n))
    igm = []
    for modes in working:
        values = [None] * n
        for b, sigma in zip(branches, modes):
            values[actuated_index[b.actuated]] = actuated_solutions(b, sigma)
        igm.append(sp.ImmutableMatrix(values))

    # Task-space loop equations h_i = |P - C_i|² - L_i².
    h = [(P - b.anchor).dot(P - b.anchor) - b.length_squared for b in branches]
    A = sp.Matrix([[sp.expand(sp.diff(hi, xj)) for xj in xi] for hi in h])
    B = sp.Matrix([[sp.expand(sp.diff(hi, qk)) for qk in q] for hi in h])
    det_a, det_b = sp.expand(A.det()), sp.expand(B.det())
    speeds = []
    for b in branches:
        speeds.append(sp.Integer(1) if b.actuated_kind == "prismatic"
                      else sp.sqrt(_simple((b.start - b.centre).dot(b.start - b.centre))))
    lengths = sp.sqrt(b1.length_squared) * sp.sqrt(b2.length_squared)
    singularity = sp.ImmutableMatrix([det_a, det_b, det_a / (4 * lengths),
                                      det_b / (4 * lengths * speeds[0] * speeds[1])])
    plane = (normal, first, second)
    return ClosedForm(plane, (b1, b2), xi, dgm, tuple(igm), passive, sp.ImmutableMatrix(A), sp.ImmutableMatrix(B),
                      singularity, working, _loci(description, branches, det_a, det_b, xi, q, plane))


def _loci(description, branches, det_a, det_b, xi, q, plane) -> tuple[str, ...]:
    """The singularity loci as text (the build report and the robot's metadata)."""
    axes = "xyz"
    task = {xi[0]: sp.Symbol(axes[plane[1]]), xi[1]: sp.Symbol(axes[plane[2]])}
    names = [description.joints[t].name for t in description.closure.actuated]
    coordinates = ", ".join(f"{symbol} = {name}" for symbol, name in zip(q, names))
    lines = [f"coordinates: {coordinates}; platform point ({axes[plane[1]]}, {axes[plane[2]]})",
             f"type 2 (parallel: the two distal links aligned): det A = {sp.sstr(sp.factor(det_a.xreplace(task)))} = 0",
             "type 1 (serial: a distal link normal to its anchor's motion): "
             f"det B = {sp.sstr(sp.factor(det_b.xreplace(task)))} = 0"]
    b1, b2 = branches
    if (b1.actuated_kind == b2.actuated_kind == "prismatic" and b1.length_squared == b2.length_squared
            and _simple(b1.direction - b2.direction) == sp.zeros(2, 1)):
        # Parallel rails a distance w apart: aligned legs when the anchors are 2L apart, a leg normal to
        # the rails when the platform is level with its foot, at |q1 - q2 + shift| = sqrt(2 L w - w²).
        gap = b2.start - b1.start
        width = sp.sqrt(sp.factor(_simple(_cross2(b1.direction, gap)) ** 2))
        shift = _simple(b1.direction.dot(gap))
        difference = q[0] - q[1] - shift
        L2 = b1.length_squared
        lines.append(f"in the actuated coordinates: type 2 where |{sp.sstr(difference)}| = "
                     f"{sp.sstr(sp.sqrt(sp.expand(4 * L2 - width**2)))}; type 1 where |{sp.sstr(difference)}| = "
                     f"{sp.sstr(sp.sqrt(sp.expand(2 * sp.sqrt(L2) * width - width**2)))} (one leg normal to the rails)")
    return tuple(lines)


def _independent_loop_equations(description: RobotDescription, tree: SymbolicModel, say) -> tuple:
    """h(x), H = ∂h/∂x and Ḣ ẋ in the tree's symbols, dependent rows dropped; DescriptionError for a loop that
    can never close, adds no condition, or leaves another number of degrees of freedom than actuated joints."""
    x_tree = tree.q
    h = loop_equations(description, x_tree)
    for row in h:
        if not row.free_symbols & set(x_tree):
            raise _error(description, f"the loop can never close: its condition {sp.sstr(row)} = 0 does not depend on "
                         "the joints (check the loop's points and the joints' placements)")
    if h.rows == 0:
        raise _error(description, "the loop closure adds no condition: its two points and axes coincide in every "
                     "configuration (it joins a link to itself through fixed transforms)")
    H = h.jacobian(x_tree).applyfunc(sp.expand)
    rows, assembled = _independent_rows(h, H, x_tree, description)
    if len(rows) < h.rows:
        say(f"  kept {len(rows)} independent loop equations of {h.rows}")
        h, H = h.extract(rows, [0]), H.extract(rows, list(range(H.cols)))
    if len(description.joints) - len(rows) != len(description.closure.actuated):
        raise _mobility_error(description, len(rows))
    _check_passive_determined(description, [values[rows] for values in assembled])
    bias = ((H * sp.Matrix(tree.qd)).jacobian(x_tree) * sp.Matrix(tree.qd)).applyfunc(sp.expand)
    return h, H, bias


def _check_passive_determined(description: RobotDescription, jacobians: list) -> None:
    """The actuated joints must fix the passive ones: the passive columns of H (independent rows) must be
    of full rank where the loops close, at one configuration at least (else the loop constrains the actuated
    joints among themselves, or a passive joint does not move the loop at all)."""
    import numpy as np

    passive = list(description.closure.passive(len(description.joints)))
    for values in jacobians:
        block = values[:, passive]
        scale = max(1.0, float(np.max(np.abs(values))))
        if np.linalg.matrix_rank(block, tol=1e-9 * scale) == len(passive):
            return
    names = ", ".join(description.joints[i].name for i in passive)
    raise _error(description, f"the actuated joints do not determine the passive ones ({names}) where the loops close: "
                 "the loops constrain the actuated joints among themselves, or a passive joint does not move its loop "
                 "(list under 'actuated' joints whose positions, once fixed, fix the others)", "actuated",
                 description.closure.actuated_line or None)


def _mobility_error(description: RobotDescription, rank: int) -> DescriptionError:
    t, n = len(description.joints), len(description.closure.actuated)
    hint = ""
    if t - rank < n:  # often a planar loop whose cut axis (default z) is not its joints' axis
        hint = ("; if the loop is planar, check that each cut joint's 'axis' (default z, in its first link's frame) "
                "is parallel to the loop's joint axes, else it adds conditions")
    return _error(description, f"the mechanism has {t} joints and {rank} independent loop equations, so {t - rank} "
                  f"degree(s) of freedom, but {n} actuated joint(s); list exactly {t - rank} under 'actuated'{hint}",
                  "actuated", description.closure.actuated_line or None)


def derive_closed_chain(description: RobotDescription, options, progress: Progress | None = None) -> SymbolicModel:
    """The reduced model of a closed chain (``description.closure`` set), with ``closed_chain`` filled in."""
    import time

    from . import derive_model

    say = progress or (lambda message: None)
    started = time.perf_counter()
    closure = description.closure
    if description.bodies:
        raise _error(description, "a closed chain cannot have coupled (mimic) joints yet")
    t = len(description.joints)
    tree_description = dataclasses.replace(description, closure=None)
    say("  the virtual tree (every joint, the loops cut)")
    tree = derive_model(tree_description, options, progress=progress, regressor=False)
    x_tree = tree.q
    # Loop equations and closed-form geometry in the base link's frame: they do not depend on where the base
    # stands (`base:`), and a planar mechanism's plane is normal to one of the base link's axes.
    local = dataclasses.replace(description, base=sp.ImmutableMatrix(sp.eye(4)))
    h, H, constraint_bias = _independent_loop_equations(local, tree, say)
    n = len(closure.actuated)
    q, qd, qdd, tau, wrench = model_symbols(n)
    joint_frames, link_frames = _frames(local, x_tree)
    plane_sides, reason = _dyad(local, joint_frames, link_frames)
    closed_form = None
    if plane_sides is not None:
        closed_form = _closed_form(local, q, plane_sides, joint_frames, link_frames, x_tree)
        if closed_form is None:
            plane_sides, reason = None, ("a distal link has zero length, or an anchor lies on its motor's axis: the "
                                         "closed form degenerates")
    base = dict(tree=tree, actuated=closure.actuated, passive=closure.passive(t), constraint=sp.ImmutableMatrix(h),
                constraint_jacobian=sp.ImmutableMatrix(H), constraint_bias=sp.ImmutableMatrix(constraint_bias),
                assembly_mode=options.assembly_mode)
    if plane_sides is None:
        # No closed form: the module is the tree's, with the loop routines; robodyn.closed_chain simulates it
        # with multipliers.
        say(f"  no closed-form geometry ({reason}): the tree's model and the loop equations only")
        closed = ClosedChainModel(**base, closed_form=None, reason=reason)
        return dataclasses.replace(tree, description=description, closed_chain=closed, method="closed_chain_tree",
                                   timings=dict(tree.timings, closed_chain_s=time.perf_counter() - started))
    reduced_description = _reduced_description(description)
    say("  closed-form geometry of the planar dyad")
    xi_values = closed_form.dgm[0] if options.assembly_mode == 1 else closed_form.dgm[1]
    program = Program("k")

    # 1. Geometry at the build's assembly mode: ξ, then the tree positions x.
    xi = closed_form.xi
    definitions: list[tuple[sp.Symbol, sp.Expr]] = list(zip(xi, xi_values))
    x = sp.symbols(f"x1:{t + 1}", real=True)
    xd = sp.symbols(f"xd1:{t + 1}", real=True)
    index = {tree_joint: k for k, tree_joint in enumerate(closure.actuated)}
    passive = closure.passive(t)
    for j in range(t):
        if j in index:
            definitions.append((x[j], q[index[j]]))
        else:
            branch = next(k for k, b in enumerate(closed_form.branches) if b.passive == j)
            definitions.append((x[j], closed_form.passive[0][branch]))
    # 2. Passive Jacobian from the tree's loop equations: A_x = ∂h/∂x_p, B_x = ∂h/∂x_a, Jp = −A_x⁻¹ B_x.
    rename = dict(zip(x_tree, x)) | dict(zip(tree.qd, xd))
    A_x = H.extract(list(range(H.rows)), list(passive)).xreplace(rename)
    B_x = H.extract(list(range(H.rows)), list(closure.actuated)).xreplace(rename)
    det = program.let(sp.expand(A_x.det()))
    A_inv = A_x.adjugate() / det
    Jp = (-(A_inv * B_x)).applyfunc(lambda e: program.let(sp.expand(e)))
    G = sp.zeros(t, n)
    for j in range(t):
        if j in index:
            G[j, index[j]] = 1
        else:
            G[j, :] = Jp[passive.index(j), :]
    xd_values = G * sp.Matrix(qd)
    velocities = [(xd[j], qd[index[j]] if j in index else program.let(sp.expand(xd_values[j]))) for j in range(t)]
    definitions += list(program.definitions) + velocities
    known = len(program.definitions)

    def time_derivative(matrix: sp.Matrix) -> sp.Matrix:
        return sum((matrix.diff(x[j]) * xd[j] for j in range(t)), sp.zeros(*matrix.shape))

    Jp_dot = (-(A_inv * (time_derivative(A_x) * Jp + time_derivative(B_x)))).applyfunc(
        lambda e: program.let(sp.expand(e)))
    definitions += program.definitions[known:]
    G_dot = sp.zeros(t, n)
    for j in passive:
        G_dot[j, :] = Jp_dot[passive.index(j), :]
    # 3. The tree model in the renamed symbols x, xd (its own intermediates renamed too).
    tree_map = dict(rename)
    for symbol, _ in tree.definitions:
        tree_map[symbol] = sp.Symbol("t_" + symbol.name, real=True)
    definitions += [(tree_map[s], v.xreplace(tree_map)) for s, v in tree.definitions]
    M_x = sp.Matrix(tree.M).xreplace(tree_map)
    C_x = sp.Matrix(tree.C).xreplace(tree_map)
    g_x = sp.Matrix(tree.g).xreplace(tree_map)
    friction_x = sp.Matrix(tree.friction).xreplace(tree_map)
    M = (G.T * M_x * G).applyfunc(sp.expand)
    C = (G.T * (M_x * G_dot + C_x * G)).applyfunc(sp.expand)
    g = (G.T * g_x).applyfunc(sp.expand)
    # friction(qd) is the actuated joints' own (a function of qd alone, like a serial robot's); the passive
    # joints' friction, Jpᵀ f_p(Jp q̇), depends on q too and goes into the bias (nonlinear_effects).
    friction = sp.Matrix([friction_x[j].xreplace({xd[j]: qd[index[j]]}) for j in closure.actuated])
    passive_friction = sp.zeros(n, 1)
    for j in passive:
        passive_friction += Jp[passive.index(j), :].T * friction_x[j]
    bias = (C * sp.Matrix(qd) + g + friction + passive_friction).applyfunc(sp.expand)
    kinetic = sp.expand((sp.Matrix(qd).T * M * sp.Matrix(qd))[0, 0] / 2)
    potential = tree.potential_energy.xreplace(tree_map)
    tool_pose = sp.Matrix(tree.tool_pose).xreplace(tree_map)
    tool_jacobian = (sp.Matrix(tree.tool_jacobian).xreplace(tree_map) * G).applyfunc(sp.expand)

    J, J_dot, b = _task_kinematics(closed_form, q, qd)
    timings = dict(tree.timings, closed_chain_s=time.perf_counter() - started)
    closed = ClosedChainModel(
        **base, closed_form=closed_form, reason="",
        task_jacobian=sp.ImmutableMatrix(J), task_jacobian_dot=sp.ImmutableMatrix(J_dot),
        task_bias=sp.ImmutableMatrix(b), passive_jacobian=sp.ImmutableMatrix(Jp),
        passive_jacobian_dot=sp.ImmutableMatrix(Jp_dot))
    say(f"  reduced to {n} actuated coordinates in {time.perf_counter() - started:.2f} s")
    return SymbolicModel(
        description=reduced_description, q=q, qd=qd, qdd=qdd, tau=tau, wrench=wrench,
        parameters=description.parameter_symbols, M=sp.ImmutableMatrix(M), C=sp.ImmutableMatrix(C),
        g=sp.ImmutableMatrix(g), friction=sp.ImmutableMatrix(friction), kinetic_energy=kinetic,
        potential_energy=potential, link_transforms=(), tool_pose=sp.ImmutableMatrix(tool_pose),
        tool_jacobian=sp.ImmutableMatrix(tool_jacobian), definitions=tuple(definitions), method="closed_chain",
        bias=sp.ImmutableMatrix(bias), closed_chain=closed, timings=timings)


def _task_kinematics(form: ClosedForm, q, qd) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """The notes' first and second order in the task coordinates ξ: J = −A⁻¹B, J̇ = −A⁻¹ (Ȧ J + Ḃ) and
    b = J̇ q̇, with Ȧ, Ḃ by the chain rule through ξ̇ = J q̇ (ξ symbols, defined by the model's DGM)."""
    A, B = sp.Matrix(form.A), sp.Matrix(form.B)
    det_A = sp.expand(A.det())
    A_adj = A.adjugate()
    J = (-(A_adj * B) / det_A).applyfunc(sp.expand)
    xi_dot = J * sp.Matrix(qd)

    def time_derivative(matrix: sp.Matrix) -> sp.Matrix:
        out = sp.zeros(*matrix.shape)
        for m, symbol in enumerate(form.xi):
            out += matrix.diff(symbol) * xi_dot[m]
        for k, symbol in enumerate(q):
            out += matrix.diff(symbol) * qd[k]
        return out

    J_dot = -(A_adj * (time_derivative(A) * J + time_derivative(B))) / det_A
    return J, J_dot, J_dot * sp.Matrix(qd)


def _reduced_description(description: RobotDescription) -> RobotDescription:
    """The description as the reduced model sees it: its coordinates are the actuated joints (a chain for
    the L^T D L solve: M is dense)."""
    actuated = [description.joints[i] for i in description.closure.actuated]
    joints = tuple(dataclasses.replace(joint, parent=k - 1) for k, joint in enumerate(actuated))
    return dataclasses.replace(description, joints=joints, bodies=(), tool_link=-1)


def _independent_rows(h: sp.Matrix, H: sp.Matrix, x, description: RobotDescription) -> tuple[list[int], list]:
    """Rows of h(x) = 0 that are independent where the loops close: pivoted QR of Hᵀ at configurations that
    assemble (found by Levenberg-Marquardt from pseudo-random starts, at the default parameters); and the
    values of H there."""
    import numpy as np
    from scipy.linalg import qr
    from scipy.optimize import least_squares

    defaults = {p.symbol: p.default for p in description.parameters}
    residual = sp.lambdify([list(x)], list(h.xreplace(defaults)), "numpy")
    jacobian = sp.lambdify([list(x)], H.xreplace(defaults), "numpy")
    rng = np.random.default_rng(0)
    chosen: list[int] | None = None
    assembled = []
    for _ in range(12):
        fit = least_squares(lambda v: np.asarray(residual(v), dtype=float),
                            rng.uniform(-np.pi, np.pi, len(x)),
                            jac=lambda v: np.asarray(jacobian(v), dtype=float).reshape(H.shape),
                            method="trf", xtol=1e-15, ftol=1e-15, gtol=1e-15)
        if not np.all(np.isfinite(fit.fun)) or np.max(np.abs(fit.fun)) > 1e-10:
            continue
        values = np.asarray(jacobian(fit.x), dtype=float).reshape(H.shape)
        assembled.append(values)
        _, r, pivots = qr(values.T, pivoting=True)
        diagonal = np.abs(np.diag(r))
        rank = int(np.sum(diagonal > 1e-9 * max(1.0, float(diagonal[0]) if diagonal.size else 1.0)))
        rows = sorted(int(k) for k in pivots[:rank])
        if chosen is None or len(rows) > len(chosen):
            chosen = rows
    if chosen is None:
        raise _error(description, "the loops cannot be closed: no configuration was found where the loop equations "
                     "hold (check the lengths: the two branches must be able to meet)")
    return chosen, assembled
