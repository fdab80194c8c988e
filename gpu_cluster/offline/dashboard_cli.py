"""`gpu-cluster dashboard`: the stack's dashboard (plan/dashboard.py) as an SVG, from what a
Prometheus HTTP API answers for its queries over the last `--since`: OpenShift's Thanos
Querier, Google Cloud Managed Service for Prometheus' API, or any Prometheus. The same rows and
queries the console's and Cloud Monitoring's dashboards show, for where neither is at hand (a
terminal, an incident report, CI)."""

from __future__ import annotations

import argparse
import http.client
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
from gpu_cluster.config.messages import ConfigError, clipped
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
# The longest --since: Managed Service for Prometheus keeps data 24 months, the longest of the
# three (cloud.google.com/stackdriver/docs/managed-prometheus, overview); further back every API
# answers nothing, which would draw as if no series existed.
MAX_SINCE_S = 730 * 86400
_DURATION = re.compile(r"^([0-9]+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class PrometheusError(RuntimeError):
    """The API could not be reached or refused a query; says which and why."""


def duration_seconds(text: str) -> int:
    """`30m`, `6h`, `2d`: seconds, for argparse (a bad one is its usage error)."""
    match = _DURATION.fullmatch(text)
    if match is None or int(match[1]) == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 30m, 6h or 2d")
    seconds = int(match[1]) * _SECONDS[match[2]]
    if seconds > MAX_SINCE_S:
        raise argparse.ArgumentTypeError(
            f"{text!r}: at most {MAX_SINCE_S // 86400}d (24 months, the longest any of the APIs "
            "keeps samples)"
        )
    return seconds


def api_base(text: str) -> str:
    """An http(s) URL with a host and nothing after its path, in ASCII (percent-encoded), for
    argparse (anything else is its usage error). No credentials: a URL shows in the process
    list and in messages; the token goes in $PROMETHEUS_TOKEN."""
    usage = "an http:// or https:// URL with a host, e.g. https://prometheus.example.com:9090"
    if not text.isascii() or any(c.isspace() or not c.isprintable() for c in text):
        raise argparse.ArgumentTypeError(f"{text!r}: {usage}, in ASCII without spaces")
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018  # raises ValueError for a port that is no number
        (parts.hostname or "").encode("idna")  # an empty or over-long label
    except (ValueError, UnicodeError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r}: {usage}")
    if parts.username is not None or parts.password is not None:
        raise argparse.ArgumentTypeError(
            "the URL holds credentials, which would show in the process list and in messages: "
            f"put a bearer token in ${TOKEN_VARIABLE} instead"
        )
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise argparse.ArgumentTypeError(f"{text!r}: the API's base ends with its path")
    return text


def bearer_token() -> str | None:
    """$PROMETHEUS_TOKEN, if set; one that no HTTP header carries is refused before any
    request."""
    token = os.environ.get(TOKEN_VARIABLE) or None
    if token is not None and not (token.isascii() and token.isprintable()):
        raise PrometheusError(
            f"${TOKEN_VARIABLE} holds a line break, a control character or a character outside "
            "ASCII, which no token has and no HTTP header carries: set it to the token alone"
        )
    return token


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
    parser.add_argument(
        "--svg", required=True, type=Path, help="the picture's file; `-`: standard output"
    )
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
    params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:.0f}"}
    request = urllib.request.Request(
        f"{base.rstrip('/')}/api/v1/query_range?{urllib.parse.urlencode(params)}",
        headers={"Authorization": f"Bearer {token}"} if token else {},
    )
    try:
        with urllib.request.urlopen(request, timeout=QUERY_TIMEOUT_S) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise PrometheusError(f"{base} answered {exc.code} {exc.reason}: {_said(exc)}") from None
    except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException) as exc:
        raise PrometheusError(f"{base} could not be reached: {exc!r}") from None
    return matrix_of(base, body)


def matrix_of(base: str, body: bytes) -> tuple[Series, ...]:
    """The series of a query_range answer `body` from `base`; PrometheusError for an answer
    that is no JSON, a refusal, or no matrix (a vector, a native histogram, a field missing or
    of another type)."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        raise PrometheusError(f"{base} answered something other than JSON") from None
    if isinstance(answer, dict) and answer.get("status") != "success":
        said = answer.get("error", answer)
        raise PrometheusError(f"{base} refused the query: {clipped(str(said))}")
    try:
        return tuple(_series(one) for one in answer["data"]["result"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise PrometheusError(
            f"{base} answered something other than a query_range matrix ({exc!r})"
        ) from None


def _series(one: dict[str, Any]) -> Series:
    """One series of a matrix answer: its labels (as text) and its (time, value) points."""
    labels = {str(k): str(v) for k, v in one["metric"].items()}
    return Series(labels, tuple((float(t), float(v)) for t, v in one["values"]))


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
    to_stdout = str(args.svg) == "-"
    if not to_stdout and (args.svg.is_dir() or not args.svg.parent.is_dir()):
        print(f"error: --svg {args.svg}: not a file in a directory that exists", file=sys.stderr)
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
    try:
        token = bearer_token()
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
    drawing = picture(dashboard_title(settings), rows, start, end)
    drawn = sum(1 for _, panels in rows for data in panels if has_data(data))
    total = sum(len(panels) for _, panels in rows)
    said = f"{drawn} of {total} panels with data over the last {end - start:.0f} s"
    if to_stdout:
        sys.stdout.write(drawing)
        print(f"drew {said}", file=sys.stderr)
        return 0
    try:
        args.svg.write_text(drawing)
    except OSError as exc:
        print(f"error: --svg {args.svg}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.svg}: {said}")
    return 0
