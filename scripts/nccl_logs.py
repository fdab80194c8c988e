"""What NCCL says it used (allreduce_check.py): the network a rank's NCCL_DEBUG=INFO log names,
and the NCCL environment that makes a rank write that log where it can read it back. Standard
library only; shipped beside allreduce_check.py, which imports it."""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import socket
from collections.abc import Iterable, Mapping
from typing import Any

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


def unique(items: Iterable[str]) -> list[str]:
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

    networks = unique(using)
    source = "none"
    names: list[str] = []
    if networks:
        source, names = "using-network", networks
    elif via:
        source, names = "channels", unique(via)

    if names:
        kinds = unique(classify_network(name) for name in names)
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
        ib_devices=unique(ib_devices),
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
