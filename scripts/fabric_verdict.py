"""The fabric check's verdict (allreduce_check.py): PASS or FAIL from the figures and each
rank's transport, its exit code, and rank 0's report of it (a table, or one JSON document).
Standard library only; shipped beside allreduce_check.py, which imports it."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fabric_figures import AVG_SIZES, Expectation, LineRate, Row, average_busbw, expectation
from nccl_logs import TRANSPORT_LABELS, TRANSPORTS, TransportReport, describe_report, unique

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_SETUP = 2
CODE_NAMES = {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_SETUP: "ERROR"}


class UsageError(Exception):
    """Bad arguments or environment: exit code 2."""


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
                seen = unique(rep.transport for _, rep in with_log)
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


def result_document(
    args: argparse.Namespace,
    world_size: int,
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
        "world_size": world_size,
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


# Where rank 0 also writes its summary (the check pods' /dev/termination-log, which the node
# health runner reads back from the pod's status).
MESSAGE_FILE_ENV = "FABRIC_CHECK_MESSAGE_FILE"
# A container's termination message is cut at 4096 bytes (the Pod API's
# containerStatuses[].state.terminated.message).
MESSAGE_BYTES = 4096


def summary(rows: Sequence[Row], avg_sizes: int, verdict: Verdict) -> str:
    """One line: the measured average busbw (`busbw <GB/s> GB/s over <from>..<to> B: `, the
    form the node health runner reads it in, health_check_jobs.py BUSBW) and the verdict."""
    if not rows:
        return verdict.line()
    busbw, window = average_busbw(rows, avg_sizes)
    return f"busbw {busbw:.3f} GB/s over {window[0]}..{window[-1]} B: {verdict.line()}"


def write_summary(line: str, environ: Mapping[str, str]) -> None:
    """`line` into MESSAGE_FILE_ENV's file, when set (best effort: the check's verdict is its
    exit code)."""
    path = environ.get(MESSAGE_FILE_ENV)
    if path:
        with contextlib.suppress(OSError):
            Path(path).write_bytes(line.encode()[:MESSAGE_BYTES])


def conclude(
    args: argparse.Namespace,
    world_size: int,
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
    write_summary(summary(rows, args.avg_sizes, verdict), os.environ)
    present = [report for report in reports if report is not None]
    kinds = unique(report.transport for report in present)
    detected = (kinds[0] if len(kinds) == 1 else "mixed") if kinds else None

    if args.json:
        document = result_document(args, world_size, rows, logs, verdict, detected, expected, rates)
        print(json.dumps(document, indent=2), flush=True)
        return verdict.exit_code

    print(
        f"# allreduce_check: all_gather backend={args.backend} world_size={world_size} "
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
