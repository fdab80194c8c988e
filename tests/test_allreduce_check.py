"""scripts/allreduce_check.py: the pure helpers, and the real script under torchrun (gloo, CPU).

The NCCL log fixtures in tests/fixtures/nccl_logs/ are real NCCL_DEBUG=INFO lines recorded from
public issues and docs; each file names its sources. Nothing here asserts a timing.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli import as_pid_1, children, command_line
from tests.script_modules import load_script
from tools.realtier.controlplane import free_port

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "allreduce_check.py"
LOGS = Path(__file__).resolve().parent / "fixtures" / "nccl_logs"


ac = load_script("allreduce_check")
# The modules it imports from beside it, by concern.
figures = load_script("fabric_figures")
nccl_logs = load_script("nccl_logs")
fabric_verdict = load_script("fabric_verdict")
check_jobs = load_script("health_check_jobs")


def log(name: str) -> str:
    return (LOGS / name).read_text()


def report(name: str) -> Any:
    return nccl_logs.detect_transport(log(name))


def rows_with_busbw(*busbw: float, data_ok: bool = True) -> list[Any]:
    return [
        figures.Row(
            size_bytes=8 << i,
            count=2 << i,
            time_us=1.0,
            algbw_gbps=b,
            busbw_gbps=b,
            data_ok=data_ok,
        )
        for i, b in enumerate(busbw)
    ]


# --- sizes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8", 8),
        ("1024", 1024),
        ("64K", 64 * 1024),
        ("64k", 64 * 1024),
        ("64M", 64 * 1024**2),
        ("1G", 1024**3),
        ("1g", 1024**3),
        ("2T", 2 * 1024**4),
        ("512MB", 512 * 1024**2),
        ("1GiB", 1024**3),
        (" 16M ", 16 * 1024**2),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert figures.parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "G", "abc", "-1", "0", "0M", "1.5G", "1X", "1 G B", "1e9"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        figures.parse_size(text)


def test_bad_size_is_a_usage_error_with_exit_2() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--max-bytes", "lots"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "not a size" in result.stderr


def test_sweep_defaults_match_nccl_tests() -> None:
    sizes = figures.size_sweep(8, figures.parse_size("1G"), 2)
    assert sizes[0] == 8
    assert sizes[-1] == 1 << 30
    assert len(sizes) == 28  # 2**3 .. 2**30
    assert all(b == 2 * a for a, b in itertools.pairwise(sizes))


def test_sweep_other_factor_stops_at_or_below_max() -> None:
    assert figures.size_sweep(1024, 1 << 20, 4) == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert figures.size_sweep(1000, 100_000, 10) == [1000, 10_000, 100_000]
    assert figures.size_sweep(64, 100, 2) == [64]
    assert figures.size_sweep(4096, 4096, 2) == [4096]


def test_sweep_rounds_to_whole_float32_elements() -> None:
    assert figures.size_sweep(1, 16, 2) == [4, 8, 16]  # 1 and 2 bytes round up to one element
    assert figures.size_sweep(6, 50, 3) == [4, 16]  # 6 -> 4, 18 -> 16, 54 > 50 stops
    assert all(size % 4 == 0 for size in figures.size_sweep(3, 10_000, 3))


@pytest.mark.parametrize(
    ("lo", "hi", "factor"),
    [(16, 8, 2), (8, 16, 1), (8, 16, 0), (0, 16, 2), (8, -1, 2)],
)
def test_sweep_rejects(lo: int, hi: int, factor: int) -> None:
    with pytest.raises(ValueError):
        figures.size_sweep(lo, hi, factor)


# --- bandwidth arithmetic -------------------------------------------------------------------


def test_algbw_is_bytes_over_time_in_1e9_bytes() -> None:
    assert figures.alg_bandwidth_gbps(1_000_000_000, 1.0) == 1.0
    assert figures.alg_bandwidth_gbps(1 << 30, 0.01) == pytest.approx(107.3741824)
    with pytest.raises(ValueError):
        figures.alg_bandwidth_gbps(8, 0.0)


# all_gather's factor (n-1)/n: NVIDIA/nccl-tests a0b82b2 src/all_gather.cu AllGatherGetBw and
# doc/PERFORMANCE.md ("AllGather : (n-1)/n"), the collective Google's health check measures.
@pytest.mark.parametrize(
    ("algbw", "n", "busbw"),
    [
        (100.0, 2, 50.0),  # 1/2
        (100.0, 4, 75.0),  # 3/4
        (100.0, 8, 87.5),  # 7/8
        (100.0, 16, 93.75),  # 15/16: 2 nodes x 8 GPUs
        (30.0, 3, 20.0),  # 2/3
        (50.0, 1, 0.0),  # one rank moves nothing over the bus
    ],
)
def test_busbw_is_algbw_times_n_minus_1_over_n(algbw: float, n: int, busbw: float) -> None:
    assert figures.bus_bandwidth_gbps(algbw, n) == pytest.approx(busbw)


def test_make_row_ties_it_together() -> None:
    # 1 GiB gathered in 10 ms on 16 ranks: algbw 107.37 GB/s, busbw 100.66 GB/s; each rank
    # contributes 1/16 of the elements (nccl-tests' count column).
    row = figures.make_row(1 << 30, 0.010, 16, True)
    assert row.count == (1 << 30) // 4 // 16
    assert row.time_us == pytest.approx(10_000.0)
    assert row.algbw_gbps == pytest.approx(107.3741824)
    assert row.busbw_gbps == pytest.approx(107.3741824 * 15 / 16)


def test_a_pair_with_half_its_fabric_fails_the_scanner_s_floor() -> None:
    # A3 Mega: 8 x 200 Gb/s GPU NICs, 200 GB/s a node (cloud.google.com/compute/docs/gpus/
    # gpudirect); cluster-health-scanner's floor 150 GB/s (81c525d nccl_healthcheck/a3plus.yaml).
    # Two nodes x 8 GPUs with 4 of the 8 NICs: 100 GB/s. A ring all_gather sends (n-1)/n of the
    # 8 GiB buffer through them, so it takes S(n-1)/n / 100 GB/s; busbw is the 100 GB/s.
    n, size, half_fabric = 16, 8 << 30, 100e9
    seconds = size * (n - 1) / n / half_fabric
    rows = [figures.make_row(size >> k, seconds / (1 << k), n, True) for k in (2, 1, 0)]
    assert rows[-1].busbw_gbps == pytest.approx(100.0)
    verdict = fabric_verdict.evaluate(rows, expected_busbw_gbps=150.0)
    assert not verdict.passed
    assert "avg busbw 100.00 GB/s over 2147483648..8589934592 B" in verdict.line()
    # (The all_reduce check read that pair at up to 187.5 GB/s: NCCL's tree sends each node's
    # 8 GiB over its NICs once, S / 100 GB/s, and busbw multiplied that by 2(n-1)/n.)


# --- verdict: bandwidth and data --------------------------------------------------------------


def test_no_threshold_means_no_bandwidth_verdict() -> None:
    verdict = fabric_verdict.evaluate(rows_with_busbw(0.0, 0.0))
    assert verdict.passed
    assert verdict.exit_code == 0
    assert verdict.line().startswith("PASS")


def test_threshold_is_judged_on_the_average_of_the_three_largest_sizes() -> None:
    # As the health check's "Avg bus bandwidth" over 2G, 4G, 8G: smaller sizes do not count.
    rows = rows_with_busbw(0.1, 1.0, 90.0, 90.0, 95.0)
    verdict = fabric_verdict.evaluate(rows, expected_busbw_gbps=91.0)
    assert verdict.passed
    assert "avg busbw 91.67 GB/s over 32..128 B >= 91 GB/s" in verdict.line()
    rows = rows_with_busbw(99.0, 99.0, 95.0, 95.0, 50.0)
    verdict = fabric_verdict.evaluate(rows, expected_busbw_gbps=90.0)
    assert not verdict.passed
    assert verdict.exit_code == 1
    assert "avg busbw 80.00 GB/s over 32..128 B" in verdict.line()
    assert "below the expected 90 GB/s" in verdict.line()
    # --avg-sizes 1: the largest size alone; fewer sizes than asked: all of them.
    assert (
        "avg busbw 50.00 GB/s over 128..128 B"
        in fabric_verdict.evaluate(rows, expected_busbw_gbps=90.0, avg_sizes=1).line()
    )
    assert "over 8..16 B" in fabric_verdict.evaluate(rows[:2], expected_busbw_gbps=90.0).line()


@pytest.mark.parametrize(
    ("measured", "expected", "passed"),
    [
        (96.0, 96.0, True),  # equal passes
        (96.0, 95.99, True),
        (95.99, 96.0, False),
        (0.0, 0.0, True),
        (0.0, 1e-9, False),
    ],
)
def test_threshold_boundary(measured: float, expected: float, passed: bool) -> None:
    verdict = fabric_verdict.evaluate(rows_with_busbw(measured), expected_busbw_gbps=expected)
    assert verdict.passed is passed
    assert verdict.line().startswith("PASS" if passed else "FAIL")


# --- line rate: the threshold from the link speeds the nodes report ----------------------------


def fake_speeds(root: Path, **speeds: str) -> str:
    """A sysfs tree with class/net/<iface>/speed (Mb/s, as the kernel writes it)."""
    for iface, speed in speeds.items():
        (root / "class" / "net" / iface).mkdir(parents=True, exist_ok=True)
        (root / "class" / "net" / iface / "speed").write_text(f"{speed}\n")
    return str(root)


def test_line_rate_is_the_sum_of_the_link_speeds_in_gb_per_s(tmp_path: Path) -> None:
    # 4 x 200 Gb/s: 100 GB/s of 1e9 bytes.
    root = fake_speeds(tmp_path, **{f"net{i}": "200000" for i in range(1, 5)})
    rate = figures.read_line_rate(["net1", "net2", "net3", "net4"], root)
    assert rate.gbps == 100.0
    assert rate.problems == []
    threshold, how = figures.line_rate_threshold(0.625, [rate, rate])
    assert threshold == 62.5
    assert "0.625 x 100 GB/s" in how and "net4 200000 Mb/s" in how


def test_the_slowest_node_sets_the_threshold(tmp_path: Path) -> None:
    full = figures.read_line_rate(
        ["net1", "net2"], fake_speeds(tmp_path / "a", net1="400000", net2="400000")
    )
    slow = figures.read_line_rate(
        ["net1", "net2"], fake_speeds(tmp_path / "b", net1="400000", net2="100000")
    )
    threshold, how = figures.line_rate_threshold(0.5, [full, full, slow, slow])
    assert threshold == 31.25  # 0.5 x 62.5 GB/s
    assert "rank 2's node" in how


@pytest.mark.parametrize("speed", ["-1", "0", "Unknown", None])
def test_a_node_without_a_link_speed_leaves_bandwidth_unjudged(
    tmp_path: Path, speed: str | None
) -> None:
    root = fake_speeds(tmp_path, net1="200000", **({"net2": speed} if speed else {}))
    rate = figures.read_line_rate(["net1", "net2"], root)
    assert rate.gbps is None
    assert "net2/speed" in rate.problems[0]
    expected = figures.expectation(None, 0.625, [rate])
    assert expected.gbps is None
    assert "verify.expectedBusbwGbps" in expected.unjudged
    verdict = fabric_verdict.evaluate(
        rows_with_busbw(0.001), expected_busbw_gbps=expected.gbps, unjudged=expected.unjudged
    )
    assert verdict.passed  # a fact the check cannot know is no failure ...
    assert "WARNING: bandwidth not judged: rank 0:" in verdict.line()  # ... but it says so


def test_a_given_threshold_is_used_as_given() -> None:
    assert figures.expectation(42.0, None, []) == figures.Expectation(42.0)


def test_data_check_failure_fails_even_when_fast() -> None:
    rows = [*rows_with_busbw(500.0), *rows_with_busbw(500.0, 500.0, data_ok=False)[1:]]
    verdict = fabric_verdict.evaluate(rows, expected_busbw_gbps=1.0)
    assert not verdict.passed
    assert "data check failed at 16 B" in verdict.line()


def test_reasons_accumulate() -> None:
    verdict = fabric_verdict.evaluate(
        rows_with_busbw(1.0, data_ok=False),
        expected_busbw_gbps=10.0,
        expected_transport="ib",
        reports=[report("socket_fallback.log")],
    )
    assert len(verdict.reasons) == 3
    assert verdict.line().startswith("FAIL: data check failed")


# --- transport detection on recorded NCCL_DEBUG=INFO samples --------------------------------


def test_roce_with_gdrdma() -> None:
    rep = report("roce_gdrdma.log")
    assert rep.transport == "ib"
    assert rep.network == "IB"
    assert rep.source == "using-network"
    assert "mlx5_bond_0:1/RoCE" in rep.ib_devices
    assert rep.link_layers == ["RoCE"]
    assert rep.net_connections == 4
    assert rep.gdr_connections == 4
    assert rep.gdr is True
    for expected in ("ib", "any"):
        verdict = fabric_verdict.evaluate(
            rows_with_busbw(96.0), expected_transport=expected, require_gdr=True, reports=[rep]
        )
        assert verdict.passed, verdict.line()


def test_roce_without_gdrdma() -> None:
    rep = report("roce_no_gdrdma.log")
    assert rep.transport == "ib"
    assert rep.source == "channels"  # no "Using network" line in that capture
    assert rep.link_layers == ["RoCE"]
    assert len(rep.ib_devices) == 4
    assert (rep.net_connections, rep.gdr_connections) == (4, 0)
    assert rep.gdr_summary is False  # "Connected all rings, use ring PXN 0 GDR 0"
    assert rep.gdr is False
    # RoCE is what was asked for ...
    assert fabric_verdict.evaluate(
        rows_with_busbw(1.0), expected_transport="ib", reports=[rep]
    ).passed
    # ... but not without GPUDirect RDMA.
    verdict = fabric_verdict.evaluate(
        rows_with_busbw(1.0), expected_transport="ib", require_gdr=True, reports=[rep]
    )
    assert not verdict.passed
    assert "no GDRDMA on the NET connections of rank 0" in verdict.line()


def test_ibext_plugin_names_count_as_ib() -> None:
    roce = report("ibext_roce_no_gdrdma.log")
    assert (roce.transport, roce.network, roce.gdr) == ("ib", "IBext_v8", False)
    sharp = report("ib_sharp_ibext.log")
    assert (sharp.transport, sharp.network) == ("ib", "IBext")
    assert sharp.link_layers == ["IB"]
    assert sharp.gdr is None  # no connection lines in that excerpt


def test_socket_fallback_fails_when_ib_expected() -> None:
    rep = report("socket_fallback.log")
    assert rep.transport == "socket"
    assert rep.network == "Socket"
    assert rep.ib_no_device is True
    assert rep.ib_devices == []
    verdict = fabric_verdict.evaluate(rows_with_busbw(1.0), expected_transport="ib", reports=[rep])
    assert not verdict.passed
    line = verdict.line()
    assert line.startswith("FAIL: transport socket seen, expected ib")
    assert "NET/IB : No device found" in line
    # The same log is a PASS for a cluster that is meant to run over TCP.
    assert fabric_verdict.evaluate(
        rows_with_busbw(1.0), expected_transport="socket", reports=[rep]
    ).passed


def test_tcpxo_fastrak() -> None:
    rep = report("tcpxo_fastrak.log")
    assert (rep.transport, rep.network, rep.source) == ("tcpxo", "FasTrak", "using-network")
    assert fabric_verdict.evaluate(
        rows_with_busbw(1.0), expected_transport="tcpxo", reports=[rep]
    ).passed
    for other in ("ib", "tcpx", "socket"):
        assert not fabric_verdict.evaluate(
            rows_with_busbw(1.0), expected_transport=other, reports=[rep]
        ).passed


def test_tcpx_gpudirecttcpx() -> None:
    rep = report("tcpx_gpudirecttcpx.log")
    assert (rep.transport, rep.network) == ("tcpx", "GPUDirectTCPX_v7")
    assert fabric_verdict.evaluate(
        rows_with_busbw(1.0), expected_transport="tcpx", reports=[rep]
    ).passed
    assert not fabric_verdict.evaluate(
        rows_with_busbw(1.0), expected_transport="tcpxo", reports=[rep]
    ).passed


def test_plugin_init_lines_alone_are_a_fallback() -> None:
    # Without NCCL's "Using network" line (e.g. NCCL_DEBUG_SUBSYS=NET), the plugin's own lines.
    tcpx_init = "\n".join(
        line for line in log("tcpx_gpudirecttcpx.log").splitlines() if "Using network" not in line
    )
    rep = nccl_logs.detect_transport(tcpx_init)
    assert (rep.transport, rep.source) == ("tcpx", "init")
    fastrak_teardown = "node-0-0:870:938 [0] NCCL INFO NET/FasTrak: SCTP Closed"
    assert nccl_logs.detect_transport(fastrak_teardown).transport == "tcpxo"


def test_using_network_wins_over_plugin_init_lines() -> None:
    # The TCPX plugin initialised, but NCCL still ended up on sockets: that is a fallback.
    text = log("tcpx_gpudirecttcpx.log").replace(
        "NCCL INFO Using network GPUDirectTCPX_v7", "NCCL INFO Using network Socket"
    )
    rep = nccl_logs.detect_transport(text)
    assert rep.transport == "socket"
    assert not fabric_verdict.evaluate(
        rows_with_busbw(1.0), expected_transport="tcpx", reports=[rep]
    ).passed


def test_one_node_without_gdr_fails_require_gdr() -> None:
    # NVIDIA/nccl issue #897: GDRDMA from one node's GPU, not from the other's (nvidia-peermem
    # not loaded there). Each line is one rank's log.
    rank9 = nccl_logs.detect_transport("9[1a000] -> 2[6b000] [send] via NET/IB/0/GDRDMA")
    rank2 = nccl_logs.detect_transport("9[1a000] -> 2[6b000] [receive] via NET/IB/1")
    assert (rank9.gdr, rank2.gdr) == (True, False)
    verdict = fabric_verdict.evaluate(
        rows_with_busbw(1.0), expected_transport="ib", require_gdr=True, reports=[rank9, rank2]
    )
    assert not verdict.passed
    assert "no GDRDMA on the NET connections of rank 1" in verdict.line()


def test_require_gdr_needs_net_connections() -> None:
    # "Using network IB" but no "via NET" line: a single node run proves nothing about GDR.
    rep = report("ib_sharp_ibext.log")
    verdict = fabric_verdict.evaluate(
        rows_with_busbw(1.0), expected_transport="ib", require_gdr=True, reports=[rep]
    )
    assert not verdict.passed
    assert "GPUDirect RDMA not confirmed" in verdict.line()


def test_missing_or_empty_logs_fail_a_transport_check() -> None:
    rows = rows_with_busbw(1.0)
    assert not fabric_verdict.evaluate(rows, expected_transport="ib", reports=[]).passed
    assert not fabric_verdict.evaluate(rows, expected_transport="ib", reports=[None, None]).passed
    partial = fabric_verdict.evaluate(
        rows, expected_transport="ib", reports=[report("roce_gdrdma.log"), None]
    )
    assert "no NCCL log from rank 1" in partial.line()
    empty = nccl_logs.detect_transport("NCCL version 2.21.5+cuda12.4\n")
    assert empty.transport == "unknown"
    assert not fabric_verdict.evaluate(rows, expected_transport="ib", reports=[empty]).passed
    # With "any" and no GDR requirement the logs are informational only.
    assert fabric_verdict.evaluate(rows, expected_transport="any", reports=[None]).passed


def test_ranks_on_different_transports_fail() -> None:
    verdict = fabric_verdict.evaluate(
        rows_with_busbw(1.0),
        expected_transport="ib",
        reports=[report("roce_gdrdma.log"), report("socket_fallback.log")],
    )
    assert not verdict.passed
    assert "rank 1: socket" in verdict.line()


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("IB", "ib"),
        ("IBext", "ib"),
        ("IBext_v8", "ib"),
        ("NCCL RDMA Plugin v9", "ib"),
        ("Socket", "socket"),
        ("FasTrak", "tcpxo"),
        ("GPUDirectTCPX_v7", "tcpx"),
        ("FastSocket", "other"),  # GKE's NCCL Fast Socket is TCP, but not NET/Socket
        ("AWS Libfabric", "other"),
    ],
)
def test_classify_network(name: str, kind: str) -> None:
    assert nccl_logs.classify_network(name) == kind


def test_comment_lines_are_ignored() -> None:
    assert nccl_logs.detect_transport("# NCCL INFO Using network IB\n").transport == "unknown"


# --- NCCL debug file handling ---------------------------------------------------------------


def test_expand_nccl_debug_file_like_nccl() -> None:
    expand = nccl_logs.expand_nccl_debug_file
    assert expand("/tmp/nccl.%h.%p.log", "node-1", 4242) == "/tmp/nccl.node-1.4242.log"
    assert expand("/tmp/100%%-%x-%", "h", 1) == "/tmp/100%-%x-%"
    assert nccl_logs.nccl_hostname("gpu-0.cluster.local") == "gpu-0"
    assert nccl_logs.nccl_hostname("a%b/c") == "a-b-c"


def test_find_nccl_log(tmp_path: Path) -> None:
    (tmp_path / "nccl-rank3.gpu-0.777.log").write_text("x")
    pattern = str(tmp_path / "nccl-rank3.%h.%p.log")
    assert nccl_logs.find_nccl_log(pattern, 777, "gpu-0") == str(
        tmp_path / "nccl-rank3.gpu-0.777.log"
    )
    # NCCL_HOSTID or a renamed host: %h matched loosely, the pid exactly.
    assert nccl_logs.find_nccl_log(pattern, 777, "other") == str(
        tmp_path / "nccl-rank3.gpu-0.777.log"
    )
    assert nccl_logs.find_nccl_log(pattern, 778, "gpu-0") is None


def test_nccl_debug_env() -> None:
    changes = nccl_logs.nccl_debug_env({}, "/logs", 5)
    assert changes == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/logs/nccl-rank5.%h.%p.log"}
    # WARN (what the TCPXO env profile sets) is raised to INFO; INFO and TRACE are kept.
    assert nccl_logs.nccl_debug_env({"NCCL_DEBUG": "WARN"}, "/l", 0)["NCCL_DEBUG"] == "INFO"
    assert "NCCL_DEBUG" not in nccl_logs.nccl_debug_env({"NCCL_DEBUG": "info"}, "/l", 0)
    assert "NCCL_DEBUG" not in nccl_logs.nccl_debug_env({"NCCL_DEBUG": "TRACE"}, "/l", 0)
    # A user's own NCCL_DEBUG_FILE is kept (and read back).
    assert "NCCL_DEBUG_FILE" not in nccl_logs.nccl_debug_env({"NCCL_DEBUG_FILE": "/x.%p"}, "/l", 0)
    # ... unless it is a stream that cannot be read back (and would mix into --json stdout).
    stdout_file = nccl_logs.nccl_debug_env({"NCCL_DEBUG_FILE": "/dev/stdout"}, "/l", 2)
    assert stdout_file["NCCL_DEBUG_FILE"] == "/l/nccl-rank2.%h.%p.log"
    # The transport lines are in the INIT subsystem.
    sub = "NCCL_DEBUG_SUBSYS"
    assert nccl_logs.nccl_debug_env({sub: "NET"}, "/l", 0)[sub] == "NET,INIT"
    assert sub not in nccl_logs.nccl_debug_env({sub: "INIT,NET"}, "/l", 0)
    assert sub not in nccl_logs.nccl_debug_env({sub: "ALL"}, "/l", 0)
    assert sub not in nccl_logs.nccl_debug_env({sub: "^COLL"}, "/l", 0)
    assert nccl_logs.nccl_debug_env({sub: "^COLL,INIT"}, "/l", 0)[sub] == "^COLL"


def test_dist_env_requires_torchrun() -> None:
    env = {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "h",
        "MASTER_PORT": "1",
    }
    assert ac.dist_env(env) == ac.DistEnv(rank=1, world_size=2, local_rank=1)
    with pytest.raises(ac.UsageError, match="torchrun"):
        ac.dist_env({k: v for k, v in env.items() if k != "MASTER_PORT"})
    with pytest.raises(ac.UsageError):
        ac.dist_env({**env, "RANK": "2"})


# --- usage errors: exit 2 before anything runs ------------------------------------------------


def _direct(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_PORT")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "gloo", "--expected-transport", "ib"], "reads NCCL logs"),
        (["--expected-transport", "socket", "--require-gdr"], "makes no sense"),
        (["--min-bytes", "1M", "--max-bytes", "1K"], "larger than"),
        (["--factor", "1"], "--factor"),
        (["--iters", "0"], "--iters"),
        (["--avg-sizes", "0"], "--avg-sizes"),
        (["--line-rate-fraction", "0.5"], "needs --line-rate-interfaces"),
        (["--line-rate-fraction", "1.5", "--line-rate-interfaces", "net1"], "at most 1"),
        (
            [
                "--line-rate-fraction",
                "0.5",
                "--line-rate-interfaces",
                "net1",
                *("--expected-busbw-gbps", "9"),
            ],
            "not both",
        ),
        (["--backend", "gloo"], "torchrun"),  # valid arguments, but no torchrun environment
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = _direct(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert result.stdout == ""


def test_unknown_transport_is_rejected_by_argparse() -> None:
    result = _direct("--expected-transport", "efa")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


# --- end to end: the real script under torchrun, gloo on CPU --------------------------------


def torchrun(
    *args: str, nproc: int = 2, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    for key in [k for k in env if k.startswith(("NCCL_", "TORCHELASTIC_"))]:
        del env[key]
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc}",
        "--nnodes=1",
        f"--master-port={free_port()}",
        str(SCRIPT),
        "--backend",
        "gloo",
        "--iters",
        "3",
        "--warmup",
        "1",
        *args,
    ]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, check=False, timeout=600, cwd=ROOT
    )


def rank_exit_codes(stderr: str) -> dict[int, int]:
    """Each rank's exit code as the script logs it ("[allreduce_check rank 1] exit 1 (FAIL)").

    Not torchrun's failure summary: torchrun SIGTERMs the other ranks once one has failed.
    """
    found = re.findall(r"^\[allreduce_check rank (\d+)\] exit (\d+) ", stderr, re.M)
    return {int(rank): int(code) for rank, code in found}


ROW_KEYS = {"size_bytes", "count", "time_us", "algbw_gbps", "busbw_gbps", "data_ok"}
DOC_KEYS = {
    "backend",
    "collective",
    "world_size",
    "dtype",
    "iters",
    "warmup",
    "min_bytes",
    "max_bytes",
    "factor",
    "rows",
    "avg_sizes_bytes",
    "busbw_avg_gbps",
    "data_ok",
    "expected_busbw_gbps",
    "expected_busbw_from",
    "line_rates",
    "expected_transport",
    "require_gdr",
    "transport",
    "verdict",
    "reasons",
    "notes",
    "verdict_line",
    "exit_code",
}


def check_document(doc: dict[str, Any], world_size: int, max_bytes: int) -> None:
    assert set(doc) == DOC_KEYS
    assert doc["backend"] == "gloo"
    assert doc["collective"] == "all_gather"
    assert doc["world_size"] == world_size
    assert doc["dtype"] == "float32"
    sizes = [row["size_bytes"] for row in doc["rows"]]
    # Each size a whole float32 block per rank, at most max_bytes.
    assert sizes == figures.size_sweep(8, max_bytes, 2, 4 * world_size)
    assert sizes[-1] == max_bytes - max_bytes % (4 * world_size)
    factor = (world_size - 1) / world_size  # all_gather's, nccl-tests AllGatherGetBw
    for row in doc["rows"]:
        assert set(row) == ROW_KEYS
        assert row["count"] * 4 * world_size == row["size_bytes"]
        assert row["time_us"] > 0
        assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] / (row["time_us"] * 1e-6) / 1e9)
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor)
        assert row["data_ok"] is True
    top3 = doc["rows"][-3:]
    assert doc["avg_sizes_bytes"] == [row["size_bytes"] for row in top3]
    assert doc["busbw_avg_gbps"] == pytest.approx(sum(row["busbw_gbps"] for row in top3) / 3)
    assert doc["data_ok"] is True
    assert len(doc["transport"]["per_rank"]) == world_size


def test_e2e_json_two_ranks() -> None:
    result = torchrun("--max-bytes", "1M", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)  # stdout holds the JSON document and nothing else
    check_document(doc, world_size=2, max_bytes=1 << 20)
    assert len(doc["rows"]) == 18  # 8 B .. 1 MiB
    assert doc["line_rates"] is None and doc["expected_busbw_from"] is None
    assert doc["verdict"] == "PASS"
    assert doc["exit_code"] == 0
    assert doc["reasons"] == []
    assert "data check ok" in doc["notes"]
    assert doc["expected_busbw_gbps"] is None
    assert doc["transport"]["detected"] is None  # gloo: no NCCL log
    assert doc["verdict_line"].startswith("PASS")
    assert rank_exit_codes(result.stderr) == {0: 0, 1: 0}


def test_e2e_json_three_ranks_busbw_factor() -> None:
    # With 3 ranks (n-1)/n = 2/3, and 64 KiB is not 3 whole blocks: 65532 B, 5461 floats each.
    result = torchrun("--max-bytes", "64K", "--json", nproc=3)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    check_document(doc, world_size=3, max_bytes=64 << 10)
    row = doc["rows"][-1]
    assert (row["size_bytes"], row["count"]) == (65532, 5461)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 / 3)
    assert rank_exit_codes(result.stderr) == {0: 0, 1: 0, 2: 0}


def test_e2e_table() -> None:
    result = torchrun("--max-bytes", "1M")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines[0].startswith("# allreduce_check: all_gather backend=gloo world_size=2")
    assert "busbw(GB/s)" in lines[1]
    table = [line.split() for line in lines[2:] if not line.startswith(("#", "PASS", "FAIL"))]
    assert [int(cols[0]) for cols in table] == figures.size_sweep(8, 1 << 20, 2)
    for size, count, time_us, algbw, busbw, data in table:
        assert int(count) * 4 * 2 == int(size)
        assert float(time_us) > 0
        assert float(busbw) == pytest.approx(float(algbw) / 2, abs=0.001)  # n = 2: 1/2
        assert data == "ok"
    assert lines[-2] == "# transport: not checked (no NCCL log)"
    assert lines[-1] == "PASS: data check ok"


def test_e2e_impossible_threshold_fails_on_every_rank(tmp_path: Path) -> None:
    # Where a check pod's rank 0 leaves its summary for the node health runner (its container's
    # termination message).
    message = tmp_path / "termination-log"
    result = torchrun(
        "--max-bytes",
        "64K",
        "--json",
        "--expected-busbw-gbps",
        "1e9",
        env={"FABRIC_CHECK_MESSAGE_FILE": str(message)},
    )
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "FAIL"
    assert doc["exit_code"] == 1
    assert doc["expected_busbw_gbps"] == 1e9
    assert any("below the expected 1e+09 GB/s" in reason for reason in doc["reasons"])
    assert doc["verdict_line"].startswith("FAIL: avg busbw ")
    assert rank_exit_codes(result.stderr) == {0: 1, 1: 1}  # both ranks, the same code
    sizes = doc["avg_sizes_bytes"]
    assert message.read_text() == (
        f"busbw {doc['busbw_avg_gbps']:.3f} GB/s over {sizes[0]}..{sizes[-1]} B: "
        f"{doc['verdict_line']}"
    )
    # ... in the form the runner reads the figure back from.
    pod = {
        "status": {
            "containerStatuses": [{"state": {"terminated": {"message": message.read_text()}}}]
        }
    }
    assert check_jobs.measured_busbw([pod]) == pytest.approx(doc["busbw_avg_gbps"], abs=5e-4)


def test_e2e_impossible_threshold_table() -> None:
    result = torchrun("--max-bytes", "64K", "--expected-busbw-gbps", "1e9")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1].startswith("FAIL: avg busbw ")


def test_e2e_threshold_from_the_nodes_line_rate(tmp_path: Path) -> None:
    # Every rank reads the speeds under SYSFS_ROOT; 2 x 400 Gb/s x 0.625 = 62.5 GB/s, far above
    # what two CPU processes gather.
    root = fake_speeds(tmp_path, net1="400000", net2="400000")
    rate = ("--line-rate-fraction", "0.625", "--line-rate-interfaces", "net1,net2")
    result = torchrun("--max-bytes", "64K", "--json", *rate, env={"SYSFS_ROOT": root})
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert doc["expected_busbw_gbps"] == 62.5
    assert doc["expected_busbw_from"].startswith("0.625 x 100 GB/s, the line rate of rank ")
    assert [rate["gbps"] for rate in doc["line_rates"]] == [100.0, 100.0]
    assert "below the expected 62.5 GB/s (0.625 x 100 GB/s" in doc["verdict_line"]
    # A link that reports no speed (-1): not judged, and said so on stderr and in the verdict.
    fake_speeds(tmp_path, net2="-1")
    result = torchrun("--max-bytes", "64K", *rate, env={"SYSFS_ROOT": root})
    assert result.returncode == 0, result.stderr
    assert "allreduce_check: warning: bandwidth not judged: rank 0: " in result.stderr
    assert "verify.expectedBusbwGbps" in result.stdout.splitlines()[-1]


def test_e2e_socket_fallback_log_fails_ib_expectation() -> None:
    # The verdict path with a recorded log: --nccl-log is read by every rank.
    result = torchrun(
        "--max-bytes",
        "4K",
        "--json",
        "--expected-transport",
        "ib",
        "--nccl-log",
        str(LOGS / "socket_fallback.log"),
    )
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "FAIL"
    assert doc["transport"]["detected"] == "socket"
    assert "transport socket seen, expected ib" in doc["verdict_line"]
    per_rank = doc["transport"]["per_rank"]
    assert [entry["report"]["network"] for entry in per_rank] == ["Socket", "Socket"]
    assert per_rank[0]["report"]["ib_no_device"] is True
    assert rank_exit_codes(result.stderr) == {0: 1, 1: 1}


def test_e2e_roce_gdr_log_passes_ib_expectation() -> None:
    result = torchrun(
        "--max-bytes",
        "4K",
        "--json",
        "--expected-transport",
        "ib",
        "--require-gdr",
        "--nccl-log",
        str(LOGS / "roce_gdrdma.log"),
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "PASS"
    assert doc["transport"]["detected"] == "ib"
    report0 = doc["transport"]["per_rank"][0]["report"]
    assert report0["gdr"] is True
    assert report0["link_layers"] == ["RoCE"]
    assert "GDRDMA on every rank's NET connections" in doc["notes"]


def test_gib_is_its_own_transport_and_a_fallback_fails() -> None:
    # No recorded gIB capture: lines built from NCCL's format strings ("Using network %s",
    # "via NET/%s/%d%s") with the name gIB registers (NCCL_NET=gIB selects it by that name).
    gib_log = (
        "host-0:1:1 [0] NCCL INFO Using network gIB\n"
        "host-0:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/gIB/0/GDRDMA\n"
    )
    rep = nccl_logs.detect_transport(gib_log)
    assert (rep.transport, rep.network, rep.gdr) == ("gib", "gIB", True)
    rows = rows_with_busbw(120.0)
    assert fabric_verdict.evaluate(
        rows, expected_transport="gib", require_gdr=True, reports=[rep]
    ).passed
    assert not fabric_verdict.evaluate(rows, expected_transport="ib", reports=[rep]).passed
    # NCCL's own IB transport or sockets on an A3 Ultra / A4 cluster: gIB did not load.
    for fallback in ("roce_gdrdma.log", "socket_fallback.log"):
        verdict = fabric_verdict.evaluate(
            rows, expected_transport="gib", reports=[report(fallback)]
        )
        assert not verdict.passed
        assert "expected gib" in verdict.line()


# --- a rank whose collective raises -------------------------------------------------------


def one_rank_fails(where: Path, rank: int, after_calls: int) -> dict[str, str]:
    """Environment under which rank `rank`'s all_gather raises on its call `after_calls` + 1,
    as a collective does when its own GPU or NIC fails (a sitecustomize module that every rank's
    interpreter imports first); the other ranks are left waiting in that collective."""
    where.mkdir()
    (where / "sitecustomize.py").write_text(
        "import os\n"
        f"if os.environ.get('RANK') == '{rank}':\n"
        "    import torch.distributed as dist\n"
        "    calls = 0\n"
        "    def wrap(real):\n"
        "        def failing(*args, **kwargs):\n"
        "            global calls\n"
        "            calls += 1\n"
        f"            if calls > {after_calls}:\n"
        "                raise RuntimeError('injected: this rank lost its device')\n"
        "            return real(*args, **kwargs)\n"
        "        return failing\n"
        "    for name in ('all_gather_single', 'all_gather_into_tensor'):\n"
        "        if hasattr(dist, name):\n"
        "            setattr(dist, name, wrap(getattr(dist, name)))\n"
    )
    return {"PYTHONPATH": str(where)}


def test_a_rank_whose_collective_raises_ends_and_so_do_its_peers(tmp_path: Path) -> None:
    """Rank 1 fails mid-sweep while rank 0 waits for its share: rank 1 exits at once, and rank
    0's collective fails with it rather than waiting for the process group's timeout (30 min
    for gloo: the run's own timeout ends the test first). With NCCL, whose communicator
    teardown waits for the collectives in flight, the same needs GPUs on two nodes."""
    env = one_rank_fails(tmp_path / "inject", rank=1, after_calls=3)
    result = torchrun("--max-bytes", "64K", env=env)
    assert "[allreduce_check rank 1] FAIL: all_gather raised RuntimeError: injected" in (
        result.stderr
    )
    assert result.returncode != 0


def test_a_rank_leaves_no_nccl_log_directory_behind(tmp_path: Path) -> None:
    """The nccl backend logs each rank to a directory of its own, which the rank removes however
    it ends: here at once, on a machine without CUDA (exit 2)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NCCL_")},
        **{"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"},
        **{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())},
        "TMPDIR": str(tmp_path),
        "CUDA_VISIBLE_DEVICES": "",
    }
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--backend", "nccl"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2 and "--backend nccl needs CUDA" in result.stderr
    assert list(tmp_path.iterdir()) == []


# --- through fabric-gate.sh, as a run's pods and the health runner's pair check run it ------

GATE = ROOT / "scripts" / "fabric-gate.sh"
# What the gate exits with when the check could not run (EX_TEMPFAIL), which the health runner
# records as `error` (scripts/health_check_jobs.py NOT_RUN_EXIT) rather than as a failed node.
NOT_RUN = 75


def gate_env(tmp_path: Path, nodes: int = 1) -> dict[str, str]:
    """What fabric-gate.sh reads, for `nodes` nodes of two ranks, this one the rendezvous host."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCHELASTIC_"))},
        "OMP_NUM_THREADS": "1",
        "NNODES": str(nodes),
        "GPUS_PER_NODE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "TORCHRUN_BIN": str(Path(sys.executable).parent / "torchrun"),
        "LAUNCH_PID_FILE": str(tmp_path / "launch.pid"),
        "NCCL_ENV_FILE": str(tmp_path / "absent.env"),
        "TMPDIR": str(tmp_path),
        "CUDA_VISIBLE_DEVICES": "",
    }


def gate(tmp_path: Path, *check_args: str) -> subprocess.CompletedProcess[str]:
    """fabric-gate.sh with `check_args` and no launcher, on one node of two ranks, torchrun and
    the check real."""
    return subprocess.run(
        ["bash", str(GATE), "--max-bytes", "64K", "--iters", "3", *check_args, "--"],
        env=gate_env(tmp_path),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_a_check_that_cannot_run_is_told_from_a_failed_one_through_torchrun(
    tmp_path: Path,
) -> None:
    """NCCL without CUDA: every rank exits 2 (could not run), torchrun 1 whatever their codes,
    and the gate 75, saying so; a fabric below its floor stays a failure (torchrun's 1). The
    gate's bookkeeping leaves no directory of its own behind."""
    cannot = gate(tmp_path, "--backend", "nccl")
    assert cannot.returncode == NOT_RUN, cannot.stderr
    assert "--backend nccl needs CUDA" in cannot.stderr
    assert "fabric-gate: the fabric check could not run (exit 1; its ranks: a setup error)" in (
        cannot.stderr
    )
    failed = gate(tmp_path, "--backend", "gloo", "--expected-busbw-gbps", "1e9")
    assert failed.returncode == 1, failed.stderr
    assert rank_exit_codes(failed.stderr) == {0: 1, 1: 1}
    assert "fabric-gate: the fabric check failed (exit 1)" in failed.stderr
    # mktemp -d's own directories (torchrun keeps torchelastic_* ones of its own).
    assert not list(tmp_path.glob("tmp.*"))


def test_a_gate_stopped_during_its_check_stops_it_and_starts_nothing(tmp_path: Path) -> None:
    """The gate as its container's PID 1 (a PID namespace of its own), its check's torchrun
    waiting in the rendezvous for a second node that never comes, SIGTERM from outside the
    namespace as the kubelet sends it: the check stops, the gate ends 143 and does not start
    what follows it. (A PID 1 with no handler never sees the signal: the check waited out the
    rendezvous, the pod its grace period.)"""
    started = tmp_path / "launcher-started"
    proc = subprocess.Popen(
        [*as_pid_1(), "bash", str(GATE), "--backend", "gloo", "--", "touch", str(started)],
        env=gate_env(tmp_path, nodes=2),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        (gate_pid,) = children(proc.pid)  # PID 1 inside
        # The check's launcher has become torchrun (launch-torchrun.sh execs it) and waits.
        while not any("torchrun" in " ".join(command_line(p)) for p in children(gate_pid)):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        os.kill(int(gate_pid), signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "fabric-gate: stopped (SIGTERM) during the fabric check; not starting touch" in err
    assert not started.exists()
