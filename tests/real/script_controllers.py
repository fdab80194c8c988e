"""The stack's script controllers (the node health gate, the node health runner) run beside the
control plane as its Deployment would run them in a pod: the script from the repository with
the rendered container's environment, the API server where a pod finds it, and a token of the
Deployment's ServiceAccount where the kubelet would mount it, so RBAC and admission policies
judge it as they would the pod."""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import yaml

from tests.conftest import ROOT
from tools.realtier.stacks import StackRender

if TYPE_CHECKING:
    from tests.real.conftest import Cluster

# The tier's only speed-up: a rendered controller looks every 15 s, here every second.
POLL_SUFFIX = "_POLL_SECONDS"


def in_pod(cluster: Cluster, account: Path) -> dict[str, str]:
    """What a pod of `cluster` finds in its environment (the API server, kube_api.py's
    variables), its ServiceAccount's token and CA in `account` (ca.crt written here)."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    (entry,) = config["clusters"]
    (account / "ca.crt").write_bytes(
        base64.b64decode(entry["cluster"]["certificate-authority-data"])
    )
    server = urlsplit(entry["cluster"]["server"])
    return {
        "KUBERNETES_SERVICE_HOST": str(server.hostname),
        "KUBERNETES_SERVICE_PORT": str(server.port),
        "SERVICEACCOUNT_DIR": str(account),
    }


@contextlib.contextmanager
def running_script(
    cluster: Cluster,
    stack: StackRender,
    deployment: str,
    tmp_path: Path,
    env_overrides: dict[str, str] | None = None,
) -> Iterator[Path]:
    """The stack's Deployment `deployment` as a process until the block ends, its env with
    `env_overrides` (a port of this host's, say); yields its log. Asserts at the end that the
    API server refused it nothing (RBAC's 403)."""
    (found,) = (d for d in stack.of_kind("Deployment") if d["metadata"]["name"] == deployment)
    spec = found["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    account = tmp_path / deployment / "serviceaccount"
    account.mkdir(parents=True)
    namespace = found["metadata"]["namespace"]
    token = cluster.kube.service_account_token(spec["serviceAccountName"], namespace)
    (account / "token").write_text(token)
    env = {e["name"]: e["value"] for e in container["env"]}
    env |= {k: "1" for k in env if k.endswith(POLL_SUFFIX)}
    env |= {**in_pod(cluster, account), "PATH": os.environ["PATH"], **(env_overrides or {})}
    interpreter, script = container["command"]
    assert interpreter == "python3"
    log = tmp_path / f"{deployment}.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / Path(script).name)],
            env=env,
            stdout=out,
            stderr=out,
        )
        try:
            yield log
        finally:
            process.terminate()
            process.wait(timeout=30)
    # It ran with the stack's rights alone: nothing it was refused.
    assert "403" not in log.read_text(), log.read_text()
