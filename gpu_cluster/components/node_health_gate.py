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
from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs

from gpu_cluster.components.script_controller import ScriptController, run_script
from gpu_cluster.facts.kubernetes import COMPONENT_LABEL
from gpu_cluster.facts.kueue import KUEUE_API
from gpu_cluster.plan.health_gate import HEALTH_GATE_SCRIPT, HealthGatePlan
from gpu_cluster.plan.scan_exceptions import script_controller_exceptions, skip_annotations


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
        kueue_group = KUEUE_API.split("/")[0]
        controller = ScriptController(
            name=plan.name,
            namespace=plan.namespace,
            labels={**labels, COMPONENT_LABEL: "node-health-gate"},
            container="gate",
            script=HEALTH_GATE_SCRIPT,
            env=plan.env(),
            image=plan.image,
            run_as_user=plan.run_as_user,
            rules=[
                PolicyRuleArgs(api_groups=[kueue_group], resources=["workloads"], verbs=["list"]),
                PolicyRuleArgs(
                    api_groups=[kueue_group], resources=["workloads/status"], verbs=["patch"]
                ),
            ],
            cluster_rules=[
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
            annotations=skip_annotations(
                script_controller_exceptions(plan.image, plan.run_as_user)
            ),
        )
        self.deployment = run_script(self, name, controller, after)
        self.register_outputs({"deployment": self.deployment.metadata.name})
