"""The objects that have each platform's Prometheus scrape a namespace's pods, and where that
Prometheus runs (for the NetworkPolicy that lets it in)."""

from __future__ import annotations

# prometheus-operator's PodMonitor, which OpenShift's monitoring for user-defined projects reads
# in every user namespace (prometheus-operator v0.85.0
# example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml; openshift-docs
# observability/monitoring "Specifying how a service is monitored").
POD_MONITOR_API = "monitoring.coreos.com/v1"
POD_MONITOR_KIND = "PodMonitor"
# Google Cloud Managed Service for Prometheus' PodMonitoring (GoogleCloudPlatform/prometheus-engine
# v0.17.2 7920a2a charts/operator/crds/monitoring.googleapis.com_podmonitorings.yaml).
POD_MONITORING_API = "monitoring.googleapis.com/v1"
POD_MONITORING_KIND = "PodMonitoring"
# The scrape interval of Managed Prometheus' own example (prometheus-engine v0.17.2
# examples/pod-monitoring.yaml); PodMonitor takes the same duration form.
SCRAPE_INTERVAL = "30s"
# The namespaces of OpenShift's monitoring Prometheus instances, by the label OpenShift gives
# them for network policies (openshift-docs modules/nw-networkpolicy-multitenant-isolation.adoc,
# the allow-from-openshift-monitoring policy).
OPENSHIFT_MONITORING_NAMESPACES = {"network.openshift.io/policy-group": "monitoring"}
# GKE's managed collectors run in gke-gmp-system (Managed Service for Prometheus docs, managed
# collection); a namespace carries its name as this label (Kubernetes 1.22+,
# kubernetes.io/metadata.name).
GKE_MANAGED_COLLECTOR_NAMESPACES = {"kubernetes.io/metadata.name": "gke-gmp-system"}
# The ServiceAccount Managed Service for Prometheus' collectors run as, which reads the Secrets
# a PodMonitoring's endpoint names (prometheus-engine v0.17.2 manifests/operator.yaml `collector`;
# examples/inference-optimized-gateway grants it the read of its token Secret), in GKE's managed
# collection namespace.
GKE_MANAGED_COLLECTOR_ACCOUNT = ("gke-gmp-system", "collector")
