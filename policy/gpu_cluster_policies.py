"""gpu-cluster's CrossGuard policies: what every stack's resources must satisfy.

Each policy's validate function is a plain function of `(args, report_violation)` that reads
only `args.resource_type`, `args.props` and `args.name`; the tests drive the pack with the
program's own registrations, sent as the engine sends them (tests/test_policy.py).

The engine hands `props` over as read-only proxies (`Mapping`/`Sequence`, not dict/list) whose
numbers are floats, and raises `UnknownValueError` on a value only known after `pulumi up`; the
helpers below accept any Mapping/Sequence and read only the keys a rule needs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from gpu_cluster.facts.gpudirect import RELEASES, GpuDirectRelease

# --- what the rules are about ----------------------------------------------------------------

COMPONENT_LABEL: Final = "app.kubernetes.io/component"
TRAINING_COMPONENT: Final = "training"
TRAINING_CONTAINER: Final = "training"
GPU_RESOURCE: Final = "nvidia.com/gpu"
SHM_PATH: Final = "/dev/shm"
HOSTNAME_TOPOLOGY: Final = "kubernetes.io/hostname"
# Label or annotation that says whether storage survives `pulumi destroy`: "true" on a claim
# registered with retainOnDelete, "false" where the stack opts out (storage.retainOnDelete=false);
# gpu_cluster/plan/claims.py sets it.
RETENTION_MARK: Final = "gpu-cluster/retain-on-delete"

# Capabilities each container of the training pod may add; every other container adds none.
ALLOWED_CAPABILITIES: Final[Mapping[str, frozenset[str]]] = {
    TRAINING_CONTAINER: frozenset({"IPC_LOCK"}),  # pinned memory for RDMA / GPUDirect
    "tcpxo-daemon": frozenset({"NET_ADMIN", "NET_BIND_SERVICE"}),  # RxDM flow steering
    "tcpx-daemon": frozenset({"NET_ADMIN"}),
}
# Why a container of the training pod may run as UID 0; every other one runs non-root.
ROOT_ALLOWED: Final[Mapping[str, str]] = {
    # rdma.memlock root-ipc-lock: IPC_LOCK is effective only for UID 0 (no ambient capabilities).
    TRAINING_CONTAINER: "IPC_LOCK",
    # Google's RxDM manifests run it as root so that NET_ADMIN is effective.
    "tcpxo-daemon": "NET_ADMIN",
    "tcpx-daemon": "NET_ADMIN",
}
# GPUDirect receive-datapath (RxDM) sidecars and the network mode each one serves.
RXDM_SIDECARS: Final[Mapping[str, str]] = {"tcpxo-daemon": "tcpxo", "tcpx-daemon": "tcpx"}

STATEFUL_SET: Final = "kubernetes:apps/v1:StatefulSet"
JOB_SET: Final = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
PVC: Final = "kubernetes:core/v1:PersistentVolumeClaim"
GKE_NODE_POOL: Final = "gcp:container/nodePool:NodePool"

# Where each workload type keeps its pod template ({metadata, spec}); a Pod is its own template.
_POD_TEMPLATE_PATHS: Final[Mapping[str, tuple[str | int, ...]]] = {
    STATEFUL_SET: ("spec", "template"),
    # The training JobSet has one replicated job (gpu_cluster/components/workload/job_set.py).
    JOB_SET: ("spec", "replicatedJobs", 0, "template", "spec", "template"),
    "kubernetes:apps/v1:Deployment": ("spec", "template"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template"),
    "kubernetes:batch/v1:Job": ("spec", "template"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template"),
    "kubernetes:core/v1:Pod": (),
}

_EMPTY: Final[Mapping[str, Any]] = {}


# --- reading engine-shaped properties --------------------------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def _seq(value: Any) -> Sequence[Any]:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return value
    return ()


def _get(value: Any, *path: str | int) -> Any:
    """value[path[0]][path[1]]..., None where a step is missing or of the wrong shape (a str
    key reads a mapping, an int index a list)."""
    for key in path:
        if isinstance(key, int):
            items = _seq(value)
            if key >= len(items):
                return None
            value = items[key]
        elif not isinstance(value, Mapping) or key not in value:
            return None
        else:
            value = value[key]
    return value


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(value).items()}


@dataclass(frozen=True)
class _Container:
    name: str
    init: bool  # an initContainer (a native sidecar when its restartPolicy is Always)
    spec: Mapping[str, Any]

    @property
    def label(self) -> str:
        return f"{'initContainer' if self.init else 'container'} '{self.name}'"


@dataclass(frozen=True)
class _PodTemplate:
    labels: dict[str, str]
    spec: Mapping[str, Any]

    def containers(self) -> Iterator[_Container]:
        for key, init in (("initContainers", True), ("containers", False)):
            for c in _seq(self.spec.get(key)):
                c = _map(c)
                yield _Container(str(c.get("name", "")), init, c)

    def container(self, name: str) -> _Container | None:
        return next((c for c in self.containers() if c.name == name and not c.init), None)


def _pod_template(args: ResourceValidationArgs) -> _PodTemplate | None:
    path = _POD_TEMPLATE_PATHS.get(args.resource_type)
    if path is None:
        return None
    template = _map(_get(args.props, *path) if path else args.props)
    return _PodTemplate(
        labels=_str_map(_get(template, "metadata", "labels")), spec=_map(template.get("spec"))
    )


def _labels(args: ResourceValidationArgs) -> dict[str, str]:
    return _str_map(_get(args.props, "metadata", "labels"))


def _object_name(args: ResourceValidationArgs) -> str:
    """metadata.name for messages; the Pulumi name while it is unknown (preview) or unset."""
    try:
        name = _get(args.props, "metadata", "name")
    except UnknownValueError:
        return args.name
    return name if isinstance(name, str) and name else args.name


def _training_pod(args: ResourceValidationArgs) -> _PodTemplate | None:
    """The pod template of the training workload (labelled component=training), else None.

    Vendor node agents (kube-system DaemonSets) carry no such label and are out of scope."""
    pod = _pod_template(args)
    if pod is None:
        return None
    if TRAINING_COMPONENT in (_labels(args).get(COMPONENT_LABEL), pod.labels.get(COMPONENT_LABEL)):
        return pod
    return None


def _is_true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _capability(name: Any) -> str:
    """Runtimes accept SYS_ADMIN, CAP_SYS_ADMIN and lower case alike."""
    cap = str(name).strip().upper()
    return cap.removeprefix("CAP_")


def _gpu_count(quantity: Any) -> float:
    try:
        return float(str(quantity))
    except ValueError:
        return 1.0  # not a plain number: count it as a GPU request rather than skip the rule


def _requests_gpus(container: _Container) -> bool:
    resources = _map(container.spec.get("resources"))
    return any(
        _gpu_count(_map(resources.get(kind)).get(GPU_RESOURCE, 0)) > 0
        for kind in ("requests", "limits")
    )


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """Kubernetes label selector semantics (an empty selector matches everything)."""
    selector = _map(selector)
    for key, value in _map(selector.get("matchLabels")).items():
        if labels.get(key) != str(value):
            return False
    for expr in _seq(selector.get("matchExpressions")):
        expr = _map(expr)
        key = str(expr.get("key", ""))
        operator = expr.get("operator")
        values = {str(v) for v in _seq(expr.get("values"))}
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def _retention_marks(metadata: Any) -> set[str]:
    """The values of label and annotation gpu-cluster/retain-on-delete on the object's metadata."""
    return {
        mark.strip().lower()
        for mark in (
            _get(metadata, "labels", RETENTION_MARK),
            _get(metadata, "annotations", RETENTION_MARK),
        )
        if isinstance(mark, str)
    }


# --- 1. no privileged training pods ----------------------------------------------------------


def validate_no_privileged_training(args: ResourceValidationArgs, report: ReportViolation) -> None:
    pod = _training_pod(args)
    if pod is None:
        return
    for c in pod.containers():
        if _is_true(_get(c.spec, "securityContext", "privileged")):
            report(
                f"{c.label} of training workload '{_object_name(args)}' sets "
                "securityContext.privileged: true. Remove it: training pods get only the "
                "capabilities their network mode needs, and host setup belongs in a kube-system "
                "DaemonSet.",
                None,
            )
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if _is_true(pod.spec.get(field)):
            report(
                f"training workload '{_object_name(args)}' sets {field}: true on its pod spec. "
                "Remove it: training pods use the pod network (Multus/GKE multi-networking "
                "attaches the GPU NICs), never the host's namespaces.",
                None,
            )


# --- 2. capabilities only as the network mode needs ------------------------------------------


def validate_least_capabilities(args: ResourceValidationArgs, report: ReportViolation) -> None:
    pod = _training_pod(args)
    if pod is None:
        return
    for c in pod.containers():
        capabilities = _map(_get(c.spec, "securityContext", "capabilities"))
        allowed = ALLOWED_CAPABILITIES.get(c.name, frozenset())
        added = [_capability(cap) for cap in _seq(capabilities.get("add"))]
        extra = sorted({cap for cap in added if cap not in allowed})
        if extra:
            may = ", ".join(sorted(allowed)) if allowed else "none"
            report(
                f"{c.label} of training workload '{_object_name(args)}' adds capabilities "
                f"{', '.join(extra)}; it may add only: {may}. Remove them from "
                "securityContext.capabilities.add.",
                None,
            )
        # RxDM sidecars keep the runtime's default set under Google's adds, as Google publishes
        # and supports them (CEA gpudirect-tcpxo/nccl-test-latest.yaml, 992db81); every other
        # container starts from nothing.
        if c.name in RXDM_SIDECARS:
            continue
        if "ALL" not in {_capability(cap) for cap in _seq(capabilities.get("drop"))}:
            report(
                f"{c.label} of training workload '{_object_name(args)}' does not drop all "
                "capabilities: set securityContext.capabilities.drop: [ALL] (and add back only "
                "what the network mode needs).",
                None,
            )


# --- 2b. root only where a capability needs it -----------------------------------------------


def _is_root(value: Any) -> bool:
    try:
        return value is not None and float(str(value)) == 0
    except ValueError:
        return False


def validate_root_only_for_a_needed_capability(
    args: ResourceValidationArgs, report: ReportViolation
) -> None:
    pod = _training_pod(args)
    if pod is None:
        return
    pod_user = _get(pod.spec, "securityContext", "runAsUser")
    for c in pod.containers():
        user = _get(c.spec, "securityContext", "runAsUser")
        if not _is_root(pod_user if user is None else user):
            continue
        needed = ROOT_ALLOWED.get(c.name)
        added = {
            _capability(cap) for cap in _seq(_get(c.spec, "securityContext", "capabilities", "add"))
        }
        escalation = _get(c.spec, "securityContext", "allowPrivilegeEscalation")
        if needed is not None and needed in added and escalation is False:
            continue
        why = (
            f"it may only do so to make {needed} effective, with {needed} added and "
            "allowPrivilegeEscalation: false"
            if needed
            else "only the training container (for IPC_LOCK) and GPUDirect RxDM sidecars may"
        )
        report(
            f"{c.label} of training workload '{_object_name(args)}' runs as UID 0: {why}. "
            "Run it as a non-root user.",
            None,
        )


# --- 3. GPU pods have a memory-backed /dev/shm -----------------------------------------------


def validate_gpu_pods_have_shm(args: ResourceValidationArgs, report: ReportViolation) -> None:
    pod = _pod_template(args)
    if pod is None:
        return
    volumes = {str(_map(v).get("name")): _map(v) for v in _seq(pod.spec.get("volumes"))}
    for c in pod.containers():
        if not _requests_gpus(c):
            continue
        mounts = [
            _map(m)
            for m in _seq(c.spec.get("volumeMounts"))
            if str(_map(m).get("mountPath", "")).rstrip("/") == SHM_PATH
        ]
        where = f"{c.label} of '{_object_name(args)}' requests {GPU_RESOURCE} but"
        fix = (
            "mount an emptyDir volume with medium: Memory at /dev/shm (stack config pod.shmSize "
            "sets its size); NCCL and DataLoader workers fail with the runtime's 64 MiB default."
        )
        if not mounts:
            report(f"{where} mounts nothing at {SHM_PATH}: {fix}", None)
            continue
        volume_name = str(mounts[0].get("name"))
        medium = _get(volumes.get(volume_name), "emptyDir", "medium")
        if medium != "Memory":
            report(
                f"{where} mounts volume '{volume_name}' at {SHM_PATH}, which is not an emptyDir "
                f"with medium: Memory: {fix}",
                None,
            )


# --- 4. one training pod per node ------------------------------------------------------------


def validate_one_pod_per_node(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in (STATEFUL_SET, JOB_SET):
        return
    pod = _training_pod(args)
    if pod is None:
        return
    terms = _seq(
        _get(
            pod.spec,
            "affinity",
            "podAntiAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
        )
    )
    for term in terms:
        term = _map(term)
        if term.get("topologyKey") != HOSTNAME_TOPOLOGY or "labelSelector" not in term:
            continue
        namespaces = [str(n) for n in _seq(term.get("namespaces"))]
        if namespaces and "namespaceSelector" not in term:
            own = _get(args.props, "metadata", "namespace")  # read only when it matters
            if own is not None and own not in namespaces:
                continue  # the term only looks at other namespaces
        if _selector_matches(term.get("labelSelector"), pod.labels):
            return
    own_labels = ", ".join(f"{k}={v}" for k, v in sorted(pod.labels.items())) or "none set"
    report(
        f"training {args.resource_type.rsplit(':', 1)[1]} '{_object_name(args)}' can schedule "
        "two pods on one node: add to its pod template a spec.affinity.podAntiAffinity"
        ".requiredDuringSchedulingIgnoredDuringExecution term "
        f"with topologyKey {HOSTNAME_TOPOLOGY} and a labelSelector matching the pod's own labels "
        f"({own_labels}). Each pod needs a whole node's GPUs and NICs.",
        None,
    )


# --- 5. user data survives `pulumi destroy` and scale-down -----------------------------------

_RETAIN_HOW = (
    "Claims are retained by default (stack config storage.retainOnDelete, default true). To "
    "opt out and delete them with the stack on purpose, set stack config "
    "storage.retainOnDelete=false (`pulumi config set --path storage.retainOnDelete false`), "
    'which marks them gpu-cluster/retain-on-delete: "false".'
)


def validate_user_data_retained(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == PVC:
        # The engine does not send the retainOnDelete option (pulumi/pulumi v3.259.0
        # proto/pulumi/analyzer.proto AnalyzerResourceOptions; pulumi-policy v1.21.0
        # PolicyResourceOptions), so the program marks each claim with it. One without the mark
        # was registered some other way, and nothing shows it retained: by default Pulumi
        # deletes it with the stack.
        if not _retention_marks(args.props.get("metadata")) & {"true", "false"}:
            report(
                f"PersistentVolumeClaim '{_object_name(args)}' holds user data but is not marked "
                f'{RETENTION_MARK}: "true", so it may be deleted with the stack (policy packs are '
                "not told its retainOnDelete option): register it with ResourceOptions("
                f"retain_on_delete=True) and that annotation. {_RETAIN_HOW}",
                None,
            )
        return
    if args.resource_type != STATEFUL_SET:
        return
    if not _seq(_get(args.props, "spec", "volumeClaimTemplates")):
        return
    if "false" in _retention_marks(args.props.get("metadata")):
        return
    policy = _map(_get(args.props, "spec", "persistentVolumeClaimRetentionPolicy"))
    # Absent fields mean Retain (the Kubernetes default).
    deleting = [f for f in ("whenDeleted", "whenScaled") if policy.get(f, "Retain") != "Retain"]
    if deleting:
        settings = ", ".join(f"{f}: {policy[f]}" for f in deleting)
        report(
            f"StatefulSet '{_object_name(args)}' deletes its volumeClaimTemplates' claims "
            f"(persistentVolumeClaimRetentionPolicy {settings}): set them to Retain. {_RETAIN_HOW}",
            None,
        )


# --- 6. GKE A3 node pools use compact placement ----------------------------------------------


def validate_a3_compact_placement(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != GKE_NODE_POOL:
        return
    machine_type = _get(args.props, "nodeConfig", "machineType")
    if not (isinstance(machine_type, str) and machine_type.startswith("a3-")):
        return
    reservation = _get(args.props, "nodeConfig", "reservationAffinity", "consumeReservationType")
    if reservation == "SPECIFIC_RESERVATION":
        return  # a reservation brings its own placement
    if _get(args.props, "nodeConfig", "flexStart") is True:
        # Flex-start VMs get GKE's best-effort compact placement (docs.cloud.google.com/
        # ai-hypercomputer/docs/create/gke-ai-hypercompute); A3 Ultra is sold no other way
        # but a reservation or Spot.
        return
    placement = _get(args.props, "placementPolicy", "type")
    if placement != "COMPACT":
        pool = _get(args.props, "name") or args.name
        report(
            f"node pool '{pool}' ({machine_type}) has placementPolicy.type "
            f"{placement if placement is not None else 'unset'}: set placementPolicy.type "
            "COMPACT so the nodes sit close together on the GPU fabric, or consume a specific "
            "reservation (stack config gcp.provisioning=reservation with gcp.reservation) or "
            "flex-start capacity (gcp.provisioning=flex-start).",
            None,
        )


# --- 7. the pinned GPUDirect release's NCCL settings are complete ----------------------------


def _release_for_image(mode: str, image: str) -> GpuDirectRelease | None:
    return next(
        (r for r in RELEASES.values() if r.mode == mode and r.rxdm_image == image),
        None,
    )


def validate_gpudirect_nccl_env(args: ResourceValidationArgs, report: ReportViolation) -> None:
    pod = _pod_template(args)
    if pod is None:
        return
    for sidecar in pod.containers():
        mode = RXDM_SIDECARS.get(sidecar.name)
        if mode is None:
            continue
        image = str(sidecar.spec.get("image", ""))
        release = _release_for_image(mode, image)
        if release is None:
            pinned = ", ".join(
                f"{name} ({r.rxdm_image})" for name, r in sorted(RELEASES.items()) if r.mode == mode
            )
            report(
                f"{sidecar.label} of '{_object_name(args)}' runs {image or 'no image'}, which is "
                f"not the RxDM image of a pinned {mode} release ({pinned}): choose the release "
                "with stack config gcp.gpudirectRelease instead of overriding the image.",
                None,
            )
            continue
        release_name = next(n for n, r in RELEASES.items() if r is release)
        training = pod.container(TRAINING_CONTAINER)
        if training is None:
            report(
                f"'{_object_name(args)}' runs the {mode} RxDM sidecar but has no container named "
                f"'{TRAINING_CONTAINER}' to carry release {release_name}'s NCCL settings.",
                None,
            )
            continue
        env: dict[str, str | None] = {}
        for e in _seq(training.spec.get("env")):
            e = _map(e)
            value = e.get("value")
            env[str(e.get("name"))] = None if value is None else str(value)
        missing = [k for k, _ in release.nccl_env if k not in env]
        wrong = [
            f"{k}={env[k]!r} (release: {v!r})"
            for k, v in release.nccl_env
            if k in env and env[k] is not None and env[k] != v
        ]
        if missing:
            report(
                f"container '{TRAINING_CONTAINER}' of '{_object_name(args)}' lacks NCCL settings "
                f"of GPUDirect release {release_name} (its sidecar runs {image}): "
                f"{', '.join(missing)}. Without them NCCL silently falls back to slower "
                "transports; take the whole set from gpu_cluster/facts/gpudirect.py.",
                None,
            )
        if wrong:
            report(
                f"container '{TRAINING_CONTAINER}' of '{_object_name(args)}' sets NCCL settings "
                f"that differ from GPUDirect release {release_name}: {', '.join(wrong)}. The "
                "plugin, RxDM and these values are validated together; use the release's values.",
                None,
            )


# --- the pack --------------------------------------------------------------------------------

POLICIES: Final[tuple[ResourceValidationPolicy, ...]] = (
    ResourceValidationPolicy(
        name="no-privileged-training-pods",
        description=(
            "Training pods (label app.kubernetes.io/component=training) run no privileged "
            "container and do not share the host's network, PID or IPC namespace."
        ),
        enforcement_level=EnforcementLevel.MANDATORY,
        validate=validate_no_privileged_training,
    ),
    ResourceValidationPolicy(
        name="training-capabilities-least-privilege",
        description=(
            "Every container of a training pod drops ALL capabilities (RxDM sidecars: the runtime "
            "default, as Google runs them) and adds back only what "
            "its network mode needs: training IPC_LOCK, tcpxo-daemon NET_ADMIN and "
            "NET_BIND_SERVICE, tcpx-daemon NET_ADMIN, everything else nothing."
        ),
        enforcement_level=EnforcementLevel.MANDATORY,
        validate=validate_least_capabilities,
    ),
    ResourceValidationPolicy(
        name="root-only-for-a-needed-capability",
        description=(
            "A container of a training pod runs as UID 0 only to make a capability effective "
            "(Kubernetes grants no ambient capabilities): training with IPC_LOCK "
            "(rdma.memlock root-ipc-lock), the GPUDirect RxDM sidecars with NET_ADMIN, each "
            "with allowPrivilegeEscalation: false; every other container runs non-root."
        ),
        enforcement_level=EnforcementLevel.MANDATORY,
        validate=validate_root_only_for_a_needed_capability,
    ),
    ResourceValidationPolicy(
        name="gpu-pods-memory-backed-dev-shm",
        description=(
            "Every container requesting nvidia.com/gpu mounts an emptyDir with medium: Memory "
            "at /dev/shm."
        ),
        enforcement_level=EnforcementLevel.MANDATORY,
        validate=validate_gpu_pods_have_shm,
    ),
    ResourceValidationPolicy(
        name="one-training-pod-per-node",
        description=(
            "The training StatefulSet has a required podAntiAffinity term on "
            "kubernetes.io/hostname that selects its own pods."
        ),
        enforcement_level=EnforcementLevel.MANDATORY,
        validate=validate_one_pod_per_node,
    ),
    ResourceValidationPolicy(
        name="user-data-retained",
        description=(
            'PersistentVolumeClaims are marked gpu-cluster/retain-on-delete: "true" (the '
            "program registers them with retainOnDelete, which the engine does not pass to "
            "policy packs) and StatefulSets retain their volumeClaimTemplates' claims, unless "
            'marked gpu-cluster/retain-on-delete: "false".'
        ),
        enforcement_level=EnforcementLevel.MANDATORY,
        validate=validate_user_data_retained,
    ),
    ResourceValidationPolicy(
        name="gke-a3-compact-placement",
        description=(
            "GKE node pools of a3-* machines use compact placement unless they consume a "
            "specific reservation or run flex-start VMs (placed by GKE)."
        ),
        enforcement_level=EnforcementLevel.MANDATORY,
        validate=validate_a3_compact_placement,
    ),
    ResourceValidationPolicy(
        name="gpudirect-nccl-env-complete",
        description=(
            "A pod with a GPUDirect RxDM sidecar (tcpxo-daemon, tcpx-daemon) runs a pinned "
            "release's image and its training container has every NCCL setting of that release."
        ),
        enforcement_level=EnforcementLevel.MANDATORY,
        validate=validate_gpudirect_nccl_env,
    ),
)
