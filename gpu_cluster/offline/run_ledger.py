"""`gpu-cluster run status`'s goodput ledger (gpu_cluster/ledger.py): read from the run's cluster
records and rank 0's log, shown as a table and drawn as an SVG a browser opens (standard library
only: no plotting library in the CLI's dependencies)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

from gpu_cluster.ledger import BUCKETS, Ledger, ledger
from gpu_cluster.offline.run_cluster import RunCluster
from gpu_cluster.offline.run_records import RunRecords
from gpu_cluster.plan.health_gate import health_gate_check

# The SVG's geometry, in pixels: a bar per bucket, the label column on its left.
LABEL_WIDTH, BAR_WIDTH, ROW_HEIGHT, MARGIN = 260, 480, 26, 12
# A colour per bucket: productive green, the losses warm, the waits cool.
COLOURS = {
    "queue wait": "#9ecae1",
    "capacity provisioning": "#6baed6",
    "health gate / init": "#4292c6",
    "image pull": "#2171b5",
    "rendezvous": "#08519c",
    "earlier attempts (not on record)": "#bdbdbd",
    "restarts": "#e6550d",
    "re-done steps": "#fd8d3c",
    "productive steps": "#31a354",
}


def run_ledger(
    cluster: RunCluster,
    job_set: dict[str, Any],
    workload: dict[str, Any] | None,
    pods: Sequence[dict[str, Any]],
    records: RunRecords,
    step_pattern: str,
) -> Ledger:
    """The run's ledger: its records as the cluster has them now."""
    now = datetime.datetime.now(datetime.UTC)
    gate = health_gate_check(cluster.settings)
    return ledger(job_set, workload, pods, records.events, records.log, step_pattern, gate, now)


def table_rows(found: Ledger) -> list[tuple[str, str, str]]:
    """BUCKET SECONDS % of every bucket, then the wall time."""
    rows = [("BUCKET", "SECONDS", "%")]
    for bucket in BUCKETS:
        seconds = found.seconds[bucket]
        share = 100 * seconds / found.wall if found.wall else 0.0
        rows.append((bucket, f"{seconds:.0f}", f"{share:.1f}"))
    rows.append(("wall time", f"{found.wall:.0f}", "100.0"))
    return rows


def svg(found: Ledger, title: str) -> str:
    """A horizontal bar per bucket, its length its share of the wall time."""
    width = LABEL_WIDTH + BAR_WIDTH + 2 * MARGIN + 110
    height = (len(BUCKETS) + 2) * ROW_HEIGHT + 2 * MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{MARGIN}" y="{MARGIN + 16}" font-weight="bold">{escape(title)}</text>',
    ]
    for row, bucket in enumerate(BUCKETS, start=1):
        seconds = found.seconds[bucket]
        share = seconds / found.wall if found.wall else 0.0
        y = MARGIN + row * ROW_HEIGHT + 8
        x = MARGIN + LABEL_WIDTH
        parts += [
            f'<text x="{MARGIN}" y="{y + 14}">{escape(bucket)}</text>',
            f'<rect x="{x}" y="{y}" width="{share * BAR_WIDTH:.1f}" height="{ROW_HEIGHT - 8}" '
            f'fill="{COLOURS[bucket]}"><title>{escape(bucket)}: {seconds:.0f} s</title></rect>',
            f'<text x="{x + share * BAR_WIDTH + 6:.1f}" y="{y + 14}">'
            f"{seconds:.0f} s ({100 * share:.1f}%)</text>",
        ]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
