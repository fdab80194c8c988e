#!/usr/bin/env python3
"""Measure the training-data volumes from a training pod, then (as a gate) start what follows.

Usage: storage_check.py [--bytes N] [--streams K] [--read-only PATH]... [PATH[:MIN_W:MIN_R]]...
                        [-- COMMAND [ARGS...]]

For each writable PATH: K streams (threads, as a checkpoint writes one shard per rank) each
write N/K bytes in 64 MiB blocks to a file of their own, PATH/.gpu-cluster-storage-check-*,
fsync and close it (a checkpoint is saved when close returns: Cloud Storage FUSE uploads then),
drop the files from the page cache, read them back, and delete them. For each --read-only PATH:
read up to N bytes of the files already there (training data), in K streams. Reports GB/s and
seconds per GB (save and restore) per path, one line each. A threshold after the path (GB/s;
empty: none) fails the check when missed.

Exit codes: 0 every threshold met (then COMMAND, if given, replaces this process: the storage
gate before the fabric check and training); 1 a threshold missed or an I/O error; 2 usage; 78
(EX_CONFIG) a path that is not a directory (the volume is not mounted where the stack says).
Standard library only (and fabric_figures.py beside it): it runs in the training image as it
is.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import BinaryIO, NoReturn

# Sizes as the fabric check reads them (and as verify.storageCheckBytes is validated): the
# fabric check's module beside this one, shipped whenever this one is (verify.enabled).
from fabric_figures import parse_size

BLOCK = 64 * 2**20
CHECK_PREFIX = ".gpu-cluster-storage-check"
EX_CONFIG = 78


@dataclass(frozen=True)
class Target:
    path: Path
    writable: bool
    min_write_gbps: float | None = None
    min_read_gbps: float | None = None


@dataclass(frozen=True)
class Figures:
    """GB/s (10^9 bytes per second) written and read, None: not measured; over `nbytes`."""

    write_gbps: float | None
    read_gbps: float | None
    nbytes: int = 0


def target(text: str, writable: bool = True) -> Target:
    """PATH, or PATH:MIN_WRITE:MIN_READ with either threshold empty."""
    path, *limits = text.split(":")
    if len(limits) not in (0, 2):
        raise argparse.ArgumentTypeError(f"{text!r}: PATH or PATH:MIN_WRITE_GBPS:MIN_READ_GBPS")
    floors = [float(v) if v else None for v in limits] or [None, None]
    return Target(Path(path), writable, floors[0], floors[1])


def _stop(signum: int, frame: FrameType | None) -> NoReturn:
    """SIGTERM (the pod deleted, the run stopped): end through measure's `finally`, which
    removes this pod's files, instead of leaving up to --bytes of them in a shared volume."""
    print("storage_check: stopped (SIGTERM); its files removed", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def _streams_ignore_sigterm() -> None:
    # Each stream's thread blocks SIGTERM, so the kernel hands it to the main thread, whose
    # wait it interrupts; Python runs handlers in the main thread only.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _parallel(jobs: list[Callable[[], int]]) -> tuple[int, float]:
    """Bytes the jobs moved, and the seconds they took together."""
    start = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=len(jobs), initializer=_streams_ignore_sigterm)
    try:
        moved = sum(pool.map(lambda job: job(), jobs))
    finally:
        # Stopped, the files go at once; the streams still writing end with the process.
        pool.shutdown(wait=False, cancel_futures=True)
    return moved, time.perf_counter() - start


def _write(f: BinaryIO, nbytes: int) -> int:
    block = os.urandom(min(BLOCK, nbytes))
    with f:
        left = nbytes
        while left > 0:
            left -= f.write(block[: min(left, len(block))])
        os.fsync(f.fileno())
    return nbytes


def _read(path: Path, limit: int) -> int:
    moved = 0
    with open(path, "rb", buffering=0) as f:
        # What was just written may still be in the page cache: drop it, so the read is the
        # volume's (a FUSE file cache, if the volume has one, still serves it: so does training).
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        while moved < limit and (chunk := f.read(min(BLOCK, limit - moved))):
            moved += len(chunk)
    return moved


def _existing_files(root: Path) -> Iterator[Path]:
    for directory, _, files in os.walk(root):
        for name in sorted(files):
            yield Path(directory) / name


def measure(t: Target, nbytes: int, streams: int) -> Figures:
    if not t.writable:
        files = [f for _, f in zip(range(streams), _existing_files(t.path), strict=False)]
        if not files:
            return Figures(None, None)
        moved, took = _parallel([partial(_read, f, nbytes // len(files)) for f in files])
        return Figures(None, moved / took / 1e9 if moved else None, moved)
    # Files of this pod's own in the volume's top directory: the pods sharing a volume check
    # it at once, and a directory they shared would be removed under one of them.
    prefix = f"{CHECK_PREFIX}-{socket.gethostname()}-{os.getpid()}"
    files = [t.path / f"{prefix}-{i}" for i in range(streams)]
    share = nbytes // streams
    try:
        # Created here, before any stream starts: a stream that starts after a stop (SIGTERM)
        # only writes to a file already removed, and creates none.
        opened = [open(f, "wb", buffering=0) for f in files]  # noqa: SIM115 (closed by _write)
        written, write_took = _parallel([partial(_write, o, share) for o in opened])
        read, read_took = _parallel([partial(_read, f, share) for f in files])
    finally:
        for f in files:
            f.unlink(missing_ok=True)
    return Figures(written / write_took / 1e9, read / read_took / 1e9, written)


def _shown(gbps: float | None, verb: str) -> str:
    if gbps is None:
        return f"{verb} -"
    return f"{verb} {gbps:.2f} GB/s ({1 / gbps:.2f} s/GB)"


def verdict(t: Target, f: Figures) -> list[str]:
    """What the figures miss of the target's thresholds."""
    missed = []
    for what, floor, got in (
        ("write", t.min_write_gbps, f.write_gbps),
        ("read", t.min_read_gbps, f.read_gbps),
    ):
        if floor is not None and (got is None or got < floor):
            shown = "not measured" if got is None else f"{got:.2f} GB/s"
            missed.append(f"{t.path}: {what} {shown} is below {floor:g} GB/s")
    return missed


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _stop)
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(prog="storage_check.py", description=__doc__.split("\n")[0])
    parser.add_argument("--bytes", type=parse_size, default="1G", help="bytes per path (1G)")
    parser.add_argument("--streams", type=int, default=8, help="parallel files per path (8)")
    parser.add_argument("--read-only", type=lambda v: target(v, writable=False), action="append",
                        default=[], help="a path to read existing files from")  # fmt: skip
    parser.add_argument("paths", type=target, nargs="*", help="PATH[:MIN_WRITE:MIN_READ]")
    opts = parser.parse_args(args)
    if opts.streams < 1 or (split < len(argv) and not command):
        parser.error("--streams must be >= 1, and `--` needs a command after it")
    targets: list[Target] = [*opts.paths, *opts.read_only]
    missing = [str(t.path) for t in targets if not t.path.is_dir()]
    if missing:
        print(f"storage_check: not a directory: {', '.join(missing)}", file=sys.stderr)
        return EX_CONFIG
    host = socket.gethostname()
    problems: list[str] = []
    for t in targets:
        try:
            figures = measure(t, opts.bytes, opts.streams)
        except OSError as exc:
            problems.append(f"{t.path}: {exc}")
            continue
        print(f"storage {host} {t.path} ({figures.nbytes / 1e6:.0f} MB): "
              f"{_shown(figures.write_gbps, 'save')}, {_shown(figures.read_gbps, 'restore')}",
              flush=True)  # fmt: skip
        problems += verdict(t, figures)
    if problems:
        print("storage_check: FAIL\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    if command:
        os.execvp(command[0], command)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
