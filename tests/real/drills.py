"""Failure drills on two real nodes (issue #40), shared by tests/real/test_drills.py and
bench/recovery.py: nerc-production as a JobSet stack, a run submitted with `gpu-cluster run
submit` (as a user runs it, from a shell) that trains examples/checkpointing/train.py with its
checkpoints in the run's CHECKPOINT_DIR on the shared workspace claim, then a fault, then the
run stepping again from its newest checkpoint."""

from __future__ import annotations

import re
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpu_cluster.facts.kueue import JOB_COMPLETION_INDEX_ANNOTATION, JOBSET_API
from tests.conftest import ROOT, stack_context
from tests.real.cluster_state import paste
from tests.real.conftest import RealCluster
from tests.real.queue_state import run_pods
from tests.real.training import JOBSET, provide_platform, training_overrides
from tools.realtier.images import NodeImages
from tools.realtier.kube import Object, describe, wait_for
from tools.realtier.stacks import StackRender

STACK = "nerc-production"
RUN = "drill"
# The node drill's run: on one node, so that the other is its spare.
NODE_RUN = "drill-one-node"
# The recovery contract's example, copied into the workspace claim the pods share.
EXAMPLE = ROOT / "examples" / "checkpointing" / "train.py"
SCRIPT = f"/workspace/{EXAMPLE.name}"
SAVE_EVERY = 4
COMMAND = (SCRIPT, "--steps", "100000", "--save-every", str(SAVE_EVERY), "--step-seconds", "0.5")
STEP_LINE = r"^step (\d+) loss "
STEP = re.compile(STEP_LINE, re.MULTILINE)
# The stack, a JobSet stack whose runs a person submits; its step line the example's, whose
# number the ledger of `gpu-cluster run status` reads; the runs' metrics on, so that the stack's
# ledger exporter serves the same ledgers.
CONFIG = (
    *JOBSET,
    "workload.maxRestarts=4",
    f"launcher.firstStepPattern={STEP_LINE}",
    "monitoring.runMetrics.enabled=true",
)
RESUMED = re.compile(r"^resumed from step (\d+) ", re.MULTILINE)


def drill_config(images: NodeImages) -> tuple[str, ...]:
    """The stack's config for the drills, on the training image; () when it is not built."""
    return training_overrides(images, CONFIG)


def provide_stack(cluster: RealCluster, stack: StackRender, volumes: Path) -> None:
    """The platform's part and the stack's objects but its own run (the runs are submitted),
    created as pulumi-kubernetes creates them; the example in the workspace."""
    provide_platform(cluster, stack, volumes)
    (volumes / "ml-dev-env-workspace" / EXAMPLE.name).write_text(EXAMPLE.read_text())
    cluster.kube.create_all(o for o in stack.objects() if o["kind"] != "JobSet")


def cli_command(config: tuple[str, ...], *subcommand: str, args: tuple[str, ...] = ()) -> str:
    """`gpu-cluster SUBCOMMAND --stack <the drill's> --set ... ARGS`, as a shell line."""
    sets = " ".join(f"--set {shlex.quote(c)}" for c in config)
    return (
        f"{shlex.quote(sys.executable)} -m gpu_cluster {shlex.join(subcommand)} --stack {STACK} "
        f"{sets} {shlex.join(args)}"
    )


def run_command(config: tuple[str, ...], verb: str, *args: str) -> str:
    """`gpu-cluster run VERB ARGS` on the drill's stack, as a shell line."""
    return cli_command(config, "run", verb, args=args)


def submit_run(
    cluster: RealCluster,
    config: tuple[str, ...],
    tmp_path: Path,
    run: str = RUN,
    flags: tuple[str, ...] = (),
) -> str:
    """`gpu-cluster run submit` of a drill's run (`flags`: more of submit's, such as
    --priority), as a user pastes it in a shell on the stack's context; what it printed."""
    command = run_command(config, "submit", "--name", run, *flags, "--", *COMMAND)
    return paste(cluster, tmp_path, stack_context(STACK), command)


def run_status(cluster: RealCluster, config: tuple[str, ...], tmp_path: Path, picture: Path) -> str:
    """What `gpu-cluster run status --svg` printed about the drill's run (its ledger drawn in
    `picture`)."""
    status = run_command(config, "status", RUN, "--svg", str(picture))
    return paste(cluster, tmp_path, stack_context(STACK), status)


def ledger_seconds(printed: str) -> dict[str, float]:
    """The goodput ledger in `printed` (run status): seconds per bucket, and the wall time."""
    table = printed.split("where the run's time went", 1)[1].splitlines()[2:]
    rows = [line.rsplit(maxsplit=2) for line in table if line and not line.startswith("drawn")]
    return {bucket: float(seconds) for bucket, seconds, _ in rows}


@dataclass(frozen=True)
class Progress:
    """What rank 0 of the run's current pods printed: the step it resumed from (None: a fresh
    start) and the steps since."""

    pod_uid: str
    resumed_from: int | None
    steps: tuple[int, ...]

    @property
    def last(self) -> int:
        return max(self.steps, default=self.resumed_from or 0)


def rank_zero(cluster: RealCluster, namespace: str, run: str = RUN) -> Object | None:
    pods = [
        p
        for p in run_pods(cluster.kube, namespace, run)
        if p["metadata"]["annotations"].get(JOB_COMPLETION_INDEX_ANNOTATION) == "0"
    ]
    return pods[0] if pods else None


def progress(cluster: RealCluster, namespace: str, run: str = RUN) -> Progress | None:
    pod = rank_zero(cluster, namespace, run)
    if pod is None:
        return None
    try:
        printed = cluster.kube.pod_log(pod["metadata"]["name"], namespace)
    except Exception:  # not started yet: the API server has no log to give
        return None
    resumed = RESUMED.findall(printed)
    return Progress(
        pod["metadata"]["uid"],
        int(resumed[-1]) if resumed else None,
        tuple(int(s) for s in STEP.findall(printed)),
    )


def stepping_past(cluster: RealCluster, namespace: str, step: int, run: str = RUN) -> Progress:
    """Wait until run `run`'s rank 0 printed a step after `step`."""

    def past() -> Progress | None:
        seen = progress(cluster, namespace, run)
        return None if seen is None or seen.last <= step else seen

    return wait_for(
        f"{run}'s rank 0 past step {step}", past, explain=lambda: describe(cluster.kube, namespace)
    )


def restarts(cluster: RealCluster, namespace: str, run: str = RUN) -> int:
    live = cluster.kube.get(JOBSET_API, "JobSet", run, namespace)
    return int((live.get("status") or {}).get("restarts") or 0)


@dataclass(frozen=True)
class Recovery:
    """A drill's outcome: the last step rank 0 was seen at before the fault (it may go on a step
    or two while the fault is injected), the step the new pods resumed from, and seconds from
    the fault to rank 0's first step after it."""

    fault: str
    last_before: int
    resumed_from: int
    seconds: float


def drill(
    cluster: RealCluster,
    namespace: str,
    fault: str,
    inject: Callable[[Object], None],
    run: str = RUN,
) -> Recovery:
    """Let run `run` save at least twice, `inject` the fault (named `fault`) into its rank 0's
    pod, and wait for the restarted run's rank 0 to step past the step it resumed from."""
    before = stepping_past(cluster, namespace, 2 * SAVE_EVERY, run)
    count = restarts(cluster, namespace, run)
    seen = progress(cluster, namespace, run)
    assert seen is not None and seen.pod_uid == before.pod_uid
    pod = rank_zero(cluster, namespace, run)
    assert pod is not None
    started = time.monotonic()
    inject(pod)
    wait_for("the JobSet restarted the run", lambda: restarts(cluster, namespace, run) > count)
    after = wait_for(
        "the restarted rank 0 resumed and stepped",
        lambda: resumed_and_stepped(cluster, namespace, before.pod_uid, run),
        explain=lambda: describe(cluster.kube, namespace),
    )
    assert after.resumed_from is not None
    return Recovery(fault, seen.last, after.resumed_from, time.monotonic() - started)


def resumed_and_stepped(
    cluster: RealCluster, namespace: str, old_uid: str, run: str = RUN
) -> Progress | None:
    """Run `run`'s rank 0, once a pod other than `old_uid` resumed and stepped past it."""
    seen = progress(cluster, namespace, run)
    if seen is None or seen.pod_uid == old_uid or seen.resumed_from is None:
        return None
    return seen if seen.last > seen.resumed_from else None


def delete_pod(cluster: RealCluster, pod: Object) -> None:
    """Delete `pod` as `kubectl delete pod` does: SIGTERM and its grace period."""
    cluster.kube.delete("v1", "Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])


# A node made unusable: tainted NoExecute, as an operator cordons and drains a failing node
# (or a remediation controller marks it), so that the pods there are evicted (SIGTERM and their
# grace period) and none is scheduled there again. The stack's pods tolerate only nvidia.com/gpu.
UNUSABLE = {"key": "gpu-cluster.drill/unusable", "value": "true", "effect": "NoExecute"}


def _taint(cluster: RealCluster, node: str, unusable: bool) -> None:
    """Add UNUSABLE to `node`'s taints, or take it off."""
    live = cluster.kube.get("v1", "Node", node)
    taints = [t for t in live["spec"].get("taints") or [] if t["key"] != UNUSABLE["key"]]
    taints += [UNUSABLE] if unusable else []
    cluster.kube.merge_patch("v1", "Node", node, None, {"spec": {"taints": taints}})


@dataclass(frozen=True)
class Move:
    """The node drill's outcome: its recovery, the node made unusable and rank 0's node after."""

    recovery: Recovery
    lost: str
    now_on: str


def node_drill(
    cluster: RealCluster, namespace: str, config: tuple[str, ...], tmp_path: Path
) -> Move:
    """Submit NODE_RUN on one node, make its node unusable once it saved twice, and follow the
    run to the other node; the node is usable again after."""
    submit_run(cluster, config, tmp_path, NODE_RUN, ("--nodes", "1"))
    lost: list[str] = []

    def take_its_node(pod: Object) -> None:
        lost.append(pod["spec"]["nodeName"])
        _taint(cluster, lost[0], unusable=True)

    try:
        recovery = drill(cluster, namespace, "node unusable", take_its_node, NODE_RUN)
    finally:
        for node in lost:
            _taint(cluster, node, unusable=False)
    pod = rank_zero(cluster, namespace, NODE_RUN)
    assert pod is not None
    return Move(recovery, lost[0], pod["spec"]["nodeName"])
