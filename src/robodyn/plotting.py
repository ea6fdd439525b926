"""Figures of simulated runs: ``plot_trajectory``, ``plot_comparison``, ``plot_regulation`` (a run under an LQR)
and, for closed chains, ``plot_platform``.

matplotlib is optional (``pip install "robodyn[plot]"``) and imported only when a
figure is drawn. Figures are drawn on matplotlib's Agg canvas directly, never
through pyplot, so plotting from a library, a test or a headless server opens no
window and leaves pyplot's global state alone. Files are written to a temporary
name in the target directory and then renamed, so a failed plot leaves no
half-written file behind.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np

__all__ = ["QUANTITIES", "plot_comparison", "plot_platform", "plot_regulation", "plot_trajectory"]

# quantity -> (panel label, unit of a revolute joint, unit of a prismatic joint)
QUANTITIES = {
    "q": ("position q", "rad", "m"),
    "qd": ("velocity q̇", "rad/s", "m/s"),
    "qdd": ("acceleration q̈", "rad/s²", "m/s²"),
    "tau": ("torque τ", "N m", "N"),
    "tracking_error": ("tracking error q_r − q", "rad", "m"),
}

_PANEL_HEIGHT = 2.0  # inches per subplot
_FIGURE_WIDTH = 9.0
# Keep the matplotlib version and dates out of the files where the format allows it.
_NO_PROVENANCE = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None},
                  "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}


def plot_trajectory(trajectory, path, title: str | None = None, joint_names=None) -> Path:
    """Stacked panels over a shared time axis: q (q_r dashed), q̇, q̈, τ and, with a reference,
    the tracking error q_r − q. Writes ``path`` (format from its suffix, PNG by default) and
    returns it as a Path."""
    series = {"q": trajectory.q, "qd": trajectory.qd, "qdd": trajectory.qdd, "tau": trajectory.tau,
              "tracking_error": trajectory.tracking_error}
    panels = [name for name, values in series.items() if values is not None]
    robot = getattr(trajectory, "robot", None)
    n = trajectory.q.shape[1]
    names = _joint_names(joint_names, robot, n)
    figure = _new_figure(len(panels))
    axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, quantity in zip(axes, panels):
        for j in range(n):
            ax.plot(trajectory.t, series[quantity][:, j], color=f"C{j}", lw=1.2, label=names[j])
        if quantity == "q" and trajectory.q_ref is not None:
            for j in range(n):
                ax.plot(trajectory.t, trajectory.q_ref[:, j], color=f"C{j}", lw=1.0, ls="--")
            ax.plot([], [], color="0.4", lw=1.0, ls="--", label="reference")
        ax.set_ylabel(_axis_label(quantity, robot), fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8, ncol=min(n + 1, 4))
    axes[-1].set_xlabel("time [s]")
    figure.suptitle(title or getattr(robot, "name", None) or "trajectory")
    return _save(figure, path)


def plot_comparison(trajectories: dict, path, quantity: str = "q", title: str | None = None,
                    joint_names=None) -> Path:
    """Overlay one quantity of several runs (``{label: Trajectory}``, e.g. one per friction value),
    one subplot per joint. ``quantity`` is one of QUANTITIES; returns the written path."""
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be one of {', '.join(QUANTITIES)}, got {quantity!r}")
    if not trajectories:
        raise ValueError("plot_comparison needs at least one trajectory")
    values = {label: getattr(run, quantity) for label, run in trajectories.items()}
    missing = [label for label, array in values.items() if array is None]
    if missing:
        raise ValueError(f"{quantity} was not recorded for: {', '.join(map(str, missing))}")
    widths = {array.shape[1] for array in values.values()}
    if len(widths) != 1:
        raise ValueError(f"the runs have different numbers of joints: {sorted(widths)}")
    n = widths.pop()
    first = next(iter(trajectories.values()))
    robot = getattr(first, "robot", None)
    names = _joint_names(joint_names, robot, n)
    figure = _new_figure(n)
    axes = figure.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    for j, ax in enumerate(axes):
        for i, (label, array) in enumerate(values.items()):
            ax.plot(trajectories[label].t, array[:, j], color=f"C{i}", lw=1.2, label=str(label))
        ax.set_ylabel(f"{names[j]}\n{_axis_label(quantity, robot, j)}", fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8, ncol=min(len(values), 4))
    axes[-1].set_xlabel("time [s]")
    figure.suptitle(title or f"{QUANTITIES[quantity][0]}: {', '.join(map(str, values))}")
    return _save(figure, path)


def plot_regulation(trajectory, controller, path, title: str | None = None, region=None) -> Path:
    """A run under a regulator (``robodyn.lqr.LQR``) about its equilibrium: q − q0, q̇, the motor torques (with
    their saturation) and V = δxᵀPδx on a log scale — with P the controller's Riccati solution, or the
    Lyapunov matrix of ``region`` (a ``robodyn.lqr.RegionOfAttraction``, whose level rho is drawn too).
    Returns the written path."""
    robot = getattr(trajectory, "robot", None)
    q0 = controller.q0
    P = controller.P if region is None else region.P
    n = trajectory.q.shape[1]
    names = _joint_names(None, robot, n)
    actuated = list(getattr(robot, "actuated", range(n)))
    dx = np.hstack((trajectory.q - q0, trajectory.qd))
    lyapunov = np.einsum("ki,ij,kj->k", dx, P, dx)
    figure = _new_figure(4)
    axes = figure.subplots(4, 1, sharex=True, squeeze=False)[:, 0]
    t = trajectory.t
    for j in range(n):
        passive = "" if j in actuated else " (passive)"
        axes[0].plot(t, trajectory.q[:, j] - q0[j], color=f"C{j}", lw=1.2, label=names[j] + passive)
        axes[1].plot(t, trajectory.qd[:, j], color=f"C{j}", lw=1.2)
    for j in actuated:
        axes[2].plot(t, trajectory.tau[:, j], color=f"C{j}", lw=1.2, label=names[j])
        limit = None if controller.tau_limit is None else controller.tau_limit[j]
        if limit is not None and limit < 1e300:
            axes[2].axhline(limit, color=f"C{j}", lw=0.8, ls=":")
            axes[2].axhline(-limit, color=f"C{j}", lw=0.8, ls=":")
    axes[3].semilogy(t, np.maximum(lyapunov, 1e-300), color="k", lw=1.2)
    if region is not None:
        axes[3].axhline(region.rho, color="C3", lw=1.0, ls="--", label="estimated region of attraction: V < ρ")
        axes[3].legend(loc="upper right", fontsize=8)
    axes[0].set_ylabel(f"q − q0 [{_axis_label('q', robot).split('[')[1]}", fontsize=9)
    axes[1].set_ylabel(_axis_label("qd", robot), fontsize=9)
    units = dict.fromkeys("N m" if getattr(robot, "joint_types", ["revolute"] * n)[j] == "revolute" else "N"
                          for j in actuated)
    axes[2].set_ylabel(f"motor torque u [{' | '.join(units)}]", fontsize=9)
    axes[3].set_ylabel("V = δxᵀ P δx", fontsize=9)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8, ncol=min(n, 4))
    axes[-1].set_xlabel("time [s]")
    figure.suptitle(title or f"{getattr(robot, 'name', 'robot')}: LQR about q0 = {np.array2string(q0, precision=3)}")
    return _save(figure, path)


def plot_platform(trajectory, path, x_ref=None, title: str | None = None, model=None) -> Path:
    """A closed chain's run: on the left its platform point in the plane of the first two task coordinates
    (``x_ref`` dashed, the run solid, the start marked, equal scales); on the right, over a shared time
    axis, the platform's tracking error |x_r − x| (with a reference), the normalised singularity measures
    |det A| (type 2) and |det B| (type 1) with the margin at which a run stops, and the torques τ.

    The platform and the measures come from the trajectory's plant (``trajectory.robot``, a closed chain
    with a closed-form geometry). ``x_ref`` (len(t), e): the planned platform path; default the direct
    geometric model of the joint reference q_r, with ``model`` (the controller's; default the plant).
    Writes ``path`` (format from its suffix, PNG by default) and returns it as a Path."""
    import numpy as np

    from .simulation import SINGULARITY_MARGIN
    from .task_space import platform_positions

    robot = getattr(trajectory, "robot", None)
    if not getattr(robot, "is_closed_chain", False) or not callable(getattr(robot, "dgm_modes", None)):
        raise ValueError("plot_platform needs the run of a closed chain with a closed-form geometry (its "
                         "trajectory.robot)")
    model = model or robot
    x = platform_positions(robot, trajectory.q)
    if x_ref is None and trajectory.q_ref is not None:
        x_ref = platform_positions(model, trajectory.q_ref)
    if x_ref is not None:
        x_ref = np.asarray(x_ref, dtype=float)
        if x_ref.shape != x.shape:
            raise ValueError(f"x_ref: expected shape {x.shape} (one row per sample), got {x_ref.shape}")
    measures = np.abs(robot.singularity_measures(np.ascontiguousarray(trajectory.q)))
    names = list(robot.task_coordinates)
    t = trajectory.t
    right = ["error", "measures", "tau"] if x_ref is not None else ["measures", "tau"]
    figure = _new_figure(len(right), width=_FIGURE_WIDTH * 1.35)
    grid = figure.add_gridspec(len(right), 2, width_ratios=(1.0, 1.25))
    plane = figure.add_subplot(grid[:, 0])
    plane.plot(x[:, 0], x[:, 1], color="C0", lw=1.6, label="platform")
    if x_ref is not None:  # on top: tracked closely, the run would hide it
        plane.plot(x_ref[:, 0], x_ref[:, 1], color="0.1", lw=0.9, ls="--", label="reference")
    plane.plot(x[:1, 0], x[:1, 1], "o", color="C3", ms=5, label="start")
    plane.set_aspect("equal", adjustable="datalim")
    plane.set_xlabel(f"{names[0]} [m]")
    plane.set_ylabel(f"{names[1]} [m]")
    plane.legend(loc="best", fontsize=8)
    plane.grid(True, alpha=0.3)
    axes = []
    for row, panel in enumerate(right):
        ax = figure.add_subplot(grid[row, 1], sharex=axes[0] if axes else None)
        axes.append(ax)
        if panel == "error":
            ax.plot(t, np.linalg.norm(x_ref - x, axis=1), color="C0", lw=1.2)
            ax.set_ylabel("platform error\n|x_r − x| [m]", fontsize=9)
        elif panel == "measures":
            ax.plot(t, measures[:, 2], color="C0", lw=1.2, label="type 2: |det A| normalised")
            ax.plot(t, measures[:, 3], color="C1", lw=1.2, label="type 1: |det B| normalised")
            ax.axhline(SINGULARITY_MARGIN, color="C3", lw=1.0, ls=":", label="the run stops below")
            ax.set_ylim(0.0, max(1.05 * float(np.nanmax(measures[:, 2:4], initial=0.0)), 0.1))
            ax.set_ylabel("singularity\nmeasures", fontsize=9)
            ax.legend(loc="lower right", fontsize=8)
        else:
            joint_names = _joint_names(None, robot, trajectory.tau.shape[1])
            for j, name in enumerate(joint_names):
                ax.plot(t, trajectory.tau[:, j], color=f"C{j}", lw=1.2, label=name)
            ax.set_ylabel(_axis_label("tau", robot), fontsize=9)
            ax.legend(loc="upper right", fontsize=8, ncol=min(len(joint_names), 4))
        ax.grid(True, alpha=0.3)
    for ax in axes[:-1]:
        ax.tick_params(labelbottom=False)
    axes[-1].set_xlabel("time [s]")
    figure.suptitle(title or f"{robot.name}: platform")
    return _save(figure, path)


def plot_push_recovery(trajectory, path, contact_names=None, push=None, title: str | None = None) -> Path:
    """A floating-base run on contacts: the base's displacement from its start (world x, y, z), its orientation
    (the rotation vector from its start), the contact forces' vertical components and the motor torques.
    ``push``: (start, end) of a disturbance, shaded. Returns the written path."""
    from .floating_base import base_pose, log_se3

    robot = getattr(trajectory, "robot", None)
    t, q = trajectory.t, trajectory.q
    figure = _new_figure(4)
    axes = figure.subplots(4, 1, sharex=True, squeeze=False)[:, 0]
    for k, axis in enumerate("xyz"):
        axes[0].plot(t, 1e3 * (q[:, k] - q[0, k]), color=f"C{k}", lw=1.2, label=axis)
    rotations, _ = base_pose(q)
    relative = np.einsum("ji,kjl->kil", rotations[0], rotations)  # R0ᵀ R: the rotation since the start
    angles = np.degrees(log_se3(relative, np.zeros((len(t), 3)))[:, 3:])
    for k, axis in enumerate(("roll", "pitch", "yaw")):
        axes[1].plot(t, angles[:, k], color=f"C{k}", lw=1.2, label=axis)
    forces = trajectory.contact_forces
    if forces is not None:
        names = list(contact_names) if contact_names is not None else None
        width = forces.shape[1] // len(names) if names else 3
        for c in range(forces.shape[1] // width):
            label = names[c] if names else f"contact {c + 1}"
            axes[2].plot(t, forces[:, c * width + 2], color=f"C{c}", lw=1.2, label=label)
        axes[2].axhline(0.0, color="k", lw=0.6)
        axes[2].legend(loc="upper right", fontsize=8, ncol=4)
    actuated = list(getattr(robot, "actuated", range(trajectory.tau.shape[1])))
    for index, j in enumerate(actuated):
        axes[3].plot(t, trajectory.tau[:, j], color=f"C{index % 10}", lw=0.9)
    if push is not None:
        for ax in axes:
            ax.axvspan(push[0], push[1], color="0.85", zorder=0)
    axes[0].set_ylabel("base displacement [mm]", fontsize=9)
    axes[1].set_ylabel("base rotation [deg]", fontsize=9)
    axes[2].set_ylabel("vertical contact force [N]", fontsize=9)
    axes[3].set_ylabel("motor torques [N m]", fontsize=9)
    axes[0].legend(loc="upper right", fontsize=8, ncol=3)
    axes[1].legend(loc="upper right", fontsize=8, ncol=3)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("time [s]")
    figure.suptitle(title or f"{getattr(robot, 'name', 'robot')}: push recovery")
    return _save(figure, path)


def plot_free_fall(trajectory, momentum, com, parabola, energy, dissipated, path, title: str | None = None) -> Path:
    """A floating-base robot in free fall: its centroidal momentum (linear, angular), the centre of mass's height
    against the parabola, and the energy with the damping's work added back. Returns the written path."""
    robot = getattr(trajectory, "robot", None)
    t = trajectory.t
    figure = _new_figure(4)
    axes = figure.subplots(4, 1, sharex=True, squeeze=False)[:, 0]
    for k, axis in enumerate("xyz"):
        axes[0].plot(t, momentum[:, k], color=f"C{k}", lw=1.2, label=f"p_{axis}")
        axes[1].plot(t, momentum[:, 3 + k], color=f"C{k}", lw=1.2, label=f"L_{axis}")
    axes[2].plot(t, com[:, 2], color="C0", lw=1.2, label="centre of mass")
    axes[2].plot(t, parabola[:, 2], color="k", lw=0.8, ls="--", label="c0 + c0' t + g t²/2")
    axes[3].plot(t, energy, color="C3", lw=1.2, label="E = T + P")
    axes[3].plot(t, energy + dissipated, color="k", lw=0.8, ls="--", label="E + damping work")
    axes[0].set_ylabel("linear momentum [kg m/s]", fontsize=9)
    axes[1].set_ylabel("angular momentum\nabout the CoM [kg m²/s]", fontsize=9)
    axes[2].set_ylabel("height [m]", fontsize=9)
    axes[3].set_ylabel("energy [J]", fontsize=9)
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right", fontsize=8, ncol=3)
    axes[-1].set_xlabel("time [s]")
    figure.suptitle(title or f"{getattr(robot, 'name', 'robot')}: free fall")
    return _save(figure, path)


def require_matplotlib() -> None:
    """ImportError, with the pip command, when matplotlib is missing: a command checks this before it runs."""
    try:
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401
    except ImportError as error:
        raise ImportError('robodyn.plotting needs matplotlib: pip install "robodyn[plot]" '
                          "(or pip install matplotlib)") from error


def _new_figure(panels: int, width: float = _FIGURE_WIDTH):
    """An Agg-backed Figure; the only place matplotlib is imported."""
    require_matplotlib()
    import matplotlib.backends.backend_agg
    import matplotlib.figure

    figure = matplotlib.figure.Figure(figsize=(width, 1.0 + _PANEL_HEIGHT * panels), layout="constrained")
    matplotlib.backends.backend_agg.FigureCanvasAgg(figure)
    return figure


def _joint_names(names, robot, n: int) -> list[str]:
    if names is None:
        names = getattr(robot, "joint_names", None) or [f"q{j + 1}" for j in range(n)]
    names = [str(name) for name in names]
    if len(names) != n:
        raise ValueError(f"joint_names: expected {n} names, got {len(names)}")
    return names


def _axis_label(quantity: str, robot, joint: int | None = None) -> str:
    """'label [unit]' with the unit of the robot's joint types: rad-like, m-like, or both ("rad | m")."""
    label, revolute, prismatic = QUANTITIES[quantity]
    kinds = getattr(robot, "joint_types", None)
    if kinds is not None and joint is not None:
        kinds = [kinds[joint]]
    if kinds is None:
        unit = f"{revolute} | {prismatic}"
    else:
        units = [revolute if kind == "revolute" else prismatic for kind in kinds]
        unit = " | ".join(dict.fromkeys(units))
    return f"{label} [{unit}]"


def _save(figure, path) -> Path:
    """Render into a temporary file next to ``path``, then rename it into place."""
    path = Path(path)
    file_format = path.suffix.lstrip(".").lower() or "png"
    path.parent.mkdir(parents=True, exist_ok=True)
    # A unique name (not mkstemp, whose 0600 mode would stick to the figure) in the same
    # directory, so the rename is atomic.
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temporary, "xb") as stream:
            figure.savefig(stream, format=file_format, dpi=110, metadata=_NO_PROVENANCE.get(file_format))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path
