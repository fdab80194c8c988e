"""The node health runner's check pods on the real tier: kwok runs no containers, so a test ends
each check pod as the kubelet reports a container's end (its exit code, its termination
message, when it started and finished), and reads what the runner wrote on the nodes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gpu_cluster.plan.health_runner import CHECK_LABEL
from tools.realtier.kube import Kube, Object

# How a check pod ends: its container's exit, and for `preempted` the scheduler's
# DisruptionTarget condition before the kill (kubernetes pkg/scheduler preemption).
ENDS: dict[str, dict[str, Any]] = {
    "passed": {"exitCode": 0, "reason": "Completed"},
    "failed": {"exitCode": 1, "reason": "Error"},
    "preempted": {"exitCode": 137, "reason": "Error"},
}


def check_pods(kube: Kube, namespace: str, check: str) -> dict[str, Object]:
    """Node -> the running pod of `check` placed there."""
    pods = kube.list("v1", "Pod", namespace, label_selector=f"{CHECK_LABEL}={check}")
    return {
        p["spec"]["nodeName"]: p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    }


def end_check(kube: Kube, pod: Object, how: str, message: str = "") -> None:
    """The check pod ends as the kubelet reports it: `passed`, `failed` (with `message`, the
    container's termination message) or `preempted`; its container started when kwok started
    it, and ends now."""
    meta = pod["metadata"]
    (container,) = pod["spec"]["containers"]
    (status,) = pod["status"]["containerStatuses"]
    started = status["state"]["running"]["startedAt"]
    terminated = {
        **ENDS[how],
        **({"message": message} if message else {}),
        "startedAt": started,
        "finishedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    disrupted = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "lastTransitionTime": None,
    }
    kube.patch_status(
        "v1",
        "Pod",
        meta["name"],
        meta["namespace"],
        {
            "phase": "Succeeded" if how == "passed" else "Failed",
            **({"conditions": [disrupted]} if how == "preempted" else {}),
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
            ],
        },
    )


def labels(kube: Kube, node: str) -> dict[str, str]:
    found: dict[str, str] = kube.get("v1", "Node", node)["metadata"].get("labels", {})
    return found


def taints(kube: Kube, node: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = kube.get("v1", "Node", node)["spec"].get("taints") or []
    return found
