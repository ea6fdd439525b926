"""A seeded structural fuzzer for closed-chain descriptions, through the model stage (issue 12).

The parse-stage fuzzer (``fuzz_descriptions.py``) mutates bytes, tokens and trees of every description; this
one makes *plausible* closed chains out of ``robots/biglide.yaml``, ``fivebar.yaml`` and ``fourbar.yaml``:
other links joined, cut-joint types and axes, loop points, actuated sets, joint types, axes, origins,
parents and masses, a second loop, other parameter values. Each case is parsed, derived (loop equations,
independent rows, mobility, closed form or not) and emitted as C, in a worker process with a time limit.
Outcomes: ``accepted`` (closed form or tree), ``rejected`` (a DescriptionError naming the file and a line),
and the failures ``traceback``, ``misreported``, ``hang``, ``crash``; every failure's YAML is saved.

    python tests/fuzz_loops.py --cases 500 --seed 1
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing
import random
import re
import sys
import traceback
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SEEDS = tuple(ROOT / "robots" / f"{name}.yaml" for name in ("biglide", "fivebar", "fourbar"))
TIME_LIMIT = 120.0


def mutate(document: dict, rng: random.Random) -> dict:
    """One to three structural changes of a closed-chain description."""
    d = copy.deepcopy(document)
    links = [j["link"].get("name", j["name"] + "_link") for j in d["joints"]] + ["base"]
    joints = [j["name"] for j in d["joints"]]
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(12)
        loop = d["loops"][0]
        joint = rng.choice(d["joints"])
        if kind == 0:
            loop["links"] = rng.sample(links, 2)
        elif kind == 1:
            loop["type"] = rng.choice(["revolute", "prismatic"])
        elif kind == 2:
            loop["axis"] = rng.choice([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, -1], [1, 1, 0], [0.0, 0.0, 2.0]])
        elif kind == 3:
            loop["points"] = [[rng.choice([0, 0.1, -0.3, 1e-9, 5.0]), rng.choice([0, 0.2]), rng.choice([0, 0.1])]
                              for _ in range(2)]
        elif kind == 4:
            d["actuated"] = rng.sample(joints, rng.randint(1, len(joints)))
        elif kind == 5:
            joint["type"] = rng.choice(["revolute", "prismatic"])
        elif kind == 6:
            joint["axis"] = rng.choice([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, -1], [1, 1, 1]])
        elif kind == 7:
            joint["link"]["mass"] = rng.choice([0, 1e-12, 1e6, 3])
        elif kind == 8:
            joint["origin"] = {"xyz": [rng.uniform(-1, 1), rng.uniform(-1, 1), rng.choice([0, 0.3])],
                               "rpy": [0, 0, rng.choice([0, 1.0])]}
        elif kind == 9:
            d["loops"].append(dict(loop, name=loop["name"] + "_2"))
        elif kind == 10:
            earlier = joints[:d["joints"].index(joint)]
            joint["parent"] = rng.choice(["base"] + earlier)
        else:
            for key in d.get("parameters", {}):
                if rng.random() < 0.3:
                    d["parameters"][key] = rng.choice([0.0, 1e-6, 10.0, -0.2, 0.5])
    return d


def make_case(seed: int, index: int) -> str:
    rng = random.Random(f"{seed}:{index}")
    documents = [yaml.safe_load(path.read_text()) for path in SEEDS]
    return yaml.safe_dump(mutate(rng.choice(documents), rng))


def _run(text: str, queue) -> None:
    sys.path.insert(0, str(ROOT))
    from codegen.description.parse import parse_text
    from codegen.emit.sources import emit
    from codegen.errors import DescriptionError
    from codegen.model import derive_model
    from codegen.model.routines import define_routines
    from robodyn.options import BuildOptions

    try:
        model = derive_model(parse_text(text, "case.yaml"), BuildOptions())
        emit(define_routines(model, BuildOptions()))
        queue.put(("accepted", "closed form" if model.closed_chain.closed_form else "tree"))
    except DescriptionError as error:
        lines_of_message = str(error).splitlines()
        # A combined error starts with "N problems:", then one problem per line.
        first = lines_of_message[1].strip() if re.match(r"\d+ problems", lines_of_message[0]) else lines_of_message[0]
        match = re.match(r"case\.yaml:(\d+): ", first)
        lines = text.count("\n") + 1
        ok = match is not None and 1 <= int(match.group(1)) <= lines
        queue.put(("rejected" if ok else "misreported", first[:200]))
    except BaseException:  # noqa: BLE001 - anything else is a finding
        queue.put(("traceback", traceback.format_exc()))


def run_case(text: str, time_limit: float = TIME_LIMIT) -> tuple[str, str]:
    queue = multiprocessing.get_context("spawn").Queue()
    worker = multiprocessing.get_context("spawn").Process(target=_run, args=(text, queue))
    worker.start()
    worker.join(time_limit)
    if worker.is_alive():
        worker.kill()
        worker.join()
        return "hang", ""
    return queue.get() if not queue.empty() else ("crash", f"exit code {worker.exitcode}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="fuzz-loops-failures", help="where failing cases are saved")
    args = parser.parse_args(argv)
    counts: dict[str, int] = {}
    for index in range(args.cases):
        text = make_case(args.seed, index)
        outcome, detail = run_case(text)
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome not in ("accepted", "rejected"):
            out = Path(args.out)
            out.mkdir(exist_ok=True)
            (out / f"case-{args.seed}-{index}.yaml").write_text(text)
            print(f"case {index}: {outcome}\n{detail[-1500:]}")
    print(counts)
    return 0 if set(counts) <= {"accepted", "rejected"} else 1


if __name__ == "__main__":
    sys.exit(main())
