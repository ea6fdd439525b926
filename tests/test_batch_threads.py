"""Large batches split over threads (robot.threads): the same values bit for bit as one thread, the first failing
row reported whichever chunk it falls in, the setting validated and carried by copies and pickles."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

from robodyn._native import PARALLEL_OPERATIONS, chunk_rows



def _rows(robot, routine: str) -> int:
    """Rows enough for a batch of this routine to be split (twice the threshold)."""
    return 2 * PARALLEL_OPERATIONS // robot.operation_counts[routine] + 7


@pytest.fixture
def rrr(load):
    robot = load("rrr")
    yield robot
    robot.threads = "auto"


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_split_batches_equal_one_thread_bit_for_bit(rrr, threads):
    rows = _rows(rrr, "mass_matrix")
    rng = np.random.default_rng(threads)
    Q, QD, QDD = (rng.uniform(-2.0, 2.0, (rows, 3)) for _ in range(3))
    rrr.threads = 1
    expected = {"M": rrr.M(Q), "C": rrr.C(Q, QD), "inverse_dynamics": rrr.inverse_dynamics(Q, QD, QDD),
                "forward_dynamics": rrr.forward_dynamics(Q, QD, QDD), "fk": rrr.fk(Q)}
    rrr.threads = threads
    assert rrr.threads == threads
    got = {"M": rrr.M(Q), "C": rrr.C(Q, QD), "inverse_dynamics": rrr.inverse_dynamics(Q, QD, QDD),
           "forward_dynamics": rrr.forward_dynamics(Q, QD, QDD), "fk": rrr.fk(Q)}
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    # Rows at both ends and in the middle are each that state's single-call value.
    for row in sorted({0, rows // threads - 1, rows // threads, rows // 2, rows - 1}):
        np.testing.assert_array_equal(got["inverse_dynamics"][row], rrr.inverse_dynamics(Q[row], QD[row], QDD[row]))
    out = np.full((rows, 3, 3), np.nan)
    assert rrr.M(Q, out=out) is out
    np.testing.assert_array_equal(out, expected["M"])


def test_small_batches_and_single_states_unaffected(rrr):
    rrr.threads = 4
    Q = np.random.default_rng(0).uniform(-1.0, 1.0, (5, 3))
    np.testing.assert_array_equal(rrr.M(Q), np.array([rrr.M(q) for q in Q]))


def test_setting_is_validated_and_carried(rrr):
    assert rrr.threads == "auto"
    for bad in (0, -1, 1.5, True, "all", None, 10_000):
        with pytest.raises(ValueError, match="threads"):
            rrr.threads = bad
    rrr.threads = 2
    assert rrr.copy().threads == 2
    assert pickle.loads(pickle.dumps(rrr)).threads == 2


def test_failing_row_in_a_later_chunk_is_reported(rrr):
    """A negative mass (not physical, but finite) for which M is positive definite in some configurations and not
    in others: forward dynamics fails on exactly the rows of the second kind; the first of them, in the last
    chunk, is the row reported."""
    rrr.params["m3"] = -9.0
    states = np.random.default_rng(0).uniform(-np.pi, np.pi, (200, 3))
    smallest = np.array([np.linalg.eigvalsh(m).min() for m in rrr.M(states)])
    good, singular = states[np.argmax(smallest)], states[np.argmin(smallest)]
    assert smallest.max() > 0.01 and smallest.min() < -0.01
    rows = _rows(rrr, "forward_dynamics")
    Q = np.tile(good, (rows, 1))
    bad = rows - 3
    Q[[bad, bad + 1]] = singular
    for threads in (1, 2, 3):
        rrr.threads = threads
        with pytest.raises(ValueError, match=f"batch row {bad}\\b"):
            rrr.forward_dynamics(Q, Q, Q)
    assert np.isfinite(rrr.forward_dynamics(Q[:bad], Q[:bad], Q[:bad])).all()


@pytest.mark.parametrize("threads", [2, 3])
def test_first_of_failing_rows_in_several_chunks_is_reported(rrr, threads):
    """Threads take rows in chunks as they go (a late or slow thread computes fewer): whichever thread meets which
    failing row first, the row reported is the first in the batch, as with one thread. The first failing row lies
    half-way through a chunk, and every later chunk fails on its last row, which the threads holding those chunks
    meet after the first one (the first chunk moves by one each call, so that threads working in step, each one
    chunk ahead of the other, meet it either way); or the first failing row ends a chunk and the next begins the
    next chunk, met first."""
    rrr.params["m3"] = -9.0
    states = np.random.default_rng(1).uniform(-np.pi, np.pi, (200, 3))
    smallest = np.array([np.linalg.eigvalsh(m).min() for m in rrr.M(states)])
    good, singular = states[np.argmax(smallest)], states[np.argmin(smallest)]
    operations = rrr.operation_counts["forward_dynamics"]
    rows = 30 * chunk_rows(operations, 10**9, threads)  # thirty chunks
    chunk = chunk_rows(operations, rows, threads)
    assert 100 <= chunk <= rows // 30
    middle = rows // chunk // 2  # half-way through the batch: every thread is at work by then
    layouts = [[1, rows - 2], [middle * chunk + 1, middle * chunk + 2]]
    layouts += [[(middle + k) * chunk + chunk // 2, *range((middle + k + 2) * chunk - 1, rows, chunk)] for k in range(8)]
    # The last row of a chunk and the first of the next: the later row is met first, by the next chunk's thread.
    layouts += [[(middle + k + 1) * chunk - 1, (middle + k + 1) * chunk] for k in range(4)]
    for bad_rows in layouts:
        Q = np.tile(good, (rows, 1))
        Q[bad_rows] = singular
        for n in (1, threads):
            rrr.threads = n
            with pytest.raises(ValueError, match=f"batch row {bad_rows[0]}\\b"):
                rrr.forward_dynamics(Q, Q, Q)


def test_an_interrupted_batch_leaves_no_thread_writing(load, monkeypatch):
    """A signal's exception (Ctrl-C) in the calling thread while a batch runs is raised once every pool thread is
    done with it: after it, nothing writes into the caller's arrays any more. Large chunks (a quarter of each
    thread's share) and more threads than cores leave pool threads mid-chunk when the calling thread runs out of
    rows."""
    import signal
    import time

    import robodyn._native as native

    if not hasattr(signal, "setitimer"):
        pytest.skip("no interval timers here")

    class Interrupted(Exception):
        pass

    armed = [False]  # raise only inside the batch's try block (the timer may fire as it ends)

    def interrupt(signum, frame):
        if armed[0]:
            armed[0] = False
            raise Interrupted()

    puma = load("puma560")
    puma.threads = 4
    monkeypatch.setattr(native, "CHUNK_OPERATIONS", 10**12)
    Q = np.random.default_rng(3).uniform(-1.0, 1.0, (100_000, 6))
    out = tuple(np.full((len(Q), 6, 6), np.nan) for _ in range(3))
    puma.forward_dynamics_derivatives(Q[:20_000], Q[:20_000], Q[:20_000])  # the pool's threads started
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        for delay in (0.005, 0.01, 0.02, 0.03, 0.04, 0.06):
            armed[0] = True
            signal.setitimer(signal.ITIMER_REAL, delay)
            try:
                puma.forward_dynamics_derivatives(Q, Q, Q, out=out)
                armed[0] = False
            except Interrupted:
                pass
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            snapshot = [o.copy() for o in out]
            time.sleep(0.05)
            for before, after in zip(snapshot, out):
                np.testing.assert_array_equal(after, before)
    finally:
        signal.signal(signal.SIGALRM, previous)
        puma.threads = "auto"


def test_a_pool_outgrown_while_another_thread_uses_it_keeps_serving_that_thread(rrr):
    """Batches in two threads while one of them keeps growing the shared pool (robot.threads larger each time): the
    other thread's batches never meet a pool shut down under them ("cannot schedule new futures after shutdown"),
    and their values stay those of one thread."""
    rows = _rows(rrr, "inverse_dynamics")
    Q = np.random.default_rng(0).uniform(-1.0, 1.0, (rows, 3))
    rrr.threads = 1
    expected = rrr.inverse_dynamics(Q, Q, Q)
    steady, growing = rrr.copy(), rrr.copy()
    steady.threads = 2
    errors: list[str] = []
    stop = threading.Event()

    def batches() -> None:
        while not stop.is_set():
            try:
                np.testing.assert_array_equal(steady.inverse_dynamics(Q, Q, Q), expected)
            except Exception as exc:  # noqa: BLE001 - any failure is the finding
                errors.append(repr(exc))

    thread = threading.Thread(target=batches)
    thread.start()
    try:
        for threads in range(3, 40):
            growing.threads = threads
            np.testing.assert_array_equal(growing.inverse_dynamics(Q, Q, Q), expected)
    finally:
        stop.set()
        thread.join()
    assert not errors, f"{len(errors)} failures, e.g. {errors[:2]}"
