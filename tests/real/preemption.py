"""The preemption drill on two real nodes (issue #40), shared by tests/real/test_drills.py
and bench/recovery.py: the drills' stack (tests/real/drills.py) with a ClusterQueue that lets a
higher-priority run evict a lower one (workload.queue.preemption LowerPriority) and two
priority classes; a low-priority run trains and saves, a high-priority run submitted to the same
queue makes Kueue evict it (its pods get SIGTERM: the example saves), the high run steps and is
stopped (`gpu-cluster run stop`), and Kueue admits the low run again, which resumes from the
step it saved."""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_cluster.facts.kueue import JOBSET_NAME_LABEL
from tests.conftest import stack_context
from tests.real.cluster_state import paste
from tests.real.conftest import RealCluster
from tests.real.drills import (
    SAVE_EVERY,
    STACK,
    resumed_and_stepped,
    run_command,
    stepping_past,
    submit_run,
)
from tests.real.queue_state import condition, workload_of, workloads_explained
from tools.realtier.kube import Object, describe, wait_for

LOW, HIGH = "low", "high"
PRIORITIES = (
    "workload.queue.preemption=LowerPriority",
    f"workload.queue.priorityClasses[0].name={LOW}",
    "workload.queue.priorityClasses[0].value=100",
    f"workload.queue.priorityClasses[1].name={HIGH}",
    "workload.queue.priorityClasses[1].value=1000",
)
# How the example marks a complete checkpoint (examples/checkpointing/train.py): step-<n>/COMPLETE.
COMPLETE = "COMPLETE"


def since(obj_condition: dict[str, Any] | None, status: str, after: float) -> float | None:
    """When the condition turned `status` (Unix time), if it did at or after `after`."""
    if obj_condition is None or obj_condition["status"] != status:
        return None
    at = datetime.datetime.fromisoformat(obj_condition["lastTransitionTime"]).timestamp()
    return at if at >= after else None


def workload_turned(
    cluster: RealCluster, namespace: str, run: str, kind: str, after: float
) -> float | None:
    """When run `run`'s Workload's condition `kind` turned True, if it did at or after
    `after` (its timestamps have whole seconds)."""
    workload = workload_of(cluster.kube, namespace, run)
    return None if workload is None else since(condition(workload, kind), "True", after)


def pods_of(cluster: RealCluster, namespace: str, run: str) -> list[Object]:
    """Every pod of run `run`, terminating ones too."""
    selector = f"{JOBSET_NAME_LABEL}={run}"
    return cluster.kube.list("v1", "Pod", namespace, label_selector=selector)


def wait_pods_gone(cluster: RealCluster, namespace: str, run: str) -> None:
    """Wait until run `run` has no pod left, terminating ones included."""
    wait_for(
        f"the {run} run's pods are gone",
        lambda: not pods_of(cluster, namespace, run),
        explain=lambda: describe(cluster.kube, namespace),
    )


def saved_after(checkpoints: Path, after: float) -> tuple[int, float] | None:
    """The step and time of the newest complete checkpoint written at or after `after`."""
    found = [
        (int(marker.read_text()), marker.stat().st_mtime)
        for marker in checkpoints.glob(f"step-*/{COMPLETE}")
    ]
    newest = max(found, default=None)
    return newest if newest is not None and newest[1] >= after else None


@dataclass(frozen=True)
class Preemption:
    """The drill's outcome: the low run's last step seen before the high run's submit, the step
    it saved when evicted, the step it resumed from once admitted again; seconds from Kueue's
    eviction to the save, and from the re-admission to its rank 0's first step after it."""

    last_before: int
    saved: int
    resumed_from: int
    evicted_to_saved: float
    readmitted_to_stepping: float


def preemption_drill(
    cluster: RealCluster,
    namespace: str,
    config: tuple[str, ...],
    tmp_path: Path,
    checkpoints: Path,
) -> Preemption:
    """With the low run submitted (its checkpoints in `checkpoints` on the host): let it save
    twice, submit the high run, follow the eviction and the save, stop the high run once it
    steps, and wait for the low run to step again from its own save."""
    before = stepping_past(cluster, namespace, 2 * SAVE_EVERY, LOW)
    # Whole seconds: the conditions' times are truncated.
    submitted = float(int(time.time()))
    submit_run(cluster, config, tmp_path, HIGH, ("--priority", HIGH))
    evicted = wait_for(
        "Kueue evicted the low run",
        lambda: workload_turned(cluster, namespace, LOW, "Evicted", submitted),
        explain=lambda: "\n".join(workloads_explained(cluster.kube, namespace)),
    )
    # Evicted pods step on (and may save on schedule) until SIGTERM reaches them: the save on
    # SIGTERM is the newest once they are gone.
    wait_pods_gone(cluster, namespace, LOW)
    saved = saved_after(checkpoints, evicted)
    assert saved is not None, f"no save in {checkpoints} since the eviction"
    saved_step, saved_at = saved
    stepping_past(cluster, namespace, 0, HIGH)
    paste(cluster, tmp_path, stack_context(STACK), run_command(config, "stop", HIGH))
    # Kueue frees the high run's quota only once its pods are gone (each gets SIGTERM and its
    # grace period to save): waited for on its own, so a slow shutdown is named as such and does
    # not eat the re-admission's time (on a loaded VM the two took more than one wait's 180 s).
    wait_pods_gone(cluster, namespace, HIGH)
    readmitted = wait_for(
        "Kueue admitted the low run again",
        lambda: workload_turned(cluster, namespace, LOW, "Admitted", evicted),
        explain=lambda: "\n".join(workloads_explained(cluster.kube, namespace)),
    )
    after = wait_for(
        "the low run resumed and stepped",
        lambda: resumed_and_stepped(cluster, namespace, before.pod_uid, LOW),
        explain=lambda: describe(cluster.kube, namespace),
    )
    stepped_at = time.time()
    assert after.resumed_from is not None
    return Preemption(
        before.last,
        saved_step,
        after.resumed_from,
        saved_at - evicted,
        stepped_at - readmitted,
    )
