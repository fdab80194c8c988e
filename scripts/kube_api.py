"""The Kubernetes API as a pod's ServiceAccount sees it, for the stack's small controllers
(node_health_gate.py, node_health_runner.py), standard library only.

Environment: KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT (the kubelet's), SERVICEACCOUNT_DIR
(token, ca.crt; default the pod's mounted ServiceAccount).
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, TypeVar

Object = dict[str, Any]
T = TypeVar("T")
# What a controller exits with when its environment is incomplete (sysexits.h EX_CONFIG).
EX_CONFIG = 78
ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# What a request body is, by how the API server is to apply it.
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
CREATE = "application/json"
# Failures a pass of a controller loop outlives: the API server restarting, a write that lost
# a race (409), a refusal it logs.
PASSING = (OSError, urllib.error.URLError, KeyError, ValueError)


class Api:
    """The API server, as the pod's ServiceAccount (its token read at each call: the kubelet
    rotates it)."""

    def __init__(self, host: str, port: str, account: Path) -> None:
        # An IPv6 address is bracketed in a URL (RFC 3986), as client-go's in-cluster config does.
        self.base = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        self.token_file = account / "token"
        self.context = ssl.create_default_context(cafile=str(account / "ca.crt"))

    @classmethod
    def in_cluster(cls, env: Mapping[str, str] = os.environ) -> Api:
        return cls(
            env["KUBERNETES_SERVICE_HOST"],
            env["KUBERNETES_SERVICE_PORT"],
            Path(env.get("SERVICEACCOUNT_DIR", ACCOUNT_DIR)),
        )

    def call(
        self,
        method: str,
        path: str,
        body: Object | None = None,
        query: Mapping[str, str] | None = None,
        content_type: str = APPLY,
    ) -> Object:
        headers = {"Authorization": f"Bearer {self.token_file.read_text().strip()}"}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        url = f"{self.base}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
            found: Object = json.load(response)
            return found

    def text(self, path: str, query: Mapping[str, str]) -> str:
        """The plain text at `path` (a container's log)."""
        headers = {"Authorization": f"Bearer {self.token_file.read_text().strip()}"}
        url = f"{self.base}{path}?{urllib.parse.urlencode(query)}"
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
            body: bytes = response.read()
            return body.decode("utf-8", errors="replace")

    def get(self, path: str) -> Object | None:
        """The object at `path`; None when there is none."""
        try:
            return self.call("GET", path)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def apply_status(self, path: str, body: Object, manager: str) -> None:
        """Server-side apply of `body` to `path`'s status as `manager`: only the fields it sets
        are its own, so other controllers' entries stay as they are."""
        self.call("PATCH", f"{path}/status", body, {"fieldManager": manager, "force": "true"})


def identity(obj: Mapping[str, Any]) -> Object:
    """`obj`'s apiVersion, kind, name and namespace: the head of an apply."""
    meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace")}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta}


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_env(program: str, read: Callable[[], T]) -> T:
    """`read()` of a controller's settings from its environment; a missing or bad one ends
    `program` with EX_CONFIG, naming it."""
    try:
        return read()
    except (KeyError, ValueError) as e:
        print(f"{program}: bad or missing setting {e}", file=sys.stderr)
        sys.exit(EX_CONFIG)


def every(program: str, seconds: float, step: Callable[[], None]) -> NoReturn:
    """`step()` every `seconds`, until SIGTERM (stop_on_sigterm); a failure a pass outlives
    (PASSING: the API server restarting, a write that lost a race) is logged and the next pass
    reads again."""
    stop_on_sigterm(program)
    while True:
        try:
            step()
        except PASSING as e:
            print(f"{program}: {said(e)}", file=sys.stderr, flush=True)
        time.sleep(seconds)


def stop_on_sigterm(program: str) -> None:
    """Exit 0 at once on SIGTERM, mid-pass or asleep: a pass only reads, or writes at the
    version it read, so the next pod starts over. The controllers run as their container's PID 1,
    which the kernel sends no signal it has no handler for (pid_namespaces(7), "The namespace
    init process"): without one, every rollout and delete waits out the grace period."""

    def stop(signum: int, frame: FrameType | None) -> NoReturn:
        print(f"{program}: stopping (SIGTERM)", file=sys.stderr, flush=True)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)


def said(error: Exception) -> str:
    """`error` as a log line: an API server's refusal with the reason it gives (its Status
    message: which field of an object it would not take, say)."""
    if isinstance(error, urllib.error.HTTPError):
        try:
            message = json.loads(error.read()).get("message", "")
        except (OSError, ValueError, AttributeError):
            message = ""
        if message:
            return f"{error!r}: {message}"
    return repr(error)
