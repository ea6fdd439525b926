"""The performance table: robodyn against Pinocchio on the Franka Panda and the UR5, in one command.

Usage::

    python benchmarks/table.py                           # Panda and UR5, every section (a few minutes)
    python benchmarks/table.py --robot ur5 --quick       # fewer repeats: a smoke test
    python benchmarks/table.py --no-callgrind --no-build # Python-level timings only
    python benchmarks/table.py --markdown perf.md --json perf.json

For each robot (``--robot panda``: example-robot-data's panda.urdf with both fingers locked at 0;
``--robot ur5``: ur5_robot.urdf; ``--robot all``, the default: both) and each of the five compared
routines, inverse dynamics (Pinocchio ``rnea``), M (``crba``), forward dynamics (``aba``), C
(``computeCoriolisMatrix``) and g (``computeGeneralizedGravity``):

1. agreement: ours against Pinocchio at random states within the joint limits, max |ours - Pinocchio|
   / max(1, max |Pinocchio|) <= 1e-9 (the URDF's joint damping, which Pinocchio's algorithms leave out,
   is taken off ours; Pinocchio's crba fills the upper triangle only: it is symmetrized);
2. time per call from Python (µs): ours in three call forms, ``out=`` by keyword (``robot.g(q, out=o)``),
   ``out`` positional (``robot.g(q, o)``; inverse and forward dynamics pass None for the optional wrench h:
   ``robot.inverse_dynamics(q, qd, qdd, None, o)``) and allocating (``robot.g(q)``), Pinocchio (its binding
   writes into its ``data``) and, when importable, the Robotics Toolbox for Python; interleaved rounds, in
   each round every implementation runs a short ``timeit.repeat`` (best of the burst), the median over the
   rounds is reported; ratios Pinocchio / ours. (CPython 3.11 and 3.12 run both forms on their specialised
   call path: robodyn_method.h);
3. instructions per call under valgrind callgrind: ours with ``out=`` and allocating
   (``callgrind_calls.py``), ours with ``out`` positional (a child of this script, the same loop with the
   positional call and the same inputs): total, kernel = the generated ``<robot>_<routine>_kernel``,
   overhead = total - kernel; Pinocchio's (total per call from Python, and its C++ algorithm, e.g.
   ``pinocchio::rnea<...>``, inclusive), the C-level ratio Pinocchio C++ / our kernel;
4. the operation counts of the generated routines (the build manifest's ``operation_counts``);
5. generation time: fresh builds of each robot into a temporary cache (``codegen.pipeline.build``,
   ``force=True``; BUILD_REPEATS of them, each in a new Python process, the median reported) by default, or
   with ``--no-build`` the stage times recorded in the cache entry's
   manifest (``--quick`` implies ``--no-build`` unless ``--build`` is given);
6. batch throughput: inverse dynamics on 10^5 random states with ``out=``, one thread against every
   usable core when the runtime has ``robot.threads`` (each setting's fastest round, and the median rounds' speed-up);

then the issue's goals, each marked met or unmet: the Python-level ratios on our fastest call form (named;
the ``out=`` keyword form's ratio beside it), the overhead goal on each call form, the Panda's fresh build
time (when a fresh build was measured). Plain-text tables go to stdout, progress to stderr; ``--markdown``
writes the same tables as GitHub Markdown (for the README).
Without Pinocchio or valgrind the columns that need them are skipped with a message (exit status 0).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from dataclasses import asdict, dataclass, field
from pathlib import Path

import callgrind_calls  # beside this file: on sys.path as the script's directory (and under pytest, rootdir-relative)
import numpy as np

TOLERANCE = 1e-9  # agreement: max |ours - Pinocchio| / max(1, max |Pinocchio|)
BATCH_ROWS = 100_000
REPO = Path(__file__).resolve().parent.parent
#: Fresh builds per robot for the generation times: the machine is shared, so the table reports the median one.
BUILD_REPEATS = 3
OVERHEAD_GOAL = 500  # instructions per call outside the kernel (every call form: out= keyword, positional, allocating), Panda
BUILD_GOAL_S = 5.0  # a fresh build of the Panda, seconds (codegen.pipeline.build's total_s)
C_LEVEL_GOAL = 3.0  # Pinocchio C++ instructions / our kernel's
THREADS_GOAL = 1.8  # batch speed-up, every usable core against one thread
GOALS_ROBOT = "panda"  # the robot the instruction and build-time goals are stated for
OURS_FORMS = {"ours_out": "out=", "ours_positional": "out (positional)", "ours_alloc": "alloc"}  # timing keys


@dataclass(frozen=True)
class RobotSpec:
    """A compared robot: its example-robot-data URDF and the joints locked (at 0)."""

    key: str
    urdf: str
    lock: tuple[str, ...] = ()

    def lock_map(self) -> dict[str, float]:
        return {name: 0.0 for name in self.lock}


ROBOTS = {
    "panda": RobotSpec("panda", "panda_description/urdf/panda.urdf", ("panda_finger_joint1", "panda_finger_joint2")),
    "ur5": RobotSpec("ur5", "ur_description/urdf/ur5_robot.urdf"),
}


@dataclass(frozen=True)
class Compared:
    """A compared routine: our method, Pinocchio's function, the arguments both take after (model, data),
    the Python-level goal (Pinocchio time / ours), the issue's kernel instruction goal (Panda), the
    Robotics Toolbox's method, and Pinocchio's C++ algorithm: the functions to look for under callgrind,
    the first one present counting (the binding may inline the public template into its own wrapper)."""

    label: str
    method: str
    pinocchio: str
    arguments: tuple[str, ...]
    python_goal: float
    kernel_goal: int
    rtb: str
    cpp: tuple[str, ...]

    @property
    def entry(self):
        """Our routine table's entry (robodyn.routines.TABLE) of this method."""
        from robodyn.routines import TABLE

        return next(r for r in TABLE if r.method == self.method)

    @property
    def name(self) -> str:
        """The generated C routine (kernel symbol <robot>_<name>_kernel, operation count)."""
        return self.entry.name

    @property
    def optional(self) -> int:
        """How many optional arguments (e.g. the wrench h) sit between the required ones and ``out``: the
        positional call passes None for each."""
        return sum(argument.optional for argument in self.entry.arguments)

    def call(self, receiver: str, arguments: list[str], form: str) -> str:
        """Our call's source text: ``form`` ours_out (``r.g(q, out=o)``; ``out`` is the last name of
        ``arguments``), ours_positional (``r.g(q, o)``, ``r.inverse_dynamics(q, qd, qdd, None, o)``) or
        ours_alloc (``r.g(q)``; no ``out`` in ``arguments``)."""
        if form == "ours_alloc":
            return f"{receiver}.{self.method}({', '.join(arguments)})"
        *inputs, out = arguments
        if form == "ours_out":
            return f"{receiver}.{self.method}({', '.join([*inputs, f'out={out}'])})"
        if form == "ours_positional":
            return f"{receiver}.{self.method}({', '.join([*inputs, *['None'] * self.optional, out])})"
        raise ValueError(f"unknown call form {form!r}")


def _cpp(function: str, *more: str) -> tuple[str, ...]:
    return (f"pinocchio::{function}", f"pinocchio::impl::{function}", *more)


ROUTINES = (
    Compared("ID", "inverse_dynamics", "rnea", ("q", "qd", "qdd"), 6.0, 1500, "rne", _cpp("rnea")),
    # Pinocchio 3+: the binding's crba_proxy calls crba, inlined down to impl::crbaLocalConvention (the default).
    Compared("M", "M", "crba", ("q",), 6.0, 1200, "inertia", _cpp("crba", "pinocchio::impl::crbaLocalConvention")),
    Compared("FD", "forward_dynamics", "aba", ("q", "qd", "tau"), 6.0, 3000, "accel", _cpp("aba")),
    Compared("C", "C", "computeCoriolisMatrix", ("q", "qd"), 10.0, 3000, "coriolis", _cpp("computeCoriolisMatrix")),
    Compared("g", "g", "computeGeneralizedGravity", ("q",), 6.0, 500, "gravload", _cpp("computeGeneralizedGravity")),
)


@dataclass(frozen=True)
class Settings:
    """How long to measure (``--quick``: a smoke test)."""

    rounds: int = 9  # interleaved timing rounds
    burst: int = 3  # timeit.repeat loops per implementation and round (the round keeps the best)
    loop_seconds: float = 0.02  # the length of one timeit loop
    states: int = 50  # agreement states
    batch_rows: int = BATCH_ROWS
    batch_rounds: int = 15
    calls: int = 20000  # callgrind calls per loop

    @classmethod
    def quick(cls) -> Settings:
        return cls(rounds=3, burst=2, loop_seconds=0.003, states=5, batch_rows=10_000, batch_rounds=2,
                   calls=2000)


@dataclass
class Subject:
    """One loaded robot: ours, Pinocchio's reduced model of the same URDF (None without Pinocchio), and a
    fixed state within the joint limits for the timings."""

    spec: RobotSpec
    path: Path
    robot: object
    model: object | None
    state: dict[str, np.ndarray]


def say(message: str) -> None:
    print(f"[table] {message}", file=sys.stderr, flush=True)


def import_pinocchio():
    """The pinocchio module, or None (the caller reports the skip)."""
    try:
        import pinocchio
    except ImportError:
        return None
    return pinocchio


def pinocchio_model(pinocchio, path: Path, locked: tuple[str, ...]):
    """Pinocchio's model of the URDF, the locked joints removed at 0 (as benchmarks/conftest.py)."""
    model = pinocchio.buildModelFromUrdf(str(path))
    if locked:
        model = pinocchio.buildReducedModel(model, [model.getJointId(name) for name in locked],
                                            pinocchio.neutral(model))
    return model


def random_states(n: int, model, count: int, seed: int) -> dict[str, np.ndarray]:
    """``count`` states of ``n`` joints, arrays of shape (count, n): q within the joint limits of Pinocchio's
    model if given, clipped to +-pi; qd, qdd, tau uniform."""
    rng = np.random.default_rng(seed)
    if model is not None:
        lower, upper = np.maximum(model.lowerPositionLimit, -np.pi), np.minimum(model.upperPositionLimit, np.pi)
    else:
        lower, upper = np.full(n, -np.pi), np.full(n, np.pi)
    return {"q": rng.uniform(lower, upper, (count, n)), "qd": rng.uniform(-2.0, 2.0, (count, n)),
            "qdd": rng.uniform(-5.0, 5.0, (count, n)), "tau": rng.uniform(-20.0, 20.0, (count, n))}


def one_state(states: dict[str, np.ndarray], row: int) -> dict[str, np.ndarray]:
    return {name: values[row] for name, values in states.items()}


# ---------------------------------------------------------------------------------------------- machine


def machine_info() -> dict:
    """CPU model, core counts and versions (no date)."""
    import robodyn

    cpu = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    pinocchio = import_pinocchio()
    valgrind = shutil.which("valgrind")
    valgrind_version = None
    if valgrind:
        version = subprocess.run([valgrind, "--version"], capture_output=True, text=True, check=False)
        valgrind_version = version.stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "numpy": np.__version__, "robodyn": robodyn.__version__,
            "pinocchio": getattr(pinocchio, "__version__", None), "valgrind": valgrind_version,
            "load_at_start": os.getloadavg()[0]}


# ---------------------------------------------------------------------------------------------- loading


def load_subject(spec: RobotSpec, cache_dir: str | None, pinocchio) -> Subject:
    import robodyn

    path = robodyn.example_robot_data(spec.urdf)
    say(f"loading {spec.key} (built on first use)")
    robot = robodyn.load(path, cache_dir=cache_dir, lock=spec.lock_map(), verbose=False)
    model = None
    if pinocchio is not None:
        model = pinocchio_model(pinocchio, path, spec.lock)
        names = [model.names[i] for i in range(1, model.njoints)]
        if names != list(robot.joint_names):
            raise SystemExit(f"{spec.key}: Pinocchio's joints {names} are not ours {list(robot.joint_names)}")
    state = one_state(random_states(robot.n, model, 1, 12345), 0)
    return Subject(spec, path, robot, model, state)


# ---------------------------------------------------------------------------------------------- 1. agreement


def _friction(model, qd):
    """The URDF's joint damping and friction as Pinocchio reads them (its algorithms leave them out)."""
    return model.damping * qd + model.friction * np.sign(qd)


def ours_and_pinocchio(routine: Compared, subject: Subject, pinocchio, data, s: dict):
    """(ours, Pinocchio's) values of one routine at one state, the same quantity on both sides."""
    robot, model = subject.robot, subject.model
    friction = _friction(model, s["qd"])
    if routine.method == "inverse_dynamics":
        return (robot.inverse_dynamics(s["q"], s["qd"], s["qdd"]) - friction,
                pinocchio.rnea(model, data, s["q"], s["qd"], s["qdd"]))
    if routine.method == "forward_dynamics":
        return (robot.forward_dynamics(s["q"], s["qd"], s["tau"] + friction),
                pinocchio.aba(model, data, s["q"], s["qd"], s["tau"]))
    if routine.method == "M":
        upper = np.triu(pinocchio.crba(model, data, s["q"]))
        return robot.M(s["q"]), upper + np.triu(upper, 1).T
    arguments = [s[name] for name in routine.arguments]
    return getattr(robot, routine.method)(*arguments), getattr(pinocchio, routine.pinocchio)(model, data, *arguments)


def check_agreement(subject: Subject, pinocchio, states: int) -> dict[str, float]:
    """Worst scaled error per routine (method -> max |ours - Pinocchio| / max(1, max |Pinocchio|))."""
    data = subject.model.createData()
    worst = {routine.method: 0.0 for routine in ROUTINES}
    values = random_states(subject.robot.n, subject.model, states, 0)
    for s in (one_state(values, row) for row in range(states)):
        for routine in ROUTINES:
            ours, theirs = ours_and_pinocchio(routine, subject, pinocchio, data, s)
            theirs = np.asarray(theirs)
            error = float(np.abs(ours - theirs).max() / max(1.0, float(np.abs(theirs).max())))
            worst[routine.method] = max(worst[routine.method], error)
    return worst


# ---------------------------------------------------------------------------------------------- 2. timings


def make_timer(statement: str, names: dict) -> timeit.Timer:
    """A timeit.Timer of ``statement`` (our own text, compiled by timeit) whose names are locals of the
    timing function (assigned in its setup), not globals."""
    setup = "; ".join(f"{name} = _names[{name!r}]" for name in names) or "pass"
    return timeit.Timer(statement, setup=setup, globals={"_names": names})


def loop_number(timer: timeit.Timer, seconds: float) -> int:
    """Calls per timeit loop so that a loop lasts about ``seconds``."""
    number = 10
    while True:
        elapsed = timer.timeit(number)
        if elapsed >= 0.002 or number >= 10**7:
            return max(1, int(number * seconds / max(elapsed, 1e-9)))
        number *= 10


def time_interleaved(timers: dict[str, timeit.Timer], settings: Settings) -> dict[str, dict]:
    """name -> {"median_us", "rounds_us", "number"}: every round runs each timer's burst in turn."""
    numbers = {name: loop_number(timer, settings.loop_seconds) for name, timer in timers.items()}
    rounds: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(settings.rounds):
        for name, timer in timers.items():
            best = min(timer.repeat(repeat=settings.burst, number=numbers[name]))
            rounds[name].append(best / numbers[name] * 1e6)
    return {name: {"median_us": statistics.median(values), "rounds_us": values, "number": numbers[name]}
            for name, values in rounds.items()}


def rtb_model(spec: RobotSpec):
    """(the Robotics Toolbox's model of the robot, None) or (None, why it is skipped)."""
    try:
        import roboticstoolbox as rtb
    except ImportError as exc:
        return None, f"roboticstoolbox is not importable ({exc}); pip install roboticstoolbox-python to add it"
    makers = {"panda": ("DH", "Panda"), "ur5": ("DH", "UR5")}
    family, name = makers[spec.key]
    try:
        return getattr(getattr(rtb.models, family), name)(), None
    except (AttributeError, ImportError, TypeError, ValueError) as exc:
        return None, f"roboticstoolbox has no usable models.{family}.{name} ({exc})"


def check_positional(routine: Compared, robot, inputs: list[np.ndarray]) -> None:
    """Make sure the positional call form means what the table says: ``robot.<method>(*inputs, None..., out)``
    fills ``out`` with the keyword call's value and returns it (SystemExit otherwise, e.g. if the method's
    signature changed)."""
    expected = getattr(robot, routine.method)(*inputs)
    out = np.full_like(expected, np.nan)
    try:
        returned = getattr(robot, routine.method)(*inputs, *[None] * routine.optional, out)
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"{routine.method}: the positional out form fails ({exc}); see help(robot.{routine.method})")
    if returned is not out or not np.array_equal(out, expected):
        raise SystemExit(f"{routine.method}: the positional out form does not fill out (see help(robot."
                         f"{routine.method}))")


def time_calls(subject: Subject, pinocchio, rtb, settings: Settings, messages: list[str]) -> dict[str, dict]:
    """method -> implementation -> timing (``time_interleaved``); implementations: ours_out, ours_positional,
    ours_alloc, pinocchio, rtb (those available), plus "loop" (an empty statement: the timing loop's own cost)."""
    robot, s = subject.robot, subject.state
    results = {}
    for routine in ROUTINES:
        inputs = list(routine.arguments)
        check_positional(routine, robot, [s[a] for a in inputs])
        names = {"r": robot, "o": getattr(robot, routine.method)(*[s[a] for a in inputs]).copy(),
                 **{a: s[a] for a in inputs}}
        timers = {form: make_timer(routine.call("r", inputs + (["o"] if form != "ours_alloc" else []), form), names)
                  for form in OURS_FORMS}
        if pinocchio is not None:
            timers["pinocchio"] = make_timer(f"pin.{routine.pinocchio}(model, data, {', '.join(inputs)})",
                                             {"pin": pinocchio, "model": subject.model,
                                              "data": subject.model.createData(), **names})
        if rtb is not None:
            call, namespace = f"m.{routine.rtb}({', '.join(inputs)})", {"m": rtb, **names}
            try:  # its own models may not compute everything (the UR5's DH model has a singular mass matrix)
                getattr(rtb, routine.rtb)(*[names[a] for a in inputs])
            except Exception as exc:  # noqa: BLE001 -- any failure of the third-party call only drops its cell
                messages.append(f"Robotics Toolbox for Python: {subject.spec.key} {routine.label} skipped, "
                                f"{call} fails ({type(exc).__name__}: {exc})")
            else:
                timers["rtb"] = make_timer(call, namespace)
        timers["loop"] = make_timer("pass", {})
        say(f"timing {subject.spec.key} {routine.label}")
        results[routine.method] = time_interleaved(timers, settings)
    return results


def best_form(timing: dict) -> str:
    """Our fastest call form in one routine's timings (a key of OURS_FORMS)."""
    return min((form for form in OURS_FORMS if form in timing), key=lambda form: timing[form]["median_us"])


# ---------------------------------------------------------------------------------------------- 3. instructions


def callgrind_ours(subject: Subject, calls: int) -> dict[str, dict] | None:
    """method -> {"out": row, "alloc": row} (keyword out= and allocating calls) of callgrind_calls.py (total, kernel per call) for this robot's
    module; None if the run failed (its output goes to stderr)."""
    module = Path(subject.robot.extension.__file__).resolve()
    with tempfile.TemporaryDirectory(prefix="robodyn-table-") as tmp:
        out = Path(tmp) / "ours.json"
        argv = ["--module", str(module), "--calls", str(calls), "--json", str(out)]
        for routine in ROUTINES:
            argv += ["--only", routine.method]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = callgrind_calls.main(argv)
        if status != 0 or not out.is_file():
            print(printed.getvalue(), file=sys.stderr)
            return None
        rows = json.loads(out.read_text())["rows"]
    result: dict[str, dict] = {}
    for row in rows:
        if row["rows"]:
            continue  # callgrind_calls' batch case
        kind = "out" if "out=" in row["call"] else "alloc"
        result.setdefault(row["method"], {})[kind] = {"total": row["total"], "kernel": row["kernel"],
                                                      "overhead": row["total"] - row["kernel"],
                                                      "binding": row["binding"]}
    return result


def positional_loops(method: str, n_arguments: int, n_none: int):
    """(call loop, empty loop) of the positional out form: callgrind_calls._loops' plain local-variable
    bytecode (the same parameters, so the same empty loop) around ``r.<method>(a0, ..., None, ..., out)``,
    ``n_none`` literal Nones for the optional arguments before ``out``."""
    parameters = ", ".join(["r"] + [f"a{i}" for i in range(n_arguments)] + ["out", "k"])
    arguments = ", ".join([f"a{i}" for i in range(n_arguments)] + ["None"] * n_none + ["out"])
    namespace: dict = {}
    exec(f"def call_loop({parameters}):\n    for _ in range(k):\n        r.{method}({arguments})\n"  # noqa: S102 (our text)
         f"def empty_loop({parameters}):\n    for _ in range(k):\n        pass\n", namespace)
    return namespace["call_loop"], namespace["empty_loop"]


def _measure_loops(dumps: list, method: str, call_loop, empty_loop, a: tuple, calls: int) -> None:
    """Under callgrind: warm up, then the empty loop and the call loop, each closed by a marker call (a dump);
    ``dumps`` records what each dump holds."""
    call_loop(*a, 200)  # warm up: quickening, allocator pools, first-call binding
    empty_loop(*a, 200)
    os.getppid()  # dump: everything before (start-up, warm-up)
    dumps.append(None)
    empty_loop(*a, calls)
    os.getppid()
    dumps.append([method, "empty"])
    call_loop(*a, calls)
    os.getppid()
    dumps.append([method, "call"])


def callgrind_child(spec_file: str) -> int:
    """Under callgrind: each routine's empty loop and call loop between marker calls, for Pinocchio
    (``"kind": "pinocchio"``: ``pinocchio.<function>(model, data, ...)``) or for ours with ``out`` positional
    (``"kind": "ours_positional"``: the module's routines, the inputs of callgrind_calls.py's out= cases)."""
    spec = json.loads(Path(spec_file).read_text())
    dumps: list = []
    record: dict = {"dumps": dumps}
    if spec["kind"] == "pinocchio":
        import pinocchio

        model = pinocchio_model(pinocchio, Path(spec["urdf"]), tuple(spec["lock"]))
        data = model.createData()
        state = one_state(random_states(model.nv, model, 1, 12345), 0)
        for routine in ROUTINES:
            arguments = (model, data, *[state[a] for a in routine.arguments])
            # f(a0, ..., ak) with f = pinocchio.<function>: the same loop bytecode as our calls' measurement.
            call_loop, empty_loop = callgrind_calls._loops(routine.pinocchio, len(arguments), False, True)
            a = (getattr(pinocchio, routine.pinocchio), *arguments, None)
            _measure_loops(dumps, routine.method, call_loop, empty_loop, a, spec["calls"])
    else:
        from robodyn.cache import import_extension
        from robodyn.robot import Robot

        path = Path(spec["module"])
        robot = Robot.from_extension(import_extension(path.name.split(".")[0], path))
        record["robot"] = robot.name
        # callgrind_calls' cases for the same routines: the same inputs and out arrays as its out= loops.
        cases = {case["routine"].method: case
                 for case in callgrind_calls.cases(robot, only=[routine.method for routine in ROUTINES])
                 if case["out"] is not None and not case["rows"]}
        for routine in ROUTINES:
            case = cases[routine.method]
            call_loop, empty_loop = positional_loops(routine.method, len(case["arguments"]), routine.optional)
            _measure_loops(dumps, routine.method, call_loop, empty_loop, (robot, *case["arguments"], case["out"]),
                           spec["calls"])
    Path(spec["labels"]).write_text(json.dumps(record))
    return 0


def run_callgrind_child(spec: dict, calls: int, kernel_of, binding: bool = False) -> dict[str, dict] | None:
    """Run ``callgrind_child`` under valgrind: method -> {"total", "kernel", "symbol"} per call, total =
    (call loop - empty loop) / calls, (kernel Ir, symbol) = ``kernel_of(method, dump of the call loop, labels)``
    (None: no kernel found) divided by calls; with ``binding`` also robodyn's C besides the kernel (callgrind_calls'
    ``binding``); None if the run failed (its output goes to stderr)."""
    valgrind = shutil.which("valgrind")
    with tempfile.TemporaryDirectory(prefix=f"robodyn-table-{spec['kind']}-") as tmp:
        tmp = Path(tmp)
        spec_file, labels = tmp / "spec.json", tmp / "labels.json"
        spec_file.write_text(json.dumps(dict(spec, calls=calls, labels=str(labels))))
        command = [valgrind, "--tool=callgrind", f"--callgrind-out-file={tmp / 'cg.out'}",
                   f"--dump-before={callgrind_calls.MARKER}", sys.executable, str(Path(__file__).resolve()),
                   "--callgrind-child", str(spec_file)]
        result = subprocess.run(command, capture_output=True, text=True, check=False,
                                env=dict(os.environ, PYTHONHASHSEED="0"))
        if result.returncode != 0 or not labels.is_file():
            print(result.stdout + result.stderr, file=sys.stderr)
            return None
        record = json.loads(labels.read_text())
        dumps = record["dumps"]
        # The i-th marker call of the child wrote cg.out.<i + 1>: what ran since the previous marker.
        files = sorted(tmp.glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        if len(files) < len(dumps):
            print(f"expected {len(dumps)} callgrind dumps, found {len(files)}", file=sys.stderr)
            return None
        loops = {tuple(what): dump for dump, what in zip(files, dumps) if what is not None}
        results = {}
        for routine in ROUTINES:
            empty, full = loops[routine.method, "empty"], loops[routine.method, "call"]
            kernel = kernel_of(routine, full, record)
            results[routine.method] = {
                "total": (callgrind_calls._total(full) - callgrind_calls._total(empty)) / calls,
                "kernel": None if kernel is None else kernel[0] / calls,
                "symbol": None if kernel is None else kernel[1]}
            if binding and kernel is not None:
                trampoline = callgrind_calls._inclusive(full, callgrind_calls.BINDING_SYMBOL, absent=None)
                results[routine.method]["binding"] = None if trampoline is None else (trampoline - kernel[0]) / calls
    return results


def callgrind_positional(subject: Subject, calls: int) -> dict[str, dict] | None:
    """method -> {"total", "kernel", "overhead"} per call of ours with ``out`` positional (this robot's module,
    callgrind_calls.py's inputs); None if the run failed."""
    module = Path(subject.robot.extension.__file__).resolve()

    def kernel_of(routine, dump, record):
        symbol = f"{record['robot']}_{routine.name}_kernel"
        return callgrind_calls._inclusive(dump, symbol), symbol

    found = run_callgrind_child({"kind": "ours_positional", "module": str(module)}, calls, kernel_of, binding=True)
    if found is None:
        return None
    return {method: {"total": row["total"], "kernel": row["kernel"], "overhead": row["total"] - row["kernel"],
                     "binding": row.get("binding")}
            for method, row in found.items()}


_ANNOTATE_LINE = re.compile(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?[^:\s]*:(.*)")


def inclusive_functions(dump: Path) -> list[tuple[int, str]]:
    """(inclusive Ir, demangled function) of every function of a callgrind dump (callgrind_annotate)."""
    tool = shutil.which("callgrind_annotate")
    if tool is None:
        return []
    text = subprocess.run([tool, "--inclusive=yes", "--threshold=100", str(dump)], capture_output=True,
                          text=True, check=False).stdout
    functions = []
    for line in text.splitlines():
        match = _ANNOTATE_LINE.match(line)
        if match:
            name = re.sub(r"\s+\[[^\]]*\]$", "", match.group(2).strip())  # the object file
            functions.append((int(match.group(1).replace(",", "")), name))
    return functions


def pinocchio_kernel(functions: list[tuple[int, str]], candidates: tuple[str, ...]) -> tuple[int, str] | None:
    """(inclusive Ir, symbol from its name on, without the return type) of the first candidate C++ function
    (``pinocchio::rnea`` matches ``... pinocchio::rnea<double, 0, ...>(...)``), None if none is present."""
    for candidate in candidates:
        pattern = re.compile(r"(?:^|[\s&*])(" + re.escape(candidate) + "<.*)")
        found = [(ir, match.group(1)) for ir, name in functions if (match := pattern.search(name))]
        if found:
            return max(found)
    return None


def callgrind_pinocchio(subject: Subject, calls: int) -> dict[str, dict] | None:
    """method -> {"total", "kernel", "symbol"} per call of Pinocchio's Python binding and its C++ algorithm."""
    return run_callgrind_child({"kind": "pinocchio", "urdf": str(subject.path), "lock": list(subject.spec.lock)},
                               calls, lambda routine, dump, record: pinocchio_kernel(inclusive_functions(dump),
                                                                                     routine.cpp))


# ---------------------------------------------------------------------------------------------- 4., 5. generation


def operation_counts(subject: Subject) -> dict[str, int | None]:
    """method -> the generator's operation count of its routine (manifest), None if not recorded."""
    counts = subject.robot.manifest.get("operation_counts", {})
    return {routine.method: counts.get(routine.name) for routine in ROUTINES}


def generation_times(subject: Subject, fresh: bool) -> dict:
    """{"source", "timings" (stage -> s), "operations"}: fresh builds into temporary caches (the median one), or the
    stage times the cache entry's manifest recorded when it was built (whoever built it, whatever the machine's load)."""
    if not fresh:
        manifest = subject.robot.manifest
        return {"source": "recorded in the cache entry's manifest", "timings": dict(manifest.get("timings", {})),
                "operations": sum(manifest.get("operation_counts", {}).values())}
    load = os.getloadavg()[0]
    builds = []
    for attempt in range(BUILD_REPEATS):
        say(f"building {subject.spec.key} fresh (generation time, {attempt + 1} of {BUILD_REPEATS})")
        with tempfile.TemporaryDirectory(prefix="robodyn-table-build-") as tmp:
            builds.append(_build_in_child(subject.path, subject.spec.lock_map(), Path(tmp)))
    totals = [b["timings"]["total_s"] for b in builds]
    built = sorted(builds, key=lambda b: b["timings"]["total_s"])[len(builds) // 2]
    return {"source": f"fresh build (codegen.pipeline.build, force=True, empty cache; the median of {BUILD_REPEATS}, "
                      f"each in a new Python process, SymPy imported before the clock starts)",
            "timings": built["timings"], "operations": built["operations"], "selfcheck": built["selfcheck"],
            "load": load, "totals_s": totals}


#: A fresh build in a new interpreter: SymPy's caches start empty, as in a user's first build (three builds in one
#: process took 4.06, 3.45 and 3.27 s for the same robot). SymPy and the generator are imported first.
_BUILD_CHILD = """
import json, sys
import sympy  # noqa: F401
from codegen.pipeline import build
from robodyn.options import BuildOptions
built = build(sys.argv[1], BuildOptions(lock=json.loads(sys.argv[2])), cache_dir=sys.argv[3], force=True)
print(json.dumps({"timings": built.timings, "operations": sum(built.manifest["operation_counts"].values()),
                  "selfcheck": built.selfcheck}))
"""


def _build_in_child(path: Path, lock: dict, cache_dir: Path) -> dict:
    result = subprocess.run([sys.executable, "-c", _BUILD_CHILD, str(path), json.dumps(lock), str(cache_dir)],
                            capture_output=True, text=True, cwd=REPO)
    if result.returncode != 0:
        raise SystemExit(f"the fresh build of {path} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------- 6. batch


def batch_throughput(subject: Subject, settings: Settings) -> dict:
    """Inverse dynamics on a batch of random states with ``out=``: states per second with the runtime's
    default, and with ``robot.threads`` = 1 and = every usable core when the runtime has that property.
    The settings take turns in interleaved rounds, each the best of a short burst of calls. A neighbour's load
    on the shared machine can only slow a round, and it slows the setting that needs every core most, so the
    rates and the speed-up are those of each setting's fastest round (what the cores do when free, as timeit
    advises); the speed-up of the median rounds is kept beside it (``speedup_median``)."""
    robot, rows = subject.robot, settings.batch_rows
    names = {"r": robot, "out": np.empty((rows, robot.n)), **random_states(robot.n, subject.model, rows, 1)}
    timer = make_timer("r.inverse_dynamics(q, qd, qdd, out=out)", names)
    cores = len(os.sched_getaffinity(0))
    result = {"routine": "inverse_dynamics", "rows": rows, "cores": cores, "threads": None,
              "default_threads": getattr(robot, "threads", None), "rounds": settings.batch_rounds}
    choices: dict[str, object] = {"default": result["default_threads"]}
    if not hasattr(robot, "threads"):
        result["threads_note"] = "threads: not supported by this runtime"
    else:
        try:
            robot.threads = cores
            robot.threads = result["default_threads"]
            choices.update({"1": 1, str(cores): cores})
        except (AttributeError, TypeError, ValueError) as exc:
            result["threads_note"] = f"threads: robot.threads cannot be set ({exc})"
    say(f"batch throughput {subject.spec.key} ({rows} states)")
    samples: dict[str, list[float]] = {name: [] for name in choices}
    try:
        for _ in range(settings.batch_rounds):
            for name, threads in choices.items():
                if len(choices) > 1:
                    robot.threads = threads
                timer.timeit(1)  # warm up (a thread pool starts on first use)
                samples[name].append(min(timer.repeat(repeat=settings.burst, number=1)))
    finally:
        if len(choices) > 1:
            robot.threads = choices["default"]
    rates = {name: rows / min(times) for name, times in samples.items()}
    medians = {name: rows / statistics.median(times) for name, times in samples.items()}
    result["default"], result["default_median"] = rates.pop("default"), medians.pop("default")
    if rates:
        result.update(threads=rates, speedup=rates[str(cores)] / rates["1"], threads_median=medians,
                      speedup_median=medians[str(cores)] / medians["1"])
    return result


# ---------------------------------------------------------------------------------------------- tables


@dataclass
class Table:
    """One section. Text in backticks (in notes and cells) is code: Markdown keeps the backticks, plain text
    drops them; a note starting with "- " is a list item."""

    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    left: int = 2  # leading columns aligned left (names); the rest right (numbers)
    left_also: tuple[int, ...] = ()  # further columns aligned left (text)

    def aligned_left(self, column: int) -> bool:
        return column < self.left or column in self.left_also


def _plain(text: str) -> str:
    return text.replace("`", "")


def render_text(table: Table) -> str:
    header, rows = [_plain(c) for c in table.header], [[_plain(c) for c in row] for row in table.rows]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return "  ".join(c.ljust(w) if table.aligned_left(i) else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))

    out = [table.title, "-" * len(table.title), line(header).rstrip()]
    out += [line(row).rstrip() for row in rows]
    out += [_plain(note) for note in table.notes]
    return "\n".join(out)


_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")  # what GitHub would take for the start of an HTML tag


def markdown_inline(text: str, cell: bool = False) -> str:
    """``text`` as Markdown: code spans (in backticks) kept as they are, elsewhere a ``<`` that would open an
    HTML tag (``robot.<method>``) and ``*`` escaped, and ``|`` in table cells."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick: no code spans
        parts = [text.replace("`", "")]
    for i in range(0, len(parts), 2):
        part = _HTML_START.sub(r"\\<", parts[i]).replace("*", r"\*")
        parts[i] = part.replace("|", r"\|") if cell else part
    if cell:  # a | inside a code span in a table cell still ends the cell (GitHub): escaped there too
        parts[1::2] = [code.replace("|", r"\|") for code in parts[1::2]]
    return "`".join(parts)


def markdown_blocks(lines: list[str]) -> str:
    """Notes as Markdown: paragraphs, and lists for consecutive items starting with "- ", blank lines
    between the blocks."""
    blocks: list[list[str]] = []
    for line in lines:
        item = line.startswith("- ")
        if item and blocks and blocks[-1][0].startswith("- "):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return "\n\n".join("\n".join(markdown_inline(line) for line in block) for block in blocks)


def render_markdown(table: Table) -> str:
    def cells(values):
        return "| " + " | ".join(markdown_inline(v, cell=True) for v in values) + " |"

    out = [f"### {markdown_inline(table.title)}", "", cells(table.header),
           "|" + "|".join(":---" if table.aligned_left(i) else "---:" for i in range(len(table.header))) + "|"]
    out += [cells(row) for row in table.rows]
    if table.notes:
        out += ["", markdown_blocks(table.notes)]
    return "\n".join(out)


def _us(value) -> str:
    return "-" if value is None else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _count(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ratio(a, b) -> str:
    if a is None or not b:
        return "-"
    return f"{a / b:,.0f}x" if a / b >= 100 else f"{a / b:.2f}x"


def _met(flag) -> str:
    return "-" if flag is None else "met" if flag else "UNMET"


def header_lines(machine: dict) -> tuple[str, list[str]]:
    """(title, [machine line, versions line])."""
    versions = (f"robodyn {machine['robodyn']}, pinocchio {machine['pinocchio'] or 'not installed'}, "
                f"numpy {machine['numpy']}, python {machine['python']}")
    if machine["valgrind"]:
        versions += f", {machine['valgrind']}"
    cpu = (f"{machine['cpu']}, {machine['cores']} cores ({machine['usable_cores']} usable); load average "
           f"{machine['load_at_start']:.2f} at the start")
    return "robodyn performance table", [f"machine: {cpu}", f"versions: {versions}"]


def header_text(machine: dict) -> str:
    title, lines = header_lines(machine)
    return "\n".join([title, *lines])


_ROBOT_NAMES = {"panda": "the Franka Panda", "ur5": "the UR5"}


def header_markdown(machine: dict, results: dict) -> str:
    title, lines = header_lines(machine)
    robots = [f"{_ROBOT_NAMES.get(key, key)} ({r['n']} joints" + (", fingers locked)" if r.get("locked") else ")")
              for key, r in results.items()]
    what = ("robodyn against [Pinocchio](https://github.com/stack-of-tasks/pinocchio) on "
            f"{' and '.join(robots)}, URDFs of example-robot-data; produced by "
            "`python benchmarks/table.py --markdown FILE`.")
    items = [f"- **{name.capitalize()}:** {markdown_inline(value.strip())}"
             for name, value in (line.split(":", 1) for line in lines)]
    return "\n".join([f"## {title}", "", what, "", *items])


def agreement_table(results: dict) -> Table | None:
    rows = [[key, *[f"{r['agreement'][routine.method]:.1e}" for routine in ROUTINES],
             "agree" if all(e <= TOLERANCE for e in r["agreement"].values()) else "DISAGREE"]
            for key, r in results.items() if r.get("agreement")]
    if not rows:
        return None
    states = next(r["agreement_states"] for r in results.values() if r.get("agreement"))
    damped = [f"{key} {r['friction']['damping_max']:g}" for key, r in results.items()
              if r.get("friction", {}).get("damping_max")]
    return Table("1. Values: ours against Pinocchio", ["robot", *[r.label for r in ROUTINES], "verdict"], rows,
                 [(f"max |ours - Pinocchio| / max(1, max |Pinocchio|) over {states} random states within the joint "
                   f"limits; agree: <= {TOLERANCE:g}. The URDF's joint damping (in ours, not in Pinocchio's "
                   "algorithms) is taken off ours for this check"
                   + (f" (damping, N m s/rad: {', '.join(damped)})" if damped else "")
                   + "; crba's upper triangle is symmetrized.")], left=1)


def _friction_note(results: dict) -> str:
    damped = [key for key, r in results.items()
              if r.get("friction", {}).get("damping_max") or r.get("friction", {}).get("friction_max")]
    which = f"; nonzero for: {', '.join(damped)}" if damped else ""
    return ("Ours includes the URDF's joint friction term (viscous damping and Coulomb friction" + which + ") in ID "
            "and FD, as a robodyn robot always does; Pinocchio's `rnea` and `aba` do not.")


def timing_table(results: dict, settings: Settings) -> Table:
    have_pin = any("pinocchio" in t for r in results.values() for t in r["timing"].values())
    have_rtb = any("rtb" in t for r in results.values() for t in r["timing"].values())
    forms = list(OURS_FORMS)
    header = ["robot", "routine", *[f"ours {OURS_FORMS[form]}" for form in forms]] \
        + (["Pinocchio"] if have_pin else []) + (["RTB"] if have_rtb else [])
    if have_pin:
        header += [f"Pin/ours {OURS_FORMS[form]}" for form in forms] + ["goal (fastest form)", "met"]
    if have_rtb:
        header += ["RTB/ours (fastest form)"]
    rows, floors = [], []
    for key, r in results.items():
        for routine in ROUTINES:
            t = {impl: v["median_us"] for impl, v in r["timing"][routine.method].items()}
            floors.append(t["loop"])
            row = [key, routine.label, *[_us(t.get(form)) for form in forms]]
            row += [_us(t.get("pinocchio"))] if have_pin else []
            row += [_us(t.get("rtb"))] if have_rtb else []
            if have_pin:
                pin, fastest = t.get("pinocchio"), t[best_form(r["timing"][routine.method])]
                row += [_ratio(pin, t.get(form)) for form in forms]
                row += [f">= {routine.python_goal:g}x",
                        _met(None if pin is None else pin / fastest >= routine.python_goal)]
            if have_rtb:
                row += [_ratio(t.get("rtb"), t[best_form(r["timing"][routine.method])])]
            rows.append(row)
    notes = [(f"µs per call, median of {settings.rounds} interleaved rounds (each the best of {settings.burst} "
              f"timeit loops of about {settings.loop_seconds * 1e3:g} ms); the loop itself adds about "
              f"{statistics.median(floors) * 1e3:.0f} ns to every column. Call forms: out= `r.g(q, out=o)`; "
              "out (positional) `r.g(q, o)`, `r.inverse_dynamics(q, qd, qdd, None, o)` (None: the optional "
              "wrench h); alloc `r.g(q)`. CPython 3.11 runs every form on its specialised call path "
              "(robodyn_method.h). Goal: Pinocchio / ours in our fastest form (section 7 names it)."),
             _friction_note(results)]
    if have_rtb:
        notes.append("RTB: the Robotics Toolbox for Python's own model of the robot (`rtb.models.DH.<Robot>()`, its "
                     "Denavit-Hartenberg parameters, so its values differ from the URDF's) and its methods "
                     f"{', '.join(f'`{r.rtb}`' for r in ROUTINES)}: a timing comparison only.")
    return Table("2. Time per call from Python (µs)", header, rows, notes)


def instruction_table(results: dict, calls: int) -> Table | None:
    header = ["robot", "routine", "ours out= total", "kernel", "ours out= overhead", "ours out= binding",
              "ours out (positional) total", "ours out (positional) overhead", "ours out (positional) binding",
              "ours alloc total", "ours alloc overhead", "ours alloc binding", "Pin total", "Pin C++",
              "Pin C++/kernel", "Pin total/ours out=", "Pin total/ours out (positional)"]
    rows, symbols = [], {}
    for key, r in results.items():
        ours, pin = r.get("callgrind"), r.get("callgrind_pinocchio")
        if ours is None:
            continue
        for routine in ROUTINES:
            kinds = ours.get(routine.method, {})
            out, positional, alloc = (kinds.get(kind, {}) for kind in ("out", "positional", "alloc"))
            theirs = (pin or {}).get(routine.method, {})
            kernel = out.get("kernel") or positional.get("kernel") or None
            rows.append([key, routine.label, _count(out.get("total")), _count(kernel), _count(out.get("overhead")),
                         _count(out.get("binding")), _count(positional.get("total")),
                         _count(positional.get("overhead")), _count(positional.get("binding")),
                         _count(alloc.get("total")), _count(alloc.get("overhead")), _count(alloc.get("binding")),
                         _count(theirs.get("total")),
                         _count(theirs.get("kernel")), _ratio(theirs.get("kernel"), kernel),
                         _ratio(theirs.get("total"), out.get("total")),
                         _ratio(theirs.get("total"), positional.get("total"))])
            if theirs.get("symbol"):
                symbols[routine.pinocchio] = theirs["symbol"]
    if not rows:
        return None
    notes = [(f"Instructions per call (valgrind callgrind, {calls} calls per loop, the same inputs for the three "
              "forms of ours). ours: `robot.<method>(..., out=out)`, `robot.<method>(..., out)` (positional) and "
              "allocating `robot.<method>(...)` (its result dropped at once, so each call reuses the last one's "
              "array: a caller keeping every result pays NumPy's allocation too, about 700 instructions); total = "
              "per call from Python, kernel = the generated "
              "`<robot>_<routine>_kernel` (the same in every form), overhead = total - kernel, binding = the part of "
              "the overhead inside robodyn's binding (its entry `rd_routine_vectorcall`, inclusive, minus the "
              "kernel: argument parsing and checks, out= or allocation with the NumPy and CPython API calls they make, "
              "the GIL, the table's dispatch); the rest of the overhead is the interpreter's (method lookup, the call "
              "instruction, the result's reference). Pin total: "
              "`pinocchio.<function>(model, data, ...)` from Python; Pin C++: its C++ algorithm, inclusive "
              f"(goal Pin C++ / kernel >= {C_LEVEL_GOAL:g}x):")]
    notes += [f"- `{name}`: `{symbol[:90]}{'...' if len(symbol) > 90 else ''}`" for name, symbol in symbols.items()]
    return Table("3. Instructions per call", header, rows, notes)


def operations_table(results: dict) -> Table:
    rows = [[key, *[_count(r["operations"][routine.method]) for routine in ROUTINES],
             _count(r["generation"]["operations"] if r.get("generation") else None)] for key, r in results.items()]
    return Table("4. Operations of the generated routines", ["robot", *[r.label for r in ROUTINES], "all routines"],
                 rows, ["The generator's operation count per routine (build manifest `operation_counts`)."], left=1)


_STAGES = ("parse_s", "derive_s", "define_s", "emit_s", "cse_s", "derivatives_s", "compile_s", "emit_and_compile_s",
           "selfcheck_s", "total_s")


def generation_table(results: dict) -> Table | None:
    entries = {key: r["generation"] for key, r in results.items() if r.get("generation")}
    if not entries:
        return None
    stages = [s for s in _STAGES if any(s in g["timings"] for g in entries.values())]
    stages += sorted({s for g in entries.values() for s in g["timings"]} - set(stages))
    rows = [[key, *[f"{g['timings'][s]:.2f}" if s in g["timings"] else "-" for s in stages]]
            for key, g in entries.items()]
    sources = sorted({g["source"] for g in entries.values()})
    notes = [(f"Seconds per stage; {'; '.join(sources)}. compile_s overlaps emit_s (the compiler runs as the C is "
              "emitted): emit_and_compile_s is their wall time.")]
    return Table("5. Generation time (s)", ["robot", *[s.removesuffix("_s") for s in stages]], rows, notes, left=1)


def batch_table(results: dict) -> Table:
    rows, notes = [], []
    for key, r in results.items():
        b = r["batch"]
        setting = "default" if b.get("default_threads") is None else f"default (threads={b['default_threads']})"
        rows.append([key, setting, f"{b['default']:,.0f}", f"{1e6 / b['default']:.3f}", "-", "-"])
        medians = b.get("threads_median") or {}
        for threads, rate in (b.get("threads") or {}).items():
            median = medians.get(threads)
            rows.append([key, f"threads={threads}", f"{rate:,.0f}", f"{1e6 / rate:.3f}",
                         f"{rate / b['threads']['1']:.2f}x",
                         "-" if median is None else f"{median / medians['1']:.2f}x"])
        if b.get("threads_note"):
            notes.append(f"{key}: {b['threads_note']}")
    first = next(iter(results.values()))["batch"]
    notes.insert(0, f"`inverse_dynamics(Q, QD, QDD, out=OUT)` on {first['rows']:,} random states (one call: the call "
                    f"form does not matter here); the settings take turns in {first.get('rounds', '?')} interleaved "
                    "rounds, each the best of a short burst. A neighbour's load on a shared machine only slows a "
                    "round, and slows the setting that needs every core most: states/s and the speed-up are each "
                    "setting's fastest round; the median rounds' speed-up beside it shows the load. Goal: speed-up "
                    f">= {THREADS_GOAL:g}x with every usable core.")
    return Table("6. Batch throughput", ["robot", "setting", "states/s", "µs/state", "speed-up",
                                         "speed-up (median rounds)"], rows, notes)


def goals(results: dict) -> list[dict]:
    """The issue's goals: {"robot", "goal", "measured", "target", "met", "detail"} (met None: not measured)."""
    found = []

    def add(robot, goal, measured, target, met, detail=""):
        found.append({"robot": robot, "goal": goal, "measured": measured, "target": target, "met": met,
                      "detail": detail})

    for key, r in results.items():
        for routine in ROUTINES:
            t = r["timing"][routine.method]
            if "pinocchio" in t:
                form = best_form(t)
                ratio = t["pinocchio"]["median_us"] / t[form]["median_us"]
                keyword = t["pinocchio"]["median_us"] / t["ours_out"]["median_us"]
                add(key, f"{routine.label}: Python Pinocchio/ours", f"{ratio:.2f}x", f">= {routine.python_goal:g}x",
                    ratio >= routine.python_goal, f"fastest: {OURS_FORMS[form]}; out= {keyword:.2f}x")
        ours, pin = r.get("callgrind"), r.get("callgrind_pinocchio")
        for routine in ROUTINES:
            if ours is None:
                break
            kinds = ours.get(routine.method, {})
            kernel = (kinds.get("out") or kinds.get("positional") or {}).get("kernel")
            theirs = (pin or {}).get(routine.method, {}).get("kernel")
            if theirs and kernel:
                add(key, f"{routine.label}: C Pinocchio C++/kernel", f"{theirs / kernel:.2f}x", f">= {C_LEVEL_GOAL:g}x",
                    theirs / kernel >= C_LEVEL_GOAL)
            if key == GOALS_ROBOT:
                add(key, f"{routine.label}: kernel instructions", _count(kernel or None), f"<= {routine.kernel_goal}",
                    kernel <= routine.kernel_goal if kernel else None)
                for kind, form in (("out", "out="), ("positional", "positional out"), ("alloc", "allocating")):
                    overhead, binding = kinds.get(kind, {}).get("overhead"), kinds.get(kind, {}).get("binding")
                    add(key, f"{routine.label}: overhead ({form})", _count(overhead), f"<= {OVERHEAD_GOAL}",
                        None if overhead is None else overhead <= OVERHEAD_GOAL,
                        "" if overhead is None or binding is None else
                        f"in the binding {binding:,.0f}, in the interpreter {overhead - binding:,.0f}")
        speedup, median = r["batch"].get("speedup"), r["batch"].get("speedup_median")
        add(key, "batch threads speed-up", "-" if speedup is None else f"{speedup:.2f}x", f">= {THREADS_GOAL:g}x",
            None if speedup is None else speedup >= THREADS_GOAL,
            "" if median is None else f"fastest rounds; median rounds {median:.2f}x")
        generation = r.get("generation")
        if key == GOALS_ROBOT and generation and generation["source"].startswith("fresh build"):
            total = generation["timings"].get("total_s")
            add(key, "fresh build time", "-" if total is None else f"{total:.1f} s", f"<= {BUILD_GOAL_S:g} s",
                None if total is None else total <= BUILD_GOAL_S,
                "; ".join(part for part in (
                    "builds " + ", ".join(f"{t:.1f}" for t in generation["totals_s"]) + " s"
                    if generation.get("totals_s") else "",
                    f"load average {generation['load']:.2f}" if generation.get("load") is not None else "") if part))
    return found


def goals_table(found: list[dict]) -> Table:
    rows = [[g["robot"], g["goal"], g["measured"], g["target"], _met(g["met"]), g.get("detail", "")] for g in found]
    met = sum(g["met"] is True for g in found)
    measured = sum(g["met"] is not None for g in found)
    return Table("7. Goals", ["robot", "goal", "measured", "target", "status", "detail"], rows,
                 [(f"{met} of {measured} measured goals met. Python-level ratios: Pinocchio / ours in our fastest "
                   "call form (detail: which, and the out= keyword form's ratio); the overhead goal on each call "
                   f"form (out=, positional out, allocating); the instruction and build-time goals are stated for the {GOALS_ROBOT}.")], left=2,
                 left_also=(5,))


def build_tables(results: dict, settings: Settings) -> list[Table]:
    tables = [agreement_table(results), timing_table(results, settings), instruction_table(results, settings.calls),
              operations_table(results), generation_table(results), batch_table(results), goals_table(goals(results))]
    return [t for t in tables if t is not None]


def footer_lines(messages: list[str], elapsed: float) -> list[str]:
    return [*dict.fromkeys(messages), f"run time {elapsed:.0f} s; load average {os.getloadavg()[0]:.2f} at the end"]


def render_document_text(machine: dict, tables: list[Table], footer: list[str]) -> str:
    return (header_text(machine) + "\n\n" + "\n\n".join(render_text(t) for t in tables) + "\n\n"
            + "\n".join(["Notes:", *[f"- {line}" for line in footer]]))


def render_document_markdown(machine: dict, results: dict, tables: list[Table], footer: list[str]) -> str:
    return (header_markdown(machine, results) + "\n\n" + "\n\n".join(render_markdown(t) for t in tables) + "\n\n"
            + "**Notes**\n\n" + markdown_blocks([f"- {line}" for line in footer]) + "\n")



# ---------------------------------------------------------------------------------------------- main


def measure(spec: RobotSpec, args, settings: Settings, pinocchio, messages: list[str]) -> tuple[dict, Subject]:
    """The Python-level sections for one robot (callgrind and the fresh build are run afterwards, one heavy
    job at a time); the results and the loaded robot."""
    subject = load_subject(spec, args.cache_dir, pinocchio)
    result: dict = {"n": subject.robot.n, "urdf": spec.urdf, "locked": list(spec.lock)}
    if pinocchio is not None:
        say(f"checking {spec.key} against Pinocchio")
        result["agreement"] = check_agreement(subject, pinocchio, settings.states)
        result["agreement_states"] = settings.states
        model = subject.model  # the URDF's joint friction as Pinocchio reads it (ours includes it, rnea/aba do not)
        result["friction"] = {"damping_max": float(np.max(np.abs(model.damping), initial=0.0)),
                              "friction_max": float(np.max(np.abs(model.friction), initial=0.0))}
        bad = [m for m, e in result["agreement"].items() if e > TOLERANCE]
        if bad:
            messages.append(f"{spec.key}: ours and Pinocchio DISAGREE on {', '.join(bad)} (timings still reported)")
    rtb, reason = rtb_model(spec)
    if reason:
        messages.append(f"Robotics Toolbox for Python skipped for {spec.key}: {reason}")
    result["timing"] = time_calls(subject, pinocchio, rtb, settings, messages)
    result["operations"] = operation_counts(subject)
    result["batch"] = batch_throughput(subject, settings)
    return result, subject


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", choices=[*ROBOTS, "all"], default="all", help="the robot(s) (default: all)")
    parser.add_argument("--no-callgrind", action="store_true", help="skip the instruction counts")
    parser.add_argument("--build", action=argparse.BooleanOptionalAction, default=None,
                        help="measure generation time with a fresh build (default: yes, but no with --quick); "
                             "--no-build reports the stage times recorded in the cache entry")
    parser.add_argument("--quick", action="store_true", help="fewer repeats and calls (a smoke test)")
    parser.add_argument("--markdown", metavar="FILE", help="also write the tables as Markdown")
    parser.add_argument("--json", metavar="FILE", help="also write every measurement as JSON")
    parser.add_argument("--cache-dir", default=None,
                        help="robodyn's cache (default: $ROBODYN_CACHE_DIR, else the user's cache)")
    parser.add_argument("--callgrind-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.callgrind_child:
        return callgrind_child(args.callgrind_child)
    started = time.perf_counter()
    settings = Settings.quick() if args.quick else Settings()
    fresh_build = args.build if args.build is not None else not args.quick
    machine = machine_info()
    messages: list[str] = []
    pinocchio = import_pinocchio()
    if pinocchio is None:
        messages.append("pinocchio is not importable (pip install pin): its columns and the agreement check skipped")
    callgrind = not args.no_callgrind and shutil.which("valgrind") is not None
    if not args.no_callgrind and not callgrind:
        messages.append("valgrind is not on PATH: the instruction counts skipped")
    specs = list(ROBOTS.values()) if args.robot == "all" else [ROBOTS[args.robot]]
    results, subjects = {}, {}
    for spec in specs:
        results[spec.key], subjects[spec.key] = measure(spec, args, settings, pinocchio, messages)
    for key, subject in subjects.items():
        if callgrind:
            say(f"callgrind: ours (out= and allocating), {key}")
            ours = callgrind_ours(subject, settings.calls)
            if ours is None:
                messages.append(f"{key}: callgrind_calls.py failed (its output is on stderr)")
            say(f"callgrind: ours (out positional), {key}")
            positional = callgrind_positional(subject, settings.calls)
            if positional is None:
                messages.append(f"{key}: the callgrind run of the positional out form failed (its output is on "
                                "stderr)")
            if ours is not None or positional is not None:
                ours = ours or {}
                for method, row in (positional or {}).items():
                    ours.setdefault(method, {})["positional"] = row
                results[key]["callgrind"] = ours
            if pinocchio is not None:
                say(f"callgrind: Pinocchio, {key}")
                results[key]["callgrind_pinocchio"] = callgrind_pinocchio(subject, settings.calls)
                if results[key]["callgrind_pinocchio"] is None:
                    messages.append(f"{key}: the Pinocchio callgrind run failed (its output is on stderr)")
        results[key]["generation"] = generation_times(subject, fresh_build)
    tables = build_tables(results, settings)
    elapsed = time.perf_counter() - started
    footer = footer_lines(messages, elapsed)
    print(render_document_text(machine, tables, footer))
    if args.markdown:
        Path(args.markdown).write_text(render_document_markdown(machine, results, tables, footer), encoding="utf-8")
    if args.json:
        document = {"machine": machine, "settings": asdict(settings), "fresh_build": fresh_build,
                    "messages": list(dict.fromkeys(messages)), "robots": results, "goals": goals(results),
                    "run_time_s": elapsed}
        Path(args.json).write_text(json.dumps(document, indent=2, default=_jsonable) + "\n", encoding="utf-8")
    return 0


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


if __name__ == "__main__":
    sys.exit(main())
