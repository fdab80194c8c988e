"""The NodeHealthRunner component: the stack's own health checks on its GPU nodes
(workload.queue.healthGate.runner), whose node labels the NodeHealthGate reads.

scripts/node_health_runner.py in one pod, in the stack's namespace: it lists the GPU nodes,
starts a Job from a check's PodTemplate on each node that is due (`gpu`: scripts/gpu-check.sh in
NVIDIA's DCGM image) or on two at once (`nccl`: the fabric check in pods like the training pods,
components/workload/check_pods.py), and writes each result on its nodes. Writing nodes is a
cluster-wide right that RBAC cannot narrow to some labels, so an admission policy lets the
runner's ServiceAccount change nothing on a node but its checks' labels and taints."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.admissionregistration.v1 import (
    MatchConditionArgs,
    MatchResourcesArgs,
    NamedRuleWithOperationsArgs,
    ValidatingAdmissionPolicyBindingSpecArgs,
    ValidatingAdmissionPolicySpecArgs,
    ValidationArgs,
    VariableArgs,
)
from pulumi_kubernetes.core.v1 import (
    ConfigMapVolumeSourceArgs,
    ContainerArgs,
    EmptyDirVolumeSourceArgs,
    EnvVarArgs,
    PodSecurityContextArgs,
    PodSpecArgs,
    PodTemplateSpecArgs,
    ResourceRequirementsArgs,
    SeccompProfileArgs,
    TolerationArgs,
    VolumeArgs,
    VolumeMountArgs,
)
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs
from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs

from gpu_cluster.components.script_controller import ScriptController, run_script
from gpu_cluster.components.workload.args import TrainingWorkloadArgs
from gpu_cluster.components.workload.check_pods import pair_check_pods
from gpu_cluster.components.workload.pod_args import security_context
from gpu_cluster.facts.health import GPU_CHECK, PAIR_CHECK, RESULT_LABEL, TAINT_KEY, TIME_LABEL
from gpu_cluster.facts.kubernetes import COMPONENT_LABEL, GPU_RESOURCE
from gpu_cluster.plan.health_runner import (
    CHECK_LABEL,
    GPU_CHECK_SCRIPT,
    HEALTH_RUNNER_MODULES,
    HEALTH_RUNNER_SCRIPT,
    RUNNER_METRICS_PORT,
    GpuCheckPlan,
    HealthRunnerPlan,
)
from gpu_cluster.plan.podspec import SCRIPTS_DIR
from gpu_cluster.plan.scan_exceptions import (
    gpu_check_exceptions,
    script_controller_exceptions,
    skip_annotations,
)
from gpu_cluster.plan.security import REQUIRED_SCC_ANNOTATION, RESTRICTED_SCC
from gpu_cluster.plan.shipped import SCRIPTS_PATH

# What DCGM needs beside the GPUs while it runs: its host engine and the tests' host side.
CHECK_RESOURCES = {"cpu": "1", "memory": "2Gi"}
CHECK_MEMORY_LIMIT = {"memory": "8Gi"}
CHECK_DIR = "/tmp"
# The component label of the check pods (and of the NCCL check's objects).
CHECK_COMPONENT = "node-health-check"


class NodeHealthRunner(pulumi.ComponentResource):
    """`plan`'s runner, after `after` (the namespace); its NCCL check's pods are `training`'s."""

    deployment: k8s.apps.v1.Deployment

    def __init__(
        self,
        name: str,
        plan: HealthRunnerPlan,
        training: TrainingWorkloadArgs,
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-cluster:queue:NodeHealthRunner", name, None, opts)
        labels = training.labels
        own = {**labels, COMPONENT_LABEL: "node-health-runner"}
        child = pulumi.ResourceOptions(parent=self, depends_on=list(after))
        templates: list[pulumi.Resource] = []
        if plan.gpu is not None:
            templates.append(_gpu_check(self, name, plan, plan.gpu, own, labels, after))
        if plan.nccl is not None:
            check_labels = {**labels, COMPONENT_LABEL: CHECK_COMPONENT, CHECK_LABEL: PAIR_CHECK}
            templates.append(
                pair_check_pods(f"{name}-nccl-check", training, plan.nccl, check_labels, child)
            )
        policy = _node_write_policy(self, name, plan, own)
        controller = ScriptController(
            name=plan.name,
            namespace=plan.namespace,
            labels=own,
            container="runner",
            script=HEALTH_RUNNER_SCRIPT,
            modules=HEALTH_RUNNER_MODULES,
            env=plan.env(),
            image=plan.image,
            run_as_user=plan.run_as_user,
            rules=[
                PolicyRuleArgs(
                    api_groups=["batch"], resources=["jobs"], verbs=["list", "create", "delete"]
                ),
                PolicyRuleArgs(
                    api_groups=[""],
                    resources=["podtemplates"],
                    resource_names=list(plan.templates.values()),
                    verbs=["get"],
                ),
                # A failed check's pod: its termination message says why.
                PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["list"]),
            ],
            cluster_rules=[
                PolicyRuleArgs(api_groups=[""], resources=["nodes"], verbs=["list", "patch"])
            ],
            annotations=skip_annotations(
                script_controller_exceptions(plan.image, plan.run_as_user)
            ),
            metrics_port=RUNNER_METRICS_PORT,
            scrape=plan.scrape,
        )
        # Never unconfined: the runner starts once the policy binds it.
        self.deployment = run_script(self, name, controller, after, [policy, *templates])
        self.register_outputs({"deployment": self.deployment.metadata.name})


def _gpu_check(
    parent: pulumi.Resource,
    name: str,
    plan: HealthRunnerPlan,
    check: GpuCheckPlan,
    own: dict[str, str],
    labels: dict[str, str],
    after: Sequence[pulumi.Resource],
) -> k8s.core.v1.PodTemplate:
    """The GPU check's script and PodTemplate (returned)."""
    check_script = k8s.core.v1.ConfigMap(
        f"{name}-check-script",
        metadata=ObjectMetaArgs(
            name=f"{check.template}-script", namespace=plan.namespace, labels=own
        ),
        data={GPU_CHECK_SCRIPT: (SCRIPTS_PATH / GPU_CHECK_SCRIPT).read_text()},
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(after)),
    )
    return k8s.core.v1.PodTemplate(
        f"{name}-check",
        metadata=ObjectMetaArgs(
            name=check.template,
            namespace=plan.namespace,
            labels=own,
            annotations=skip_annotations(gpu_check_exceptions(check.image, plan.run_as_user)),
        ),
        template=_gpu_check_pod(plan, check, {**labels, COMPONENT_LABEL: CHECK_COMPONENT}),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*after, check_script]),
    )


def _gpu_check_pod(
    plan: HealthRunnerPlan, check: GpuCheckPlan, labels: dict[str, str]
) -> PodTemplateSpecArgs:
    """The GPU check's pod: scripts/gpu-check.sh on the GPUs a training pod asks for, failed
    (so the node too) past the level's deadline; the runner pins each copy to a node."""
    limits = {**CHECK_RESOURCES, **CHECK_MEMORY_LIMIT, GPU_RESOURCE: str(check.gpus)}
    container = ContainerArgs(
        name="gpu-check",
        image=check.image,
        image_pull_policy="IfNotPresent",
        command=["bash", f"{SCRIPTS_DIR}/{GPU_CHECK_SCRIPT}"],
        env=[EnvVarArgs(name=k, value=v) for k, v in (*check.env, ("CHECK_DIR", CHECK_DIR))],
        resources=ResourceRequirementsArgs(
            requests={**CHECK_RESOURCES, GPU_RESOURCE: str(check.gpus)}, limits=limits
        ),
        # DCGM's diagnostics write their own logs where the image puts them (/var/log).
        security_context=security_context((), read_only_root=False),
        volume_mounts=[
            VolumeMountArgs(name="script", mount_path=SCRIPTS_DIR, read_only=True),
            VolumeMountArgs(name="work", mount_path=CHECK_DIR),
        ],
    )
    return PodTemplateSpecArgs(
        metadata=ObjectMetaArgs(
            labels={**labels, CHECK_LABEL: GPU_CHECK},
            annotations={REQUIRED_SCC_ANNOTATION: RESTRICTED_SCC},
        ),
        spec=PodSpecArgs(
            restart_policy="Never",
            active_deadline_seconds=check.deadline_seconds,
            automount_service_account_token=False,
            security_context=PodSecurityContextArgs(
                run_as_non_root=True,
                run_as_user=plan.run_as_user,
                seccomp_profile=SeccompProfileArgs(type="RuntimeDefault"),
            ),
            tolerations=[
                TolerationArgs(key=key, operator="Exists", effect=effect or None)
                for key, effect in check.tolerations
            ],
            containers=[container],
            volumes=[
                VolumeArgs(
                    name="script",
                    config_map=ConfigMapVolumeSourceArgs(name=f"{check.template}-script"),
                ),
                VolumeArgs(name="work", empty_dir=EmptyDirVolumeSourceArgs()),
            ],
        ),
    )


def _node_write_policy(
    parent: pulumi.Resource, name: str, plan: HealthRunnerPlan, labels: dict[str, str]
) -> k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding:
    """The admission policy (and its binding) that refuses the runner's ServiceAccount any
    change to a node but its checks' result and time labels and their taints."""
    opts = pulumi.ResourceOptions(parent=parent)
    checks = list(plan.templates)
    written = json.dumps([f.format(c) for c in checks for f in (RESULT_LABEL, TIME_LABEL)])
    taint = json.dumps([TAINT_KEY.format(c) for c in checks])
    policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        f"{name}-node-policy",
        metadata=ObjectMetaArgs(name=plan.policy, labels=labels),
        spec=ValidatingAdmissionPolicySpecArgs(
            failure_policy="Fail",
            match_constraints=MatchResourcesArgs(
                resource_rules=[
                    NamedRuleWithOperationsArgs(
                        api_groups=[""],
                        api_versions=["v1"],
                        operations=["UPDATE"],
                        resources=["nodes"],
                    )
                ]
            ),
            match_conditions=[
                MatchConditionArgs(
                    name="node-health-runner",
                    expression=f"request.userInfo.username == {json.dumps(plan.user)}",
                )
            ],
            variables=[
                VariableArgs(name="written", expression=written),
                VariableArgs(
                    name="labels",
                    expression="has(object.metadata.labels) ? object.metadata.labels : {}",
                ),
                VariableArgs(
                    name="oldLabels",
                    expression="has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}",
                ),
                VariableArgs(
                    name="taints",
                    expression="(has(object.spec.taints) ? object.spec.taints : [])"
                    f".filter(t, !(t.key in {taint}))",
                ),
                VariableArgs(
                    name="oldTaints",
                    expression="(has(oldObject.spec.taints) ? oldObject.spec.taints : [])"
                    f".filter(t, !(t.key in {taint}))",
                ),
            ],
            validations=[
                ValidationArgs(
                    expression="variables.labels.all(k, k in variables.written || "
                    "(k in variables.oldLabels && variables.oldLabels[k] == variables.labels[k]))"
                    " && variables.oldLabels.all(k, k in variables.written || "
                    "k in variables.labels)",
                    message=f"the node health runner may change only the labels {written}",
                ),
                ValidationArgs(
                    expression="variables.taints == variables.oldTaints",
                    message=f"the node health runner may change only the taints {taint}",
                ),
                ValidationArgs(
                    expression="(has(object.metadata.annotations) ? "
                    "object.metadata.annotations : {}) == "
                    "(has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {})"
                    " && (has(object.spec.unschedulable) && object.spec.unschedulable) == "
                    "(has(oldObject.spec.unschedulable) && oldObject.spec.unschedulable)",
                    message="the node health runner may not change a node's annotations or "
                    "whether it is cordoned",
                ),
            ],
        ),
        opts=opts,
    )
    return k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        f"{name}-node-policy-binding",
        metadata=ObjectMetaArgs(name=plan.policy, labels=labels),
        spec=ValidatingAdmissionPolicyBindingSpecArgs(
            policy_name=plan.policy, validation_actions=["Deny"]
        ),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[policy]),
    )
