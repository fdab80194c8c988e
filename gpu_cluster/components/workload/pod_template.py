"""The training pods' template, written once for every workload kind: the training container,
the pod spec, placement and the volumes. Platform and network mode only reach it through
`PodPlacement` and `PodNetworking`; the workload kind only through its `PodRole`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from pulumi_kubernetes.core.v1 import (
    AffinityArgs,
    ContainerArgs,
    ContainerPortArgs,
    EnvVarArgs,
    EnvVarSourceArgs,
    ObjectFieldSelectorArgs,
    PodAffinityTermArgs,
    PodAntiAffinityArgs,
    PodSecurityContextArgs,
    PodSpecArgs,
    PodTemplateSpecArgs,
    ResourceRequirementsArgs,
    SeccompProfileArgs,
)
from pulumi_kubernetes.meta.v1 import LabelSelectorArgs, ObjectMetaArgs

from gpu_cluster.components.workload.args import TrainingWorkloadArgs
from gpu_cluster.components.workload.kind import PodRole
from gpu_cluster.components.workload.pod_args import (
    container_args,
    mount_args,
    node_affinity,
    security_context,
    toleration_args,
    volume_args,
)
from gpu_cluster.config.storage import WORKSPACE_PATH
from gpu_cluster.plan import launch
from gpu_cluster.plan.claims import Claim, volume_sizes
from gpu_cluster.plan.podspec import (
    SCRIPTS_DIR,
    SCRIPTS_VOLUME,
    ClaimVolume,
    ConfigMapVolume,
    EmptyDir,
    Mount,
    PodPlacement,
    Volume,
)
from gpu_cluster.plan.run_metrics import METRICS_PORT_NAME, metrics_field_env


def shared_claim_volumes(a: TrainingWorkloadArgs, claims: Sequence[Claim]) -> list[Volume]:
    """The pod volumes of the shared `claims` (storage.mode rwx); per-pod claims reach a pod
    through its controller."""
    return [ClaimVolume(c.volume, c.name) for c in claims if a.storage.mode == "rwx"]


def scratch_volumes(a: TrainingWorkloadArgs) -> list[Volume]:
    """Empty volumes in place of the workspace and datasets claims, for pods that are the
    training pods in all but the user's data (the node health runner's NCCL check)."""
    return [EmptyDir(volume) for volume, _ in volume_sizes(a.storage)]


def pod_template(
    a: TrainingWorkloadArgs,
    user_volumes: Sequence[Volume],
    secret_env: Sequence[EnvVarArgs],
    role: PodRole,
) -> PodTemplateSpecArgs:
    """The pods of workload `a`: they mount `user_volumes` (the workspace's and datasets',
    unless their controller gives them), take `secret_env` by reference and do what the
    workload kind's `role` says (their rank's field, command, restart policy)."""
    networking = a.networking
    volumes: list[Volume] = [
        EmptyDir("dshm", memory=True, size_limit=a.pod.shm_size),
        ConfigMapVolume(SCRIPTS_VOLUME, f"{a.name}-scripts"),
        *user_volumes,
        *networking.volumes,
        *a.sidecar_volumes,
        *a.data_volumes,
    ]
    mounts = [
        Mount("dshm", "/dev/shm"),
        Mount(SCRIPTS_VOLUME, SCRIPTS_DIR, read_only=True),
        Mount("workspace", WORKSPACE_PATH),
        *([Mount("datasets", launch.DATASETS_PATH)] if a.storage.datasets_size else []),
        *networking.mounts,
        *a.sidecar_mounts,
        *a.data_mounts,
    ]
    scripts_hash = hashlib.sha256(json.dumps(a.scripts, sort_keys=True).encode()).hexdigest()[:16]
    return PodTemplateSpecArgs(
        metadata=ObjectMetaArgs(
            labels=a.labels,
            annotations={
                **networking.annotations,
                **role.annotations,
                **a.data_annotations,
                # A changed script or hostfile rolls the pods.
                "gpu-cluster/scripts-sha256": scripts_hash,
            },
        ),
        spec=PodSpecArgs(
            service_account_name=a.service_account,
            # No Kubernetes API token in training pods: they never talk to the API server.
            automount_service_account_token=False,
            security_context=PodSecurityContextArgs(
                run_as_non_root=True,
                run_as_user=a.placement.run_as_user,
                fs_group=a.placement.run_as_user,
                # Re-own volumes only when their root's group differs, not at every start
                # (a full recursive chown of a large workspace delays every pod start).
                fs_group_change_policy="OnRootMismatch",
                seccomp_profile=SeccompProfileArgs(type="RuntimeDefault"),
            ),
            affinity=_affinity(a.labels, a.placement),
            tolerations=toleration_args(a.placement),
            init_containers=[container_args(c) for c in (*networking.init_containers, *a.sidecars)]
            or None,
            containers=[_training_container(a, mounts, secret_env, role)],
            restart_policy=role.restart_policy,
            subdomain=role.subdomain,
            active_deadline_seconds=role.active_deadline_seconds,
            volumes=[volume_args(v) for v in volumes],
            termination_grace_period_seconds=a.pod.termination_grace_seconds,
        ),
    )


def _training_container(
    a: TrainingWorkloadArgs,
    mounts: list[Mount],
    secret_env: Sequence[EnvVarArgs],
    role: PodRole,
) -> ContainerArgs:
    """The training container, running what the workload kind's `role` says."""
    networking = a.networking
    metrics = a.metrics_port is not None
    from_fields = {
        "NODE_RANK": role.node_rank_field,
        **(metrics_field_env() if metrics else {}),
        **role.field_env,
    }
    env = [
        *(
            EnvVarArgs(
                name=name,
                value_from=EnvVarSourceArgs(field_ref=ObjectFieldSelectorArgs(field_path=path)),
            )
            for name, path in from_fields.items()
        ),
        *(EnvVarArgs(name=k, value=v) for k, v in a.env.items()),
        *(EnvVarArgs(name=k, value=v) for k, v in sorted(networking.env.items())),
        *secret_env,
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
        command=list(role.command),
        env=env,
        ports=[
            ContainerPortArgs(name="rendezvous", container_port=a.master_port),
            *(
                [ContainerPortArgs(name=METRICS_PORT_NAME, container_port=a.metrics_port)]
                if a.metrics_port is not None
                else []
            ),
        ],
        resources=ResourceRequirementsArgs(
            limits={k: v for k, v in limits.items() if v is not None}, requests=requests
        ),
        # Training images install packages and write caches outside the volumes.
        security_context=security_context(
            networking.capabilities,
            read_only_root=False,
            run_as_root=networking.training_runs_as_root,
        ),
        volume_mounts=mount_args(mounts),
        working_dir=WORKSPACE_PATH,
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
