"""pulumi-gcp is an optional dependency (the `gke` extra): an install without it renders
OpenShift stacks and imports the components that create no GCP resource; a GKE stack there is
refused with the command that installs it, exit 2, no traceback (issue #43)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.as_of import AS_OF
from tests.conftest import ROOT
from tests.installed import ENV, install_wheel, run

# What the refusal tells the user to run (pyproject.toml's extra, requirements.txt's file).
INSTALL_EXTRA = "pip install 'gpu-cluster[gke]'"
INSTALL_CHECKOUT = "pip install -r requirements.txt"
# Runs the rest of a `python -c` script as if pulumi-gcp were not installed.
WITHOUT_GCP = "import sys; sys.modules['pulumi_gcp'] = None\n"


@pytest.fixture(scope="module")
def venv_without_gcp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed, pip's way without the extra, where pulumi_gcp cannot be imported."""
    return install_wheel(tmp_path_factory.mktemp("without-gcp"), hidden=("pulumi_gcp",))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """This project's program and two stack files, without the package's source."""
    copy = tmp_path / "project"
    copy.mkdir()
    for name in ("Pulumi.yaml", "__main__.py", "Pulumi.barcelona.yaml", "Pulumi.gcp-a3.yaml"):
        shutil.copy2(ROOT / name, copy / name)
    return copy


def installed_render(
    venv: Path, stack: str, out: Path, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """`gpu-cluster render` of the installed wheel, as of the tests' date."""
    return subprocess.run(
        [
            str(venv / "bin" / "gpu-cluster"),
            *("render", "--stack", stack, "--as-of", str(AS_OF.day), "--out", str(out)),
        ],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )


def assert_refused_with_the_install_command(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "pulumi-gcp" in result.stderr
    assert INSTALL_EXTRA in result.stderr
    assert INSTALL_CHECKOUT in result.stderr


def test_the_wheel_requires_pulumi_gcp_only_with_its_gke_extra(venv_without_gcp: Path) -> None:
    probe = """
import json
from importlib.metadata import metadata
m = metadata("gpu-cluster")
print(json.dumps({"requires": m.get_all("Requires-Dist"), "extras": m.get_all("Provides-Extra")}))
"""
    found = json.loads(run("-c", probe, cwd=venv_without_gcp, python=python(venv_without_gcp)))
    assert found["extras"] == ["gke", "runs"]
    gcp = [r for r in found["requires"] if r.startswith("pulumi-gcp")]
    assert [r.replace(" ", "") for r in gcp] == ['pulumi-gcp<11,>=9.0;extra=="gke"']
    client = [r for r in found["requires"] if r.startswith("kubernetes")]
    assert [r.replace(" ", "") for r in client] == ['kubernetes<36,>=31;extra=="runs"']


def test_an_install_without_pulumi_gcp_renders_an_openshift_stack(
    venv_without_gcp: Path, project: Path, tmp_path: Path
) -> None:
    out = tmp_path / "barcelona"
    result = installed_render(venv_without_gcp, "barcelona", out, project)
    assert result.returncode == 0, result.stderr
    snapshot = ROOT / "tests" / "snapshots" / "barcelona"
    for name in ("kubernetes.yaml", "resources.json", "outputs.json"):
        assert (out / name).read_text() == (snapshot / name).read_text(), name


def test_an_install_without_pulumi_gcp_refuses_a_gke_stack_with_the_install_command(
    venv_without_gcp: Path, project: Path, tmp_path: Path
) -> None:
    out = tmp_path / "gcp-a3"
    result = installed_render(venv_without_gcp, "gcp-a3", out, project)
    assert_refused_with_the_install_command(result)
    assert not out.exists()


def test_the_public_api_without_pulumi_gcp_has_all_but_the_gke_components(
    venv_without_gcp: Path, tmp_path: Path
) -> None:
    probe = """
import json
from gpu_cluster.api import OpenShiftPlatform, TrainingStorage, GpuDirectNodes, build_platform
try:
    from gpu_cluster.api import GkePlatform
except ImportError as exc:
    print(json.dumps({"refused": str(exc)}))
"""
    found = json.loads(run("-c", probe, cwd=tmp_path, python=python(venv_without_gcp)))
    assert INSTALL_EXTRA in found["refused"]


def test_an_openshift_stack_with_a_shared_claim_never_imports_pulumi_gcp(tmp_path: Path) -> None:
    # Installed or not, an OpenShift render loads none of its 292 MB, TrainingStorage included
    # (its Cloud Storage and Lustre sides are GKE's).
    volume = "storage.volumes[0]"
    shared_claim = (
        f"{volume}.name=ckpt",
        f"{volume}.mountPath=/ckpt",
        f"{volume}.sharedClaim.size=1Ti",
        f"{volume}.sharedClaim.storageClass=ocs-storagecluster-cephfs",
    )
    args = ["--as-of", str(AS_OF.day), "--stack", "nerc-production", "--out", str(tmp_path)]
    args += [f"--set={edit}" for edit in shared_claim]
    probe = f"""
import sys
from gpu_cluster.offline.cli import offline_main
code = offline_main({args!r})
print(code, sorted(m for m in sys.modules if m.split(".")[0] == "pulumi_gcp"))
"""
    assert run("-c", probe, cwd=ROOT).splitlines()[-1].split() == ["0", "[]"]
    resources = json.loads((tmp_path / "resources.json").read_text())
    assert "gpu-cluster:storage:TrainingStorage" in {r["type"] for r in resources}


def test_the_program_refuses_a_gke_stack_without_pulumi_gcp_before_registering() -> None:
    # What `pulumi up` runs (__main__.py): the refusal is the program's RunError, not an import
    # error from deep inside the GKE components.
    probe = (
        WITHOUT_GCP
        + """
import pulumi
from gpu_cluster.offline.engine import ProgramRun, run_program
from tests.edits import edited_config
run = ProgramRun()
try:
    run_program(*edited_config("gcp-a3", ()), "gcp-a3", record_into=run)
except pulumi.RunError as exc:
    print(len(run.resources), str(exc))
"""
    )
    registered, _, message = run("-c", probe, cwd=ROOT).partition(" ")
    assert registered == "0"
    assert INSTALL_EXTRA in message


def python(venv: Path) -> str:
    return str(venv / "bin" / "python")
