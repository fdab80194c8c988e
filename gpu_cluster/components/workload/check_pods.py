"""The node health runner's NCCL check pods: the training pods (image, NICs, GPUDirect devices
and sidecars, NCCL settings, memlock, placement) in all but the user's data, running the fabric
check on two nodes at once. Written from the same pod template as the training pods, so the
check measures the fabric a run gets."""

from __future__ import annotations

import dataclasses

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

from gpu_cluster.components.workload.args import TrainingWorkloadArgs
from gpu_cluster.components.workload.kind import PodRole
from gpu_cluster.components.workload.pod_template import pod_template, scratch_volumes
from gpu_cluster.components.workload.shared_objects import (
    headless_service,
    peers_only_policy,
    scripts_config_map,
)
from gpu_cluster.facts.kueue import JOB_COMPLETION_INDEX_ANNOTATION
from gpu_cluster.plan.health_runner import PAIR, PairCheckPlan
from gpu_cluster.plan.scan_exceptions import skip_annotations
from gpu_cluster.plan.shipped import SCRIPTS_PATH
from gpu_cluster.plan.verify import CHECK_MODULES, CHECK_SCRIPT, FABRIC_GATE


def pair_check_pods(
    name: str,
    training: TrainingWorkloadArgs,
    plan: PairCheckPlan,
    labels: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> k8s.core.v1.PodTemplate:
    """The check's objects, named `name`-...: its scripts, its headless Service, the NetworkPolicy
    that lets only its pods reach each other, and its PodTemplate (returned), whose pods carry
    `labels` (the runner adds the rest of each Job's)."""
    a = dataclasses.replace(
        training,
        name=plan.template,
        service_name=plan.template,
        labels=labels,
        replicas=PAIR,
        scripts={
            **training.scripts,
            **{
                name: (SCRIPTS_PATH / name).read_text()
                for name in (FABRIC_GATE, CHECK_SCRIPT, *CHECK_MODULES)
            },
        },
        env=plan.env,
        placement=dataclasses.replace(training.placement, tolerations=plan.tolerations),
        # The training pods' code sync, secrets and data are the run's, not the check's.
        sidecars=(),
        sidecar_volumes=(),
        sidecar_mounts=(),
        secret_env_keys=(),
        secret_env=None,
        code_sync_source=None,
        data_volumes=(),
        data_mounts=(),
        data_annotations={},
        run=None,
    )
    scripts = scripts_config_map(name, a, opts)
    headless_service(name, a, opts)
    peers_only_policy(name, a, opts)
    role = PodRole(
        # The Job controller's index of the pod in its Indexed Job (kubernetes
        # pkg/controller/job/indexed_job_utils.go addCompletionIndexAnnotation).
        node_rank_field=f"metadata.annotations['{JOB_COMPLETION_INDEX_ANNOTATION}']",
        command=plan.command,
        restart_policy="Never",
        subdomain=plan.template,
        active_deadline_seconds=plan.deadline_seconds,
    )
    return k8s.core.v1.PodTemplate(
        name,
        metadata=ObjectMetaArgs(
            name=plan.template,
            namespace=a.namespace,
            labels=labels,
            annotations=skip_annotations(a.scan_exceptions),
        ),
        template=pod_template(a, scratch_volumes(a), [], role),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[scripts])),
    )
