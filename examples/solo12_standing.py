"""Solo12 standing on its four feet, pushed, and recovering: a floating-base robot on contacts.

The quadruped (example-robot-data's solo12.urdf, loaded with ``base="floating"``) stands in its "standing" posture
with its four feet held by point contacts (robodyn.contact, Baumgarte-stabilised). A whole-body PD with gravity
compensation (robodyn.whole_body.WholeBodyPD: the joint torques and contact forces that balance gravity with the
least norm, plus a joint PD) holds the posture. At t = 0.5 s a push of PUSH newtons along the base's y axis acts
for 0.1 s. The run is integrated on SE(3) x R^12 (RKMK4) at 1 kHz. The script prints the base's largest
excursion, the time the base takes to come back within 1 mm and 0.1 degree, and the smallest vertical contact
force (positive: no foot would lift off), and plots the run (robodyn.plotting.plot_push_recovery).

    python examples/solo12_standing.py [--out DIR] [--cache-dir DIR] [--push NEWTONS]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import robodyn
from robodyn.contact import ContactDynamics
from robodyn.floating_base import log_se3
from robodyn.plotting import plot_push_recovery, require_matplotlib
from robodyn.whole_body import WholeBodyPD

OUTPUT = Path(__file__).resolve().parent / "output" / "solo12_standing"
FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
# The "standing" posture of example-robot-data's solo.srdf (HAA, HFE, KFE per leg).
STANDING = {"FL": (0.1, 0.8, -1.6), "FR": (-0.1, 0.8, -1.6), "HL": (0.1, -0.8, 1.6), "HR": (-0.1, -0.8, 1.6)}
RATE, DURATION, PUSH_START, PUSH_LENGTH = 1000.0, 2.5, 0.5, 0.1


def solo12_urdf() -> Path:
    try:
        return robodyn.example_robot_data("solo_description/robots/solo12.urdf")
    except FileNotFoundError as error:
        raise SystemExit(str(error)) from None


def standing(robot) -> np.ndarray:
    """The posture, with the base at the height that puts the feet on the ground (z = 0)."""
    q = robot.neutral()
    for name, values in STANDING.items():
        for joint, value in zip(("HAA", "HFE", "KFE"), values):
            q[7 + robot.joint_names.index(f"{name}_{joint}")] = value
    feet = [robot.frame_placement(q, foot)[2, 3] for foot in FEET]
    q[2] = -float(np.mean(feet))
    return q


def run(push: float = 10.0, cache_dir=None, out: Path | None = None) -> dict:
    robot = robodyn.load(solo12_urdf(), base="floating", cache_dir=cache_dir, verbose=True)
    q0 = standing(robot)
    contacts = ContactDynamics(robot, FEET, stiffness=400.0)
    controller = WholeBodyPD(robot, q0, contacts, kp=20.0, kd=0.5)

    def disturbance(t):
        tau = np.zeros(robot.n)
        if PUSH_START <= t < PUSH_START + PUSH_LENGTH:
            tau[1] = push  # a force along the base's y axis, at its origin
        return tau

    trajectory = robodyn.simulate(robot, controller, duration=DURATION, rate=RATE, q0=q0, contacts=contacts,
                                  disturbance=disturbance)
    displacement = trajectory.q[:, :3] - q0[:3]
    rotations = robodyn.floating_base.base_pose(trajectory.q)[0]
    angle = np.degrees(np.linalg.norm(log_se3(np.einsum("ji,kjl->kil", rotations[0], rotations),
                                              np.zeros((len(trajectory.t), 3)))[:, 3:], axis=1))
    far = (np.linalg.norm(displacement, axis=1) > 1e-3) | (angle > 0.1)
    recovered = float(trajectory.t[np.flatnonzero(far)[-1] + 1]) if far.any() and not far[-1] else float("nan")
    vertical = trajectory.contact_forces[:, 2::3]
    figures = {
        "max_displacement_mm": 1e3 * float(np.max(np.linalg.norm(displacement, axis=1))),
        "max_rotation_deg": float(np.max(angle)),
        "recovered_at_s": recovered,
        "min_vertical_force_N": float(np.min(vertical)),
        "weight_N": float(-robot.params["gravity_z"] * robot.total_mass()),
        "final_displacement_mm": 1e3 * float(np.linalg.norm(displacement[-1])),
    }
    print(f"{robot!r}\n  push {push:g} N for {PUSH_LENGTH:g} s at t = {PUSH_START:g} s:")
    print(f"  base excursion {figures['max_displacement_mm']:.2f} mm, {figures['max_rotation_deg']:.2f} deg; back "
          f"within 1 mm and 0.1 deg at t = {recovered:.3f} s; final offset {figures['final_displacement_mm']:.3f} mm")
    print(f"  smallest vertical contact force {figures['min_vertical_force_N']:.2f} N (positive: the feet stay down)")
    if out is not None:
        path = plot_push_recovery(trajectory, Path(out) / "solo12_push.png", FEET, (PUSH_START, PUSH_START + PUSH_LENGTH),
                                  title=f"Solo12 standing: a {push:g} N push on the base for {PUSH_LENGTH:g} s")
        print(f"  wrote {path}")
    return figures


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python examples/solo12_standing.py --push 20 --out /tmp/solo")
    parser.add_argument("--out", type=Path, default=OUTPUT, help=f"where the figure goes (default {OUTPUT})")
    parser.add_argument("--cache-dir", default=None, help="robodyn's cache directory")
    parser.add_argument("--push", type=float, default=10.0, help="the push [N] (default 10)")
    args = parser.parse_args(argv)
    require_matplotlib()
    run(args.push, args.cache_dir, args.out)


if __name__ == "__main__":
    main()
