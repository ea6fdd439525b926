"""The names of the symbols the generator makes for itself, declared once.

SymPy symbols with the same name and assumptions are the same symbol. A description parameter named like one of
the generator's own symbols would therefore be that symbol, and change the model without a word: a parameter
``w0`` became the recursive route's intermediate ``w0 = cos(q1)``. The description refuses these names
(codegen.description.parse), ``Program`` takes only the prefixes below, and tests/test_reserved_names.py derives
models of every kind and checks every symbol in them against this list.
"""

from __future__ import annotations

import re

#: Argument vectors, numbered from 1; "b" marks a floating base's coordinates (qb1..qb7, qdb1..qdb6, ...); h is the
#: tool wrench's stem, qdr and qddr the reference velocity and acceleration of the Slotine-Li regressor.
ARGUMENT_STEMS = ("q", "qd", "qdd", "tau", "h", "qdr", "qddr")
#: The tool wrench's components.
WRENCH_NAMES = ("h_fx", "h_fy", "h_fz", "h_mx", "h_my", "h_mz")
#: Intermediates of the straight-line programs (codegen.model.program.Program), numbered from 0: the recursive
#: algorithms (w), their derivatives (dw, nd), the regressor (y), the closed-chain reduction (k) and the frames (fr).
PROGRAM_PREFIXES = ("w", "dw", "nd", "y", "k", "fr")
#: The closed-chain model's renamed copy of its tree's intermediates: TREE_PREFIX + "w12".
TREE_PREFIX = "t_"
#: Further numbered symbols: coordinates a model derives in before projecting (x, xd), a planar closure's task
#: coordinates (xi) and the inverse geometric model's input (task).
NUMBERED_STEMS = ("x", "xd", "xi", "task")
#: One body's inertial parameters (codegen.model.regressor: XX1 ... M1 in π), in Khalil's order (the greedy
#: base-parameter choice relies on it); their placeholders in the regressor's templates are named stem +
#: TEMPLATE_SUFFIX (XX_pi ... M_pi).
LINK_PARAMETERS = ("XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M")
TEMPLATE_SUFFIX = "_pi"
TEMPLATE_NAMES = tuple(stem + TEMPLATE_SUFFIX for stem in LINK_PARAMETERS)


def _alternatives(names) -> str:
    return "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))


RESERVED = re.compile(
    rf"^(?:(?:{_alternatives(ARGUMENT_STEMS)})b?\d*"
    rf"|(?:{re.escape(TREE_PREFIX)})?(?:{_alternatives(PROGRAM_PREFIXES)})\d+"
    rf"|(?:{_alternatives(NUMBERED_STEMS)})\d+"
    rf"|{_alternatives(WRENCH_NAMES + TEMPLATE_NAMES)})$")


def is_reserved(name: str) -> bool:
    """Whether ``name`` is, or could be, the name of one of the generator's own symbols."""
    return RESERVED.match(name) is not None


#: A robot's name prefixes the C symbols of its module (``<name>_robot``, ``<name>_gravity_kernel``, ...), which is
#: compiled with the runtime's headers, whose identifiers start with rd_ (robodyn_abi.h) or robodyn_: a robot named
#: rd had a ``rd_robot`` that was the header's type. Such names are refused (YAML) or prefixed (URDF, whose names are
#: derived).
RUNTIME_C_PREFIXES = ("rd", "robodyn")


def clashes_with_runtime(robot_name: str) -> bool:
    """Whether a robot of this name would declare C symbols in the runtime's namespace."""
    return any(robot_name == prefix or robot_name.startswith(prefix + "_") for prefix in RUNTIME_C_PREFIXES)
