"""The goodput ledger of every run in the stack's queue, as Prometheus metrics: where each run's
wall time went, by the rules `gpu-cluster run status` shows it with (gpu_cluster/ledger.py,
shipped beside this script as gpu_cluster/). Standard library only; one pod in the stack's
namespace, reading with its ServiceAccount's rights (kube_api.py).

Each pass it lists the runs (the JobSets labelled with the stack's LocalQueue), Kueue's
Workloads, the runs' pods and the namespace's events, reads what rank 0's training container
printed since the last pass, and serves on RUN_LEDGER_METRICS_PORT (/metrics):

  gpu_cluster_run_ledger_seconds{namespace, run, bucket}  the run's seconds in each bucket
  gpu_cluster_run_wall_seconds{namespace, run}            its wall time, their sum

A run whose JobSet is gone leaves the metrics. Of rank 0's log it keeps only the lines the
ledger reads (step lines and torchrun's restart lines), fetched from where the last pass ended
(`sinceTime`, whole seconds; lines not after the last one kept are dropped) and at most
LOG_BYTES a pass, so a long log is read once, in parts.

Environment:
  RUN_LEDGER_NAMESPACE     the stack's namespace
  RUN_LEDGER_QUEUE         its LocalQueue, whose label (kueue.x-k8s.io/queue-name) marks a run
  RUN_LEDGER_CONTAINER     the training container, whose log has the step lines
  RUN_LEDGER_STEP_PATTERN  a line the training prints at every step (launcher.firstStepPattern)
  RUN_LEDGER_HEALTH_CHECK  the node health gate's AdmissionCheck; empty: none
  RUN_LEDGER_POLL_SECONDS  seconds between passes
  RUN_LEDGER_METRICS_PORT  the port to serve on

Exit 78 (EX_CONFIG) when the environment is incomplete.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.error
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kube_api import Api, every, from_env
from prometheus_text import family, metrics_server, sample, text

from gpu_cluster.facts.kueue import JOBSET_API, KUEUE_API, QUEUE_LABEL
from gpu_cluster.ledger import (
    BUCKETS,
    Ledger,
    StepLine,
    ledger_of,
    rank_zero,
    step_lines,
    torchrun_restarts,
    workload_of,
)
from gpu_cluster.timeline import JOBSET_NAME_LABEL, timestamped

PROGRAM = "run-ledger"
JOBSETS = f"/apis/{JOBSET_API}/namespaces/{{}}/jobsets"
WORKLOADS = f"/apis/{KUEUE_API}/namespaces/{{}}/workloads"
# At most this much of rank 0's log a pass (the CLI reads as much from a log's start).
LOG_BYTES = 32 * 2**20

Object = dict[str, Any]


@dataclass(frozen=True)
class Settings:
    namespace: str
    queue: str
    container: str
    step: re.Pattern[str]
    health_check: str | None
    poll: float


def settings_from(env: Mapping[str, str]) -> Settings:
    return Settings(
        namespace=env["RUN_LEDGER_NAMESPACE"],
        queue=env["RUN_LEDGER_QUEUE"],
        container=env["RUN_LEDGER_CONTAINER"],
        step=re.compile(env["RUN_LEDGER_STEP_PATTERN"]),
        health_check=env.get("RUN_LEDGER_HEALTH_CHECK") or None,
        poll=float(env["RUN_LEDGER_POLL_SECONDS"]),
    )


@dataclass
class KeptLog:
    """What the ledger reads of rank 0's log, read once: its step lines and torchrun's restart
    lines' times, and when the last line read was printed."""

    steps: list[StepLine] = field(default_factory=list)
    restarts: list[datetime] = field(default_factory=list)
    last: datetime | None = None

    def add(self, log: str, step_pattern: str, cut: bool = False) -> None:
        """Reads `log`'s (timestamped) lines after `last`; of a log `cut` at its size limit the
        last line, which may be part of one, is left to the next read."""
        lines = list(timestamped(log))
        fresh = [
            (at, said)
            for at, said in (lines[:-1] if cut else lines)
            if self.last is None or at > self.last
        ]
        if not fresh:
            return
        chunk = "".join(f"{at:%Y-%m-%dT%H:%M:%S.%f}Z {said}\n" for at, said in fresh)
        self.steps += step_lines(chunk, step_pattern)
        self.restarts += torchrun_restarts(chunk)
        self.last = fresh[-1][0]


def bucket_label(bucket: str) -> str:
    """A bucket as a label value: "health gate / init" -> "health_gate_init"."""
    return re.sub(r"[^a-z]+", "_", bucket.lower()).strip("_")


@dataclass
class Ledgers:
    """The runs' ledgers as the last pass found them, and rank 0's kept log by pod UID."""

    namespace: str
    found: dict[str, Ledger] = field(default_factory=dict)
    logs: dict[str, KeptLog] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def exposition(self) -> str:
        with self.lock:
            found = dict(self.found)
        lines = family(
            "gpu_cluster_run_ledger_seconds",
            "gauge",
            "Seconds of the run's wall time in each bucket of its goodput ledger.",
        )
        for run, split in sorted(found.items()):
            for bucket in BUCKETS:
                labels = {"namespace": self.namespace, "run": run, "bucket": bucket_label(bucket)}
                lines.append(
                    sample("gpu_cluster_run_ledger_seconds", labels, split.seconds[bucket])
                )
        lines += family(
            "gpu_cluster_run_wall_seconds",
            "gauge",
            "The run's wall time so far, from its JobSet's creation to its end.",
        )
        for run, split in sorted(found.items()):
            labels = {"namespace": self.namespace, "run": run}
            lines.append(sample("gpu_cluster_run_wall_seconds", labels, split.wall))
        return text(lines)


def read_new_log(api: Api, s: Settings, pod: Object, kept: KeptLog) -> None:
    """What rank 0 printed since `kept.last`, added to `kept`; nothing before it starts."""
    query = {"container": s.container, "timestamps": "true", "limitBytes": str(LOG_BYTES)}
    if kept.last is not None:
        query["sinceTime"] = kept.last.strftime("%Y-%m-%dT%H:%M:%SZ")
    path = f"/api/v1/namespaces/{s.namespace}/pods/{pod['metadata']['name']}/log"
    try:
        log = api.text(path, query)
    except urllib.error.HTTPError as error:
        if error.code in (400, 404):  # not started yet, or gone
            return
        raise
    kept.add(log, s.step.pattern, cut=len(log.encode()) >= LOG_BYTES)


def items(api: Api, path: str, **query: str) -> list[Object]:
    answer = api.call("GET", path, query=query or None)
    found: list[Object] = answer["items"]
    return found


def reconcile(api: Api, s: Settings, ledgers: Ledgers, now: datetime) -> None:
    """One pass: every run's ledger from the records as they are now."""
    runs = items(api, JOBSETS.format(s.namespace), labelSelector=f"{QUEUE_LABEL}={s.queue}")
    workloads = items(api, WORKLOADS.format(s.namespace))
    pods = items(api, f"/api/v1/namespaces/{s.namespace}/pods", labelSelector=JOBSET_NAME_LABEL)
    events = items(api, f"/api/v1/namespaces/{s.namespace}/events")
    found: dict[str, Ledger] = {}
    current: set[str] = set()
    for run in runs:
        name = run["metadata"]["name"]
        own = [p for p in pods if p["metadata"]["labels"].get(JOBSET_NAME_LABEL) == name]
        pod = rank_zero(own)
        kept = KeptLog()
        if pod is not None:
            uid = pod["metadata"]["uid"]
            current.add(uid)
            kept = ledgers.logs.setdefault(uid, kept)
            read_new_log(api, s, pod, kept)
        found[name] = ledger_of(
            run, workload_of(workloads, run), own, events, kept.steps, kept.restarts,
            s.health_check, now,
        )  # fmt: skip
    with ledgers.lock:
        ledgers.found = found
        ledgers.logs = {uid: log for uid, log in ledgers.logs.items() if uid in current}


def main() -> None:
    s = from_env(PROGRAM, lambda: settings_from(os.environ))
    port = from_env(PROGRAM, lambda: int(os.environ["RUN_LEDGER_METRICS_PORT"]))
    api = Api.in_cluster()
    ledgers = Ledgers(s.namespace)
    httpd = metrics_server(port, ledgers.exposition)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(f"{PROGRAM}: the ledgers of the runs in LocalQueue {s.namespace}/{s.queue}", flush=True)
    every(PROGRAM, s.poll, lambda: reconcile(api, s, ledgers, datetime.now(UTC)))


if __name__ == "__main__":
    main()
