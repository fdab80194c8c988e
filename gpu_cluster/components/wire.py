"""A resource's inputs as the engine sends them: Pulumi's typed Args turned into the plain,
camelCase objects a manifest holds, for objects that copy another's input (a run template)."""

from __future__ import annotations

from typing import Any

import pulumi

# The SDK's own map from an Args class to its properties under their Pulumi (wire) names, the one
# its serializer uses (pulumi sdk/python/lib/pulumi/_types.py input_type_to_dict); no public
# function gives it.
from pulumi._types import input_type_to_dict, is_input_type


def _plain(value: Any) -> Any:
    if is_input_type(type(value)):
        value = input_type_to_dict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def wire_form(value: pulumi.Input[Any]) -> pulumi.Output[Any]:
    """`value` (Args, dicts and lists, with Outputs anywhere in them) as plain data, once every
    Output in it is known; it depends on just the resources those Outputs come from."""
    return pulumi.Output.from_input(value).apply(_plain)
