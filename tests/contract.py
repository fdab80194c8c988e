"""What the config-contract tests share: a config map edited at any key path as the engine
would hand it over, values JSON cannot write (nested 10,000 deep, 5,000 digits), and what
kind of value each key of the schema takes."""

from __future__ import annotations

import itertools
import json
import re
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import AfterValidator
from pydantic.fields import FieldInfo

from gpu_cluster.config import quantities
from gpu_cluster.config.schema import PROJECT


@dataclass(frozen=True)
class RawJson:
    """JSON text set as it is: what json.dumps cannot write from Python values (a list nested
    10,000 deep, an integer of 5,000 digits, 1e400)."""

    text: str


DEEP = 10_000
DEEP_LIST = RawJson("[" * DEEP + "]" * DEEP)
DEEP_OBJECT = RawJson('{"a":' * DEEP + "1" + "}" * DEEP)
HUGE_INT = RawJson("9" * 5000)  # Python's int() stops at 4300 digits

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
# Stands for a RawJson value while the rest of the section is written with json.dumps.
_SPLICE = "\x00raw\x00"


def set_key(config: dict[str, str], key: str, value: Any) -> None:
    """Set `key` as `pulumi config set [--path]` stores it: top-level values as text, nested
    ones inside the section's JSON (replacing whatever shape was there)."""
    parts = [m.group(1) or int(m.group(2)) for m in _PART.finditer(key)]
    top = f"{PROJECT}:{parts[0]}"
    raw = value.text if isinstance(value, RawJson) else None
    if len(parts) == 1:
        config[top] = (
            raw if raw is not None else value if isinstance(value, str) else (json.dumps(value))
        )
        return
    try:
        root = json.loads(config.get(top, "{}"))
    except (ValueError, RecursionError):  # what an earlier edit set here may be anything
        root = {}
    root = root if isinstance(root, dict) else {}
    node: Any = root
    for part, nxt in itertools.pairwise(parts[1:]):
        empty: Any = [] if isinstance(nxt, int) else {}
        if isinstance(part, int):
            while len(node) <= part:
                node.append({})
            if not isinstance(node[part], type(empty)):
                node[part] = empty
        elif not isinstance(node.get(part), type(empty)):
            node[part] = empty
        node = node[part]
    last = parts[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    node[last] = _SPLICE if raw is not None else value
    text = json.dumps(root)
    config[top] = text if raw is None else text.replace(json.dumps(_SPLICE), raw)


Kind = Literal["int", "float", "quantity", "cpu", "size", "bytes", "other"]


def kind_of(key: str, field: FieldInfo) -> Kind:
    """What a key of the schema takes, from its field: a number, a Kubernetes quantity (of
    CPU, or a size that must be above zero), a byte count (verify.maxBytes), or other."""
    metadata = [*field.metadata, *_metadata(field.annotation)]
    validators = {m.func for m in metadata if isinstance(m, AfterValidator)}
    if quantities.check_cpu in validators:
        return "cpu"
    if quantities.check_size in validators:
        return "size"
    if quantities.check_quantity in validators:
        return "quantity"
    if key == "verify.maxBytes":
        return "bytes"
    found = _types(field.annotation)
    if float in found:
        return "float"
    return "int" if int in found else "other"


def _metadata(annotation: Any) -> list[Any]:
    found = list(getattr(annotation, "__metadata__", ()))
    for arg in typing.get_args(annotation):
        found += _metadata(arg)
    return found


def _types(annotation: Any) -> set[Any]:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is Literal:
        return set()
    if not args:
        return {annotation}
    return {t for arg in args for t in _types(arg)}
