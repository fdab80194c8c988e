"""What the real-tier tests read back from Kueue and JobSet: a JobSet's Workload, its admission
and its pods."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from gpu_cluster.facts.kueue import JOBSET_NAME_LABEL, KUEUE_API
from tests.real.conftest import Cluster
from tools.realtier.kube import Kube, Object, describe, wait_for
from tools.realtier.stacks import StackRender


def condition(obj: Object, kind: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def workload_of(kube: Kube, namespace: str, jobset: str) -> Object | None:
    """The Kueue Workload that stands for JobSet `jobset` (owned by it)."""
    for workload in kube.list(KUEUE_API, "Workload", namespace):
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o["kind"] == "JobSet" and o["name"] == jobset for o in owners):
            return workload
    return None


def admitted(kube: Kube, namespace: str, jobset: str) -> Object | None:
    workload = workload_of(kube, namespace, jobset)
    if workload is None:
        return None
    admission = condition(workload, "Admitted")
    return workload if admission is not None and admission["status"] == "True" else None


def requeue_time(kube: Kube, namespace: str, jobset: str) -> float | None:
    """When Kueue tries the run's Workload again after taking its quota back (its
    status.requeueState.requeueAt, Unix time), if it has said."""
    workload = workload_of(kube, namespace, jobset)
    state = ((workload or {}).get("status") or {}).get("requeueState") or {}
    at = state.get("requeueAt")
    return datetime.fromisoformat(at).timestamp() if at else None


def workloads_explained(kube: Kube, namespace: str) -> list[str]:
    """One line per Workload in `namespace`: its conditions with their messages, its admission
    checks' states and when Kueue requeues it."""
    lines = []
    for workload in kube.list(KUEUE_API, "Workload", namespace):
        status = workload.get("status") or {}
        conditions = status.get("conditions") or []
        checks = status.get("admissionChecks") or []
        lines.append(
            f"workload {workload['metadata']['name']}: "
            + "; ".join(f"{c['type']}={c['status']} {c.get('message', '')}" for c in conditions)
            + "".join(
                f"; check {c['name']}={c['state']} retries={c.get('retryCount', 0)}" for c in checks
            )
            + f"; requeueState={status.get('requeueState')}"
        )
    return lines


def explain(cluster: Cluster, namespace: str) -> str:
    """What a wait for Kueue or JobSet saw: the namespace's pods and events, its Workloads, and
    the managers' latest log lines."""
    lines = [describe(cluster.kube, namespace), *workloads_explained(cluster.kube, namespace)]
    for manager in ("kueue", "jobset"):
        lines.append(f"--- {manager} log\n{cluster.plane.log_tail(manager, 15)}")
    return "\n".join(lines)


def run_pods(kube: Kube, namespace: str, name: str) -> list[Object]:
    """The pods of JobSet `name` that are not being deleted."""
    pods = kube.list("v1", "Pod", namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def running(kube: Kube, namespace: str, name: str, count: int) -> list[Object] | None:
    """The run's `count` pods once all of them run (and no others), else None."""
    pods = run_pods(kube, namespace, name)
    live = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return live if len(live) == count == len(pods) else None


def pods_of_an_admitted_run(cluster: Cluster, stack: StackRender) -> list[Object]:
    kube, s = cluster.kube, stack.settings
    why = functools.partial(explain, cluster, s.namespace)
    wait_for(
        "the run admitted", functools.partial(admitted, kube, s.namespace, s.name), explain=why
    )
    pods: list[Object] = wait_for(
        "its pods running",
        functools.partial(running, kube, s.namespace, s.name, s.nodes),
        explain=why,
    )
    return pods
