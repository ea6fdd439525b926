"""The URDF sweep (tests/urdf_sweep.py): example-robot-data's URDFs against Pinocchio.

CI builds a representative subset (a serial arm, placeholder and continuous joints, unaligned axes, a
small leg tree, mimic fingers, and the refusals), asserts each one's classification and agreement
with Pinocchio to 1e-9, and parses every URDF to check that none ends in an exception other than a
DescriptionError. ROBODYN_SLOW=1 builds and checks every URDF (tiago_dual alone takes minutes and
gigabytes), each in its own process.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pytest

import urdf_sweep

# The classification each subset robot must get (see urdf_sweep.SUBSET for why each is there).
EXPECTED = {
    "ur_description/urdf/ur5_robot.urdf": "loads",
    "double_pendulum_description/urdf/double_pendulum.urdf": "loads",
    "double_pendulum_description/urdf/double_pendulum_continuous.urdf": "loads",
    "finger_edu_description/robots/finger_edu.urdf": "loads",
    "bolt_description/robots/bolt.urdf": "loads",
    "panda_description/urdf/panda.urdf": "loads",
    "hector_description/robots/quadrotor_base.urdf": "unsupported",
    "ur_description/urdf/ur3.urdf": "rejected",
}
DOCS = Path(__file__).resolve().parent.parent / "docs" / "urdf_sweep.md"
SLOW = os.environ.get("ROBODYN_SLOW") == "1"


def test_the_subset_is_the_expected_one():
    assert set(EXPECTED) == set(urdf_sweep.SUBSET)
    assert set(urdf_sweep.SUBSET) <= set(urdf_sweep.urdf_files())


@pytest.mark.parametrize("relative", urdf_sweep.SUBSET, ids=lambda r: Path(r).stem)
def test_subset(relative, cache_dir):
    record = urdf_sweep.sweep_one(relative, cache_dir)
    assert record.result != "error", record.traceback
    assert record.result == EXPECTED[relative], record
    if record.loads:
        assert record.agrees, record.errors
        assert set(record.errors) == {"M", "C", "g", "inverse", "forward"}
    else:
        assert record.reason


def test_no_urdf_ends_in_an_exception_at_parsing():
    """Every URDF parses, or is refused with a DescriptionError (default options, then the remedy)."""
    from codegen.description import parse_path
    from codegen.errors import DescriptionError
    from robodyn.options import BuildOptions

    root = urdf_sweep.robots_dir()
    outcomes = {}
    for relative in urdf_sweep.urdf_files():
        options: dict = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(4):
                try:
                    parse_path(root / relative, BuildOptions().replace(**options))
                    outcomes[relative] = "parses"
                    break
                except DescriptionError as exc:
                    outcomes[relative] = "refused"
                    remedy = urdf_sweep.merge(options, urdf_sweep._remedies(exc, root / relative))
                    if remedy == options:
                        break
                    options = remedy
    assert len(outcomes) == len(urdf_sweep.urdf_files()) >= 60
    # The Allegro hand's rounded inertias are what accept_invalid_inertia is for.
    assert outcomes["allegro_hand_description/urdf/allegro_right_hand.urdf"] == "parses"


def test_the_docs_table_lists_every_urdf():
    files = re.findall(r"^\| `([^`]+\.urdf)` \|", DOCS.read_text(encoding="utf-8"), re.MULTILINE)
    assert files == urdf_sweep.urdf_files(), "docs/urdf_sweep.md is stale: python tests/urdf_sweep.py --all " \
                                             "--markdown docs/urdf_sweep.md"


@pytest.mark.slow
@pytest.mark.skipif(not SLOW, reason="the whole sweep builds every URDF (hours of CPU): ROBODYN_SLOW=1")
@pytest.mark.parametrize("relative", urdf_sweep.urdf_files(), ids=lambda r: Path(r).stem)
def test_whole_sweep(relative, cache_dir):
    """Each URDF in its own process: no exception other than a DescriptionError; every robot that
    Pinocchio loads with a moving joint loads here (with a documented option at most) and agrees."""
    cache = os.environ.get("ROBODYN_CACHE_DIR") or str(cache_dir)  # a kept cache makes a re-run cheap
    record = urdf_sweep._run_worker(relative, cache, None, urdf_sweep.STATES)
    assert record.result != "error", f"{record.reason}\n{record.traceback}"
    if record.pinocchio.startswith("nv=") and record.pinocchio != "nv=0":
        assert record.loads, record
        assert record.agrees, record.errors
    if relative in EXPECTED:
        assert record.result == EXPECTED[relative], record
