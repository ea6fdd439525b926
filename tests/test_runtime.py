"""The runtime API: argument validation, out= buffers, parameters, GIL modes, threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import robodyn


@pytest.fixture
def rr(load):
    return load("rr")


def _state():
    return np.array([0.3, -0.5]), np.array([1.0, 2.0]), np.array([0.1, -0.2])


def test_readme_example(rr):
    q, qd, qdd = _state()
    assert rr.n == 2 and rr.joint_names == ("shoulder", "elbow")
    assert rr.M(q).shape == (2, 2) and rr.C(q, qd).shape == (2, 2) and rr.g(q).shape == (2,)
    tau = rr.inverse_dynamics(q, qd, qdd)
    np.testing.assert_allclose(rr.forward_dynamics(q, qd, tau), qdd, rtol=1e-12, atol=1e-12)
    before = rr.M(q)
    rr.params["m2"] = 80.0
    assert not np.allclose(rr.M(q), before)
    rr.params.reset()
    np.testing.assert_array_equal(rr.M(q), before)
    assert "rr" in repr(rr)


@pytest.mark.parametrize("bad, error", [
    (np.array([1, 2]), TypeError),                       # integer dtype
    (np.array([1.0, 2.0], dtype=np.float32), TypeError),  # wrong float dtype
    (np.array([1.0, 2.0, 3.0]), ValueError),              # wrong length
    (np.zeros((2, 2, 2)), ValueError),                    # wrong rank
    (np.array([np.nan, 0.0]), ValueError),
    (np.array([0.0, np.inf]), ValueError),
    (np.arange(4.0)[::2], ValueError),                    # not contiguous
    (np.array([1.0, 2.0]).astype(">f8"), ValueError),     # byte-swapped
    ("q", TypeError),
    (None, TypeError),
    (3.0, TypeError),
    ([1.0, "x"], TypeError),
])
def test_bad_inputs_raise(rr, bad, error):
    q, qd, qdd = _state()
    with pytest.raises(error):
        rr.M(bad)
    with pytest.raises(error):
        rr.inverse_dynamics(q, bad, qdd)
    with pytest.raises(error):
        rr.forward_dynamics(q, qd, bad)


def test_lists_are_accepted(rr):
    q, qd, qdd = _state()
    np.testing.assert_array_equal(rr.inverse_dynamics(list(q), tuple(qd), list(qdd)), rr.inverse_dynamics(q, qd, qdd))


def test_wrench_shape_checked(rr):
    q, qd, qdd = _state()
    with pytest.raises(ValueError):
        rr.inverse_dynamics(q, qd, qdd, np.zeros(5))
    with pytest.raises(ValueError):
        rr.inverse_dynamics(q, qd, qdd, np.array([0, 0, np.nan, 0, 0, 0.0]))


def test_out_buffers(rr):
    q, qd, qdd = _state()
    out = np.empty(2)
    result = rr.inverse_dynamics(q, qd, qdd, out=out)
    assert result is out
    np.testing.assert_array_equal(out, rr.inverse_dynamics(q, qd, qdd))
    M = np.empty((2, 2))
    assert rr.M(q, out=M) is M
    with pytest.raises(ValueError):
        rr.M(q, out=np.empty(4))                 # wrong shape
    with pytest.raises(ValueError):
        rr.M(q, out=np.empty((2, 2), order="F")[:, :1])
    with pytest.raises(TypeError):
        rr.g(q, out=np.empty(2, dtype=np.float32))
    with pytest.raises(TypeError):
        rr.g(q, out=[0.0, 0.0])
    read_only = np.empty(2)
    read_only.flags.writeable = False
    with pytest.raises(ValueError):
        rr.g(q, out=read_only)
    with pytest.raises(ValueError):               # aliasing an input
        rr.forward_dynamics(q, qd, qdd, out=qd)
    energy = np.empty(1)
    assert rr.kinetic_energy(q, qd, out=energy) is energy
    assert energy[0] == pytest.approx(0.5 * qd @ rr.M(q) @ qd, rel=1e-14)


def test_batches(rr):
    rng = np.random.default_rng(0)
    Q, QD = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    out = np.empty((5, 2, 2))
    assert rr.M(Q, out=out) is out
    assert rr.g(Q).shape == (5, 2)
    assert rr.kinetic_energy(Q, QD).shape == (5,)
    assert rr.jacobian(Q).shape == (5, 6, 2)
    with pytest.raises(ValueError):
        rr.C(Q, QD[:4])                          # batch sizes differ
    with pytest.raises(ValueError):
        rr.C(Q, QD[0])                           # batch mixed with a single state
    with pytest.raises(ValueError):
        rr.M(Q, out=np.empty((4, 2, 2)))


def test_parameters_mapping(rr):
    assert list(rr.params) == ["m1", "m2", "a1", "a2", "ac1", "ac2", "I1", "I2", "g0", "D"]
    assert rr.params["m1"] == 50.0
    with pytest.raises(KeyError, match="unknown parameter"):
        rr.params["m3"] = 1.0
    with pytest.raises(ValueError):
        rr.params["m1"] = float("nan")
    with pytest.raises(TypeError):
        rr.params["m1"] = "heavy"
    with pytest.raises(TypeError):
        del rr.params["m1"]
    rr.params["g0"] = 0.0
    np.testing.assert_array_equal(rr.g(np.array([0.3, 0.2])), [0.0, 0.0])


def test_singular_mass_matrix_is_an_exception(rr):
    q, qd, qdd = _state()
    rr.params.update(m1=0.0, m2=0.0, I1=0.0, I2=0.0)
    with pytest.raises(ValueError, match="positive definite"):
        rr.forward_dynamics(q, qd, qdd)


def test_copies_have_independent_parameters(rr):
    other = rr.copy()
    other.params["m2"] = 1.0
    assert rr.params["m2"] == 50.0
    q, _, _ = _state()
    assert not np.allclose(other.M(q), rr.M(q))


@pytest.mark.parametrize("mode", [True, False, "auto"])
def test_gil_modes_give_identical_results(rr, mode):
    q, qd, qdd = _state()
    reference = rr.inverse_dynamics(q, qd, qdd)
    rr.release_gil = mode
    try:
        assert rr.release_gil == mode
        np.testing.assert_array_equal(rr.inverse_dynamics(q, qd, qdd), reference)
    finally:
        rr.release_gil = "auto"
    with pytest.raises(ValueError):
        rr.release_gil = "sometimes"


def test_threads_share_a_robot(rr):
    rng = np.random.default_rng(1)
    Q = rng.normal(size=(2000, 2))
    expected = rr.M(Q)
    results = [None] * 4

    def work(i):
        results[i] = rr.M(Q)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        np.testing.assert_array_equal(result, expected)


def test_metadata_and_selfcheck(rr):
    assert rr.metadata["robot"] == "rr"
    assert rr.metadata["generator_version"]
    assert len(rr.metadata["source_sha256"]) == 64
    assert rr.selfcheck["passed"] is True
    assert {c["name"] for c in rr.selfcheck["checks"]} >= {"skew", "inverse_forward", "compiled_vs_symbolic_mass_matrix"}


def test_load_reports_bad_description(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\njoints: []\n")
    with pytest.raises(robodyn_error()):
        robodyn.load(bad, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def robodyn_error():
    from codegen import DescriptionError

    return DescriptionError
