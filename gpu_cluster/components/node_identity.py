"""The GKE nodes' own Google identity: a dedicated service account with only the roles nodes
need, instead of the project's default Compute Engine account (Editor on the project)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from gpu_cluster.plan.gke_identity import NODE_ROLES, node_account_email, node_account_id


@dataclass(frozen=True)
class NodeIdentityArgs:
    """project: where the account lives and its roles apply. cluster_name: the account is
    <cluster_name>-nodes (plan.gke_identity.node_account_id)."""

    project: str
    cluster_name: str


class NodeIdentity(pulumi.ComponentResource):
    """The account and one project IAM binding per role. `email` is known at preview; node
    pools that use it wait for `ready` (the account and its roles) before their nodes boot."""

    email: str
    ready: list[pulumi.Resource]

    def __init__(
        self, name: str, args: NodeIdentityArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:node_identity:NodeIdentity", name, None, opts)
        a = args
        account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            account_id=node_account_id(a.cluster_name),
            project=a.project,
            display_name=f"GKE nodes of {a.cluster_name}",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.email = node_account_email(a.cluster_name, a.project)
        member = f"serviceAccount:{self.email}"
        self.ready = [account]
        for role in NODE_ROLES:
            self.ready.append(
                gcp.projects.IAMMember(
                    f"{name}-nodes-{role.removeprefix('roles/').replace('.', '-').lower()}",
                    project=a.project,
                    role=role,
                    member=member,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[account]),
                )
            )
        self.register_outputs({"email": self.email})
