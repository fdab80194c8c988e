"""nerc-production as a JobSet behind Kueue on two real nodes (issue #39): `pulumi up` of the real
engine, with the image set to the training image built here, creates the stack's queue and its
JobSet on the API server; the real Kueue and JobSet managers run beside the control plane
(tools/realtier/controllers.py). Kueue admits the
run, JobSet starts it, and the training starts by itself: the launcher runs torchrun on every
pod, the ranks rendezvous across the nodes by the pods' DNS names and a small DDP model on gloo
steps on every rank. The stack's `timelineCommand`, as exported (kubectl answering as `oc`),
prints the start's phases up to the first step, in the order a start takes them. Killing one
rank's training process makes the JobSet restart the run (its status counts the restart), and
the new pods step again on every rank.

Then two runs that must not train, each through `pulumi up` (which replaces the JobSet): a
training script that is not there fails the run at once on the launcher's configuration error
(exit 78 on every pod, no restart though restarts are left), and with `verify.enabled` every
pod runs the fabric gate first, whose check cannot run here (NCCL needs the GPUs these nodes
only advertise): the gate says so (75, not a failed fabric), no training starts, and the run
fails. A pod of that run's template whose gate waits in its check is deleted: the gate, its
container's PID 1, stops the check at the kubelet's SIGTERM."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_cluster.facts.kueue import JOBSET_API
from tests.conftest import stack_context
from tests.real.cluster_state import end_of_deleted, paste, stack_engine
from tests.real.conftest import RealCluster
from tests.real.queue_state import condition, pods_of_an_admitted_run, run_pods
from tests.real.training import (
    JOBSET,
    STACK,
    TRAIN_SCRIPT,
    exec_in,
    kill_worker,
    left_running,
    provide_platform,
    stepped_on_every_rank,
    steps,
    training_cluster,
    training_overrides,
    training_stack_or_skip,
)
from tools.realtier.build import Tools
from tools.realtier.images import NodeImages
from tools.realtier.kube import describe, wait_for
from tools.realtier.stacks import StackRender

pytestmark = pytest.mark.real

STEPS = 5
# The launchers' configuration error (EX_CONFIG, sysexits.h; scripts/launch-common.sh die).
CONFIG_ERROR = 78
MISSPELT_SCRIPT = "/workspace/trian.py"
# What the fabric gate exits with when its check could not run (EX_TEMPFAIL, sysexits.h).
CHECK_NOT_RUN = 75
# The index the Job controller gives an Indexed Job's pod (kubernetes batch/v1
# JobCompletionIndexAnnotation): NODE_RANK, so the pod of index 1 runs rank 1.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
# The phases timelineCommand shows for a JobSet on nodes without agents or a health gate.
SHOWN = (
    "submitted",
    "admitted",
    "nodes ready",
    "scheduled",
    "sandbox ready",
    "image pulled",
    "initialized",
    "started",
    "ready",
    "first step",
)
# Pairs (earlier, later) a start takes in this order: each waits for the one before. The sandbox
# is made before the pull, but a kubelet before 1.36 (this one: 1.35) reports it only at the pod's
# next status update, often after the containers started (kubernetes/kubernetes#134660 reports it
# at once), so only its lower bound is certain.
CAUSAL = (
    ("submitted", "admitted"),
    ("admitted", "scheduled"),
    ("scheduled", "sandbox ready"),
    ("scheduled", "image pulled"),
    ("scheduled", "initialized"),
    ("image pulled", "started"),
    ("initialized", "started"),
    ("started", "first step"),
)


@pytest.fixture
def jobset_stack(node_images: NodeImages) -> StackRender:
    return training_stack_or_skip(node_images, JOBSET)


@pytest.fixture
def queued_nodes(
    tools: Tools, node_images: NodeImages, jobset_stack: StackRender, tmp_path: Path
) -> Iterator[RealCluster]:
    with training_cluster(tools, node_images, jobset_stack, tmp_path, queued=True) as cluster:
        yield cluster


def test_a_queued_jobset_trains_by_itself_shows_its_start_and_restarts_a_killed_rank(
    queued_nodes: RealCluster, jobset_stack: StackRender, node_images: NodeImages, tmp_path: Path
) -> None:
    cluster, stack = queued_nodes, jobset_stack
    provide_platform(cluster, stack, tmp_path / "volumes")
    engine = stack_engine(cluster, STACK, tmp_path / "engine")
    engine.up(*training_overrides(node_images, JOBSET))
    pods = pods_of_an_admitted_run(cluster, stack)
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["real-node-0", "real-node-1"]
    seen = stepped_on_every_rank(cluster.kube, stack, STEPS)
    assert seen[0][STEPS] == seen[1][STEPS], seen

    printed = paste(cluster, tmp_path, stack_context(STACK), stack.run.outputs["timelineCommand"])
    rows = printed.splitlines()[1:-1]
    at = {row[:14].strip(): row[14:36].strip() for row in rows}
    assert list(at) == list(SHOWN), printed
    assert "-" not in at.values(), printed
    for earlier, later in CAUSAL:
        assert at[earlier] <= at[later], (earlier, later, printed)

    # One rank's training process dies (SIGKILL, as the kernel's OOM killer ends it): torchrun
    # on that pod fails, the Job fails, and the JobSet restarts the whole run.
    (rank_one,) = [p for p in pods if p["metadata"]["annotations"][COMPLETION_INDEX] == "1"]
    kill_worker(cluster, rank_one, TRAIN_SCRIPT)
    wait_for("the JobSet restarted", lambda: restarts(cluster, stack) >= 1)
    again = pods_of_an_admitted_run(cluster, stack)
    assert {p["metadata"]["uid"] for p in again}.isdisjoint(p["metadata"]["uid"] for p in pods)
    seen = stepped_on_every_rank(cluster.kube, stack, STEPS)
    assert seen[0][STEPS] == seen[1][STEPS], seen
    assert restarts(cluster, stack) == 1

    # Under torchrun, Python's 2 for a script it cannot open would be torchrun's 1, which the
    # JobSet restarts on: the launcher refuses the script first.
    engine.up(*training_overrides(node_images, (*JOBSET, f"workload.command[0]={MISSPELT_SCRIPT}")))
    ended = failed_run(cluster, stack)
    assert restarts(cluster, stack) == 0
    for log, code in ended:
        assert code == CONFIG_ERROR, log
        assert f"training script {MISSPELT_SCRIPT} is not there or not readable" in log, log

    engine.up(
        *training_overrides(node_images, (*JOBSET, "verify.enabled=true", "workload.maxRestarts=0"))
    )
    for log, code in failed_run(cluster, stack):
        assert code == CHECK_NOT_RUN, log
        assert "--backend nccl needs CUDA" in log, log
        assert (
            "fabric-gate: the fabric check could not run (exit 1; its ranks: a setup error)" in log
        )
        assert not steps(log), log
    gate_stopped_by_a_delete(cluster, stack)


# Far past the watch's wait for the delete (SETTLE_DEADLINE_S): a gate that ignored SIGTERM would
# be killed only then, and the test would give up first.
GATE_GRACE_SECONDS = 600
# The label Kueue gives the pods of a run it admitted, which admitted.sh reads (KUEUE_PODSET).
PODSET_LABEL = "kueue.x-k8s.io/podset"


def gate_stopped_by_a_delete(cluster: RealCluster, stack: StackRender) -> None:
    """A pod of the run's own template (admitted.sh, then fabric-gate.sh: the container's PID
    1) on real-node-0, the check's torchrun waiting in the rendezvous it hosts for a second node
    that never comes. Deleted, as Kueue's preemption or a `pulumi up` that replaces the run
    deletes its pods: the kubelet's SIGTERM reaches the gate, which stops the check and ends 143
    without starting the launcher (a gate deaf to it: SIGKILL at the end of the grace period,
    137)."""
    kube, s = cluster.kube, stack.settings
    (replicated,) = kube.get(JOBSET_API, "JobSet", s.name, s.namespace)["spec"]["replicatedJobs"]
    spec = replicated["template"]["spec"]["template"]["spec"]
    (training,) = spec["containers"]
    rendezvous = {"NNODES": "2", "MASTER_ADDR": "127.0.0.1"}
    training["env"] = [
        *(e for e in training["env"] if e["name"] not in rendezvous),
        *({"name": name, "value": value} for name, value in rendezvous.items()),
    ]
    # No GPUs (none is free on the node once a run holds them) and the message the kubelet
    # keeps of its end.
    training["resources"] = {}
    training["terminationMessagePolicy"] = "FallbackToLogsOnError"
    spec.pop("affinity", None)
    spec |= {"nodeName": "real-node-0", "terminationGracePeriodSeconds": GATE_GRACE_SECONDS}
    name = "fabric-gate-stopped"
    pod = kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": s.namespace, "labels": {PODSET_LABEL: "node"}},
            "spec": spec,
        }
    )
    in_pod = exec_in(cluster.tools.binary("kubectl"), pod, cluster.kubeconfig)

    def waiting() -> bool:
        live = kube.get("v1", "Pod", name, s.namespace)
        return live["status"]["phase"] == "Running" and bool(left_running(in_pod, None, "torchrun"))

    wait_for("the check's torchrun in its rendezvous", waiting)
    terminated, _after = end_of_deleted(kube.delete_and_follow("v1", "Pod", name, s.namespace))
    assert terminated["exitCode"] == 128 + signal.SIGTERM, terminated
    said = "fabric-gate: stopped (SIGTERM) during the fabric check; not starting"
    assert said in terminated.get("message", ""), terminated


def restarts(cluster: RealCluster, stack: StackRender) -> int:
    """How often the JobSet restarted the run (its status.restarts)."""
    s = stack.settings
    live = cluster.kube.get(JOBSET_API, "JobSet", s.name, s.namespace)
    return int((live.get("status") or {}).get("restarts") or 0)


def failed_run(cluster: RealCluster, stack: StackRender) -> list[tuple[str, int | None]]:
    """Once the stack's JobSet has failed: the training log and exit code of each of its pods
    still there (the Job deletes those that had not ended when it failed)."""
    s, kube = stack.settings, cluster.kube

    def failed() -> bool:
        reported = condition(kube.get(JOBSET_API, "JobSet", s.name, s.namespace), "Failed")
        return reported is not None and reported["status"] == "True"

    wait_for("the run failed", failed, explain=lambda: describe(kube, s.namespace))
    ended = []
    for pod in run_pods(kube, s.namespace, s.name):
        (training,) = [c for c in pod["status"]["containerStatuses"] if c["name"] == "training"]
        log = kube.pod_log(pod["metadata"]["name"], s.namespace, "training")
        ended.append((log, training["state"].get("terminated", {}).get("exitCode")))
    assert ended
    return ended
