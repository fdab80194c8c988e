"""`gpu-cluster run` on the real managers (issue #40): a person bound only to the stack's
submitter Role submits named runs from the run template the stack published, lists them as Kueue
queues and admits them, reads one's status, stops the stack's own run so the next is admitted,
and is refused a run larger than the queue's quota before anything is created; a person without
the Role is told which right is missing.

The stack is gcp-a3 as a JobSet stack (tests/real/test_jobset_stack.py: its GPU node copied into
four nodes in three GCE topology blocks, only block-2 with two; the queue's quota is two nodes).
The command runs in this process, as the `gpu-cluster` entry point does, on a kubeconfig whose
context is the stack's and whose credentials are a ServiceAccount's token.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from gpu_cluster.offline.cli import main
from gpu_cluster.plan.run_template import submitter_role_name
from tests.conftest import ROOT, stack_context
from tests.real.cluster_state import deploy_on
from tests.real.conftest import Cluster
from tests.real.queue_state import admitted, explain, running
from tests.real.test_jobset_stack import OVERRIDES, nodes_in_blocks
from tools.realtier.engine import stack_kubeconfig
from tools.realtier.kube import Kube, wait_for
from tools.realtier.stacks import render

pytestmark = pytest.mark.real

STACK = "gcp-a3"
SUBMITTER, OUTSIDER = "submitter", "outsider"
CONFIG = (*OVERRIDES, f"workload.runs.submitters.serviceAccounts[0]={SUBMITTER}")
JOBSET = "jobset.x-k8s.io/v1alpha2"


class RunCli:
    """`gpu-cluster run VERB --stack gcp-a3 ...` as one ServiceAccount of the namespace."""

    def __init__(
        self,
        cluster: Cluster,
        account: str,
        namespace: str,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        kube = cluster.kube
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": namespace},
            }
        )
        token = kube.service_account_token(account, namespace)
        self.kubeconfig = stack_kubeconfig(
            cluster.kubeconfig, stack_context(STACK), tmp_path / account, {"token": token}
        )
        self.capsys, self.monkeypatch = capsys, monkeypatch

    def __call__(self, verb: str, *args: str) -> tuple[int, str, str]:
        """The exit code, stdout and stderr."""
        self.monkeypatch.setenv("KUBECONFIG", str(self.kubeconfig))
        sets = [f"--set={s}" for s in CONFIG]
        code = main(["run", verb, "--stack", STACK, *sets, "--project-dir", str(ROOT), *args])
        out, err = self.capsys.readouterr()
        return code, out, err


def states(listed: str) -> dict[str, tuple[str, str]]:
    """NAME -> (STATE, NODES) from `run list`."""
    rows = [line.split() for line in listed.splitlines()]
    assert rows[0] == ["NAME", "STATE", "NODES", "RESTARTS", "AGE"], listed
    return {r[0]: (r[1], r[2]) for r in rows[1:]}


def job_set_names(kube: Kube, namespace: str) -> set[str]:
    return {j["metadata"]["name"] for j in kube.list(JOBSET, "JobSet", namespace)}


def test_a_submitter_submits_lists_follows_and_stops_runs_without_the_stack(
    queued_cluster: Cluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster, kube = queued_cluster, queued_cluster.kube
    stack = render(STACK, CONFIG)
    s = stack.settings
    namespace, own_run = s.namespace, s.name
    why = functools.partial(explain, cluster, namespace)
    deploy_on(kube, nodes_in_blocks(stack), stack)
    # The stack's own run takes the whole quota (two nodes).
    wait_for("the stack's run admitted", functools.partial(admitted, kube, namespace, own_run))
    run = RunCli(cluster, SUBMITTER, namespace, tmp_path, capsys, monkeypatch)

    code, out, err = run("submit", "--name", "big", "--nodes", "2", "--", "/workspace/a.py")
    assert code == 0, err
    assert out.startswith("submitted run big (2 nodes)"), out

    def listed(expected: dict[str, str]) -> dict[str, tuple[str, str]] | None:
        code, out, err = run("list")
        assert code == 0, err
        found = states(out)
        return found if {k: v[0] for k, v in found.items()} == expected else None

    found = wait_for(
        "the stack's run running, the new run queued",
        lambda: listed({own_run: "running", "big": "queued"}),
        explain=why,
    )
    assert found["big"][1] == "2"

    # Over the quota: refused, and nothing created.
    before = job_set_names(kube, namespace)
    code, _, err = run("submit", "--name", "huge", "--nodes", "3")
    assert code == 2
    assert "the queue's quota holds 2 GPU nodes" in err, err
    assert job_set_names(kube, namespace) == before

    # The stack's own run stopped: the queued run is admitted and runs; a run submitted now waits
    # for it. (Submitted while both waited, the smaller could go first: Kueue's default
    # BestEffortFIFO admits a newer run that fits while an older one does not, and the quota is
    # freed as the stopped run's objects go.)
    code, out, err = run("stop", own_run)
    assert code == 0, err
    wait_for(
        "the stack's run gone", lambda: own_run not in job_set_names(kube, namespace), explain=why
    )
    pods = wait_for(
        "big running", functools.partial(running, kube, namespace, "big", 2), explain=why
    )
    code, out, err = run(
        "submit", "--name", "small", "--nodes", "1", "--env", "LR=0.1", "--", "/workspace/b.py"
    )
    assert code == 0, err
    found = wait_for(
        "big listed running, small queued",
        lambda: listed({"big": "running", "small": "queued"}),
        explain=why,
    )
    assert (found["big"][1], found["small"][1]) == ("2", "1")
    code, out, err = run("status", "big")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "run big: running, 2 nodes, 0 restarts", out
    assert lines[1].startswith("admission: admitted by ClusterQueue"), out
    # The pods' rows, up to the blank line before the ledger.
    pod_lines = [line.split() for line in lines[3 : lines.index("")]]
    nodes = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    assert sorted((r[0], r[3]) for r in pod_lines) == sorted((r[0], nodes[r[1]]) for r in pod_lines)
    assert sorted(r[0] for r in pod_lines) == ["0", "1"]
    # The pods' start by phase (the timeline's columns: name, UTC time, seconds since
    # submitted); a submitter's Role reads no nodes, and the table says so.
    start = lines[lines.index("the current pods' start:") + 2 :]
    at = {line[:14].strip(): line[14:36].strip() for line in start[: start.index("")]}
    assert all(at[p] != "-" for p in ("submitted", "admitted", "scheduled", "started")), out
    assert at["nodes ready"] == "-", out
    assert "(not readable with your rights, so '-': nodes)" in out, out
    code, out, err = run("status", "small")
    assert out.splitlines()[1].startswith("admission: waiting in LocalQueue"), out

    # The run the user asked for: its rendezvous, its env, its command after the stack's gate.
    (big,) = (
        p
        for p in pods
        if p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"
    )
    env = {e["name"]: e.get("value") for e in big["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"].startswith(f"{big['spec']['hostname']}.{big['spec']['subdomain']}.")
    assert big["spec"]["containers"][0]["command"][-1] == "/workspace/a.py"

    # Unknown runs and ranks are said so.
    code, _, err = run("status", "nope")
    assert code == 2
    assert f"no run 'nope' in namespace '{namespace}'" in err, err
    code, _, err = run("logs", "big", "--rank", "5")
    assert code == 2
    assert "has no pod of rank 5" in err, err


def test_without_the_submitter_role_the_missing_right_is_named(
    queued_cluster: Cluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube = queued_cluster.kube
    stack = render(STACK, CONFIG)
    namespace = stack.settings.namespace
    kube.create_all(o for o in stack.objects() if o["kind"] in ("Namespace", "ConfigMap"))
    run = RunCli(queued_cluster, OUTSIDER, namespace, tmp_path, capsys, monkeypatch)

    code, _, err = run("submit", "--name", "mine")
    assert code == 2
    role = submitter_role_name(stack.settings.name)
    template = f"{stack.settings.name}-run-template"
    assert err.strip() == (
        f"error: no right to get configmaps {template!r}, get localqueues.kueue.x-k8s.io, "
        f"create jobsets.jobset.x-k8s.io in namespace {namespace!r}: ask the cluster's admins "
        f"for the Role {role!r} there (stack config workload.runs.submitters)"
    )
    code, _, err = run("stop", "anything")
    assert code == 2
    assert "get jobsets.jobset.x-k8s.io, delete jobsets.jobset.x-k8s.io" in err, err
    assert job_set_names(kube, namespace) == set()
