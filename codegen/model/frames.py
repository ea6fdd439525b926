"""Stage 2, kinematics of named frames: placements, Jacobians and J̇ q̇ of every link frame, by either route.

A frame is a link of the description (URDF: every link, those merged into a moving body by fixed joints
included; YAML: each joint's link and the base), fixed to one body of the kinematic tree at a constant pose.
World-aligned conventions, as Pinocchio's LOCAL_WORLD_ALIGNED:

* placement: the 4 x 4 pose of the frame in the world (a fixed base: its base frame);
* Jacobian: 6 x n, the linear velocity of the frame's origin, then the body's angular velocity, world axes;
* J̇ q̇: the classical acceleration of the origin and the angular acceleration at q̈ = 0 (world axes), so that
  [p̈; ω̇] = J q̈ + J̇ q̇: what a contact constraint's second derivative needs.

Its own straight-line program (prefix ``fr``): the velocities and velocity-product accelerations of the bodies
in their own coordinates (as the Newton-Euler pass), rotated into the world at each frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .. import geometry
from ..description.model import RobotDescription
from .common import BASE_TO_SPATIAL, Coupling, base_jacobian, model_symbols, point_jacobian
from .program import Program


@dataclass(frozen=True)
class FrameModel:
    names: tuple[str, ...]
    placements: sp.ImmutableMatrix  # 4f x 4: frame k's pose in rows 4k..4k+3
    jacobians: sp.ImmutableMatrix  # 6f x n
    accelerations: sp.ImmutableMatrix  # f x 6: J̇ q̇ per frame
    definitions: tuple


def derive_frames(description: RobotDescription) -> FrameModel | None:
    """The frames of ``description.frames`` (None when it has none)."""
    if not description.frames:
        return None
    floating = description.floating_base
    off = 6 if floating is not None else 0
    q_model, qd_model, _, _, _ = model_symbols(description.n, floating is not None)
    coupling = Coupling(description)
    joints = description.tree
    q = coupling.positions(q_model[len(q_model) - description.n:])
    qd = coupling.rates(qd_model[off:])
    program = Program("fr")
    let_v, let_m = program.vector, program.matrix

    if floating is not None:
        root_pose = geometry.homogeneous(let_m(geometry.quaternion_rotation(*q_model[3:7])), sp.Matrix(q_model[:3]))
        root_velocity = sp.Matrix([qd_model[BASE_TO_SPATIAL[k]] for k in range(6)])
    else:
        root_pose, root_velocity = sp.Matrix(description.base), sp.zeros(6, 1)

    joint_frames, link_frames, velocity, bias = [], [], [], []
    for i, joint in enumerate(joints):
        parent_pose = root_pose if joint.parent < 0 else link_frames[joint.parent]
        joint_frame = let_m(parent_pose * sp.Matrix(joint.placement))
        joint_frames.append(joint_frame)
        motion = geometry.screw(joint.kind, sp.Matrix(joint.axis), q[i])
        link_frames.append(let_m(joint_frame * motion * sp.Matrix(joint.successor)))
        # Body velocity and velocity-product acceleration in the link's own coordinates.
        local = sp.Matrix(joint.placement) * motion * sp.Matrix(joint.successor)
        R, p = local[:3, :3], local[:3, 3]
        successor = sp.Matrix(joint.successor)
        axis = successor[:3, :3].T * sp.Matrix(joint.axis)
        if joint.kind == "revolute":
            subspace = sp.Matrix([*axis, *((-successor[:3, :3].T * successor[:3, 3]).cross(axis))])
        else:
            subspace = sp.Matrix([0, 0, 0, *axis])

        def to_child(m, R=R, p=p):
            w, v = m[:3, 0], m[3:, 0]
            return sp.Matrix([*(R.T * w), *(R.T * (v - p.cross(w)))])

        parent_v = root_velocity if joint.parent < 0 else velocity[joint.parent]
        parent_a = sp.zeros(6, 1) if joint.parent < 0 else bias[joint.parent]  # the base: v̇ = 0
        v_i = let_v(to_child(parent_v) + subspace * qd[i])
        w_i, u_i = v_i[:3, 0], v_i[3:, 0]
        s_dot = sp.Matrix([*w_i.cross(subspace[:3, 0]), *(u_i.cross(subspace[:3, 0]) + w_i.cross(subspace[3:, 0]))])
        velocity.append(v_i)
        bias.append(let_v(to_child(parent_a) + s_dot * qd[i]))

    axes = [let_v(frame[:3, :3] * sp.Matrix(j.axis)) for frame, j in zip(joint_frames, joints)]
    origins = [frame[:3, 3] for frame in joint_frames]
    placements, jacobians, accelerations = [], [], []
    for frame in description.frames:
        body_pose = root_pose if frame.body < 0 else link_frames[frame.body]
        pose = let_m(body_pose * sp.Matrix(frame.pose))
        placements.append(pose)
        linear, angular = point_jacobian(description, axes, origins, pose[:3, 3], frame.body)
        jacobian = sp.Matrix.vstack(linear, angular)
        if off:
            jacobian = sp.Matrix.hstack(base_jacobian(root_pose, pose[:3, 3]), jacobian)
        jacobians.append(jacobian)
        # Classical acceleration of the frame's origin: the body's spatial motion shifted to that point.
        v_b = root_velocity if frame.body < 0 else velocity[frame.body]
        a_b = sp.zeros(6, 1) if frame.body < 0 else bias[frame.body]
        point = sp.Matrix(frame.pose)[:3, 3]
        omega, omega_dot = v_b[:3, 0], a_b[:3, 0]
        point_velocity = v_b[3:, 0] + omega.cross(point)
        point_acceleration = a_b[3:, 0] + omega_dot.cross(point) + omega.cross(point_velocity)
        rotation = body_pose[:3, :3]
        accelerations.append(sp.Matrix([*(rotation * point_acceleration), *(rotation * omega_dot)]).T)
    return FrameModel(tuple(f.name for f in description.frames), sp.ImmutableMatrix(sp.Matrix.vstack(*placements)),
                      sp.ImmutableMatrix(sp.Matrix.vstack(*jacobians)),
                      sp.ImmutableMatrix(sp.Matrix.vstack(*accelerations)), tuple(program.definitions))
