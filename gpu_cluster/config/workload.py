"""What a JobSet stack's names and placement levels come to (workload.kind jobset): read by the
config rules that check them and by the plan that renders them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_cluster.facts.health import RUNNER_CHECKS
from gpu_cluster.facts.kubernetes import DNS_LABEL_MAX
from gpu_cluster.facts.kueue import (
    ADMISSION_CHECK_PARAMETERS_NAME_MAX,
    GKE_TOPOLOGY_LEVELS,
    HOSTNAME_LEVEL,
    JOBSET_POD_NAME_SUFFIX,
    OPENSHIFT_MANAGED_NAMESPACE_LABEL,
)

if TYPE_CHECKING:  # the schema imports this module (installs_controllers): the types only
    from gpu_cluster.config.schema import Settings

# The JobSet's one replicated job: one Job of `nodes` indexed pods.
REPLICATED_JOB = "node"


def job_set_hostname(name: str, index: int) -> str:
    """Pod `index`'s hostname as the JobSet controller sets it:
    <jobset>-<replicatedJob>-<jobIndex>-<podIndex> (kubernetes-sigs/jobset v0.10.1, v0.12.0
    pkg/controllers/jobset_controller.go, genJobName + the pod webhook's hostname)."""
    return f"{name}-{REPLICATED_JOB}-0-{index}"


def cluster_scoped_name(s: Settings) -> str:
    """The name of the queue's cluster-scoped objects: two stacks of the same name in two
    namespaces must not share them."""
    return f"{s.namespace}-{s.name}"


def job_set_name_problems(s: Settings) -> list[str]:
    """Names the controllers derive from `name` and `namespace` that their validation refuses:
    the JobSet's pod names (its webhook) and the ProvisioningRequestConfig an AdmissionCheck
    names (Kueue's CRD)."""
    out: list[str] = []
    pod_name = job_set_hostname(s.name, s.nodes - 1) + JOBSET_POD_NAME_SUFFIX
    if len(pod_name) > DNS_LABEL_MAX:
        fits = DNS_LABEL_MAX - (len(pod_name) - len(s.name))
        out.append(
            f"gpu-cluster:name = {s.name!r}: the last pod's name {pod_name!r} (the "
            f"{len(JOBSET_POD_NAME_SUFFIX) - 1} random characters as JobSet's webhook counts "
            f"them) has {len(pod_name)} characters, over the {DNS_LABEL_MAX} the webhook "
            f"allows; with nodes = {s.nodes}, name takes at most {fits}"
        )
    config = cluster_scoped_name(s)
    queued = s.gcp is not None and s.gcp.queued_provisioning
    if (
        queued
        and s.workload.queue.mode == "create"
        and len(config) > ADMISSION_CHECK_PARAMETERS_NAME_MAX
    ):
        out.append(
            f"gpu-cluster:namespace/name = {s.namespace!r}/{s.name!r}: with "
            f"gcp.queuedProvisioning the ProvisioningRequestConfig is named {config!r} "
            f"(namespace-name), {len(config)} characters, and Kueue's AdmissionCheck takes at "
            f"most {ADMISSION_CHECK_PARAMETERS_NAME_MAX} in parameters.name: shorten namespace "
            "and name together to at most "
            f"{ADMISSION_CHECK_PARAMETERS_NAME_MAX - 1} characters"
        )
    return out


def topology_levels(s: Settings) -> tuple[str, ...]:
    """The node labels of the Topology the stack creates, broadest first, the node last; () when
    it creates none (a referenced queue, OpenShift without workload.queue.topologyLevels, or a
    GKE pool that starts empty)."""
    queue = s.workload.queue
    if queue.mode == "reference":
        return ()
    if queue.topology_levels is not None:
        return (*queue.topology_levels, HOSTNAME_LEVEL)
    return GKE_TOPOLOGY_LEVELS if s.platform == "gke" and not nodes_on_demand(s) else ()


def installs_controllers(s: Settings) -> bool:
    """Whether the stack installs Kueue and JobSet: a JobSet stack on GKE unless told not to."""
    if s.workload.kind != "jobset":
        return False
    install = s.workload.controllers.install
    return install if install is not None else s.platform == "gke"


def nodes_on_demand(s: Settings) -> bool:
    """Whether the GPU nodes only come when pods ask for them (a flex-start pool starts empty):
    Kueue's topology-aware placement then has no nodes to place a run on and admits none."""
    return s.gcp is not None and s.gcp.provisioning == "flex-start"


def required_level(s: Settings) -> str | None:
    """The level every pod of a run must share a domain of; None: no topology request."""
    explicit = s.workload.queue.required_level
    if explicit is not None:
        return explicit
    levels = topology_levels(s)
    return levels[0] if levels else None


def needs_namespace_opt_in(s: Settings) -> bool:
    """Whether the stack's namespace must carry OPENSHIFT_MANAGED_NAMESPACE_LABEL=true: Red Hat's
    build of Kueue manages jobs only in namespaces so labelled, so an OpenShift JobSet stack's."""
    return s.platform == "openshift" and s.workload.kind == "jobset"


def opt_in_warnings(s: Settings) -> list[str]:
    """A warning when the namespace needs the opt-in label and the stack does not create it
    (it labels only one it creates). Not a refusal: the owner may have labelled it."""
    if not needs_namespace_opt_in(s) or s.namespace_mode == "create":
        return []
    label = f"{OPENSHIFT_MANAGED_NAMESPACE_LABEL}=true"
    return [
        f"gpu-cluster:namespaceMode = {s.namespace_mode!r}: Red Hat's build of Kueue manages "
        f"jobs only in namespaces labelled {label}, and the stack labels only a namespace it "
        f"creates; unless {s.namespace!r} has the label (a cluster admin: oc label namespace "
        f"{s.namespace} {label}), every run fails at its admission gate"
    ]


def kind_warnings(s: Settings) -> list[str]:
    """A warning when the stack leaves workload.kind unset: it then runs a StatefulSet, the kind
    of every stack written before JobSets (kept, so an upgrade never switches one), while a new
    stack should run JobSets (`gpu-cluster new` writes one). Stating the kind silences it."""
    if "kind" in s.workload.model_fields_set:
        return []
    return [
        "gpu-cluster:workload.kind is unset: 'statefulset', as for stacks written before "
        "JobSets; set it to 'statefulset' to keep that (this warning goes), or to 'jobset', "
        "the kind for new stacks (`gpu-cluster new` writes it; docs/cli.md)"
    ]


def runner_warnings(s: Settings) -> list[str]:
    """A warning when the gate asks for checks the stack's runner does not run: something else
    must label the nodes with them (not a refusal: cluster-health-scanner may)."""
    gate = s.workload.queue.health_gate
    if s.workload.kind != "jobset" or s.workload.queue.mode == "reference":
        return []
    if not (gate.enabled and gate.runner.enabled):
        return []
    others = [c for c in gate.checks if c not in RUNNER_CHECKS]
    if not others:
        return []
    runs = " and ".join(repr(c) for c in RUNNER_CHECKS)
    return [
        f"gpu-cluster:workload.queue.healthGate.checks lists {', '.join(others)}, which the "
        f"stack's runner does not run (it runs {runs}): until something else, such "
        "as cluster-health-scanner, labels the nodes with them, no run is admitted"
    ]
