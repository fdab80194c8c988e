"""Which of its own project's config keys a program read: a program of another project (one
that composes this package's components) reads them with pulumi.Config, which never says
when a key is set that nothing reads (`--set nodse=3`). The render does."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from typing import Any

import pulumi.config
from pulumi.runtime.config import get_config

from gpu_cluster.config.providers import edit_distance
from gpu_cluster.config.schema import PROJECT


@contextlib.contextmanager
def recorded_reads() -> Iterator[set[str]]:
    """The fully qualified keys the program asks pulumi.Config for while the block runs: every
    getter of pulumi.Config goes through pulumi.config.get_config (pulumi/config.py `_get`,
    SDK 3.272.0)."""
    read: set[str] = set()

    def recording(key: str) -> Any:
        read.add(key)
        return get_config(key)

    # pulumi.config imports get_config by name; its namespace is where Config looks it up.
    namespace = vars(pulumi.config)
    namespace["get_config"] = recording
    try:
        yield read
    finally:
        namespace["get_config"] = get_config


def unread_warnings(config: Iterable[str], read: set[str], project: str) -> list[str]:
    """A warning per key of `project`'s own namespace that the program never read (this
    package's own program checks its keys against its schema instead)."""
    if project == PROJECT:
        return []
    prefix = project + ":"
    read_names = sorted(k[len(prefix) :] for k in read if k.startswith(prefix))
    warnings = []
    for key in sorted(config):
        name = re.split(r"[.\[]", key[len(prefix) :])[0] if key.startswith(prefix) else None
        if name is None or f"{prefix}{name}" in read:
            continue
        near = [n for n in read_names if edit_distance(name.lower(), n.lower()) <= 2]
        meant = f" (did you mean {prefix}{near[0]}?)" if near else ""
        warnings.append(
            f"{key}: set, but the program never read it with pulumi.Config{meant}; ignored"
        )
    return warnings
