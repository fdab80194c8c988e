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
``FAIL: <reasons>``. Exit codes, the same on every rank: 0 PASS, 1 FAIL, 2 usage or setup error
(the check could not run: no PyTorch, no CUDA for nccl, a rendezvous that failed). With
FABRIC_CHECK_EXIT_DIR set (fabric-gate.sh), each rank also writes its code to rank-<RANK> there,
since torchrun exits 1 whatever its ranks' codes.

Only the standard library and torch are used; torch is imported lazily so the pure helpers
import without it. They sit beside this script, by concern: fabric_figures.py (sizes,
bandwidth, line rates), nccl_logs.py (the transport NCCL used) and fabric_verdict.py (the
verdict and its report).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from fabric_figures import (
    AVG_SIZES,
    ELEMENT_SIZE,
    LineRate,
    Row,
    make_row,
    parse_size,
    read_line_rate,
    size_sweep,
)
from fabric_verdict import CODE_NAMES, EXIT_FAIL, EXIT_SETUP, UsageError, conclude
from nccl_logs import (
    TRANSPORTS,
    TransportReport,
    detect_transport,
    find_nccl_log,
    nccl_debug_env,
    nccl_hostname,
)

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
            reports = [report_from_json(item[1]) for item in logs]
            rates = [LineRate(**item[2]) for item in gathered if item[2] is not None]
            try:
                code = conclude(args, de.world_size, rows, logs, reports, rates)
            except UsageError as err:  # still broadcast, or the other ranks would wait forever
                print(f"allreduce_check: error: {err}", file=sys.stderr, flush=True)
                code = EXIT_SETUP
        verdict_code = torch.tensor([code], dtype=torch.int64, device=device)
        dist.broadcast(verdict_code, src=0)
        code = int(verdict_code.item())
        # One line per rank in its own log; the barrier makes every rank say it before any
        # exits (torchrun stops the others as soon as one rank exits non-zero).
        _log(de.rank, f"exit {code} ({CODE_NAMES.get(code, 'ERROR')})")
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


def report_from_json(data: Mapping[str, Any] | None) -> TransportReport | None:
    if data is None:
        return None
    fields = {field.name for field in dataclasses.fields(TransportReport)}
    return TransportReport(**{key: value for key, value in data.items() if key in fields})


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on bad usage
    try:
        validate(args)
        return run(args)
    except UsageError as err:
        print(f"allreduce_check: error: {err}", file=sys.stderr, flush=True)
        return EXIT_SETUP


# Where each rank writes how it ended (set by fabric-gate.sh).
EXIT_DIR_ENV = "FABRIC_CHECK_EXIT_DIR"


def record_exit(code: int, environ: Mapping[str, str] = os.environ) -> int:
    """`code`, also written where fabric-gate.sh reads how each rank ended (EXIT_DIR_ENV, when
    set): torchrun exits 1 whatever its ranks' codes."""
    directory = environ.get(EXIT_DIR_ENV)
    if directory:
        with contextlib.suppress(OSError):
            Path(directory, f"rank-{environ.get('RANK', '0')}").write_text(f"{code}\n")
    return code


if __name__ == "__main__":
    try:
        ended = main()
    except SystemExit as usage:  # argparse's (2)
        ended = usage.code if isinstance(usage.code, int) else EXIT_SETUP
    sys.exit(record_exit(ended))
