"""The monitoring section's rules: what GKE's monitoring takes, a dashboard with something to
show, the runs' metrics beside the launcher's ports and step pattern."""

from __future__ import annotations

from gpu_cluster.config.derived import gke_monitoring_components, shows_gpu_metrics
from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.gke_monitoring import DCGM, SYSTEM_COMPONENTS


def monitoring_problems(s: Settings) -> list[str]:
    out: list[str] = []
    monitoring, metrics = s.monitoring, s.monitoring.run_metrics
    if s.platform == "gke" and not monitoring.dcgm and DCGM in monitoring.gke_components:
        out.append(
            f"gpu-cluster:monitoring.dcgm = false but monitoring.gkeComponents lists {DCGM!r}, "
            "which turns GKE's DCGM metrics on all the same: remove it from gkeComponents to "
            "turn them off, or set dcgm to true"
        )
    components = gke_monitoring_components(monitoring)
    if s.platform == "gke" and components and SYSTEM_COMPONENTS not in components:
        out.append(
            f"gpu-cluster:monitoring.gkeComponents = {list(monitoring.gke_components)} (with "
            f"dcgm: GKE gets {list(components)}) leaves out {SYSTEM_COMPONENTS!r}, which GKE "
            "needs whenever it sends any metrics: add it, or give [] with dcgm: false for none"
        )
    if monitoring.dashboard and not shows_gpu_metrics(s) and not metrics.enabled:
        out.append(
            "gpu-cluster:monitoring.dashboard = true, but with monitoring.dcgm false and "
            "monitoring.runMetrics.enabled false GKE collects no GPU figure for it to show: "
            "turn one of them on, or leave the dashboard off"
        )
    if metrics.enabled and metrics.port == s.launcher.master_port:
        out.append(
            f"gpu-cluster:monitoring.runMetrics.port = {metrics.port} is launcher.masterPort, the "
            "rendezvous': give the metrics another port"
        )
    return out


def run_metrics_warnings(s: Settings) -> list[str]:
    """A warning when the runs serve metrics but no line is a step: their steps, step time and
    last step then never have a value (restarts and GPUs held do)."""
    if not s.monitoring.run_metrics.enabled or s.launcher.first_step_pattern is not None:
        return []
    return [
        "gpu-cluster:monitoring.runMetrics.enabled is true but launcher.firstStepPattern is "
        "unset: no line counts as a step, so the runs' steps, step time and last step stay "
        "empty; set it to a pattern every step's line matches (e.g. '^step \\d+')"
    ]
