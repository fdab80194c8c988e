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
    # The runs' metrics, and their ledger exporter.
    (
        "gcp-a3",
        (
            *JOB_SET,
            *GKE_RWX,
            "monitoring.runMetrics.enabled=true",
            r"launcher.firstStepPattern=^step \d+",
        ),
        (),
    ),
]


def checkov() -> str:
    """checkov pins dependencies older than Pulumi's, so it lives in its own venv (.ci/run
    installs it at .tools/checkov); CHECKOV_BIN or PATH may name another."""
    candidates = [os.environ.get("CHECKOV_BIN"), str(TOOLS_CHECKOV), shutil.which("checkov")]
    found = next((c for c in candidates if c and Path(c).exists()), None)
    assert found, "checkov not found: run `bash .ci/run` once, or set CHECKOV_BIN"
    return found


Variant = tuple[str, tuple[str, ...], tuple[str, ...]]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[Variant, dict[str, list[Any]]]:
    """Each variant's render scanned by checkov, all in one run (a start costs seconds): its
    passed and failed checks by variant. `--skip-download`: nothing is fetched from Prisma
    Cloud (checkov's guidelines), which this offline scan does not need."""
    renders = tmp_path_factory.mktemp("renders")
    files = {}
    for i, (stack, overrides, secrets) in enumerate(VARIANTS):
        (renders / f"{i}.yaml").write_text(render(stack, overrides, secrets)["kubernetes.yaml"])
        files[f"/{i}.yaml"] = (stack, overrides, secrets)
    result = subprocess.run(
        [
            checkov(),
            "-d",
            str(renders),
            "--framework",
            "kubernetes",
            "--skip-download",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(result.stdout)
    results = (report[0] if isinstance(report, list) else report)["results"]
    found: dict[Variant, dict[str, list[Any]]] = {v: {"passed": [], "failed": []} for v in VARIANTS}
    for outcome in ("passed", "failed"):
        for check in results[f"{outcome}_checks"]:
            found[files[check["file_path"]]][outcome].append(check)
    return found


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: str(v))
def test_no_failed_checks(variant: Variant, reports: dict[Variant, dict[str, list[Any]]]) -> None:
    report = reports[variant]
    failed = [f"{f['check_id']} {f['resource']}: {f['check_name']}" for f in report["failed"]]
    assert len(report["passed"]) > 0
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
