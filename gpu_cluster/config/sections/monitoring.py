"""The monitoring section (`monitoring`): what the cluster and the stack have collected."""

from __future__ import annotations

from typing import Annotated

from gpu_cluster.config.base import Section
from gpu_cluster.config.reads import ON_GKE
from gpu_cluster.facts.gke_monitoring import BLUEPRINT_COMPONENTS, GkeMonitoringComponent


class MonitoringSettings(Section):
    """GPU, cluster and queue metrics."""

    gke_components: Annotated[tuple[GkeMonitoringComponent, ...], ON_GKE] = BLUEPRINT_COMPONENTS
    """GKE: the cluster components whose metrics GKE sends to Cloud Monitoring (the cluster's
    `monitoringConfig.enableComponents`, with Managed Service for Prometheus always on). Default:
    cluster-toolkit's GPU blueprints' list, `SYSTEM_COMPONENTS`, `POD`, `DAEMONSET`,
    `DEPLOYMENT`, `STATEFULSET`, `STORAGE`, `HPA`, `CADVISOR`, `KUBELET`, `JOBSET`; `[]` with
    `dcgm: false`: none (cluster-toolkit: GKE monitoring off). A change updates the cluster in
    place.
    """
    dcgm: Annotated[bool, ON_GKE] = True
    """GKE: managed DCGM metrics of the GPU nodes (GPU utilization, memory, power, NVLink and
    PCIe traffic; `DCGM` added to `gkeComponents`), on as in cluster-toolkit's GPU blueprints.
    """
