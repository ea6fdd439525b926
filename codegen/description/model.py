"""The parsed, validated robot description: plain immutable data.

Kinematics of every joint is normalised to one form, whatever the user wrote
(standard DH, modified DH or a URDF-style origin + axis)::

    T_child = T_parent @ placement @ Screw(axis, q) @ successor

``placement`` and ``successor`` are constant transforms; ``Screw`` rotates
about (revolute) or translates along (prismatic) ``axis``, expressed in the
joint frame. Standard DH puts the fixed ``a``/``alpha`` part in
``successor`` (its ``theta``/``d`` offsets commute with the motion and go in
``placement``); modified DH and URDF put everything in ``placement``.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp


@dataclass(frozen=True)
class Parameter:
    name: str
    default: float
    symbol: sp.Symbol


@dataclass(frozen=True)
class Inertial:
    mass: sp.Expr
    com: sp.ImmutableMatrix  # 3x1, link frame
    inertia: sp.ImmutableMatrix  # 3x3 about the centre of mass, link frame axes
    planar: bool  # only Izz was given: valid for links that rotate about z only


@dataclass(frozen=True)
class Rotor:
    """Rotor of the motor driving a joint; it rides on the joint's parent link."""

    inertia: sp.Expr  # about its own spin axis
    gear_ratio: sp.Expr  # rotor speed = gear_ratio * joint speed
    mass: sp.Expr
    com: sp.ImmutableMatrix  # 3x1, in the joint frame (before the joint motion)
    axis: sp.ImmutableMatrix  # unit 3x1, in the joint frame
    transverse_inertia: sp.Expr  # about axes through its centre, normal to the spin axis


@dataclass(frozen=True)
class Limits:
    lower: float | None
    upper: float | None
    velocity: float | None
    effort: float | None


@dataclass(frozen=True)
class Mimic:
    """This joint's position is ``multiplier * q[source] + offset`` (chains already resolved)."""

    source: int  # index of the driving coordinate in RobotDescription.joints
    multiplier: sp.Expr
    offset: sp.Expr


@dataclass(frozen=True)
class Joint:
    name: str
    kind: str  # "revolute" | "prismatic"
    parent: int  # index of the parent joint's child link, -1 for the base
    placement: sp.ImmutableMatrix  # 4x4
    axis: sp.ImmutableMatrix  # unit 3x1 in the joint frame
    successor: sp.ImmutableMatrix  # 4x4
    link_name: str
    inertial: Inertial
    viscous: sp.Expr
    coulomb: sp.Expr
    rotor: Rotor | None
    limits: Limits
    line: int  # where the joint starts in the description, for later messages
    mimic: Mimic | None = None  # set on coupled joints of RobotDescription.bodies only


@dataclass(frozen=True)
class LoopClosure:
    """A cut joint closing a kinematic loop: it connects a point of one link to a point of another.

    A revolute cut joint makes the two points coincide and the two axes parallel; a prismatic one keeps
    the second point on the line through the first along ``axis`` and the two links' relative orientation
    fixed. Planar loops keep only the equations that are not identically satisfied (see
    ``codegen.model.closed_chain``)."""

    name: str
    kind: str  # "revolute" | "prismatic"
    links: tuple[int, int]  # indices in RobotDescription.joints of the joints whose links it connects
    points: tuple[sp.ImmutableMatrix, sp.ImmutableMatrix]  # 3x1 each, in its link's frame
    axis: sp.ImmutableMatrix  # unit 3x1, in the first link's frame
    line: int


@dataclass(frozen=True)
class ClosedChain:
    """What turns a kinematic tree into a closed-chain mechanism: its cut joints and its motors.

    ``RobotDescription.joints`` then holds every joint of the tree (the virtual tree obtained by cutting
    each loop), actuated and passive; the model's coordinates are the actuated ones."""

    loops: tuple[LoopClosure, ...]
    actuated: tuple[int, ...]  # indices in RobotDescription.joints, in the order the user gave them
    line: int  # where 'loops' starts, for later messages
    actuated_line: int = 0  # where 'actuated' starts

    def passive(self, count: int) -> tuple[int, ...]:
        return tuple(i for i in range(count) if i not in self.actuated)


@dataclass(frozen=True)
class Frame:
    """A named frame fixed to one body: a link of the description (URDF links merged by fixed joints keep theirs)."""

    name: str
    body: int  # index in ``RobotDescription.tree`` of the joint that moves it; -1: the base (fixed or floating)
    pose: sp.ImmutableMatrix  # 4x4, in that body's link frame


@dataclass(frozen=True)
class FloatingBase:
    """A root body that moves freely in the world (Pinocchio's free flyer): six more velocity coordinates.

    Its pose is part of the configuration, q = (position, unit quaternion x y z w, joints), and its
    velocity part of the velocity, v = (linear, angular velocity in the base frame, joints); see
    docs/floating_base.md. The joints whose ``parent`` is -1 hang from this body."""

    link_name: str
    inertial: Inertial  # in the base link's frame
    line: int  # where the description declares it, for later messages


@dataclass(frozen=True)
class RobotDescription:
    name: str
    path: str
    source_sha256: str
    summary: str
    parameters: tuple[Parameter, ...]
    gravity: sp.ImmutableMatrix  # 3x1, base frame
    base: sp.ImmutableMatrix  # 4x4 world -> base link
    joints: tuple[Joint, ...]
    tool: sp.ImmutableMatrix  # 4x4, tool link frame -> tool frame
    tool_link: int = -1  # index in ``tree`` of the joint whose link carries the tool; -1: the last one's
    # The kinematic tree when some joints are coupled (mimic joints): every moving joint, parents
    # first, ``Joint.parent`` indexing this tuple and ``Joint.mimic`` set on the coupled ones. Empty
    # when no joint is coupled: the tree is ``joints``. With couplings, ``joints`` holds the
    # independent joints (the model's coordinates, in tree order) and their ``parent`` is the
    # elimination tree of the coupled mass matrix (see ``coordinate_parents``), the sparsity
    # that forward dynamics factors M with.
    bodies: tuple[Joint, ...] = ()
    closure: ClosedChain | None = None  # loops and actuated joints of a closed-chain mechanism
    # A serial or tree robot's motorised joints (indices in ``joints``, ascending); None: every joint. The
    # others are passive: coordinates of the model with zero torque (an acrobot's shoulder, a cart-pole's pole).
    actuated: tuple[int, ...] | None = None
    # A floating root body (legged robots, humanoids, mobile manipulators); None: the base is fixed to the
    # world at ``base``. With one, ``base`` is the identity and the base pose is part of q.
    floating_base: FloatingBase | None = None
    # Every link frame, by name (frame_placements, frame_jacobians): the base's first.
    frames: tuple[Frame, ...] = ()

    @property
    def tree(self) -> tuple[Joint, ...]:
        """Every moving joint (a body each), parents before children."""
        return self.bodies or self.joints

    @property
    def couplings(self) -> tuple[tuple[int, sp.Expr, sp.Expr], ...]:
        """Per joint of ``tree``: (coordinate, multiplier, offset), q_tree = multiplier * q[coordinate] + offset."""
        if not self.bodies:
            return tuple((i, sp.Integer(1), sp.Integer(0)) for i in range(len(self.joints)))
        index = {joint.name: i for i, joint in enumerate(self.joints)}
        return tuple((j.mimic.source, j.mimic.multiplier, j.mimic.offset) if j.mimic is not None
                     else (index[j.name], sp.Integer(1), sp.Integer(0)) for j in self.bodies)

    def chain(self, link: int) -> list[int]:
        """Joint ``link`` of ``tree`` and its ancestors, tip first ([] for the base, -1)."""
        joints = []
        tree = self.tree
        while link >= 0:
            joints.append(link)
            link = tree[link].parent
        return joints

    @property
    def tool_joint(self) -> int:
        """Index in ``tree`` of the joint whose link carries the tool."""
        return self.tool_link if self.tool_link >= 0 else len(self.tree) - 1

    @property
    def n(self) -> int:
        return len(self.joints)

    @property
    def parameter_symbols(self) -> tuple[sp.Symbol, ...]:
        return tuple(p.symbol for p in self.parameters)

    @property
    def defaults(self) -> dict[sp.Symbol, float]:
        return {p.symbol: p.default for p in self.parameters}


def coordinate_parents(tree: tuple[Joint, ...], coordinate: list[int], n: int) -> tuple[int, ...]:
    """The elimination tree of M = Gᵀ M_tree G, where tree joint i moves with coordinate[i].

    M[a, b] can be nonzero when some joint of a and some joint of b are on one path to the base.
    Factoring M = Lᵀ D L from the last coordinate to the first, eliminating k fills in among its
    earlier neighbours; parent[k] is the largest of them, and the rest pass to the parent. Without
    couplings this is the kinematic tree itself; with them, a tree the LᵀDL of M needs no fill-in
    beyond (each parent numbered before its children)."""
    ancestors = []
    for i, joint in enumerate(tree):
        ancestors.append((ancestors[joint.parent] if joint.parent >= 0 else set()) | {i})
    rows: list[set[int]] = [set() for _ in range(n)]
    for i in range(len(tree)):
        for j in ancestors[i]:
            a, b = coordinate[i], coordinate[j]
            if a != b:
                rows[max(a, b)].add(min(a, b))
    parents = [-1] * n
    for k in reversed(range(n)):
        if rows[k]:
            parent = max(rows[k])
            parents[k] = parent
            rows[parent] |= rows[k] - {parent}
    return tuple(parents)
