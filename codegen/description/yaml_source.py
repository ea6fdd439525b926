"""Read YAML into plain Python data while remembering where each value was.

PyYAML's composer gives nodes with source marks; we construct plain dicts,
lists and scalars ourselves so that every value keeps its line number, and so
that duplicate keys are an error instead of a silent overwrite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from ..errors import DescriptionError


@dataclass
class Located:
    """A YAML value with the 1-based line it starts on."""

    value: Any
    line: int
    children: dict = field(default_factory=dict)  # key or index -> Located


_PLAIN_TAGS = {yaml.MappingNode: "tag:yaml.org,2002:map", yaml.SequenceNode: "tag:yaml.org,2002:seq"}


def _join(field: str, key) -> str:
    if isinstance(key, int):
        return f"{field}[{key}]"
    return f"{field}.{key}" if field else str(key)


def _build(node: yaml.Node, loader: yaml.SafeLoader, path: str, field: str, line: int) -> Located:
    """``line`` is where the value's key (or list dash) is: what a user looks at."""
    expected_tag = _PLAIN_TAGS.get(type(node))
    if expected_tag is not None and node.tag != expected_tag:
        raise DescriptionError(path, line, field, f"YAML tag {node.tag!r} is not allowed")
    if isinstance(node, yaml.MappingNode):
        located = Located({}, line)
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise DescriptionError(path, key_line, field, "mapping keys must be plain strings")
            key = loader.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key)
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
    return Located(loader.construct_object(node), line)


def load_yaml(text: str, path: str) -> Located:
    """Parse YAML text; syntax errors become DescriptionError with a line."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise DescriptionError(path, 1, "", "the description is empty")
        return _build(node, loader, path, "", node.start_mark.line + 1)
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
