"""Smoke test of the performance table (benchmarks/table.py): the UR5, quick, without callgrind.

    pytest benchmarks/test_table.py -n 0
"""

from __future__ import annotations

import json
import re

import pytest
import table


def test_quick_table_holds_the_five_routines(tmp_path, bench_cache_dir, capsys):
    pytest.importorskip("pinocchio")
    out, markdown = tmp_path / "table.json", tmp_path / "table.md"
    assert table.main(["--robot", "ur5", "--quick", "--no-callgrind", "--json", str(out), "--markdown",
                       str(markdown), "--cache-dir", str(bench_cache_dir)]) == 0
    document = json.loads(out.read_text())
    timing = document["robots"]["ur5"]["timing"]
    assert set(timing) == {routine.method for routine in table.ROUTINES} == {
        "inverse_dynamics", "M", "forward_dynamics", "C", "g"}
    for method, implementations in timing.items():
        for implementation in ("ours_out", "ours_positional", "ours_alloc", "pinocchio"):
            assert implementations[implementation]["median_us"] > 0, (method, implementation)
    agreement = document["robots"]["ur5"]["agreement"]
    assert all(error <= table.TOLERANCE for error in agreement.values()), agreement
    batch = document["robots"]["ur5"]["batch"]
    assert batch["default"] > 0 and batch["default"] >= batch["default_median"]  # the fastest round, and the median's
    if batch.get("threads"):  # each setting's fastest round, the median rounds' speed-up beside it
        assert batch["threads"]["1"] >= batch["threads_median"]["1"] and batch["speedup_median"] > 0
        goal = next(g for g in document["goals"] if g["goal"] == "batch threads speed-up")
        assert goal["detail"] == f"fastest rounds; median rounds {batch['speedup_median']:.2f}x"
    ratios = [g for g in document["goals"] if g["goal"].endswith("Python Pinocchio/ours")]
    assert len(ratios) == 5 and all(re.match(r"fastest: .+; out= [\d.]+x$", g["detail"]) for g in ratios), ratios
    printed = capsys.readouterr().out
    assert "Time per call from Python" in printed
    header = next(line for line in printed.splitlines() if line.startswith("robot") and "routine" in line)
    assert "ours out (positional)" in header and "Pin/ours out (positional)" in header, header
    assert "friction" in printed and "`" not in printed
    text = markdown.read_text()
    assert "\x1b" not in text and text.startswith("## robodyn performance table\n")
    assert "| robot | routine | ours out= | ours out (positional) | ours alloc |" in text
    assert re.search(r"^\|:---\|:---\|---:\|", text, re.MULTILINE)


def test_positional_call_forms():
    calls = {routine.method: routine.call("r", [*routine.arguments, "o"], "ours_positional")
             for routine in table.ROUTINES}
    assert calls == {"inverse_dynamics": "r.inverse_dynamics(q, qd, qdd, None, o)", "M": "r.M(q, o)",
                     "forward_dynamics": "r.forward_dynamics(q, qd, tau, None, o)", "C": "r.C(q, qd, o)",
                     "g": "r.g(q, o)"}
    routine = next(r for r in table.ROUTINES if r.method == "g")
    assert routine.call("r", ["q", "o"], "ours_out") == "r.g(q, out=o)"
    assert routine.call("r", ["q"], "ours_alloc") == "r.g(q)"


def test_positional_loops_call_with_out_last():
    seen = []

    class Fake:
        def inverse_dynamics(self, *arguments, **keywords):
            seen.append((arguments, keywords))

    call_loop, empty_loop = table.positional_loops("inverse_dynamics", 3, 1)
    call_loop(Fake(), 1, 2, 3, "out", 2)
    empty_loop(Fake(), 1, 2, 3, "out", 2)
    assert seen == [((1, 2, 3, None, "out"), {})] * 2


def test_markdown_escapes_tags_outside_code():
    assert table.markdown_inline("robot.<method>(..., out) `<robot>_g_kernel` a|b", cell=True) \
        == r"robot.\<method>(..., out) `<robot>_g_kernel` a\|b"
    assert table.markdown_inline("<= 500 and >= 6x") == "<= 500 and >= 6x"
    rendered = table.markdown_blocks(["A paragraph.", "- `rnea`: one", "- `aba`: two", "After."])
    assert rendered == "A paragraph.\n\n- `rnea`: one\n- `aba`: two\n\nAfter."
