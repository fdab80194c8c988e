"""The stack's own node health runner (workload.queue.healthGate.runner): which nodes it checks,
the GPU check it runs on each, and what it may change on a node (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.gpudirect import POD_LIB_DIR
from gpu_cluster.facts.health import (
    DCGM_LEVEL_MINUTES,
    RUNNER_CHECK,
    TAINT_EFFECT,
    TAINT_KEY,
)
from gpu_cluster.plan.health_gate import HEALTH_GATE_POLL_SECONDS, NOBODY_UID, health_gate_check
from gpu_cluster.plan.podspec import NodeRequirement

HEALTH_RUNNER_SCRIPT = "node_health_runner.py"
GPU_CHECK_SCRIPT = "gpu-check.sh"
# Beyond the diagnostics' own time, a check pod's deadline (counted from when the kubelet took
# it, so the DCGM image's pull included) allows this much.
CHECK_DEADLINE_MARGIN_MINUTES = 15
# The label the runner's check Jobs (and their pods) carry: which check.
CHECK_LABEL = "gpu-cluster.io/health-check"


@dataclass(frozen=True)
class HealthRunnerPlan:
    """name: the runner's objects in the namespace (and its ServiceAccount); template: the GPU
    check's PodTemplate; policy: the cluster-scoped admission policy that confines its node
    writes. node_selector: the label selector of the nodes it checks; recheck_seconds: how old
    a result may get before it checks the node again. The check: DCGM diagnostics in
    `check_image` on `gpus` GPUs, failed past `deadline_seconds`, tolerating `tolerations`
    ((key, effect): the GPU nodes' taints and its own), with `check_env` (the level among
    them)."""

    name: str
    namespace: str
    template: str
    policy: str
    node_selector: str
    recheck_seconds: int
    image: str
    check_image: str
    gpus: int
    deadline_seconds: int
    tolerations: tuple[tuple[str, str], ...]
    check_env: tuple[tuple[str, str], ...]
    run_as_user: int | None

    @property
    def user(self) -> str:
        """The API server's name for the runner's ServiceAccount."""
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    def env(self) -> dict[str, str]:
        """The runner script's settings (its docstring lists them)."""
        return {
            "HEALTH_RUNNER_NAMESPACE": self.namespace,
            "HEALTH_RUNNER_NODES": self.node_selector,
            "HEALTH_RUNNER_TEMPLATE": self.template,
            "HEALTH_RUNNER_CHECK": RUNNER_CHECK,
            "HEALTH_RUNNER_RECHECK_SECONDS": str(self.recheck_seconds),
            "HEALTH_RUNNER_POLL_SECONDS": str(HEALTH_GATE_POLL_SECONDS),
        }


def label_selector(requirements: tuple[NodeRequirement, ...]) -> str:
    """`requirements` as a Kubernetes label selector (`key=value`, `key in (a,b)`, `key`)."""
    terms = []
    for r in requirements:
        if r.operator == "Exists":
            terms.append(r.key)
        elif len(r.values) == 1:
            terms.append(f"{r.key}={r.values[0]}")
        else:
            terms.append(f"{r.key} in ({','.join(r.values)})")
    return ",".join(terms)


def health_runner_plan(
    s: Settings,
    gpu_nodes: tuple[NodeRequirement, ...],
    tolerations: tuple[tuple[str, str], ...],
) -> HealthRunnerPlan | None:
    """The runner of stack `s`, whose GPU nodes meet `gpu_nodes` and carry the taints the
    training pods tolerate (`tolerations`); None: the stack runs no checks."""
    gate = s.workload.queue.health_gate
    if health_gate_check(s) is None or not gate.runner.enabled:
        return None
    name = f"{s.name}-node-health-runner"
    # A node it failed keeps being checked, so that a repaired one passes again.
    own_taint = (TAINT_KEY.format(RUNNER_CHECK), TAINT_EFFECT)
    minutes = DCGM_LEVEL_MINUTES[gate.runner.dcgm_level] + CHECK_DEADLINE_MARGIN_MINUTES
    # GKE puts the driver's libraries in every GPU container at /usr/local/nvidia
    # (cloud.google.com/kubernetes-engine/docs/how-to/gpus, "CUDA libraries").
    library = (("LD_LIBRARY_PATH", POD_LIB_DIR),) if s.platform == "gke" else ()
    return HealthRunnerPlan(
        name=name,
        namespace=s.namespace,
        template=f"{s.name}-gpu-check",
        policy=f"{s.namespace}-{name}",
        node_selector=label_selector(gpu_nodes),
        recheck_seconds=gate.max_age_hours * 3600 // 2,
        image=gate.image,
        check_image=gate.runner.dcgm_image,
        gpus=s.gpus_per_node,
        deadline_seconds=minutes * 60,
        tolerations=(*tolerations, own_taint),
        check_env=(("DCGM_LEVEL", str(gate.runner.dcgm_level)), *library),
        run_as_user=None if s.platform == "openshift" else NOBODY_UID,
    )
