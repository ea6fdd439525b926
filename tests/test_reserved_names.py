"""Description parameters cannot take the names of the generator's own symbols (codegen.model.names).

A SymPy symbol is its name: a parameter named like one of the model's intermediates was that intermediate, and the
model changed without a word (rr with its m2 renamed w0 had M22 = I2 + ac2² cos(q1) on the recursive route). The
list of reserved names is declared once; the test below derives models of every kind, with every routine, and
checks that each symbol in them is a description parameter or a reserved name, so a new family of generated
symbols cannot go undeclared.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import sympy as sp

from codegen.errors import DescriptionError
from codegen.description import parse_path
from codegen.model import derive_model
from codegen.model.names import RESERVED, is_reserved
from codegen.model.routines import define_routines
from robodyn.options import BuildOptions

ROOT = Path(__file__).resolve().parent.parent
RR = (ROOT / "robots" / "rr.yaml").read_text()


def _symbols(value, found: set, seen: set) -> None:
    """Every SymPy symbol reachable from value (dataclasses, containers, expressions, matrices)."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, (sp.Basic, sp.MatrixBase)):
        found.update(value.free_symbols)
        if isinstance(value, sp.Symbol):
            found.add(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            _symbols(getattr(value, item.name), found, seen)
    elif isinstance(value, dict):
        for key, item in value.items():
            _symbols(key, found, seen)
            _symbols(item, found, seen)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            _symbols(item, found, seen)
    elif hasattr(value, "__dict__") and type(value).__module__.startswith("codegen"):
        for item in vars(value).values():
            _symbols(item, found, seen)


@pytest.mark.parametrize("robot, options", [
    ("robots/rr.yaml", {}),                                            # Euler-Lagrange
    ("robots/puma560.yaml", {"derivatives": "yes"}),                   # recursive, derivatives, regressor
    ("tests/urdf/three_joints.urdf", {"method": "recursive", "forward": "aba"}),  # articulated-body algorithm
    ("robots/biglide.yaml", {}),                                       # closed chain (task coordinates)
    ("robots/fourbar.yaml", {}),                                       # closed chain
    ("robots/space_arm.yaml", {}),                                     # floating base
    ("tests/urdf/mimic_chain.urdf", {}),                               # couplings: derived in x, projected
    ("tests/urdf/three_joints.urdf", {"runtime_parameters": True}),  # parameters named after the links
])
def test_every_generated_symbol_has_a_reserved_name(robot, options):
    build_options = BuildOptions(**options)
    description = parse_path(ROOT / robot, build_options)
    model = derive_model(description, build_options)
    routines = define_routines(model, build_options)
    found: set = set()
    _symbols(model, found, set())
    _symbols(routines.definitions, found, set())
    parameters = {parameter.symbol for parameter in description.parameters}
    generated = {symbol.name for symbol in found if symbol not in parameters}
    assert generated, "nothing collected: the walk is broken"
    assert {name for name in generated if not is_reserved(name)} == set()
    # And no parameter is named like them (the description refused it).
    assert not [parameter.name for parameter in description.parameters if is_reserved(parameter.name)]


@pytest.mark.parametrize("name", ["w0", "w12", "k3", "y7", "fr2", "dw4", "nd1", "t_w3", "x1", "xd2", "xi1", "task2",
                                  "qdr1", "qddr2", "qdrb3", "qb1", "h_fx", "h_mz", "M_pi", "XX_pi", "q3", "tau1"])
def test_a_parameter_named_like_a_generated_symbol_is_refused_at_its_line(tmp_path, name):
    text = RR.replace("m2:", f"{name}:", 1).replace("mass: m2", f"mass: {name}")
    assert text.count(name) >= 2, "the rr description changed: adapt the test"
    path = tmp_path / "clash.yaml"
    path.write_text(text)
    with pytest.raises(DescriptionError) as raised:
        parse_path(path, BuildOptions())
    message = str(raised.value)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.strip().startswith(f"{name}:"))
    assert f"clash.yaml:{line}: parameters.{name}: parameter name {name!r} is a reserved name" in message
    assert message.count("clash.yaml:") == 1  # no second error for the expressions that use it


@pytest.mark.parametrize("name", ["w", "k", "x", "w_0", "k_1", "wx1", "M1", "XX1", "m2", "t_x", "mass_w0", "kp1"])
def test_names_near_the_reserved_ones_stay_free(name):
    assert not RESERVED.match(name)


@pytest.mark.parametrize("name", ["rd", "rd_arm", "robodyn", "robodyn_x"])
def test_a_robot_name_in_the_runtimes_c_namespace_is_refused_or_prefixed(tmp_path, name):
    """A robot's name prefixes its module's C symbols, compiled with the runtime's headers (rd_..., robodyn_...):
    a robot named rd declared rd_robot, the headers' type, and failed to compile."""
    path = tmp_path / "arm.yaml"
    path.write_text(RR.replace("name: rr\n", f"name: {name}\n", 1))
    with pytest.raises(DescriptionError, match=f"robot name '{name}' is reserved"):
        parse_path(path, BuildOptions())
    (tmp_path / f"{name}.yaml").write_text(RR.replace("name: rr\n", "", 1))  # the name from the file's
    with pytest.raises(DescriptionError, match="cannot derive a robot name"):
        parse_path(tmp_path / f"{name}.yaml", BuildOptions())
    urdf = (ROOT / "tests" / "urdf" / "rr.urdf").read_text()
    urdf = re.sub(r'<robot name="[^"]*"', f'<robot name="{name}"', urdf, count=1)
    (tmp_path / "arm.urdf").write_text(urdf)
    assert parse_path(tmp_path / "arm.urdf", BuildOptions()).name == f"robot_{name}"
