"""A JobSet stack's run template and its submitters: the ConfigMap `gpu-cluster run submit`
fills in (plan.run_template), and the Role (bound to workload.runs.submitters) that lets a
person submit, watch and stop runs in the namespace without the stack."""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs
from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs, RoleRefArgs, SubjectArgs

from gpu_cluster.components.workload.args import JobSetRun, TrainingWorkloadArgs
from gpu_cluster.config.sections.runs import RunSubmitters
from gpu_cluster.facts.kueue import QUEUE_LABEL
from gpu_cluster.plan.run_template import (
    JOB_SET_KEY,
    PARAMS_KEY,
    run_params,
    submitter_role_name,
    submitter_rules,
    template_job_set,
    template_name,
)

RBAC_GROUP = "rbac.authorization.k8s.io"


def _subjects(submitters: RunSubmitters, namespace: str) -> list[SubjectArgs]:
    return [
        *(SubjectArgs(kind="Group", api_group=RBAC_GROUP, name=g) for g in submitters.groups),
        *(SubjectArgs(kind="User", api_group=RBAC_GROUP, name=u) for u in submitters.users),
        *(
            SubjectArgs(kind="ServiceAccount", name=sa, namespace=namespace)
            for sa in submitters.service_accounts
        ),
    ]


def run_template(
    name: str,
    a: TrainingWorkloadArgs,
    run: JobSetRun,
    spec: pulumi.Output[object],
    parent: pulumi.Resource,
) -> None:
    """The template ConfigMap of the stack's run (whose JobSet `spec`, in manifest form, it
    copies), the submitter Role and, when the config names submitters, its
    RoleBinding; children of `parent`."""
    opts = pulumi.ResourceOptions(parent=parent)
    params = run_params(
        run.command,
        run.user_command,
        run.max_nodes,
        a.gpus_per_node,
        run.checkpoint_root,
        run.priority_classes,
    )
    labels = {**a.labels, QUEUE_LABEL: run.queue_name}
    template = spec.apply(
        lambda s: json.dumps(template_job_set(labels, run.annotations, s), sort_keys=True)
    )
    k8s.core.v1.ConfigMap(
        f"{name}-run-template",
        metadata=ObjectMetaArgs(name=template_name(a.name), namespace=a.namespace, labels=a.labels),
        data={JOB_SET_KEY: template, PARAMS_KEY: params.to_json()},
        opts=opts,
    )
    role = k8s.rbac.v1.Role(
        f"{name}-run-submitter",
        metadata=ObjectMetaArgs(
            name=submitter_role_name(a.name), namespace=a.namespace, labels=a.labels
        ),
        rules=[
            PolicyRuleArgs(
                api_groups=list(r.api_groups),
                resources=list(r.resources),
                verbs=list(r.verbs),
                resource_names=list(r.resource_names) or None,
            )
            for r in submitter_rules(a.name)
        ],
        opts=opts,
    )
    subjects = _subjects(run.submitters, a.namespace)
    if subjects:
        k8s.rbac.v1.RoleBinding(
            f"{name}-run-submitter",
            metadata=ObjectMetaArgs(
                name=submitter_role_name(a.name), namespace=a.namespace, labels=a.labels
            ),
            role_ref=RoleRefArgs(api_group=RBAC_GROUP, kind="Role", name=role.metadata.name),
            subjects=subjects,
            opts=opts,
        )
