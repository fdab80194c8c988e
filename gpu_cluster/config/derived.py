"""What a stack's settings resolve to beyond their own keys: sizes, names and defaults that
depend on several keys (the schema only declares the keys)."""

from __future__ import annotations

from gpu_cluster.config.netmodes import find_mode
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.sections.monitoring import MonitoringSettings
from gpu_cluster.facts.gke_monitoring import DCGM


def world_size(s: Settings) -> int:
    """Training ranks: one per GPU of every pod."""
    return s.nodes * s.gpus_per_node


def queue_name(s: Settings) -> str:
    """The LocalQueue a JobSet waits in."""
    return s.workload.queue.name or s.name


def runs_preflight(s: Settings) -> bool:
    """Whether the launchers run preflight.sh: verify.preflight, else the network mode's
    default."""
    if s.verify.preflight is not None:
        return s.verify.preflight
    mode = find_mode(s.platform, s.network_mode)
    return mode is not None and mode.preflight_by_default


def elastic_range(s: Settings) -> tuple[int, int]:
    """torchrun's --nnodes range: launcher.minNodes..maxNodes, each `nodes` when unset."""
    return s.launcher.min_nodes or s.nodes, s.launcher.max_nodes or s.nodes


def gke_monitoring_components(m: MonitoringSettings) -> tuple[str, ...]:
    """The GKE cluster's monitoring components: monitoring.gkeComponents, and DCGM with
    monitoring.dcgm, each once (cluster-toolkit modules/scheduler/gke-cluster main.tf
    `distinct(concat(var.monitoring_components, ["DCGM"]))`, 1047080)."""
    return tuple(dict.fromkeys((*m.gke_components, *((DCGM,) if m.dcgm else ()))))


def training_account_name(prefix: str) -> str:
    """The training pods' ServiceAccount, of TrainingAccess's `prefix` (the stack's `name`)."""
    return f"{prefix}-training"


def health_gate_name(s: Settings) -> str:
    """The node health gate's controller: its Deployment, ServiceAccount and roles."""
    return f"{s.name}-node-health-gate"


def health_runner_name(s: Settings) -> str:
    """The node health runner's controller: its Deployment, ServiceAccount and roles."""
    return f"{s.name}-node-health-runner"


def run_ledger_name(s: Settings) -> str:
    """The runs' ledger exporter: its Deployment, ServiceAccount and Role."""
    return f"{s.name}-run-ledger"


def shows_gpu_metrics(s: Settings) -> bool:
    """Whether the GPUs' DCGM series exist: on GKE only with its managed DCGM metrics
    (monitoring.dcgm); on OpenShift the GPU Operator's exporter serves them."""
    return s.platform != "gke" or s.monitoring.dcgm


def shows_dashboard(s: Settings) -> bool:
    """monitoring.dashboard, else on for GKE only, where it has GPU figures to show (DCGM's or
    the runs'): OpenShift's console reads dashboards from a namespace only a cluster admin may
    write to."""
    if s.monitoring.dashboard is not None:
        return s.monitoring.dashboard
    return s.platform == "gke" and (shows_gpu_metrics(s) or s.monitoring.run_metrics.enabled)
