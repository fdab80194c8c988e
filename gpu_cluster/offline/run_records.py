"""What `gpu-cluster run status` reads beside a run's own objects, once for all it shows: the
namespace's events, rank 0's log (from its start for the ledger and the first step, its end for
the last step) and, where the user may read them, the nodes the pods run on. Then the start of
the run's current pods, phase by phase (gpu_cluster/timeline.py, as timelineCommand shows a
run's), and the last step rank 0 printed."""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpu_cluster.ledger import rank_zero
from gpu_cluster.offline.run_cluster import NOT_FOUND, Right, RunCluster, RunCommandError, is_status
from gpu_cluster.plan.health_gate import health_gate_check
from gpu_cluster.timeline import Run, first_step_at, table, timestamped

# How much of rank 0's log is read from its start: a step line per step for days of steps. A
# longer log is read from its start; past the cut, the ledger counts the run as stepping.
LOG_BYTES = 32 * 2**20
# And from its end, for the last step: a step's line is among the last few hundred lines.
LAST_LINES = 500
NODES = Right("get", "", "nodes", cluster_wide=True)

Object = dict[str, Any]


@dataclass(frozen=True)
class RunRecords:
    """The namespace's events, rank 0's log from its start and its last lines (the whole log
    when it is shorter than the cut; timestamped; "" before it started or once gone), and the
    pods' nodes (None: not readable by the user)."""

    events: list[Object]
    log: str
    tail: str
    nodes: list[Object] | None


def _log(cluster: RunCluster, pod: Object | None, container: str, **window: int) -> str:
    if pod is None:
        return ""
    try:
        text: str = cluster.call(
            cluster.core().read_namespaced_pod_log,
            pod["metadata"]["name"],
            cluster.namespace,
            container=container,
            timestamps=True,
            **window,
        )
    except Exception as exc:  # not started yet (400), or gone (404): no log to give
        if not isinstance(exc, RunCommandError) and not is_status(exc, NOT_FOUND):
            raise
        return ""
    return text


def _nodes(cluster: RunCluster, pods: Sequence[Object]) -> list[Object] | None:
    """The nodes `pods` run on; None when the user may not read nodes (the submitter Role,
    being a namespace's, grants none)."""
    if not cluster.allowed(NODES):
        return None
    names = sorted({p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")})
    return [cluster.read(cluster.core().read_node, name) for name in names]


def run_records(cluster: RunCluster, pods: Sequence[Object], container: str) -> RunRecords:
    answer = cluster.read(cluster.core().list_namespaced_event, cluster.namespace)
    pod = rank_zero(pods)
    log = _log(cluster, pod, container, limit_bytes=LOG_BYTES)
    # A log shorter than the cut is whole, its end already read; only a cut one is read again.
    whole = len(log.encode()) < LOG_BYTES
    tail = log if whole else _log(cluster, pod, container, tail_lines=LAST_LINES)
    return RunRecords(answer["items"], log, tail, _nodes(cluster, pods))


def start_table(
    cluster: RunCluster,
    job_set: Object,
    workload: Object | None,
    pods: Sequence[Object],
    records: RunRecords,
    step_pattern: str | None,
) -> str:
    """The current pods' start, phase by phase, since the run was submitted."""
    run = Run(
        controller=job_set,
        workloads=[workload] if workload is not None else [],
        pods=list(pods),
        nodes=records.nodes or [],
        events=records.events,
        unreadable=("nodes",) if records.nodes is None else (),
        health_check=health_gate_check(cluster.settings),
        first_step=first_step_at(records.log, step_pattern) if step_pattern else None,
        asked_first_step=step_pattern is not None,
    )
    return table(run)


def last_step(records: RunRecords, step_pattern: str, now: datetime.datetime) -> str:
    """The last line of rank 0's that `step_pattern` matches, with when it was printed."""
    finder = re.compile(step_pattern)
    found = [(at, text) for at, text in timestamped(records.tail) if finder.search(text)]
    if not found:
        return "last step: none printed by rank 0's current pod yet"
    at, text = found[-1]
    ago = (now - at).total_seconds()
    return f"last step: {text.strip()} (rank 0, {at:%H:%M:%S} UTC, {ago:.0f} s ago)"
