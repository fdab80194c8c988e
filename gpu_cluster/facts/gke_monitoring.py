"""What GKE's cluster monitoring collects, and what cluster-toolkit's GPU blueprints have it
collect (the cluster's `monitoringConfig`)."""

from __future__ import annotations

from typing import Literal

# The components GKE exports metrics of (container.Cluster monitoring_config.enable_components,
# pulumi-gcp 10.2; the GKE API's MonitoringComponentConfig.Component).
GkeMonitoringComponent = Literal[
    "SYSTEM_COMPONENTS",
    "APISERVER",
    "SCHEDULER",
    "CONTROLLER_MANAGER",
    "STORAGE",
    "HPA",
    "POD",
    "DAEMONSET",
    "DEPLOYMENT",
    "STATEFULSET",
    "KUBELET",
    "CADVISOR",
    "DCGM",
    "JOBSET",
]
# GKE's managed DCGM metrics, which cluster-toolkit's gke-cluster module adds to the components
# with `enable_dcgm_monitoring` (default true; set true by examples/gke-a4 and gke-a3-ultragpu),
# always with Managed Service for Prometheus on (main.tf `monitoring_config`, 1047080).
DCGM: GkeMonitoringComponent = "DCGM"
# "If you choose to send metrics to Cloud Monitoring, you must send system metrics"
# (cloud.google.com/stackdriver/docs/solutions/gke/managing-metrics, "System metrics"): a
# cluster's components are none, or include this one.
SYSTEM_COMPONENTS: GkeMonitoringComponent = "SYSTEM_COMPONENTS"
# cluster-toolkit modules/scheduler/gke-cluster variables.tf `monitoring_components` default
# (GoogleCloudPlatform/cluster-toolkit 1047080).
BLUEPRINT_COMPONENTS: tuple[GkeMonitoringComponent, ...] = (
    "SYSTEM_COMPONENTS",
    "POD",
    "DAEMONSET",
    "DEPLOYMENT",
    "STATEFULSET",
    "STORAGE",
    "HPA",
    "CADVISOR",
    "KUBELET",
    "JOBSET",
)
# Managed Prometheus' automatic application monitoring: off, as cluster-toolkit's gke-cluster
# module and gke-a4 blueprint set it (variables.tf `auto_monitoring_scope` default "NONE";
# examples/gke-a4/gke-a4.yaml, 1047080).
AUTO_MONITORING_SCOPE = "NONE"
