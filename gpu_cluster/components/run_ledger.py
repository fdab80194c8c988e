"""The RunLedgerExporter component: scripts/run_ledger.py in one pod of the stack's namespace,
serving every run's goodput ledger for the platform's Prometheus (plan/run_ledger.py). It only
reads, in the namespace: the runs, Kueue's Workloads, the pods and their logs, the events."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs

from gpu_cluster.components.script_controller import ScriptController, run_script
from gpu_cluster.facts.kubernetes import COMPONENT_LABEL
from gpu_cluster.facts.kueue import JOBSET_API, KUEUE_API
from gpu_cluster.plan.run_ledger import (
    RUN_LEDGER_LIMITS,
    RUN_LEDGER_METRICS_PORT,
    RUN_LEDGER_MODULES,
    RUN_LEDGER_PACKAGE_MODULES,
    RUN_LEDGER_REQUESTS,
    RUN_LEDGER_SCRIPT,
    RunLedgerPlan,
)
from gpu_cluster.plan.scan_exceptions import script_controller_exceptions, skip_annotations


class RunLedgerExporter(pulumi.ComponentResource):
    """`plan`'s exporter, labelled `labels`, after `after` (the namespace)."""

    deployment: k8s.apps.v1.Deployment

    def __init__(
        self,
        name: str,
        plan: RunLedgerPlan,
        labels: dict[str, str],
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-cluster:monitoring:RunLedgerExporter", name, None, opts)
        reads = ["get", "list"]
        jobsets, kueue = JOBSET_API.split("/")[0], KUEUE_API.split("/")[0]
        controller = ScriptController(
            name=plan.name,
            namespace=plan.namespace,
            labels={**labels, COMPONENT_LABEL: "run-ledger"},
            container="ledger",
            script=RUN_LEDGER_SCRIPT,
            modules=RUN_LEDGER_MODULES,
            package_modules=RUN_LEDGER_PACKAGE_MODULES,
            env=plan.env(),
            image=plan.image,
            run_as_user=plan.run_as_user,
            rules=[
                PolicyRuleArgs(api_groups=[jobsets], resources=["jobsets"], verbs=reads),
                PolicyRuleArgs(api_groups=[kueue], resources=["workloads"], verbs=reads),
                PolicyRuleArgs(api_groups=[""], resources=["pods", "events"], verbs=reads),
                PolicyRuleArgs(api_groups=[""], resources=["pods/log"], verbs=["get"]),
            ],
            cluster_rules=[],
            annotations=skip_annotations(
                script_controller_exceptions(plan.image, plan.run_as_user)
            ),
            metrics_port=RUN_LEDGER_METRICS_PORT,
            scrape=plan.scrape,
            requests=tuple(RUN_LEDGER_REQUESTS.items()),
            limits=tuple(RUN_LEDGER_LIMITS.items()),
        )
        self.deployment = run_script(self, name, controller, after)
        self.register_outputs({"deployment": self.deployment.metadata.name})
