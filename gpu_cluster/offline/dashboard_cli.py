"""`gpu-cluster dashboard`: the stack's dashboard (plan/dashboard.py) as an SVG, from what a
Prometheus HTTP API answers for its queries over the last `--since`: OpenShift's Thanos
Querier, Google Cloud Managed Service for Prometheus' API, or any Prometheus. The same rows and
queries the console's and Cloud Monitoring's dashboards show, for where neither is at hand (a
terminal, an incident report, CI)."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_cluster.config.derived import shows_gpu_metrics
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.offline.dashboard_svg import PanelData, Series, has_data, picture
from gpu_cluster.offline.project import ProjectError
from gpu_cluster.offline.stack_files import checked_settings
from gpu_cluster.plan.dashboard import dashboard_rows, dashboard_title

# Where the bearer token comes from, if the API wants one: an environment variable, so that it
# is in no process list or shell history (`PROMETHEUS_TOKEN=$(oc whoami -t)`).
TOKEN_VARIABLE = "PROMETHEUS_TOKEN"
# One query_range request; past this the API is taken as unreachable.
QUERY_TIMEOUT_S = 60
# Points per line: enough for a smooth line, few enough for a small file.
POINTS = 240
# Prometheus' own floor for a useful step: its scrape interval on both platforms (30 s) is
# coarser, so a finer step only repeats samples.
MIN_STEP_S = 15
_DURATION = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class PrometheusError(RuntimeError):
    """The API could not be reached or refused a query; says which and why."""


def duration_seconds(text: str) -> int:
    """`30m`, `6h`, `2d`: seconds, for argparse (a bad one is its usage error)."""
    match = _DURATION.fullmatch(text)
    if match is None or int(match[1]) == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 30m, 6h or 2d")
    return int(match[1]) * _SECONDS[match[2]]


def api_base(text: str) -> str:
    """An http(s) URL with a host, for argparse (anything else is its usage error)."""
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018  # raises ValueError for a port that is no number
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r}: an http:// or https:// URL with a host")
    return text


def add_dashboard_arguments(
    parser: argparse.ArgumentParser, stack_arguments: Callable[[argparse.ArgumentParser], None]
) -> None:
    stack_arguments(parser)
    parser.add_argument(
        "--prometheus",
        required=True,
        type=api_base,
        metavar="URL",
        help="the Prometheus HTTP API's base, before /api/v1 (OpenShift: https://<the "
        "thanos-querier route>; GKE: https://monitoring.googleapis.com/v1/projects/<project>/"
        "location/global/prometheus); a bearer token, if it wants one, in $PROMETHEUS_TOKEN",
    )
    parser.add_argument("--svg", required=True, type=Path, help="the picture's file")
    parser.add_argument(
        "--since",
        type=duration_seconds,
        default=3600,
        metavar="DURATION",
        help="how far back the charts go, e.g. 30m, 6h, 2d (default 1h)",
    )


def query_range(
    base: str, query: str, start: float, end: float, step: float, token: str | None
) -> tuple[Series, ...]:
    """The Prometheus HTTP API's /api/v1/query_range answer for `query` as series. A GET with
    the parameters in the URL: the form every implementation takes (Managed Service for
    Prometheus documents GET with an empty body: cloud.google.com/monitoring/api/ref_v3/rest/v1/
    projects.location.prometheus.api.v1/query_range)."""
    form = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:.0f}"}
    request = urllib.request.Request(
        f"{base.rstrip('/')}/api/v1/query_range?{urllib.parse.urlencode(form)}",
        headers={"Authorization": f"Bearer {token}"} if token else {},
    )
    try:
        with urllib.request.urlopen(request, timeout=QUERY_TIMEOUT_S) as response:
            answer: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as exc:
        raise PrometheusError(f"{base} answered {exc.code} {exc.reason}: {_said(exc)}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise PrometheusError(f"{base} could not be reached: {exc}") from None
    except ValueError:
        raise PrometheusError(f"{base} answered something other than JSON") from None
    if answer.get("status") != "success":
        raise PrometheusError(f"{base} refused the query: {answer.get('error', answer)}")
    return tuple(
        Series(one["metric"], tuple((float(t), float(v)) for t, v in one["values"]))
        for one in answer["data"]["result"]
    )


def _said(exc: urllib.error.HTTPError) -> str:
    """The first line of an error answer's body (Prometheus' JSON error, a proxy's page)."""
    body = exc.read(2000).decode(errors="replace").strip()
    try:
        return str(json.loads(body).get("error", body))
    except (ValueError, AttributeError):
        return (body.splitlines() or [""])[0]


def dashboard_command(args: argparse.Namespace, project_dir: Callable[[], Path]) -> int:
    """Draw the stack's dashboard into --svg; 2 (one line on stderr) when the stack collects
    nothing to draw or the API cannot answer."""
    try:
        settings = checked_settings(args.stack, tuple(args.set), project_dir()).settings
    except (ConfigError, FileNotFoundError, ProjectError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.svg.parent.is_dir():
        print(f"error: --svg {args.svg}: no directory {args.svg.parent}", file=sys.stderr)
        return 2
    if not (shows_gpu_metrics(settings) or settings.monitoring.run_metrics.enabled):
        print(
            f"error: stack {args.stack!r} collects neither GPU metrics (monitoring.dcgm) nor "
            "the runs' (monitoring.runMetrics.enabled): its dashboard has nothing to show",
            file=sys.stderr,
        )
        return 2
    end = time.time()
    step = max(MIN_STEP_S, math.ceil(args.since / POINTS))
    # A whole number of steps back: Prometheus evaluates at start + k * step, so the last
    # point is now, and a series that began in the last step still shows.
    start = end - math.ceil(args.since / step) * step
    token = os.environ.get(TOKEN_VARIABLE) or None
    try:
        rows = [
            (
                row.title,
                [
                    PanelData(p, query_range(args.prometheus, p.query, start, end, step, token))
                    for p in row.panels
                ],
            )
            for row in dashboard_rows(settings)
        ]
    except PrometheusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.svg.write_text(picture(dashboard_title(settings), rows, start, end))
    drawn = sum(1 for _, panels in rows for data in panels if has_data(data))
    total = sum(len(panels) for _, panels in rows)
    print(f"wrote {args.svg}: {drawn} of {total} panels with data over the last {args.since} s")
    return 0
