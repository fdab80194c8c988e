"""plan.podspec's pod pieces (volumes, mounts, containers, probes, node requirements) as the
Kubernetes SDK's typed Args: the one place they are converted."""

from __future__ import annotations

import pulumi
from pulumi_kubernetes.core.v1 import (
    CapabilitiesArgs,
    ConfigMapVolumeSourceArgs,
    ContainerArgs,
    EmptyDirVolumeSourceArgs,
    EnvVarArgs,
    EnvVarSourceArgs,
    ExecActionArgs,
    HostPathVolumeSourceArgs,
    NodeAffinityArgs,
    NodeSelectorArgs,
    NodeSelectorRequirementArgs,
    NodeSelectorTermArgs,
    PersistentVolumeClaimVolumeSourceArgs,
    ProbeArgs,
    ResourceRequirementsArgs,
    SecretKeySelectorArgs,
    SecurityContextArgs,
    TolerationArgs,
    VolumeArgs,
    VolumeMountArgs,
)

from gpu_cluster.plan.podspec import (
    ConfigMapVolume,
    Container,
    EmptyDir,
    ExecProbe,
    HostPath,
    Mount,
    NodeRequirement,
    PodPlacement,
    Volume,
)


def volume_args(v: Volume) -> VolumeArgs:
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


def mount_args(mounts: tuple[Mount, ...] | list[Mount]) -> list[VolumeMountArgs]:
    return [
        VolumeMountArgs(name=m.volume, mount_path=m.path, read_only=m.read_only or None)
        for m in mounts
    ]


def security_context(
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


def _probe_args(p: ExecProbe | None) -> ProbeArgs | None:
    if p is None:
        return None
    return ProbeArgs(
        exec_=ExecActionArgs(command=list(p.command)),
        initial_delay_seconds=p.initial_delay_seconds,
        period_seconds=p.period_seconds,
        timeout_seconds=p.timeout_seconds,
        failure_threshold=p.failure_threshold,
    )


def container_args(c: Container) -> ContainerArgs:
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
        volume_mounts=mount_args(c.mounts) or None,
        security_context=security_context(
            c.capabilities,
            c.read_only_root,
            c.run_as_root,
            c.drop_all_capabilities,
            c.run_as_user,
        ),
        restart_policy=c.restart_policy,
        startup_probe=_probe_args(c.startup_probe),
        resources=ResourceRequirementsArgs(
            requests={"cpu": c.cpu_request, "memory": c.memory_request},
            limits={k: v for k, v in (("cpu", c.cpu_limit), ("memory", c.memory_limit)) if v}
            or None,
        ),
    )


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


def toleration_args(placement: PodPlacement) -> list[TolerationArgs]:
    """The taints of the GPU nodes that pods placed by `placement` tolerate."""
    return [
        TolerationArgs(key=key, operator="Exists", effect=effect or None)
        for key, effect in placement.tolerations
    ]


def start_timeouts(minutes: int) -> pulumi.CustomTimeouts:
    """How long `pulumi up` awaits pods that start (create) or roll (update):
    workload.startTimeoutMinutes."""
    return pulumi.CustomTimeouts(create=f"{minutes}m", update=f"{minutes}m")
