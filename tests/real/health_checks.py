"""The node health runner's check pods on the real tier: kwok runs no containers, so a test ends
each check pod as the kubelet reports a container's end (its exit code, its termination
message, when it started and finished), and reads what the runner wrote on the nodes."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.health import RESULT_LABEL, TAINT_KEY, TIME_LABEL
from gpu_cluster.plan.health_runner import CHECK_LABEL
from tests.real.cluster_state import deploy_on
from tests.real.queue_state import admitted, condition, explain, running, workload_of
from tests.real.script_controllers import running_script
from tests.real.test_jobset_stack import OVERRIDES, nodes_in_blocks
from tools.realtier.controlplane import free_port
from tools.realtier.kube import Kube, Object, wait_for
from tools.realtier.stacks import StackRender, render

if TYPE_CHECKING:
    from tests.real.conftest import Cluster

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


@dataclass(frozen=True)
class GatedStack:
    """gcp-a3 as a JobSet stack behind the health gate with the runner, deployed on four GPU
    nodes in GCE topology blocks (test_jobset_stack.nodes_in_blocks), its gate and runner
    running as processes with their ServiceAccounts' tokens. log, gate_log: theirs."""

    stack: StackRender
    log: Path
    gate_log: Path
    why: Callable[[], str]
    # Where the runner serves its metrics (host:port, a free port of this host's).
    metrics: str

    @property
    def settings(self) -> Settings:
        return self.stack.settings

    def explained(self) -> str:
        """What a wait that timed out prints: both scripts' logs and the namespace's state."""
        return self.log.read_text() + self.gate_log.read_text() + self.why()

    def wait_unplaced(self, kube: Kube) -> None:
        """Until Kueue finds no block with two nodes for the run (the test's blocks have two
        nodes in one block only)."""
        s = self.settings
        wait_for(
            "Kueue finding no place",
            lambda: (
                (w := workload_of(kube, s.namespace, s.name)) is not None
                and (c := condition(w, "QuotaReserved")) is not None
                and c["status"] == "False"
                and "fit only 1 out of 2 pod(s)" in c["message"]
            ),
            explain=self.explained,
        )

    def wait_running(self, kube: Kube, node: str, check: str) -> list[str]:
        """Until `node` passed `check` and lost its taint, the run is admitted and its pods run;
        the nodes they run on."""
        s = self.settings
        result, _, taint = keys(check)
        wait_for(
            f"{node} passed {check} and untainted",
            lambda: (
                labels(kube, node).get(result) == "pass"
                and all(t["key"] != taint for t in taints(kube, node))
            ),
            explain=self.explained,
        )
        wait_for(
            "the run admitted",
            functools.partial(admitted, kube, s.namespace, s.name),
            explain=self.explained,
        )
        pods = wait_for(
            "both pods running",
            functools.partial(running, kube, s.namespace, s.name, s.nodes),
            explain=self.why,
        )
        return sorted(p["spec"]["nodeName"] for p in pods)


@contextlib.contextmanager
def gated_stack(
    cluster: Cluster, overrides: tuple[str, ...], tmp_path: Path
) -> Iterator[GatedStack]:
    """GatedStack for gcp-a3 with `overrides`, until the block ends."""
    stack = render("gcp-a3", (*OVERRIDES, *overrides))
    s = stack.settings
    deploy_on(cluster.kube, nodes_in_blocks(stack), stack)
    port = str(free_port())
    runner = f"{s.name}-node-health-runner"
    with (
        running_script(cluster, stack, f"{s.name}-node-health-gate", tmp_path) as gate_log,
        running_script(
            cluster, stack, runner, tmp_path, {"HEALTH_RUNNER_METRICS_PORT": port}
        ) as log,
    ):
        why = functools.partial(explain, cluster, s.namespace)
        yield GatedStack(stack, log, gate_log, why, f"127.0.0.1:{port}")


def keys(check: str) -> tuple[str, str, str]:
    """`check`'s result label, time label and taint key."""
    return RESULT_LABEL.format(check), TIME_LABEL.format(check), TAINT_KEY.format(check)
