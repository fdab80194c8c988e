"""Security-scan (checkov) exceptions the design needs, each with its reason (pure).

Every exception is attached to the one object it concerns as a `checkov.io/skipN` annotation,
and only when the stack's config actually needs it; everything else must pass the scan.
"""

from __future__ import annotations

from gpu_cluster.config.schema import Settings
from gpu_cluster.plan.podspec import Container, PodNetworking

# Reasons shared by the training pods and the image pre-pull.
TAG_PINNED = "images are pinned by tag in stack config (set a digest there)"
UID_FROM_SCC = "OpenShift's SCC assigns a high UID from the namespace's range"


def skip_annotations(reasons: dict[str, str]) -> dict[str, str]:
    """checkov's per-object suppression annotations: `checkov.io/skipN: CHECK=reason`."""
    return {
        f"checkov.io/skip{i}": f"{check}={reason}"
        for i, (check, reason) in enumerate(sorted(reasons.items()), start=1)
    }


def training_exceptions(
    s: Settings, networking: PodNetworking, sidecars: list[Container]
) -> dict[str, str]:
    reasons = {
        "CKV_K8S_8": "no liveness probe: a restart would kill a running training job; "
        "torchrun and DeepSpeed handle worker failures",
        "CKV_K8S_9": "no readiness probe: the pods serve no traffic (the headless Service "
        "publishes not-ready addresses); fabric readiness is what "
        + ("each run's fabric gate" if s.workload.kind == "jobset" else "verifyCommand")
        + " checks",
        "CKV_K8S_15": "images are pinned by tag or digest in stack config, and re-pulling "
        "multi-GB training images on every restart only costs time",
        "CKV_K8S_22": "training images install packages and write caches outside the volumes",
    }
    images = [s.image, *(c.image for c in networking.init_containers + tuple(sidecars))]
    if any("@sha256:" not in image for image in images):
        reasons["CKV_K8S_43"] = TAG_PINNED
    capabilities = set(networking.capabilities)
    capabilities.update(c for sidecar in networking.init_containers for c in sidecar.capabilities)
    if capabilities:
        reasons["CKV_K8S_25"] = (
            f"network mode {s.network_mode} needs {', '.join(sorted(capabilities))} "
            "(only on the containers that use them)"
        )
    if any(not c.drop_all_capabilities for c in networking.init_containers):
        runtime_default = (
            "the GPUDirect RxDM sidecar keeps the runtime's default capabilities under its adds, "
            "as Google publishes and supports it; every other container drops ALL (policy pack)"
        )
        reasons["CKV_K8S_28"] = runtime_default
        reasons["CKV_K8S_37"] = runtime_default
    if s.platform == "openshift":
        reasons["CKV_K8S_40"] = UID_FROM_SCC
    if networking.training_runs_as_root:
        reasons["CKV_K8S_23"] = (
            "rdma.memlock root-ipc-lock: IPC_LOCK is only effective for UID 0 (no ambient "
            "capabilities), so the training container alone runs as root, with no other "
            "capability and no privilege escalation"
        )
    containers = [*networking.init_containers, *sidecars]
    if s.pod.cpu_limit is None or any(c.cpu_limit is None for c in containers):
        reasons["CKV_K8S_11"] = (
            "CPU limits throttle data loading and the GPUDirect daemon; requests reserve the CPU"
        )
    if s.secret_env or any(c.secret_env for c in sidecars):
        reasons["CKV_K8S_35"] = (
            "secrets reach the processes that read them from the environment (secretEnv's "
            "tokens; git-sync takes its repository and credentials only as flags or GITSYNC_* "
            "variables), by reference to a Secret, never as literal values"
        )
    if any(c.memory_limit is None for c in containers):
        reasons["CKV_K8S_13"] = (
            "the GPUDirect daemon has no memory limit (an OOM kill stalls GPU traffic)"
        )
    return reasons


# Vendor node agents on GKE A3 nodes: they change the host, so they need what the scan forbids.
NODE_AGENT_EXCEPTIONS = {
    "CKV_K8S_16": "vendor node agent: binds PCI devices, loads modules, injects device nodes",
    "CKV_K8S_17": "vendor node agent: enters the host's namespaces (nsenter)",
    "CKV_K8S_19": "vendor node agent: configures host networking",
    "CKV_K8S_20": "privileged vendor node agent",
    "CKV_K8S_23": "vendor node agent runs as root on the host",
    "CKV_K8S_28": "privileged vendor node agent",
    "CKV_K8S_37": "privileged vendor node agent",
    "CKV_K8S_40": "vendor node agent runs as root on the host",
    "CKV_K8S_22": "vendor installer writes to its image before copying to the host",
    "CKV_K8S_8": "one-shot vendor install step; Google's manifests define no probes",
    "CKV_K8S_9": "one-shot vendor install step; Google's manifests define no probes",
    "CKV_K8S_15": "tag-pinned vendor images (Google publishes tags)",
    "CKV_K8S_43": "tag-pinned vendor images (Google publishes tags)",
    "CKV_K8S_11": "Google's manifests set requests only; a throttled installer delays the node",
    "CKV_K8S_13": "Google's manifests set requests only; an OOM-killed injector breaks pods",
    "CKV2_K8S_6": "host-network pods are outside NetworkPolicy's reach",
}


def pre_pull_exceptions(image: str) -> dict[str, str]:
    """The image pre-pull DaemonSet's (openshift.prePull): an idle container in the training
    image, on OpenShift."""
    reasons = {
        "CKV_K8S_8": "idle container that only holds the training image on the node: nothing "
        "to probe",
        "CKV_K8S_9": "idle container that only holds the training image on the node: it serves "
        "nothing",
        "CKV_K8S_15": "it pulls exactly as the training pods do (the same image and policy), "
        "so that they find the image on the node",
        "CKV_K8S_40": UID_FROM_SCC,
    }
    if "@sha256:" not in image:
        reasons["CKV_K8S_43"] = TAG_PINNED
    return reasons


def script_controller_exceptions(image: str, run_as_user: int | None) -> dict[str, str]:
    """The Deployment of a controller the stack runs as a script (the node health gate, the
    node health runner) in `image`, as `run_as_user`."""
    reasons = {
        "CKV_K8S_8": "a loop that reads the API server every few seconds and logs what fails: "
        "a restart would change nothing",
        "CKV_K8S_9": "it serves nothing",
        "CKV_K8S_38": "it reads and writes the cluster's objects as its ServiceAccount: the "
        "token is what it runs on",
    }
    return {**reasons, **_assigned_uid_and_tag(image, run_as_user)}


def _assigned_uid_and_tag(image: str, run_as_user: int | None) -> dict[str, str]:
    """A small pod's exceptions for a UID the platform assigns and an image pinned by tag."""
    reasons = {}
    if run_as_user is None:
        reasons["CKV_K8S_40"] = UID_FROM_SCC
    if "@sha256:" not in image:
        reasons["CKV_K8S_43"] = TAG_PINNED
    return reasons


def gpu_check_exceptions(image: str, run_as_user: int | None) -> dict[str, str]:
    """The node health runner's GPU check pod (its PodTemplate): a run of DCGM diagnostics in
    `image`, as `run_as_user`."""
    reasons = {
        "CKV_K8S_8": "a check that runs once to its end: its exit is the result, a restart "
        "would be a second check",
        "CKV_K8S_9": "it serves nothing; it runs once to its end",
        "CKV_K8S_15": "the DCGM image is large and pulled by tag: a registry outage must not "
        "fail a node's check (IfNotPresent)",
        "CKV_K8S_22": "DCGM's diagnostics write their logs where the image puts them (/var/log)",
    }
    return {**reasons, **_assigned_uid_and_tag(image, run_as_user)}
