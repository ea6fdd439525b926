"""Read YAML into plain Python data while remembering where each value was.

PyYAML's composer gives nodes with source marks; we construct plain dicts,
lists and scalars ourselves so that every value keeps its line number, and so
that duplicate keys are an error instead of a silent overwrite.

The input is hostile until proven otherwise, so reading it is bounded before any
value is built: the text's size (``MAX_CHARS``), the nesting depth
(``MAX_DEPTH``), the number of nodes the composer creates and the number of
nodes the tree has once every alias is expanded (``MAX_NODES``: an alias bomb is
a few hundred bytes that expand to 10^9 nodes), the number of alias uses
(``MAX_ALIASES``), the digits of an integer (``MAX_INT_DIGITS``), the length of
a key (``MAX_KEY_LENGTH``). An alias may not refer to a node that contains it
(``f: &r [*r]``). Only the plain scalar types (null, booleans, integers, floats,
strings) are built; any other tag (``!!timestamp``, ``!!binary``,
``!!python/...``, ``!!set``, merge keys ``<<``) is refused before construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from ..errors import DescriptionError

MAX_CHARS = 1_000_000  # a robot description is a few kilobytes
MAX_DEPTH = 64
MAX_NODES = 20_000
MAX_ALIASES = 100
MAX_INT_DIGITS = 100
MAX_KEY_LENGTH = 100  # keys end up in every message's field path


@dataclass
class Located:
    """A YAML value with the 1-based line it starts on."""

    value: Any
    line: int
    children: dict = field(default_factory=dict)  # key or index -> Located


_YAML = "tag:yaml.org,2002:"
_PLAIN_TAGS = {yaml.MappingNode: _YAML + "map", yaml.SequenceNode: _YAML + "seq"}
_SCALAR_TAGS = {_YAML + name for name in ("null", "bool", "int", "float", "str")}


def _join(field: str, key) -> str:
    if isinstance(key, int):
        return f"{field}[{key}]"
    return f"{field}.{key}" if field else str(key)


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_YAML):] if tag.startswith(_YAML) else tag


class _Refused(Exception):
    """A limit of the composer, raised where the offending node starts."""

    def __init__(self, mark, field: str, message: str):
        self.mark, self.field, self.message = mark, field, message


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader whose composer counts depth, nodes and aliases as it goes, and records each
    node's size with every alias expanded, so that nothing is built from an unbounded tree."""

    def __init__(self, text: str):
        super().__init__(text)
        self.fields: list[str] = []
        self.open_anchors: set[str] = set()
        self.composed = 0
        self.aliases = 0
        self.sizes: dict[int, int] = {}  # id(node) -> nodes in it, aliases expanded
        self.heights: dict[int, int] = {}  # id(node) -> depth of its deepest leaf, aliases expanded

    def _field(self, index) -> str:
        here = self.fields[-1] if self.fields else ""
        if index is None or not self.fields:
            return here
        if isinstance(index, int):
            return _join(here, index)
        key = index.value if isinstance(index, yaml.ScalarNode) else "?"
        if len(key) > MAX_KEY_LENGTH:  # refused later; until then every field below it would copy it
            key = key[:MAX_KEY_LENGTH] + "..."
        return _join(here, key)

    def compose_node(self, parent, index):
        field = self._field(index) if parent is not None else ""
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _Refused(event.start_mark, field, f"more than {MAX_ALIASES} YAML aliases (*name); "
                               "write the values out instead")
            if event.anchor in self.open_anchors:
                raise _Refused(event.start_mark, field, f"YAML alias *{event.anchor} refers to a node that "
                               "contains it (a recursive structure)")
            return super().compose_node(parent, index)
        self.composed += 1
        if self.composed > MAX_NODES:
            raise _Refused(event.start_mark, field, f"the description has more than {MAX_NODES} YAML nodes")
        if len(self.fields) >= MAX_DEPTH:
            raise _Refused(event.start_mark, field, f"YAML nesting deeper than {MAX_DEPTH} levels")
        anchor = getattr(event, "anchor", None)
        self.fields.append(field)
        if anchor is not None:
            self.open_anchors.add(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            self.fields.pop()
            self.open_anchors.discard(anchor)
        self._measure(node, event.start_mark, field)
        return node

    def _measure(self, node: yaml.Node, mark, field: str) -> None:
        children = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        size = 1 + sum(self.sizes[id(child)] for child in children)
        height = 1 + max((self.heights[id(child)] for child in children), default=0)
        if size > MAX_NODES:
            raise _Refused(mark, field, f"with its YAML aliases expanded this value has more than {MAX_NODES} "
                           "nodes (an alias bomb?)")
        if height + len(self.fields) > MAX_DEPTH:
            raise _Refused(mark, field, f"with its YAML aliases expanded this value nests deeper than "
                           f"{MAX_DEPTH} levels")
        self.sizes[id(node)] = size
        self.heights[id(node)] = height


def _scalar(node: yaml.ScalarNode, loader: yaml.SafeLoader, path: str, field: str, line: int) -> Any:
    if node.tag not in _SCALAR_TAGS:
        raise DescriptionError(path, line, field, f"YAML tag {_short_tag(node.tag)!r} is not allowed "
                               "(only numbers, strings, booleans and null)")
    if node.tag == _YAML + "int":
        digits = sum(c.isalnum() for c in node.value)
        if digits > MAX_INT_DIGITS:
            raise DescriptionError(path, line, field, f"integer with {digits} digits is too long "
                                   f"(at most {MAX_INT_DIGITS})")
    try:
        return loader.construct_object(node)
    except (ValueError, TypeError, LookupError, OverflowError, ArithmeticError, yaml.YAMLError) as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        raise DescriptionError(path, line, field, f"invalid {_short_tag(node.tag)} value "
                               f"{node.value[:40]!r}: {problem}") from None


def _build(node: yaml.Node, loader: yaml.SafeLoader, path: str, field: str, line: int) -> Located:
    """``line`` is where the value's key (or list dash) is: what a user looks at."""
    expected_tag = _PLAIN_TAGS.get(type(node))
    if expected_tag is not None and node.tag != expected_tag:
        raise DescriptionError(path, line, field, f"YAML tag {_short_tag(node.tag)!r} is not allowed")
    if isinstance(node, yaml.MappingNode):
        located = Located({}, line)
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise DescriptionError(path, key_line, field, "mapping keys must be plain strings")
            key = _scalar(key_node, loader, path, field, key_line)
            if not isinstance(key, str):
                key = str(key)
            if len(key) > MAX_KEY_LENGTH:
                raise DescriptionError(path, key_line, field, f"a mapping key of {len(key)} characters "
                                       f"(at most {MAX_KEY_LENGTH}): {key[:40]!r}...")
            if key in located.value:
                raise DescriptionError(path, key_line, _join(field, key), "duplicate key")
            child = _build(value_node, loader, path, _join(field, key), key_line)
            located.value[key] = child.value
            located.children[key] = child
        return located
    if isinstance(node, yaml.SequenceNode):
        located = Located([], line)
        for index, item in enumerate(node.value):
            child = _build(item, loader, path, _join(field, index), item.start_mark.line + 1)
            located.value.append(child.value)
            located.children[index] = child
        return located
    return Located(_scalar(node, loader, path, field, line), line)


def check_size(size: int, path: str, unit: str = "bytes") -> None:
    """Refuse a description larger than ``MAX_CHARS`` before reading it."""
    if size > MAX_CHARS:
        raise DescriptionError(path, None, "", f"the description is {size} {unit} long; "
                               f"descriptions are limited to {MAX_CHARS} {unit}")


def load_yaml(text: str, path: str) -> Located:
    """Parse YAML text; syntax errors and exceeded limits become DescriptionError with a line."""
    check_size(len(text), path, "characters")
    try:
        loader = _BoundedLoader(text)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        character = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise DescriptionError(path, line, "", f"character U+{character:04X} at column {column} is not allowed "
                               "in YAML (control and other non-printable characters)") from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise DescriptionError(path, 1, "", "the description is empty")
        return _build(node, loader, path, "", node.start_mark.line + 1)
    except _Refused as exc:
        raise DescriptionError(path, exc.mark.line + 1, exc.field, exc.message) from None
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise DescriptionError(path, line, "", f"YAML error: {exc.problem or exc}") from None
    except yaml.MarkedYAMLError as exc:
        # The context mark is where the broken construct began (an unclosed bracket, say);
        # the problem mark is where the parser gave up, often a line later.
        mark = exc.context_mark or exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        detail = exc.problem or str(exc)
        if exc.context and exc.problem_mark is not None:
            detail = f"{detail} (line {exc.problem_mark.line + 1}), {exc.context} started here"
        raise DescriptionError(path, line, "", f"YAML syntax error: {detail}") from None
    except yaml.YAMLError as exc:
        raise DescriptionError(path, None, "", f"YAML error: {exc}") from None
    finally:
        loader.dispose()
