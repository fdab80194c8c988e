"""Kueue's and JobSet's API: the versions the program emits, and the labels and annotations
through which a JobSet asks for its queue and its placement."""

from __future__ import annotations

from typing import Final, Literal

# Kueue's API since v0.15 (kubernetes-sigs/kueue apis/kueue/v1beta2); the only one emitted.
KUEUE_API = "kueue.x-k8s.io/v1beta2"
# JobSet's API (kubernetes-sigs/jobset api/jobset/v1alpha2, v0.10.1 to v0.12.0).
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
# The definitions a stack reads to know the cluster's controllers serve those APIs: Kueue's
# ClusterQueue (every Kueue CRD serves the same versions: kueue config/components/crd/bases,
# v0.15.0 to v0.19.2) and the JobSet (jobset config/components/crd/bases).
KUEUE_CRD = "clusterqueues.kueue.x-k8s.io"
JOBSET_CRD = "jobsets.jobset.x-k8s.io"

# The JobSet label that names its LocalQueue (kueue pkg/controller/constants QueueLabel).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Pod-template annotations asking Topology Aware Scheduling to put every pod of the pod set in
# one domain of a level (kueue apis/kueue/v1beta2 constants.go PodSetRequiredTopologyAnnotation,
# PodSetPreferredTopologyAnnotation).
REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"

# GKE's node labels for a node's place in the physical topology, broadest first, then the node:
# the levels of cluster-toolkit's `gke-default` Topology (GoogleCloudPlatform/cluster-toolkit
# 1047080 examples/gke-a4/kueue-configuration.yaml.tftpl).
GKE_TOPOLOGY_LEVELS = (
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
    "kubernetes.io/hostname",
)
# The level a GKE JobSet is required to fit in: one block, as cluster-toolkit's A4 NCCL JobSet
# asks (examples/gke-a4/nccl-jobset-example.yaml, 1047080).
GKE_REQUIRED_LEVEL = "cloud.google.com/gce-topology-block"
# The lowest level of every Topology: one node (Kueue requires hostname last when it is used).
HOSTNAME_LEVEL = "kubernetes.io/hostname"

# JobSet's webhook refuses a JobSet whose longest pod name, <jobset>-<replicatedJob>-<jobIndex>-
# <podIndex> with the Job controller's 5-character random suffix (it checks it as "-abcde"), is
# over 63 characters (kubernetes-sigs/jobset v0.12.0 f22e565 pkg/webhooks/jobset_webhook.go
# ValidateCreate, podNameTooLongErrorMsg).
JOBSET_POD_NAME_SUFFIX = "-abcde"
# Labels the JobSet controller puts on every pod it creates (jobset api/jobset/v1alpha2
# jobset_types.go JobSetNameKey, JobIndexKey) and the index the Job controller gives an Indexed
# Job's pod (kubernetes batch/v1 JobCompletionIndexAnnotation).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# How many times the JobSet has restarted when it made the pod: a label it puts on every Job and
# pod (kubernetes-sigs/jobset pkg/constants/constants.go RestartsKey; set with the JobSet name
# label in pkg/controllers/jobset_controller.go labelAndAnnotateObject).
JOBSET_RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
# The label Kueue puts on the pods of every pod set it admitted: its name (kueue
# pkg/constants PodSetLabel, set in pkg/controller/jobframework/reconciler.go
# getPodSetsInfoFromStatus, v0.15.0 to v0.19.2). A pod without it ran without admission.
PODSET_LABEL = "kueue.x-k8s.io/podset"
# Red Hat's build of Kueue manages jobs only in namespaces with this label set to "true": its
# operator writes Kueue's managedJobsNamespaceSelector and every namespaced webhook's
# namespaceSelector so (openshift/kueue-operator dc3b657 pkg/configmap/configmap.go,
# pkg/webhook/pod_webhook.go; docs.redhat.com OpenShift 4.21 AI workloads, "Labeling
# namespaces to allow Red Hat build of Kueue to manage jobs").
OPENSHIFT_MANAGED_NAMESPACE_LABEL = "kueue.openshift.io/managed"

# GKE queued provisioning through Kueue (gcp.queuedProvisioning): an AdmissionCheck of Kueue's
# ProvisioningRequest controller (kueue apis/kueue/v1beta2 provisioningrequestconfig_types.go
# ProvisioningRequestControllerName) with a ProvisioningRequestConfig of GKE's class, as
# cluster-toolkit's examples/gke-consumption-options/dws-flex-start-queued-provisioning
# (dws-queues.yaml.tftpl, 1047080) sets them.
PROVISIONING_CHECK_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
GKE_QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
# The JobSet annotation Kueue passes to the ProvisioningRequest as a parameter (the
# `provreq.kueue.x-k8s.io/` prefix), which GKE reads as the nodes' run time; the same example's
# nccl-jobset-example.yaml sets it, its README calls it required for queued provisioning.
MAX_RUN_DURATION_ANNOTATION = "provreq.kueue.x-k8s.io/maxRunDurationSeconds"
# Kueue's AdmissionCheck names its ProvisioningRequestConfig in `parameters.name`, a DNS label
# of at most 63 characters (kubernetes-sigs/kueue v0.19.2 8eab687 apis/kueue/v1beta2
# admissioncheck_types.go AdmissionCheckParametersReference.Name: MaxLength=63).
ADMISSION_CHECK_PARAMETERS_NAME_MAX = 63
# A Topology holds at most 16 levels (kueue v0.19.2 8eab687 apis/kueue/v1beta2 topology_types.go
# TopologySpec.Levels: MaxItems=16); the stack adds the node level to workload.queue's.
TOPOLOGY_LEVELS_MAX = 16
# A level's node label is at most 316 characters, one less than the longest label key (a
# 253-character prefix, '/', a 63-character name) (kueue v0.19.2 charts/kueue/templates/crd/
# kueue.x-k8s.io_topologies.yaml levels[].nodeLabel: maxLength 316).
TOPOLOGY_NODE_LABEL_MAX = 316
# The taint GKE puts on nodes it provisions for a ProvisioningRequest; the example's pods
# tolerate it (key cloud.google.com/gke-queued, value true, NoSchedule).
GKE_QUEUED_TAINT = "cloud.google.com/gke-queued"

# The upstream Helm charts a stack installs the controllers from, and their namespaces, as
# cluster-toolkit's kubectl-apply module installs them (GoogleCloudPlatform/cluster-toolkit
# 1047080 modules/management/kubectl-apply/main.tf, install_kueue and install_jobset).
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_NAMESPACE = "kueue-system"
JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
JOBSET_NAMESPACE = "jobset-system"
# The releases installed by default: the newest of each (Kueue v0.19.2, 2026-08-20, a minor
# Kueue maintains: RELEASE.md "Patch releases", N-1 and N-2; JobSet v0.12.0, 2026-05-08), the
# versions the real tier builds and runs (tools/realtier/build.py).
KUEUE_CHART_VERSION = "0.19.2"
JOBSET_CHART_VERSION = "0.12.0"
# How Kueue's chart serves its manager's metrics (kubernetes-sigs/kueue v0.19.2 charts/kueue):
# on the manager pod's container port `metrics` (templates/manager/manager.yaml), HTTPS with a
# certificate of its own making, to a token that may `get` /metrics, which the ClusterRole
# <release>-metrics-reader grants (templates/rbac/metrics_reader_role.yaml); its ServiceMonitor
# skips verifying that certificate (values.yaml metrics.serviceMonitor.tlsConfig).
KUEUE_METRICS_PORT = "metrics"
KUEUE_METRICS_READER_ROLE = "kueue-metrics-reader"  # release `kueue`


def kueue_manager_pod_labels(release: str) -> dict[str, str]:
    """The chart's selector labels of its manager's pod (templates/_helpers.tpl
    kueue.selectorLabels)."""
    return {
        "app.kubernetes.io/name": "kueue",
        "app.kubernetes.io/instance": release,
        "control-plane": "controller-manager",
    }


# The oldest releases the program's objects work with: Kueue serves v1beta2 since v0.15.0
# (apis/kueue/v1beta2); JobSet v0.10.1 is the oldest the real tier ran (through 1758bf2).
KUEUE_MIN_VERSION = (0, 15, 0)
JOBSET_MIN_VERSION = (0, 10, 1)


def release_text(version: tuple[int, int, int]) -> str:
    """A release as its charts name it: MAJOR.MINOR.PATCH."""
    return ".".join(map(str, version))


# The image the node health gate's controller (scripts/node_health_gate.py, standard library
# only) runs in: the Docker Official Image of Python 3.14, in bugfix support until 2027-10 and
# security support until 2030-10 (peps.python.org/pep-0745).
HEALTH_GATE_IMAGE = "python:3.14-slim"

# What a pending Workload that does not fit its ClusterQueue's quota may evict there, `Never`
# Kueue's default (kubernetes-sigs/kueue v0.19.2 8eab687 apis/kueue/v1beta2/clusterqueue_types.go
# ClusterQueuePreemption.WithinClusterQueue, its kubebuilder Enum and default).
WithinClusterQueuePreemption = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
KUEUE_DEFAULT_PREEMPTION: Final = "Never"
# The label of a job (the JobSet) that names its WorkloadPriorityClass (kueue v0.19.2
# pkg/controller/constants/constants.go WorkloadPriorityClassLabel, read by
# pkg/controller/jobframework/utils.go WorkloadPriorityClassName).
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
