"""A few cases of the closed-chain fuzzer in every run (``python tests/fuzz_loops.py`` runs many)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import fuzz_loops


def test_mutated_closed_chains_are_accepted_or_clearly_rejected():
    cases = [fuzz_loops.make_case(7, index) for index in range(12)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # each case runs in its own process
        outcomes = list(pool.map(fuzz_loops.run_case, cases))
    failures = [(index, outcome, detail) for index, (outcome, detail) in enumerate(outcomes)
                if outcome not in ("accepted", "rejected")]
    assert not failures, failures
    kinds = {outcome for outcome, _ in outcomes}
    assert kinds == {"accepted", "rejected"}, outcomes  # the mutations reach both sides
