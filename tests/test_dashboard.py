"""The stack's dashboard (monitoring.dashboard) in each platform's form, held to what its reader
takes: the Cloud Monitoring dashboard to the Monitoring API v1's own schema (its discovery
document, tests/vendor/google_monitoring_v1.json: google-api-python-client 2.202.0
googleapiclient/discovery_cache/documents/monitoring.v1.json, revision 20260903), the console's
ConfigMap to an OpenShift operator's and to what the console reads
(tests/vendor/console_dashboard.yaml). Its queries run on a real Prometheus in
tests/real/test_run_metrics_prometheus.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_cluster.offline.engine import ProgramRun
from tests.conftest import BARCELONA_RWX, GKE_RWX, kueue_scrape_objects, manifests, one, run_stack
from tests.test_vendor_scrape import covered, fields

VENDOR = Path(__file__).parent / "vendor"
DISCOVERY = json.loads((VENDOR / "google_monitoring_v1.json").read_text())
CONSOLE = yaml.safe_load((VENDOR / "console_dashboard.yaml").read_text())
CLOUD_DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
CONSOLE_NAMESPACE = "openshift-config-managed"
METRICS = "monitoring.runMetrics.enabled=true"
# With the runs' metrics on a JobSet stack: its ledger exporter and the Goodput row.
STEP_LINE = r"launcher.firstStepPattern=^step \d+"
# Widget fields that are not its content (the API takes one content field per widget).
WIDGET_FRAME = {"title", "id", "visibilityCondition"}
# barcelona as a queued JobSet stack on TCP, its dashboard on.
BARCELONA_JOBSET = (
    "networkMode=tcp",
    "workload.kind=jobset",
    "workload.command[0]=t.py",
    *BARCELONA_RWX,
    "monitoring.dashboard=true",
)


def cloud_dashboards(run: ProgramRun) -> list[dict[str, Any]]:
    return [json.loads(r.inputs["dashboardJson"]) for r in run.of_type(CLOUD_DASHBOARD)]


def console_config_maps(run: ProgramRun) -> list[dict[str, Any]]:
    return [
        m
        for m in manifests(run, "ConfigMap")
        if m["metadata"].get("namespace") == CONSOLE_NAMESPACE
    ]


def schema_problems(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Where `value` is not what the discovery document's `schema` takes: an unknown field, a
    wrong type, a value outside an enum."""
    if "$ref" in schema:
        schema = DISCOVERY["schemas"][schema["$ref"]]
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        if not isinstance(value, dict):
            return [f"{path}: not an object"]
        problems = [
            f"{path}.{key}: no such field" for key in value if key not in schema["properties"]
        ]
        for key, item in value.items():
            if key in schema["properties"]:
                problems += schema_problems(item, schema["properties"][key], f"{path}.{key}")
        return problems
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: not an array"]
        return [
            p
            for i, v in enumerate(value)
            for p in schema_problems(v, schema["items"], f"{path}[{i}]")
        ]
    types = {"string": str, "boolean": bool, "integer": int, "number": (int, float)}
    if kind in types and not isinstance(value, types[kind]):  # type: ignore[arg-type]
        return [f"{path}: {value!r} is not {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} is none of {schema['enum']}"]
    return []


def overlaps(a: dict[str, int], b: dict[str, int]) -> bool:
    return (
        a["xPos"] < b["xPos"] + b["width"]
        and b["xPos"] < a["xPos"] + a["width"]
        and a["yPos"] < b["yPos"] + b["height"]
        and b["yPos"] < a["yPos"] + a["height"]
    )


@pytest.mark.parametrize(
    "stack_and_sets",
    [("gcp-a3",), ("gcp-a3", METRICS), ("gcp-a4", METRICS, STEP_LINE)],
    ids=lambda v: "+".join(v),
)
def test_the_cloud_dashboard_is_one_the_monitoring_api_takes(
    stack_and_sets: tuple[str, ...],
) -> None:
    (dashboard,) = cloud_dashboards(run_stack(*stack_and_sets))
    assert schema_problems(dashboard, {"$ref": "Dashboard"}, "dashboard") == []
    layout = dashboard["mosaicLayout"]
    # MosaicLayout.columns: "between 1 and 48, inclusive".
    assert 1 <= layout["columns"] <= 48
    groups: list[dict[str, Any]] = []
    charts: list[dict[str, Any]] = []
    for tile in layout["tiles"]:
        content = set(tile["widget"]) - WIDGET_FRAME
        assert len(content) == 1, tile
        assert tile["xPos"] >= 0 and tile["xPos"] + tile["width"] <= layout["columns"], tile
        (groups if content == {"collapsibleGroup"} else charts).append(tile)
        if content == {"xyChart"}:
            (data_set,) = tile["widget"]["xyChart"]["dataSets"]
            assert data_set["timeSeriesQuery"]["prometheusQuery"], tile
    # Charts do not cover one another; each lies within exactly one group (the widgets in a
    # group's area are its members), and no two groups share an area.
    for i, chart in enumerate(charts):
        assert not any(overlaps(chart, other) for other in charts[i + 1 :]), chart
        assert sum(overlaps(chart, group) for group in groups) == 1, chart
    for i, group in enumerate(groups):
        assert not any(overlaps(group, other) for other in groups[i + 1 :]), group


def test_the_dashboard_is_on_for_gke_and_off_for_openshift_unless_asked() -> None:
    assert len(cloud_dashboards(run_stack("gcp-a3"))) == 1
    assert cloud_dashboards(run_stack("gcp-a3", "monitoring.dashboard=false")) == []
    # OpenShift's needs a cluster admin's right (tests/test_rights.py).
    assert console_config_maps(run_stack("nerc-production")) == []
    assert len(console_config_maps(run_stack("nerc-production", "monitoring.dashboard=true"))) == 1


def test_the_console_dashboard_is_an_operators_but_where_it_says_why() -> None:
    (ours,) = console_config_maps(run_stack("barcelona", "monitoring.dashboard=true"))
    upstream, mine = fields(CONSOLE["upstream"]["object"]), fields(ours)
    deviations, added = CONSOLE["deviations"], CONSOLE["added"]
    for path, value in upstream.items():
        if not covered(path, deviations):
            assert mine.get(path) == value, f"{path}: ours {mine.get(path)!r}, theirs {value!r}"
    assert [p for p in mine if p not in upstream and not covered(p, {**deviations, **added})] == []
    assert ours["metadata"]["labels"]["console.openshift.io/odc-dashboard"] == "true"


@pytest.mark.parametrize(
    "sets",
    [("monitoring.dashboard=true", METRICS), (*BARCELONA_JOBSET, METRICS, STEP_LINE)],
    ids=["statefulset", "jobset"],
)
def test_the_console_reads_every_panel(sets: tuple[str, ...]) -> None:
    (config_map,) = console_config_maps(run_stack("barcelona", *sets))
    # The console parses the ConfigMap's one value (useLegacyDashboards.ts).
    (text,) = config_map["data"].values()
    dashboard = json.loads(text)
    upstream, reader = CONSOLE["upstream"], CONSOLE["reader"]
    assert set(dashboard) <= set(upstream["dashboard_keys"])
    assert dashboard["rows"]
    for row in dashboard["rows"]:
        assert set(row) <= set(upstream["row_keys"]) and row["showTitle"] and row["title"]
        assert sum(panel["span"] for panel in row["panels"]) <= reader["row_span"]
        for panel in row["panels"]:
            assert set(panel) <= set(upstream["panel_keys"]), panel
            assert panel["type"] in reader["panel_types"], panel
            assert panel["yaxes"][0]["format"] in reader["units"], panel
            (target,) = panel["targets"]
            assert set(target) <= set(upstream["target_keys"]) and target["expr"], panel
    ids = [panel["id"] for row in dashboard["rows"] for panel in row["panels"]]
    assert len(ids) == len(set(ids))


def queries(run: ProgramRun) -> dict[str, list[str]]:
    """The console dashboard's queries by row title."""
    (config_map,) = console_config_maps(run)
    (text,) = config_map["data"].values()
    rows = json.loads(text)["rows"]
    return {row["title"]: [panel["targets"][0]["expr"] for panel in row["panels"]] for row in rows}


def test_the_dashboard_shows_the_stacks_own_runs_and_queue() -> None:
    run = run_stack("barcelona", *BARCELONA_JOBSET, METRICS)
    namespace = one(run, "PodMonitor")["metadata"]["namespace"]
    cluster_queue = one(run, "ClusterQueue")["metadata"]["name"]
    shown = queries(run)
    assert list(shown) == ["GPUs", "Training runs", "Queue"]
    assert all(f'{{namespace="{namespace}"}}' in query for query in shown["Training runs"])
    assert all(f'{{cluster_queue="{cluster_queue}"}}' in query for query in shown["Queue"])
    # The GPUs each of the stack's runs holds, beside the nodes' DCGM figures.
    assert f'gpu_cluster_run_gpus{{namespace="{namespace}"}}' in shown["GPUs"][-1]
    # Without run metrics nothing serves the run panels; a referenced queue's ClusterQueue is
    # the cluster's, unknown to the stack.
    unmetered = queries(run_stack("barcelona", "monitoring.dashboard=true"))
    assert list(unmetered) == ["GPUs"]
    assert not [query for query in unmetered["GPUs"] if "gpu_cluster_run_" in query]
    referenced = (*BARCELONA_JOBSET, "workload.queue.mode=reference", "workload.queue.name=q")
    assert list(queries(run_stack("barcelona", *referenced))) == ["GPUs"]


def test_the_goodput_row_where_the_ledger_exporter_serves_it() -> None:
    """Each run's ledger (the runs' ledger exporter: run metrics on a JobSet stack with a step
    line): the share of its time spent stepping, per run of the stack's namespace."""
    stepped = (*BARCELONA_JOBSET, METRICS, STEP_LINE)
    run = run_stack("barcelona", *stepped)
    namespace = one(run, "JobSet")["metadata"]["namespace"]
    share, split = queries(run)["Goodput"]
    productive = f'{{namespace="{namespace}", bucket="productive_steps"}}'
    assert f"gpu_cluster_run_ledger_seconds{productive}" in share
    assert f'gpu_cluster_run_wall_seconds{{namespace="{namespace}"}}' in share
    assert "by (run, bucket)" in split
    assert "Goodput" not in queries(run_stack("barcelona", *BARCELONA_JOBSET, METRICS))


def test_gke_without_dcgm_shows_no_gpu_panel_nothing_serves() -> None:
    """Only GKE's managed DCGM metrics give the GPUs' series there: without them the GPUs row
    holds only what the runs' own pods serve, and with neither there is no dashboard by default
    (an explicit one is refused: tests/test_bad_config.py)."""
    no_dcgm = ("monitoring.dcgm=false", "monitoring.gkeComponents[0]=SYSTEM_COMPONENTS")
    shown = cloud_queries(run_stack("gcp-a3", *no_dcgm, METRICS))
    assert [q for q in shown["GPUs"] if "DCGM_" in q] == []
    assert [q for q in shown["GPUs"] if "gpu_cluster_run_gpus" in q]
    assert cloud_dashboards(run_stack("gcp-a3", *no_dcgm)) == []


def cloud_queries(run: ProgramRun) -> dict[str, list[str]]:
    """The Cloud Monitoring dashboard's queries by group title, in the dashboard's order."""
    (dashboard,) = cloud_dashboards(run)
    shown: dict[str, list[str]] = {}
    for tile in sorted(dashboard["mosaicLayout"]["tiles"], key=lambda t: (t["yPos"], t["xPos"])):
        widget = tile["widget"]
        if "collapsibleGroup" in widget:
            group = shown.setdefault(widget["title"], [])
        else:
            group.append(widget["xyChart"]["dataSets"][0]["timeSeriesQuery"]["prometheusQuery"])
    return shown


def test_the_cloud_dashboard_shows_the_stacks_own_runs_and_queue() -> None:
    run = run_stack("gcp-a4", METRICS)
    (namespace,) = {
        m["metadata"]["namespace"]
        for m in manifests(run, "PodMonitoring")
        if m not in kueue_scrape_objects(run)
    }
    cluster_queue = one(run, "ClusterQueue")["metadata"]["name"]
    shown = cloud_queries(run)
    assert list(shown) == ["GPUs", "Training runs", "Queue"]
    assert all(f'{{namespace="{namespace}"}}' in query for query in shown["Training runs"])
    assert f'gpu_cluster_run_gpus{{namespace="{namespace}"}}' in shown["GPUs"][-1]
    assert all(f'{{cluster_queue="{cluster_queue}"}}' in query for query in shown["Queue"])


@pytest.mark.parametrize(
    ("checks", "panels"), [(("nccl",), 2), (("gpu",), 1)], ids=["pairs", "gpu-only"]
)
def test_a_stack_with_a_health_runner_shows_its_nodes_and_their_fabric(
    checks: tuple[str, ...], panels: int
) -> None:
    """The nodes by result; with the pairwise check, each pair's bus bandwidth too."""
    runner = (
        "workload.kind=jobset",
        "workload.command[0]=t.py",
        *GKE_RWX,
        "workload.queue.healthGate.enabled=true",
        *(f"workload.queue.healthGate.checks[{i}]={c}" for i, c in enumerate(checks)),
        "workload.queue.healthGate.runner.enabled=true",
    )
    run = run_stack("gcp-a3", *runner)
    shown = cloud_queries(run)
    (namespace,) = {  # the runner's
        m["metadata"]["namespace"]
        for m in manifests(run, "PodMonitoring")
        if m not in kueue_scrape_objects(run)
    }
    assert len(shown["Node health"]) == panels
    assert all(f'{{namespace="{namespace}"}}' in query for query in shown["Node health"])
    assert list(cloud_queries(run_stack("gcp-a3", *runner[:-1]))) == ["GPUs", "Queue"]
