"""One small hostile input per class of issue 10: each ends in one DescriptionError that names the file,
the line and the field, quickly.

Every input runs in a worker process of the fuzz harness (``fuzz_descriptions.run_cases``), killed after
``TIMEOUT`` seconds: a hang fails its test instead of stalling the suite, without a timing assertion.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_descriptions as fuzz  # noqa: E402

TIMEOUT = 60.0

ARM = """\
name: arm
parameters:
  m1: 2.0
joints:
  - name: j1
    type: revolute
    axis: [0, 0, 1]
    link: {mass: m1, com: [0.1, 0, 0], inertia: {xx: 0.1, yy: 0.1, zz: 0.1}}
  - name: j2
    type: revolute
    axis: [0, 1, 0]
    link: {mass: MASS2, com: [0.1, 0, 0], inertia: {xx: 0.1, yy: 0.1, zz: 0.1}}
"""
MASS2_LINE = 12
MASS2 = "joints[1].link.mass"

URDF = """\
<?xml version="1.0"?>
<robot name="one">
  <link name="base"/>
  <link name="l1">
    <inertial>
      <mass value="1"/>
      <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/>
    </inertial>
  </link>
  <joint name="j1" type="revolute">
    <parent link="base"/>
    <child link="l1"/>
    <axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
</robot>
"""


def arm(mass2: str) -> bytes:
    return ARM.replace("MASS2", mass2).encode()


def bomb() -> str:
    layers = ["  - &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        layers.append(f"  - &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    return "\n".join(layers)


@dataclass(frozen=True)
class Hostile:
    name: str
    data: bytes
    line: int | None
    field: str
    message: str
    suffix: str = ".yaml"
    options: str = ""

    @property
    def path(self) -> str:
        return f"hostile_{self.name}{self.suffix}" + (f"\0{self.options}" if self.options else "")


CASES = [
    Hostile("invalid_utf8", ARM.replace("name: j2", "name: j\xff2").encode("latin-1"), 9, "", "not UTF-8"),
    Hostile("control_character", ARM.replace("name: j2", "name: j\x012").encode(), 9, "", "U+0001"),
    Hostile("self_referencing_anchor", ARM.replace("axis: [0, 1, 0]", "axis: &r [*r]").encode(), 11,
            "joints[1].axis[0]", "refers to a node that contains it"),
    Hostile("nested_brackets", ARM.replace("axis: [0, 1, 0]", "axis: " + "[" * 10_000).encode(), 11,
            "joints[1].axis[0][0][0]", "nesting deeper than"),
    Hostile("alias_bomb", (ARM.replace("joints:", "joints:\n" + bomb()) + "").encode(), 9, "joints[4]",
            "alias bomb"),
    Hostile("long_key", (ARM + '"' + "k" * 200 + '": 1\n').encode(), 13, "", "a mapping key of 200 characters"),
    Hostile("tag_timestamp", arm("!!timestamp 2001-12-14"), MASS2_LINE, MASS2, "'!!timestamp' is not allowed"),
    Hostile("tag_binary", arm("!!binary aGVsbG8="), MASS2_LINE, MASS2, "'!!binary' is not allowed"),
    Hostile("tag_int", arm("!!int b"), MASS2_LINE, MASS2, "invalid !!int value 'b'"),
    Hostile("tag_bool", arm("!!bool maybe"), MASS2_LINE, MASS2, "invalid !!bool value 'maybe'"),
    Hostile("tag_python", arm("!!python/tuple [1]"), MASS2_LINE, MASS2, "'!!python/tuple' is not allowed"),
    Hostile("tag_set", arm("!!set {a}"), MASS2_LINE, MASS2, "'!!set' is not allowed"),
    Hostile("integer_5000_digits", arm("9" * 5000), MASS2_LINE, MASS2, "integer with 5000 digits"),
    Hostile("literal_1e400", arm("1e+400"), MASS2_LINE, MASS2, "out of range"),
    Hostile("literal_tiny_exponent", arm("1e-999999999"), MASS2_LINE, MASS2, "out of range"),
    Hostile("literal_zero_huge_exponent", arm("0e999999999"), MASS2_LINE, MASS2, "out of range"),
    Hostile("literal_70_digits", arm("2 * 1." + "1" * 70), MASS2_LINE, MASS2, "digits (at most 60)"),
    Hostile("exponent_tower", arm("((9^16)^16)^16"), MASS2_LINE, MASS2, "constants must stay between"),
    Hostile("exponent_chain", arm("9^9^9"), MASS2_LINE, MASS2, "must be a constant between"),
    Hostile("tiny_power_in_axis", ARM.replace("axis: [0, 1, 0]", "axis: ['(1e100)^-16', 1, 0]").encode(), 11,
            "joints[1].axis[0]", "constants must stay between"),
    Hostile("product_overflow", arm("1e100*1e100*1e100*1e100"), MASS2_LINE, MASS2, "constants must stay between"),
    Hostile("long_fractional_exponent", arm("((6.981142415645412^6.981142415645412)^6.981142415645412)"),
            MASS2_LINE, MASS2, "a denominator of at most 12"),
    Hostile("fractional_power_of_negative", arm("(((5648.56-80099)^1.25)-25.258)^1.25"), MASS2_LINE, MASS2,
            "must not be negative or complex"),
    Hostile("abs_of_trigonometric_constants", arm("(abs((((sin(9.903+15))/22.22)^1.25)+68.68))^0.5"), MASS2_LINE,
            MASS2, "must not be negative or complex"),
    Hostile("sympy_factor_cache", arm("sqrt(4*(1e100)^2 + 1)"), MASS2_LINE, MASS2, "cannot evaluate the operation"),
    Hostile("parameter_default_10_400", ARM.replace("m1: 2.0", "m1: 1" + "0" * 400).encode(), 3,
            "parameters.m1", "integer with 401 digits"),
    Hostile("parameter_default_1e300", ARM.replace("m1: 2.0", "m1: 1.0e+300").encode(), 3,
            "parameters.m1", "out of range"),
    Hostile("parameter_default_infinite", ARM.replace("m1: 2.0", "m1: .inf").encode(), 3,
            "parameters.m1", "must be finite"),
    Hostile("very_large_yaml", ARM.encode() + b"#" * 2_000_000, None, "", "descriptions are limited to"),
    Hostile("urdf_bogus_encoding", URDF.replace('version="1.0"', 'version="1.0" encoding="bogus"').encode(), 1, "",
            "XML encoding 'bogus' is not supported", ".urdf"),
    Hostile("urdf_multibyte_encoding", URDF.replace('version="1.0"', 'version="1.0" encoding="utf-32"').encode(), 1,
            "", "XML encoding 'utf-32' is not supported", ".urdf"),
    Hostile("urdf_codec_encoding", URDF.replace('version="1.0"', 'version="1.0" encoding="rot13"').encode(), 1,
            "", "XML encoding 'rot13' is not supported", ".urdf"),
    Hostile("urdf_billion_laughs", URDF.replace(
        '<robot name="one">',
        '<!DOCTYPE robot [\n<!ENTITY a "aaaaaaaaaa">\n<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n'
        '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">\n]>\n<robot name="&c;">').encode(), 3, "",
        "XML entity declarations are not allowed", ".urdf"),
    Hostile("urdf_external_entity", URDF.replace(
        '<robot name="one">', '<!DOCTYPE robot [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n<robot name="&e;">').encode(),
        2, "", "XML entity declarations are not allowed", ".urdf"),
    Hostile("urdf_deep_nesting", URDF.replace("<link name=\"base\"/>", "<a>" * 1000 + "</a>" * 1000).encode(), 3, "",
            "nested deeper than 100", ".urdf"),
    Hostile("urdf_tiny_exponent", URDF.replace('<mass value="1"/>', '<mass value="1e-999999999"/>').encode(), 6,
            "link[l1].inertial.mass", "out of range", ".urdf"),
    Hostile("urdf_huge_literal", URDF.replace('xyz="0 0 1"', 'xyz="0 0 1e+400"').encode(), 13,
            "joint[j1].axis", "out of range", ".urdf"),
    Hostile("very_large_urdf", URDF.encode() + b"<!--" + b"x" * 11_000_000 + b"-->", None, "",
            "URDF files are limited to", ".urdf"),
    Hostile("urdf_lock_10_400", URDF.encode(), 10, "lock[j1]", "out of range", ".urdf",
            json.dumps({"lock": {"j1": 10 ** 400}})),
    Hostile("urdf_lock_tiny", URDF.encode(), 10, "lock[j1]", "out of range", ".urdf", json.dumps({"lock": {"j1": 1e-300}})),
]


# Inputs that are valid but once made the parser simplify without bound: they must end in a result.
ACCEPTED = [
    Hostile("axis_nested_radicals",
            ARM.replace("axis: [0, 1, 0]", "axis: ['sqrt(2)+sqrt(3)+sqrt(5)+sqrt(7)', 'sqrt(11)+sqrt(13)', 1]")
            .replace("MASS2", "1").encode(), None, "", ""),
    Hostile("axis_trigonometric_constants",
            ARM.replace("axis: [0, 1, 0]", "axis: ['sin(1)+cos(2)*sqrt(3)', 'tan(5)^16 - sqrt(7)*sin(3)^3', "
                        "'cos(sin(cos(1)))+sqrt(sqrt(2)+1)']").replace("MASS2", "1").encode(), None, "", ""),
    Hostile("axis_huge_components", ARM.replace("axis: [0, 1, 0]", "axis: [0, '(1e100)/(0.5)', 1]")
            .replace("MASS2", "1").encode(), None, "", ""),
    Hostile("plain_yaml", arm("m1"), None, "", ""),
    Hostile("plain_urdf", URDF.encode(), None, "", "", ".urdf"),
]


@pytest.mark.parametrize("case", ACCEPTED, ids=[case.name for case in ACCEPTED])
def test_valid_input_ends_in_a_result(case, outcomes):
    outcome, detail, seconds = outcomes[case.name]
    assert outcome == "accepted", f"{case.name}: {outcome}\n{detail}"


@pytest.fixture(scope="module")
def outcomes():
    """Every case, run once in the harness's workers: name -> (outcome, detail, seconds)."""
    results = {}
    for case, outcome, detail, seconds in fuzz.run_cases(CASES + ACCEPTED, workers=2, timeout=TIMEOUT,
                                                         target="details"):
        results[case.name] = (outcome, detail, seconds)
    return results


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_input_is_one_clear_error(case, outcomes):
    outcome, detail, seconds = outcomes[case.name]
    assert outcome != "hang", f"{case.name}: no result within {TIMEOUT:g} s"
    assert outcome == "rejected", f"{case.name}: {outcome}\n{detail}"
    error = json.loads(detail)
    first = error["problems"][0]
    path = case.path.partition("\0")[0]
    assert first["path"] == path and path in error["text"]
    assert case.message in first["message"], error["text"]
    assert first["line"] == case.line, error["text"]
    if case.field.endswith("[0][0][0]"):  # a deep path: its start is what matters
        assert first["field"].startswith(case.field), error["text"]
    else:
        assert first["field"] == case.field, error["text"]
    assert len(error["text"]) < 2000, "the message should stay readable"


# --- all problems of a description in one run ------------------------------------------------------

SEVERAL = """\
name: several
colour: red
parameters:
  m1: 2.0
  sin: 1.0
  big: 1.0e+300
joints:
  - name: j1
    type: revolute
    axis: [0, 0, 0]
    link: {mass: -m1, com: [0.1, 0, 0], inertia: {xx: 0.1, yy: 0.1, zz: 0.1}}
    friction: {viscous: -1, coulomb: -2}
  - name: j2
    type: twisting
    axis: [0, 1, 0]
    link: {mass: m1, com: [0.1, 0, 0], inertia: {xx: 0.1, yy: 0.1, zz: 0.1}}
    limits: {lower: 1, upper: -1}
  - name: j3
    typ: revolute
    parent: nowhere
    axis: [0, 1, 0]
    link: {mass: 1e-999999999}
"""


def test_every_problem_is_reported_in_one_run():
    from codegen.description import parse_source
    from codegen.errors import DescriptionError

    with pytest.raises(DescriptionError) as info:
        parse_source(SEVERAL.encode(), "several.yaml")
    found = {(p.line, p.field) for p in info.value.problems}
    expected = {
        (2, "colour"),                      # unknown top-level key
        (5, "parameters.sin"),              # reserved name
        (6, "parameters.big"),              # default out of range
        (10, "joints[0].axis"),             # zero axis
        (11, "joints[0].link.mass"),        # negative mass
        (12, "joints[0].friction.viscous"),
        (12, "joints[0].friction.coulomb"),
        (14, "joints[1].type"),             # unknown joint type
        (17, "joints[1].limits"),           # lower above upper
        (19, "joints[2].typ"),              # unknown key ...
        (18, "joints[2]"),                  # ... so 'type' is missing
        (20, "joints[2].parent"),           # unknown parent
        (22, "joints[2].link.mass"),        # literal out of range
    }
    assert found == expected, str(info.value)
    text = str(info.value)
    assert text.startswith(f"{len(expected)} problems:")
    assert all(f"several.yaml:{line}: {field}: " in text for line, field in expected)


def test_problems_are_capped():
    from codegen.description import parse_source
    from codegen.errors import DescriptionError

    joint = "  - name: j{i}\n    type: revolute\n    axis: [0, 0, 0]\n    link: {{mass: -1}}\n"
    text = "name: many\njoints:\n" + "".join(joint.format(i=i) for i in range(30))
    with pytest.raises(DescriptionError) as info:
        parse_source(text.encode(), "many.yaml")
    assert len(info.value.problems) == DescriptionError.MAX_PROBLEMS
    assert "(stopped after 20)" in str(info.value)
