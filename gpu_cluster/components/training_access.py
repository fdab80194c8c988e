"""Who the training pods run as: their ServiceAccount and, when the network mode needs
capabilities beyond restricted-v2, an SCC of their own with the RBAC that grants it to that
account only (OpenShift), plus the memlock MachineConfig where the stack picks that strategy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs
from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs, RoleRefArgs, SubjectArgs

from gpu_cluster.components.k8s_objects import ManifestResource
from gpu_cluster.components.namespace import adopted, taken_over
from gpu_cluster.config.derived import training_account_name
from gpu_cluster.plan.security import (
    memlock_disruption,
    memlock_machine_config,
    memlock_machine_config_name,
    scc_manifest,
)


@dataclass(frozen=True)
class SccGrant:
    """An SCC named `name`: restricted-v2 plus `capabilities` and, with `any_user`, runAsUser
    RunAsAny (gpu_cluster.plan.security.scc_manifest)."""

    name: str
    capabilities: tuple[str, ...]
    any_user: bool = False


@dataclass(frozen=True)
class MemlockMachineConfig:
    """The memlock MachineConfig of MachineConfigPool `pool` (one per pool, shared by every
    stack on it; gpu_cluster.plan.security.memlock_machine_config): `create` it or `adopt` the
    one that exists, and annotate it as managed by `owner`. Kept on `pulumi destroy` either way:
    deleting it reboots the pool under every other stack that relies on it."""

    pool: str
    owner: str
    mode: Literal["create", "adopt"] = "create"


@dataclass(frozen=True)
class TrainingAccessArgs:
    """prefix: Kubernetes names <prefix>-training (the ServiceAccount) and <prefix>-use-scc
    (Role, RoleBinding). namespace, labels: of those objects. scc: the SCC to create and grant,
    or None (restricted-v2 or the platform's default suffices). memlock: the memlock
    MachineConfig to manage (applying it reboots the pool's nodes), or None. after: what the
    namespaced objects wait for (the namespace)."""

    prefix: str
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)
    scc: SccGrant | None = None
    memlock: MemlockMachineConfig | None = None
    after: Sequence[pulumi.Resource] = ()


class TrainingAccess(pulumi.ComponentResource):
    """The training ServiceAccount and what it may use; `ready` lists what pods wait for."""

    service_account_name: pulumi.Output[str]
    ready: list[pulumi.Resource]

    def __init__(
        self, name: str, args: TrainingAccessArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:training_access:TrainingAccess", name, None, opts)
        a = args
        child = pulumi.ResourceOptions(parent=self, depends_on=list(a.after))
        account = k8s.core.v1.ServiceAccount(
            f"{name}-training",
            metadata=ObjectMetaArgs(
                name=training_account_name(a.prefix), namespace=a.namespace, labels=a.labels
            ),
            automount_service_account_token=False,
            opts=child,
        )
        self.service_account_name = account.metadata.name
        self.ready = []
        if a.scc is not None:
            self.ready.append(self._grant(name, a, a.scc, account, child))
        if a.memlock is not None:
            self.ready.append(self._memlock(name, a.memlock))
        self.register_outputs({"serviceAccountName": self.service_account_name})

    def _memlock(self, name: str, m: MemlockMachineConfig) -> ManifestResource:
        pulumi.log.warn(
            f"rdma.memlock is 'machineconfig': the MachineConfig {memlock_disruption(m.pool)}"
        )
        # Cluster-wide and shared: never deleted by this stack (destroy, a strategy or pool
        # change), since that would reboot the pool under the other stacks on it.
        config = memlock_machine_config(m.pool, m.owner)
        keep = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        if m.mode == "adopt":
            # Its owner annotation becomes this stack's: a field its creator's apply owns.
            config = taken_over(config)
            adopt = adopted(None, memlock_machine_config_name(m.pool))
            keep = pulumi.ResourceOptions.merge(keep, adopt)
        return ManifestResource(f"{name}-memlock", config, keep)

    @staticmethod
    def _grant(
        name: str,
        a: TrainingAccessArgs,
        scc: SccGrant,
        account: k8s.core.v1.ServiceAccount,
        child: pulumi.ResourceOptions,
    ) -> k8s.rbac.v1.RoleBinding:
        """The SCC, and a Role + RoleBinding letting only the training account use it."""
        # Cluster-scoped: it waits for no namespace.
        created = ManifestResource(
            f"{name}-scc",
            scc_manifest(scc.name, scc.capabilities, any_user=scc.any_user),
            pulumi.ResourceOptions(parent=child.parent),
        )
        role = k8s.rbac.v1.Role(
            f"{name}-use-scc",
            metadata=ObjectMetaArgs(
                name=f"{a.prefix}-use-scc", namespace=a.namespace, labels=a.labels
            ),
            rules=[
                PolicyRuleArgs(
                    api_groups=["security.openshift.io"],
                    resources=["securitycontextconstraints"],
                    resource_names=[scc.name],
                    verbs=["use"],
                )
            ],
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[created])),
        )
        return k8s.rbac.v1.RoleBinding(
            f"{name}-use-scc",
            metadata=ObjectMetaArgs(
                name=f"{a.prefix}-use-scc", namespace=a.namespace, labels=a.labels
            ),
            role_ref=RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="Role", name=role.metadata.name
            ),
            subjects=[
                SubjectArgs(
                    kind="ServiceAccount", name=account.metadata.name, namespace=a.namespace
                )
            ],
            opts=child,
        )
