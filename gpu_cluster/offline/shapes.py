"""Parsed JSON or YAML checked against a type annotation: the one that declares what the render
writes (render.SHAPES), so an earlier render is read back by the declaration its writer is
type-checked with, not by a second list of fields to keep in step.

Understood: `Any`, `str`, `list[X]`, `dict[str, X]` (keys not checked: JSON's are strings) and
TypedDicts (their required keys must be there, each of its type; other keys are allowed, as a
TypedDict allows them).
"""

from __future__ import annotations

import typing
from typing import Any, is_typeddict

_NAMES = {dict: "an object", list: "a list", str: "a string", bool: "true or false"}


def kind(value: Any) -> str:
    """What `value` is, in JSON's words."""
    if value is None:
        return "null"
    for type_, name in _NAMES.items():  # bool before int: True is an int to isinstance
        if isinstance(value, type_):
            return name
    return "a number" if isinstance(value, (int, float)) else type(value).__name__


def problem(value: Any, shape: Any, where: str = "") -> str | None:
    """Why `value` does not have `shape`, naming where (a path from the file's top, such as
    `[3].metadata`); None when it has."""
    if shape is Any:
        return None
    origin = typing.get_origin(shape) or shape
    container = dict if is_typeddict(origin) else origin
    if not isinstance(value, container):
        return f"{where or 'the file'} is {kind(value)}, not {_NAMES[container]}"
    parts: list[tuple[str, Any, Any]] = []  # (where, value, shape) of each part to check
    if is_typeddict(origin):
        missing = sorted(origin.__required_keys__ - set(value))
        if missing:
            return f"{where or 'the file'} has no {missing[0]!r}"
        hints = typing.get_type_hints(origin)
        parts = [(_key(where, k), value[k], hints[k]) for k in hints if k in value]
    elif container is list:
        parts = [(f"{where}[{i}]", item, typing.get_args(shape)[0]) for i, item in enumerate(value)]
    elif container is dict:
        parts = [(_key(where, k), item, typing.get_args(shape)[1]) for k, item in value.items()]
    return next((p for w, v, s in parts if (p := problem(v, s, w)) is not None), None)


def _key(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
