"""Stack configs edited as the tests edit them: `--set`-style overrides, and `!key` to remove
a key (shared by the offline tests and the real tier's renders, tools/realtier/stacks.py)."""

from __future__ import annotations

import functools
import json
import operator

from gpu_cluster.offline.stack_files import engine_config

# gcp-a4 as it shipped before it ran queued JobSets (#44 item 1): a StatefulSet on plain
# flex-start, with per-pod claims of the Hyperdisk Balanced class the stack creates. For the
# tests of what only that shape has: the created class, per-pod claims, the fabric check command.
A4_STATEFULSET = (
    "workload.kind=statefulset",
    "gcp.queuedProvisioning=false",
    "storage.mode=per-pod",
    "storage.storageClass=hyperdisk-balanced",
    "storage.storageClassMode=create",
    "!workload.command",
)


def edited_config(stack: str, overrides: tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    """`stack`'s engine config with `--set`-style overrides; `!key` removes a key (a block or
    value the edit leaves unread, which the program would refuse): `!workload` a top-level one,
    `!gcp.queuedProvisioning` one inside a block, `!namespace:key` one of another namespace."""
    removed = [o[1:] for o in overrides if o.startswith("!")]
    config, secret_keys = engine_config(stack, tuple(o for o in overrides if o[:1] != "!"))
    for key in removed:
        top, _, inner = key.partition(".")
        qualified = top if ":" in top else f"gpu-cluster:{top}"
        if not inner:
            del config[qualified]
            continue
        block = json.loads(config[qualified])
        *parents, last = inner.split(".")
        functools.reduce(operator.getitem, parents, block).pop(last)
        config[qualified] = json.dumps(block)
    return config, secret_keys
