"""The pipeline's last stages and the cache: hits and misses, atomic publishing, loud build errors,
determinism, strict C, and what the cache key covers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from codegen.errors import BuildError, SelfCheckError
from codegen.pipeline import build
from robodyn import cache
from robodyn.options import BuildOptions
from conftest import ROBOTS, ROOT

PENDULUM = ROBOTS / "pendulum.yaml"


def _published(root: Path) -> list[Path]:
    return [d for d in root.iterdir() if not d.name.startswith(".")] if root.exists() else []


def _left_behind(root: Path) -> list[Path]:
    """Everything in a cache root but the (empty) build lock files."""
    return [p for p in root.iterdir() if not p.name.startswith(".lock-")]


@pytest.mark.slow
def test_second_run_is_a_cache_hit_without_sympy_or_generator(tmp_path):
    first = build(PENDULUM, cache_dir=tmp_path)
    assert not first.cache_hit and first.selfcheck["passed"]
    assert first.manifest["built_from"]["toolchain"]["cc_version"]  # what it was built from is recorded
    second = build(PENDULUM, cache_dir=tmp_path)
    assert second.cache_hit and second.module_path == first.module_path
    # A cache hit in a fresh interpreter needs neither SymPy (~1 s to import) nor the generator.
    code = ("import sys, robodyn; r = robodyn.load(sys.argv[1], cache_dir=sys.argv[2]); "
            "assert r.manifest and r.selfcheck['passed']; print('sympy' in sys.modules, 'codegen' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code, str(PENDULUM), str(tmp_path)], capture_output=True,
                            text=True, cwd=tmp_path, check=True)
    assert result.stdout.split() == ["False", "False"]
    cli = subprocess.run([sys.executable, "-m", "codegen", str(PENDULUM), "--cache-dir", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert cli.returncode == 0 and "cache hit" in cli.stdout


@pytest.mark.slow
def test_changed_value_or_option_rebuilds_and_force_replaces(tmp_path):
    original = PENDULUM.read_text()
    copy = tmp_path / "pendulum.yaml"
    copy.write_text(original)
    root = tmp_path / "cache"
    first = build(copy, cache_dir=root)
    copy.write_text(original.replace("d: 0.1", "d: 0.3"))
    second = build(copy, cache_dir=root)
    assert not second.cache_hit and second.entry.directory != first.entry.directory
    assert len(_published(root)) == 2
    lagrange = build(copy, BuildOptions(method="recursive"), cache_dir=root)
    assert not lagrange.cache_hit and lagrange.manifest["metadata"]["method"] == "recursive"
    before = second.module_path.stat().st_ino
    module = sys.modules[second.entry.module_name]
    forced = build(copy, cache_dir=root, force=True)
    assert not forced.cache_hit and forced.entry.directory == second.entry.directory
    assert forced.module_path.stat().st_ino != before  # really replaced, not discarded
    # The self-check ran on the new module, not on the one this process had already imported.
    assert sys.modules[forced.entry.module_name] is not module
    assert Path(sys.modules[forced.entry.module_name].__file__) == forced.module_path


def test_build_error_carries_command_and_log_and_publishes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr("codegen.extension.compile.ROBOT_FLAGS", ("-O2", "-fno-such-flag-robodyn"))
    with pytest.raises(BuildError) as info:
        build(PENDULUM, cache_dir=tmp_path, force=True)
    error = info.value
    assert error.returncode not in (None, 0)
    assert error.command and "-fno-such-flag-robodyn" in error.command
    assert "-fno-such-flag-robodyn" in error.log
    assert "-fno-such-flag-robodyn" in str(error)
    assert _left_behind(tmp_path) == []  # the temporary build directory is gone too


@pytest.mark.slow
def test_killed_build_leaves_nothing_importable(tmp_path):
    description = tmp_path / "pendulum.yaml"
    description.write_text(PENDULUM.read_text().replace("d: 0.1", "d: 0.2"))
    root = tmp_path / "cache"
    process = subprocess.Popen([sys.executable, "-m", "codegen", str(description), "--cache-dir", str(root)],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    # Wait until the compiler runs in the temporary directory, then kill everything.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if root.exists() and list(root.glob(".tmp-*/build")):
            break
        if process.poll() is not None:
            pytest.fail("the build finished before it could be interrupted")
        time.sleep(0.02)
    else:
        pytest.fail("the build never started compiling")
    time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    key = cache.cache_key(description.read_bytes(), BuildOptions())
    assert cache.find(root, key) is None
    assert _published(root) == []
    assert list(root.glob("*/*.so")) == []  # only hidden temporaries can hold a module
    # The next run succeeds and clears the dead build's directory.
    built = build(description, cache_dir=root)
    assert not built.cache_hit and built.selfcheck["passed"]
    assert list(root.glob(".tmp-*")) == []


def _sources(robot: str, method: str) -> dict:
    import codegen
    from codegen.emit.sources import emit
    from codegen.model.routines import define_routines

    options = BuildOptions(method=method)
    return emit(define_routines(codegen.derive(ROBOTS / f"{robot}.yaml", options), options)).files


def test_each_file_is_compiled_in_the_tier_its_routine_asks_for(monkeypatch):
    """The control loops' routines compile for speed, those of PRESSURE_ROUTINES (up to PRESSURE_OPERATIONS) with
    the pressure-aware scheduling flags too, the others by size (codegen.emit.sources): the tier each file is
    handed over with, and the flags each tier means."""
    import codegen
    from codegen.emit.sources import (PRESSURE_OPERATIONS, PRESSURE_ROUTINES, QUICK_BUILD_OPERATIONS, SPEED_ROUTINES,
                                      emit)
    from codegen.extension.compile import PRESSURE_FLAGS, ROBOT_FLAGS, tier_flags
    from codegen.model.routines import define_routines

    options = BuildOptions()
    routines = define_routines(codegen.derive(ROBOTS / "rrr.yaml", options), options)
    tiers: dict[str, str] = {}
    sources = emit(routines, lambda name, text, tier: tiers.__setitem__(name, tier))
    for routine in PRESSURE_ROUTINES:  # all small enough
        assert sources.operation_counts[routine] <= PRESSURE_OPERATIONS
        assert tiers[f"rrr_{routine}.c"] == "pressure"
    for routine in set(SPEED_ROUTINES) - set(PRESSURE_ROUTINES):
        assert tiers[f"rrr_{routine}.c"] == "speed"
    for routine, operations in sources.operation_counts.items():
        if routine not in SPEED_ROUTINES and operations > QUICK_BUILD_OPERATIONS:
            assert tiers[f"rrr_{routine}.c"] in ("quick", "large"), routine
    # The manifest's record is the same, for the files not compiled at plain speed.
    assert sources.build_tiers == {name: tier for name, tier in tiers.items() if tier != "speed"}
    assert tier_flags("pressure") == PRESSURE_FLAGS
    assert set(ROBOT_FLAGS) < set(PRESSURE_FLAGS) and "-fsched-pressure" in PRESSURE_FLAGS
    # Above PRESSURE_OPERATIONS the same routines compile at plain speed.
    monkeypatch.setattr("codegen.emit.sources.PRESSURE_OPERATIONS", 10)
    tiers.clear()
    emit(routines, lambda name, text, tier: tiers.__setitem__(name, tier))
    assert all(tiers[f"rrr_{routine}.c"] == "speed" for routine in PRESSURE_ROUTINES)

@pytest.mark.slow
def test_generated_sources_are_deterministic_and_self_describing():
    """Same input, byte-identical files, whatever the hash seed of the interpreter."""
    script = ("import sys, json; sys.path.insert(0, sys.argv[1]); from test_build import _sources; "
              "print(json.dumps({m: _sources('rrr', m) for m in ('lagrange', 'recursive')}, sort_keys=True))")
    outputs = []
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        result = subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent)],
                                capture_output=True, text=True, cwd=ROOT, env=env, check=True)
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    both = json.loads(outputs[0])
    files = both["recursive"]
    header = files["rrr_dynamics.h"]
    assert "Generated by robodyn codegen" in header and "SHA-256" in header
    assert "void rrr_inverse_dynamics(const double *restrict q, const double *restrict qd" in header
    assert "Joint order: 0:" in header and "derived by the recursive route" in header
    # Each routine's file names the algorithm it contains.
    assert "composite-rigid-body" in files["rrr_mass_matrix.c"]
    assert "Echeandia & Wensing" in files["rrr_coriolis_matrix.c"]
    assert "L^T D L" in files["rrr_forward_dynamics.c"]
    assert "Christoffel" in both["lagrange"]["rrr_coriolis_matrix.c"]
    for text in (*files.values(), *both["lagrange"].values()):
        for forbidden in ("2026", "timestamp", "date:"):
            assert forbidden not in text.lower()


def test_generated_c_is_strict_c99(tmp_path):
    files = _sources("rrr", "recursive")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler is not None, "no C compiler: the generator needs one"
    native = Path(cache.__file__).parent / "native"
    for name in files:
        if name.endswith(".c"):
            subprocess.run([compiler, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-I", str(native),
                            "-c", name, "-o", name + ".o"], cwd=tmp_path, check=True)


def test_cache_key_covers_content_options_generator_and_toolchain(monkeypatch):
    data = PENDULUM.read_bytes()
    key = cache.cache_key(data, BuildOptions())
    assert key == cache.cache_key(data, BuildOptions())
    assert key != cache.cache_key(data + b"\n", BuildOptions())
    assert key != cache.cache_key(data, BuildOptions(simplify=False))
    assert key != cache.cache_key(data, BuildOptions(tool="link"))
    inputs = cache.key_inputs(data, BuildOptions())
    assert set(inputs) >= {"description_sha256", "options", "generator_version", "generator_sha256", "abi",
                           "routine_table", "toolchain"}
    assert set(inputs["toolchain"]) >= {"cc", "cc_version", "cflags", "cython", "numpy_major", "python"}
    assert inputs["toolchain"]["ext_suffix"] == sysconfig.get_config_var("EXT_SUFFIX")
    for part, value in (("toolchain", dict(inputs["toolchain"], cc_version="gcc 99")),
                        ("generator_sha256", "0" * 64), ("abi", "other")):
        changed = dict(inputs, **{part: value})
        monkeypatch.setattr(cache, "key_inputs", lambda *_args, changed=changed: changed)
        assert cache.cache_key(data, BuildOptions()) != key, part


def test_failing_selfcheck_fails_the_build_and_publishes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr("codegen.extension.selfcheck.IDENTITY_TOLERANCE", -1.0)  # no error can pass
    with pytest.raises(SelfCheckError, match="inverse_forward"):
        build(PENDULUM, cache_dir=tmp_path, force=True)
    assert _left_behind(tmp_path) == []


@pytest.mark.slow
@pytest.mark.slow
def test_concurrent_builds_of_one_robot_build_it_once(tmp_path):
    code = ("import sys; from codegen.pipeline import build; "
            "print(build(sys.argv[1], cache_dir=sys.argv[2]).cache_hit)")
    processes = [subprocess.Popen([sys.executable, "-c", code, str(PENDULUM), str(tmp_path)], cwd=ROOT,
                                  stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [process.communicate(timeout=300)[0].strip() for process in processes]
    assert all(process.returncode == 0 for process in processes)
    assert len(_published(tmp_path)) == 1 and list(tmp_path.glob(".tmp-*")) == []
    # One process built it; the others waited for it and found it in the cache.
    assert sorted(outputs) == ["False", "True", "True"]


def test_corrupt_manifest_is_not_a_hit(tmp_path):
    first = build(PENDULUM, cache_dir=tmp_path)
    first.entry.manifest_path.write_text("{ not json")
    again = build(PENDULUM, cache_dir=tmp_path)
    assert not again.cache_hit and again.selfcheck["passed"]
    manifest = json.loads(again.entry.manifest_path.read_text())
    manifest["module_file"] = "../elsewhere.so"  # a module outside its entry is never loaded
    again.entry.manifest_path.write_text(json.dumps(manifest))
    assert cache.find(tmp_path, again.entry.key) is None


@pytest.mark.slow
def test_damaged_module_is_rebuilt_not_loaded(tmp_path):
    first = build(PENDULUM, cache_dir=tmp_path)
    data = first.module_path.read_bytes()
    # Truncated, as by a full disk. Through a new file: this process has the old one mapped, and
    # truncating a mapped library in place would crash it.
    damaged = first.module_path.with_suffix(".damaged")
    damaged.write_bytes(data[: len(data) // 3])
    os.replace(damaged, first.module_path)
    # Loading it would crash the interpreter: a fresh process must rebuild instead.
    code = ("import sys, robodyn; r = robodyn.load(sys.argv[1], cache_dir=sys.argv[2], verbose=False); "
            "print(r.selfcheck['passed'])")
    result = subprocess.run([sys.executable, "-c", code, str(PENDULUM), str(tmp_path)], capture_output=True,
                            text=True, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "True", result.stderr
    again = build(PENDULUM, cache_dir=tmp_path)  # a hit only if the module matches its manifest again
    assert again.cache_hit and again.manifest["module_sha256"] == cache.file_sha256(again.module_path)


def test_the_binding_translated_at_install_is_used_only_when_it_matches(tmp_path):
    """setup.py translates binding.pyx once (codegen.extension.translation); a build uses that C only if it was
    translated from this binding.pyx and is intact, else it runs Cython itself."""
    from codegen.extension.compile import BindingTranslation, translate_binding
    from codegen.extension.translation import BINDING, TRANSLATED_NAME, pretranslated, translate

    installed = Path(cache.__file__).parent / "native" / TRANSLATED_NAME
    assert pretranslated(installed) is not None, f"{installed} is missing: pip install (setup.py build_py) makes it"
    binding = translate_binding("robodyn_x_0123456789ab")
    assert binding.command == [] and binding.defines == (
        "-DPyInit_robodyn_robot_binding=PyInit_robodyn_x_0123456789ab",)  # no Cython process
    text, _ = binding.result()
    assert text == pretranslated(installed)

    source = tmp_path / "binding.pyx"
    source.write_bytes(BINDING.read_bytes())
    translated = tmp_path / "translated.c"
    translate(translated, source)
    assert pretranslated(translated, source) is not None
    good = translated.read_bytes()
    translated.write_bytes(good[:-200])  # truncated
    assert pretranslated(translated, source) is None
    translated.write_bytes(good.replace(b"robot()", b"robotX()", 1))  # damaged
    assert pretranslated(translated, source) is None
    translated.write_bytes(good)
    source.write_bytes(BINDING.read_bytes() + b"\n# edited after installing\n")  # another binding.pyx
    assert pretranslated(translated, source) is None
    assert pretranslated(tmp_path / "missing.c", source) is None

    fallback = BindingTranslation("robodyn_x_0123456789ab", None)  # what a build does without a valid file
    try:
        assert fallback.command[:3] == [sys.executable, "-m", "cython"] and fallback.defines == ()
        fallback_text, _ = fallback.result()
        assert "PyInit_robodyn_x_0123456789ab" in fallback_text
    finally:
        fallback.cancel()


@pytest.mark.slow
def test_modules_built_from_the_shared_translation_keep_their_own_names(tmp_path):
    """Cython's C registers a module in sys.modules under its compiled-in name too: with the name shared by every
    robot, import_extension takes that entry out, and each module keeps its own."""
    from codegen.extension.translation import TRANSLATED_MODULE

    assert cache.SHARED_BINDING_NAME == TRANSLATED_MODULE
    first = build(PENDULUM, cache_dir=tmp_path, force=True)
    second = build(ROBOTS / "rr.yaml", cache_dir=tmp_path, force=True)
    modules = [cache.import_extension(r.entry.module_name, r.module_path) for r in (first, second)]
    assert [m.__name__ for m in modules] == [first.entry.module_name, second.entry.module_name]
    assert all(sys.modules[m.__name__] is m for m in modules)
    assert TRANSLATED_MODULE not in sys.modules


@pytest.mark.slow
def test_a_build_without_the_install_time_translation_runs_cython(tmp_path, monkeypatch):
    import codegen.extension.compile as compile_stage

    made = []

    def spy(module_name):
        made.append(compile_stage.BindingTranslation(module_name, None))
        return made[-1]

    monkeypatch.setattr(compile_stage, "translate_binding", spy)
    result = build(PENDULUM, cache_dir=tmp_path, force=True)
    assert result.selfcheck["passed"]
    assert made and made[0].command[:3] == [sys.executable, "-m", "cython"] and made[0].defines == ()


def test_load_announces_a_build_only_once_it_runs_and_a_refused_description_prints_only_its_error(
        tmp_path, monkeypatch, capfd):
    """robodyn.load's default: what it builds and its stages once the build has taken a second, then what it
    built; a description refused before that prints nothing (the exception says it all). The second is made a
    minute here, so that a slow host cannot reach it while the description is refused."""
    import codegen.pipeline
    import robodyn
    from robodyn.errors import DescriptionError

    patient = codegen.pipeline.delayed_progress
    monkeypatch.setattr(codegen.pipeline, "delayed_progress", lambda write, delay=1.0: patient(write, 60.0))
    broken = tmp_path / "broken.yaml"
    broken.write_text(PENDULUM.read_text().replace("joints:", "joints: [", 1))
    with pytest.raises(DescriptionError):
        robodyn.load(broken, cache_dir=tmp_path / "cache")
    assert capfd.readouterr().err == ""
    code = "import sys, robodyn; robodyn.load(sys.argv[1], cache_dir=sys.argv[2], force=True)"
    result = subprocess.run([sys.executable, "-c", code, str(PENDULUM), str(tmp_path / "cache")], capture_output=True,
                            text=True, cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 0 and lines[-1].startswith("[robodyn] built pendulum in "), result.stderr
    if len(lines) > 1:  # the build took over a second: the announcement first, then the stages
        assert lines[0].startswith("[robodyn] building ") and all(
            line.startswith("[codegen] ") for line in lines[1:-1]), result.stderr


def test_an_error_of_the_generator_itself_is_a_build_error_that_says_so(tmp_path, monkeypatch):
    """After the description passed its checks, a ValueError or TypeError is the generator's bug, not invalid input:
    the command line said 'error: <NumPy's message>' with status 1 (a length of 1e90 overflowed the regressor's
    check). It is a BuildError (status 3) naming the description and asking for a report, the cause chained."""
    from codegen import pipeline
    from codegen.model import routines as routines_module

    def broken(*args, **kwargs):
        raise ValueError("operands could not be broadcast together")

    monkeypatch.setattr(routines_module, "define_routines", broken)
    path = tmp_path / "rr.yaml"
    path.write_text((ROBOTS / "rr.yaml").read_text())
    with pytest.raises(BuildError, match=r"internal error of the generator on .*rr\.yaml .*ValueError: operands") as info:
        pipeline.build(path, cache_dir=tmp_path / "cache")
    assert isinstance(info.value.__cause__, ValueError)
    assert not [p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".lock-")]
