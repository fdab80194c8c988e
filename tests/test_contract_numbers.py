"""Contract, class 10: thresholds and sizes are finite numbers their consumers can hold.

Refused, naming the key, offline (`--set`) and under the engine (the config map's JSON):
- a number that is not finite (`nan`, `inf`, `1e400`) or beyond 2^53 - 1 where an integer goes
  (the engine carries numbers as doubles), an integer written `1e3` or `2.5` (`pulumi config
  set --path` stores that as text);
- a Kubernetes quantity above 2^63 - 1 (`8Ei`, `1e19`, `9999999999999999999999Ei`): the API
  server caps a binary one there silently and what reads a decimal one overflows
  (kubernetes/apimachinery pkg/api/resource: math.go maxAllowed, "Largest (in magnitude)
  number allowed"; quantity.go ParseQuantity "The max is just a simple cap", Value "This
  silently overflows an int64"); a CPU quantity above (2^63 - 1) / 1000 cores, which
  MilliValue overflows (math.go MaxMilliValue);
- `verify.expectedBusbwGbps` above what the fabric carries (without a known fabric, the fastest
  GPU link: NVLink 5, 1,800 GB/s), a data volume's `minWriteGbps` / `minReadGbps` above that
  link too, `verify.maxBytes` above 2^63 - 1 bytes.
Negative zero is zero: it is taken where 0 is and refused where 0 is. The keys are the
schema's own, each with the members of what it takes (tests/contract.py kind_of).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.loading import settings_from
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.offline.stack_files import checked_config, engine_config
from tests.as_of import AS_OF
from tests.conftest import schema_leaves
from tests.contract import HUGE_INT, RawJson, kind_of, set_key

KINDS = {key: kind_of(key, field) for key, field in schema_leaves("[0]").items()}
NUMERIC = sorted(key for key, kind in KINDS.items() if kind != "other")
QUANTITY_MAX = 2**63 - 1

NOT_FINITE: list[Any] = [math.nan, math.inf, -math.inf, RawJson("1e400")]
# (JSON values in the engine's config map, --set texts) each kind refuses.
REFUSED: dict[str, tuple[list[Any], list[str]]] = {
    "int": (
        [*NOT_FINITE, 1e308, 2**53 + 1, 2**63, HUGE_INT, 2.5],
        ["nan", "inf", "1e3", "2.5", "1e400", str(2**63), HUGE_INT.text],
    ),
    "float": ([*NOT_FINITE, 1e308], ["nan", "inf", "-inf", "Infinity", "1e308", "1e400"]),
    "quantity": (
        [*NOT_FINITE, 1e308, 2**63],
        ["1e400", "9999999999999999999999Ei", "8Ei", "8192Pi", str(QUANTITY_MAX + 1), "1e19"],
    ),
    "bytes": ([*NOT_FINITE, 2**63], [str(QUANTITY_MAX + 1), "9999999999999999999G", "9" * 5000]),
}
REFUSED["size"] = REFUSED["quantity"]
# CPU is read in millicores: a thousandth of what a quantity holds.
REFUSED["cpu"] = (REFUSED["quantity"][0], [*REFUSED["quantity"][1], "9223372036854776"])


def stack_for(key: str) -> str:
    """A stack that reads the key; verify's on a tcp one, whose fabric sets no ceiling; a data
    volume's and the queue's on the one with volumes and a queue."""
    if key.startswith(("verify.", "tcp.")):
        return "nerc-production"
    if key.startswith(("storage.volumes", "workload.queue")):
        return "gcp-a4"
    return "gcp-a3" if key.startswith("gcp.") else "barcelona"


# What a key needs beside it to be read: a write rate only on a volume mounted read-write
# (gcp-a4's first volume is read-only).
BESIDE: dict[str, tuple[tuple[str, Any], ...]] = {
    "storage.volumes[0].minWriteGbps": (("storage.volumes[0].readOnly", False),),
    # A priority class is a name and a value.
    "workload.queue.priorityClasses[0].value": (
        ("workload.queue.priorityClasses[0].name", "high"),
    ),
}


@functools.cache
def _engine_config(stack: str) -> tuple[dict[str, str], list[str]]:
    return engine_config(stack)


def engine_refusal(key: str, value: Any) -> str | None:
    """settings_from's message for the stack's config map with `value` at `key` (None: taken)."""
    config, secret_keys = _engine_config(stack_for(key))
    config = dict(config)
    for beside, beside_value in BESIDE.get(key, ()):
        set_key(config, beside, beside_value)
    set_key(config, key, value)
    try:
        settings_from(config, secret_keys, PROVIDER_SETTINGS, as_of=AS_OF)
    except ConfigError as exc:
        return str(exc)
    return None


def offline_refusal(key: str, text: str) -> str | None:
    """The offline render's message for `--set key=text` (None: taken)."""
    beside = tuple(f"{k}={str(v).lower()}" for k, v in BESIDE.get(key, ()))
    try:
        checked_config(stack_for(key), (*beside, f"{key}={text}"))
    except ConfigError as exc:
        return str(exc)
    return None


def members(way: int) -> list[tuple[str, Any]]:
    return [(key, value) for key in NUMERIC for value in REFUSED[KINDS[key]][way]]


def test_the_schema_has_keys_of_every_kind() -> None:
    assert set(KINDS.values()) == {"int", "float", "quantity", "cpu", "size", "bytes", "other"}


@pytest.mark.parametrize(("key", "value"), members(0))
def test_under_the_engine_an_absurd_number_is_refused_by_key(key: str, value: Any) -> None:
    message = engine_refusal(key, value)
    assert message is not None
    assert f"gpu-cluster:{key}" in message, message


@pytest.mark.parametrize(("key", "text"), members(1))
def test_offline_an_absurd_number_is_refused_by_key(key: str, text: str) -> None:
    message = offline_refusal(key, text)
    assert message is not None
    assert key in message, message
    assert len(message) < 1000


def same_answer(key: str, at_zero: str | None, at_negative_zero: str | None) -> None:
    assert (at_zero is None) == (at_negative_zero is None), (at_zero, at_negative_zero)
    # A rule across keys names the key as its section does: `pod: ... cpuLimit 0`.
    assert at_negative_zero is None or key.split(".")[-1] in at_negative_zero


@pytest.mark.parametrize("key", NUMERIC)
def test_negative_zero_is_zero(key: str) -> None:
    same_answer(key, offline_refusal(key, "0"), offline_refusal(key, "-0"))
    same_answer(key, offline_refusal(key, "0.0"), offline_refusal(key, "-0.0"))
    same_answer(key, engine_refusal(key, 0), engine_refusal(key, -0.0))
