"""`gpu-cluster new`: a new stack runs queued JobSets. Its file is an existing stack's config with
`workload.kind: jobset` and the changes asked for, read back (with go-yaml v3's rules, as the
Pulumi CLI reads it) as exactly that config; it is checked as the program checks config before
anything is written; secrets are not copied but named. A stack that leaves the kind unset keeps
its StatefulSet, with a warning."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_cluster.offline.config_path import apply_override
from gpu_cluster.offline.engine import run_program
from gpu_cluster.offline.new_stack import new_stack, stack_file_text
from gpu_cluster.offline.project import read_project
from gpu_cluster.offline.stack_files import stack_file_config
from tests.as_of import AS_OF
from tests.cli import ROOT, by_case, one_error, program_copy, tree
from tests.conftest import STACKS
from tests.stack_scalars import READ_AS_WRITTEN, stack_file

COMMAND = "workload.command[0]=/workspace/train.py"


def gpu_cluster(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_cluster", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the program with the shipped stack files."""
    shipped = {s: (ROOT / f"Pulumi.{s}.yaml").read_text() for s in STACKS}
    return program_copy(tmp_path / "project", shipped)


def config_of(project: Path, stack: str) -> dict[str, Any]:
    return stack_file_config(stack, project)


def test_a_new_stack_runs_queued_jobsets(project: Path, tmp_path: Path) -> None:
    result = gpu_cluster(
        "new", "--stack", "team-b", "--from", "nerc-production", "--set", COMMAND,
        "--set", "name=team-b", cwd=project,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"wrote {project / 'Pulumi.team-b.yaml'}; next: pulumi stack init team-b" in (
        result.stderr
    )
    expected = config_of(project, "nerc-production")
    for change in ("workload.kind=jobset", COMMAND, "name=team-b"):
        apply_override(expected, change)
    assert config_of(project, "team-b") == expected
    text = (project / "Pulumi.team-b.yaml").read_text()
    assert text.startswith("# Stack team-b: written by `gpu-cluster new` from nerc-production;")
    # The program renders it: the run is a JobSet, queued, with no StatefulSet.
    out = tmp_path / "out"
    render = gpu_cluster(
        "render", "--stack", "team-b", "--out", str(out), "--as-of", str(AS_OF.day), cwd=project
    )
    assert render.returncode == 0, render.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all((out / "kubernetes.yaml").read_text()) if d]
    assert "JobSet" in kinds and "LocalQueue" in kinds and "StatefulSet" not in kinds


@pytest.mark.parametrize("stack", STACKS)
def test_a_shipped_stack_written_anew_reads_back_as_its_config(project: Path, stack: str) -> None:
    """With the kind it states (gcp-a4 `jobset`, the others `statefulset`), the new file holds
    the source's config exactly: every value, nested and top-level, survives the write."""
    kind = config_of(project, stack)["gpu-cluster:workload"]["kind"]
    written = new_stack(
        read_project(project), "copy", stack, (f"workload.kind={kind}",), as_of=AS_OF
    )
    (project / "Pulumi.copy.yaml").write_text(written.text)
    assert config_of(project, "copy") == config_of(project, stack)
    runs = {"jobset": "queued JobSets", "statefulset": "a StatefulSet"}[kind]
    assert f"training runs as\n# {runs} (workload.kind)" in written.text
    assert any("keeps" in w and "gpu-cluster:name" in w for w in written.warnings)


@pytest.mark.parametrize(
    "scalar", [s for _, s in READ_AS_WRITTEN], ids=[case for case, _ in READ_AS_WRITTEN]
)
def test_every_value_a_stack_file_can_hold_is_written_so_it_reads_back_the_same(
    tmp_path: Path, scalar: str
) -> None:
    """Values that YAML 1.1 (the writer's) and go-yaml v3 (the CLI's) read differently, as a
    top-level value, in a map and in a list: the text a string is written as reads back as that
    string (`0o17`, `1_000` are quoted), numbers and booleans as themselves."""
    (tmp_path / "Pulumi.source.yaml").write_text(stack_file(scalar))
    config = stack_file_config("source", tmp_path)
    (tmp_path / "Pulumi.copy.yaml").write_text(stack_file_text(config))
    assert stack_file_config("copy", tmp_path) == config


def test_secrets_are_not_copied_and_are_named_with_the_command_that_sets_them(
    project: Path,
) -> None:
    source = (project / "Pulumi.nerc-production.yaml").read_text() + (
        "  gpu-cluster:secretEnv:\n"
        "    HF_TOKEN:\n"
        "      secure: v1:AAAA\n"
        "  other:tokens:\n"
        "    - plain\n"
        "    - secure: v1:BBBB\n"
    )
    (project / "Pulumi.with-secrets.yaml").write_text(source)
    result = gpu_cluster(
        "new", "--stack", "team-b", "--from", "with-secrets", "--set", COMMAND, cwd=project
    )
    assert result.returncode == 0, result.stderr
    text = (project / "Pulumi.team-b.yaml").read_text()
    assert "secure" not in text and "other:tokens" not in text
    assert config_of(project, "team-b")["gpu-cluster:secretEnv"] == {}
    for key in ("gpu-cluster:secretEnv.HF_TOKEN", "other:tokens"):
        assert (
            f"not copied, a secret of with-secrets: pulumi config set --secret --path "
            f"'{key}' VALUE --stack team-b" in result.stderr
        )


def test_unset_removes_a_key_before_the_sets(project: Path) -> None:
    result = gpu_cluster(
        "new", "--stack", "team-b", "--from", "barcelona", "--set", COMMAND,
        "--set", "storage.mode=rwx", "--set", "storage.storageClass=ocs-storagecluster-cephfs",
        "--unset", "openshift.prePull", "--set", "name=team-b", cwd=project,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = config_of(project, "team-b")
    assert "prePull" not in written["gpu-cluster:openshift"]
    assert written["gpu-cluster:storage"]["mode"] == "rwx"
    assert written["gpu-cluster:workload"] == {
        "kind": "jobset",
        "command": ["/workspace/train.py"],
    }


REFUSED = [
    (
        "per-pod storage under a JobSet",
        ("--stack", "team-b", "--from", "barcelona", "--set", COMMAND),
        "gpu-cluster:storage.mode = 'per-pod' needs workload.kind 'statefulset': a JobSet's pods "
        "share one template and so one set of claims; use storage.mode 'rwx' and a "
        "storage.storageClass that provisions ReadWriteMany claims, which storage.storageClass = "
        "'ocs-external-storagecluster-ceph-rbd' does not",
    ),
    (
        "OpenShift's shared claims on a Ceph RBD class",
        ("--stack", "team-b", "--from", "barcelona", "--set", COMMAND, "--set", "storage.mode=rwx"),
        "gpu-cluster:storage.storageClass = 'ocs-external-storagecluster-ceph-rbd': storage.mode "
        "'rwx' makes ReadWriteMany claims",
    ),
    (
        "GKE's shared claims on a Persistent Disk class",
        ("--stack", "team-b", "--from", "gcp-a3", "--set", COMMAND, "--set", "storage.mode=rwx"),
        "gpu-cluster:storage.storageClass = 'premium-rwo': storage.mode 'rwx' makes ReadWriteMany",
    ),
    (
        "no command",
        ("--stack", "team-b", "--from", "nerc-production"),
        "gpu-cluster:workload.command is required when workload.kind is 'jobset'",
    ),
    (
        "a key that is not set",
        ("--stack", "team-b", "--from", "nerc-production", "--unset", "rdma.mtu"),
        "--unset rdma.mtu: rdma is not set",
    ),
    (
        "an existing stack's name",
        ("--stack", "barcelona", "--from", "nerc-production", "--set", COMMAND),
        "Pulumi.barcelona.yaml exists: `new` never overwrites a stack's file",
    ),
    (
        "a name no stack can have",
        ("--stack", "../team-b", "--from", "nerc-production", "--set", COMMAND),
        "--stack '../team-b': a stack name is 1-100 letters, digits, '-', '_' or '.'",
    ),
    (
        "a source that does not exist",
        ("--stack", "team-b", "--from", "nowhere", "--set", COMMAND),
        "no stack file Pulumi.nowhere.yaml",
    ),
]


@by_case("args, says", REFUSED)
def test_a_stack_the_program_would_refuse_is_never_written(
    project: Path, args: tuple[str, ...], says: str
) -> None:
    before = tree(project.parent)
    result = gpu_cluster("new", *args, cwd=project)
    assert result.returncode == 2
    assert says in one_error(result.stderr)
    assert tree(project.parent) == before


def test_an_unset_kind_is_a_statefulset_with_a_warning_and_a_stated_one_is_quiet() -> None:
    config = {
        "gpu-cluster:platform": "openshift",
        "gpu-cluster:storage": '{"mode":"per-pod"}',
        "kubernetes:context": "barcelona",
    }
    unset = run_program(config, [], "engine")
    (warning,) = unset.warnings
    assert warning.startswith("gpu-cluster:workload.kind is unset: 'statefulset'")
    assert [m["kind"] for m in unset.manifests()].count("StatefulSet") == 1
    stated = copy.deepcopy(config) | {"gpu-cluster:workload": '{"kind":"statefulset"}'}
    assert run_program(stated, [], "engine").warnings == []
