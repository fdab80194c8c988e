"""The StatefulSet workload kind: one pod per GPU node, all started together, each with its
per-pod claims (storage.mode per-pod) through the set's claim templates."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import LabelSelectorArgs, ObjectMetaArgs

from gpu_cluster.components.workload.args import TrainingWorkloadArgs
from gpu_cluster.components.workload.claims import per_pod_claim_templates
from gpu_cluster.components.workload.kind import (
    JOB_SET_TYPE,
    Controller,
    PodRole,
    TrainingPods,
    WorkloadKind,
    switching_from,
)
from gpu_cluster.components.workload.pod_args import start_timeouts
from gpu_cluster.facts.kubernetes import INSTANCE_LABEL
from gpu_cluster.plan.claims import retention_annotations
from gpu_cluster.plan.launch import idle_training_command
from gpu_cluster.plan.scan_exceptions import skip_annotations

# Label the StatefulSet controller sets on every pod (beta in 1.28, GA in 1.32).
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
# Template fields a claim takes over once it exists: Pulumi grows the standalone claims in place,
# and an unchanged template keeps Kubernetes from replacing the StatefulSet (its
# volumeClaimTemplates are immutable; pulumi/pulumi-kubernetes provider/pkg/provider/diff.go
# forces a replacement on any change to them). Property paths: pulumi.com/docs/iac/concepts/
# miscellaneous/property-paths.
CLAIM_TEMPLATE_FIELDS_OWNED_BY_CLAIMS = (
    "spec.volumeClaimTemplates[*].spec.resources",
    "spec.volumeClaimTemplates[*].spec.storageClassName",
)


class StatefulSetKind:
    def pod_role(self, a: TrainingWorkloadArgs) -> PodRole:
        return PodRole(
            node_rank_field=f"metadata.labels['{POD_INDEX_LABEL}']",
            # Idle until a user starts the launcher on every pod; on SIGTERM, stop it there.
            command=idle_training_command(a.pod.termination_grace_seconds),
            # The run's metrics' label (scripts/run_metrics.py): the stack's one run.
            field_env=(
                {"RUN_NAME": f"metadata.labels['{INSTANCE_LABEL}']"}
                if a.metrics_port is not None
                else {}
            ),
        )

    def controller(self, pods: TrainingPods) -> Controller:
        a = pods.args
        per_pod = a.storage.mode == "per-pod"
        stateful_set = k8s.apps.v1.StatefulSet(
            pods.resource_name,
            metadata=ObjectMetaArgs(
                name=a.name,
                namespace=a.namespace,
                labels=a.labels,
                annotations={
                    **skip_annotations(a.scan_exceptions),
                    **retention_annotations(a.storage.retain_on_delete),
                },
            ),
            spec=k8s.apps.v1.StatefulSetSpecArgs(
                replicas=a.replicas,
                service_name=pods.service.metadata.name,
                # All pods start together: rendezvous needs every rank, not one after another.
                pod_management_policy="Parallel",
                selector=LabelSelectorArgs(match_labels=a.labels),
                template=pods.template,
                volume_claim_templates=per_pod_claim_templates(a),
                persistent_volume_claim_retention_policy=(
                    k8s.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicyArgs(
                        # Always Retain on delete: a replaced StatefulSet (a volume added or
                        # removed) must not take the claims with it. `pulumi destroy` deletes
                        # them itself when storage.retainOnDelete is false.
                        when_deleted="Retain",
                        when_scaled="Retain" if a.storage.retain_on_delete else "Delete",
                    )
                    if per_pod
                    else None
                ),
            ),
            opts=pulumi.ResourceOptions.merge(
                switching_from(JOB_SET_TYPE),
                pulumi.ResourceOptions(
                    parent=pods.parent,
                    # The claims exist before any pod asks for them.
                    depends_on=list(pods.depends_on),
                    ignore_changes=list(CLAIM_TEMPLATE_FIELDS_OWNED_BY_CLAIMS) if per_pod else None,
                    custom_timeouts=start_timeouts(a.start_timeout_minutes),
                ),
            ),
        )
        return Controller(stateful_set, stateful_set.metadata.name)


STATEFUL_SET: WorkloadKind = StatefulSetKind()
