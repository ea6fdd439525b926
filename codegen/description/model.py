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
    tool_link: int = -1  # index of the joint whose link carries the tool; -1: the last joint's

    def chain(self, link: int) -> list[int]:
        """Joint ``link`` and its ancestors, tip first ([] for the base, -1)."""
        joints = []
        while link >= 0:
            joints.append(link)
            link = self.joints[link].parent
        return joints

    @property
    def tool_joint(self) -> int:
        return self.tool_link if self.tool_link >= 0 else len(self.joints) - 1

    @property
    def n(self) -> int:
        return len(self.joints)

    @property
    def parameter_symbols(self) -> tuple[sp.Symbol, ...]:
        return tuple(p.symbol for p in self.parameters)

    @property
    def defaults(self) -> dict[sp.Symbol, float]:
        return {p.symbol: p.default for p in self.parameters}
