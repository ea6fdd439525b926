"""A seeded mutation fuzzer for the description stage (issue 10).

Every example description (``robots/*.yaml``) and every test description (``tests/urdf``,
``tests/data``, ``tests/invalid_urdf``, ``tests/invalid``) is mutated at one of four levels:

* ``byte``: flipped bits, inserted or deleted bytes, invalid UTF-8, control characters, truncation,
  duplicated chunks;
* ``token``: numbers replaced by extreme literals (``1e400``, ``1e-999999999``, 400-digit integers,
  ``nan``, exponent towers ...), keys swapped, lines duplicated, deleted or swapped, deep brackets;
* ``tree``: the YAML (or XML) tree is loaded, its values, types and keys mutated, nested, shared
  through anchors and aliases (self references, alias bombs), tagged, and written back;
* ``number``: every kind of number (huge, tiny, negative zero, non-finite, long digit strings) in
  place of the numbers of the tree.

Each case runs ``codegen.description.parse_source(data, path, options)`` in a worker process that is
killed after a time limit. Outcomes: ``accepted``, ``rejected`` (one DescriptionError that names the
case's file and a line inside it), and the failures ``traceback`` (any other exception),
``misreported`` (a DescriptionError naming another file or a line outside it), ``crash`` (the worker
died) and ``hang`` (the time limit). A case is a pure function of (seed, index): ``make_case(seed,
index)`` rebuilds it, and every failure's bytes are saved to a file.

A few accepted cases also go through the whole command line (``python -m codegen FILE --cache-dir
DIR``): exit status 0 or 1 (or 3 for a self-check that refuses a model double precision cannot
verify), no traceback on stderr, nothing left in the cache directory but complete entries and lock files.

    python tests/fuzz_descriptions.py --cases 20000 --seed 1
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import multiprocessing
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections import Counter
from decimal import Decimal
from multiprocessing.connection import wait
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
LEVELS = ("byte", "token", "tree", "number")
OUTCOMES = ("accepted", "rejected", "traceback", "misreported", "crash", "hang")
FAILURES = ("traceback", "misreported", "crash", "hang")
TIMEOUT = 15.0  # seconds per case: an ordinary case takes well under one
CLI_TIMEOUT = 300.0  # seconds per build through the command line
MEMORY_LIMIT = 3 << 30  # bytes of address space per worker: a memory bomb fails instead of swapping


def seed_files() -> list[Path]:
    """The descriptions every case starts from."""
    patterns = ("robots/*.yaml", "tests/data/*.yaml", "tests/data/*.urdf", "tests/urdf/*.urdf",
                "tests/invalid_urdf/*.urdf", "tests/invalid/*.yaml")
    return sorted(path for pattern in patterns for path in ROOT.glob(pattern))


@dataclasses.dataclass
class Case:
    seed: int
    index: int
    level: str
    source: str  # the seed file, relative to the repository
    mutation: str  # what was done, for the reproducer
    data: bytes

    @property
    def path(self) -> str:
        """The name the case is parsed under (its suffix picks the front end; its stem names the robot)."""
        return f"fuzz_case{Path(self.source).suffix}"

    @property
    def urdf(self) -> bool:
        return self.source.endswith(".urdf")


# --- values -----------------------------------------------------------------------------------------

EXTREME_LITERALS = (
    "1e400", "1e+400", "-1e+400", "1e-999999999", "0e999999999", "1" + "0" * 400, "9" * 5000, "-0", "-0.0",
    "nan", ".nan", "inf", "-.inf", "1e100", "1e-100", "1.0e+101", "1e-101", "1.7976931348623157e308",
    "5e-324", "0x1F", "0o17", "1_000", "1:30", "((9^16)^16)^16", "(1e100)^-16", "9^9^9", "2^-16^16", "1/0",
    "0^-1", "tan(pi/2)", "sqrt(-1)", "1e308*10", "-1", "0", "1e99*1e99*1e99*1e99", "(1e100*pi)^16",
    "sin(1e100)", "sqrt(1e100+1)", "0.1234567890123456789012345678901234567890123456789012345678901",
    "(" * 60 + "1" + ")" * 60, "1" + "+1" * 300, "pi^16^16", "abs(-1e100)^3", "3.", ".5", "1e", "1e+", "--1",
    "sqrt(2)+sqrt(3)+sqrt(5)+sqrt(7)", "sin(1)+cos(2)*sqrt(3)", "cos(sin(cos(1)))+sqrt(sqrt(2)+1)",
    "sqrt(4*(1e100)^2 + 1)", "tan(5)^16 - sqrt(7)*sin(3)^3", "(sqrt(3)+sqrt(5))^7", "\u0663", "1e-3\u00a0",
)
TAGS = ("!!timestamp 2001-12-14", "!!binary aGVsbG8=", "!!int b", "!!int 0x", "!!float x", "!!bool maybe",
        "!!null x", "!!str 1", "!!python/tuple [1]", "!!set {a}", "!!omap [a: 1]", "!!pairs [a: 1]",
        "!!python/name:os.system", "!custom 1", "!!merge x", "!!int " + "9" * 5000, "!!float 1e400")
_NUMBER = re.compile(rb"(?<![A-Za-z_\d.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_KEY = re.compile(rb"^\s*-?\s*([A-Za-z_][A-Za-z_0-9]*)\s*:", re.MULTILINE)
_ATTRIBUTE = re.compile(rb'\s([A-Za-z_][A-Za-z_0-9]*)="')


def extreme_number(rng: random.Random) -> str:
    """A number as text, from ordinary to absurd."""
    kind = rng.randrange(8)
    if kind == 0:
        return rng.choice(EXTREME_LITERALS)
    if kind == 1:
        return f"{rng.choice('123456789')}e{rng.choice('+-')}{rng.randint(0, 10 ** rng.randint(1, 10))}"
    if kind == 2:
        return rng.choice("-+") + "".join(rng.choice("0123456789") for _ in range(rng.choice((17, 61, 101, 401, 4400))))
    if kind == 3:
        return repr(float(Decimal(rng.uniform(-1, 1)).scaleb(rng.randint(-330, 310))))
    if kind == 4:
        return rng.choice(("0", "-0", "0.0", "-0.0", "0e0", "00", "0.000"))
    if kind == 5:
        base, op = extreme_number_simple(rng), rng.choice(("^", "**", "*", "/", "+", "-"))
        return f"({base}){op}({extreme_number_simple(rng)})"
    if kind == 6:
        return rng.choice(("nan", "inf", "-inf", ".inf", ".NaN", "NaN", "Infinity"))
    return repr(rng.uniform(-10, 10))


def extreme_number_simple(rng: random.Random) -> str:
    return rng.choice(("16", "-16", "1e100", "1e-100", "9", "0", "pi", "1/3", "0.5", "17", "1e300"))


def random_value(rng: random.Random, depth: int = 0):
    """Any value YAML can hold, biased to what the parser expects (numbers and expressions)."""
    kind = rng.randrange(12 if depth < 3 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice((True, False))
    if kind == 2:
        return rng.choice((0, 1, -1, 2 ** 63, -(10 ** 99), 10 ** 400, rng.randint(-1000, 1000)))
    if kind == 3:
        return rng.choice((0.0, -0.0, 1e300, 1e-300, 5e-324, math.inf, -math.inf, math.nan, rng.uniform(-1e3, 1e3)))
    if kind in (4, 5):
        return extreme_number(rng)
    if kind == 6:
        return rng.choice(("", " ", "revolute", "prismatic", "fixed", "base", "m1", "a1 + ", "sin(", "q1", "pi",
                           "x" * 1000, "\u00e9\u4e2d", "é" * 3, "__import__('os')", "1 2", "a" * 41))
    if kind == 7:
        return rng.choice(("name", "type", "link", "mass", "axis", "dh", "zz", "xyz"))
    if kind == 8:
        return [random_value(rng, depth + 1) for _ in range(rng.choice((0, 1, 2, 3, 3, 4, 7)))]
    if kind == 9:
        return {rng.choice(("a", "name", "mass", "xx", "zz", "lower", "link", "inertia", "type")):
                random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    if kind == 10:
        return [[[[[[[[1]]]]]]]]
    return {"zz": random_value(rng, depth + 1)}


# --- byte level -------------------------------------------------------------------------------------

def mutate_bytes(rng: random.Random, data: bytes, urdf: bool) -> tuple[bytes, str]:
    data = bytearray(data)
    done = []
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(("flip", "insert", "invalid_utf8", "control", "delete", "truncate", "duplicate", "repeat"))
        pos = rng.randint(0, len(data))
        if op == "flip" and data:
            pos = min(pos, len(data) - 1)
            data[pos] ^= 1 << rng.randrange(8)
        elif op == "insert":
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == "invalid_utf8":
            data[pos:pos] = rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80",
                                        b"\xef\xbb\xbf", b"\xfe\xff"))
        elif op == "control":
            data[pos:pos] = bytes([rng.choice((0, 1, 7, 8, 11, 12, 27, 31, 127))]) if rng.random() < 0.8 \
                else rng.choice(("\u0085", "\u2028", "\ufeff", "\ufffe", "\U0001f600")).encode("utf-8", "surrogatepass")
        elif op == "delete":
            del data[pos:pos + rng.randint(1, 64)]
        elif op == "truncate":
            del data[pos:]
        elif op == "duplicate":
            end = min(len(data), pos + rng.randint(1, 200))
            data[pos:pos] = data[pos:end]
        elif op == "repeat" and data:
            pos = min(pos, len(data) - 1)
            data[pos:pos + 1] = data[pos:pos + 1] * rng.choice((2, 100, 10_000))
        done.append(f"{op}@{pos}")
    return bytes(data), "byte:" + ",".join(done)


# --- token level ------------------------------------------------------------------------------------

def mutate_tokens(rng: random.Random, data: bytes, urdf: bool) -> tuple[bytes, str]:
    op = rng.choice(("number", "number", "all_numbers", "swap_keys", "duplicate_line", "delete_line",
                     "swap_lines", "brackets", "indent", "replace_key", "bogus_encoding" if urdf else "anchor_text"))
    lines = data.split(b"\n")
    numbers = list(_NUMBER.finditer(data))
    if op in ("number", "all_numbers") and numbers:
        literal = extreme_number(rng).encode()
        if urdf and rng.random() < 0.7:
            literal = literal.replace(b" ", b"")
        if op == "number":
            match = rng.choice(numbers)
            return data[:match.start()] + literal + data[match.end():], f"token:number@{match.start()}={literal[:60]!r}"
        return _NUMBER.sub(lambda m: literal, data), f"token:all_numbers={literal[:60]!r}"
    keys = list((_ATTRIBUTE if urdf else _KEY).finditer(data))
    if op == "swap_keys" and len(keys) >= 2:
        a, b = sorted(rng.sample(keys, 2), key=lambda m: m.start(1))
        ka, kb = a.group(1), b.group(1)
        out = data[:a.start(1)] + kb + data[a.end(1):b.start(1)] + ka + data[b.end(1):]
        return out, f"token:swap_keys {ka!r}<->{kb!r}"
    if op == "replace_key" and keys:
        a = rng.choice(keys)
        new = rng.choice([k.group(1) for k in keys] + [b"frition", b"<<", b"0", b"null", b"True", b"~"])
        return data[:a.start(1)] + new + data[a.end(1):], f"token:replace_key {a.group(1)!r}->{new!r}"
    if op == "duplicate_line" and lines:
        i = rng.randrange(len(lines))
        lines[i:i] = [lines[i]] * rng.choice((1, 1, 2, 50))
        return b"\n".join(lines), f"token:duplicate_line {i + 1}"
    if op == "delete_line" and lines:
        i = rng.randrange(len(lines))
        del lines[i]
        return b"\n".join(lines), f"token:delete_line {i + 1}"
    if op == "swap_lines" and len(lines) >= 2:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines), f"token:swap_lines {i + 1},{j + 1}"
    if op == "indent" and lines:
        i = rng.randrange(len(lines))
        lines[i] = rng.choice((b"", b" ", b"  ", b"\t")) + lines[i].lstrip() if rng.random() < 0.5 else b"    " + lines[i]
        return b"\n".join(lines), f"token:indent {i + 1}"
    if op == "bogus_encoding":
        encoding = rng.choice((b"bogus", b"utf-32", b"idna", b"rot13", b"base64", b"shift_jis", b"utf-7", b"cp037",
                               b"utf-16", b"UTF-8", b"latin-1", b"x" * 200, b"", b"punycode", b"undefined"))
        body = re.sub(rb"^\s*<\?xml[^>]*\?>", b"", data)
        return b'<?xml version="1.0" encoding="' + encoding + b'"?>\n' + body, f"token:encoding {encoding[:20]!r}"
    if op == "anchor_text" and numbers:
        match = rng.choice(numbers)
        text = rng.choice((b"&r [*r]", b"*undefined", b"&a 1", b"[&a 1, *a]", b"{<<: *x}"))
        return data[:match.start()] + text + data[match.end():], f"token:anchor {text!r}@{match.start()}"
    # brackets (and the fallbacks of the operations above)
    pos = rng.randint(0, len(data))
    opener = rng.choice((b"[", b"{", b"- ", b"<a>", b"(")) * rng.choice((100, 1000, 10_000))
    return data[:pos] + opener + data[pos:], f"token:brackets {opener[:4]!r}x{len(opener)}@{pos}"


# --- tree level -------------------------------------------------------------------------------------

def _paths(tree, prefix=()):
    yield prefix
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            yield from _paths(value, prefix + (index,))


def _get(tree, path):
    for key in path:
        tree = tree[key]
    return tree


def _set(tree, path, value):
    if not path:
        return value
    _get(tree, path[:-1])[path[-1]] = value
    return tree


def _bomb(rng: random.Random):
    layer = ["lol"] * 10
    for _ in range(rng.randint(3, 9)):
        layer = [layer] * 10
    return layer


def _dump(rng: random.Random, tree) -> bytes:
    style = rng.choice((None, True, False))
    return yaml.safe_dump(tree, sort_keys=False, default_flow_style=style, allow_unicode=rng.random() < 0.5,
                          width=rng.choice((80, 10 ** 6))).encode("utf-8")


def mutate_tree(rng: random.Random, data: bytes, urdf: bool) -> tuple[bytes, str]:
    if urdf:
        return mutate_xml(rng, data)
    try:
        # A seed with aliases may be an alias bomb (tests/invalid has one): not loaded, its tokens mutated.
        tree = None if re.search(rb"&[A-Za-z0-9_]", data) else yaml.safe_load(data.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        tree = None
    if not isinstance(tree, (dict, list)):
        out, what = mutate_tokens(rng, data, urdf)
        return out, "tree(unloadable)->" + what
    paths = list(_paths(tree))
    path = rng.choice(paths)
    where = "/".join(map(str, path))
    op = rng.choice(("replace", "replace", "delete", "rename", "wrap_list", "wrap_map", "nest", "share",
                     "self_reference", "bomb", "tag", "duplicate_joints", "swap"))
    marker = None
    if op == "replace":
        tree = _set(tree, path, random_value(rng))
    elif op == "delete" and path:
        parent = _get(tree, path[:-1])
        del parent[path[-1]]
    elif op == "rename" and path and isinstance(_get(tree, path[:-1]), dict):
        parent = _get(tree, path[:-1])
        new_key = rng.choice(("name", "type", "mass", "inertia", "xx", "link", "axis", "parent", "typo", "",
                              "joints", "1", "a" * 100, "dh", "mdh", "origin"))
        items = [(new_key if k == path[-1] else k, v) for k, v in parent.items()]
        parent.clear()
        parent.update(items)
    elif op == "wrap_list":
        tree = _set(tree, path, [_get(tree, path)])
    elif op == "wrap_map":
        tree = _set(tree, path, {"value": _get(tree, path)})
    elif op == "nest":
        value = _get(tree, path)
        for _ in range(rng.choice((10, 63, 64, 65, 200, 1000))):
            value = [value] if rng.random() < 0.5 else {"a": value}
        tree = _set(tree, path, value)
    elif op == "share":
        other = _get(tree, rng.choice(paths))
        if other is not tree:
            tree = _set(tree, path, other)
    elif op == "self_reference":
        node = _get(tree, path)
        if isinstance(node, list):
            node.append(node)
        elif isinstance(node, dict):
            node["self"] = node
        else:
            loop: list = []
            loop.append(loop)
            tree = _set(tree, path, loop)
    elif op == "bomb":
        tree = _set(tree, path, _bomb(rng))
    elif op == "tag":
        marker = "FUZZ_TAG_MARKER"
        tree = _set(tree, path, marker)
    elif op == "duplicate_joints" and isinstance(tree, dict) and isinstance(tree.get("joints"), list) and tree["joints"]:
        joint = rng.choice(tree["joints"])
        tree["joints"] = tree["joints"] + [copy.deepcopy(joint) for _ in range(rng.choice((1, 5, 30, 200)))]
        where = "joints"
    elif op == "swap" and len(paths) > 2:
        other = rng.choice(paths)
        a, b = _get(tree, path), _get(tree, other)
        if path and other and not _prefix(path, other) and not _prefix(other, path):
            _set(tree, path, b)
            _set(tree, other, a)
            where += " <-> " + "/".join(map(str, other))
    try:
        out = _dump(rng, tree)
    except (yaml.YAMLError, RecursionError, ValueError):
        out = data
    if marker is not None:
        out = out.replace(b"FUZZ_TAG_MARKER", rng.choice(TAGS).encode())
    return out, f"tree:{op} {where[:80]}"


def _prefix(a: tuple, b: tuple) -> bool:
    return b[:len(a)] == a


def mutate_xml(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        out, what = mutate_tokens(rng, data, True)
        return out, "tree(unloadable)->" + what
    elements = list(root.iter())
    element = rng.choice(elements)
    op = rng.choice(("duplicate", "delete", "retag", "set", "remove_attribute", "nest", "move", "entities",
                     "doctype", "many"))
    parents = {child: parent for parent in elements for child in parent}
    if op == "duplicate" and element in parents:
        parents[element].append(ET.fromstring(ET.tostring(element)))
    elif op == "delete" and element in parents:
        parents[element].remove(element)
    elif op == "retag":
        element.tag = rng.choice(("link", "joint", "inertial", "inertia", "mass", "origin", "axis", "limit", "mimic",
                                  "dynamics", "parent", "child", "robot", "xacro:macro", "gazebo", "transmission"))
    elif op == "set":
        attribute = rng.choice(list(element.attrib) or ["name", "xyz", "value", "type", "link", "ixx"])
        value = random_value(rng)
        element.set(attribute, value if isinstance(value, str) else " ".join(extreme_number(rng) for _ in range(3))
                    if attribute in ("xyz", "rpy") else extreme_number(rng) if rng.random() < 0.7 else str(value))
    elif op == "remove_attribute" and element.attrib:
        del element.attrib[rng.choice(list(element.attrib))]
    elif op == "nest":
        inner = element
        for _ in range(rng.choice((10, 99, 100, 101, 500))):
            wrapper = ET.Element(rng.choice(("link", "a")))
            wrapper.append(inner)
            inner = wrapper
        if element in parents:
            parent = parents[element]
            parent.remove(element)
            parent.append(inner)
    elif op == "move" and element in parents:
        target = rng.choice(elements)
        if target is not element and element not in list(target.iter()):
            parents[element].remove(element)
            target.append(element)
    elif op == "many":
        for _ in range(rng.choice((100, 2000))):
            root.append(ET.Element("gazebo"))
    out = ET.tostring(root)
    if op == "entities":
        entity = (b'<!DOCTYPE robot [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
                  b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>\n')
        out = entity + out.replace(b'name="', b'name="&d;', 1)
    elif op == "doctype":
        out = rng.choice((b'<!DOCTYPE robot SYSTEM "file:///etc/passwd">\n', b'<!DOCTYPE robot [<!ENTITY % p "x">]>\n',
                          b'<!DOCTYPE robot [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n',
                          b"<!DOCTYPE robot>\n")) + out.replace(b'name="', b'name="&e;', rng.randint(0, 1))
    tag = getattr(element, "tag", "?")
    return out, f"tree:xml_{op} <{str(tag)[:30]}>"


# --- number level -----------------------------------------------------------------------------------

def mutate_numbers(rng: random.Random, data: bytes, urdf: bool) -> tuple[bytes, str]:
    numbers = list(_NUMBER.finditer(data))
    if not numbers:
        return mutate_tokens(rng, data, urdf)
    chosen = rng.sample(numbers, min(len(numbers), rng.choice((1, 1, 2, 3, 10))))
    out = data
    shown = []
    for match in sorted(chosen, key=lambda m: m.start(), reverse=True):
        original = match.group().decode()
        kind = rng.randrange(5)
        if kind == 0:
            new = extreme_number(rng)
        elif kind == 1:
            new = f"{original}e{rng.choice(('', '-', '+'))}{rng.choice((5, 50, 99, 100, 101, 300, 308, 309, 324, 400, 10 ** 9))}"
        elif kind == 2:
            new = f"{original}{'0' * rng.choice((10, 60, 100, 400))}"
        elif kind == 3:
            new = "-" + original.lstrip("+-") if not original.startswith("-") else original[1:]
        else:
            new = repr(float(Decimal(original).scaleb(rng.randint(-330, 330)))) if _finite(original) else "0"
        if urdf:
            new = new.replace(" ", "")
        out = out[:match.start()] + new.encode() + out[match.end():]
        shown.append(f"{original}->{new[:40]}")
    return out, "number:" + ", ".join(shown)


def _finite(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except (ValueError, OverflowError):
        return False


MUTATORS = {"byte": mutate_bytes, "token": mutate_tokens, "tree": mutate_tree, "number": mutate_numbers}


def make_case(seed: int, index: int, seeds: list[Path] | None = None) -> Case:
    """Case ``index`` of run ``seed``: the same pair always gives the same bytes."""
    seeds = seeds if seeds is not None else seed_files()
    rng = random.Random(f"robodyn-fuzz/{seed}/{index}")
    level = LEVELS[index % len(LEVELS)]
    # Valid descriptions go deepest into the parser: they are the source of most cases.
    valid = [path for path in seeds if path.parent.name not in ("invalid", "invalid_urdf")]
    source = rng.choice(valid if valid and rng.random() < 0.6 else seeds)
    data = source.read_bytes()
    urdf = source.suffix == ".urdf"
    try:
        mutated, mutation = MUTATORS[level](rng, data, urdf)
    except (RecursionError, ValueError, TypeError, ArithmeticError) as exc:  # a mutation the mutator cannot make
        mutated, mutation = mutate_bytes(rng, data, urdf)
        mutation = f"({level} failed: {type(exc).__name__}) {mutation}"
    return Case(seed, index, level, source.relative_to(ROOT).as_posix(), mutation, mutated)


# --- running cases ----------------------------------------------------------------------------------

def parse_case(data: bytes, path: str) -> tuple[str, str]:
    """Run the description stage on one case; (outcome, detail). Runs in a worker process."""
    import warnings

    from codegen.description import parse_source
    from codegen.errors import DescriptionError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            parse_source(data, path)
        except DescriptionError as error:
            return _judge_error(error, data, path)
        except Exception:  # noqa: BLE001 - any other exception is what the fuzzer looks for
            return "traceback", traceback.format_exc()
    return "accepted", ""


def _judge_error(error, data: bytes, path: str) -> tuple[str, str]:
    try:
        shown = str(error)
        # YAML also breaks lines at \r, U+0085, U+2028 and U+2029, XML at \r: either count is a line.
        lines = max(data.count(b"\n"), len(data.decode("utf-8", "replace").splitlines())) + 1
        for problem in error.problems:
            if problem.path != path:
                return "misreported", f"names file {problem.path!r}: {shown}"
            if problem.line is not None and not 1 <= problem.line <= lines:
                return "misreported", f"line {problem.line} outside 1..{lines}: {shown}"
        return "rejected", shown.splitlines()[0][:300]
    except Exception:  # noqa: BLE001 - formatting the error failed
        return "traceback", traceback.format_exc()


def error_details(data: bytes, path: str) -> tuple[str, str]:
    """Like ``parse_case``, but a rejection's detail is JSON: every problem's path, line, field and message.
    ``path`` may carry options after a NUL: ``name.urdf\0{"lock": {"j1": 1e400}}`` (URDF lock only)."""
    import warnings

    from codegen.description import parse_source
    from codegen.description.urdf import parse_urdf_text
    from codegen.errors import DescriptionError

    path, _, options = path.partition("\0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if options:
                parse_urdf_text(data, path, data, **json.loads(options, parse_int=int))
            else:
                parse_source(data, path)
        except DescriptionError as error:
            problems = [{"path": p.path, "line": p.line, "field": p.field, "message": p.message}
                        for p in error.problems]
            return "rejected", json.dumps({"text": str(error), "problems": problems})
        except Exception:  # noqa: BLE001
            return "traceback", traceback.format_exc()
    return "accepted", ""


def selftest_case(data: bytes, path: str) -> tuple[str, str]:
    """A stand-in target for testing the harness itself: hangs, raises, crashes or rejects on demand."""
    if data == b"hang":
        while True:
            time.sleep(1)
    if data == b"boom":
        try:
            raise ZeroDivisionError("boom")
        except ZeroDivisionError:
            return "traceback", traceback.format_exc()
    if data == b"crash":
        os._exit(9)
    return ("accepted", "") if data == b"ok" else ("rejected", "no")


TARGETS = {"parse": parse_case, "details": error_details, "selftest": selftest_case}


def _worker(connection, target: str) -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):
        pass
    run = TARGETS[target]
    while True:
        try:
            item = connection.recv()
        except EOFError:
            return
        if item is None:
            return
        data, path = item
        try:
            result = run(data, path)
        except BaseException:  # noqa: BLE001 - MemoryError, RecursionError in the harness itself
            result = ("traceback", traceback.format_exc())
        connection.send(result)


class _Slot:
    def __init__(self, context, target: str):
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child, target), daemon=True)
        self.process.start()
        child.close()
        self.case: Case | None = None
        self.started = 0.0

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.process.kill()
        else:
            try:
                self.connection.send(None)
            except OSError:
                pass
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()


def run_cases(cases, workers: int = 2, timeout: float = TIMEOUT, target: str = "parse"):
    """Yield (case, outcome, detail, seconds) for every case, ``workers`` at a time, each in a worker
    process that is killed (and replaced) when a case runs longer than ``timeout`` seconds."""
    if target in ("parse", "details"):  # import before forking, so that each worker starts warm
        import codegen.description  # noqa: F401
        import codegen.description.parse  # noqa: F401
        import codegen.description.urdf  # noqa: F401
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    pending = iter(cases)
    slots = [_Slot(context, target) for _ in range(max(1, workers))]
    busy: list[_Slot] = []
    try:
        exhausted = False
        while True:
            for slot in slots:
                if slot.case is None and not exhausted:
                    case = next(pending, None)
                    if case is None:
                        exhausted = True
                        break
                    slot.case, slot.started = case, time.monotonic()
                    slot.connection.send((case.data, case.path))
                    busy.append(slot)
            if not busy:
                return
            deadline = min(slot.started for slot in busy) + timeout
            ready = wait([slot.connection for slot in busy], timeout=max(0.0, deadline - time.monotonic()))
            now = time.monotonic()
            for slot in list(busy):
                outcome = None
                if slot.connection in ready:
                    try:
                        outcome, detail = slot.connection.recv()
                    except (EOFError, OSError):
                        outcome, detail = "crash", f"the worker died (exit code {slot.process.exitcode})"
                elif now - slot.started >= timeout:
                    outcome, detail = "hang", f"no result after {timeout:g} s"
                if outcome is None:
                    continue
                case, seconds = slot.case, now - slot.started
                busy.remove(slot)
                slot.case = None
                if outcome in ("crash", "hang"):
                    slots.remove(slot)
                    slot.stop(kill=True)
                    replacement = _Slot(context, target)
                    slots.append(replacement)
                yield case, outcome, detail, seconds
    finally:
        for slot in slots:
            slot.stop(kill=slot.case is not None)


# --- the whole command line on accepted cases ------------------------------------------------------

_ENTRY = re.compile(r"^[a-z][a-z0-9_]*-[0-9a-f]{16,}$")


def check_cli(case: Case, workdir: Path, timeout: float = CLI_TIMEOUT) -> tuple[str, str]:
    """Build an accepted case with ``python -m codegen``: ("ok" | "failure", detail)."""
    workdir.mkdir(parents=True, exist_ok=True)
    description = workdir / case.path
    description.write_bytes(case.data)
    cache = workdir / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROBODYN_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    try:
        result = subprocess.run([sys.executable, "-m", "codegen", str(description), "--cache-dir", str(cache)],
                                cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "failure", f"the command line did not finish within {timeout:g} s"
    problems = []
    # 3 is right for one refusal: the self-check of a model whose magnitudes double precision cannot
    # verify (a length of 4e98 m beside 0.1 m): nothing is published, the message names the check.
    refused = result.returncode == 3 and "self-check failed" in result.stderr
    if result.returncode not in (0, 1) and not refused:
        problems.append(f"exit status {result.returncode}")
    if "Traceback" in result.stderr:
        problems.append("a traceback on stderr")
    stray = [str(p.relative_to(cache)) for p in (cache.iterdir() if cache.is_dir() else [])
             if not (p.name.startswith(".lock-") and p.is_file())
             and not (p.is_dir() and _ENTRY.match(p.name) and (p / "manifest.json").is_file())]
    if stray:
        problems.append(f"stray files in the cache directory: {stray}")
    if problems:
        return "failure", "; ".join(problems) + f"\nstderr:\n{result.stderr[-3000:]}"
    return "ok", f"exit status {result.returncode}"


# --- a run ------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Report:
    seed: int
    cases: int
    counts: Counter  # (level, outcome) -> n
    failures: list  # (case, outcome, detail, reproducer path)
    cli: list  # (case, status, detail)
    seconds: float
    slowest: tuple = (0.0, None)

    def table(self) -> str:
        width = max(len(o) for o in OUTCOMES)
        head = f"{'level':<8}" + "".join(f"{o:>{width + 2}}" for o in OUTCOMES) + f"{'total':>9}"
        rows = [head, "-" * len(head)]
        for level in LEVELS + ("all",):
            counts = [sum(n for (lv, o), n in self.counts.items() if o == outcome and level in (lv, "all"))
                      for outcome in OUTCOMES]
            rows.append(f"{level:<8}" + "".join(f"{n:>{width + 2}}" for n in counts) + f"{sum(counts):>9}")
        cli_ok = sum(1 for _, status, _ in self.cli if status == "ok")
        rows.append(f"seed {self.seed}: {self.cases} cases in {self.seconds:.1f} s; "
                    f"slowest case {self.slowest[0]:.2f} s ({self.slowest[1]}); "
                    f"command line: {cli_ok}/{len(self.cli)} accepted cases built cleanly; "
                    f"failures: {len(self.failures) + len(self.cli) - cli_ok}")
        return "\n".join(rows)

    def describe_failures(self, limit: int = 10) -> str:
        parts = []
        for case, outcome, detail, saved in self.failures[:limit]:
            parts.append(f"{outcome}: seed {case.seed}, case {case.index} ({case.level}) from {case.source}; "
                         f"{case.mutation}\n  reproduce: python tests/fuzz_descriptions.py --seed {case.seed} "
                         f"--replay {case.index}   (bytes saved to {saved})\n{_indent(detail)}")
        for case, status, detail in self.cli:
            if status != "ok":
                parts.append(f"command line: seed {case.seed}, case {case.index} from {case.source}; "
                             f"{case.mutation}\n{_indent(detail)}")
        more = len(self.failures) - limit
        return "\n".join(parts) + (f"\n... and {more} more" if more > 0 else "")

    @property
    def ok(self) -> bool:
        return not self.failures and all(status == "ok" for _, status, _ in self.cli)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip().splitlines()[-40:])


def run(cases: int = 1000, seed: int = 1, workers: int = 2, timeout: float = TIMEOUT, cli_cases: int = 0,
        out: Path | None = None, progress: bool = False, first: int = 0, cli_timeout: float = CLI_TIMEOUT) -> Report:
    """Run cases ``first`` .. ``first + cases - 1`` of ``seed``; failures are saved under ``out``."""
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="robodyn-fuzz-"))
    seeds = seed_files()
    started = time.monotonic()
    counts: Counter = Counter()
    failures = []
    accepted: list[Case] = []
    slowest = (0.0, None)
    generated = (make_case(seed, index, seeds) for index in range(first, first + cases))
    for done, (case, outcome, detail, seconds) in enumerate(run_cases(generated, workers, timeout), 1):
        counts[case.level, outcome] += 1
        if seconds > slowest[0]:
            slowest = (seconds, f"case {case.index}, {case.mutation[:50]}")
        if outcome in FAILURES:
            saved = out / f"case-{seed}-{case.index}-{case.level}{Path(case.path).suffix}"
            out.mkdir(parents=True, exist_ok=True)
            saved.write_bytes(case.data)
            failures.append((case, outcome, detail, saved))
        elif outcome == "accepted":
            accepted.append(case)
        if progress and done % 500 == 0:
            print(f"  {done}/{cases} cases, {len(failures)} failures, {time.monotonic() - started:.0f} s",
                  file=sys.stderr, flush=True)
    cli = []
    # The command line on a few accepted cases, one per seed file, by index: mutated example robots
    # (small ones build in seconds), the rest of the accepted cases after them.
    chosen: list[Case] = []
    for case in sorted(accepted, key=lambda c: (not c.source.startswith("robots/"), "puma" in c.source, c.index)):
        if len(chosen) >= cli_cases:
            break
        if all(c.source != case.source for c in chosen):
            chosen.append(case)
    for case in chosen:
        status, detail = check_cli(case, out / f"cli-{case.index}", cli_timeout)
        cli.append((case, status, detail))
    return Report(seed, cases, counts, failures, cli, time.monotonic() - started, slowest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="index of the first case")
    parser.add_argument("--workers", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per case before it is a hang")
    parser.add_argument("--cli", type=int, default=0, help="accepted cases to build through python -m codegen")
    parser.add_argument("--out", type=Path, help="directory for the reproducers of failures")
    parser.add_argument("--replay", type=int, metavar="INDEX", help="run one case of --seed and show it")
    args = parser.parse_args(argv)
    if args.replay is not None:
        case = make_case(args.seed, args.replay)
        print(f"case {case.index} of seed {case.seed} ({case.level}) from {case.source}: {case.mutation}")
        print(f"{len(case.data)} bytes: {case.data[:400]!r}{' ...' if len(case.data) > 400 else ''}")
        for _, outcome, detail, seconds in run_cases([case], 1, args.timeout):
            print(f"{outcome} in {seconds:.2f} s\n{detail}")
            return 1 if outcome in FAILURES else 0
    report = run(args.cases, args.seed, args.workers, args.timeout, args.cli, args.out, progress=True,
                 first=args.first)
    print(report.table())
    if not report.ok:
        print(report.describe_failures(), file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
