"""The base of every stack-config section: how its keys are spelled and checked."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
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
