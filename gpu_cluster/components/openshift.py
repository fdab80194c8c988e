"""OpenShift platform: namespace, ServiceAccount, SCC + RBAC, Multus NADs and the workload."""

from __future__ import annotations

import dataclasses

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs
from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs, RoleRefArgs, SubjectArgs

from gpu_cluster.components.k8s_objects import ManifestResource
from gpu_cluster.components.namespace import adopted, managed_namespace
from gpu_cluster.components.workload import TrainingWorkload, labels
from gpu_cluster.config.settings import Settings
from gpu_cluster.plan.netmodes import network_attachment, pod_networking
from gpu_cluster.plan.outputs import stack_outputs
from gpu_cluster.plan.podspec import NodeRequirement, PodPlacement
from gpu_cluster.plan.security import (
    REQUIRED_SCC_ANNOTATION,
    memlock_disruption,
    memlock_machine_config,
    scc_manifest,
)


def openshift_placement(s: Settings) -> PodPlacement:
    """GPU nodes (by the GPU operator's label); only the listed ones when the stack names any."""
    requirements = [NodeRequirement(s.openshift.gpu_node_label, "In", ("true",))]
    if s.openshift.node_names:
        requirements.append(
            NodeRequirement("kubernetes.io/hostname", "In", tuple(s.openshift.node_names))
        )
    return PodPlacement(node_requirements=tuple(requirements))


class OpenShiftPlatform(pulumi.ComponentResource):
    """Everything one OpenShift training cluster needs, in the stack's namespace."""

    workload: TrainingWorkload
    outputs: dict[str, object]

    def __init__(
        self,
        name: str,
        settings: Settings,
        secret_env: pulumi.Output[dict[str, str]] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-cluster:openshift:OpenShiftPlatform", name, None, opts)
        s = settings
        meta_labels = labels(s)
        depends: list[pulumi.Resource] = []
        namespace = managed_namespace(f"{name}-namespace", s, pulumi.ResourceOptions(parent=self))
        if namespace is not None:
            depends.append(namespace)
        child = pulumi.ResourceOptions(parent=self, depends_on=depends)
        account = k8s.core.v1.ServiceAccount(
            f"{name}-training",
            metadata=ObjectMetaArgs(
                name=f"{s.name}-training", namespace=s.namespace, labels=meta_labels
            ),
            automount_service_account_token=False,
            opts=child,
        )

        networking = pod_networking(s, f"{s.name}-scripts")
        if networking.capabilities:
            # restricted-v2 allows adding only NET_BIND_SERVICE, so the mode's capabilities
            # (and, for a root training container, runAsUser RunAsAny) get their own SCC,
            # usable by the training ServiceAccount only.
            scc_name = f"{s.namespace}-{s.name}-training"
            scc = ManifestResource(
                f"{name}-scc",
                scc_manifest(
                    scc_name, networking.capabilities, any_user=networking.training_runs_as_root
                ),
                child,
            )
            role = k8s.rbac.v1.Role(
                f"{name}-use-scc",
                metadata=ObjectMetaArgs(
                    name=f"{s.name}-use-scc", namespace=s.namespace, labels=meta_labels
                ),
                rules=[
                    PolicyRuleArgs(
                        api_groups=["security.openshift.io"],
                        resources=["securitycontextconstraints"],
                        resource_names=[scc_name],
                        verbs=["use"],
                    )
                ],
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[scc])),
            )
            binding = k8s.rbac.v1.RoleBinding(
                f"{name}-use-scc",
                metadata=ObjectMetaArgs(
                    name=f"{s.name}-use-scc", namespace=s.namespace, labels=meta_labels
                ),
                role_ref=RoleRefArgs(
                    api_group="rbac.authorization.k8s.io", kind="Role", name=role.metadata.name
                ),
                subjects=[
                    SubjectArgs(
                        kind="ServiceAccount", name=account.metadata.name, namespace=s.namespace
                    )
                ],
                opts=child,
            )
            depends = [*depends, binding]
            networking = dataclasses.replace(
                networking,
                annotations={**networking.annotations, REQUIRED_SCC_ANNOTATION: scc_name},
            )

        if s.network_mode == "rdma":
            assert s.rdma is not None
            if s.rdma.memlock == "machineconfig":
                pulumi.log.warn(
                    "rdma.memlock is 'machineconfig': the MachineConfig "
                    f"{memlock_disruption(s.rdma.machine_config_pool)}"
                )
                depends.append(
                    ManifestResource(
                        f"{name}-memlock",
                        memlock_machine_config(s.rdma.machine_config_pool),
                        pulumi.ResourceOptions(parent=self),
                    )
                )
            if s.rdma.network_attachments != "reference":
                adopt = s.rdma.network_attachments == "adopt"
                for nic in s.rdma.nics:
                    depends.append(
                        ManifestResource(
                            f"{name}-nad-{nic.network}",
                            network_attachment(nic, s.rdma, s.namespace),
                            pulumi.ResourceOptions.merge(child, adopted(s.namespace, nic.network))
                            if adopt
                            else child,
                        )
                    )

        self.workload = TrainingWorkload(
            f"{name}-workload",
            s,
            networking,
            openshift_placement(s),
            account.metadata.name,
            secret_env,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
        )
        self.outputs: dict[str, object] = stack_outputs(s, cli="oc")
        self.register_outputs({"namespace": s.namespace})
