"""Cache integrity: a damaged entry is never imported, it is reported and rebuilt; stale temporaries of
dead processes go on every run (a cache hit too), a live build's directory stays."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from robodyn import cache
from robodyn.cache import MANIFEST, SELFCHECK

ROOT = Path(__file__).resolve().parent.parent
PENDULUM = ROOT / "robots" / "pendulum.yaml"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """One built pendulum entry (built once; each test damages a copy)."""
    from codegen.pipeline import build

    root = tmp_path_factory.mktemp("integrity-source")
    result = build(PENDULUM, cache_dir=root)
    return result


@pytest.fixture
def copy(published, tmp_path):
    """(root, entry directory, key) of a private copy of the published entry."""
    root = tmp_path / "cache"
    root.mkdir()
    directory = root / published.entry.directory.name
    shutil.copytree(published.entry.directory, directory)
    return root, directory, published.entry.key


def _module(directory: Path) -> Path:
    return next(directory.glob("robodyn_*" + cache.ext_suffix()))


def _reason(root: Path, key: str) -> str:
    found, damaged = cache.inspect(root, key)
    assert found is None and len(damaged) == 1
    return damaged[0][1]


def test_intact_copy_is_a_hit(copy):
    root, directory, key = copy
    found, damaged = cache.inspect(root, key)
    assert found is not None and damaged == []
    assert found[1]["module_size"] == _module(directory).stat().st_size


def test_truncated_module_is_refused_by_its_size(copy):
    root, directory, key = copy
    module = _module(directory)
    module.write_bytes(module.read_bytes()[:1000])
    assert "bytes" in _reason(root, key) and "expected" in _reason(root, key)


def test_overwritten_module_of_the_same_size_is_refused_by_its_hash(copy):
    root, directory, key = copy
    module = _module(directory)
    data = bytearray(module.read_bytes())
    data[len(data) // 2] ^= 0xFF
    module.write_bytes(bytes(data))
    assert "SHA-256" in _reason(root, key)


@pytest.mark.parametrize("name", [MANIFEST, SELFCHECK])
@pytest.mark.parametrize("content", ["{not json", "[1, 2]", "", "\xff\xfe"])
def test_unreadable_json_is_refused(copy, name, content):
    root, directory, key = copy
    (directory / name).write_bytes(content.encode("latin-1"))
    assert name in _reason(root, key)


def test_inconsistent_selfcheck_is_refused(copy):
    root, directory, key = copy
    report = json.loads((directory / SELFCHECK).read_text())
    report["checks"][0]["passed"] = False  # says passed overall, one check failed
    (directory / SELFCHECK).write_text(json.dumps(report))
    assert SELFCHECK in _reason(root, key)
    (directory / SELFCHECK).write_text(json.dumps({"status": "skipped", "passed": None, "checks": []}))
    assert SELFCHECK in _reason(root, key)  # the manifest says it passed


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "..", "other.so"])
def test_manifest_file_names_stay_inside_the_entry(copy, name):
    root, directory, key = copy
    manifest = json.loads((directory / MANIFEST).read_text())
    manifest["module_file"] = name
    (directory / MANIFEST).write_text(json.dumps(manifest))
    assert "module_file" in _reason(root, key)


def test_module_replaced_by_a_symlink_is_refused(copy, tmp_path):
    root, directory, key = copy
    module = _module(directory)
    target = tmp_path / "elsewhere.so"
    shutil.copy(module, target)
    module.unlink()
    module.symlink_to(target)
    assert "regular file" in _reason(root, key)


def test_damaged_entry_is_rebuilt_and_reported(copy):
    """The command line says it in one line, rebuilds, and the next run is a plain hit."""
    root, directory, key = copy
    module = _module(directory)
    module.write_bytes(module.read_bytes()[:100])
    command = [sys.executable, "-m", "codegen", str(PENDULUM), "--cache-dir", str(root), "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "damaged" in line]
    assert len(lines) == 1 and "is damaged (module" in lines[0] and lines[0].endswith("rebuilding")
    assert cache.inspect(root, key)[0] is not None
    again = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert again.returncode == 0 and "cache hit" in again.stdout and "damaged" not in again.stderr
    assert not list(root.glob(".tmp-*"))


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _temporary(root: Path, pid: int) -> Path:
    directory = root / f".tmp-pendulum-0123456789abcdef-{pid}-abcd1234"
    (directory / "build").mkdir(parents=True)
    (directory / "build" / "x.o").write_bytes(b"partial")
    return directory


@pytest.mark.parametrize("how", ["load", "build", "cli"])
def test_stale_temporaries_go_on_a_cache_hit_live_ones_stay(copy, how):
    root, _, _ = copy
    stale = _temporary(root, _dead_pid())
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        live = _temporary(root, sleeper.pid)
        if how == "load":
            import robodyn

            robot = robodyn.load(PENDULUM, cache_dir=root, verbose=False)
            assert robot.n == 1
        elif how == "build":
            from codegen.pipeline import build

            assert build(PENDULUM, cache_dir=root).cache_hit
        else:
            result = subprocess.run([sys.executable, "-m", "codegen", str(PENDULUM), "--cache-dir", str(root)],
                                    capture_output=True, text=True, cwd=ROOT, timeout=600)
            assert result.returncode == 0 and "cache hit" in result.stdout, result.stderr
        assert not stale.exists()
        assert live.exists() and (live / "build" / "x.o").exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_stale_temporary_that_is_a_link_or_a_file_goes_too_and_a_link_s_target_stays(copy, tmp_path):
    """A cache entry replaced by a symbolic link is discarded by renaming it to a temporary name: rmtree refuses a
    link, so the name stayed for ever; now the link goes (its target is never touched), as does a plain file."""
    root, _, key = copy
    target = tmp_path / "elsewhere"
    (target / "build").mkdir(parents=True)
    (target / "build" / "keep.o").write_bytes(b"not the cache's")
    dead = _dead_pid()
    link = root / f".tmp-pendulum-0123456789abcdef-{dead}-discarded"
    link.symlink_to(target, target_is_directory=True)
    plain = root / f".tmp-pendulum-0123456789abcdef-{dead}-abcd1234"
    plain.write_bytes(b"x")
    removed = cache.remove_stale_temporaries(root)
    assert link in removed and plain in removed
    assert not link.is_symlink() and not plain.exists()
    assert (target / "build" / "keep.o").read_bytes() == b"not the cache's"


def test_tidy_leaves_a_read_only_cache_alone(copy, monkeypatch):
    """Root writes through chmod 0o555, so the cache is made read-only as tidy sees it (os.access)."""
    root, _, key = copy
    stale = _temporary(root, _dead_pid())
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path) == root and mode & os.W_OK
                        else real_access(path, mode, **kw))
    cache.tidy(root, key)  # no error, nothing removed
    assert stale.exists()
    assert cache.find(root, key) is not None  # a read-only cache still serves hits


def test_tidy_skips_when_the_key_is_being_built(copy):
    """A build of the key in progress (its lock held) is never disturbed: tidying waits for another run."""
    root, _, key = copy
    stale = _temporary(root, _dead_pid())
    with cache.lock(root, key):
        holder = subprocess.run([sys.executable, "-c", "import sys; from robodyn import cache; "
                                 f"cache.tidy(sys.argv[1], {key!r})", str(root)],
                                capture_output=True, text=True, timeout=60)
        assert holder.returncode == 0, holder.stderr
        assert stale.exists()
    cache.tidy(root, key)
    assert not stale.exists()


@pytest.mark.parametrize("edit", [
    lambda report: report["checks"][0].update(error=None),
    lambda report: report["checks"][0].update(error="x"),
    lambda report: report["checks"][0].update(error=float("nan")),
    lambda report: report["checks"][0].update(error=1.0),  # beyond its tolerance, yet marked passed
    lambda report: report.update(checks=[]),
], ids=["error-null", "error-string", "error-nan", "verdict-contradicts-error", "no-checks"])
def test_selfcheck_report_with_malformed_checks_is_damage(copy, edit):
    """A hand-edited selfcheck.json whose checks do not hold together is damage (rebuilt), not a
    report to print: a null error used to reach a format string and end as a raw Python message."""
    root, directory, key = copy
    path = directory / "selfcheck.json"
    report = json.loads(path.read_text())
    edit(report)
    path.write_text(json.dumps(report))
    assert "selfcheck.json" in _reason(root, key)


def _swap_in_another_module(directory: Path, tmp_path: Path) -> None:
    """Deliberate tampering: another robot's module copied into the entry, its manifest's size and hash rewritten
    to match, so the entry's checks pass and only the import fails (on the module's name)."""
    from codegen.pipeline import build

    other = build(ROOT / "robots" / "rr.yaml", cache_dir=tmp_path / "other")
    module = _module(directory)
    shutil.copyfile(other.module_path, module)
    manifest = json.loads((directory / MANIFEST).read_text())
    manifest.update(module_size=module.stat().st_size, module_sha256=cache.file_sha256(module))
    (directory / MANIFEST).write_text(json.dumps(manifest))


def test_an_entry_whose_module_does_not_import_is_rebuilt_by_load(copy, tmp_path):
    """Another robot's module copied in, its manifest's size and hash rewritten to match (deliberate tampering: the
    checks of the entry pass): the import fails on the module's name, and robodyn.load says so and rebuilds."""
    root, directory, key = copy
    _swap_in_another_module(directory, tmp_path)
    assert cache.inspect(root, key)[0] is not None  # the entry's own checks pass
    code = "import sys, robodyn; print(robodyn.load(sys.argv[1], cache_dir=sys.argv[2]).n)"
    result = subprocess.run([sys.executable, "-c", code, str(PENDULUM), str(root)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=600)
    assert result.returncode == 0 and result.stdout.strip() == "1", result.stderr
    assert "cannot be imported" in result.stderr and "rebuilding" in result.stderr, result.stderr
    again = subprocess.run([sys.executable, "-c", code, str(PENDULUM), str(root)], capture_output=True, text=True,
                           cwd=tmp_path, timeout=600)
    assert again.returncode == 0 and again.stdout.strip() == "1" and again.stderr == "", again.stderr


def test_unpickling_a_robot_whose_entry_does_not_import_rebuilds_it(copy, tmp_path):
    """The same tampered entry as above, met by pickle.loads in a fresh process: rebuilt, not a raw ImportError."""
    import pickle

    import robodyn

    root, directory, key = copy
    pickled = pickle.dumps(robodyn.load(PENDULUM, cache_dir=root, verbose=False))
    _swap_in_another_module(directory, tmp_path)
    code = "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read()).n)"
    result = subprocess.run([sys.executable, "-c", code], input=pickled, capture_output=True, cwd=tmp_path,
                            timeout=600)
    assert result.returncode == 0 and result.stdout.decode().strip() == "1", result.stderr.decode()
    assert b"cannot be imported" in result.stderr
