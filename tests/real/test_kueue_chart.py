"""What the stack's scrape of the Kueue it installs (plan/kueue_metrics.py) names in Kueue's
chart, held to the chart itself as the tier renders it at the pinned release (helm template,
tools/realtier/charts.py): its manager pod's labels, its metrics port, the ClusterRole that
grants /metrics."""

from __future__ import annotations

import pytest

from tests.conftest import kueue_scrape_objects, run_stack
from tools.realtier.build import Tools
from tools.realtier.charts import render_chart

pytestmark = pytest.mark.real


def test_the_pod_monitoring_selects_kueue_s_manager_on_its_metrics_port(tools: Tools) -> None:
    chart = render_chart(tools, "kueue")
    (deployment,) = chart.of_kind("Deployment")
    template = deployment["spec"]["template"]
    (container,) = template["spec"]["containers"]
    objects = {o["kind"]: o for o in kueue_scrape_objects(run_stack("gcp-a4"))}
    monitoring = objects["PodMonitoring"]
    assert monitoring["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    selector = monitoring["spec"]["selector"]["matchLabels"]
    assert selector.items() <= template["metadata"]["labels"].items()
    (endpoint,) = monitoring["spec"]["endpoints"]
    assert endpoint["port"] in [port["name"] for port in container["ports"]]
    # The role the stack's ServiceAccount is bound to grants reading /metrics.
    role_name = objects["ClusterRoleBinding"]["roleRef"]["name"]
    (role,) = [r for r in chart.of_kind("ClusterRole") if r["metadata"]["name"] == role_name]
    assert {"nonResourceURLs": ["/metrics"], "verbs": ["get"]} in role["rules"]
