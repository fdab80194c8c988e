"""What a run is doing, read from its JobSet, its Kueue Workload and its pods (pure): the state
`gpu-cluster run list` and `status` show, and the lines `status` prints."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from gpu_cluster.facts.kueue import JOB_COMPLETION_INDEX_ANNOTATION
from gpu_cluster.plan.run_template import run_nodes

State = Literal["queued", "admitted", "running", "succeeded", "failed", "stopped"]


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return None


def holds(obj: dict[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def state(job_set: dict[str, Any], workload: dict[str, Any] | None, running_pods: int) -> State:
    """stopped: being deleted (`run stop`); succeeded, failed: JobSet's own verdict; running: a
    pod of it runs; admitted: Kueue admitted it, its pods are not running yet; else queued."""
    if job_set["metadata"].get("deletionTimestamp"):
        return "stopped"
    if holds(job_set, "Completed"):
        return "succeeded"
    if holds(job_set, "Failed"):
        return "failed"
    if running_pods and not job_set["spec"].get("suspend"):
        return "running"
    if workload is not None and holds(workload, "Admitted"):
        return "admitted"
    return "queued"


def restarts(job_set: dict[str, Any]) -> int:
    return int((job_set.get("status") or {}).get("restarts", 0))


def age(created: str, now: datetime.datetime) -> str:
    """How long ago an RFC 3339 `created` was, as kubectl shows it (the largest two units)."""
    then = datetime.datetime.fromisoformat(created.replace("Z", "+00:00"))
    seconds = max(0, int((now - then).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{seconds}s" if seconds else f"{minutes}m"
    return f"{seconds}s"


def is_running(pod: dict[str, Any]) -> bool:
    return bool((pod.get("status") or {}).get("phase") == "Running")


def rank(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION, "?"))


def _rank_order(pod: dict[str, Any]) -> int:
    found = rank(pod)
    return int(found) if found.isdigit() else -1


def list_row(
    job_set: dict[str, Any],
    workload: dict[str, Any] | None,
    pods: Sequence[dict[str, Any]],
    now: datetime.datetime,
) -> tuple[str, ...]:
    """NAME STATE NODES RESTARTS AGE of one run."""
    meta = job_set["metadata"]
    running = sum(1 for p in pods if is_running(p))
    return (
        meta["name"],
        state(job_set, workload, running),
        str(run_nodes(job_set)),
        str(restarts(job_set)),
        age(meta["creationTimestamp"], now),
    )


def admission_lines(workload: dict[str, Any] | None) -> Iterator[str]:
    """Where Kueue has the run: admitted where, or why it still waits."""
    if workload is None:
        yield "admission: no Kueue Workload yet (Kueue has not seen the run)"
        return
    admission = (workload.get("status") or {}).get("admission")
    if holds(workload, "Admitted") and admission:
        for assignment in admission.get("podSetAssignments") or []:
            flavors = ", ".join(sorted(set((assignment.get("flavors") or {}).values())))
            yield (
                f"admission: admitted by ClusterQueue {admission.get('clusterQueue')} "
                f"({assignment.get('count')} pods, flavor {flavors or '-'})"
            )
        return
    why = condition(workload, "QuotaReserved") or condition(workload, "Admitted")
    reason = f": {why.get('message')}" if why and why.get("message") else ""
    yield f"admission: waiting in LocalQueue {workload['spec'].get('queueName')}{reason}"


def pod_rows(pods: Sequence[dict[str, Any]]) -> list[tuple[str, ...]]:
    """RANK POD PHASE NODE RESTARTS of the run's pods, by rank."""
    rows: list[tuple[str, ...]] = []
    for pod in sorted(pods, key=lambda p: (_rank_order(p), p["metadata"]["name"])):
        status = pod.get("status") or {}
        restarted = sum(
            int(c.get("restartCount", 0)) for c in status.get("containerStatuses") or []
        )
        rows.append(
            (
                rank(pod),
                pod["metadata"]["name"],
                str(status.get("phase", "-")),
                str(pod["spec"].get("nodeName") or "-"),
                str(restarted),
            )
        )
    return rows
