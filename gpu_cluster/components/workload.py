"""The training workload, written once for both platforms.

A StatefulSet with one pod per GPU node behind a headless Service, the launch scripts in a
ConfigMap, and the workspace/datasets storage. Platform and network mode only reach it through
`PodPlacement` and `PodNetworking`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1 import (
    AffinityArgs,
    CapabilitiesArgs,
    ConfigMapVolumeSourceArgs,
    ContainerArgs,
    ContainerPortArgs,
    EmptyDirVolumeSourceArgs,
    EnvVarArgs,
    EnvVarSourceArgs,
    ExecActionArgs,
    HostPathVolumeSourceArgs,
    NodeAffinityArgs,
    NodeSelectorArgs,
    NodeSelectorRequirementArgs,
    NodeSelectorTermArgs,
    ObjectFieldSelectorArgs,
    PersistentVolumeClaimArgs,
    PersistentVolumeClaimSpecArgs,
    PersistentVolumeClaimVolumeSourceArgs,
    PodAffinityTermArgs,
    PodAntiAffinityArgs,
    PodSecurityContextArgs,
    PodSpecArgs,
    PodTemplateSpecArgs,
    ProbeArgs,
    ResourceRequirementsArgs,
    SeccompProfileArgs,
    SecretKeySelectorArgs,
    SecurityContextArgs,
    ServicePortArgs,
    ServiceSpecArgs,
    TolerationArgs,
    VolumeArgs,
    VolumeMountArgs,
    VolumeResourceRequirementsArgs,
)
from pulumi_kubernetes.meta.v1 import LabelSelectorArgs, ObjectMetaArgs
from pulumi_kubernetes.networking.v1 import (
    NetworkPolicyIngressRuleArgs,
    NetworkPolicyPeerArgs,
    NetworkPolicySpecArgs,
)

from gpu_cluster.config.schema import PodSettings, StorageSettings
from gpu_cluster.plan import launch
from gpu_cluster.plan.netmodes import SCRIPTS_DIR, SCRIPTS_VOLUME
from gpu_cluster.plan.podspec import (
    ClaimVolume,
    ConfigMapVolume,
    Container,
    EmptyDir,
    ExecProbe,
    HostPath,
    Mount,
    NodeRequirement,
    PodNetworking,
    PodPlacement,
    Volume,
)
from gpu_cluster.plan.scan_exceptions import skip_annotations

# Label the StatefulSet controller sets on every pod (beta in 1.28, GA in 1.32).
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
# Tells the Kubernetes provider not to wait for a claim to bind: with WaitForFirstConsumer
# storage classes it binds only once a pod uses it (pulumi-kubernetes annotations).
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
# How long `pulumi up` waits for every training pod to run; the provider's default is 10 min
# (pulumi/pulumi-kubernetes provider/pkg/await/statefulset.go DefaultStatefulSetTimeoutMins). A
# new GPU node first pulls the whole training image: 5-15 min for the 10-50 GB of AI/ML images
# (kubernetes.recipes/recipes/configuration/image-pull-optimization-kubernetes); twice the top of
# that leaves room for the claims' disks and the init containers.
POD_START_MINUTES = 30
# Marks storage the stack chose not to keep on destroy (storage.retainOnDelete: false), so the
# policy pack can tell a deliberate opt-out from a mistake.
RETAIN_OPT_OUT = "gpu-cluster/retain-on-delete"


# Template fields a claim takes over once it exists: Pulumi grows the standalone claims in place,
# and an unchanged template keeps Kubernetes from replacing the StatefulSet (its
# volumeClaimTemplates are immutable; pulumi/pulumi-kubernetes provider/pkg/provider/diff.go
# forces a replacement on any change to them). Property paths: pulumi.com/docs/iac/concepts/
# miscellaneous/property-paths.
CLAIM_TEMPLATE_FIELDS_OWNED_BY_CLAIMS = (
    "spec.volumeClaimTemplates[*].spec.resources",
    "spec.volumeClaimTemplates[*].spec.storageClassName",
)


def retention_annotations(retain_on_delete: bool) -> dict[str, str]:
    return {} if retain_on_delete else {RETAIN_OPT_OUT: "false"}


def per_pod_claim_name(volume: str, stateful_set: str, index: int) -> str:
    """The claim the StatefulSet controller uses for pod `index`: <template>-<set>-<ordinal>
    (kubernetes/kubernetes pkg/controller/statefulset/stateful_set_utils.go,
    getPersistentVolumeClaimName); it adopts an existing claim of that name, creating none."""
    return f"{volume}-{stateful_set}-{index}"


def _volume(v: Volume) -> VolumeArgs:
    if isinstance(v, EmptyDir):
        return VolumeArgs(
            name=v.name,
            empty_dir=EmptyDirVolumeSourceArgs(
                medium="Memory" if v.memory else None, size_limit=v.size_limit
            ),
        )
    if isinstance(v, HostPath):
        return VolumeArgs(name=v.name, host_path=HostPathVolumeSourceArgs(path=v.path, type=v.type))
    if isinstance(v, ConfigMapVolume):
        return VolumeArgs(
            name=v.name,
            config_map=ConfigMapVolumeSourceArgs(name=v.config_map, default_mode=v.default_mode),
        )
    return VolumeArgs(
        name=v.name,
        persistent_volume_claim=PersistentVolumeClaimVolumeSourceArgs(claim_name=v.claim),
    )


def _mounts(mounts: tuple[Mount, ...] | list[Mount]) -> list[VolumeMountArgs]:
    return [
        VolumeMountArgs(name=m.volume, mount_path=m.path, read_only=m.read_only or None)
        for m in mounts
    ]


def _security(
    capabilities: tuple[str, ...],
    read_only_root: bool,
    run_as_root: bool = False,
    drop_all: bool = True,
    run_as_user: int | None = None,
) -> SecurityContextArgs:
    """Restricted baseline: no escalation, every capability dropped but the ones named
    (`drop_all` False: the runtime's defaults plus the ones named)."""
    return SecurityContextArgs(
        allow_privilege_escalation=False,
        privileged=False,
        run_as_user=0 if run_as_root else run_as_user,
        run_as_non_root=False if run_as_root else None,
        read_only_root_filesystem=read_only_root or None,
        capabilities=CapabilitiesArgs(
            drop=["ALL"] if drop_all else None, add=list(capabilities) or None
        ),
    )


def _probe(p: ExecProbe | None) -> ProbeArgs | None:
    if p is None:
        return None
    return ProbeArgs(
        exec_=ExecActionArgs(command=list(p.command)),
        initial_delay_seconds=p.initial_delay_seconds,
        period_seconds=p.period_seconds,
        timeout_seconds=p.timeout_seconds,
        failure_threshold=p.failure_threshold,
    )


def _container(c: Container) -> ContainerArgs:
    return ContainerArgs(
        name=c.name,
        image=c.image,
        command=list(c.command),
        args=list(c.args) or None,
        env=[
            *(EnvVarArgs(name=k, value=v) for k, v in c.env),
            *(
                EnvVarArgs(
                    name=k,
                    value_from=EnvVarSourceArgs(
                        secret_key_ref=SecretKeySelectorArgs(name=secret, key=key)
                    ),
                )
                for k, secret, key in c.secret_env
            ),
        ]
        or None,
        volume_mounts=_mounts(c.mounts) or None,
        security_context=_security(
            c.capabilities,
            c.read_only_root,
            c.run_as_root,
            c.drop_all_capabilities,
            c.run_as_user,
        ),
        restart_policy=c.restart_policy,
        startup_probe=_probe(c.startup_probe),
        resources=ResourceRequirementsArgs(
            requests={"cpu": c.cpu_request, "memory": c.memory_request},
            limits={k: v for k, v in (("cpu", c.cpu_limit), ("memory", c.memory_limit)) if v}
            or None,
        ),
    )


@dataclass(frozen=True)
class TrainingWorkloadArgs:
    """What the training workload is made of (gpu_cluster.components.platforms.workload_args
    decides it from stack config).

    name: the StatefulSet's name, and the prefix of its objects' (<name>-scripts, -env,
    -code-sync, -peers-only). namespace, labels: of every object. replicas: pods, one per GPU
    node. image: the training image. gpus_per_node: GPUs each pod requests. pod: the training
    container's requests, limits and /dev/shm size. storage: the workspace and datasets claims.
    claims_after: what every claim waits for (the StorageClass it names, when the platform
    creates it). pods_after: what the StatefulSet waits for besides its own objects (the GPU
    nodes, their agents, the pods' grants and networks); the other objects wait only for what
    the component does (the namespace). master_port: the rendezvous port. service_name: the
    headless Service's. scripts: the scripts ConfigMap's files. env: the training container's
    plain env (rendezvous). networking: the network mode's contribution to the pod. placement:
    where pods run, as which UID.
    service_account: the pods' ServiceAccount. sidecars, sidecar_volumes, sidecar_mounts: extra
    init containers (code sync) with their volumes and the training container's mounts of them.
    secret_env_keys, secret_env: env variables from a Secret (<name>-env) and its data.
    code_sync_source: the code-sync Secret's data (<name>-code-sync) when its source is secret.
    scan_exceptions: checks the security scanners skip on the StatefulSet, with their reasons."""

    name: str
    namespace: str
    labels: dict[str, str]
    replicas: int
    image: str
    gpus_per_node: int
    pod: PodSettings
    storage: StorageSettings
    master_port: int
    service_name: str
    scripts: dict[str, str]
    env: dict[str, str]
    networking: PodNetworking
    placement: PodPlacement
    service_account: pulumi.Input[str]
    claims_after: tuple[pulumi.Resource, ...] = ()
    pods_after: tuple[pulumi.Resource, ...] = ()
    sidecars: tuple[Container, ...] = ()
    sidecar_volumes: tuple[Volume, ...] = ()
    sidecar_mounts: tuple[Mount, ...] = ()
    secret_env_keys: tuple[str, ...] = ()
    secret_env: pulumi.Output[dict[str, str]] | None = None
    code_sync_source: pulumi.Output[dict[str, str]] | None = None
    scan_exceptions: dict[str, str] = field(default_factory=dict)


class TrainingWorkload(pulumi.ComponentResource):
    """StatefulSet + headless Service + scripts ConfigMap + storage for one training cluster."""

    stateful_set_name: pulumi.Output[str]
    service_name: pulumi.Output[str]

    def __init__(
        self, name: str, args: TrainingWorkloadArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:workload:TrainingWorkload", name, None, opts)
        a = args
        networking, placement = a.networking, a.placement
        child = pulumi.ResourceOptions(parent=self)
        meta_labels = a.labels
        scripts = a.scripts
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-scripts",
            metadata=ObjectMetaArgs(
                name=f"{a.name}-scripts", namespace=a.namespace, labels=meta_labels
            ),
            data=scripts,
            opts=child,
        )

        claims = _claims(name, a, meta_labels, child)
        secret_refs: list[EnvVarArgs] = []
        secrets: list[k8s.core.v1.Secret] = []
        if a.secret_env_keys and a.secret_env is not None:
            # Tokens go into a Secret and reach the pod by reference, never as literal env.
            secret = self._secret(name, a, "env", a.secret_env)
            secrets.append(secret)
            secret_refs = [
                EnvVarArgs(
                    name=key,
                    value_from=EnvVarSourceArgs(
                        secret_key_ref=SecretKeySelectorArgs(name=secret.metadata.name, key=key)
                    ),
                )
                for key in a.secret_env_keys
            ]
        service = k8s.core.v1.Service(
            f"{name}-headless",
            metadata=ObjectMetaArgs(name=a.service_name, namespace=a.namespace, labels=meta_labels),
            spec=ServiceSpecArgs(
                cluster_ip="None",
                # Rendezvous must resolve peers before they are Ready.
                publish_not_ready_addresses=True,
                selector=meta_labels,
                ports=[ServicePortArgs(name="rendezvous", port=a.master_port, protocol="TCP")],
            ),
            opts=child,
        )

        init_containers = [*networking.init_containers, *a.sidecars]
        if a.code_sync_source is not None:
            # A secret codeSync (its URL may hold a token) reaches git-sync by reference.
            secrets.append(self._secret(name, a, "code-sync", a.code_sync_source))
        volumes: list[Volume] = [
            EmptyDir("dshm", memory=True, size_limit=a.pod.shm_size),
            ConfigMapVolume(SCRIPTS_VOLUME, f"{a.name}-scripts"),
            *(
                ClaimVolume(volume, claim_name)
                for volume, claim_name, _ in claims
                if a.storage.mode == "rwx"
            ),
            *networking.volumes,
            *a.sidecar_volumes,
        ]
        mounts = [
            Mount("dshm", "/dev/shm"),
            Mount(SCRIPTS_VOLUME, SCRIPTS_DIR, read_only=True),
            Mount("workspace", launch.WORKSPACE_PATH),
            *([Mount("datasets", launch.DATASETS_PATH)] if a.storage.datasets_size else []),
            *networking.mounts,
            *a.sidecar_mounts,
        ]
        training = _training_container(a, networking, mounts, secret_refs)
        scripts_hash = hashlib.sha256(json.dumps(scripts, sort_keys=True).encode()).hexdigest()[:16]
        pod_spec = _pod_spec(
            a.service_account, placement, meta_labels, init_containers, training, volumes
        )
        _peers_only(name, a, meta_labels, child)
        stateful_set = k8s.apps.v1.StatefulSet(
            name,
            metadata=ObjectMetaArgs(
                name=a.name,
                namespace=a.namespace,
                labels=meta_labels,
                annotations={
                    **skip_annotations(a.scan_exceptions),
                    **retention_annotations(a.storage.retain_on_delete),
                },
            ),
            spec=k8s.apps.v1.StatefulSetSpecArgs(
                replicas=a.replicas,
                service_name=service.metadata.name,
                # All pods start together: rendezvous needs every rank, not one after another.
                pod_management_policy="Parallel",
                selector=LabelSelectorArgs(match_labels=meta_labels),
                template=PodTemplateSpecArgs(
                    metadata=ObjectMetaArgs(
                        labels=meta_labels,
                        annotations={
                            **networking.annotations,
                            # A changed script or hostfile rolls the pods.
                            "gpu-cluster/scripts-sha256": scripts_hash,
                        },
                    ),
                    spec=pod_spec,
                ),
                volume_claim_templates=_claim_templates(a, meta_labels),
                persistent_volume_claim_retention_policy=(
                    k8s.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicyArgs(
                        # Always Retain on delete: a replaced StatefulSet (a volume added or
                        # removed) must not take the claims with it. `pulumi destroy` deletes
                        # them itself when storage.retainOnDelete is false.
                        when_deleted="Retain",
                        when_scaled="Retain" if a.storage.retain_on_delete else "Delete",
                    )
                    if a.storage.mode == "per-pod"
                    else None
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                # The claims exist before any pod asks for them.
                depends_on=[
                    config_map,
                    *secrets,
                    *(claim for _, _, claim in claims),
                    *a.pods_after,
                ],
                ignore_changes=list(CLAIM_TEMPLATE_FIELDS_OWNED_BY_CLAIMS)
                if a.storage.mode == "per-pod"
                else None,
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{POD_START_MINUTES}m", update=f"{POD_START_MINUTES}m"
                ),
            ),
        )

        self.stateful_set_name = stateful_set.metadata.name
        self.service_name = service.metadata.name
        self.register_outputs(
            {"statefulSetName": self.stateful_set_name, "serviceName": self.service_name}
        )

    def _secret(
        self,
        name: str,
        a: TrainingWorkloadArgs,
        suffix: str,
        data: pulumi.Output[dict[str, str]],
    ) -> k8s.core.v1.Secret:
        """An Opaque Secret <name>-<suffix> holding `data` (a Pulumi secret)."""
        return k8s.core.v1.Secret(
            f"{name}-{suffix}",
            metadata=ObjectMetaArgs(
                name=f"{a.name}-{suffix}", namespace=a.namespace, labels=a.labels
            ),
            type="Opaque",
            string_data=data,
            opts=pulumi.ResourceOptions(parent=self),
        )


def _training_container(
    a: TrainingWorkloadArgs,
    networking: PodNetworking,
    mounts: list[Mount],
    secret_refs: list[EnvVarArgs],
) -> ContainerArgs:
    """The training container: idle until a user starts the launcher on every pod."""
    env = [
        EnvVarArgs(
            name="NODE_RANK",
            value_from=EnvVarSourceArgs(
                field_ref=ObjectFieldSelectorArgs(
                    field_path=f"metadata.labels['{POD_INDEX_LABEL}']"
                )
            ),
        ),
        *(EnvVarArgs(name=k, value=v) for k, v in a.env.items()),
        *(EnvVarArgs(name=k, value=v) for k, v in sorted(networking.env.items())),
        *secret_refs,
    ]
    limits = {
        "cpu": a.pod.cpu_limit,
        "memory": a.pod.memory_limit,
        "nvidia.com/gpu": str(a.gpus_per_node),
        **{k: str(v) for k, v in networking.resources.items()},
    }
    requests = {
        "cpu": a.pod.cpu_request,
        "memory": a.pod.memory_request,
        "nvidia.com/gpu": str(a.gpus_per_node),
        **{k: str(v) for k, v in networking.resources.items()},
    }
    return ContainerArgs(
        name=launch.TRAINING_CONTAINER,
        image=a.image,
        # Idle until a user starts the launcher on every pod; exits at once on SIGTERM.
        command=["/bin/bash", "-c", "trap 'exit 0' TERM; sleep infinity & wait"],
        env=env,
        ports=[ContainerPortArgs(name="rendezvous", container_port=a.master_port)],
        resources=ResourceRequirementsArgs(
            limits={k: v for k, v in limits.items() if v is not None}, requests=requests
        ),
        # Training images install packages and write caches outside the volumes.
        security_context=_security(
            networking.capabilities,
            read_only_root=False,
            run_as_root=networking.training_runs_as_root,
        ),
        volume_mounts=_mounts(mounts),
        working_dir=launch.WORKSPACE_PATH,
    )


def _pod_spec(
    service_account: pulumi.Input[str],
    placement: PodPlacement,
    meta_labels: dict[str, str],
    init_containers: list[Container],
    training: ContainerArgs,
    volumes: list[Volume],
) -> PodSpecArgs:
    return PodSpecArgs(
        service_account_name=service_account,
        # No Kubernetes API token in training pods: they never talk to the API server.
        automount_service_account_token=False,
        security_context=PodSecurityContextArgs(
            run_as_non_root=True,
            run_as_user=placement.run_as_user,
            fs_group=placement.run_as_user,
            # Re-own volumes only when their root's group differs, not at every start
            # (a full recursive chown of a large workspace delays every pod start).
            fs_group_change_policy="OnRootMismatch",
            seccomp_profile=SeccompProfileArgs(type="RuntimeDefault"),
        ),
        affinity=_affinity(meta_labels, placement),
        tolerations=[
            TolerationArgs(key=key, operator="Exists", effect=effect)
            for key, effect in placement.tolerations
        ],
        init_containers=[_container(c) for c in init_containers] or None,
        containers=[training],
        volumes=[_volume(v) for v in volumes],
        termination_grace_period_seconds=30,
    )


def _peers_only(
    name: str, a: TrainingWorkloadArgs, meta_labels: dict[str, str], opts: pulumi.ResourceOptions
) -> None:
    """Peers reach each other on any port (NCCL picks them); nothing else may connect in."""
    k8s.networking.v1.NetworkPolicy(
        f"{name}-peers-only",
        metadata=ObjectMetaArgs(
            name=f"{a.name}-peers-only", namespace=a.namespace, labels=meta_labels
        ),
        spec=NetworkPolicySpecArgs(
            pod_selector=LabelSelectorArgs(match_labels=meta_labels),
            policy_types=["Ingress"],
            ingress=[
                NetworkPolicyIngressRuleArgs(
                    from_=[
                        NetworkPolicyPeerArgs(
                            pod_selector=LabelSelectorArgs(match_labels=meta_labels)
                        )
                    ]
                )
            ],
        ),
        opts=opts,
    )


def _claim_spec(
    a: TrainingWorkloadArgs, size: str, access_mode: str
) -> PersistentVolumeClaimSpecArgs:
    return PersistentVolumeClaimSpecArgs(
        access_modes=[access_mode],
        storage_class_name=a.storage.storage_class,
        resources=VolumeResourceRequirementsArgs(requests={"storage": size}),
    )


def _volume_sizes(a: TrainingWorkloadArgs) -> list[tuple[str, str]]:
    sizes = [("workspace", a.storage.workspace_size)]
    if a.storage.datasets_size:
        sizes.append(("datasets", a.storage.datasets_size))
    return sizes


def _claims(
    name: str,
    a: TrainingWorkloadArgs,
    meta_labels: dict[str, str],
    child: pulumi.ResourceOptions,
) -> list[tuple[str, str, k8s.core.v1.PersistentVolumeClaim]]:
    """User-data claims as standalone resources, so `pulumi up` can grow them in place.

    rwx: one ReadWriteMany claim per volume that every pod mounts. per-pod: one
    ReadWriteOnce claim per volume and pod, named as the StatefulSet names its claims, so
    the controller adopts them. Each waits for `claims_after` (the StorageClass it names, when
    the platform creates it). Retained on destroy unless storage.retainOnDelete is false;
    protected (any replacement or deletion stops at preview) unless storage.protect is false.
    Returns (volume name, claim name, claim resource) per claim."""
    keep = pulumi.ResourceOptions.merge(
        child,
        pulumi.ResourceOptions(
            retain_on_delete=a.storage.retain_on_delete,
            protect=a.storage.protect,
            depends_on=list(a.claims_after) or None,
        ),
    )
    if a.storage.mode == "rwx":
        wanted = [
            (f"{name}-{volume}", volume, f"{a.name}-{volume}", size, "ReadWriteMany")
            for volume, size in _volume_sizes(a)
        ]
    else:
        wanted = [
            (
                f"{name}-{volume}-{index}",
                volume,
                per_pod_claim_name(volume, a.name, index),
                size,
                "ReadWriteOnce",
            )
            for volume, size in _volume_sizes(a)
            for index in range(a.replicas)
        ]
    out = []
    for resource_name, volume, claim_name, size, access_mode in wanted:
        claim = k8s.core.v1.PersistentVolumeClaim(
            resource_name,
            metadata=ObjectMetaArgs(
                name=claim_name,
                namespace=a.namespace,
                labels=meta_labels,
                annotations={**SKIP_AWAIT, **retention_annotations(a.storage.retain_on_delete)},
            ),
            spec=_claim_spec(a, size, access_mode),
            opts=keep,
        )
        out.append((volume, claim_name, claim))
    return out


def _claim_templates(
    a: TrainingWorkloadArgs, meta_labels: dict[str, str]
) -> list[PersistentVolumeClaimArgs] | None:
    """Per-pod claim templates (storage.mode per-pod): they give each pod its volumes; the
    claims themselves are the standalone ones `_claims` registers under the same names."""
    if a.storage.mode != "per-pod":
        return None
    return [
        PersistentVolumeClaimArgs(
            metadata=ObjectMetaArgs(name=volume, labels=meta_labels),
            spec=_claim_spec(a, size, "ReadWriteOnce"),
        )
        for volume, size in _volume_sizes(a)
    ]


def node_affinity(requirements: tuple[NodeRequirement, ...]) -> NodeAffinityArgs:
    """Schedule only on nodes that meet every requirement."""
    return NodeAffinityArgs(
        required_during_scheduling_ignored_during_execution=NodeSelectorArgs(
            node_selector_terms=[
                NodeSelectorTermArgs(
                    match_expressions=[
                        NodeSelectorRequirementArgs(
                            key=r.key, operator=r.operator, values=list(r.values) or None
                        )
                        for r in requirements
                    ]
                )
            ]
        )
    )


def _affinity(meta_labels: dict[str, str], placement: PodPlacement) -> AffinityArgs:
    return AffinityArgs(
        node_affinity=node_affinity(placement.node_requirements),
        # Exactly one training pod per node: each pod takes every GPU and NIC it is given.
        pod_anti_affinity=PodAntiAffinityArgs(
            required_during_scheduling_ignored_during_execution=[
                PodAffinityTermArgs(
                    label_selector=LabelSelectorArgs(match_labels=meta_labels),
                    topology_key="kubernetes.io/hostname",
                )
            ]
        ),
    )
