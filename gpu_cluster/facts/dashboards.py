"""Where each platform shows a dashboard, the form it reads, and the vendors' metric names the
stack's dashboard queries."""

from __future__ import annotations

# OpenShift's console (Observe > Dashboards) shows every ConfigMap of this namespace that
# carries CONSOLE_DASHBOARD_LABEL "true", reading its one data value as a Grafana-style JSON
# dashboard; CONSOLE_PROJECT_DASHBOARD_LABEL shows it in a project's own view too (NVIDIA's
# GPU Operator on OpenShift, "Enabling the GPU Monitoring Dashboard", labels its DCGM dashboard
# with both; openshift/cluster-ingress-operator bd29f8a
# pkg/operator/controller/monitoring-dashboard/monitoring_dashboard.go; openshift/
# monitoring-plugin 276015a web/src/features/legacy-dashboards/hooks/useLegacyDashboards.ts).
CONSOLE_DASHBOARD_NAMESPACE = "openshift-config-managed"
CONSOLE_DASHBOARD_LABEL = "console.openshift.io/dashboard"
CONSOLE_PROJECT_DASHBOARD_LABEL = "console.openshift.io/odc-dashboard"
# A row of the console's grid is 12 columns wide (a panel's `span`; monitoring-plugin 276015a
# LegacyDashboard.tsx getPanelSpan, PatternFly gridSpans).
CONSOLE_ROW_SPAN = 12

# Cloud Monitoring's dashboard grid: at most 48 columns (Monitoring API v1 MosaicLayout.columns,
# discovery document revision 20260903).
CLOUD_MONITORING_COLUMNS = 48

# NVIDIA's DCGM exporter, which both platforms run (the GPU Operator's nvidia-dcgm-exporter on
# OpenShift, GKE's managed DCGM metrics): its default counters (NVIDIA/dcgm-exporter 00d6d34
# etc/default-counters.csv). Labelled `Hostname` (the node) and `gpu` (its index).
DCGM_GPU_UTILIZATION = "DCGM_FI_DEV_GPU_UTIL"  # gauge, percent (0-100)
DCGM_MEMORY_USED = "DCGM_FI_DEV_FB_USED"  # gauge, MiB
DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"  # gauge, W
DCGM_NODE_LABEL = "Hostname"

# Kueue's ClusterQueue metrics, labelled `cluster_queue` (kubernetes-sigs/kueue v0.19.2
# pkg/metrics/metrics.go). Not its LocalQueue ones: their `namespace` label becomes
# `exported_namespace` under a scrape that keeps the target's own (the chart's ServiceMonitor,
# charts/kueue/templates/prometheus/monitor.yaml, sets no honorLabels), and they need Kueue 0.17+.
KUEUE_PENDING = "kueue_pending_workloads"  # gauge, per `status` (active, inadmissible)
KUEUE_ADMITTED = "kueue_admitted_active_workloads"  # gauge
KUEUE_ADMISSION_WAIT = "kueue_admission_wait_time_seconds"  # histogram
KUEUE_EVICTED = "kueue_evicted_workloads_total"  # counter, per `reason`
