#!/usr/bin/env python3
"""Fabric check: an all_gather bandwidth sweep plus the NCCL transport actually in use.

Shipped into the training pods and launched on every node with torchrun, e.g.::

    torchrun --nnodes=$NNODES --nproc-per-node=8 --rdzv-backend=c10d \\
        --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT scripts/allreduce_check.py \\
        --expected-transport ib --require-gdr --expected-busbw-gbps 90

It measures what Google's NCCL health check measures (GoogleCloudPlatform/cluster-health-scanner
81c525d src/nccl_healthcheck/: nccl-tests all_gather_perf -b 2G -e 8G -f 2, its "Avg bus
bandwidth" against the machine's BANDWIDTH_THRESHOLD), so that its floors and this check's
number are one quantity. (An all_reduce's busbw is not: on two nodes NCCL's tree algorithm sends
each byte over the network once, not the 2(n-1)/n times its busbw assumes, so that busbw runs up
to twice the NICs' rate and a pair with half its fabric passes an all_gather floor.) Per message
size from --min-bytes to --max-bytes (times --factor), each size the whole gathered buffer as
nccl-tests counts it:

* fills each rank's 1/n of it with rank+1, all_gathers (out of place) and checks that block r
  of the result holds r+1 on every rank (the data check), once before and once after the timed
  calls;
* times --iters all_gather calls after --warmup untimed ones (CUDA events for nccl,
  time.perf_counter for gloo), takes the slowest rank's time and reports, as nccl-tests does
  (NVIDIA/nccl-tests a0b82b2 src/all_gather.cu AllGatherGetBw, doc/PERFORMANCE.md):
  algbw = bytes / time, busbw = algbw * (n-1)/n, in GB/s of 1e9 bytes, and the average latency
  per call in microseconds.

The bandwidth verdict is the average busbw over the --avg-sizes largest sizes (3: 2G, 4G, 8G in
the health check's sweep), against --expected-busbw-gbps, or against --line-rate-fraction times
the slowest node's line rate: the sum of the link speeds its --line-rate-interfaces report
(/sys/class/net/<iface>/speed, Mb/s: Documentation/ABI/testing/sysfs-class-net). A node that
reports no speed leaves the bandwidth unjudged, with a warning, rather than failing a fabric
that may be fine.

With the nccl backend every rank also reads its NCCL_DEBUG=INFO output back and finds which
network NCCL used (``Using network IB``, ``... via NET/IB/0/GDRDMA`` ...), so a silent fallback
to TCP sockets is a FAIL rather than a slow but green run.

Rank 0 prints a table (or, with --json, one JSON document) and a final verdict line, ``PASS`` or
``FAIL: <reasons>``. Exit codes, the same on every rank: 0 PASS, 1 FAIL, 2 usage or setup error.

Only the standard library and torch are used; torch is imported lazily so the pure helpers
(size parsing, sweep, bandwidth arithmetic, log parsing, verdict) import without it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_SETUP = 2
_CODE_NAMES = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_SETUP: "ERROR"}

ELEMENT_SIZE = 4  # float32
GB = 1e9  # nccl-tests reports GB/s of 1e9 bytes

TRANSPORTS = ("ib", "socket", "tcpxo", "tcpx", "gib", "any")
TRANSPORT_LABELS = {
    "ib": "NET/IB (InfiniBand or RoCE verbs)",
    "socket": "NET/Socket (TCP)",
    "tcpxo": "FasTrak (GPUDirect-TCPXO)",
    "tcpx": "GPUDirectTCPX",
    "gib": "gIB (GPUDirect RDMA over RoCE, Google's NCCL plugin)",
}

# NCCL's debug levels in increasing verbosity (src/debug.cc, ncclDebugLogLevel).
_NCCL_DEBUG_LEVELS = ("NONE", "VERSION", "WARN", "ATTN", "INFO", "ABORT", "TRACE")


class UsageError(Exception):
    """Bad arguments or environment: exit code 2."""


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


# --- NCCL log parsing -----------------------------------------------------------------------

# "Using network IB" / "Using network Socket" / "Using network FasTrak" /
# "Using network GPUDirectTCPX_v7": NCCL core, src/init.cc INFO(NCCL_INIT, "Using network %s").
_USING_NETWORK_RE = re.compile(r"\bUsing (?:internal )?[Nn]etwork (?P<name>\S.*?)\s*$")
# "Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0(1)/GDRDMA": src/transport/net.cc,
# "... via NET/%s/%d%s%s%s" with the network's name, the NIC index, "(proxy rank)" for PXN,
# "/GDRDMA" when GPUDirect RDMA is used, "(PCI)", "/Shared".
_VIA_NET_RE = re.compile(
    r"\bvia NET/(?P<name>[^/\s][^/]*?)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?(?P<rest>\S*)"
)
# "NET/IB : Using [0]mlx5_bond_0:1/RoCE [RO]; OOB net1:..." (internal IB transport init).
_IB_USING_RE = re.compile(r"NET/IB ?: ?Using (?P<devs>[^;]*)")
_IB_DEVICE_RE = re.compile(r"\[\d+\](?P<dev>[^\s:\[\]]+):(?P<port>\d+)/(?P<link>RoCE|IB)\b")
_IB_NO_DEVICE_RE = re.compile(r"NET/IB ?: ?No device found")
_SOCKET_USING_RE = re.compile(r"NET/Socket ?: ?Using ")
# Plugin init lines: "NET/GPUDirectTCPX ver. 3.1.8.", "NET/GPUDirectTCPX : GPUDirectTCPX
# enable: 1" (google/nccl-plugin-gpudirecttcpx); "NET/FasTrak: ..." (the TCPXO plugin).
_TCPX_INIT_RE = re.compile(r"NET/GPUDirectTCPX\b(?! disabled)")
_FASTRAK_INIT_RE = re.compile(r"NET/FasTrak\b|\bnetwork FasTrak\b")
# "Connected all rings, use ring PXN 0 GDR 0" (NCCL >= 2.2x summary line).
_GDR_SUMMARY_RE = re.compile(r"Connected all rings.*\bGDR (?P<gdr>[01])\b")


def classify_network(name: str) -> str:
    """Map an NCCL network name to ib | socket | tcpxo | tcpx | gib | other."""
    lowered = name.strip().lower()
    # Google's gIB plugin registers the network "gIB" (NCCL_NET=gIB selects it by that name).
    if lowered.startswith("gib"):
        return "gib"
    if lowered.startswith("fastrak"):
        return "tcpxo"
    if lowered.startswith("gpudirecttcpx"):
        return "tcpx"
    if lowered.startswith("socket"):
        return "socket"
    # IB, IBext, IBext_v8 (HPC-X SHARP plugin), "NCCL RDMA Plugin v9": all verbs (IB or RoCE).
    if lowered.startswith("ib") or "rdma" in lowered:
        return "ib"
    return "other"


@dataclasses.dataclass
class TransportReport:
    """What one rank's NCCL log says about the network it used."""

    transport: str  # ib | socket | tcpxo | tcpx | other | mixed | unknown
    network: str | None  # NCCL's own name for it, e.g. "IB", "IBext_v8", "GPUDirectTCPX_v7"
    source: str  # which lines decided: "using-network", "channels", "init", "none"
    networks: list[str]
    net_connections: int  # "via NET/..." lines
    gdr_connections: int  # of those, with /GDRDMA
    gdr_summary: bool | None  # "Connected all rings, use ring PXN x GDR y"
    ib_devices: list[str]  # "mlx5_bond_0:1/RoCE"
    ib_no_device: bool
    evidence: list[str]

    @property
    def gdr(self) -> bool | None:
        """True/False when the log shows GPUDirect use for NET connections, None if it can't."""
        if self.net_connections:
            return self.gdr_connections > 0
        return self.gdr_summary

    @property
    def link_layers(self) -> list[str]:
        """["RoCE"], ["IB"], both, or [] from the NET/IB init line."""
        return sorted({device.rsplit("/", 1)[1] for device in self.ib_devices})

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["gdr"] = self.gdr
        data["link_layers"] = self.link_layers
        return data


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def detect_transport(log_text: str) -> TransportReport:
    """Which network NCCL used, from NCCL_DEBUG=INFO output (one rank's, or several merged).

    Decided by, in order: NCCL's own "Using network X" line; the network named in the
    "[send] via NET/X/..." connection lines; the transports' init lines. Lines starting with
    "#" (nccl-tests headers, fixture provenance) are ignored.
    """
    using: list[str] = []
    via: list[str] = []
    net_connections = 0
    gdr_connections = 0
    gdr_summary: bool | None = None
    ib_devices: list[str] = []
    ib_no_device = False
    ib_init = socket_init = tcpx_init = fastrak_init = False
    evidence: list[str] = []

    def note(line: str) -> None:
        if len(evidence) < 12:
            evidence.append(line.strip())

    for line in log_text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        if match := _USING_NETWORK_RE.search(line):
            using.append(match.group("name"))
            note(line)
        if match := _VIA_NET_RE.search(line):
            via.append(match.group("name"))
            net_connections += 1
            if "/GDRDMA" in match.group("rest"):
                gdr_connections += 1
            if net_connections <= 2:
                note(line)
        if match := _GDR_SUMMARY_RE.search(line):
            gdr_summary = match.group("gdr") == "1"
            note(line)
        if match := _IB_USING_RE.search(line):
            ib_init = True
            for dev in _IB_DEVICE_RE.finditer(match.group("devs")):
                ib_devices.append(f"{dev.group('dev')}:{dev.group('port')}/{dev.group('link')}")
            note(line)
        if _IB_NO_DEVICE_RE.search(line):
            ib_no_device = True
            note(line)
        if _SOCKET_USING_RE.search(line):
            socket_init = True
            note(line)
        if _TCPX_INIT_RE.search(line):
            tcpx_init = True
            if not evidence or "GPUDirectTCPX" not in evidence[-1]:
                note(line)
        if _FASTRAK_INIT_RE.search(line):
            fastrak_init = True

    networks = _unique(using)
    source = "none"
    names: list[str] = []
    if networks:
        source, names = "using-network", networks
    elif via:
        source, names = "channels", _unique(via)

    if names:
        kinds = _unique(classify_network(name) for name in names)
        transport = kinds[0] if len(kinds) == 1 else "mixed"
        network: str | None = names[-1] if len(kinds) == 1 else ",".join(names)
    else:
        # No "Using network" line (NCCL_DEBUG_SUBSYS without INIT, very old NCCL): plugins are
        # tried before the internal transports, IB before sockets.
        source = "init"
        if fastrak_init:
            transport, network = "tcpxo", "FasTrak"
        elif tcpx_init:
            transport, network = "tcpx", "GPUDirectTCPX"
        elif ib_init and ib_devices:
            transport, network = "ib", "IB"
        elif socket_init:
            transport, network = "socket", "Socket"
        else:
            source, transport, network = "none", "unknown", None

    return TransportReport(
        transport=transport,
        network=network,
        source=source,
        networks=networks,
        net_connections=net_connections,
        gdr_connections=gdr_connections,
        gdr_summary=gdr_summary,
        ib_devices=_unique(ib_devices),
        ib_no_device=ib_no_device,
        evidence=evidence,
    )


def describe_report(report: TransportReport) -> str:
    """One-line human summary, e.g. "ib (network IB; mlx5_bond_0:1/RoCE; 8/8 NET GDRDMA)"."""
    parts: list[str] = []
    if report.network:
        parts.append(f"network {report.network}")
    if report.ib_devices:
        parts.append(
            " ".join(report.ib_devices[:4]) + (" ..." if len(report.ib_devices) > 4 else "")
        )
    if report.ib_no_device and report.transport != "ib":
        parts.append("NET/IB : No device found")
    if report.net_connections:
        parts.append(f"{report.gdr_connections}/{report.net_connections} NET connections GDRDMA")
    elif report.gdr_summary is not None:
        parts.append(f"GDR {int(report.gdr_summary)}")
    return f"{report.transport} ({'; '.join(parts)})" if parts else report.transport


# --- NCCL debug environment -----------------------------------------------------------------


def nccl_hostname(raw: str | None = None) -> str:
    """The hostname NCCL substitutes for %h: up to the first '.', with '%' and '/' made '-'."""
    name = (raw if raw is not None else socket.gethostname()).split(".", 1)[0]
    return name.replace("%", "-").replace("/", "-")


def expand_nccl_debug_file(pattern: str, hostname: str, pid: int) -> str:
    """NCCL_DEBUG_FILE as NCCL expands it (src/debug.cc): %h hostname, %p pid, %% a '%'."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char != "%" or i + 1 >= len(pattern):
            out.append(char)
            i += 1
            continue
        code = pattern[i + 1]
        if code == "%":
            out.append("%")
        elif code == "h":
            out.append(hostname)
        elif code == "p":
            out.append(str(pid))
        else:  # NCCL echoes what it doesn't understand
            out.append("%" + code)
        i += 2
    return "".join(out)


def _debug_level_index(value: str) -> int:
    upper = value.strip().upper()
    return _NCCL_DEBUG_LEVELS.index(upper) if upper in _NCCL_DEBUG_LEVELS else -1


def nccl_debug_env(env: Mapping[str, str], log_dir: str, rank: int) -> dict[str, str]:
    """Environment changes that make NCCL write INFO lines to a per-rank file we can read.

    Keeps a user's NCCL_DEBUG if it is already INFO or more verbose, and a user's
    NCCL_DEBUG_FILE unless it is a /dev/ stream; adds INIT to a NCCL_DEBUG_SUBSYS that would hide
    the transport lines.
    """
    changes: dict[str, str] = {}
    if _debug_level_index(env.get("NCCL_DEBUG", "")) < _debug_level_index("INFO"):
        changes["NCCL_DEBUG"] = "INFO"
    current_file = env.get("NCCL_DEBUG_FILE", "")
    if not current_file or current_file.startswith("/dev/"):  # /dev/stdout can't be read back
        changes["NCCL_DEBUG_FILE"] = os.path.join(log_dir, f"nccl-rank{rank}.%h.%p.log")
    subsys = env.get("NCCL_DEBUG_SUBSYS")
    if subsys:
        tokens = [t.strip().upper() for t in subsys.split(",") if t.strip()]
        if subsys.strip().startswith("^"):
            # An exclusion list: keep it unless it excludes INIT.
            kept = [t.lstrip("^") for t in tokens if t.lstrip("^") != "INIT"]
            if len(kept) != len(tokens):
                changes["NCCL_DEBUG_SUBSYS"] = "^" + ",".join(kept) if kept else "INIT,ENV"
        elif "INIT" not in tokens and "ALL" not in tokens:
            changes["NCCL_DEBUG_SUBSYS"] = subsys + ",INIT"
    return changes


def find_nccl_log(pattern: str, pid: int, hostname: str) -> str | None:
    """The file NCCL wrote for NCCL_DEBUG_FILE=pattern in process pid, if it exists."""
    path = expand_nccl_debug_file(pattern, hostname, pid)
    if os.path.isfile(path):
        return path
    # NCCL_HOSTID or an unusual hostname: match %h loosely, keep the pid exact.
    loose = expand_nccl_debug_file(pattern.replace("%h", "\0"), hostname, pid)
    matches = sorted(glob.glob(glob.escape(loose).replace("\0", "*")))
    return matches[0] if matches else None


# --- verdict --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Verdict:
    passed: bool
    reasons: list[str]  # why it failed; empty when passed
    notes: list[str]  # what was checked

    @property
    def exit_code(self) -> int:
        return EXIT_PASS if self.passed else EXIT_FAIL

    def line(self) -> str:
        if self.passed:
            return "PASS" + (": " + "; ".join(self.notes) if self.notes else "")
        return "FAIL: " + "; ".join(self.reasons)


def evaluate(
    rows: Sequence[Row],
    *,
    expected_busbw_gbps: float | None = None,
    expected_from: str = "",
    unjudged: str = "",
    avg_sizes: int = AVG_SIZES,
    expected_transport: str = "any",
    require_gdr: bool = False,
    reports: Sequence[TransportReport | None] = (),
) -> Verdict:
    """PASS/FAIL from the measured rows and each rank's transport report (None = no log).

    Fails when: any size's data check failed; the average busbw over the avg_sizes largest sizes
    is below expected_busbw_gbps (equal passes; expected_from says where that came from); a
    rank's log shows another transport than expected, or none; with require_gdr, no NET
    connection is seen at all, or a rank's NET connections are all without GPUDirect RDMA.
    unjudged: why the bandwidth could not be judged, a warning and not a failure.
    """
    if expected_transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {expected_transport!r}")
    reasons: list[str] = []
    notes: list[str] = []

    bad_sizes = [row.size_bytes for row in rows if not row.data_ok]
    if not rows:
        reasons.append("no sizes were measured")
    elif bad_sizes:
        reasons.append(
            "data check failed at "
            + ", ".join(f"{size} B" for size in bad_sizes[:5])
            + (" ..." if len(bad_sizes) > 5 else "")
        )
    else:
        notes.append("data check ok")

    if expected_busbw_gbps is not None and rows:
        busbw, window = average_busbw(rows, avg_sizes)
        measured = f"avg busbw {busbw:.2f} GB/s over {window[0]}..{window[-1]} B"
        expected = f"{expected_busbw_gbps:g} GB/s" + (
            f" ({expected_from})" if expected_from else ""
        )
        if busbw < expected_busbw_gbps:
            reasons.append(f"{measured} is below the expected {expected}")
        else:
            notes.append(f"{measured} >= {expected}")
    elif unjudged:
        notes.append(f"WARNING: bandwidth not judged: {unjudged}")

    checking_transport = expected_transport != "any" or require_gdr
    if checking_transport:
        with_log = [(rank, rep) for rank, rep in enumerate(reports) if rep is not None]
        missing = [rank for rank, rep in enumerate(reports) if rep is None]
        if not with_log:
            reasons.append("no NCCL log to check the transport against")
        elif expected_transport != "any":
            wrong = [
                f"rank {rank}: {describe_report(rep)}"
                for rank, rep in with_log
                if rep.transport != expected_transport
            ]
            if missing:
                reasons.append(
                    "no NCCL log from rank " + ", ".join(str(rank) for rank in missing[:8])
                )
            if wrong:
                seen = _unique(rep.transport for _, rep in with_log)
                reasons.append(
                    f"transport {'/'.join(seen)} seen, expected {expected_transport} "
                    f"({TRANSPORT_LABELS[expected_transport]}): " + "; ".join(wrong[:4])
                )
            elif not missing:
                notes.append(f"transport {describe_report(with_log[0][1])}")
        if require_gdr and with_log:
            no_gdr = [rank for rank, rep in with_log if rep.gdr is False]
            if all(rep.gdr is None for _, rep in with_log):
                reasons.append(
                    "GPUDirect RDMA not confirmed: no 'via NET/...' connection lines in the "
                    "NCCL logs (single node, or NCCL_DEBUG_SUBSYS without INIT?)"
                )
            elif no_gdr:
                reasons.append(
                    "no GDRDMA on the NET connections of rank "
                    + ", ".join(str(rank) for rank in no_gdr[:8])
                    + " (nvidia-peermem / DMA-BUF missing, or NCCL_NET_GDR_LEVEL too low?)"
                )
            else:
                notes.append("GDRDMA on every rank's NET connections")
    return Verdict(passed=not reasons, reasons=reasons, notes=notes)


# --- output ---------------------------------------------------------------------------------


def format_table(rows: Sequence[Row]) -> str:
    header = (
        f"#{'size(B)':>13} {'count':>11} {'time(us)':>11} "
        f"{'algbw(GB/s)':>12} {'busbw(GB/s)':>12} {'data':>5}"
    )
    lines = [header]
    for row in rows:
        lines.append(
            f"{row.size_bytes:>14} {row.count:>11} {row.time_us:>11.2f} "
            f"{row.algbw_gbps:>12.3f} {row.busbw_gbps:>12.3f} {'ok' if row.data_ok else 'BAD':>5}"
        )
    return "\n".join(lines)


# --- command line ---------------------------------------------------------------------------


def _size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="all_gather bandwidth sweep and NCCL transport check; run under torchrun.",
        epilog="Exit codes: 0 PASS, 1 FAIL, 2 usage or setup error (the same on every rank).",
    )
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    parser.add_argument("--min-bytes", type=_size_arg, default=8, metavar="SIZE")
    parser.add_argument("--max-bytes", type=_size_arg, default=1 << 30, metavar="SIZE")
    parser.add_argument("--factor", type=int, default=2)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--expected-busbw-gbps",
        type=float,
        default=None,
        metavar="GBPS",
        help="PASS threshold for the average busbw (GB/s) over the --avg-sizes largest sizes",
    )
    parser.add_argument(
        "--line-rate-fraction",
        type=float,
        default=None,
        metavar="F",
        help="instead of --expected-busbw-gbps: F times the slowest node's line rate, the sum of "
        "the link speeds of --line-rate-interfaces",
    )
    parser.add_argument(
        "--line-rate-interfaces",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        default=[],
        metavar="IF[,IF...]",
        help="the node's fabric interfaces, e.g. net1,net2 (their speed is read under "
        "$SYSFS_ROOT/class/net, SYSFS_ROOT default /sys)",
    )
    parser.add_argument(
        "--avg-sizes",
        type=int,
        default=AVG_SIZES,
        metavar="N",
        help=f"average busbw over the N largest sizes (default {AVG_SIZES}: 2G..8G, as Google's "
        "NCCL health check averages all_gather_perf -b 2G -e 8G)",
    )
    parser.add_argument("--expected-transport", choices=TRANSPORTS, default="any")
    parser.add_argument(
        "--require-gdr",
        action="store_true",
        help="also require GDRDMA on every rank's NET connections (ib, tcpx, tcpxo)",
    )
    parser.add_argument(
        "--nccl-log",
        default=None,
        metavar="FILE",
        help="NCCL_DEBUG=INFO output to inspect (%%h/%%p expanded as NCCL does); by default "
        "the nccl backend logs each rank to its own file and reads it back",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    return parser


def validate(args: argparse.Namespace) -> None:
    """Cross-argument checks. Raises UsageError."""
    if args.iters < 1:
        raise UsageError("--iters must be at least 1")
    if args.warmup < 0:
        raise UsageError("--warmup must not be negative")
    if args.avg_sizes < 1:
        raise UsageError("--avg-sizes must be at least 1")
    if args.expected_busbw_gbps is not None and not args.expected_busbw_gbps >= 0:
        raise UsageError("--expected-busbw-gbps must be a non-negative number")
    if args.line_rate_fraction is not None:
        if args.expected_busbw_gbps is not None:
            raise UsageError("give --expected-busbw-gbps or --line-rate-fraction, not both")
        if not 0 < args.line_rate_fraction <= 1:
            raise UsageError("--line-rate-fraction must be above 0 and at most 1")
        if not args.line_rate_interfaces:
            raise UsageError("--line-rate-fraction needs --line-rate-interfaces")
    if args.require_gdr and args.expected_transport == "socket":
        raise UsageError("--require-gdr makes no sense with --expected-transport socket")
    checking = args.expected_transport != "any" or args.require_gdr
    if checking and args.backend == "gloo" and args.nccl_log is None:
        raise UsageError("the transport check reads NCCL logs: use --backend nccl or --nccl-log")
    try:
        size_sweep(args.min_bytes, args.max_bytes, args.factor)
    except ValueError as err:
        raise UsageError(str(err)) from err


@dataclasses.dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int


def dist_env(env: Mapping[str, str]) -> DistEnv:
    """RANK, WORLD_SIZE, LOCAL_RANK (and MASTER_ADDR/PORT) as torchrun sets them."""
    missing = [
        key
        for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
        if not env.get(key)
    ]
    if missing:
        raise UsageError(f"{', '.join(missing)} not set: launch this script with torchrun")
    try:
        result = DistEnv(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"]))
    except ValueError as err:
        raise UsageError(f"bad torchrun environment: {err}") from err
    if not 0 <= result.rank < result.world_size:
        raise UsageError(f"RANK {result.rank} is outside WORLD_SIZE {result.world_size}")
    return result


# --- the distributed run (needs torch) ------------------------------------------------------


def _log(rank: int, message: str) -> None:
    """One line on stderr, written in a single write so ranks sharing a pipe don't interleave."""
    line = f"[allreduce_check rank {rank}] {message}\n"
    sys.stderr.flush()
    try:
        os.write(sys.stderr.fileno(), line.encode())
    except (OSError, ValueError):  # no real file descriptor (embedded, captured)
        print(line, end="", file=sys.stderr, flush=True)


def _sweep(
    dist: Any, torch: Any, device: Any, sizes: Sequence[int], args: argparse.Namespace, de: DistEnv
) -> list[Row]:
    """Data check and timed all_gather (out of place) for every size; identical on every rank.
    Each size is the gathered buffer, a whole number of elements per rank (the sweep's)."""
    is_cuda = device.type == "cuda"
    n = de.world_size
    gathered = torch.empty(max(sizes) // ELEMENT_SIZE, dtype=torch.float32, device=device)
    mine = torch.full(
        (max(sizes) // ELEMENT_SIZE // n,), float(de.rank + 1), dtype=torch.float32, device=device
    )
    # Block r of every result holds rank r's value, r+1.
    want = torch.arange(1, n + 1, dtype=torch.float32, device=device).unsqueeze(1)
    # torch 2.13 deprecates all_gather_into_tensor for all_gather_single; older torch (older
    # images) has only all_gather_into_tensor. Both gather equal blocks into one tensor.
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    rows: list[Row] = []

    def sync() -> None:
        if is_cuda:
            torch.cuda.synchronize(device)

    def gathered_ok(output: Any) -> bool:
        return bool(torch.all(output.view(n, -1) == want).item())

    for nbytes in sizes:
        count = nbytes // ELEMENT_SIZE // n
        output, block = gathered[: count * n], mine[:count]

        output.zero_()
        gather(output, block)
        ok = gathered_ok(output)

        for _ in range(args.warmup):
            gather(output, block)
        sync()
        dist.barrier()
        if is_cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.iters):
                gather(output, block)
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3 / args.iters
        else:
            began = time.perf_counter()
            for _ in range(args.iters):
                gather(output, block)
            seconds = (time.perf_counter() - began) / args.iters
        ok = ok and gathered_ok(output)

        # The slowest rank's time, and the data check of every rank.
        stats = torch.tensor([seconds, 0.0 if ok else 1.0], dtype=torch.float64, device=device)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        seconds, bad = float(stats[0].item()), float(stats[1].item())
        rows.append(make_row(nbytes, max(seconds, 1e-12), de.world_size, bad == 0.0))
    return rows


def _read_report(path: str | None) -> tuple[str | None, TransportReport | None]:
    if path is None:
        return None, None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return path, detect_transport(handle.read())
    except OSError:
        return path, None


def _result_document(
    args: argparse.Namespace,
    de: DistEnv,
    rows: Sequence[Row],
    logs: Sequence[tuple[str | None, dict[str, Any] | None]],
    verdict: Verdict,
    detected: str | None,
    expected: Expectation,
    rates: Sequence[LineRate],
) -> dict[str, Any]:
    busbw, window = average_busbw(rows, args.avg_sizes) if rows else (None, [])
    return {
        "backend": args.backend,
        "collective": "all_gather",
        "world_size": de.world_size,
        "dtype": "float32",
        "iters": args.iters,
        "warmup": args.warmup,
        "min_bytes": args.min_bytes,
        "max_bytes": args.max_bytes,
        "factor": args.factor,
        "rows": [dataclasses.asdict(row) for row in rows],
        "avg_sizes_bytes": window,
        "busbw_avg_gbps": busbw,
        "data_ok": bool(rows) and all(row.data_ok for row in rows),
        "expected_busbw_gbps": expected.gbps,
        "expected_busbw_from": expected.source or None,
        "line_rates": [dataclasses.asdict(rate) for rate in rates] or None,
        "expected_transport": args.expected_transport,
        "require_gdr": args.require_gdr,
        "transport": {
            "detected": detected,
            "per_rank": [
                {"rank": rank, "log": path, "report": report}
                for rank, (path, report) in enumerate(logs)
            ],
        },
        "verdict": "PASS" if verdict.passed else "FAIL",
        "reasons": verdict.reasons,
        "notes": verdict.notes,
        "verdict_line": verdict.line(),
        "exit_code": verdict.exit_code,
    }


def run(args: argparse.Namespace) -> int:
    de = dist_env(os.environ)
    # Whole elements per rank, so that every size is n equal blocks (nccl-tests rounds down too).
    sizes = size_sweep(args.min_bytes, args.max_bytes, args.factor, ELEMENT_SIZE * de.world_size)

    log_dir: str | None = None
    if args.backend == "nccl" and args.nccl_log is None:
        log_dir = tempfile.mkdtemp(prefix=f"allreduce_check-rank{de.rank}-")
    try:
        return _measure_and_judge(args, de, sizes, log_dir)
    finally:
        if log_dir is not None:
            shutil.rmtree(log_dir, ignore_errors=True)


def _measure_and_judge(
    args: argparse.Namespace, de: DistEnv, sizes: Sequence[int], log_dir: str | None
) -> int:
    """run() once its NCCL log directory (`log_dir`, None: not ours to make) is made."""
    log_pattern: str | None = args.nccl_log
    if log_dir is not None:
        changes = nccl_debug_env(os.environ, log_dir, de.rank)
        os.environ.update(changes)  # before NCCL is loaded: it reads these once
        log_pattern = os.environ["NCCL_DEBUG_FILE"]

    try:
        import torch
        import torch.distributed as dist
    except ImportError as err:
        raise UsageError(f"PyTorch is not importable: {err}") from err

    if args.backend == "nccl":
        if not torch.cuda.is_available():
            raise UsageError("--backend nccl needs CUDA; use --backend gloo on CPU")
        device = torch.device("cuda", de.local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")

    try:
        if args.backend == "nccl":
            try:
                dist.init_process_group(backend="nccl", device_id=device)
            except TypeError:  # torch < 2.3 has no device_id
                dist.init_process_group(backend="nccl")
        else:
            dist.init_process_group(backend="gloo")
    except Exception as err:
        raise UsageError(f"init_process_group({args.backend}) failed: {err}") from err

    try:
        try:
            rows = _sweep(dist, torch, device, sizes, args, de)
        except Exception as err:  # a collective failing mid-run is a fabric failure
            _log(de.rank, f"FAIL: all_gather raised {type(err).__name__}: {err}")
            _abandon(log_dir)

        path: str | None = None
        if log_pattern is not None:
            path = find_nccl_log(log_pattern, os.getpid(), nccl_hostname())
            if path is None and args.nccl_log is not None:
                path = args.nccl_log
        path, report = _read_report(path)
        rate = None
        if args.line_rate_interfaces:
            sysfs = os.environ.get("SYSFS_ROOT") or "/sys"
            rate = dataclasses.asdict(read_line_rate(args.line_rate_interfaces, sysfs))
        mine = (path, report.to_json() if report else None, rate)
        gathered: list[Any] = [None] * de.world_size
        dist.all_gather_object(gathered, mine)

        code = EXIT_FAIL
        if de.rank == 0:
            logs: list[tuple[str | None, dict[str, Any] | None]] = [
                (item[0], item[1]) for item in gathered
            ]
            reports = [_report_from_json(item[1]) for item in logs]
            rates = [LineRate(**item[2]) for item in gathered if item[2] is not None]
            try:
                code = _conclude(args, de, rows, logs, reports, rates)
            except UsageError as err:  # still broadcast, or the other ranks would wait forever
                print(f"allreduce_check: error: {err}", file=sys.stderr, flush=True)
                code = EXIT_SETUP
        verdict_code = torch.tensor([code], dtype=torch.int64, device=device)
        dist.broadcast(verdict_code, src=0)
        code = int(verdict_code.item())
        # One line per rank in its own log; the barrier makes every rank say it before any
        # exits (torchrun stops the others as soon as one rank exits non-zero).
        _log(de.rank, f"exit {code} ({_CODE_NAMES.get(code, 'ERROR')})")
        dist.barrier()
        return code
    finally:
        with contextlib.suppress(Exception):  # best effort on the way out
            dist.destroy_process_group()


def _abandon(log_dir: str | None) -> NoReturn:
    """End this rank at once (EXIT_FAIL), its log directory removed, without tearing its
    process group down: that waits for the collectives in flight (NCCL's communicator destroy),
    while the other ranks wait in them for this one until the group's timeout. Its exit closes
    its connections, so their collectives fail now instead (NCCL reports a remote error)."""
    if log_dir is not None:
        shutil.rmtree(log_dir, ignore_errors=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_FAIL)


def _report_from_json(data: Mapping[str, Any] | None) -> TransportReport | None:
    if data is None:
        return None
    fields = {field.name for field in dataclasses.fields(TransportReport)}
    return TransportReport(**{key: value for key, value in data.items() if key in fields})


def _conclude(
    args: argparse.Namespace,
    de: DistEnv,
    rows: Sequence[Row],
    logs: Sequence[tuple[str | None, dict[str, Any] | None]],
    reports: Sequence[TransportReport | None],
    rates: Sequence[LineRate],
) -> int:
    """Rank 0: verdict, then the table or the JSON document on stdout."""
    if args.nccl_log is not None and all(report is None for report in reports):
        raise UsageError(f"--nccl-log {args.nccl_log}: no rank could read it")
    expected = expectation(args.expected_busbw_gbps, args.line_rate_fraction, rates)
    if expected.unjudged:
        print(
            f"allreduce_check: warning: bandwidth not judged: {expected.unjudged}",
            file=sys.stderr,
            flush=True,
        )
    verdict = evaluate(
        rows,
        expected_busbw_gbps=expected.gbps,
        expected_from=expected.source,
        unjudged=expected.unjudged,
        avg_sizes=args.avg_sizes,
        expected_transport=args.expected_transport,
        require_gdr=args.require_gdr,
        reports=reports if (args.backend == "nccl" or args.nccl_log) else (),
    )
    present = [report for report in reports if report is not None]
    kinds = _unique(report.transport for report in present)
    detected = (kinds[0] if len(kinds) == 1 else "mixed") if kinds else None

    if args.json:
        document = _result_document(args, de, rows, logs, verdict, detected, expected, rates)
        print(json.dumps(document, indent=2), flush=True)
        return verdict.exit_code

    print(
        f"# allreduce_check: all_gather backend={args.backend} world_size={de.world_size} "
        "dtype=float32 "
        f"iters={args.iters} warmup={args.warmup}"
    )
    print(format_table(rows))
    if present:
        print(
            f"# transport: {describe_report(present[0])}"
            + (f" (ranks disagree: {', '.join(kinds)})" if len(kinds) > 1 else "")
        )
    else:
        print("# transport: not checked (no NCCL log)")
    print(verdict.line(), flush=True)
    return verdict.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on bad usage
    try:
        validate(args)
        return run(args)
    except UsageError as err:
        print(f"allreduce_check: error: {err}", file=sys.stderr, flush=True)
        return EXIT_SETUP


if __name__ == "__main__":
    sys.exit(main())
