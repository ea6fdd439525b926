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


def _build(node: yaml.Node, loader: yaml.SafeLoader, path: str) -> Located:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        located = Located({}, line)
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise DescriptionError(path, key_node.start_mark.line + 1, "", "mapping keys must be plain strings")
            key = loader.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key)
            if key in located.value:
                raise DescriptionError(path, key_node.start_mark.line + 1, key, "duplicate key")
            child = _build(value_node, loader, path)
            located.value[key] = child.value
            located.children[key] = child
        return located
    if isinstance(node, yaml.SequenceNode):
        located = Located([], line)
        for index, item in enumerate(node.value):
            child = _build(item, loader, path)
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
        return _build(node, loader, path)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise DescriptionError(path, line, "", f"YAML syntax error: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise DescriptionError(path, None, "", f"YAML error: {exc}") from None
    finally:
        loader.dispose()
