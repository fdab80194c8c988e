"""Prometheus' text exposition format, version 0.0.4 (prometheus/docs
content/docs/instrumenting/exposition_formats.md), and a server of it on /metrics: for the run's
exporter (run_metrics.py) and the node health runner's (health_metrics.py), each shipped beside
it. Standard library only."""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def family(name: str, kind: str, help_text: str) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]


def sample(name: str, labels: dict[str, str], value: float) -> str:
    pairs = ",".join(f'{key}="{escape(value)}"' for key, value in labels.items())
    return f"{name}{{{pairs}}} {value!r}" if pairs else f"{name} {value!r}"


def escape(value: str) -> str:
    # The label value escapes of the text format: backslash, double quote, line feed.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def metrics_server(port: int, exposition: Callable[[], str]) -> ThreadingHTTPServer:
    """A server of `exposition()` on /metrics at `port` (all addresses); the caller runs it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404)
                return
            body = exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a scrape every few seconds would fill the log

    httpd = ThreadingHTTPServer(("", port), Handler)
    httpd.daemon_threads = True
    return httpd
