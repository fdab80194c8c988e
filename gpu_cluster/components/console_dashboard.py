"""The ConsoleDashboard component: a stack's dashboard in OpenShift's console (Observe >
Dashboards, and the project's own view), a ConfigMap holding plan/dashboard_forms.py's JSON in
the namespace the console reads dashboards from (monitoring.dashboard)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

from gpu_cluster.facts.dashboards import (
    CONSOLE_DASHBOARD_LABEL,
    CONSOLE_DASHBOARD_NAMESPACE,
    CONSOLE_PROJECT_DASHBOARD_LABEL,
)


@dataclass(frozen=True)
class ConsoleDashboardArgs:
    """name: the ConfigMap's, unique on the cluster (its namespace is shared by every stack and
    OpenShift's own dashboards). dashboard: the console's JSON form."""

    name: str
    labels: dict[str, str]
    dashboard: dict[str, object]


class ConsoleDashboard(pulumi.ComponentResource):
    config_map: k8s.core.v1.ConfigMap

    def __init__(
        self, name: str, args: ConsoleDashboardArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:monitoring:ConsoleDashboard", name, None, opts)
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-dashboard",
            metadata=ObjectMetaArgs(
                name=args.name,
                namespace=CONSOLE_DASHBOARD_NAMESPACE,
                labels={
                    **args.labels,
                    CONSOLE_DASHBOARD_LABEL: "true",
                    CONSOLE_PROJECT_DASHBOARD_LABEL: "true",
                },
            ),
            # The console reads the ConfigMap's one value, whatever its key.
            data={f"{args.name}.json": json.dumps(args.dashboard, indent=2)},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"configMap": self.config_map.metadata.name})
