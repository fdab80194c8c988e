"""The stack's own node health runner (workload.queue.healthGate.runner): which nodes it checks,
the checks it runs on them (the GPU check on each node, the NCCL check on two at once), and what
it may change on a node (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_cluster.config.derived import health_runner_name
from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.gpudirect import POD_LIB_DIR
from gpu_cluster.facts.health import (
    DCGM_LEVEL_MINUTES,
    DCGM_PORT,
    GPU_CHECK,
    GPU_OPERATOR_DCGM_HOST,
    OWN_HOST_ENGINE,
    PAIR_CHECK,
    RENDEZVOUS_JOIN_MINUTES,
    TAINT_EFFECT,
    TAINT_KEY,
)
from gpu_cluster.facts.kubernetes import TERMINATION_MESSAGE_PATH
from gpu_cluster.plan import launch
from gpu_cluster.plan.health_gate import HEALTH_GATE_POLL_SECONDS, NOBODY_UID, health_gate_check
from gpu_cluster.plan.podspec import NodeRequirement
from gpu_cluster.plan.run_metrics import MetricsScrape, platform_scrape
from gpu_cluster.plan.verify import fabric_gate

HEALTH_RUNNER_SCRIPT = "node_health_runner.py"
# Its decisions and its metrics, which it imports from beside it.
HEALTH_RUNNER_MODULES = ("health_check_jobs.py", "health_metrics.py", "prometheus_text.py")
GPU_CHECK_SCRIPT = "gpu-check.sh"
# Beyond a check's own time, a check pod's deadline (counted from when the kubelet took it, so
# the image's pull included) allows this much.
CHECK_DEADLINE_MARGIN_MINUTES = 15
# A diagnostic still running this long past its level's time is stopped: the check did not
# run, the node is not judged (gpu-check.sh), before the pod's own deadline.
DIAG_OVERRUN_MINUTES = 10
# The all_gather sweep of the pairwise check, at most (the fabric check's own time: a few
# minutes up to 8 GiB on the slowest fabric it passes).
PAIR_CHECK_MINUTES = 5
# The label the runner's check Jobs (and their pods) carry: which check.
CHECK_LABEL = "gpu-cluster.io/health-check"
# Two nodes in a pairwise check.
PAIR = 2
# The port the runner serves its metrics on (scripts/health_metrics.py).
RUNNER_METRICS_PORT = 9464
# Where the fabric check's rank 0 writes its summary (scripts/fabric_verdict.py).
MESSAGE_FILE_ENV = "FABRIC_CHECK_MESSAGE_FILE"


@dataclass(frozen=True)
class GpuCheckPlan:
    """The GPU check: DCGM diagnostics in `image` on `gpus` GPUs, failed past
    `deadline_seconds`, tolerating `tolerations` ((key, effect): the GPU nodes' taints and its
    own), with `env` (the level among them); its PodTemplate `template`."""

    template: str
    image: str
    gpus: int
    deadline_seconds: int
    tolerations: tuple[tuple[str, str], ...]
    env: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PairCheckPlan:
    """The NCCL check: the training pod, one on each of two nodes, running the fabric check
    (`command`, the run's fabric gate's thresholds) with `env` (a rendezvous of two nodes; the
    runner names the first pod its host), failed past `deadline_seconds`, tolerating
    `tolerations` (the training pods' and its own taint). `template`: its PodTemplate's name,
    its headless Service's (the pods' subdomain) and its objects' prefix."""

    template: str
    command: tuple[str, ...]
    env: dict[str, str]
    deadline_seconds: int
    tolerations: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class HealthRunnerPlan:
    """name: the runner's objects in the namespace (and its ServiceAccount); policy: the
    cluster-scoped admission policy that confines its node writes. node_selector: the label
    selector of the nodes it checks; recheck_seconds: how old a result may get before it checks
    the node again; retry_seconds: how soon a check that could not run is tried again. gpu,
    nccl: the checks it runs (at least one)."""

    name: str
    namespace: str
    policy: str
    node_selector: str
    recheck_seconds: int
    retry_seconds: int
    image: str
    run_as_user: int | None
    gpu: GpuCheckPlan | None
    nccl: PairCheckPlan | None
    # How the platform's Prometheus scrapes its metrics.
    scrape: MetricsScrape

    @property
    def user(self) -> str:
        """The API server's name for the runner's ServiceAccount."""
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def templates(self) -> dict[str, str]:
        """Check -> its PodTemplate, for each check it runs."""
        checks = ((GPU_CHECK, self.gpu), (PAIR_CHECK, self.nccl))
        return {name: check.template for name, check in checks if check is not None}

    def env(self) -> dict[str, str]:
        """The runner script's settings (its docstring lists them)."""
        return {
            "HEALTH_RUNNER_NAMESPACE": self.namespace,
            "HEALTH_RUNNER_NODES": self.node_selector,
            "HEALTH_RUNNER_CHECKS": " ".join(f"{c}={t}" for c, t in self.templates.items()),
            "HEALTH_RUNNER_RECHECK_SECONDS": str(self.recheck_seconds),
            "HEALTH_RUNNER_RETRY_SECONDS": str(self.retry_seconds),
            "HEALTH_RUNNER_POLL_SECONDS": str(HEALTH_GATE_POLL_SECONDS),
            "HEALTH_RUNNER_METRICS_PORT": str(RUNNER_METRICS_PORT),
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


def runner_checks(s: Settings) -> tuple[str, ...]:
    """The checks of the gate that the stack's runner runs (none without the runner)."""
    gate = s.workload.queue.health_gate
    if health_gate_check(s) is None or not gate.runner.enabled:
        return ()
    return tuple(c for c in (GPU_CHECK, PAIR_CHECK) if c in gate.checks)


def _own_taint(check: str) -> tuple[str, str]:
    # A node a check failed keeps being checked by it, so that a repaired one passes again.
    return (TAINT_KEY.format(check), TAINT_EFFECT)


def _gpu_check(s: Settings, tolerations: tuple[tuple[str, str], ...]) -> GpuCheckPlan:
    runner = s.workload.queue.health_gate.runner
    level_minutes = DCGM_LEVEL_MINUTES[runner.dcgm_level]
    # GKE puts the driver's libraries in every GPU container at /usr/local/nvidia
    # (cloud.google.com/kubernetes-engine/docs/how-to/gpus, "CUDA libraries").
    library = (("LD_LIBRARY_PATH", POD_LIB_DIR),) if s.platform == "gke" else ()
    engine = dcgm_host_engine(s)
    return GpuCheckPlan(
        template=f"{s.name}-{GPU_CHECK}-check",
        image=runner.dcgm_image,
        gpus=s.gpus_per_node,
        deadline_seconds=(level_minutes + CHECK_DEADLINE_MARGIN_MINUTES) * 60,
        tolerations=(*tolerations, _own_taint(GPU_CHECK)),
        env=(
            ("DCGM_LEVEL", str(runner.dcgm_level)),
            ("DCGM_HOST_ENGINE", engine if engine == OWN_HOST_ENGINE else f"{engine}:{DCGM_PORT}"),
            ("DIAG_TIMEOUT_SECONDS", str((level_minutes + DIAG_OVERRUN_MINUTES) * 60)),
            *library,
        ),
    )


def dcgm_host_engine(s: Settings) -> str:
    """The host engine the GPU check runs DCGM's diagnostics on: runner.dcgmHostEngine, unset
    the GPU Operator's on OpenShift (one host engine a node, privileged, which the operator's
    exporter shares) and the check's own on GKE (no GPU Operator there)."""
    chosen = s.workload.queue.health_gate.runner.dcgm_host_engine
    if chosen is not None:
        return chosen
    return GPU_OPERATOR_DCGM_HOST if s.platform == "openshift" else OWN_HOST_ENGINE


def _pair_check(s: Settings, tolerations: tuple[tuple[str, str], ...]) -> PairCheckPlan:
    env = launch.rendezvous_env(s)
    minutes = RENDEZVOUS_JOIN_MINUTES + PAIR_CHECK_MINUTES + CHECK_DEADLINE_MARGIN_MINUTES
    return PairCheckPlan(
        template=f"{s.name}-{PAIR_CHECK}-check",
        # The check a run's fabric gate runs (verify), on two nodes: a pair that passes it here
        # passes it there. Through the gate, which tells a check that could not run (75).
        command=fabric_gate(s),
        env={
            **{k: v for k, v in env.items() if k not in ("MASTER_ADDR", "RDZV_ID")},
            "NNODES": str(PAIR),
            "TORCHRUN_NNODES": str(PAIR),
            "WORLD_SIZE": str(PAIR * s.gpus_per_node),
            # Rank 0's summary, the measured bus bandwidth first, where the kubelet reads the
            # container's termination message from, which the runner reads back.
            MESSAGE_FILE_ENV: TERMINATION_MESSAGE_PATH,
        },
        deadline_seconds=minutes * 60,
        tolerations=(*tolerations, _own_taint(PAIR_CHECK)),
    )


def health_runner_plan(
    s: Settings,
    gpu_nodes: tuple[NodeRequirement, ...],
    tolerations: tuple[tuple[str, str], ...],
) -> HealthRunnerPlan | None:
    """The runner of stack `s`, whose GPU nodes meet `gpu_nodes` and carry the taints the
    training pods tolerate (`tolerations`); None: the stack runs no checks."""
    checks = runner_checks(s)
    if not checks:
        return None
    gate = s.workload.queue.health_gate
    name = health_runner_name(s)
    return HealthRunnerPlan(
        name=name,
        namespace=s.namespace,
        policy=f"{s.namespace}-{name}",
        node_selector=label_selector(gpu_nodes),
        recheck_seconds=gate.max_age_hours * 3600 // 2,
        # As soon as the gate tries a held run again (Kueue's retry delay).
        retry_seconds=gate.retry_seconds,
        image=gate.image,
        run_as_user=None if s.platform == "openshift" else NOBODY_UID,
        gpu=_gpu_check(s, tolerations) if GPU_CHECK in checks else None,
        nccl=_pair_check(s, tolerations) if PAIR_CHECK in checks else None,
        scrape=platform_scrape(s.platform),
    )
