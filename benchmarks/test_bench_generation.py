"""Generation time: description -> derived model -> C -> compiled, self-checked module.

    pytest benchmarks/test_bench_generation.py -n 0 --benchmark-enable -s

Each case is one full build by the generator's pipeline (``codegen.pipeline.build`` with the
case's ``BuildOptions``, ``force=True``, a fresh cache directory): the time of every stage
(parse, derive, emit with its CSE share, compile, self-check) goes to ``extra_info`` and is
printed. The goal for the Franka Panda (7 joints, fingers locked, all routines) is 20 s on the
2-core machine this project is built on; compilation, which runs Cython and two C compilers
in parallel, is most of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen.pipeline import build as pipeline_build
from robodyn.options import BuildOptions

ROBOTS = Path(__file__).resolve().parent.parent / "robots"


def _example_robot_data(relative: str) -> Path:
    pinocchio = pytest.importorskip("pinocchio")
    for parent in Path(pinocchio.__file__).resolve().parents:
        candidate = parent / "cmeel.prefix" / "share" / "example-robot-data" / "robots" / relative
        if candidate.is_file():
            return candidate
    pytest.skip(f"example-robot-data is not installed ({relative} not found)")


CASES = {
    "rr (lagrange)": (lambda: ROBOTS / "rr.yaml", BuildOptions(method="lagrange")),
    "rrr (lagrange)": (lambda: ROBOTS / "rrr.yaml", BuildOptions(method="lagrange")),
    "rrr (recursive)": (lambda: ROBOTS / "rrr.yaml", BuildOptions(method="recursive")),
    "puma560 (recursive)": (lambda: ROBOTS / "puma560.yaml", BuildOptions(method="recursive")),
    "ur5 (recursive)": (lambda: _example_robot_data("ur_description/urdf/ur5_robot.urdf"),
                        BuildOptions(method="recursive")),
    "panda (recursive)": (lambda: _example_robot_data("panda_description/urdf/panda.urdf"),
                          BuildOptions(method="recursive",
                                       lock={"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0})),
}


@pytest.mark.parametrize("case", list(CASES))
def test_generation_time(case, benchmark, tmp_path):
    path_of, options = CASES[case]
    path = path_of()
    benchmark.group = "generation"
    counter = iter(range(1000))

    def build():
        return pipeline_build(path, options, cache_dir=tmp_path / str(next(counter)), force=True)

    built = benchmark.pedantic(build, rounds=1, iterations=1)
    assert not built.cache_hit
    assert built.selfcheck["passed"]
    stages = {k: round(v, 2) for k, v in built.timings.items()}
    benchmark.extra_info.update(stages)
    benchmark.extra_info["operations"] = sum(built.manifest["operation_counts"].values())
    print(f"\n{case}: " + ", ".join(f"{k} {v} s" for k, v in stages.items())
          + f"; {benchmark.extra_info['operations']} operations")
