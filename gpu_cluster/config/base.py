"""The base of every stack-config section: how its keys are spelled and checked."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel


class Section(BaseModel):
    """Stack-file keys are camelCase; unknown keys are errors, never silently ignored."""

    # Each field's docstring is its description: docs/config-reference.md is generated from
    # them (python -m tools.config_reference).
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        frozen=True,
        validate_default=True,
        use_attribute_docstrings=True,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """Pydantic reads true as 1 in a number's key (its lax mode): `maxAgeHours: true`
        would be an hour. A number's key takes a number (or its text), never a boolean."""
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _is_number(field.annotation):
            raise ValueError("is a boolean, but the key takes a number")
        return value


def _is_number(annotation: Any) -> bool:
    """Whether `annotation` takes numbers and no boolean: int, float, a Literal of numbers,
    or a union of them with None."""
    if annotation in (int, float):
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return all(isinstance(a, int | float) and not isinstance(a, bool) for a in args)
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in args if a is not type(None)]
        return bool(arms) and all(_is_number(a) for a in arms)
    return False
