"""The JobSet workload kind: one run, queued by Kueue, whose indexed pods (one per GPU node)
start the launcher themselves and restart together when one fails."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.batch.v1 import (
    JobSpecArgs,
    PodFailurePolicyArgs,
    PodFailurePolicyOnExitCodesRequirementArgs,
    PodFailurePolicyRuleArgs,
)
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

from gpu_cluster.components.wire import wire_form
from gpu_cluster.components.workload.args import JobSetRun, TrainingWorkloadArgs
from gpu_cluster.components.workload.kind import (
    STATEFUL_SET_TYPE,
    Controller,
    PodRole,
    TrainingPods,
    WorkloadKind,
    switching_from,
)
from gpu_cluster.components.workload.run_template import run_template
from gpu_cluster.config.workload import REPLICATED_JOB
from gpu_cluster.facts.kueue import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOBSET_API,
    JOBSET_NAME_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    PODSET_LABEL,
    QUEUE_LABEL,
    REQUIRED_TOPOLOGY_ANNOTATION,
)
from gpu_cluster.plan.launch import CONFIG_ERROR_EXIT_CODES, TRAINING_CONTAINER
from gpu_cluster.plan.scan_exceptions import skip_annotations


def _run(a: TrainingWorkloadArgs) -> JobSetRun:
    assert a.run is not None, "the JobSet kind runs only a workload with a run"
    return a.run


class JobSetKind:
    def pod_role(self, a: TrainingWorkloadArgs) -> PodRole:
        run = _run(a)
        return PodRole(
            # The Job controller's index of the pod in its Indexed Job (kubernetes
            # pkg/controller/job/indexed_job_utils.go addCompletionIndexAnnotation).
            node_rank_field=f"metadata.annotations['{JOB_COMPLETION_INDEX_ANNOTATION}']",
            command=run.command,
            # A Job's pods restart through the Job (and the JobSet), never in place: a pod
            # failure policy needs Never (kubernetes batch/v1 JobSpec podFailurePolicy).
            restart_policy="Never",
            annotations=(
                {REQUIRED_TOPOLOGY_ANNOTATION: run.required_level} if run.required_level else {}
            ),
            # What the admission gate (scripts/admitted.sh) reads: the label Kueue puts on the
            # pods of a run it admitted, empty when there is none, and the pod's namespace.
            field_env={
                "KUEUE_PODSET": f"metadata.labels['{PODSET_LABEL}']",
                "POD_NAMESPACE": "metadata.namespace",
                # The run's metrics' labels (scripts/run_metrics.py): a submitted run's own
                # name, and the restarts before this pod.
                **(
                    {
                        "RUN_NAME": f"metadata.labels['{JOBSET_NAME_LABEL}']",
                        "RUN_RESTART_ATTEMPT": f"metadata.labels['{JOBSET_RESTART_ATTEMPT_LABEL}']",
                    }
                    if a.metrics_port is not None
                    else {}
                ),
            },
        )

    def controller(self, pods: TrainingPods) -> Controller:
        a, run = pods.args, _run(pods.args)
        job = JobSpecArgs(
            parallelism=a.replicas,
            completions=a.replicas,
            completion_mode="Indexed",
            # One failed pod fails the Job at once, and the JobSet restarts the whole set:
            # rendezvous needs every rank, so a lone replacement pod would only wait.
            backoff_limit=0,
            pod_failure_policy=PodFailurePolicyArgs(
                rules=[
                    PodFailurePolicyRuleArgs(
                        action="FailJob",
                        on_exit_codes=PodFailurePolicyOnExitCodesRequirementArgs(
                            container_name=TRAINING_CONTAINER,
                            operator="In",
                            values=list(CONFIG_ERROR_EXIT_CODES),
                        ),
                    )
                ]
            ),
            template=pods.template,
        )
        spec: dict[str, object] = {
            "failurePolicy": {
                "maxRestarts": run.max_restarts,
                **_restart_strategy(run.restart_strategy),
                # A Job failed by its pod failure policy (a configuration error) fails the
                # run without restarts (jobset api/jobset/v1alpha2 FailurePolicyRule).
                "rules": [
                    {
                        "name": "ConfigurationError",
                        "action": "FailJobSet",
                        "onJobFailureReasons": ["PodFailurePolicy"],
                    }
                ],
            },
            "network": {
                # Pods get <jobset>-<job>-<index>-<pod> hostnames in the stack's headless
                # Service, which the JobSet controller then uses instead of making one.
                "enableDNSHostnames": True,
                "subdomain": pods.service.metadata.name,
            },
            "replicatedJobs": [{"name": REPLICATED_JOB, "replicas": 1, "template": {"spec": job}}],
        }
        job_set = k8s.apiextensions.CustomResource(
            pods.resource_name,
            api_version=JOBSET_API,
            kind="JobSet",
            metadata=ObjectMetaArgs(
                name=a.name,
                namespace=a.namespace,
                labels={**a.labels, QUEUE_LABEL: run.queue_name},
                annotations={**skip_annotations(a.scan_exceptions), **run.annotations},
            ),
            spec=spec,
            opts=pulumi.ResourceOptions.merge(
                switching_from(STATEFUL_SET_TYPE),
                pulumi.ResourceOptions(
                    parent=pods.parent,
                    depends_on=list(pods.depends_on),
                    # A JobSet's jobs cannot change once created (its webhook refuses): an edit
                    # replaces the run, the old one deleted first (same name).
                    replace_on_changes=["spec"],
                ),
            ),
        )
        # The template copies the spec the JobSet is given, not the JobSet as created: so it
        # waits only for the objects the spec names (its Service, scripts, claims), not for the
        # run's create, nor for what the run waits on (the GPU pool, the queue's controllers).
        run_template(pods.resource_name, a, run, wire_form(spec), pods.parent)
        return Controller(job_set, pulumi.Output.from_input(a.name))


JOB_SET: WorkloadKind = JobSetKind()


# JobSet's own default (sigs.k8s.io/jobset v0.12.0 api/jobset/v1alpha2/jobset_types.go,
# FailurePolicy.RestartStrategy +kubebuilder:default=Recreate).
JOBSET_DEFAULT_RESTART_STRATEGY = "Recreate"


def _restart_strategy(strategy: str) -> dict[str, str]:
    """failurePolicy.restartStrategy, set only when it is not JobSet's default: every change to a
    JobSet's spec replaces it (its running training with it), and a stack deployed before
    workload.restartStrategy existed must keep its run on upgrade."""
    return {} if strategy == JOBSET_DEFAULT_RESTART_STRATEGY else {"restartStrategy": strategy}
