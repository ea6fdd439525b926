"""Command lines and load(): every input ends in a result or one clear error with a documented exit status
(robodyn.errors.EXIT_STATUS_HELP), no traceback unless --debug, no hang; Ctrl-C and a full disk leave
the cache consistent; progress on stderr unless --quiet."""

from __future__ import annotations

import errno
import json
import os
import signal
import shlex
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from robodyn import cache
from robodyn.errors import (EXIT_BUILD, EXIT_ENVIRONMENT, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_TERMINATED,
                            EXIT_USAGE, BuildError, DescriptionError, DescriptionWarning, StorageError, report, run_command)

ROOT = Path(__file__).resolve().parent.parent
ROBOTS = ROOT / "robots"
COMMANDS = (["codegen"], ["robodyn", "demo"], ["robodyn", "simulate"])


def _run(*args, env=None, timeout=300, **kwargs) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=full_env, **kwargs)


def _one_error(result: subprocess.CompletedProcess, status: int, text: str) -> None:
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert text in result.stderr, result.stderr


def _options(command: list[str]) -> set[str]:
    help_text = _run(*command, "--help").stdout
    return {word.rstrip(",") for word in help_text.split() if word.startswith("--")}


def test_every_command_has_the_common_options_and_documents_exit_statuses():
    common = {"--quiet", "--debug", "--cache-dir", "--out", "--force", "--method", "--forward", "--no-simplify",
              "--lock", "--runtime-parameters", "--tool", "--tool-offset", "--accept-invalid-inertia",
              "--no-selfcheck"}
    for command in COMMANDS:
        assert common <= _options(command), command
        help_text = _run(*command, "--help").stdout
        for status in ("0 ", "1 ", "2 ", "3 ", "4 ", "130 "):
            assert f"\n  {status}" in help_text, (command, status)
    assert "exit status" in _run("robodyn", "--help").stdout


@pytest.mark.parametrize("arguments", [
    ["--no-such-option"], ["--method", "newton"], ["--lock", "j1"], ["--lock", "j1=nan"], ["--tool-offset", "1,2"],
    ["--tool", "bad name!"], ["--lock", "shoulder=0", "--lock", "shoulder=1"],  # the last would win silently
])
def test_usage_errors_are_status_2(arguments):
    for command in COMMANDS:
        result = _run(*command, ROBOTS / "rr.yaml", *arguments)
        assert result.returncode == EXIT_USAGE and "Traceback" not in result.stderr, (command, result.stderr)


@pytest.mark.parametrize("arguments", [
    ["--duration", "nan"], ["--duration", "-1"], ["--duration", "inf"], ["--rate", "0"], ["--rate", "1e300"],
    ["--duration", "1e6", "--rate", "1e6"], ["--substeps", "0"], ["--substeps", "1000000000000"],
    ["--spin-us", "-5"], ["--omega", "nan"], ["--duration", "x"],
])
def test_absurd_simulation_arguments_are_usage_errors(arguments, tmp_path):
    result = _run("robodyn", "simulate", ROBOTS / "rr.yaml", *arguments, "--cache-dir", tmp_path / "cache")
    assert result.returncode == EXIT_USAGE and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "cache").exists()  # refused before building


def test_missing_description_is_status_1(tmp_path):
    for command in COMMANDS:
        _one_error(_run(*command, tmp_path / "none.yaml", "--cache-dir", tmp_path / "cache"), EXIT_INPUT, "none.yaml")
    assert not (tmp_path / "cache").exists()


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "a_file"
    path.write_text("")
    return path


@pytest.mark.parametrize("where", ["option", "environment", "below-a-file", "proc"])
def test_unusable_cache_directory_is_status_4_before_any_work(tmp_path, where):
    target = {"option": _file(tmp_path), "environment": _file(tmp_path), "below-a-file": _file(tmp_path) / "cache",
              "proc": Path("/proc/version/cache")}[where]
    description = tmp_path / "fresh.yaml"  # not in any cache: a build would be needed
    description.write_text((ROBOTS / "pendulum.yaml").read_text() + "\n# fresh\n")
    args = [] if where == "environment" else ["--cache-dir", target]
    env = {"ROBODYN_CACHE_DIR": str(target)}
    for command in (["codegen"], ["robodyn", "demo"]):
        started = time.monotonic()
        result = _run(*command, description, *args, env=env)
        _one_error(result, EXIT_ENVIRONMENT, "cache directory")
        assert len(result.stderr.strip().splitlines()) <= 2  # the error (and "building ..." for demo)
        assert time.monotonic() - started < 30  # refused before deriving anything


def test_output_destinations_are_checked_before_the_run(tmp_path, monkeypatch):
    a_file = _file(tmp_path)
    for option, destination in [("--json", a_file / "x.json"), ("--plot", a_file / "x.png"),
                                ("--json", tmp_path), ("--json", ""),
                                ("--json", "/proc/robodyn-missing/x.json")]:  # root may write anywhere but there
        result = _run("robodyn", "simulate", ROBOTS / "rr.yaml", option, destination,
                      "--cache-dir", tmp_path / "cache")
        _one_error(result, EXIT_INPUT, option)
        assert not (tmp_path / "cache").exists()


def test_read_only_output_directory_is_refused(tmp_path, monkeypatch, capsys):
    """As root every directory is writable, so the check is exercised in-process with os.access patched."""
    from robodyn import __main__ as cli

    read_only = tmp_path / "ro"
    read_only.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == read_only else real_access(path, mode))
    with pytest.raises(ValueError, match="not writable"):
        cli._check_output(str(read_only / "run.json"), "--json")
    with pytest.raises(ValueError, match="not writable"):
        cli._check_output(str(read_only / "missing" / "run.json"), "--json")


def test_default_root_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ROBODYN_CACHE_DIR", "  ")  # empty: as if unset
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.default_root() == tmp_path / "xdg" / "robodyn"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # the XDG rule: ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.default_root() == tmp_path / "home" / ".cache" / "robodyn"
    monkeypatch.setenv("ROBODYN_CACHE_DIR", "~/robodyn-cache")
    assert cache.default_root() == tmp_path / "home" / "robodyn-cache"
    monkeypatch.setenv("ROBODYN_CACHE_DIR", "~no-such-user-of-robodyn/cache")
    with pytest.raises(StorageError, match="cannot expand '~no-such-user-of-robodyn'"):
        cache.default_root()
    monkeypatch.delenv("ROBODYN_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME")

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    with pytest.raises(StorageError, match="--cache-dir"):
        cache.default_root()


def test_writable_root(tmp_path):
    assert cache.writable_root(tmp_path / "a" / "b").is_dir()
    with pytest.raises(StorageError, match="not a directory"):
        cache.writable_root(_file(tmp_path))
    with pytest.raises(StorageError, match="cannot create"):
        cache.writable_root(_file(tmp_path) / "sub")


@pytest.mark.parametrize("call, error", [
    (lambda load: load(3), TypeError), (lambda load: load(None), TypeError), (lambda load: load(""), ValueError),
    (lambda load: load(ROBOTS / "rr.yaml", cache_dir=3), TypeError),
    (lambda load: load(ROBOTS / "rr.yaml", verbose="yes"), TypeError),
    (lambda load: load(ROBOTS / "rr.yaml", force=1), TypeError),
    (lambda load: load(ROBOTS / "rr.yaml", no_such_option=1), TypeError),
    (lambda load: load(ROBOTS / "rr.yaml", method="newton"), ValueError),
    (lambda load: load(ROBOTS / "rr.yaml", lock={"j": float("nan")}), ValueError),
    (lambda load: load(ROBOTS / "rr.yaml", "/tmp"), TypeError),
    (lambda load: load(ROBOTS), DescriptionError),
])
def test_load_arguments(call, error, tmp_path):
    import robodyn

    with pytest.raises(error):
        call(lambda *a, **k: robodyn.load(*a, **{"cache_dir": tmp_path / "c", **k}))


def test_report_statuses(capsys):
    cases = [(DescriptionError("r.yaml", 3, "joints", "bad"), EXIT_INPUT), (BuildError("cc failed"), EXIT_BUILD),
             (StorageError("disk full"), EXIT_ENVIRONMENT), (OSError(errno.ENOSPC, "No space left"), EXIT_ENVIRONMENT),
             (KeyboardInterrupt(), EXIT_INTERRUPTED), (ValueError("q0: bad"), EXIT_INPUT),
             (KeyError("unknown parameter 'm9'"), EXIT_INPUT), (MemoryError(), EXIT_ENVIRONMENT)]
    for error, status in cases:
        assert report(error) == status
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == len(cases) and "interrupted" in lines and "error: unknown parameter 'm9'" in lines


def test_run_command_one_line_per_error_and_warning(capsys):
    def warns_then_fails():
        warnings.warn(DescriptionWarning("r.yaml", 7, "joints[0].inertia", "not positive definite"))
        raise ValueError("bad value")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert run_command(warns_then_fails) == EXIT_INPUT
    assert capsys.readouterr().err.splitlines() == [
        "warning: r.yaml:7: joints[0].inertia: not positive definite", "error: bad value"]

    def bug():
        return {}["missing"] + None

    assert run_command(lambda: None.attribute) == EXIT_BUILD  # a bug, not an input problem
    err = capsys.readouterr().err
    assert "internal error" in err and "--debug" in err and "Traceback" not in err
    with pytest.raises(AttributeError):
        run_command(lambda: None.attribute, debug=True)
    assert run_command(bug, debug=True) == EXIT_INPUT  # KeyError: an input problem, traceback shown
    assert "Traceback" in capsys.readouterr().err


def test_debug_prints_the_traceback(tmp_path):
    plain = _run("codegen", tmp_path / "none.yaml")
    debug = _run("codegen", tmp_path / "none.yaml", "--debug")
    assert plain.returncode == debug.returncode == EXIT_INPUT
    assert "Traceback" not in plain.stderr and "Traceback" in debug.stderr


def _fresh(tmp_path: Path, tag: str, robot: str = "pendulum") -> Path:
    """A description no cache holds yet (so a run must build it)."""
    path = tmp_path / f"{robot}_{tag}.yaml"
    path.write_text((ROBOTS / f"{robot}.yaml").read_text() + f"\n# {tag} {time.time_ns()}\n")
    return path


def _left_behind(root: Path) -> list[Path]:
    return sorted(root.glob(".tmp-*")) if root.exists() else []


@pytest.mark.parametrize("stage, sent, status, message, robot", [
    ("deriving", signal.SIGINT, EXIT_INTERRUPTED, "interrupted", "pendulum"),
    ("compiling", signal.SIGINT, EXIT_INTERRUPTED, "interrupted", "pendulum"),
    # timeout, a job scheduler: it died silently, leaving its temporary directory. The RR arm derives its
    # identification pass in a forked child, which the parent stops with SIGTERM: the child must not inherit the
    # parent's handler (it hung there, the parent waiting for a child that waited for work).
    ("compiling", signal.SIGTERM, EXIT_TERMINATED, "terminated", "pendulum"),
    ("deriving", signal.SIGTERM, EXIT_TERMINATED, "terminated", "rr"),
])
def test_ctrl_c_during_a_build(tmp_path, stage, sent, status, message, robot):
    """SIGINT (or SIGTERM) mid-build: one line, status 130 (143), nothing half-published; the next build works and
    prints its stages on stderr."""
    description, root = _fresh(tmp_path, f"{stage}{int(sent)}", robot), tmp_path / "cache"
    process = subprocess.Popen([sys.executable, "-m", "codegen", str(description), "--cache-dir", str(root)],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in process.stderr:
        seen.append(line)
        if f"[codegen] {stage}" in line:
            break
    else:
        pytest.fail(f"no '{stage}' stage seen: {seen}")
    if stage == "compiling":
        deadline = time.monotonic() + 60
        while not list(root.glob(".tmp-*/*.c")) and time.monotonic() < deadline:
            time.sleep(0.01)
    process.send_signal(sent)
    out, err = process.communicate(timeout=120)
    assert process.returncode == status, (out, err)
    assert err.strip().splitlines()[-1] == message and "Traceback" not in err
    assert _left_behind(root) == []
    assert not [d for d in root.glob(f"{robot}-*")] if root.exists() else True
    again = _run("codegen", description, "--cache-dir", root)
    assert again.returncode == 0 and "built" in again.stdout, again.stderr
    stages = [line for line in again.stderr.splitlines() if line.startswith("[codegen]")]
    for word in ("parsed", "derived", "emitted", "compiled", "self-check passed"):
        assert any(word in line for line in stages), (word, again.stderr)
    assert any(" s" in line for line in stages)  # with times
    assert _left_behind(root) == []


def test_quiet_build_prints_no_progress(tmp_path):
    result = _run("codegen", _fresh(tmp_path, "quiet"), "--cache-dir", tmp_path / "cache", "--quiet")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert len(result.stdout.strip().splitlines()) == 1 and result.stdout.startswith("built")


def test_ctrl_c_during_a_simulation(tmp_path, cache_dir, load):
    load("rr")
    process = subprocess.Popen([sys.executable, "-m", "robodyn", "simulate", str(ROBOTS / "rr.yaml"), "--realtime",
                                "--duration", "60", "--cache-dir", str(cache_dir), "--json", str(tmp_path / "r.json")],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == EXIT_INTERRUPTED and err.strip() == "interrupted", (out, err)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("where", ["sources", "manifest"])
def test_full_disk_during_a_build(tmp_path, monkeypatch, where):
    """ENOSPC while writing the sources (compile stage) or the manifest (publish stage): StorageError,
    nothing half-written in the cache, and the next build succeeds."""
    import pathlib

    from codegen import pipeline

    description, root = _fresh(tmp_path, where), tmp_path / "cache"
    full = OSError(errno.ENOSPC, "No space left on device")
    if where == "sources":
        real = pathlib.Path.write_text

        def write_text(self, *args, **kwargs):
            if str(self).startswith(str(root)) and self.suffix == ".c":
                raise full
            return real(self, *args, **kwargs)

        monkeypatch.setattr(pathlib.Path, "write_text", write_text)
    else:
        real_fsync = os.fsync
        monkeypatch.setattr(pipeline.os, "fsync", lambda fd: (_ for _ in ()).throw(full))
    with pytest.raises(StorageError, match="No space left on device.*nothing was published"):
        pipeline.build(description, cache_dir=root)
    assert _left_behind(root) == [] and not list(root.glob("pendulum_*"))
    monkeypatch.undo()
    assert not pipeline.build(description, cache_dir=root).cache_hit
    assert pipeline.build(description, cache_dir=root).cache_hit
    if where == "manifest":
        assert real_fsync is os.fsync


def test_outputs_that_are_not_regular_files_are_never_replaced(tmp_path, cache_dir):
    """--json/--plot write by renaming a temporary file over the target: a FIFO (or a device such as
    /dev/full) must be refused before the run, not replaced by a regular file."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    result = _run("robodyn", "simulate", ROBOTS / "rr.yaml", "--duration", "0.01", "--json", fifo,
                  "--cache-dir", cache_dir, "--quiet")
    _one_error(result, 1, "not a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_output_through_a_symbolic_link_writes_its_target(tmp_path, cache_dir):
    target, link = tmp_path / "summary.json", tmp_path / "link.json"
    link.symlink_to(target)
    result = _run("robodyn", "simulate", ROBOTS / "rr.yaml", "--duration", "0.01", "--json", link,
                  "--cache-dir", cache_dir, "--quiet")
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and json.loads(target.read_text())["robot"] == "rr"
    assert target.stat().st_mode & 0o044, oct(target.stat().st_mode)  # a plain file's mode, not 0600


def test_unwritable_output_is_an_input_error_naming_the_option(cache_dir):
    result = _run("robodyn", "simulate", ROBOTS / "rr.yaml", "--duration", "0.01", "--json", "/proc/robodyn.json",
                  "--cache-dir", cache_dir, "--quiet")
    _one_error(result, 1, "--json /proc/robodyn.json")
    assert ".robodyn.json." not in result.stderr  # not the temporary file's name


@pytest.mark.parametrize("arguments", [["--rate", "1e-9"], ["--cache-dir", ""]])
def test_out_of_range_arguments_are_usage_errors(arguments):
    result = _run("robodyn", "simulate", ROBOTS / "rr.yaml", *arguments)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr


def test_nul_in_a_description_name_is_a_description_error(cache_dir):
    import robodyn

    with pytest.raises(DescriptionError, match="NUL"):
        robodyn.load("robots/rr\x00.yaml", cache_dir=cache_dir)


def test_unreadable_description_is_a_description_error(tmp_path, monkeypatch):
    """A file the user may not read (the tests run as root, where chmod would not stop the read: the
    open is made to fail as it would)."""
    import pathlib

    from robodyn import cache

    path = tmp_path / "secret.yaml"
    path.write_text((ROBOTS / "rr.yaml").read_text())
    real_open = pathlib.Path.open

    def refuse(self, *args, **kwargs):
        if self == path:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", refuse)
    with pytest.raises(DescriptionError, match="cannot read the description: Permission denied"):
        cache.read_description(path)


def test_huge_description_is_refused_before_it_is_read(tmp_path):
    """A 20 GB (sparse) file: refused by its size at once, never read into memory."""
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as stream:
        stream.truncate(20 * 1024**3)
    result = _run("codegen", path, "--cache-dir", tmp_path / "cache", timeout=60)
    _one_error(result, 1, "too large for a robot description")


def test_the_build_report_names_the_cache_in_both_ways_to_use_it(cache_dir):
    result = _run("codegen", ROBOTS / "rr.yaml", "--cache-dir", cache_dir)
    assert result.returncode == 0, result.stderr
    python = next(line for line in result.stdout.splitlines() if "robodyn.load(" in line)
    shell = next(line for line in result.stdout.splitlines() if line.startswith("or: python -m robodyn simulate "))
    assert f"cache_dir={str(cache_dir)!r}" in python, python
    assert shlex.split(shell.removeprefix("or: "))[-2:] == ["--cache-dir", str(cache_dir)], shell


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(word) for word in text.split()]


def _alive(pid: int) -> bool:
    """Running, not a zombie (a dead orphan is reaped by init, a dead child of ours only once waited for)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_build_takes_its_forked_worker_along_and_frees_the_cache_lock(tmp_path, how):
    """The identification pass is derived in a forked worker, which inherits the build's cache lock: killed with
    its parent it must not live on holding the lock (every later build of the robot would wait for it)."""
    description, root = tmp_path / "rrr.yaml", tmp_path / "cache"
    description.write_text((ROBOTS / "rrr.yaml").read_text() + f"\n# {time.time_ns()}\n")
    process = subprocess.Popen([sys.executable, "-m", "codegen", str(description), "--cache-dir", str(root)],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (workers := _children(process.pid)) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.005)
    assert workers, "the build forked no worker (it derives its identification pass beside the model)"
    process.send_signal(how)
    process.wait(timeout=30)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers), f"worker(s) {workers} outlived the build"
    again = _run("codegen", description, "--cache-dir", root, timeout=120)
    assert again.returncode == 0 and "built" in again.stdout, again.stderr


def test_cli_errors_for_an_environment_and_a_controller_that_do_not_fit(tmp_path):
    result = _run("codegen", ROBOTS / "rr.yaml", env={"ROBODYN_CACHE_DIR": "~no-such-user-of-robodyn/x"})
    _one_error(result, EXIT_ENVIRONMENT, "cannot expand '~no-such-user-of-robodyn'")
    result = _run("robodyn", "simulate", ROBOTS / "rr.yaml", "--controller", "standing", "--duration", "0.01",
                  "--cache-dir", tmp_path / "cache", "--quiet")
    _one_error(result, EXIT_USAGE, "--controller standing is for floating-base robots")


def test_output_closed_by_its_reader_ends_quietly(tmp_path, cache_dir, load, capsys):
    """`python -m codegen rr.yaml --print | head -1`: the reader has gone, so there is nothing to tell it; the
    message was a malformed 'error:: Broken pipe'."""
    load("rr")
    process = subprocess.Popen([sys.executable, "-m", "codegen", str(ROBOTS / "rr.yaml"), "--print", "--cache-dir",
                                str(cache_dir)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # before anything is written: the first write fails
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == EXIT_ENVIRONMENT
    assert "error" not in err and "Traceback" not in err and "Exception ignored" not in err, err
    capsys.readouterr()  # the build's progress, if the fixture built rr
    assert report(OSError(5, "Input/output error")) == EXIT_ENVIRONMENT  # without a file name: no empty "::"
    assert capsys.readouterr().err == "error: Input/output error\n"
    assert report(BrokenPipeError(32, "Broken pipe")) == EXIT_ENVIRONMENT  # another pipe than stdout: said
    assert capsys.readouterr().err == "error: Broken pipe\n"
