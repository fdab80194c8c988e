"""checkov's Kubernetes checks pass on every stack's render; the only exceptions are the ones the
design needs, each on its one object, with its reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_cluster.offline.render import render
from tests.conftest import GKE_RWX, ROOT, STACKS

TOOLS_CHECKOV = ROOT / ".tools" / "checkov" / "bin" / "checkov"

REPO = "codeSync.repo=https://github.com/example/train.git"
JOB_SET = ("workload.kind=jobset", "workload.command[0]=train.py")
# Both checks of the stack's runner (the default checks): the GPU check's pod and the NCCL
# check's, which is a training pod.
RUNNER = ("workload.queue.healthGate.runner.enabled=true",)
# (stack, --set overrides, --set-secret overrides)
VARIANTS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    *((stack, (), ()) for stack in STACKS),
    ("barcelona", (REPO,), ()),
    ("barcelona", (REPO, "codeSync.credentialsSecret=git-creds"), ()),
    (
        "nerc-production",
        (),
        (REPO.replace("https://", "https://oauth2:t@"), "secretEnv.HF_TOKEN=t"),
    ),
    ("gcp-a3", ("networkMode=tcp",), ()),
    *(
        (stack, (*JOB_SET, "workload.queue.healthGate.enabled=true", *placed, *runner), ())
        for stack, placed in (
            ("gcp-a3", GKE_RWX),
            ("nerc-production", ("workload.queue.topologyLevels[0]=example.com/rack",)),
        )
        for runner in ((), RUNNER)
    ),
]


def checkov() -> str:
    """checkov pins dependencies older than Pulumi's, so it lives in its own venv (.ci/run
    installs it at .tools/checkov); CHECKOV_BIN or PATH may name another."""
    candidates = [os.environ.get("CHECKOV_BIN"), str(TOOLS_CHECKOV), shutil.which("checkov")]
    found = next((c for c in candidates if c and Path(c).exists()), None)
    assert found, "checkov not found: run `bash .ci/run` once, or set CHECKOV_BIN"
    return found


def scan(manifests: str, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "kubernetes.yaml"
    path.write_text(manifests)
    result = subprocess.run(
        [checkov(), "-f", str(path), "--framework", "kubernetes", "--quiet", "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(result.stdout)
    return dict(report[0] if isinstance(report, list) else report)


@pytest.mark.parametrize(("stack", "overrides", "secrets"), VARIANTS, ids=lambda v: str(v))
def test_no_failed_checks(
    stack: str, overrides: tuple[str, ...], secrets: tuple[str, ...], tmp_path: Path
) -> None:
    report = scan(render(stack, overrides, secrets)["kubernetes.yaml"], tmp_path)
    failed = [
        f"{f['check_id']} {f['resource']}: {f['check_name']}"
        for f in report.get("results", {}).get("failed_checks", [])
    ]
    assert report["summary"]["passed"] > 0
    assert not failed, "\n".join(failed)


def skips(stack: str, *overrides: str) -> dict[str, dict[str, str]]:
    """kind/name -> {check: reason} from the rendered checkov annotations."""
    out = {}
    for doc in yaml.safe_load_all(render(stack, overrides)["kubernetes.yaml"]):
        annotations = doc["metadata"].get("annotations", {})
        found = dict(
            v.split("=", 1) for k, v in annotations.items() if k.startswith("checkov.io/skip")
        )
        if found:
            out[f"{doc['kind']}/{doc['metadata']['name']}"] = found
    return out


def test_exceptions_follow_the_network_mode() -> None:
    rdma = skips("barcelona")["StatefulSet/ml-dev-env"]
    assert "IPC_LOCK" in rdma["CKV_K8S_25"]
    assert "CKV_K8S_25" not in skips("nerc-production")["StatefulSet/ml-dev-env"]  # OpenShift tcp
    tcpxo = skips("gcp-a3")["StatefulSet/gpu-cluster"]
    assert "NET_ADMIN" in tcpxo["CKV_K8S_25"] and "CKV_K8S_40" not in tcpxo
    assert set(skips("gcp-a3")) == {
        "StatefulSet/gpu-cluster",
        "DaemonSet/nccl-tcpxo-installer",
        "DaemonSet/device-injector",
    }
    assert not any(k.startswith("DaemonSet/") for k in skips("gcp-a3", "networkMode=tcp"))
    for reasons in skips("gcp-a3").values():
        assert all(len(reason) > 20 for reason in reasons.values())
