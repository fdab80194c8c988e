"""Which keys a stack reads: a key that only some configurations read says when, beside its
field in the schema, and a key set where it is not read is refused by name (rules.py).

The schema is the one place this is written: `Annotated[<type>, ReadWhen(<predicate>, <words>)]`
on the field. The predicate gets the whole validated config, so a NIC field can depend on the
platform or on how the NICs' attachments are managed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

if TYPE_CHECKING:  # the schema imports this module
    from gpu_cluster.config.schema import Settings


@dataclass(frozen=True)
class ReadWhen:
    """The stack reads the key only when `applies(settings)`; `when` completes "only used
    when ..." in the refusal."""

    applies: Callable[[Settings], bool]
    when: str

    def refusal(self, key: str) -> str:
        return f"gpu-cluster:{key} is only used when {self.when}; remove it"


def read_rule(field: FieldInfo | None) -> ReadWhen | None:
    """The ReadWhen on a schema field, None when the stack always reads it."""
    return next((m for m in field.metadata if isinstance(m, ReadWhen)), None) if field else None


def unread_keys(root: Settings) -> list[str]:
    """One message per key the stack sets but does not read (a section counts once)."""
    out: list[str] = []

    def walk(model: BaseModel, path: str) -> None:
        fields = type(model).model_fields
        for name in fields:  # schema order, so messages come in the config reference's order
            # An explicit null is the key left out (every optional key defaults to None).
            if name not in model.model_fields_set or getattr(model, name) is None:
                continue
            field = fields[name]
            key = path + (field.alias or name)
            rule = read_rule(field)
            if rule is not None and not rule.applies(root):
                out.append(rule.refusal(key))
                continue
            for item_path, item in _sections(key, getattr(model, name)):
                walk(item, item_path + ".")

    walk(root, "")
    return out


def _sections(key: str, value: Any) -> list[tuple[str, BaseModel]]:
    if isinstance(value, BaseModel):
        return [(key, value)]
    if isinstance(value, tuple):
        return [(f"{key}[{i}]", v) for i, v in enumerate(value) if isinstance(v, BaseModel)]
    return []


# Keys of the fabric and storage checks: read only when the checks ship.
VERIFY_ENABLED = ReadWhen(lambda s: s.verify.enabled, "verify.enabled is true")
