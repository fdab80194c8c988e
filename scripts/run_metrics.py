"""A run's progress as Prometheus metrics, from the lines its launcher prints: no change to the
training code, standard library only (the user's image has no Prometheus client; the text
format from prometheus_text.py beside it).

Usage: run_metrics.py FIFO_DIR LAUNCHER_PID

The launcher (launch-common.sh start_run_metrics) starts it, waits for FIFO_DIR/ready, then tees
its own stdout and stderr into FIFO_DIR/stdout and FIFO_DIR/stderr, named pipes this script
made. Every line matching RUN_METRICS_STEP_PATTERN is a step; torchrun's restart line is a
restart. The metrics are served in Prometheus' text format on RUN_METRICS_PORT (/metrics). It
stops on SIGTERM or SIGINT, or once LAUNCHER_PID (the launcher, then the trainer it became) is
gone.

Environment:
  RUN_METRICS_PORT          required  the port to serve on
  RUN_METRICS_STEP_PATTERN  optional  a Python regular expression matched anywhere in a line
                                      (launcher.firstStepPattern); unset: no step is counted
  RUN_NAME, POD_NAMESPACE, NODE_RANK, NODE_NAME  the series' labels run, namespace, rank, node
  RUN_RESTART_ATTEMPT       optional  restarts of the whole run before this pod (JobSet's
                                      restart-attempt label); default 0
  GPUS_PER_NODE             optional  the GPUs this pod holds for the run (the launchers' own
                                      variable), served as a gauge to attribute GPU time to
                                      runs; unset or not a count: no such series

Exit 78 (EX_CONFIG) when the environment is incomplete.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from prometheus_text import family, metrics_server, sample, text

EX_CONFIG = 78
STREAMS = ("stdout", "stderr")
READY = "ready"
# What torchrun's agent logs before it restarts a failed worker group (torch 2.13
# torch/distributed/elastic/agent/server/api.py SimpleElasticAgent._invoke_run); a membership
# change also restarts the group, but says "Detected N new nodes" and is no failure.
TORCHRUN_RESTART = re.compile(
    r"Worker group (FAILED|UNHEALTHY)\. \d+/\d+ attempts left; will restart worker group"
)
# Step durations from tens of milliseconds (small models) to tens of minutes (a step that waits
# on a straggler or a checkpoint), seconds.
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
# How often the launcher's PID is looked at, seconds.
LAUNCHER_POLL_SECONDS = 1.0


class RunProgress:
    """Steps, their durations and restarts, as read from the launcher's lines."""

    def __init__(
        self, step: re.Pattern[str] | None, restart_attempt: int, gpus: int | None = None
    ) -> None:
        self._step = step
        self._restart_attempt = restart_attempt
        self._gpus = gpus
        self._lock = threading.Lock()
        self.steps = 0
        self.last_step: float | None = None
        # False after a restart: the time from the last step before it to the next is no step's.
        self._timing = False
        self.restarts_in_pod = 0
        self.bucket_counts = [0] * len(DURATION_BUCKETS)
        self.duration_count = 0
        self.duration_sum = 0.0

    def read(self, line: str, now: float) -> None:
        """Counts `line`, printed at `now` (Unix seconds); matched without its line end, as the
        config's check of the pattern and the timeline read lines."""
        line = line.rstrip("\r\n")
        with self._lock:
            if TORCHRUN_RESTART.search(line):
                self.restarts_in_pod += 1
                self._timing = False
            elif self._step is not None and self._step.search(line):
                self.steps += 1
                if self._timing and self.last_step is not None:
                    self._observe(now - self.last_step)
                self.last_step = now
                self._timing = True

    def _observe(self, seconds: float) -> None:
        self.duration_count += 1
        self.duration_sum += seconds
        for i, bound in enumerate(DURATION_BUCKETS):
            if seconds <= bound:
                self.bucket_counts[i] += 1

    def exposition(self, labels: dict[str, str]) -> str:
        """The metrics in Prometheus' text format, every series labelled with `labels`."""
        with self._lock:
            last = self.last_step
            restarts = self._restart_attempt + self.restarts_in_pod
            lines = [
                *family("gpu_cluster_run_steps_total", "counter", "Step lines the run printed."),
                sample("gpu_cluster_run_steps_total", labels, self.steps),
                *family(
                    "gpu_cluster_run_restarts_total",
                    "counter",
                    "Restarts of the run: its JobSet's before this pod, torchrun's in this pod.",
                ),
                sample("gpu_cluster_run_restarts_total", labels, restarts),
                *family(
                    "gpu_cluster_run_step_duration_seconds",
                    "histogram",
                    "Seconds between consecutive step lines, restarts excluded.",
                ),
            ]
            name = "gpu_cluster_run_step_duration_seconds"
            for bound, count in zip(DURATION_BUCKETS, self.bucket_counts, strict=True):
                lines.append(sample(f"{name}_bucket", {**labels, "le": repr(bound)}, count))
            lines += [
                sample(f"{name}_bucket", {**labels, "le": "+Inf"}, self.duration_count),
                sample(f"{name}_sum", labels, self.duration_sum),
                sample(f"{name}_count", labels, self.duration_count),
            ]
            if self._gpus is not None:
                lines += [
                    *family(
                        "gpu_cluster_run_gpus",
                        "gauge",
                        "GPUs this pod holds for the run; over time, the run's GPU time.",
                    ),
                    sample("gpu_cluster_run_gpus", labels, self._gpus),
                ]
            if last is not None:
                lines += [
                    *family(
                        "gpu_cluster_run_last_step_timestamp_seconds",
                        "gauge",
                        "When the run last printed a step line, Unix seconds.",
                    ),
                    sample("gpu_cluster_run_last_step_timestamp_seconds", labels, last),
                ]
        return text(lines)


def follow(fd: int, progress: RunProgress, clock: Callable[[], float] = time.time) -> None:
    """Reads the lines of pipe `fd` into `progress`."""
    with open(fd, encoding="utf-8", errors="replace", newline="\n") as lines:
        for line in lines:
            progress.read(line, clock())


def open_fifos(fifo_dir: Path) -> list[int]:
    """FIFO_DIR's named pipes, made and opened. Opened for writing too: the launcher's tee then
    opens them without waiting, and they do not end when it closes them (a restart)."""
    fds = []
    for stream in STREAMS:
        os.mkfifo(fifo_dir / stream, 0o600)
        fds.append(os.open(fifo_dir / stream, os.O_RDWR))
    return fds


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        # A zombie has exited; it waits only for its parent to reap it (proc(5)).
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _config_error(message: str) -> int:
    print(f"run_metrics: error: {message}", file=sys.stderr)
    return EX_CONFIG


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        return _config_error("usage: run_metrics.py FIFO_DIR LAUNCHER_PID")
    fifo_dir, launcher = Path(argv[0]), int(argv[1])
    env = os.environ
    port = env.get("RUN_METRICS_PORT", "")
    if not port.isdigit() or not 0 < int(port) < 65536:
        return _config_error(f"RUN_METRICS_PORT={port!r} is not a port")
    pattern = env.get("RUN_METRICS_STEP_PATTERN") or None
    try:
        step = re.compile(pattern) if pattern is not None else None
    except re.error as e:
        return _config_error(f"RUN_METRICS_STEP_PATTERN={pattern!r}: {e}")
    attempt = env.get("RUN_RESTART_ATTEMPT") or "0"
    if not attempt.isdigit():
        return _config_error(f"RUN_RESTART_ATTEMPT={attempt!r} is not a count")
    labels = {
        "run": env.get("RUN_NAME", ""),
        "namespace": env.get("POD_NAMESPACE", ""),
        "rank": env.get("NODE_RANK", ""),
        "node": env.get("NODE_NAME", ""),
    }
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    gpus = env.get("GPUS_PER_NODE", "")
    progress = RunProgress(step, int(attempt), int(gpus) if gpus.isdigit() else None)
    httpd = metrics_server(int(port), lambda: progress.exposition(labels))
    for fd in open_fifos(fifo_dir):
        threading.Thread(target=follow, args=(fd, progress), daemon=True).start()
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    (fifo_dir / READY).touch()
    while not stop.wait(LAUNCHER_POLL_SECONDS) and alive(launcher):
        pass
    httpd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
