"""`gpu-cluster rights`: the cluster-level rights an OpenShift stack's `pulumi up` needs, and the
read of them with `oc auth can-i` (a fake `oc` on PATH answers as a user with given rights)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_cluster.offline.cli import main
from tests.conftest import BARCELONA_RWX

# `oc auth can-i` answers (kubectl's auth can-i: "yes", exit 0; "no", exit 1). The fake says yes
# to each command line (after `auth can-i`) listed one a line in $FAKE_OC_ALLOWED, no otherwise.
FAKE_OC = """#!/bin/sh
while [ "$1" != auth ]; do shift; done
shift 2
if grep -qxF -- "$*" "$FAKE_OC_ALLOWED"; then echo yes; exit 0; fi
echo no; exit 1
"""
SCC = "securitycontextconstraints.security.openshift.io"
# barcelona's training SCC, as its render names it: <namespace>-<name>-training.
BARCELONA_SCC = f"{SCC}/nccl-test-ml-dev-env-training"
# What cluster-admin holds, as far as barcelona's reads go.
CLUSTER_ADMIN = (
    f"create {SCC}",
    f"use {BARCELONA_SCC} -n nccl-test",
    "escalate roles.rbac.authorization.k8s.io -n nccl-test",
    "bind roles.rbac.authorization.k8s.io/ml-dev-env-use-scc -n nccl-test",
    "create namespaces",
    "create machineconfigs.machineconfiguration.openshift.io",
)
# A project admin of nccl-test: every namespaced object, no SCC and no grant of one.
PROJECT_ADMIN = ()


def fake_oc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allowed: tuple[str, ...]) -> None:
    oc = tmp_path / "bin" / "oc"
    oc.parent.mkdir(exist_ok=True)
    oc.write_text(FAKE_OC)
    oc.chmod(0o755)
    (tmp_path / "allowed").write_text("".join(f"{line}\n" for line in allowed))
    monkeypatch.setenv("FAKE_OC_ALLOWED", str(tmp_path / "allowed"))
    monkeypatch.setenv("PATH", f"{oc.parent}{os.pathsep}{os.environ['PATH']}")


def test_root_ipc_lock_needs_an_scc_and_the_right_to_grant_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["rights", "--stack", "barcelona"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rdma.memlock: root-ipc-lock (the SCC 'nccl-test-ml-dev-env-training'")
    assert f"oc --context barcelona auth can-i create {SCC}\n" in out
    assert f"oc --context barcelona auth can-i use {BARCELONA_SCC} -n nccl-test\n" in out
    assert "without it: rdma.memlock: preconfigured" in out


@pytest.mark.parametrize(
    ("sets", "needed"),
    [
        # The nodes allow the memory already, or an admin's MachineConfig does: no SCC.
        (("rdma.memlock=preconfigured",), ()),
        (("rdma.memlock=machineconfig", "rdma.machineConfig=reference"), ()),
        (
            ("rdma.memlock=machineconfig",),
            ("auth can-i create machineconfigs.machineconfiguration.openshift.io\n",),
        ),
        (
            ("rdma.memlock=machineconfig", "rdma.machineConfig=adopt"),
            (
                "auth can-i patch machineconfigs.machineconfiguration.openshift.io/"
                "99-worker-gpu-cluster-memlock\n",
            ),
        ),
        (("networkMode=tcp", "namespaceMode=create"), ("auth can-i create namespaces\n",)),
        # A queue the stack creates, with priorities runs may ask for: cluster-scoped classes.
        (
            (
                "networkMode=tcp",
                "workload.kind=jobset",
                "workload.command[0]=t.py",
                *BARCELONA_RWX,
                "workload.queue.priorityClasses[0].name=high",
                "workload.queue.priorityClasses[0].value=1000",
            ),
            ("auth can-i create workloadpriorityclasses.kueue.x-k8s.io\n",),
        ),
        # PodMonitors: OpenShift's monitoring-edit role, not a project admin's.
        (
            ("networkMode=tcp", "monitoring.runMetrics.enabled=true"),
            ("auth can-i create podmonitors.monitoring.coreos.com -n nccl-test\n",),
        ),
        # The console reads dashboards from a namespace of OpenShift's own.
        (
            ("networkMode=tcp", "monitoring.dashboard=true"),
            ("auth can-i create configmaps -n openshift-config-managed\n",),
        ),
    ],
)
def test_each_mode_lists_what_it_needs_and_no_more(
    sets: tuple[str, ...], needed: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a for s in sets for a in ("--set", s)]
    assert main(["rights", "--stack", "barcelona", *args]) == 0
    out = capsys.readouterr().out
    assert ("SecurityContext" in out, "securitycontextconstraints" in out) == (False, False)
    if not needed:
        assert out == "this stack needs no rights beyond a project admin's in its namespace\n"
    for line in needed:
        assert line in out


def test_check_passes_for_cluster_admin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_oc(tmp_path, monkeypatch, CLUSTER_ADMIN)
    assert main(["rights", "--stack", "barcelona", "--check"]) == 0
    out = capsys.readouterr().out
    assert "granting its use): held\n" in out
    assert f"auth can-i use {BARCELONA_SCC} -n nccl-test  # yes\n" in out


def test_check_fails_for_a_project_admin_and_names_the_way_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The seed's operators: admins of their project, no SCC rights (its cluster file)."""
    fake_oc(tmp_path, monkeypatch, PROJECT_ADMIN)
    assert main(["rights", "--stack", "barcelona", "--check"]) == 1
    out = capsys.readouterr().out
    assert "granting its use): MISSING\n" in out
    assert f"auth can-i create {SCC}  # no\n" in out
    assert "without it: rdma.memlock: preconfigured" in out


def test_creating_the_scc_is_not_enough_without_the_right_to_grant_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """RBAC's escalation prevention: the Role granting `use` needs that use (or escalate and
    bind), even for a user who may create SCCs."""
    fake_oc(tmp_path, monkeypatch, (f"create {SCC}",))
    assert main(["rights", "--stack", "barcelona", "--check"]) == 1
    assert "MISSING" in capsys.readouterr().out
    fake_oc(tmp_path, monkeypatch, (f"create {SCC}", *CLUSTER_ADMIN[2:4]))
    assert main(["rights", "--stack", "barcelona", "--check"]) == 0


def test_a_read_without_an_answer_stops_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    oc = tmp_path / "oc"
    oc.write_text("#!/bin/sh\necho 'error: You must be logged in to the server' >&2\nexit 1\n")
    oc.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert main(["rights", "--stack", "barcelona", "--check"]) == 2
    err = capsys.readouterr().err
    assert "gave no yes or no: error: You must be logged in to the server" in err
