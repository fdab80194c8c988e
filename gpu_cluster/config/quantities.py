"""Amounts in stack config: Kubernetes quantities (requests, limits, claim sizes) as the API
server reads them, and the fabric check's byte sizes as its script reads them. The validators
of values.py's Quantity, CpuQuantity, Size and SweepSize."""

from __future__ import annotations

import re
from typing import Any

from gpu_cluster.facts.kubernetes import (
    CPU_QUANTITY_MAX,
    QUANTITY,
    QUANTITY_JSON_PADDING,
    QUANTITY_MAX,
    QuantityRangeError,
    parse_quantity,
)


def quantity_text(value: Any) -> Any:
    """Plain numbers are valid quantities (`cpuRequest: 32`, `memoryLimit: 1e9`); the API server
    trims the spaces around one (QUANTITY_JSON_PADDING), so they go."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value.strip(QUANTITY_JSON_PADDING) if isinstance(value, str) else value


def check_quantity(value: str) -> str:
    try:
        amount = parse_quantity(value)
    except QuantityRangeError:
        raise ValueError(
            f"is outside what Kubernetes holds (1n to {QUANTITY_MAX}): it rounds smaller amounts "
            "up, caps binary ones (Ki..Ei) and reads larger ones wrongly as 64-bit integers"
        ) from None
    except ValueError:
        raise ValueError("must be a Kubernetes quantity such as 64Gi, 500Mi, 32 or 1e9") from None
    number = QUANTITY.fullmatch(value)
    if number is not None and not (number["whole"] or number["fraction"]):
        raise ValueError("has no digits: Kubernetes reads it as 0; write the amount, e.g. 64Gi")
    if amount < 0:
        raise ValueError("must not be negative")
    if amount > QUANTITY_MAX:
        raise ValueError(
            "must be at most 2^63 - 1, the most a Kubernetes quantity holds (beyond it the API "
            "server caps or overflows it)"
        )
    return value


def check_cpu(value: str) -> str:
    if parse_quantity(value) > CPU_QUANTITY_MAX:
        raise ValueError(
            "must be at most (2^63 - 1) / 1000 cores: Kubernetes reads CPU in millicores, an int64"
        )
    return value


def check_size(value: str) -> str:
    if parse_quantity(value) <= 0:
        raise ValueError("must be greater than zero (Kubernetes refuses zero-size claims)")
    return value


# verify.maxBytes reaches scripts/allreduce_check.py --max-bytes as written, so it is what that
# script's parse_size reads: the same pattern and binary units (tests/test_values.py holds the
# two together, on generated sizes).
_SWEEP_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_SWEEP_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def sweep_bytes(text: str) -> int:
    """Bytes of a verify.maxBytes value, as the fabric check reads it; ValueError if it does not."""
    match = _SWEEP_SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r}")
    return int(match.group(1)) * _SWEEP_UNITS[match.group(2).lower()]


def integer_text(value: Any) -> Any:
    """A plain integer is a size in bytes (`maxBytes: 1073741824`)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def check_sweep_size(value: str) -> str:
    try:
        sweep_bytes(value)
    except ValueError:
        raise ValueError(
            "must be a size the fabric check reads: a whole number, optionally followed by K, M, "
            "G or T (binary units, any case) and B or iB, e.g. 8, 64M, 1G or 8GiB"
        ) from None
    return value
