"""The monitoring section (`monitoring`): what the cluster and the stack have collected."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gpu_cluster.config.base import Section
from gpu_cluster.config.reads import ON_GKE, ReadWhen
from gpu_cluster.config.values import Image
from gpu_cluster.facts.gke_monitoring import BLUEPRINT_COMPONENTS, GkeMonitoringComponent
from gpu_cluster.facts.kueue import HEALTH_GATE_IMAGE

# The runs' ledgers are served for a JobSet stack whose step lines the ledger can read.
_LEDGERS = ReadWhen(
    lambda s: (
        s.monitoring.run_metrics.enabled
        and s.workload.kind == "jobset"
        and s.launcher.first_step_pattern is not None
    ),
    "monitoring.runMetrics.enabled is true, workload.kind is 'jobset' and "
    "launcher.firstStepPattern is set",
)


class RunMetricsSettings(Section):
    """A run's own progress as Prometheus metrics, from the lines its launcher prints."""

    enabled: bool = False
    """Serve every training pod's steps, step durations, restarts and the GPUs it holds
    (`gpu_cluster_run_steps_total`, `gpu_cluster_run_step_duration_seconds`,
    `gpu_cluster_run_last_step_timestamp_seconds`, `gpu_cluster_run_restarts_total`,
    `gpu_cluster_run_gpus`: summed over a run's pods and over time, its GPU time; labelled
    `run`, `namespace`, `rank`, `node`) on `port`, the training container's port `metrics`: the
    launcher copies its output to a small exporter in the container (scripts/run_metrics.py), no
    change to the training code. A step is a line `launcher.firstStepPattern` matches (a pattern
    that matches every step's line counts every step); restarts are torchrun's and the JobSet's.
    The platform's Prometheus scrapes every run's pods: a PodMonitor on OpenShift (read once a
    cluster admin has turned on monitoring for user-defined projects), a PodMonitoring on GKE
    (Managed Service for Prometheus); the pods' NetworkPolicy lets it in on that port only.
    Off by default: it adds a process and a port to the user's training container, and turning
    it on or off changes the training pods (the run restarts).
    """
    # A port of the training pod's own network, not the rendezvous' (rules.py).
    port: Annotated[
        int,
        ReadWhen(
            lambda s: s.monitoring.run_metrics.enabled, "monitoring.runMetrics.enabled is true"
        ),
    ] = Field(default=9464, ge=1024, le=65535)
    """The port the training pods serve `/metrics` on; not `launcher.masterPort`."""
    ledger_image: Annotated[Image, _LEDGERS] = HEALTH_GATE_IMAGE
    """The image of the runs' ledger exporter (scripts/run_ledger.py, one pod in the namespace):
    on a JobSet stack with `launcher.firstStepPattern` it serves every run's goodput ledger,
    where its wall time went by the buckets `gpu-cluster run status` shows
    (`gpu_cluster_run_ledger_seconds{run, bucket}`, `gpu_cluster_run_wall_seconds{run}`), read
    with a Role that only reads the runs, Workloads, pods, their logs and events. Any image
    with Python 3.11 or later.
    """


class MonitoringSettings(Section):
    """GPU, cluster and queue metrics."""

    gke_components: Annotated[tuple[GkeMonitoringComponent, ...], ON_GKE] = BLUEPRINT_COMPONENTS
    """GKE: the cluster components whose metrics GKE sends to Cloud Monitoring (the cluster's
    `monitoringConfig.enableComponents`, with Managed Service for Prometheus always on). Default:
    cluster-toolkit's GPU blueprints' list, `SYSTEM_COMPONENTS`, `POD`, `DAEMONSET`,
    `DEPLOYMENT`, `STATEFULSET`, `STORAGE`, `HPA`, `CADVISOR`, `KUBELET`, `JOBSET`; `[]` with
    `dcgm: false`: none (cluster-toolkit: GKE monitoring off). Any other list holds
    `SYSTEM_COMPONENTS`, which GKE sends whenever it sends metrics. A change updates the cluster
    in place.
    """
    run_metrics: RunMetricsSettings = RunMetricsSettings()
    """A run's own metrics (steps, step time, restarts) from its launcher's output."""
    dashboard: bool | None = None
    """The stack's dashboard of its GPUs, runs, queue and node health (docs/operations.md,
    "Metrics and the dashboard"): on GKE a Cloud Monitoring dashboard in the stack's project; on
    OpenShift a ConfigMap in `openshift-config-managed` that the console shows under Observe >
    Dashboards, which needs a cluster admin's right to create (`gpu-cluster rights`). Default:
    on for GKE, off for OpenShift. On GKE its GPU figures come from `dcgm` and from
    `runMetrics`: with both off it has none, so it is off by default and refused when asked for.
    """
    dcgm: Annotated[bool, ON_GKE] = True
    """GKE: managed DCGM metrics of the GPU nodes (GPU utilization, memory, power, NVLink and
    PCIe traffic; `DCGM` added to `gkeComponents`), on as in cluster-toolkit's GPU blueprints.
    Off, the dashboard's GPUs row has no per-node panels (nothing else serves those series).
    """
