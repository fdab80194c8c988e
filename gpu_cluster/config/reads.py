"""Which keys a stack reads: a key that only some configurations read says when, beside its
field in the schema, and a key set where it is not read is refused by name (rules.py).

The schema is the one place this is written: `Annotated[<type>, ReadWhen(<predicate>, <words>)]`
on the field. The predicate gets the whole validated config, so a NIC field can depend on the
platform or on how the NICs' attachments are managed.

The one exception: a network mode's own section (`tcp`, `rdma`), set while the stack runs
another mode that the platform would read it under, is dormant: kept for the way back, unread,
and named in a warning instead of refused. Its own keys are still held to the rules they would
meet in its mode, so switching back needs nothing but `networkMode`.
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
    when ..." in the refusal. `mode`: the network mode whose own section the key is, which
    another mode keeps dormant (the module's docstring)."""

    applies: Callable[[Settings], bool]
    when: str
    mode: str | None = None

    def refusal(self, key: str) -> str:
        return f"gpu-cluster:{key} is only used when {self.when}; remove it"

    def dormant_in(self, settings: Settings) -> Settings | None:
        """For a key the stack does not read under `settings`: the settings switched to the
        section's network mode, when that switch alone has the stack read the key (its section
        is dormant); else None."""
        if self.mode is None:
            return None
        switched = settings.model_copy(update={"network_mode": self.mode})
        return switched if self.applies(switched) else None

    def note(self, key: str, settings: Settings) -> str:
        return (
            f"gpu-cluster:{key} is kept but not used while networkMode is "
            f"{settings.network_mode!r}; it is used again when networkMode is {self.mode!r}"
        )


def read_rule(field: FieldInfo | None) -> ReadWhen | None:
    """The ReadWhen on a schema field, None when the stack always reads it."""
    return next((m for m in field.metadata if isinstance(m, ReadWhen)), None) if field else None


def unread_keys(root: Settings) -> list[str]:
    """One message per key the stack sets but does not read (a section counts once), but for
    dormant sections."""
    return _reads(root)[0]


def dormant_sections(root: Settings) -> list[str]:
    """A warning per dormant section the stack sets: kept, not used, and when it is again."""
    return _reads(root)[1]


def _reads(root: Settings) -> tuple[list[str], list[str]]:
    """The refusals of unread keys and the notes of dormant sections, in schema order."""
    refusals: list[str] = []
    notes: list[str] = []

    def walk(model: BaseModel, path: str, reader: Settings) -> None:
        """`reader`: the settings the keys are judged under (inside a dormant section: as
        switched to its mode)."""
        fields = type(model).model_fields
        for name in fields:  # schema order, so messages come in the config reference's order
            # An explicit null is the key left out (every optional key defaults to None).
            if name not in model.model_fields_set or getattr(model, name) is None:
                continue
            field = fields[name]
            key = path + (field.alias or name)
            rule = read_rule(field)
            inner = reader
            if rule is not None and not rule.applies(reader):
                switched = rule.dormant_in(reader)
                if switched is None:
                    refusals.append(rule.refusal(key))
                    continue
                notes.append(rule.note(key, reader))
                inner = switched
            for item_path, item in _sections(key, getattr(model, name)):
                walk(item, item_path + ".", inner)

    walk(root, "", root)
    return refusals, notes


def _sections(key: str, value: Any) -> list[tuple[str, BaseModel]]:
    if isinstance(value, BaseModel):
        return [(key, value)]
    if isinstance(value, tuple):
        return [(f"{key}[{i}]", v) for i, v in enumerate(value) if isinstance(v, BaseModel)]
    return []


# Keys of the fabric and storage checks: read only when the checks ship.
VERIFY_ENABLED = ReadWhen(lambda s: s.verify.enabled, "verify.enabled is true")

# Keys of GKE stacks only.
ON_GKE = ReadWhen(lambda s: s.platform == "gke", "platform is 'gke'")
