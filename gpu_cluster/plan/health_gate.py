"""The node health gate of a JobSet stack's queue (workload.queue.healthGate): its AdmissionCheck's
name, the controller that answers it, and what the gated run's pods ask of a node (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_cluster.config.derived import health_gate_name
from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.health import PASS, RESULT_LABEL
from gpu_cluster.plan.podspec import NodeRequirement

# The node health gate (workload.queue.healthGate): the controller name its AdmissionCheck
# names (ours: Kueue matches it to no controller of its own), the script that answers it
# (scripts/node_health_gate.py) and how often that reads the queue's runs.
HEALTH_GATE_CONTROLLER = "gpu-cluster.io/node-health-gate"
HEALTH_GATE_SCRIPT = "node_health_gate.py"
HEALTH_GATE_POLL_SECONDS = 15
# The gate's user off OpenShift (where the SCC assigns one): nobody, which owns no file.
NOBODY_UID = 65534


@dataclass(frozen=True)
class HealthGatePlan:
    """check: the AdmissionCheck's name (cluster-scoped). name: the controller's objects' in
    the namespace. checks, max_age_seconds, retry_seconds: what it asks of each node and how
    long Kueue waits to try a held run again. run_as_user: None where the platform assigns it."""

    check: str
    name: str
    namespace: str
    checks: tuple[str, ...]
    max_age_seconds: int
    retry_seconds: int
    image: str
    run_as_user: int | None

    def env(self) -> dict[str, str]:
        """The script's settings (its docstring lists them)."""
        return {
            "HEALTH_GATE_CHECK": self.check,
            "HEALTH_GATE_CONTROLLER": HEALTH_GATE_CONTROLLER,
            "HEALTH_GATE_NAMESPACE": self.namespace,
            "HEALTH_GATE_CHECKS": ",".join(self.checks),
            "HEALTH_GATE_MAX_AGE_SECONDS": str(self.max_age_seconds),
            "HEALTH_GATE_RETRY_SECONDS": str(self.retry_seconds),
            "HEALTH_GATE_POLL_SECONDS": str(HEALTH_GATE_POLL_SECONDS),
        }

    def node_requirements(self) -> tuple[NodeRequirement, ...]:
        """What the gated run's pods require of a node: the last result of every gated check a
        pass. Kueue's topology-aware placement honours a pod's required node affinity (kueue
        pkg/cache/scheduler/tas_flavor_snapshot.go, v0.15.0 to v0.19.2), so it places runs only
        on such nodes, and the gate is left to judge the passes' age: a failed node, which the
        health runner by default labels without tainting, is never chosen again and again."""
        return tuple(NodeRequirement(RESULT_LABEL.format(c), "In", (PASS,)) for c in self.checks)


def health_gate_check(s: Settings) -> str | None:
    """The node health gate's AdmissionCheck (cluster-scoped, so named after the namespace
    too); None: the stack has no gate."""
    if s.workload.queue.mode == "reference" or not s.workload.queue.health_gate.enabled:
        return None
    return f"{s.namespace}-{s.name}-node-health"


def health_gate_plan(s: Settings) -> HealthGatePlan | None:
    gate = s.workload.queue.health_gate
    check = health_gate_check(s)
    if check is None:
        return None
    return HealthGatePlan(
        check=check,
        name=health_gate_name(s),
        namespace=s.namespace,
        checks=gate.checks,
        max_age_seconds=gate.max_age_hours * 3600,
        retry_seconds=gate.retry_seconds,
        image=gate.image,
        run_as_user=None if s.platform == "openshift" else NOBODY_UID,
    )
