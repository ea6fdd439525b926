"""Build stage: cache hits and misses, atomic publishing, loud build errors, determinism."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codegen.build import cache as cache_module
from codegen.build import ensure_built, find_cached
from codegen.build.cache import cache_key
from codegen.errors import BuildError
from conftest import ROBOTS, ROOT

PENDULUM = ROBOTS / "pendulum.yaml"


def _published(root: Path) -> list[Path]:
    return [d for d in root.iterdir() if not d.name.startswith(".")] if root.exists() else []


def test_second_run_is_a_cache_hit_without_sympy(tmp_path):
    first = ensure_built(PENDULUM, out=tmp_path)
    assert not first.cache_hit and first.selfcheck["passed"]
    second = ensure_built(PENDULUM, out=tmp_path)
    assert second.cache_hit and second.module_path == first.module_path
    # A cache hit in a fresh interpreter must not need SymPy (that import alone takes ~1 s).
    code = ("import sys, robodyn; r = robodyn.load(sys.argv[1], cache_dir=sys.argv[2]); "
            "assert r.manifest; print('sympy' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code, str(PENDULUM), str(tmp_path)], capture_output=True,
                            text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "False"
    # The CLI says so too.
    cli = subprocess.run([sys.executable, "-m", "codegen", str(PENDULUM), "--out", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert cli.returncode == 0 and "cache hit" in cli.stdout


def test_changed_value_rebuilds(tmp_path):
    original = PENDULUM.read_text()
    copy = tmp_path / "pendulum.yaml"
    copy.write_text(original)
    cache = tmp_path / "cache"
    first = ensure_built(copy, out=cache)
    copy.write_text(original.replace("d: 0.1", "d: 0.3"))
    second = ensure_built(copy, out=cache)
    assert not second.cache_hit and second.directory != first.directory
    assert len(_published(cache)) == 2
    before = second.module_path.stat().st_ino
    forced = ensure_built(copy, out=cache, force=True)
    assert not forced.cache_hit and forced.directory == second.directory
    assert forced.module_path.stat().st_ino != before  # really replaced, not discarded


def test_build_error_carries_command_and_log_and_publishes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr("codegen.build.compile.COMPILE_FLAGS", ("-O2", "-fno-such-flag-robodyn"))
    with pytest.raises(BuildError) as info:
        ensure_built(PENDULUM, out=tmp_path, force=True)
    error = info.value
    assert error.returncode not in (None, 0)
    assert error.command and error.command[0] == sys.executable
    assert "-fno-such-flag-robodyn" in error.log
    assert "-fno-such-flag-robodyn" in str(error)
    assert list(tmp_path.iterdir()) == []  # temporary build directory removed too


def test_killed_build_leaves_nothing_importable(tmp_path):
    description = tmp_path / "pendulum.yaml"
    description.write_text(PENDULUM.read_text().replace("d: 0.1", "d: 0.2"))
    cache = tmp_path / "cache"
    process = subprocess.Popen([sys.executable, "-m", "codegen", str(description), "--out", str(cache)],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    # Wait until the compiler is running in the temporary directory, then kill everything.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        temporaries = list(cache.glob(".tmp-*/build_module.py")) if cache.exists() else []
        if temporaries:
            break
        if process.poll() is not None:
            pytest.fail("the build finished before it could be interrupted")
        time.sleep(0.05)
    else:
        pytest.fail("the build never started compiling")
    time.sleep(0.5)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    key = cache_key(description.read_bytes(), {"simplify": True})
    assert find_cached(cache, key) is None
    assert _published(cache) == []
    assert list(cache.glob("*/*.so")) == []  # only hidden temporaries can hold a module
    # The next run succeeds and clears the dead build's directory.
    built = ensure_built(description, out=cache)
    assert not built.cache_hit and built.selfcheck["passed"]
    assert list(cache.glob(".tmp-*")) == []


def test_generated_sources_are_deterministic(tmp_path):
    """Same input, byte-identical files, whatever the hash seed of the interpreter."""
    script = ("import sys, json, codegen; from codegen.emit.routines import emit; "
              "s = emit(codegen.derive(sys.argv[1], method=sys.argv[2])); print(json.dumps(s.files, sort_keys=True))")
    for method in ("lagrange", "recursive"):
        outputs = []
        for seed in ("1", "12345"):
            env = dict(os.environ, PYTHONHASHSEED=seed)
            result = subprocess.run([sys.executable, "-c", script, str(ROBOTS / "rrr.yaml"), method],
                                    capture_output=True, text=True, cwd=ROOT, env=env, check=True)
            outputs.append(result.stdout)
        assert outputs[0] == outputs[1], method
    files = json.loads(outputs[0])
    header = files["rrr_dynamics.h"]
    assert "generated by robodyn codegen" in header
    assert "Description SHA-256: " in header
    assert "void rrr_inverse_dynamics(const double *restrict q, const double *restrict qd" in header
    for forbidden in ("2026", "time", "date"):
        assert forbidden not in header.lower().replace("runtime-settable", "")


def test_generated_c_is_strict_c99(tmp_path):
    from codegen import derive
    from codegen.emit.routines import emit

    sources = emit(derive(ROBOTS / "rrr.yaml"))
    for name, text in sources.files.items():
        (tmp_path / name).write_text(text)
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    subprocess.run([compiler, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-c", "rrr_dynamics.c",
                    "-o", "rrr.o"], cwd=tmp_path, check=True)


def test_cache_key_depends_on_generator_and_content():
    data = PENDULUM.read_bytes()
    assert cache_key(data) == cache_key(data)
    assert cache_key(data) != cache_key(data + b"\n")
    assert cache_key(data, {"simplify": True}) != cache_key(data, {"simplify": False})
    assert len(cache_module.generator_fingerprint()) == 64


def test_failing_selfcheck_fails_the_build_and_publishes_nothing(tmp_path, monkeypatch):
    from codegen.errors import SelfCheckError

    monkeypatch.setattr("codegen.build.selfcheck.IDENTITY_TOLERANCE", -1.0)  # no error can pass
    with pytest.raises(SelfCheckError, match="inverse_forward"):
        ensure_built(PENDULUM, out=tmp_path, force=True)
    assert list(tmp_path.iterdir()) == []
