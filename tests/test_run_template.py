"""A JobSet stack's run template and submitter Role in the render, and runs filled in from the
template as `gpu-cluster run submit` fills them (issue #40).

The real managers admitting runs made from it, as a submitter: tests/real/test_runs.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpu_cluster.facts.kueue import JOB_COMPLETION_INDEX_ANNOTATION
from gpu_cluster.offline.engine import ProgramRun
from gpu_cluster.plan.run_template import (
    JOB_SET_KEY,
    PARAMS_KEY,
    RunParams,
    RunRequest,
    RunRequestError,
    fill,
    parse_env,
)
from tests.conftest import manifests, one, run_stack

JOBSET = ("workload.kind=jobset", "workload.command[0]=/workspace/train.py")
STACKS = [("gcp-a4", ()), ("nerc-production", JOBSET)]
# Where each stack's runs keep checkpoints by default: gcp-a4's bucket mounted for checkpoints
# (its stack file), nerc-production's shared workspace claim.
CHECKPOINT_ROOTS = {"gcp-a4": "/checkpoints", "nerc-production": "/workspace/checkpoints"}


def template_of(run: ProgramRun) -> tuple[dict[str, Any], RunParams]:
    (config_map,) = (
        m for m in manifests(run, "ConfigMap") if m["metadata"]["name"].endswith("-run-template")
    )
    data = config_map["data"]
    return json.loads(data[JOB_SET_KEY]), RunParams.from_json(data[PARAMS_KEY])


def training(job_set: dict[str, Any]) -> dict[str, Any]:
    (replicated,) = job_set["spec"]["replicatedJobs"]
    (container,) = (
        c
        for c in replicated["template"]["spec"]["template"]["spec"]["containers"]
        if c["name"] == "training"
    )
    found: dict[str, Any] = container
    return found


def env_of(job_set: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in training(job_set)["env"]}


@pytest.mark.parametrize(("stack", "overrides"), STACKS)
def test_the_template_filled_with_the_stack_s_own_name_is_the_stack_s_jobset(
    stack: str, overrides: tuple[str, ...]
) -> None:
    run = run_stack(stack, *overrides)
    job_set = one(run, "JobSet")
    template, params = template_of(run)
    meta = job_set["metadata"]
    filled = fill(template, params, RunRequest(meta["name"]), meta["namespace"])
    # A submitted run adds its checkpoint directory, which the stack's own run never had (a
    # new env would replace a deployed stack's running JobSet on upgrade).
    env = training(filled)["env"]
    (added,) = (e for e in env if e["name"] == "CHECKPOINT_DIR")
    env.remove(added)
    assert filled["spec"] == job_set["spec"]
    assert added["value"] == f"{CHECKPOINT_ROOTS[stack]}/{meta['name']}"
    assert filled["metadata"]["labels"] == meta["labels"]
    # Its own annotations but the security scanners' (they are about the stack's render).
    scanned = {k for k in meta["annotations"] if k.startswith("checkov.io/")}
    assert filled["metadata"]["annotations"] == {
        k: v for k, v in meta["annotations"].items() if k not in scanned
    }


def test_a_run_gets_its_own_name_rendezvous_nodes_image_env_and_command() -> None:
    run = run_stack("gcp-a4")
    stack_job_set = one(run, "JobSet")
    template, params = template_of(run)
    request = RunRequest(
        "exp-7",
        nodes=1,
        image="example.com/trainer:v2",
        env=parse_env(["LR=0.1", "NCCL_DEBUG=INFO"]),
        command=("/workspace/other.py", "--steps", "10"),
    )
    filled = fill(template, params, request, "team-b")
    assert filled["metadata"]["name"] == "exp-7"
    assert filled["metadata"]["namespace"] == "team-b"
    (replicated,) = filled["spec"]["replicatedJobs"]
    assert replicated["template"]["spec"]["parallelism"] == 1
    assert replicated["template"]["spec"]["completions"] == 1
    env = env_of(filled)
    service = stack_job_set["spec"]["network"]["subdomain"]
    # Rank 0 as the JobSet controller names it: <jobset>-<replicatedJob>-<job>-<pod>.
    assert env["MASTER_ADDR"] == f"exp-7-node-0-0.{service}.team-b.svc.cluster.local"
    assert env["RDZV_ID"] == "team-b-exp-7"
    assert (env["NNODES"], env["TORCHRUN_NNODES"], env["WORLD_SIZE"]) == ("1", "1", "8")
    assert (env["LR"], env["NCCL_DEBUG"]) == ("0.1", "INFO")
    names = [e["name"] for e in training(filled)["env"]]
    assert len(names) == len(set(names))
    container = training(filled)
    assert container["image"] == "example.com/trainer:v2"
    stack_command = training(stack_job_set)["command"]
    # The admission gate, checks and launcher stay; the stack's script is replaced.
    assert container["command"] == [*stack_command[:-1], "/workspace/other.py", "--steps", "10"]
    # The rank still comes from the pod's completion index.
    (rank,) = (e for e in container["env"] if e["name"] == "NODE_RANK")
    assert JOB_COMPLETION_INDEX_ANNOTATION in rank["valueFrom"]["fieldRef"]["fieldPath"]


@pytest.mark.parametrize(
    ("request_", "named"),
    [
        (RunRequest("r", nodes=3), "quota holds 2"),
        (RunRequest("r", nodes=0), "at least 1"),
        (RunRequest("Bad_Name"), "run name 'Bad_Name'"),
        (RunRequest("x" * 41), "at most 40"),
    ],
)
def test_a_run_the_queue_or_the_api_would_refuse_is_refused(
    request_: RunRequest, named: str
) -> None:
    template, params = template_of(run_stack("gcp-a4"))
    with pytest.raises(RunRequestError, match=named):
        fill(template, params, request_, "training")


@pytest.mark.parametrize(("pair", "named"), [("NODE_RANK=3", "sets it itself"), ("LR", "NAME=")])
def test_env_the_run_sets_itself_or_without_a_value_is_refused(pair: str, named: str) -> None:
    with pytest.raises(RunRequestError, match=named):
        parse_env([pair])


def test_a_referenced_queue_has_no_quota_the_stack_knows() -> None:
    run = run_stack(
        "nerc-production", *JOBSET, "workload.queue.mode=reference", "workload.queue.name=shared"
    )
    _, params = template_of(run)
    assert params.max_nodes is None


def test_the_submitter_role_is_bound_to_the_configured_subjects_only() -> None:
    plain = run_stack("gcp-a4")
    roles = {r["metadata"]["name"]: r for r in manifests(plain, "Role")}
    role = roles["gpu-cluster-run-submitter"]
    verbs = {(tuple(r["apiGroups"]), r["resources"][0]): set(r["verbs"]) for r in role["rules"]}
    # Never update or patch a run, nor anything beyond the namespace's runs, pods and queue.
    assert verbs[(("jobset.x-k8s.io",), "jobsets")] == {"create", "list", "get", "delete"}
    assert all(not {"update", "patch", "*"} & v for v in verbs.values())
    (template_rule,) = (r for r in role["rules"] if r["resources"] == ["configmaps"])
    assert template_rule["resourceNames"] == ["gpu-cluster-run-template"]
    bindings = [
        b
        for b in manifests(plain, "RoleBinding")
        if b["roleRef"]["name"] == role["metadata"]["name"]
    ]
    assert bindings == []

    bound = run_stack(
        "gcp-a4",
        "workload.runs.submitters.groups[0]=ml-team",
        "workload.runs.submitters.serviceAccounts[0]=ci",
    )
    (binding,) = (
        b
        for b in manifests(bound, "RoleBinding")
        if b["roleRef"]["name"] == role["metadata"]["name"]
    )
    subjects = {(s["kind"], s["name"], s.get("namespace")) for s in binding["subjects"]}
    assert subjects == {("Group", "ml-team", None), ("ServiceAccount", "ci", "training")}


def test_a_statefulset_stack_publishes_no_template() -> None:
    run = run_stack("nerc-production")
    names = [m["metadata"]["name"] for m in manifests(run, "ConfigMap")]
    assert not [n for n in names if n.endswith("-run-template")]


def test_the_restart_strategy_and_grace_period_reach_the_stack_s_run_and_every_submitted_one() -> (
    None
):
    run = run_stack(
        "gcp-a4", "workload.restartStrategy=BlockingRecreate", "pod.terminationGraceSeconds=600"
    )
    template, params = template_of(run)
    for job_set in (one(run, "JobSet"), fill(template, params, RunRequest("r"), "training")):
        assert job_set["spec"]["failurePolicy"]["restartStrategy"] == "BlockingRecreate"
        (replicated,) = job_set["spec"]["replicatedJobs"]
        pod_spec = replicated["template"]["spec"]["template"]["spec"]
        assert pod_spec["terminationGracePeriodSeconds"] == 600


def test_each_run_gets_its_own_checkpoint_directory_which_the_submitter_may_override() -> None:
    template, params = template_of(run_stack("gcp-a4"))
    assert env_of(fill(template, params, RunRequest("a"), "t"))["CHECKPOINT_DIR"] == (
        "/checkpoints/a"
    )
    mine = RunRequest("b", env=parse_env(["CHECKPOINT_DIR=/checkpoints/shared-sweep"]))
    assert env_of(fill(template, params, mine, "t"))["CHECKPOINT_DIR"] == (
        "/checkpoints/shared-sweep"
    )
    configured = run_stack("gcp-a4", "workload.runs.checkpointDir=/workspace/ckpt")
    template, params = template_of(configured)
    assert env_of(fill(template, params, RunRequest("c"), "t"))["CHECKPOINT_DIR"] == (
        "/workspace/ckpt/c"
    )
