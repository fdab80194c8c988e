"""The CloudMonitoringDashboard component: a GKE stack's dashboard in Cloud Monitoring
(monitoring.dashboard), plan/dashboard_forms.py's JSON, whose charts query Managed Service for
Prometheus."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp


@dataclass(frozen=True)
class CloudMonitoringDashboardArgs:
    """dashboard: the Monitoring API's `Dashboard` form."""

    project: str
    dashboard: dict[str, object]


class CloudMonitoringDashboard(pulumi.ComponentResource):
    dashboard: gcp.monitoring.Dashboard

    def __init__(
        self,
        name: str,
        args: CloudMonitoringDashboardArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-cluster:monitoring:CloudMonitoringDashboard", name, None, opts)
        self.dashboard = gcp.monitoring.Dashboard(
            f"{name}-dashboard",
            project=args.project,
            dashboard_json=json.dumps(args.dashboard),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"dashboard": self.dashboard.id})
