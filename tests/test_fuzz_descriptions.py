"""The description fuzzer (tests/fuzz_descriptions.py): every mutated description ends in a result or one
DescriptionError, never another exception, never a hang.

CI mode runs ``CI_CASES`` cases and builds ``CI_CLI`` accepted ones through the command line; with
``ROBODYN_SLOW=1`` it runs ``SLOW_CASES`` and ``SLOW_CLI``. ``ROBODYN_FUZZ_SEED`` picks another seed.
A failure prints the counts per outcome, and for each failing case its seed, index, mutation and the
file its bytes were saved to (``python tests/fuzz_descriptions.py --seed S --replay INDEX`` re-runs it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_descriptions as fuzz  # noqa: E402

SLOW = os.environ.get("ROBODYN_SLOW") == "1"
CI_CASES, CI_CLI = 1000, 2
SLOW_CASES, SLOW_CLI = 20_000, 20
SEED = int(os.environ.get("ROBODYN_FUZZ_SEED", "1"))


def test_cases_are_reproducible():
    seeds = fuzz.seed_files()
    for index in (0, 1, 2, 3, 97, 1234):
        first, again = fuzz.make_case(SEED, index, seeds), fuzz.make_case(SEED, index, seeds)
        assert (first.data, first.mutation, first.source) == (again.data, again.mutation, again.source)
    assert fuzz.make_case(SEED, 5, seeds).data != fuzz.make_case(SEED + 1, 5, seeds).data or \
        fuzz.make_case(SEED, 6, seeds).data != fuzz.make_case(SEED + 1, 6, seeds).data


def test_every_seed_kind_and_level_is_used():
    seeds = fuzz.seed_files()
    folders = {path.parent.relative_to(fuzz.ROOT).as_posix() for path in seeds}
    assert {"robots", "tests/urdf", "tests/data", "tests/invalid_urdf"} <= folders
    cases = [fuzz.make_case(SEED, index, seeds) for index in range(400)]
    assert {case.level for case in cases} == set(fuzz.LEVELS)
    assert any(case.urdf for case in cases) and any(not case.urdf for case in cases)
    for level in fuzz.LEVELS:
        original = {case.source: (fuzz.ROOT / case.source).read_bytes() for case in cases}
        changed = [case for case in cases if case.level == level and case.data != original[case.source]]
        assert len(changed) > 0.8 * sum(case.level == level for case in cases), level


def test_harness_classifies_hangs_tracebacks_and_crashes():
    """The harness itself: a hang is killed at the time limit and the worker replaced; a traceback and a
    dead worker are failures; the cases after them still run."""
    items = [fuzz.Case(0, i, "byte", "x.yaml", "selftest", data)
             for i, data in enumerate((b"ok", b"hang", b"boom", b"crash", b"no", b"ok"))]
    results = {case.index: outcome for case, outcome, _, _ in fuzz.run_cases(items, 2, 3.0, target="selftest")}
    assert results == {0: "accepted", 1: "hang", 2: "traceback", 3: "crash", 4: "rejected", 5: "accepted"}


def test_fuzz_descriptions(tmp_path):
    cases, cli = (SLOW_CASES, SLOW_CLI) if SLOW else (CI_CASES, CI_CLI)
    report = fuzz.run(cases=cases, seed=SEED, workers=2, cli_cases=cli, out=tmp_path)
    print("\n" + report.table())
    assert sum(report.counts.values()) == cases
    assert report.ok, report.table() + "\n" + report.describe_failures()
    accepted = sum(n for (_, outcome), n in report.counts.items() if outcome == "accepted")
    assert accepted >= 0.03 * cases, "too few mutated descriptions get past the parser to test it deeply"


@pytest.mark.parametrize("name", ["rr.yaml", "pendulum.yaml"])
def test_unmutated_examples_are_accepted(name):
    """The fuzzer's baseline: the seeds it mutates from robots/ parse."""
    from codegen.description import parse_source

    path = fuzz.ROOT / "robots" / name
    parse_source(path.read_bytes(), str(path))
