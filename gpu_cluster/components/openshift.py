"""OpenShift platform: namespace, training access (ServiceAccount, SCC + RBAC, memlock),
Multus NADs and the workload, composed from the reusable components. The stack's settings
become the components' arguments here and nowhere else."""

from __future__ import annotations

import dataclasses

import pulumi

from gpu_cluster.components.console_dashboard import ConsoleDashboard, ConsoleDashboardArgs
from gpu_cluster.components.image_pre_pull import ImagePrePull, ImagePrePullArgs
from gpu_cluster.components.moved import moved_from
from gpu_cluster.components.namespace import TrainingNamespace
from gpu_cluster.components.rdma_networks import RdmaNetworks, RdmaNetworksArgs
from gpu_cluster.components.shared_args import (
    labels,
    namespace_args,
    queued,
    run_outputs,
    training_storage,
    workload_args,
)
from gpu_cluster.components.training_access import (
    MemlockMachineConfig,
    SccGrant,
    TrainingAccess,
    TrainingAccessArgs,
)
from gpu_cluster.components.workload import TrainingWorkload
from gpu_cluster.config.derived import shows_dashboard
from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.workload import cluster_scoped_name
from gpu_cluster.facts.kubernetes import COMPONENT_LABEL
from gpu_cluster.plan.dashboard_forms import console_dashboard
from gpu_cluster.plan.netmodes import pod_networking
from gpu_cluster.plan.outputs import (
    COMMAND_OUTPUTS,
    OPENSHIFT_CLI,
    no_context_message,
    stack_outputs,
)
from gpu_cluster.plan.podspec import (
    PRE_PULL_COMPONENT,
    NodeRequirement,
    PodNetworking,
    PodPlacement,
)
from gpu_cluster.plan.security import (
    REQUIRED_SCC_ANNOTATION,
    RESTRICTED_SCC,
    training_scc_name,
)


def openshift_placement(s: Settings) -> PodPlacement:
    """GPU nodes (by the GPU operator's label); only the listed ones when the stack names any."""
    requirements = [NodeRequirement(s.openshift.gpu_node_label, "In", ("true",))]
    if s.openshift.node_names:
        requirements.append(
            NodeRequirement("kubernetes.io/hostname", "In", tuple(s.openshift.node_names))
        )
    return PodPlacement(node_requirements=tuple(requirements))


def memlock_machine_config(s: Settings) -> MemlockMachineConfig | None:
    """The memlock MachineConfig this stack manages (rdma.memlock machineconfig, unless
    rdma.machineConfig says another owner keeps it), owned by this Pulumi project/stack."""
    rdma = mode_of(s).rdma(s)
    if rdma is None or rdma.memlock != "machineconfig" or rdma.machine_config == "reference":
        return None
    owner = f"{pulumi.get_project()}/{pulumi.get_stack()}"
    return MemlockMachineConfig(rdma.machine_config_pool, owner, rdma.machine_config)


def _scc_grant(s: Settings, networking: PodNetworking) -> SccGrant | None:
    """restricted-v2 allows adding only NET_BIND_SERVICE, so the mode's capabilities (and,
    for a root training container, runAsUser RunAsAny) get their own SCC, usable by the
    training ServiceAccount only."""
    if not networking.capabilities:
        return None
    return SccGrant(
        training_scc_name(s.namespace, s.name),
        networking.capabilities,
        any_user=networking.training_runs_as_root,
    )


def _pinned_scc(networking: PodNetworking, scc: SccGrant | None) -> PodNetworking:
    """Pinned, so that admission never picks another SCC the account may also use (anyuid,
    say): the stack's own SCC, or restricted-v2 where the pods need nothing more."""
    return dataclasses.replace(
        networking,
        annotations={
            **networking.annotations,
            REQUIRED_SCC_ANNOTATION: scc.name if scc is not None else RESTRICTED_SCC,
        },
    )


def _rdma_networks(
    name: str, s: Settings, after: list[pulumi.Resource], opts: pulumi.ResourceOptions
) -> tuple[pulumi.Resource, ...]:
    """The NetworkAttachmentDefinitions this stack creates or adopts; () when it references
    the cluster's or uses no RDMA."""
    rdma = mode_of(s).rdma(s)
    if rdma is None or rdma.network_attachments == "reference":
        return ()
    adopt = rdma.network_attachments == "adopt"
    return tuple(
        RdmaNetworks(name, RdmaNetworksArgs(s.namespace, rdma, adopt, after), opts).attachments
    )


class OpenShiftPlatform(pulumi.ComponentResource):
    """Everything one OpenShift training cluster needs, in the stack's namespace."""

    workload: TrainingWorkload
    outputs: dict[str, object]

    def __init__(
        self,
        name: str,
        settings: Settings,
        secret_env: pulumi.Output[dict[str, str]] | None = None,
        kube_target: tuple[str, ...] = (),
        secret_target: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """kube_target: the oc flags naming the stack's cluster (its `kubernetes:context`
        and/or kubeconfig file), which the exported commands carry (as secrets when
        `secret_target`: the stack holds one of them as a secret); () refuses the commands."""
        super().__init__("gpu-cluster:openshift:OpenShiftPlatform", name, None, opts)
        s = settings
        # The pieces used to be this component's own children: they keep their URNs by alias.
        moved = moved_from(self)
        depends: list[pulumi.Resource] = []
        ns_args = namespace_args(s)
        if ns_args is not None:
            depends.append(TrainingNamespace(name, ns_args, moved).namespace)

        networking = pod_networking(s, f"{s.name}-scripts")
        scc = _scc_grant(s, networking)
        access = TrainingAccess(
            name,
            TrainingAccessArgs(
                prefix=s.name,
                namespace=s.namespace,
                labels=labels(s),
                scc=scc,
                memlock=memlock_machine_config(s),
                after=depends,
            ),
            moved,
        )
        placement = openshift_placement(s)
        # What the pods need besides the namespace: their grants, networks, data volumes and
        # image. The workload's other objects wait only for the namespace.
        pods_after = (
            *access.ready,
            *_rdma_networks(name, s, depends, moved),
            *self._data_volumes(name, s, depends),
            *self._image_pre_pull(name, s, placement, access.service_account_name, depends),
        )
        workload = workload_args(
            s,
            _pinned_scc(networking, scc),
            placement,
            access.service_account_name,
            secret_env,
            pods_after=pods_after,
        )
        self.workload = TrainingWorkload(
            f"{name}-workload",
            queued(name, s, workload, depends, pulumi.ResourceOptions(parent=self)),
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
        )
        if shows_dashboard(s):
            dashboard = ConsoleDashboardArgs(
                f"{cluster_scoped_name(s)}-dashboard", labels(s), console_dashboard(s)
            )
            ConsoleDashboard(name, dashboard, pulumi.ResourceOptions(parent=self))
        self.outputs = self._stack_outputs(s, kube_target, secret_target)
        if not kube_target:
            pulumi.log.warn(no_context_message(OPENSHIFT_CLI), self)
        self.register_outputs({"namespace": s.namespace})

    def _data_volumes(
        self, name: str, s: Settings, after: list[pulumi.Resource]
    ) -> tuple[pulumi.Resource, ...]:
        """The data volumes' claims (waiting for `after`) and what they need ready."""
        storage = training_storage(name, s, after, pulumi.ResourceOptions(parent=self))
        return tuple(storage.ready) if storage is not None else ()

    def _image_pre_pull(
        self,
        name: str,
        s: Settings,
        placement: PodPlacement,
        account: pulumi.Output[str],
        after: list[pulumi.Resource],
    ) -> tuple[pulumi.Resource, ...]:
        """The DaemonSet keeping the training image on the GPU nodes (openshift.prePull)."""
        if not s.openshift.pre_pull:
            return ()
        pre_pull = ImagePrePull(
            f"{name}-image-pre-pull",
            ImagePrePullArgs(
                name=f"{s.name}-image-pre-pull",
                namespace=s.namespace,
                labels={**labels(s), COMPONENT_LABEL: PRE_PULL_COMPONENT},
                image=s.image,
                placement=placement,
                service_account=account,
                start_timeout_minutes=s.workload.start_timeout_minutes,
                after=after,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        return (pre_pull.daemon_set,)

    def _stack_outputs(
        self, s: Settings, kube_target: tuple[str, ...], secret_target: bool
    ) -> dict[str, object]:
        outputs: dict[str, object] = {
            **stack_outputs(s, OPENSHIFT_CLI, kube_target),
            **run_outputs(s, self.workload),
        }
        if secret_target:
            for key in set(COMMAND_OUTPUTS) & set(outputs):
                outputs[key] = pulumi.Output.secret(outputs[key])
        return outputs
