"""The NodeHealthGate component: the controller that answers the queue's node-health
AdmissionCheck (workload.queue.healthGate).

scripts/node_health_gate.py in one pod, in the stack's namespace, with what it reads and writes
and nothing more: its namespace's Workloads (and their status), the Nodes (their health labels),
and its own AdmissionCheck (its Active condition), by name. The AdmissionCheck itself is the
queue's (TrainingQueue)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.apps.v1 import DeploymentSpecArgs, DeploymentStrategyArgs
from pulumi_kubernetes.core.v1 import (
    ConfigMapVolumeSourceArgs,
    ContainerArgs,
    EnvVarArgs,
    PodSecurityContextArgs,
    PodSpecArgs,
    PodTemplateSpecArgs,
    ResourceRequirementsArgs,
    SeccompProfileArgs,
    VolumeArgs,
    VolumeMountArgs,
)
from pulumi_kubernetes.meta.v1 import LabelSelectorArgs, ObjectMetaArgs
from pulumi_kubernetes.networking.v1 import NetworkPolicySpecArgs
from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs, RoleRefArgs, SubjectArgs

from gpu_cluster.components.workload.pod_args import security_context
from gpu_cluster.facts.kueue import KUEUE_API
from gpu_cluster.plan.health_gate import HEALTH_GATE_SCRIPT, HealthGatePlan
from gpu_cluster.plan.netmodes import SCRIPTS_DIR
from gpu_cluster.plan.scan_exceptions import health_gate_exceptions, skip_annotations
from gpu_cluster.plan.security import REQUIRED_SCC_ANNOTATION, RESTRICTED_SCC
from gpu_cluster.plan.shipped import SCRIPTS_PATH

RBAC_GROUP = "rbac.authorization.k8s.io"
# One pass of the script needs a few MiB; Python's own start is most of it.
RESOURCES = {"cpu": "10m", "memory": "64Mi"}
MEMORY_LIMIT = {"memory": "128Mi"}


class NodeHealthGate(pulumi.ComponentResource):
    """The controller of `plan`'s AdmissionCheck, after `after` (the namespace, the queue);
    `deployment` is what a run waits for."""

    deployment: k8s.apps.v1.Deployment

    def __init__(
        self,
        name: str,
        plan: HealthGatePlan,
        labels: dict[str, str],
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-cluster:queue:NodeHealthGate", name, None, opts)
        own = {**labels, "app.kubernetes.io/component": "node-health-gate"}
        child = pulumi.ResourceOptions(parent=self, depends_on=list(after))
        meta = ObjectMetaArgs(name=plan.name, namespace=plan.namespace, labels=own)
        # Cluster-scoped names: the same stack name in two namespaces must not share them.
        cluster_name = f"{plan.namespace}-{plan.name}"
        cluster_meta = ObjectMetaArgs(name=cluster_name, labels=own)
        account = k8s.core.v1.ServiceAccount(f"{name}-account", metadata=meta, opts=child)
        subject = SubjectArgs(kind="ServiceAccount", name=plan.name, namespace=plan.namespace)
        kueue_group = KUEUE_API.split("/")[0]
        role = k8s.rbac.v1.Role(
            f"{name}-role",
            metadata=meta,
            rules=[
                PolicyRuleArgs(api_groups=[kueue_group], resources=["workloads"], verbs=["list"]),
                PolicyRuleArgs(
                    api_groups=[kueue_group], resources=["workloads/status"], verbs=["patch"]
                ),
            ],
            opts=child,
        )
        cluster_role = k8s.rbac.v1.ClusterRole(
            f"{name}-cluster-role",
            metadata=cluster_meta,
            rules=[
                PolicyRuleArgs(api_groups=[""], resources=["nodes"], verbs=["get"]),
                PolicyRuleArgs(
                    api_groups=[kueue_group],
                    resources=["admissionchecks"],
                    resource_names=[plan.check],
                    verbs=["get"],
                ),
                PolicyRuleArgs(
                    api_groups=[kueue_group],
                    resources=["admissionchecks/status"],
                    resource_names=[plan.check],
                    verbs=["patch"],
                ),
            ],
            opts=pulumi.ResourceOptions(parent=self),
        )
        bindings = [
            k8s.rbac.v1.RoleBinding(
                f"{name}-binding",
                metadata=meta,
                role_ref=RoleRefArgs(api_group=RBAC_GROUP, kind="Role", name=plan.name),
                subjects=[subject],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[role, account]),
            ),
            k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-cluster-binding",
                metadata=cluster_meta,
                role_ref=RoleRefArgs(api_group=RBAC_GROUP, kind="ClusterRole", name=cluster_name),
                subjects=[subject],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster_role, account]),
            ),
        ]
        script = k8s.core.v1.ConfigMap(
            f"{name}-script",
            metadata=ObjectMetaArgs(
                name=f"{plan.name}-script", namespace=plan.namespace, labels=own
            ),
            data={HEALTH_GATE_SCRIPT: (SCRIPTS_PATH / HEALTH_GATE_SCRIPT).read_text()},
            opts=child,
        )
        container = ContainerArgs(
            name="gate",
            image=plan.image,
            # A small image by tag: a restart picks up the tag's newest patch release.
            image_pull_policy="Always",
            command=["python3", f"{SCRIPTS_DIR}/{HEALTH_GATE_SCRIPT}"],
            env=[
                EnvVarArgs(name=k, value=v)
                for k, v in {**plan.env(), "PYTHONDONTWRITEBYTECODE": "1"}.items()
            ],
            resources=ResourceRequirementsArgs(
                requests=RESOURCES, limits={**RESOURCES, **MEMORY_LIMIT}
            ),
            security_context=security_context((), read_only_root=True),
            volume_mounts=[VolumeMountArgs(name="script", mount_path=SCRIPTS_DIR, read_only=True)],
        )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=ObjectMetaArgs(
                name=plan.name,
                namespace=plan.namespace,
                labels=own,
                annotations=skip_annotations(health_gate_exceptions(plan)),
            ),
            spec=DeploymentSpecArgs(
                replicas=1,
                selector=LabelSelectorArgs(match_labels=own),
                # One answer per run at a time: the old pod goes before the new one starts.
                strategy=DeploymentStrategyArgs(type="Recreate"),
                template=PodTemplateSpecArgs(
                    metadata=ObjectMetaArgs(
                        labels=own, annotations={REQUIRED_SCC_ANNOTATION: RESTRICTED_SCC}
                    ),
                    spec=PodSpecArgs(
                        service_account_name=plan.name,
                        security_context=PodSecurityContextArgs(
                            run_as_non_root=True,
                            run_as_user=plan.run_as_user,
                            seccomp_profile=SeccompProfileArgs(type="RuntimeDefault"),
                        ),
                        containers=[container],
                        volumes=[
                            VolumeArgs(
                                name="script",
                                config_map=ConfigMapVolumeSourceArgs(name=f"{plan.name}-script"),
                            )
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[script, *bindings, *after]),
        )
        # Nobody calls the gate; it calls the API server, whose address the program does not
        # know (GKE's control plane is outside the cluster network): egress stays open.
        k8s.networking.v1.NetworkPolicy(
            f"{name}-no-ingress",
            metadata=ObjectMetaArgs(
                name=f"{plan.name}-no-ingress", namespace=plan.namespace, labels=own
            ),
            spec=NetworkPolicySpecArgs(
                pod_selector=LabelSelectorArgs(match_labels=own), policy_types=["Ingress"]
            ),
            opts=child,
        )
        self.register_outputs({"deployment": self.deployment.metadata.name})
