"""Identification end to end: measurements → base parameters → standard parameters → a new description.

``identify(robot, measurements)`` processes the measurements (``data.process``), estimates the base
parameters (weighted least squares by default; ``method="consistent"`` adds the physical-consistency
constraints through cvxpy), judges the estimate on held-out data (the last ``holdout`` fraction of the
run, processed on its own) against the description's own parameters, and maps the estimate back to
standard parameters. ``write_identified(...)`` writes a YAML description with those values, which
``robodyn.load`` compiles like any other: the loop from data to a compiled model closes.

Standard parameters from base parameters: every base parameter θ_i = π_lead + Σ β π_grouped starts
from one dynamic parameter (its "lead", the column the base regressor keeps). The grouped parameters
keep the description's values and each lead takes the rest, π_lead = θ_i − Σ β π_grouped: of all
standard parameters that reproduce θ exactly, these change the fewest values, and only identifiable
quantities. When that leaves a link physically impossible (noise in a poorly excited parameter) and
cvxpy is installed, the closest consistent parameters are taken instead (relative change minimised,
θ still reproduced exactly).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .data import Measurements, ProcessedData, process
from .estimate import Estimate, ordinary_least_squares, weighted_least_squares

__all__ = ["Identification", "identify", "monte_carlo", "standard_parameters", "write_identified", "METHODS"]

METHODS = ("wls", "ols", "consistent")


@dataclass(frozen=True)
class Identification:
    """What ``identify`` found. Base-parameter arrays follow ``robot.base_parameter_names``."""

    robot: str
    base_names: tuple
    estimated: np.ndarray        # identified base parameters (b,); known zeros are 0 when taken as known
    prior: np.ndarray            # the description's base parameters (b,)
    identified: tuple            # indices of the base parameters that were estimated
    estimate: Estimate           # statistics of the estimated subset
    standard: np.ndarray         # standard (dynamic) parameters reproducing ``estimated`` (p,)
    processed: ProcessedData
    holdout_rms: dict            # {"identified": per-joint RMS, "description": per-joint RMS} on held-out data
    method: str
    consistent_status: str | None = None
    notes: tuple = field(default=())
    offsets: np.ndarray | None = None  # per joint torque offsets (n,) when estimated (``offset=True``)

    def report(self) -> str:
        lines = [f"identified {len(self.identified)} of {len(self.base_names)} base parameters of {self.robot} "
                 f"({self.method}; {self.processed.W.shape[0]} equations, cond(W) = {self.estimate.condition:.3g})",
                 f"{'parameter':<12} {'identified':>14} {'description':>14} {'rel. std %':>10}"]
        relative = dict(zip(self.identified, self.estimate.relative_std[:len(self.identified)]))
        for i, name in enumerate(self.base_names):
            std = relative.get(i)
            std_text = "known 0" if std is None else f"{std:10.3g}"
            lines.append(f"{name:<12} {self.estimated[i]:>14.6g} {self.prior[i]:>14.6g} {std_text:>10}")
        if self.offsets is not None:
            lines.append("torque offsets (sensor biases, estimated alongside, not part of the model): "
                         + ", ".join(f"{v:.4g}" for v in self.offsets))
        poor = self.estimate.poorly_excited()
        if poor:
            lines.append("poorly excited (relative std > 10 %): " + ", ".join(f"{n} ({v:.3g} %)" for n, v in poor))
        rms_id, rms_prior = self.holdout_rms["identified"], self.holdout_rms["description"]
        if np.all(np.isnan(rms_id)):
            lines.append("held-out torque prediction error: no data held out (holdout 0)")
        else:
            lines.append("held-out torque prediction error (RMS per joint): identified "
                         + ", ".join(f"{v:.4g}" for v in rms_id) + "; description "
                         + ", ".join(f"{v:.4g}" for v in rms_prior))
            if np.sqrt(np.mean(rms_id**2)) > np.sqrt(np.mean(rms_prior**2)):
                lines.append("warning: the identified parameters predict the held-out torques worse than the "
                             "description's (too little or too poorly exciting data?)")
        lines += list(self.notes)
        return "\n".join(lines)


def _split(m: Measurements, holdout: float) -> tuple[Measurements, Measurements | None]:
    if holdout == 0:
        return m, None
    count = len(m.t)
    cut = int(round(count * (1.0 - holdout)))
    if cut < 64 or count - cut < 64:
        raise ValueError(f"holdout {holdout}: too few samples on one side of the split ({cut} and {count - cut}; "
                         "at least 64 each)")

    def part(s: slice) -> Measurements:
        return Measurements(t=m.t[s], q=m.q[s], tau=m.tau[s], joint_names=m.joint_names,
                            qd=None if m.qd is None else m.qd[s])

    return part(slice(0, cut)), part(slice(cut, count))


def identify(robot, measurements: Measurements, *, method: str = "wls", known_zeros: bool = False,
             holdout: float = 0.25, offset: bool = False, **processing) -> Identification:
    """Identify the base parameters of ``robot`` from ``measurements``.

    ``method``: "wls" (weighted least squares, per-joint noise from the residuals), "ols", or
    "consistent" (least squares under physical consistency: cvxpy + Clarabel, ``pip install
    "robodyn[identify]"``). ``known_zeros``: take the base parameters the description fixes at zero
    (``robot.known_zero_base_parameters``) as known instead of estimating them. ``holdout``: the
    fraction of the run, at its end, kept out of the estimate to judge it: hold out whole periods of a
    periodic excitation (small systematic errors of the processing cancel over a period, not over a
    part of one). ``offset``: estimate a constant torque offset per joint alongside (a sensor bias; it
    is reported, not written into the model; "wls"/"ols" only). Other keywords go to
    ``data.process`` (cutoff, order, decimate, trim, parallel_cutoff).
    """
    if method not in METHODS:
        raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    if not isinstance(holdout, (int, float)) or isinstance(holdout, bool) or not 0 <= holdout < 0.9:
        raise ValueError(f"holdout: expected a fraction in [0, 0.9), got {holdout!r}")
    names = tuple(robot.base_parameter_names)
    b = len(names)
    known = set(robot.known_zero_base_parameters) if known_zeros else set()
    identified = tuple(i for i, name in enumerate(names) if name not in known)
    estimation, validation = _split(measurements, holdout)
    processed = process(estimation, robot, **processing)
    if offset and method == "consistent":
        raise ValueError("offset: estimated with method 'wls' or 'ols' only")
    W = processed.W[:, identified]
    subset = tuple(names[i] for i in identified)
    if offset:  # one column per joint, 1 on that joint's rows
        W = np.hstack([W, np.eye(robot.n)[processed.joint_index]])
        subset += tuple(f"offset_{name}" for name in robot.joint_names)
    status = None
    notes = []
    if method == "ols":
        estimate = ordinary_least_squares(W, processed.y, names=subset, n_joints=robot.n)
    else:
        estimate = weighted_least_squares(W, processed.y, robot.n, names=subset)
    estimated = np.zeros(b)
    estimated[list(identified)] = estimate.parameters[:len(identified)]
    offsets = estimate.parameters[len(identified):].copy() if offset else None
    standard = standard_parameters(robot, estimated)
    if method == "consistent":
        from .consistent import consistent_estimate

        K = robot.base_parameter_matrix()
        # Rows weighted by the per-joint noise found above; known zeros constrained to zero.
        weights = 1.0 / estimate.sigma if estimate.sigma.size == robot.n else np.ones(robot.n)
        rows_w = processed.W * weights[processed.joint_index][:, None]
        rows_y = processed.y * weights[processed.joint_index]
        found = consistent_estimate(rows_w, rows_y, robot, K=K, prior=robot.dynamic_parameters(),
                                    regularization=1e-6, link_offsets=rotor_lumps(robot),
                                    known_zero=[i for i in range(b) if i not in identified])
        status = found.status
        standard = np.asarray(found.parameters, dtype=float)
        estimated = K @ standard
        notes.append(f"physically consistent estimate: solver {found.status}; smallest pseudo-inertia eigenvalue "
                     f"{min(found.min_eigenvalues.values(), default=float('nan')):.3g}")
    prior = robot.base_parameters()
    holdout_rms = {"identified": np.full(robot.n, np.nan), "description": np.full(robot.n, np.nan)}
    if validation is not None:
        check = process(validation, robot, **processing)
        joint = check.joint_index
        for key, theta in (("identified", estimated), ("description", prior)):
            residual = check.y - check.W @ theta
            if key == "identified" and offsets is not None:
                residual = residual - offsets[check.joint_index]
            holdout_rms[key] = np.sqrt(np.bincount(joint, residual**2, robot.n) / np.bincount(joint, None, robot.n))
    return Identification(robot=robot.name, base_names=names, estimated=estimated, prior=prior,
                          identified=identified, estimate=estimate, standard=standard, processed=processed,
                          holdout_rms=holdout_rms, method=method, consistent_status=status, notes=tuple(notes),
                          offsets=offsets)


def _monte_carlo_run(task) -> np.ndarray:
    robot, measurements, noise, seed, options = task
    from ..parallel import one_blas_thread
    from .data import add_noise

    with one_blas_thread():
        noisy = add_noise(measurements.t, measurements.truth, measurements.joint_names, seed=seed, **noise)
        return identify(robot, noisy, **options).estimated


def monte_carlo(robot, measurements: Measurements, *, runs: int, encoder_noise=0.0, encoder_resolution=None,
                torque_noise=0.0, seed: int = 0, executor=None, progress=None, **options) -> np.ndarray:
    """Identify ``runs`` times from the same motion with fresh noise: the spread of the estimates.

    ``measurements`` must carry its noise-free signals (``simulate_measurements`` keeps them in
    ``.truth``); run k draws its noise with seed (seed, k), so the result does not depend on where it
    runs. Each run is a task for ``executor`` (robodyn.parallel.executor(): local processes, or a Dask
    cluster by its scheduler address; None: this process). ``options`` go to ``identify``. Returns
    the estimates, (runs, b)."""
    if measurements.truth is None:
        raise ValueError("measurements: no noise-free signals (.truth): simulate them with simulate_measurements")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs: expected a positive integer, got {runs!r}")
    from ..parallel import map_tasks

    noise = {"encoder_noise": encoder_noise, "encoder_resolution": encoder_resolution, "torque_noise": torque_noise}
    seeds = np.random.SeedSequence(seed).spawn(runs)
    tasks = [(robot, measurements, noise, int(s.generate_state(1)[0]), options) for s in seeds]
    return np.array(map_tasks(_monte_carlo_run, tasks, executor=executor, progress=progress))


def standard_parameters(robot, base: np.ndarray) -> np.ndarray:
    """Standard (dynamic) parameters that reproduce the base parameters ``base`` exactly: the grouped
    parameters keep the robot's current values, each base parameter's lead parameter takes the rest."""
    base = np.asarray(base, dtype=float)
    K = robot.base_parameter_matrix()
    if base.shape != (K.shape[0],):
        raise ValueError(f"base: expected shape ({K.shape[0]},), got {base.shape}")
    pi = robot.dynamic_parameters().copy()
    leads = list(robot.base_parameter_columns)
    grouped = K.copy()
    grouped[np.arange(len(leads)), leads] = 0.0
    pi[leads] = base - grouped @ pi
    return pi


# ----------------------------------------------------------------------------------------- write back

def rotor_lumps(robot) -> dict[str, np.ndarray]:
    """Per link label: the ten parameters of the rotors riding on that link (their mass and transverse
    inertia), which the link's dynamic parameters include. Empty without massive rotors or without a
    YAML/URDF source to read them from."""
    if not any(kind == "rotor" for kind, *_ in robot.dynamic_parameter_layout) or robot.source is None:
        return {}
    from codegen.description import parse_path

    description = parse_path(robot.source, robot.options)
    labels = [label for kind, label, _, _ in robot.dynamic_parameter_layout if kind == "link"]
    lumps = _rotor_lumps(description, dict(robot.params.items()))
    return {labels[k]: value for k, value in lumps.items()}


def _rotor_lumps(description, values: dict) -> dict[int, np.ndarray]:
    """Per link index: the ten parameters of the rotors riding on it (mass and transverse inertia),
    which the link's dynamic parameters include."""
    import sympy as sp

    from codegen.model.regressor import barycentric

    symbols = {p.symbol: values[p.name] for p in description.parameters}
    lumps: dict[int, np.ndarray] = {}
    for child in description.tree:
        rotor = child.rotor
        if rotor is None or child.parent < 0:
            continue
        placement = sp.Matrix(child.placement)
        R, p = placement[:3, :3], placement[:3, 3]
        centre, axis = R * sp.Matrix(rotor.com) + p, R * sp.Matrix(rotor.axis)
        ten = barycentric(rotor.mass, centre, rotor.transverse_inertia * (sp.eye(3) - axis * axis.T))
        vector = np.array([float(sp.N(sp.sympify(v).xreplace(symbols))) for v in ten])
        lumps[child.parent] = lumps.get(child.parent, np.zeros(10)) + vector
    return lumps


def _violations(pi, lumps, links, description) -> list[str]:
    """The links whose own parameters (rotors taken out) are not a physical body, with the reason."""
    from codegen.description.physical import check_mass_properties

    problems = []
    for k, (_, label, start, stop) in enumerate(links):
        xx, xy, xz, yy, yz, zz, mx, my, mz, m = pi[start:stop] - lumps.get(k, np.zeros(10))
        if m < 0:
            problems.append(f"link {label}: mass {m:.4g} < 0")
            continue
        com = np.array([mx, my, mz]) / m if m > 0 else np.zeros(3)
        inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]) - m * (com @ com * np.eye(3)
                                                                              - np.outer(com, com))
        planar = description.joints[k].inertial.planar
        problems += [f"link {label}: {v.message}" for v in
                     check_mass_properties(m, inertia, planar=planar)]
    return problems


def _physical(robot, identification, pi, lumps, links, description, adjustments) -> np.ndarray:
    """``pi`` if every link is a physical body; else the closest parameters (relative change) that
    still reproduce the estimate and are (cvxpy), or a ValueError before anything is written."""
    problems = _violations(pi, lumps, links, description)
    if not problems:
        return pi
    hint = ("the estimate has no physical standard parameters this close to the description's: "
            + "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""))
    try:
        from .consistent import consistent_estimate
        b = len(identification.estimated)
        labels = {k: label for k, (_, label, _, _) in enumerate(links)}
        found = consistent_estimate(np.eye(b), identification.estimated, robot, prior=pi, regularization=1e-4,
                                    link_offsets={labels[k]: v for k, v in lumps.items()})
    except ImportError:
        raise ValueError(hint + '; identify with --estimator consistent (pip install "robodyn[identify]") for '
                         "an estimate that has them") from None
    except RuntimeError as error:
        raise ValueError(f"{hint}; no physical parameters reproduce it either ({error})") from None
    projected = np.asarray(found.parameters, dtype=float)
    remaining = _violations(projected, lumps, links, description)
    if remaining:
        raise ValueError(hint + "; the closest physical parameters still violate: " + "; ".join(remaining[:3]))
    K = robot.base_parameter_matrix()
    change = np.max(np.abs(K @ projected - identification.estimated)) / max(np.abs(identification.estimated).max(),
                                                                            1e-300)
    adjustments.append(f"{problems[0]}{' (and more)' if len(problems) > 1 else ''}: written as the closest "
                       f"physical parameters instead (base parameters reproduced to {change:.1e})")
    return projected


def _link_fields(ten: np.ndarray, planar: bool) -> dict:
    """YAML link fields (mass, com, inertia about the centre of mass) from ten barycentric parameters."""
    xx, xy, xz, yy, yz, zz, mx, my, mz, m = (float(v) for v in ten)
    com = np.array([mx, my, mz]) / m if m > 0 else np.zeros(3)
    about_origin = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    inertia = about_origin - m * (com @ com * np.eye(3) - np.outer(com, com))
    fields = {"mass": _number(m), "com": [_number(c) for c in com]}
    if planar:
        fields["inertia"] = {"zz": _number(inertia[2, 2])}
    else:
        fields["inertia"] = {"xx": _number(inertia[0, 0]), "yy": _number(inertia[1, 1]), "zz": _number(inertia[2, 2]),
                             "xy": _number(inertia[0, 1]), "xz": _number(inertia[0, 2]), "yz": _number(inertia[1, 2])}
    return fields


def _number(value: float) -> float:
    """Clean rounding residue (1e-17 for a zero) and keep 12 significant digits: the identified values
    are not known better, and the file stays readable."""
    if abs(value) < 1e-14:
        return 0.0
    return float(f"{value:.12g}")


def write_identified(robot, identification: Identification, source: str | Path, out: str | Path,
                     data_name: str = "measurements") -> list[str]:
    """Write a copy of the YAML description ``source`` with the identified standard parameters: each
    link's mass, centre of mass and inertia, each motor's rotor inertia, each joint's friction. Parameters
    that no longer appear anywhere are dropped; everything else (geometry, limits, tool) is kept.
    Atomic: the file is complete or not there. Returns what had to change to make the values
    admissible (a negative friction coefficient written as 0): then the written model reproduces the
    estimate only approximately; ``method="consistent"`` gives estimates that need no such change."""
    import yaml

    from codegen.description import parse_path

    source, out = Path(source), Path(out)
    if source.suffix.lower() not in (".yaml", ".yml"):
        raise ValueError(f"{source}: writing an identified description needs a YAML source (URDF write-back is "
                         "not supported; the identified parameters are in the report)")
    values = dict(robot.params.items())
    description = parse_path(source, robot.options)
    if description.bodies:
        raise ValueError(f"{source}: coupled joints: write-back supports descriptions without mimic couplings")
    document = yaml.safe_load(source.read_text(encoding="utf-8"))
    pi = identification.standard
    adjustments = []

    def admissible(what: str, value: float) -> float:
        if value < 0:
            adjustments.append(f"{what}: identified {value:.4g}, written as 0 (it cannot be negative)")
            return 0.0
        return _number(value)

    lumps = _rotor_lumps(description, values)
    layout = robot.dynamic_parameter_layout
    links = [entry for entry in layout if entry[0] == "link"]
    rotors = {label: start for kind, label, start, _ in layout if kind == "rotor"}
    viscous = {label: start for kind, label, start, _ in layout if kind == "viscous"}
    coulomb = {label: start for kind, label, start, _ in layout if kind == "coulomb"}
    pi = _physical(robot, identification, pi, lumps, links, description, adjustments)
    for k, (joint, entry) in enumerate(zip(document["joints"], links)):
        own = pi[entry[2]:entry[3]] - lumps.get(k, np.zeros(10))
        link = dict(joint.get("link") or {})
        name = link.get("name")
        link.update(_link_fields(own, description.joints[k].inertial.planar))
        if name is not None:
            link["name"] = name
        joint["link"] = link
        jname = joint["name"]
        if jname in rotors and isinstance(joint.get("motor"), dict):
            joint["motor"]["inertia"] = admissible(f"rotor inertia of {jname}", pi[rotors[jname]])
        joint["friction"] = {"viscous": admissible(f"viscous friction of {jname}", pi[viscous[jname]]),
                             "coulomb": admissible(f"Coulomb friction of {jname}", pi[coulomb[jname]])}
    # Drop the parameters nothing refers to any more (the description format requires every one used).
    remaining = yaml.safe_dump({k: v for k, v in document.items() if k != "parameters"}, sort_keys=False)
    used = set(re.findall(r"[A-Za-z_]\w*", remaining))
    if isinstance(document.get("parameters"), dict):
        document["parameters"] = {k: v for k, v in document["parameters"].items() if k in used}
        if not document["parameters"]:
            del document["parameters"]
    digest = hashlib.sha256(np.ascontiguousarray(identification.estimated).tobytes()).hexdigest()[:16]
    header = (f"# {robot.name}: identified by robodyn from {data_name} ({identification.method}, "
              f"{len(identification.identified)} base parameters, estimate {digest}).\n"
              f"# Source description: {source.name}. Link inertial values, rotor inertias and friction are "
              "identified;\n# parameters the data cannot separate keep the source's values.\n")
    text = header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None)
    from .._files import write_atomically

    write_atomically(out, text)
    return adjustments
