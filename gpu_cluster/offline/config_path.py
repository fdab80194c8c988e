"""`--set KEY=VALUE` as `pulumi config set [--secret] [--path]` stores it in the config map."""

from __future__ import annotations

import re
from typing import Any

from gpu_cluster.config.loading import (
    MAX_DEPTH,
    MAX_EXACT_INT,
    TOO_DEEP,
    nesting_depth,
    number_problems,
    parse_json,
)
from gpu_cluster.config.messages import ConfigError, clipped
from gpu_cluster.config.schema import PROJECT
from gpu_cluster.offline import goyaml

# What `config set --path` would read as an integer if it fit in 64 bits.
_DECIMAL_INT = re.compile(r"[-+]?[1-9][0-9]*|-0[0-9]*")
_PATH_PART = re.compile(r"([^.\[\]:]+)|\[(\d+)\]")
# `key`, `key.sub`, `key[0]`, `key.list[2].sub`: every part named, no empty parts.
_PATH = re.compile(r"[^.\[\]:]+(\.[^.\[\]:]+|\[\d+\])*")


def _override_error(key: str, problem: str) -> ConfigError:
    return ConfigError(f"invalid stack config:\n  --set {clipped(key)}: {problem}")


def parse_assignment(assignment: str, project: str) -> tuple[str, str, list[str | int], str]:
    """`key=value` taken apart: the key as written, the fully qualified top-level key (a key
    without a namespace is the project's, as `pulumi config set` takes it), the path's parts
    (the top-level key's name first) and the value. ConfigError for a path that is none (never
    echoing the value, which may be secret)."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        # The argument is not echoed: with --set-secret it may be the secret itself.
        raise ConfigError("invalid stack config:\n  --set takes KEY=VALUE: an argument has no key")
    namespace, colon, path = key.partition(":")
    if not colon:
        namespace, path = project, key
    if not namespace or not _PATH.fullmatch(path):
        raise _override_error(
            key, "not a config path (write key, key.sub or key[0]; no empty parts)"
        )
    parts: list[str | int] = [
        m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _PATH_PART.finditer(path)
    ]
    return key, f"{namespace}:{parts[0]}", parts, raw


def apply_override(
    config: dict[str, Any], assignment: str, secret: bool = False, project: str = PROJECT
) -> str:
    """`key=value` as `pulumi config set [--secret] [--path] key value` would store it; returns
    the fully qualified top-level key it changed. Raises ConfigError naming the key for a path
    that does not fit the config's shape (never echoing the value, which may be secret)."""
    key, top, parts, raw = parse_assignment(assignment, project)
    if len(parts) == 1:
        config[top] = raw  # top-level values are always strings
        return top
    if len(parts) - 1 > MAX_DEPTH:
        raise _override_error(key, TOO_DEEP)
    # Nested values: "true"/"false" become booleans and base-10 integers numbers, the rest
    # stays text (`yes`, `1e3`, `05`, `0x1F`: goyaml.coerce_path_value). A secret stays text
    # (config/value.go coerceObject leaves a secure value alone).
    value = raw if secret else goyaml.coerce_path_value(raw)
    # One difference, a refusal: an integer beyond 2^53 - 1 is refused here, also one beyond
    # 64 bits, which the CLI would keep as text (the program could not take it as a number).
    if not secret and (
        (isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_EXACT_INT)
        or (isinstance(value, str) and _DECIMAL_INT.fullmatch(value))
    ):
        raise _override_error(key, "number too large (at most 2^53 - 1)")
    node = config.get(top)
    if isinstance(node, str):
        if nesting_depth(node) > MAX_DEPTH:
            raise _override_error(key, f"{top} is {TOO_DEEP}")
        try:
            node = parse_json(node)
        except ValueError:
            raise _override_error(key, f"{top} holds a plain value, not an object") from None
        if number_problems(node, top):
            raise _override_error(
                key,
                f"{top} holds a number beyond 2^53 - 1 or not finite, which the engine "
                "cannot carry",
            )
    root = node if node is not None else ({} if isinstance(parts[1], str) else [])
    config[top] = root
    cursor: Any = root
    for depth, part in enumerate(parts[1:], 1):
        problem = _step_problem(cursor, part)
        if problem:
            raise _override_error(key, f"{_path_text(parts[:depth])} {problem}")
        # Pulumi pads a list with nulls up to the index (properties_path.go, Add); no element
        # here may be null, so only the next free index is taken.
        if isinstance(part, int) and part == len(cursor):
            cursor.append(None)
        if depth == len(parts) - 1:
            cursor[part] = value
            break
        if (cursor[part] if isinstance(part, int) else cursor.get(part)) is None:
            cursor[part] = {} if isinstance(parts[depth + 1], str) else []
        cursor = cursor[part]
    return top


def remove_path(config: dict[str, Any], key: str, project: str = PROJECT) -> str:
    """Remove `key` (a config path, as `pulumi config rm --path` takes it) from `config`;
    returns the fully qualified top-level key. ConfigError for a key that is not set."""
    written, top, parts, _ = parse_assignment(f"{key}=", project)
    cursor: Any = config
    steps: list[str | int] = [top, *parts[1:]]
    for depth, part in enumerate(steps):
        present = (
            isinstance(cursor, dict) and part in cursor
            if isinstance(part, str)
            else isinstance(cursor, list) and part < len(cursor)
        )
        if not present:
            raise ConfigError(
                f"invalid stack config:\n  --unset {clipped(written)}: "
                f"{_path_text(parts[: depth + 1])} is not set"
            )
        if depth == len(steps) - 1:
            del cursor[part]
            break
        cursor = cursor[part]
    return top


def _step_problem(node: Any, part: str | int) -> str | None:
    """Why `part` cannot index `node` (None when it can; a list grows by one at its end)."""
    if isinstance(node, list):
        if isinstance(part, str):
            return f"is a list: it takes an index [N], not .{part}"
        if part > len(node):
            return f"has {len(node)} items: index [{part}] is out of range"
        return None
    if isinstance(node, dict):
        return f"is an object: it takes .key, not [{part}]" if isinstance(part, int) else None
    return "is a plain value: nothing is below it"


def _path_text(parts: list[str | int]) -> str:
    text = str(parts[0])
    for part in parts[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def changed_path(assignment: str, project: str) -> str:
    """The key path a `--set` assignment changes, fully qualified."""
    _, top, parts, _ = parse_assignment(assignment, project)
    return top + _path_text(parts)[len(str(parts[0])) :]


def on_one_branch(a: str, b: str) -> bool:
    """Whether key paths `a` and `b` are one, or one lies below the other."""
    short, long = sorted((a, b), key=len)
    return long == short or long.startswith((short + ".", short + "["))
