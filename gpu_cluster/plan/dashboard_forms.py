"""The stack's dashboard (plan/dashboard.py) in each platform's form: the Grafana-style JSON
OpenShift's console reads from a ConfigMap, and a Cloud Monitoring dashboard (Monitoring API
v1 `Dashboard`) whose charts run the same PromQL on Managed Service for Prometheus. Pure."""

from __future__ import annotations

from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.dashboards import CLOUD_MONITORING_COLUMNS, CONSOLE_ROW_SPAN
from gpu_cluster.plan.dashboard import Row, Unit, dashboard_rows, dashboard_title

# The console's unit names (openshift/monitoring-plugin 276015a web/src/shared/utils/units.ts;
# tests/vendor/console_dashboard.yaml); it has none for watts.
CONSOLE_UNIT = {
    Unit.RATIO: "percentunit",
    Unit.BYTES: "bytes",
    Unit.BYTES_PER_SECOND: "Bps",
    Unit.SECONDS: "s",
    Unit.WATTS: "short",
    Unit.PER_SECOND: "short",
    Unit.COUNT: "short",
}
# Cloud Monitoring's units, UCUM as its MetricDescriptor.unit reads them: `10^2.%` is a ratio
# shown as a percentage, `1` a plain number (Monitoring API v3 MetricDescriptor.unit).
CLOUD_UNIT = {
    Unit.RATIO: "10^2.%",
    Unit.BYTES: "By",
    Unit.BYTES_PER_SECOND: "By/s",
    Unit.SECONDS: "s",
    Unit.WATTS: "1",
    Unit.PER_SECOND: "1/s",
    Unit.COUNT: "1",
}
# Tile heights in Cloud Monitoring's grid blocks: a chart, a group's title bar.
CHART_HEIGHT = 16
GROUP_TITLE_HEIGHT = 1
# The console's smallest panel: a quarter of its row.
CONSOLE_MIN_SPAN = 3


def console_dashboard(s: Settings) -> dict[str, object]:
    """The dashboard as OpenShift's console reads it: rows of `graph` panels, each with its
    query as a target and its unit as the first y-axis' format."""
    panel_id = 0
    rows: list[dict[str, object]] = []
    for row in dashboard_rows(s):
        span = max(CONSOLE_ROW_SPAN // len(row.panels), CONSOLE_MIN_SPAN)
        panels: list[dict[str, object]] = []
        for panel in row.panels:
            panel_id += 1
            panels.append(
                {
                    "id": panel_id,
                    "type": "graph",
                    "title": panel.title,
                    "span": span,
                    "stack": False,
                    "legend": {"show": True},
                    "targets": [{"expr": panel.query, "legendFormat": panel.legend, "refId": "A"}],
                    "yaxes": [{"format": CONSOLE_UNIT[panel.unit]}, {"format": "short"}],
                }
            )
        rows.append({"title": row.title, "showTitle": True, "collapse": False, "panels": panels})
    return {
        "title": dashboard_title(s),
        "tags": ["gpu-cluster"],
        "editable": False,
        "schemaVersion": 16,
        "time": {"from": "now-1h", "to": "now"},
        "rows": rows,
    }


def cloud_monitoring_dashboard(s: Settings) -> dict[str, object]:
    """The dashboard as Cloud Monitoring's API takes it: per row a collapsible group spanning
    its charts, each chart a PromQL query."""
    tiles: list[dict[str, object]] = []
    y = 0
    for row in dashboard_rows(s):
        height = GROUP_TITLE_HEIGHT + CHART_HEIGHT
        tiles.append(_tile(0, y, CLOUD_MONITORING_COLUMNS, height, _group(row)))
        width = CLOUD_MONITORING_COLUMNS // len(row.panels)
        for index, panel in enumerate(row.panels):
            chart: dict[str, object] = {
                "title": panel.title,
                "xyChart": {
                    "dataSets": [
                        {
                            "plotType": "LINE",
                            "timeSeriesQuery": {
                                "prometheusQuery": panel.query,
                                "unitOverride": CLOUD_UNIT[panel.unit],
                            },
                        }
                    ],
                    "yAxis": {"scale": "LINEAR"},
                },
            }
            tiles.append(_tile(index * width, y + GROUP_TITLE_HEIGHT, width, CHART_HEIGHT, chart))
        y += height
    return {
        "displayName": dashboard_title(s),
        "mosaicLayout": {"columns": CLOUD_MONITORING_COLUMNS, "tiles": tiles},
    }


def _group(row: Row) -> dict[str, object]:
    return {"title": row.title, "collapsibleGroup": {"collapsed": False}}


def _tile(x: int, y: int, width: int, height: int, widget: dict[str, object]) -> dict[str, object]:
    return {"xPos": x, "yPos": y, "width": width, "height": height, "widget": widget}
