"""ConfigError and how validation errors are worded: key path, value (clipped, secrets masked)
and what is allowed."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import BaseModel, ValidationError

from gpu_cluster.config.schema import PROJECT, Settings


class ConfigError(ValueError):
    """Stack config that cannot be deployed; the message names every offending key."""


# What a message shows in place of a secret value.
SECRET_MASK = "[secret]"


# The branch names pydantic gives a union's plain scalar members in an error's location.
_SCALAR_BRANCHES = frozenset({"int", "str", "float", "bool", "bytes", "none"})


def _key_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif "[" in part or part in _SCALAR_BRANCHES:
            continue  # pydantic's union-branch names (literal[...], function-after[...]), not keys
        else:
            path += ("." if path else "") + part
    return path


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    model: type[BaseModel] | None = Settings
    for part in loc[:-1]:
        if model is None or isinstance(part, int):
            continue
        field = next((f for f in model.model_fields.values() if f.alias == part), None)
        model = nested_model(field.annotation) if field else None
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The settings section a field's annotation holds (through Optional, tuple, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = nested_model(arg)
        if found:
            return found
    return None


# Longer values are clipped in messages: the key and the start of the value are what help.
_MAX_SHOWN = 80


def clipped(text: str) -> str:
    """`text`, cut to _MAX_SHOWN characters."""
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _long_enough_but_for_bad_items(too_short: Any, errors: Collection[Any]) -> bool:
    """Whether a list pydantic calls too short has enough items as written, some of which have
    errors of their own."""
    loc, given = too_short["loc"], too_short["input"]
    n = len(loc)
    minimum = (too_short.get("ctx") or {}).get("min_length", 0)
    return (
        isinstance(given, list | tuple)
        and len(given) >= minimum
        and any(
            len(e["loc"]) > n and e["loc"][:n] == loc and isinstance(e["loc"][n], int)
            for e in errors
        )
    )


def _literal_branch(err: Any) -> bool:
    """Whether `err` is a union's Literal member refusing the value (`Literal["own"] | HostName`
    fails in each member: one error per branch, all at the same key)."""
    loc = err["loc"]
    return err["type"] == "literal_error" and bool(loc) and str(loc[-1]).startswith("literal[")


def _union_alternatives(errors: Collection[Any]) -> dict[str, str]:
    """For each key whose union refused a value in a Literal member and in another: the
    Literal's allowed words, which that other member's line then ends with."""
    keys = {_key_path(e["loc"]) for e in errors if not _literal_branch(e)}
    return {
        _key_path(e["loc"]): e["ctx"]["expected"]
        for e in errors
        if _literal_branch(e) and _key_path(e["loc"]) in keys
    }


def format_errors(exc: ValidationError, secret: Collection[str] = ()) -> str:
    """One line per problem: the key as written, the value (clipped) and what is allowed. The
    input of a problem under a `secret` top-level key is never formatted: `[secret]` stands in
    its place. (The problem's wording there is pydantic's own, which never quotes the input:
    the parts of a secret `codeSync` that have validators of ours are refused before.)"""
    errors = exc.errors()
    alternatives = _union_alternatives(errors)
    lines = []
    for err in errors:
        loc = err["loc"]
        if err["type"] == "too_short" and _long_enough_but_for_bad_items(err, errors):
            continue  # pydantic counts only the valid items; the bad ones are named already
        key = _key_path(loc)
        if key in alternatives and _literal_branch(err):
            continue  # said at the end of the other member's line
        shown = SECRET_MASK if loc and loc[0] in secret else clipped(repr(err["input"]))
        msg = err["msg"].removeprefix("Value error, ")
        if key in alternatives:
            msg = f"{msg}; or else {alternatives[key]}"
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(_allowed_keys(loc))
            lines.append(f"{PROJECT}:{key}: unknown key (a typo?); allowed here: {allowed}")
        elif not key:
            lines.extend(msg.split("\n"))
        elif err["type"] == "missing":
            lines.append(f"{PROJECT}:{key}: required but not set")
        elif isinstance(err["input"], dict):
            lines.append(f"{PROJECT}:{key}: {msg}")
        else:
            lines.append(f"{PROJECT}:{key} = {shown}: {msg}")
    unique = list(dict.fromkeys(lines))
    return "invalid stack config:\n  " + "\n  ".join(unique)
