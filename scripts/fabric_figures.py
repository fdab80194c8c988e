"""The fabric check's figures (allreduce_check.py): message sizes, nccl-tests' bandwidths, and
the nodes' line rates a threshold can be derived from. Standard library only; shipped beside
allreduce_check.py, which imports it (as does storage_check.py, for sizes)."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence

ELEMENT_SIZE = 4  # float32
GB = 1e9  # nccl-tests reports GB/s of 1e9 bytes


# --- sizes ----------------------------------------------------------------------------------

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes from "8", "64K", "64M", "1G", "1GiB", "512MB" (binary units, as nccl-tests -b/-e)."""
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r} (use e.g. 8, 64K, 64M, 1G)")
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    if value <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return value


def size_sweep(
    min_bytes: int, max_bytes: int, factor: int, element_size: int = ELEMENT_SIZE
) -> list[int]:
    """Message sizes min, min*factor, ... <= max, each rounded down to whole elements (>= 1)."""
    if min_bytes <= 0 or max_bytes <= 0:
        raise ValueError("sizes must be positive")
    if min_bytes > max_bytes:
        raise ValueError(f"--min-bytes {min_bytes} is larger than --max-bytes {max_bytes}")
    if factor < 2:
        raise ValueError(f"--factor must be at least 2, got {factor}")
    sizes: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        rounded = max(element_size, size - size % element_size)
        if not sizes or rounded != sizes[-1]:
            sizes.append(rounded)
        size *= factor
    return sizes


# --- bandwidth ------------------------------------------------------------------------------


def alg_bandwidth_gbps(nbytes: int, seconds: float) -> float:
    """algbw = S / t, in GB/s (1e9 bytes)."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds}")
    return nbytes / seconds / GB


def bus_bandwidth_gbps(algbw_gbps: float, world_size: int) -> float:
    """busbw = algbw * (n-1)/n for all_gather (nccl-tests src/all_gather.cu AllGatherGetBw)."""
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    return algbw_gbps * (world_size - 1) / world_size


@dataclasses.dataclass(frozen=True)
class Row:
    size_bytes: int  # the gathered buffer, n blocks of `count` elements
    count: int  # elements each rank contributes (nccl-tests' count column for all_gather)
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    data_ok: bool


def make_row(nbytes: int, seconds: float, world_size: int, data_ok: bool) -> Row:
    algbw = alg_bandwidth_gbps(nbytes, seconds)
    return Row(
        size_bytes=nbytes,
        count=nbytes // ELEMENT_SIZE // world_size,
        time_us=seconds * 1e6,
        algbw_gbps=algbw,
        busbw_gbps=bus_bandwidth_gbps(algbw, world_size),
        data_ok=data_ok,
    )


# The sizes nccl-tests' "Avg bus bandwidth" averages in Google's NCCL health check: all_gather_perf
# -b 2G -e 8G -f 2, i.e. 2, 4 and 8 GiB (cluster-health-scanner 81c525d
# src/nccl_healthcheck/run-nccl-combined-plugins.sh; START_MESSAGE_SIZE, END_MESSAGE_SIZE in
# deploy/helm/health_checks/nccl_healthcheck/*.yaml).
AVG_SIZES = 3


def average_busbw(rows: Sequence[Row], sizes: int) -> tuple[float, list[int]]:
    """The mean busbw over the `sizes` largest sizes (all of them when fewer were measured), as
    nccl-tests' "Avg bus bandwidth" over a sweep from the first of them; and those sizes."""
    window = sorted(rows, key=lambda row: row.size_bytes)[-sizes:]
    return sum(row.busbw_gbps for row in window) / len(window), [r.size_bytes for r in window]


# --- line rate ------------------------------------------------------------------------------

MBIT_PER_GB = 8000  # /sys/class/net/<iface>/speed is in Mb/s; 1 GB/s (1e9 bytes) is 8,000 of them


@dataclasses.dataclass(frozen=True)
class LineRate:
    """One node's line rate, GB/s: the sum of its interfaces' link speeds; None with the reasons
    when an interface reports none."""

    gbps: float | None
    speeds_mbps: dict[str, int]
    problems: list[str]


def read_line_rate(interfaces: Sequence[str], sysfs_root: str) -> LineRate:
    """The link speeds the kernel reports (-1, SPEED_UNKNOWN, or EINVAL while a link is down:
    Documentation/ABI/testing/sysfs-class-net, "speed")."""
    speeds: dict[str, int] = {}
    problems: list[str] = []
    for iface in interfaces:
        path = os.path.join(sysfs_root, "class", "net", iface, "speed")
        try:
            with open(path, encoding="ascii") as handle:
                text = handle.read().strip()
        except OSError as err:
            problems.append(f"{path}: {err.strerror or err}")
            continue
        if not re.fullmatch(r"-?\d+", text) or int(text) <= 0:
            problems.append(f"{path}: {text!r}, no link speed")
            continue
        speeds[iface] = int(text)
    gbps = None if problems else sum(speeds.values()) / MBIT_PER_GB
    return LineRate(gbps=gbps, speeds_mbps=speeds, problems=problems)


def line_rate_threshold(fraction: float, rates: Sequence[LineRate]) -> tuple[float | None, str]:
    """fraction x the slowest node's line rate (one LineRate per rank) and where it came from,
    or None and why not."""
    missing = [(rank, rate) for rank, rate in enumerate(rates) if rate.gbps is None]
    if missing or not rates:
        why = "; ".join(f"rank {rank}: {', '.join(rate.problems)}" for rank, rate in missing[:4])
        return None, why or "no rank read a line rate"
    rank, slowest = min(enumerate(rates), key=lambda item: item[1].gbps or 0.0)
    assert slowest.gbps is not None
    links = " + ".join(f"{iface} {mbps} Mb/s" for iface, mbps in slowest.speeds_mbps.items())
    return (
        fraction * slowest.gbps,
        f"{fraction:g} x {slowest.gbps:g} GB/s, the line rate of rank {rank}'s node ({links})",
    )


@dataclasses.dataclass(frozen=True)
class Expectation:
    """The busbw the verdict holds the average to: given, derived from the line rates (source
    says how), or none; unjudged says why a derivation failed."""

    gbps: float | None
    source: str = ""
    unjudged: str = ""


def expectation(
    given: float | None, fraction: float | None, rates: Sequence[LineRate]
) -> Expectation:
    if fraction is None:
        return Expectation(given)
    gbps, how = line_rate_threshold(fraction, rates)
    if gbps is None:
        # A node that reports no speed says nothing about its fabric: warn, don't fail.
        return Expectation(
            None,
            unjudged=f"{how}; give the threshold (--expected-busbw-gbps, the stack's "
            "verify.expectedBusbwGbps) to judge it",
        )
    return Expectation(gbps, source=how)
