"""iCub in free fall: a humanoid thrown into the air, conserving its momentum.

example-robot-data's icub_reduced.urdf (29 joints) is loaded with ``base="floating"`` and thrown with its base
spinning and every joint moving, no motor torque, under gravity. In flight only gravity acts from outside, so:

* the centre of mass falls on a parabola: c'' = g (``robot.center_of_mass``, its Jacobian and Jdot v);
* the angular momentum about the centre of mass stays what it was (``robot.centroidal_momentum_matrix``), while
  the limbs swing and the joints' damping (the URDF's <dynamics>) slows them;
* the energy decreases by exactly the work of that damping: E(t) - E(0) = -integral of v^T friction(v) dt.

The run is integrated on SE(3) x R^29 (RKMK4) at 10 kHz (the joints' damping is stiff); the script prints the three drifts and plots momentum,
height and energy.

    python examples/humanoid_free_fall.py [--out DIR] [--cache-dir DIR] [--duration S]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import robodyn

OUTPUT = Path(__file__).resolve().parent / "output" / "humanoid_free_fall"
# The joints' damping is stiff: the fastest mode decays at 6,400 1/s (0.16 ms), beyond RK4's reach at 1 ms steps.
RATE, SUBSTEPS = 1000.0, 10


def icub_urdf() -> Path:
    try:
        return robodyn.example_robot_data("icub_description/robots/icub_reduced.urdf")
    except FileNotFoundError as error:
        raise SystemExit(str(error)) from None


def run(duration: float = 1.0, cache_dir=None, out: Path | None = None, seed: int = 0) -> dict:
    robot = robodyn.load(icub_urdf(), base="floating", cache_dir=cache_dir, verbose=True)
    rng = np.random.default_rng(seed)
    q0 = robot.neutral()
    q0[2] = 1.0
    v0 = np.concatenate([[0.5, 0.0, 3.0], [0.3, 1.5, 0.2], rng.uniform(-1.0, 1.0, robot.n - 6)])  # a throw
    trajectory = robodyn.simulate(robot, duration=duration, rate=RATE, q0=q0, qd0=v0, substeps=SUBSTEPS)
    q, v, t = trajectory.q, trajectory.qd, trajectory.t
    momentum = np.einsum("kij,kj->ki", robot.centroidal_momentum_matrix(q), v)
    com = robot.center_of_mass(q)
    gravity = np.array([robot.params[f"gravity_{axis}"] for axis in "xyz"])
    velocity0 = robot.center_of_mass_jacobian(q0) @ v0
    parabola = com[0] + np.outer(t, velocity0) + 0.5 * np.outer(t**2, gravity)
    energy = trajectory.energy(robot)
    power = np.einsum("ki,ki->k", v, robot.friction(v))  # dissipated by the joints' damping
    dissipated = np.concatenate([[0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) * np.diff(t))])
    angular = momentum[:, 3:]
    linear_expected = momentum[0, :3] + np.outer(t, robot.total_mass() * gravity)  # dp/dt = m g
    figures = {
        "angular_momentum_drift_rel": float(np.max(np.abs(angular - angular[0])) / np.max(np.abs(angular[0]))),
        "com_parabola_error_m": float(np.max(np.abs(com - parabola))),
        "linear_momentum_vs_mg_rel": float(np.max(np.abs(momentum[:, :3] - linear_expected))
                                           / np.max(np.abs(momentum[0, :3]))),
        "energy_balance_rel": float(np.max(np.abs(energy - energy[0] + dissipated))
                                    / np.max(robot.kinetic_energy(q, v))),
        "energy_dissipated_J": float(dissipated[-1]),
    }
    print(f"{robot!r}\n  free fall for {duration:g} s at {RATE:g} Hz:")
    print(f"  angular momentum about the centre of mass: drift {figures['angular_momentum_drift_rel']:.2e} (relative)")
    print(f"  centre of mass off the parabola by {figures['com_parabola_error_m']:.2e} m; linear momentum vs m g t: "
          f"{figures['linear_momentum_vs_mg_rel']:.2e} (relative)")
    print(f"  energy balance (E - E0 + damping work) {figures['energy_balance_rel']:.2e} of the kinetic energy; "
          f"damping dissipated {figures['energy_dissipated_J']:.3g} J")
    if out is not None:
        from robodyn.plotting import plot_free_fall

        path = plot_free_fall(trajectory, momentum, com, parabola, energy, dissipated, Path(out) / "icub_free_fall.png")
        print(f"  wrote {path}")
    return figures


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python examples/humanoid_free_fall.py --duration 0.5")
    parser.add_argument("--out", type=Path, default=OUTPUT, help=f"where the figure goes (default {OUTPUT})")
    parser.add_argument("--cache-dir", default=None, help="robodyn's cache directory")
    parser.add_argument("--duration", type=float, default=1.0, help="flight time [s] (default 1)")
    args = parser.parse_args(argv)
    run(args.duration, args.cache_dir, args.out)


if __name__ == "__main__":
    main()
