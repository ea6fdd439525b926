"""Identification data (issue 11, point 4): the measurement file format, simulated measurements, processing.

The base regressor used here is a closed-form planar RR (``StandInRR``), written from the arm's
energies independently of robodyn's generator and checked against the compiled inverse dynamics;
simulations run on a compiled RR variant with a general centre of mass and Coulomb friction.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from robodyn.identification import data as ident_data
from robodyn.identification.data import (
    Measurements,
    add_noise,
    excitation_band,
    process,
    read_measurements,
    simulate_measurements,
    write_measurements,
)

RR_IDENT = """\
name: rr_ident
description: planar RR arm with a general centre of mass and Coulomb friction (identification tests)
parameters:
  m1: 50.0
  m2: 30.0
  a1: 1.0
  a2: 0.8
  cx1: -0.5
  cy1: 0.06
  cx2: -0.35
  cy2: -0.04
  I1: 10.0
  I2: 4.0
  g0: 9.81
  Fv1: 8.0
  Fv2: 5.0
  Fs1: 12.0
  Fs2: 6.0
gravity: [0, -g0, 0]
joints:
  - name: shoulder
    type: revolute
    dh: {a: a1}
    link: {mass: m1, com: [cx1, cy1, 0], inertia: {xx: 0.4, yy: I1, zz: I1}}
    friction: {viscous: Fv1, coulomb: Fs1}
  - name: elbow
    type: revolute
    dh: {a: a2}
    link: {mass: m2, com: [cx2, cy2, 0], inertia: {xx: 0.2, yy: I2, zz: I2}}
    friction: {viscous: Fv2, coulomb: Fs2}
"""
LINK_XX = (0.4, 0.2)  # the description's xx inertias (not named parameters)
INERTIAL = slice(0, 6)  # base parameters 0..5 are inertial, 6..9 friction


class StandInRR:
    """Planar RR arm in closed form. Per link (DH frame at the link's far end) T_i = ½ m|ȯ|² +
    θ̇ ȯ·R S (MX, MY) + ½ ZZ θ̇², V_i = g0 (m o_y + [R (MX, MY)]_y); Lagrange's equations give the
    base parameters ZZ1R = ZZ1 + 2 a1 MX1 + a1²(M1 + M2), ZZ2R = ZZ2 + 2 a2 MX2 + a2² M2,
    MX2R = MX2 + a2 M2, MY2, MX1R = MX1 + a1 (M1 + M2), MY1, then Fv, Fs per joint."""

    base_parameter_names = ("ZZ1R", "ZZ2R", "MX2R", "MY2", "MX1R", "MY1", "Fv1", "Fs1", "Fv2", "Fs2")

    def __init__(self, robot):
        self.robot = robot
        self.n = 2
        self.joint_names = tuple(robot.joint_names)
        params = robot.params
        self.a1, self.a2, self.g0 = params["a1"], params["a2"], params["g0"]
        names = [f"{s}{k}" for k in (1, 2) for s in ("XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M")]
        self.dynamic_parameter_names = tuple(names + ["Fv1", "Fs1", "Fv2", "Fs2"])
        self.dynamic_parameter_layout = (("link", "shoulder", 0, 10), ("link", "elbow", 10, 20),
                                         ("viscous", "shoulder", 20, 21), ("coulomb", "shoulder", 21, 22),
                                         ("viscous", "elbow", 22, 23), ("coulomb", "elbow", 23, 24))

    def dynamic_parameters(self) -> np.ndarray:
        params = self.robot.params
        values = []
        for k, xx in zip((1, 2), LINK_XX):
            m, c, izz = params[f"m{k}"], np.array([params[f"cx{k}"], params[f"cy{k}"], 0.0]), params[f"I{k}"]
            inertia = np.diag([xx, izz, izz]) + m * (c @ c * np.eye(3) - np.outer(c, c))  # about the frame origin
            values += [inertia[0, 0], inertia[0, 1], inertia[0, 2], inertia[1, 1], inertia[1, 2], inertia[2, 2],
                       *(m * c), m]
        return np.array(values + [params["Fv1"], params["Fs1"], params["Fv2"], params["Fs2"]])

    def base_parameter_matrix(self) -> np.ndarray:
        a1, a2 = self.a1, self.a2
        index = {name: k for k, name in enumerate(self.dynamic_parameter_names)}
        K = np.zeros((10, 24))
        for row, terms in enumerate(({"ZZ1": 1, "MX1": 2 * a1, "M1": a1**2, "M2": a1**2},
                                     {"ZZ2": 1, "MX2": 2 * a2, "M2": a2**2}, {"MX2": 1, "M2": a2}, {"MY2": 1},
                                     {"MX1": 1, "M1": a1, "M2": a1}, {"MY1": 1}, {"Fv1": 1}, {"Fs1": 1},
                                     {"Fv2": 1}, {"Fs2": 1})):
            for name, value in terms.items():
                K[row, index[name]] = value
        return K

    def base_parameters(self) -> np.ndarray:
        return self.base_parameter_matrix() @ self.dynamic_parameters()

    def base_regressor(self, q, qd, qdd) -> np.ndarray:
        q, qd, qdd = (np.atleast_2d(np.asarray(x, dtype=np.float64)) for x in (q, qd, qdd))
        a1, g0 = self.a1, self.g0
        v1, v2, u1, u2 = qd[:, 0], qd[:, 1], qdd[:, 0], qdd[:, 1]
        c1, s1, c2, s2 = np.cos(q[:, 0]), np.sin(q[:, 0]), np.cos(q[:, 1]), np.sin(q[:, 1])
        c12, s12 = np.cos(q[:, 0] + q[:, 1]), np.sin(q[:, 0] + q[:, 1])
        Y = np.zeros((q.shape[0], 2, 10))
        Y[:, 0, 0] = u1
        Y[:, 0, 1] = Y[:, 1, 1] = u1 + u2
        Y[:, 0, 2] = a1 * c2 * (2 * u1 + u2) - a1 * s2 * (2 * v1 * v2 + v2**2) + g0 * c12
        Y[:, 0, 3] = -a1 * s2 * (2 * u1 + u2) - a1 * c2 * (2 * v1 * v2 + v2**2) - g0 * s12
        Y[:, 0, 4] = g0 * c1
        Y[:, 0, 5] = -g0 * s1
        Y[:, 0, 6], Y[:, 0, 7] = v1, np.sign(v1)
        Y[:, 1, 2] = a1 * c2 * u1 + a1 * s2 * v1**2 + g0 * c12
        Y[:, 1, 3] = -a1 * s2 * u1 + a1 * c2 * v1**2 - g0 * s12
        Y[:, 1, 8], Y[:, 1, 9] = v2, np.sign(v2)
        return Y


def fourier_reference(duration=20.0, rate=1000.0, f0=0.1, harmonics=5, n=2, seed=3, amplitude=2.0):
    """A periodic multi-sine reference (t, q, qd, qdd), exact derivatives; cond ~ 40 for the RR arm."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(duration * rate) + 1) / rate
    w = 2 * np.pi * f0 * np.arange(1, harmonics + 1)
    a = rng.normal(size=(n, harmonics)) * amplitude / harmonics
    b = rng.normal(size=(n, harmonics)) * amplitude / harmonics
    s, c = np.sin(t[:, None, None] * w), np.cos(t[:, None, None] * w)
    return t, (a / w * s - b / w * c).sum(-1), (a * c + b * s).sum(-1), (-a * w * s + b * w * c).sum(-1)


#: Realistic noise: an 18-bit encoder with 2e-5 rad of electrical noise, 0.5 N m on each torque.
NOISE = {"encoder_noise": 2e-5, "encoder_resolution": 2 * np.pi / 2**18, "torque_noise": 0.5}


_built: dict = {}


def load_rr_ident(cache_dir, tmp_path_factory):
    """The compiled RR variant above (built once per session; the cache makes later loads instant)."""
    import robodyn

    if "robot" not in _built:
        path = tmp_path_factory.mktemp("ident") / "rr_ident.yaml"
        path.write_text(RR_IDENT)
        _built["robot"] = robodyn.load(path, cache_dir=cache_dir, verbose=False)
    return _built["robot"]


def rr_simulation(robot):
    """One 20 s simulated identification run at 1 kHz (noise-free signals in .truth), made once."""
    if "run" not in _built:
        _built["run"] = simulate_measurements(robot, *fourier_reference(), seed=0)
    return _built["run"]


@pytest.fixture(scope="session")
def rr_ident(cache_dir, tmp_path_factory):
    return load_rr_ident(cache_dir, tmp_path_factory)


@pytest.fixture(scope="session")
def rr_run(rr_ident):
    return rr_simulation(rr_ident)


def relative_error(estimate, truth):
    return np.abs(estimate / truth - 1.0)


def ols(W, y):
    return np.linalg.lstsq(W, y, rcond=None)[0]


# ----------------------------------------------------------------------------------- the stand-in

def test_stand_in_regressor_is_the_compiled_inverse_dynamics(rr_ident):
    rng = np.random.default_rng(1)
    q, qd, qdd = rng.uniform(-3, 3, (50, 2)), rng.uniform(-2, 2, (50, 2)), rng.uniform(-5, 5, (50, 2))
    stand_in = StandInRR(rr_ident)
    tau = rr_ident.inverse_dynamics(q, qd, qdd)
    assert np.max(np.abs(stand_in.base_regressor(q, qd, qdd) @ stand_in.base_parameters() - tau)) < 1e-12 * np.max(
        np.abs(tau))


# ------------------------------------------------------------------------------------ file format

def _measurements(samples=64, n=2, seed=0, qd=False):
    rng = np.random.default_rng(seed)
    t = np.arange(samples) * 1e-3
    return Measurements(t, rng.normal(size=(samples, n)), rng.normal(size=(samples, n)) * 10,
                        ("shoulder", "elbow")[:n] if n <= 2 else tuple(f"j{i}" for i in range(n)),
                        rng.normal(size=(samples, n)) if qd else None)


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
@pytest.mark.parametrize("with_qd", [False, True])
def test_round_trip_is_exact(tmp_path, suffix, with_qd):
    m = _measurements(qd=with_qd)
    path = write_measurements(tmp_path / f"m{suffix}", m)
    back = read_measurements(path, joint_names=("shoulder", "elbow"))
    for key in ("t", "q", "tau"):
        assert np.array_equal(getattr(back, key), getattr(m, key)), key
    assert back.joint_names == m.joint_names
    assert (back.qd is None) == (not with_qd)
    if with_qd:
        assert np.array_equal(back.qd, m.qd)
    assert [p.name for p in tmp_path.iterdir()] == [f"m{suffix}"]  # no temporary file left


def test_csv_comments_any_column_order_and_reordering_to_the_robot(tmp_path):
    path = tmp_path / "m.csv"
    rows = "\n".join(f"{k},{-k},{k * 0.01:.6f},{2 * k},{-2 * k}" for k in range(40))
    path.write_text(f"# logged by hand\n\n tau_elbow , q_elbow,t,q_shoulder,tau_shoulder\n# mid-file comment\n{rows}\n")
    m = read_measurements(path, joint_names=("shoulder", "elbow"))
    k = np.arange(40)
    assert m.joint_names == ("shoulder", "elbow")
    assert np.array_equal(m.t, np.round(k * 0.01, 6))
    assert np.array_equal(m.q, np.stack([2 * k, -k], axis=1).astype(float))
    assert np.array_equal(m.tau, np.stack([-2 * k, k], axis=1).astype(float))
    assert m.rate == pytest.approx(100.0)


def _csv(tmp_path, header="t,q_a,tau_a", rows=None, name="m.csv"):
    rows = rows if rows is not None else [f"{k * 1e-3!r},{k},{k}" for k in range(40)]
    path = tmp_path / name
    path.write_text("# comment\n" + header + "\n" + "\n".join(rows) + "\n")
    return path


def test_csv_errors_name_file_line_and_column(tmp_path):
    good = [f"{k * 1e-3!r},{k},{k}" for k in range(40)]

    def error(rows=None, header="t,q_a,tau_a", **kwargs):
        with pytest.raises(ValueError) as info:
            read_measurements(_csv(tmp_path, header, rows), **kwargs)
        return str(info.value)

    message = error(good[:10] + ["0.010,1,nan"] + good[11:])
    assert "m.csv:13: column 3 (tau_a): NaN" in message  # line 13: comment, header, then data row 11
    message = error(good[:5] + ["0.005,1,x"] + good[6:])
    assert "m.csv:8: column 3 (tau_a): not a number" in message
    assert "m.csv:8: 2 values" in error(good[:5] + ["0.005,1"] + good[6:])
    assert "not strictly increasing at sample 6" in error(good[:6] + ["0.004,1,1"] + good[7:])
    assert "m.csv:9: column 't'" in error(good[:6] + ["0.004,1,1"] + good[7:])
    message = error(good[:20] + [f"{k * 1e-3 + 5e-4!r},{k},{k}" for k in range(20, 40)])
    assert "not uniformly sampled at sample 20" in message and "m.csv:23" in message
    assert "missing column 'tau_a'" in error(header="t,q_a,qd_a", rows=good)
    assert "missing column 't'" in error(header="time,q_a,tau_a", rows=good)
    assert "unknown column 'torque_a'" in error(header="t,q_a,torque_a", rows=good)
    assert "'tau_b' has no matching 'q_b'" in error(header="t,q_a,tau_a,tau_b", rows=[r + ",0" for r in good])
    assert "duplicate column 'q_a'" in error(header="t,q_a,q_a", rows=good)
    assert "10 samples, at least 32" in error(good[:10])
    message = error(good, joint_names=("a", "b"))
    assert "no data for joint(s) ['b']" in message and "m.csv" in message
    assert "unknown joint(s) ['a']" in error(good, joint_names=("z",))
    assert "no header line" in error(header="# only comments", rows=[])


def test_time_tolerance_accepts_rounded_stamps_and_rejects_a_dropped_sample(tmp_path):
    rows = [f"{k * 1e-3:.6f},{k},{k}" for k in range(100)]
    assert read_measurements(_csv(tmp_path, rows=rows)).t.shape == (100,)
    with pytest.raises(ValueError, match="not uniformly sampled at sample 50"):
        read_measurements(_csv(tmp_path, rows=rows[:50] + rows[51:]))


def test_size_caps_refuse_before_reading(tmp_path, monkeypatch):
    m = _measurements()
    csv_path = write_measurements(tmp_path / "m.csv", m)
    monkeypatch.setattr(ident_data, "MAX_FILE_BYTES", 1000)
    with pytest.raises(ValueError, match=r"m\.csv: \d+ bytes, more than the limit 1000"):
        read_measurements(csv_path)
    bomb = tmp_path / "bomb.npz"
    np.savez_compressed(bomb, t=np.arange(10**5) * 1e-3, q=np.zeros((10**5, 2)), tau=np.zeros((10**5, 2)),
                        joint_names=np.array(["a", "b"]))
    monkeypatch.setattr(ident_data, "MAX_FILE_BYTES", 10 * os.path.getsize(bomb))
    with pytest.raises(ValueError, match=r"bomb\.npz: inflates to \d+ bytes"):  # small on disk, huge inflated
        read_measurements(bomb)
    monkeypatch.setattr(ident_data, "MAX_FILE_BYTES", 1 << 30)
    monkeypatch.setattr(ident_data, "MAX_SAMPLES", 50)
    with pytest.raises(ValueError, match="more than 50 samples, the limit"):
        read_measurements(csv_path)


def test_npz_errors(tmp_path):
    m = _measurements()
    path = tmp_path / "m.npz"
    np.savez(path, t=m.t, q=m.q)
    with pytest.raises(ValueError, match=r"m\.npz: missing array\(s\) \['joint_names', 'tau'\]"):
        read_measurements(path)
    q = m.q.copy()
    q[7, 1] = np.nan
    np.savez(path, t=m.t, q=q, tau=m.tau, joint_names=np.array(m.joint_names))
    with pytest.raises(ValueError, match=r"m\.npz: q is NaN or infinite at sample 7, joint 'elbow'"):
        read_measurements(path)
    np.savez(path, t=m.t, q=m.q[:, :1], tau=m.tau, joint_names=np.array(m.joint_names))
    with pytest.raises(ValueError, match=r"m\.npz: q: expected shape \(64, 2\)"):
        read_measurements(path)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not an NPZ archive"):
        read_measurements(tmp_path / "bad.npz")
    with pytest.raises(ValueError, match="cannot read"):
        read_measurements(tmp_path / "absent.csv")


def test_write_is_atomic(tmp_path, monkeypatch):
    path = write_measurements(tmp_path / "m.csv", _measurements(seed=1))
    before = path.read_bytes()

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savetxt", fail)
    with pytest.raises(OSError, match="No space left"):
        write_measurements(path, _measurements(seed=2))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv"]
    with pytest.raises(ValueError, match="not strictly increasing"):  # refused before anything is written
        write_measurements(tmp_path / "n.csv", Measurements(np.zeros(40), np.zeros((40, 1)), np.zeros((40, 1)), ("a",)))
    assert not (tmp_path / "n.csv").exists()


def test_measurements_validation():
    with pytest.raises(ValueError, match=r"tau: expected shape \(3, 2\)"):
        Measurements(np.arange(3.0), np.zeros((3, 2)), np.zeros((3, 1)), ("a", "b"))
    with pytest.raises(ValueError, match="joint name 'a,b'"):
        Measurements(np.arange(3.0), np.zeros((3, 1)), np.zeros((3, 1)), ("a,b",))
    with pytest.raises(ValueError, match="duplicate joint names"):
        Measurements(np.arange(3.0), np.zeros((3, 2)), np.zeros((3, 2)), ("a", "a"))


# ------------------------------------------------------------------------------------- simulation

def test_simulated_truth_satisfies_the_dynamics_and_tracks(rr_ident, rr_run):
    truth = rr_run.truth
    tau = rr_ident.inverse_dynamics(truth.q, truth.qd, truth.qdd)
    assert np.max(np.abs(tau - truth.tau)) < 1e-10 * np.max(np.abs(truth.tau))
    _, q_ref, _, _ = fourier_reference()
    assert np.max(np.abs(truth.q - q_ref)) < 1e-4  # computed torque on the exact model
    assert np.array_equal(rr_run.q, truth.q) and np.array_equal(rr_run.tau, truth.tau)  # no noise asked
    crossings = np.count_nonzero(np.diff(np.sign(truth.qd), axis=0), axis=0)
    assert np.all(crossings >= 8)  # friction is exercised in both directions


def test_measurement_noise_statistics_and_seeds(rr_ident, rr_run):
    t, truth = rr_run.t, rr_run.truth
    m = add_noise(t, truth, rr_run.joint_names, encoder_noise=[1e-3, 2e-3], torque_noise=0.5, seed=4)
    assert np.std(m.q - truth.q, axis=0) == pytest.approx([1e-3, 2e-3], rel=0.03)
    assert np.std(m.tau - truth.tau) == pytest.approx(0.5, rel=0.03)
    again = add_noise(t, truth, rr_run.joint_names, encoder_noise=[1e-3, 2e-3], torque_noise=0.5, seed=4)
    other = add_noise(t, truth, rr_run.joint_names, encoder_noise=[1e-3, 2e-3], torque_noise=0.5, seed=5)
    assert np.array_equal(m.q, again.q) and not np.array_equal(m.q, other.q)
    resolution = 2 * np.pi / 2**12
    quantised = add_noise(t, truth, rr_run.joint_names, encoder_resolution=resolution)
    counts = quantised.q / resolution
    assert np.max(np.abs(counts - np.round(counts))) < 1e-6
    assert np.max(np.abs(quantised.q - truth.q)) <= resolution / 2 * (1 + 1e-9)
    with pytest.raises(ValueError, match="encoder_resolution: must be positive"):
        add_noise(t, truth, rr_run.joint_names, encoder_resolution=0.0)
    with pytest.raises(ValueError, match="torque_noise: must be finite and non-negative"):
        add_noise(t, truth, rr_run.joint_names, torque_noise=-1.0)


def test_simulate_measurements_validates_its_reference(rr_ident):
    t, q, qd, qdd = fourier_reference(duration=0.1)
    with pytest.raises(ValueError, match=r"qd_ref: expected shape \(101, 2\)"):
        simulate_measurements(rr_ident, t, q, qd[:, :1], qdd)
    t_bad = t.copy()
    t_bad[50] += 1e-4
    with pytest.raises(ValueError, match="not uniformly sampled"):
        simulate_measurements(rr_ident, t_bad, q, qd, qdd)
    with pytest.raises(ValueError, match="oversample"):
        simulate_measurements(rr_ident, t, q, qd, qdd, oversample=0)


# ------------------------------------------------------------------------------------- processing

def test_excitation_band_of_a_known_motion():
    t = np.arange(20000) * 1e-3
    q = np.stack([np.sin(2 * np.pi * 0.3 * t), 0.5 * np.sin(2 * np.pi * 1.7 * t + 1)], axis=1)
    assert 1.69 <= excitation_band(q, 1000.0) <= 1.9


def test_processing_shapes_trim_decimation_and_report(rr_ident, rr_run):
    stand_in = StandInRR(rr_ident)
    p = process(rr_run, stand_in, decimate=10, trim=100)
    kept = len(range(100, rr_run.t.shape[0] - 100, 10))
    assert p.W.shape == (2 * kept, 10) and p.y.shape == (2 * kept,) and p.q.shape == (kept, 2)
    assert np.array_equal(p.t, rr_run.t[100:-100:10])
    assert np.array_equal(p.joint_index[:4], [0, 1, 0, 1])
    assert np.array_equal(p.y.reshape(kept, 2), p.tau)
    assert p.parallel_cutoff == pytest.approx(40.0)  # 0.8 × the decimated Nyquist (50 Hz)
    assert 2.0 <= p.cutoff <= 5.0  # 5 × the 0.5 Hz excitation band
    assert p.parameter_names == StandInRR.base_parameter_names
    assert any("parallel zero-phase low-pass" in step for step in p.steps)
    with pytest.raises(ValueError, match="trimming 10000 samples at each end leaves 1 of 20001"):
        process(rr_run, stand_in, trim=10000)
    with pytest.raises(ValueError, match="cutoff: expected a frequency"):
        process(rr_run, stand_in, cutoff=600.0)
    with pytest.raises(ValueError, match="decimation would alias"):
        process(rr_run, stand_in, decimate=10, parallel_cutoff=45.0)
    with pytest.raises(ValueError, match="are not the robot's"):
        process(Measurements(rr_run.t, rr_run.q, rr_run.tau, ("a", "b")), stand_in)


def test_parallel_filtering_keeps_the_noiseless_system_exact(rr_ident, rr_run):
    """Noise-free measurements through the full pipeline recover the parameters closely: the filter is
    linear, so W θ = τ survives it; what remains is the differentiation of a sampled motion (and the
    sgn(q̇) switches of the Coulomb columns: Fs1 is the worst, 2.3e-3)."""
    stand_in = StandInRR(rr_ident)
    theta = stand_in.base_parameters()
    for decimate in (1, 10):
        p = process(rr_run, stand_in, decimate=decimate)
        assert np.max(relative_error(ols(p.W, p.y), theta)) < 3e-3
        # The true parameters' residual is as small at the record's ends as in its middle: the filter of q meets
        # no corner there (the ends extended by fitted cubics; SciPy's odd reflection flipped q's curvature,
        # 0.33 and 0.76 N m RMS in the first and last 5 % of this record, against 0.023 in the middle).
        residual = (p.W @ theta - p.y).reshape(-1, 2)
        tenth = residual.shape[0] // 20
        for part in (residual[:tenth], residual[tenth:-tenth], residual[-tenth:]):
            assert np.sqrt(np.mean(part**2)) < 0.05, np.sqrt(np.mean(part**2))


def test_negative_controls_fail(rr_ident, rr_run):
    """Raw finite differences of noisy encoders, and filtering τ but not W, give wrong parameters;
    the full processing of the same data does not."""
    stand_in = StandInRR(rr_ident)
    theta = stand_in.base_parameters()
    noisy = add_noise(rr_run.t, rr_run.truth, rr_run.joint_names, seed=1, **NOISE)
    full = relative_error(ols(*_system(process(noisy, stand_in))), theta)
    raw = relative_error(ols(*_system(process(noisy, stand_in, raw=True))), theta)
    tau_only = ols(*_system(process(noisy, stand_in, filter_tau_only=True)))
    assert np.max(full[INERTIAL]) < 5e-3 and np.max(full) < 2e-2
    assert np.max(raw[INERTIAL]) > 0.5  # measured: 70-160 % on the inertial parameters
    coulomb_bias = tau_only[[7, 9]] / theta[[7, 9]] - 1.0
    assert np.all(coulomb_bias < -0.05)  # measured: -16 % and -27 %: the smoothed sgn(q̇) is lost
    assert np.max(full[[7, 9]]) < 0.01


def _system(p):
    return p.W, p.y
