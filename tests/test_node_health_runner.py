"""The stack's node health runner (workload.queue.healthGate.runner): the decisions of
scripts/node_health_runner.py, scripts/gpu-check.sh against stand-ins for DCGM's two commands,
and the objects the stack renders for it. tests/real/test_node_health_runner.py runs it on the
real API server, Kueue and the gate; tests/test_bad_config.py has the config it refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_cluster.facts import health
from gpu_cluster.plan.health_runner import CHECK_LABEL, GPU_CHECK_SCRIPT, HEALTH_RUNNER_SCRIPT
from gpu_cluster.plan.shipped import KUBE_API_SCRIPT
from tests import runner_api
from tests.conftest import GKE_RWX, ROOT, manifests, run_stack
from tests.runner_api import (
    JOBS_PATH,
    NOW,
    RecordedApi,
    check_jobs,
    check_pod,
    finished,
    gpu_node,
    health_metrics,
    runner,
)
from tests.script_modules import SCRIPTS
from tools.realtier.stacks import render

JOB_SET = ("workload.kind=jobset", "workload.command[0]=train.py")
GATE = ("workload.queue.healthGate.enabled=true", "workload.queue.healthGate.checks[0]=gpu")
RUNNER = (*GATE, "workload.queue.healthGate.runner.enabled=true")
GKE = ("gcp-a3", (*JOB_SET, *GKE_RWX, *RUNNER))
OPENSHIFT = (
    "nerc-production",
    (*JOB_SET, "workload.queue.topologyLevels[0]=example.com/rack", *RUNNER),
)
SCANNER = yaml.safe_load((ROOT / "tests" / "vendor" / "cluster_health_scanner.yaml").read_text())
GPU = runner.Check("gpu", "gpu-cluster-gpu-check")
SETTINGS = runner.Runner(
    namespace="training", nodes="pool=gpu", checks=(GPU,), recheck=12 * 3600, poll=15, retry=600
)


def ran(seconds_ago: float) -> dict[str, str]:
    return runner_api.ran("gpu", seconds_ago)


@pytest.mark.parametrize(
    ("labels", "is_due"),
    [
        ({}, True),
        (ran(3600), False),
        (ran(13 * 3600), True),
        ({"aiinfra/gpu-healthcheck-runtime-sec": "yesterday"}, True),
        # A failed node is checked again like a passed one: a repair shows at the next check.
        ({**ran(3600), "aiinfra/gpu-healthcheck-result": "fail"}, False),
        # A check that could not run is tried again after the retry delay (600 s), not 12 h.
        ({**ran(500), "aiinfra/gpu-healthcheck-result": "error"}, False),
        ({**ran(700), "aiinfra/gpu-healthcheck-result": "error"}, True),
    ],
)
def test_a_node_is_checked_when_its_last_result_is_missing_or_older_than_the_recheck_age(
    labels: dict[str, str], is_due: bool
) -> None:
    assert runner.due(labels, "gpu", NOW, SETTINGS) is is_due


def test_each_node_has_one_check_job_of_a_name_no_longer_than_a_label_value() -> None:
    long_template = "a" * 60 + "-gpu-check"
    names = {check_jobs.job_name(long_template, [f"node-{i}"]) for i in range(50)}
    assert len(names) == 50
    # Its pods' DNS names, <job>-<index>, are DNS labels too.
    assert all(len(f"{n}-0") <= 63 and not n.startswith("-") for n in names)
    assert check_jobs.job_name("t", ["gpu-1"]) == check_jobs.job_name("t", ["gpu-1"])


NODE_NAME = "gpu-7.example.com"
TEMPLATE: dict[str, Any] = {
    "template": {
        "metadata": {"labels": {"app": "check"}},
        "spec": {
            "restartPolicy": "Never",
            "affinity": {"podAntiAffinity": {"x": 1}, "nodeAffinity": {"y": 2}},
            "containers": [{"name": "gpu-check"}],
        },
    }
}


def test_a_check_job_runs_the_template_s_pod_once_on_its_node_by_name() -> None:
    job = runner.check_job(TEMPLATE, [NODE_NAME], GPU, SETTINGS)
    assert job["metadata"]["namespace"] == "training"
    assert job["metadata"]["annotations"] == {runner.NODES_ANNOTATION: NODE_NAME}
    assert job["metadata"]["labels"] == {"app": "check", CHECK_LABEL: "gpu"}
    assert job["spec"]["backoffLimitPerIndex"] == 0
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (1, 1)
    # A GPU check may wait for its node's GPUs as long as a run holds them.
    assert "activeDeadlineSeconds" not in job["spec"]
    # A disrupted pod (evicted, preempted) is not the node's failure: the Job tries again.
    disrupted = {"type": "DisruptionTarget", "status": "True"}
    assert job["spec"]["podFailurePolicy"] == {
        "rules": [{"action": "Ignore", "onPodConditions": [disrupted]}]
    }
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"] == {"app": "check", CHECK_LABEL: "gpu"}
    assert pod["spec"]["containers"] == [{"name": "gpu-check"}]
    # Pinned by the node's name, the template's other affinities kept.
    assert pod["spec"]["affinity"] == {
        "podAntiAffinity": {"x": 1},
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {
                                "key": "metadata.name",
                                "operator": "In",
                                "values": ["gpu-7.example.com"],
                            }
                        ]
                    }
                ]
            }
        },
    }
    # The template itself is not changed.
    assert TEMPLATE["template"]["spec"]["affinity"]["nodeAffinity"] == {"y": 2}


def condition(kind: str, status: str = "True", **extra: str) -> dict[str, str]:
    return {"type": kind, "status": status, **extra}


@pytest.mark.parametrize(
    ("conditions", "found"),
    [
        ([], None),
        ([condition("Suspended", "False")], None),
        ([condition("SuccessCriteriaMet"), condition("Complete")], "pass"),
        ([condition("FailureTarget"), condition("Failed", reason="DeadlineExceeded")], "fail"),
        ([condition("Failed", "False")], None),
    ],
)
def test_a_job_s_outcome_is_its_final_condition(
    conditions: list[dict[str, str]], found: str | None
) -> None:
    assert runner.outcome({"status": {"conditions": conditions}}) == found


def test_a_failure_is_told_by_the_pod_s_termination_message_else_by_a_reason() -> None:
    failed = {"status": {"conditions": [condition("Failed", reason="BackoffLimitExceeded")]}}
    said = {"state": {"terminated": {"exitCode": 1, "message": "| Memory | Fail |\n"}}}
    killed = {"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
    assert runner.why_failed(failed, [{"status": {"containerStatuses": [said]}}]) == (
        "| Memory | Fail |"
    )
    assert runner.why_failed(failed, [{"status": {"containerStatuses": [killed]}}]) == "OOMKilled"
    # The pod is gone (its deadline passed while it was pulled, or it was deleted).
    deadline = {
        "status": {"conditions": [condition("Failed", reason="DeadlineExceeded", message="")]}
    }
    assert runner.why_failed(deadline, []) == "DeadlineExceeded"


NODE = {
    "metadata": {"name": "gpu-1", "resourceVersion": "42", "labels": {"pool": "gpu"}},
    "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
}
OWN_TAINT = {"key": "aiinfra/gpu-healthcheck", "value": "failed", "effect": "NoSchedule"}


def test_a_result_is_written_as_cluster_health_scanner_writes_it() -> None:
    facts = SCANNER["checks"]["gpu"]
    failed = runner.node_patch(NODE, "gpu", runner.FAIL, NOW)
    assert failed["metadata"] == {
        "resourceVersion": "42",
        "labels": {facts["result_label"]["key"]: "fail", facts["time_label"]["key"]: "1800000000"},
    }
    assert failed["spec"]["taints"] == [*NODE["spec"]["taints"], facts["taint"]]  # type: ignore[index]
    assert facts["taint"] == OWN_TAINT
    tainted = {**NODE, "spec": {"taints": [*NODE["spec"]["taints"], OWN_TAINT]}}  # type: ignore[index]
    passed = runner.node_patch(tainted, "gpu", runner.PASS, NOW)
    assert (
        passed["metadata"]["labels"][facts["result_label"]["key"]] == facts["result_label"]["pass"]
    )
    assert passed["spec"]["taints"] == NODE["spec"]["taints"]  # type: ignore[index]
    # The last taint gone: the list is removed (a merge patch's null).
    alone = {**NODE, "spec": {"taints": [OWN_TAINT]}}
    assert runner.node_patch(alone, "gpu", runner.PASS, NOW)["spec"] == {"taints": None}


def test_the_runner_s_labels_and_taint_are_the_scanner_s_and_the_facts() -> None:
    facts = SCANNER["checks"]["gpu"]
    assert check_jobs.RESULT_LABEL.format("gpu") == health.RESULT_LABEL.format("gpu")
    assert check_jobs.TIME_LABEL.format("gpu") == health.TIME_LABEL.format("gpu")
    assert runner.TAINT_KEY.format("gpu") == health.TAINT_KEY.format("gpu") == facts["taint"]["key"]
    assert check_jobs.TAINT == {"value": health.TAINT_VALUE, "effect": health.TAINT_EFFECT}
    assert health.RUNNER_CHECKS == ("gpu", "nccl")
    assert {health.PAIR_CHECK} == check_jobs.PAIRED
    check = SCANNER["gpu_check"]
    # The image is the GPU Operator's DCGM release instead (tests/test_vendor_openshift.py).
    assert not health.DCGM_IMAGE.endswith(":" + check["dcgm_image_tag"])
    assert int(check["default_level"]) == health.DCGM_LEVEL


# gpu-check.sh against stand-ins for nv-hostengine and dcgmi that print what DCGM prints: `dcgmi
# diag -j`'s report (NVIDIA/DCGM 72fa3fe dcgmi/Diag.cpp HelperJsonBuildOutput, as jsoncpp styles
# it) and its exit status, a dcgmReturn_t (dcgmlib/dcgm_structs.h): -30 DCGM_ST_NVVS_ERROR is
# 226, -51 DCGM_ST_NVVS_ISOLATE_ERROR 205, -21 DCGM_ST_CONNECTION_NOT_VALID 235.
DISCOVERY = "8 GPUs found.\n+--------+\n| GPU ID | Device Information |\n"
NVVS_ERROR, ISOLATE_ERROR, NO_CONNECTION = 226, 205, 235
GPU_SERVICE = "nvidia-dcgm.nvidia-gpu-operator.svc:5555"


def report(*errors: tuple[int, int, int, str]) -> str:
    """A `dcgmi diag -j` report of one memory test on GPU 3: Pass, or Fail with `errors`, each
    (error_id, error_category, error_severity, warning)."""
    warnings = ",\n".join(
        f'{{\n"error_category" : {category},\n"error_id" : {code},\n'
        f'"error_severity" : {severity},\n"warning" : "{words}"\n}}'
        for code, category, severity, words in errors
    )
    status = "Fail" if errors else "Pass"
    detail = f',\n"warnings" : [\n{warnings}\n]' if errors else ""
    return (
        '{\n"DCGM Diagnostic" : {\n"test_categories" : [\n{\n"category" : "Hardware",\n'
        '"tests" : [\n{\n"name" : "memory",\n"results" : [\n{\n"entity_group" : "GPU",\n'
        f'"entity_group_id" : 1,\n"entity_id" : 3,\n"status" : "{status}"{detail}\n}}\n]\n}}\n]\n'
        "}\n]\n}\n}\n"
    )


PASSED = report()
# (error_id, category, severity) as dcgmlib/dcgm_errors.h numbers them and
# dcgmlib/src/dcgm_errors.c rates them:
# DCGM_FR_FAULTY_MEMORY: ISOLATE (2), HARDWARE_MEMORY (10).
FAULTY_MEMORY = (52, 10, 2, "Memory test failed on GPU 3")
# DCGM_FR_LOW_BANDWIDTH: TRIAGE (4), HARDWARE_PCIE (13).
LOW_BANDWIDTH = (30, 13, 4, "PCIe bandwidth too low on GPU 3")
# DCGM_FR_NO_ACCESS_TO_FILE: CONFIG (5), SOFTWARE_OTHER (8): a test this pod may not run.
NO_ACCESS = (18, 8, 5, "No access to file /sys/bus/pci")
# DCGM_FR_CUDA_API: MONITOR (1), SOFTWARE_CUDA (6).
CUDA_API = (51, 6, 1, "cuInit failed")


def stand_ins(
    tmp_path: Path, diag_output: str, diag_status: int, answers: bool = True, diag_sleep: int = 0
) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nv-hostengine").write_text(
        '#!/bin/bash\necho "hostengine $*" >> "$CHECK_DIR/calls"\n'
    )
    discovery = f'printf %s "{DISCOVERY}"; exit 0' if answers else "echo refused; exit 1"
    (tmp_path / "diag-output").write_text(diag_output)
    (bin_dir / "dcgmi").write_text(
        "#!/bin/bash\n"
        # As dcgmi does on a signal: stop the diagnostic in the host engine, then end. Set
        # before the call is logged: a test that signals once it sees the call must not race it.
        'trap \'echo "dcgmi stopped" >> "$CHECK_DIR/calls"; exit 130\' TERM\n'
        'echo "dcgmi $*" >> "$CHECK_DIR/calls"\n'
        f'if [ "$1" = discovery ]; then {discovery}; fi\n'
        f"for _ in $(seq {diag_sleep}); do sleep 1; done\n"
        f'cat "{tmp_path / "diag-output"}"\n'
        f"exit {diag_status}\n"
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def check_env(tmp_path: Path, bin_dir: Path, host_engine: str) -> dict[str, str]:
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "DCGM_LEVEL": "2",
        "DCGM_HOST_ENGINE": host_engine,
        "DIAG_TIMEOUT_SECONDS": "30",
        "CHECK_DIR": str(tmp_path),
        "TERMINATION_LOG": str(tmp_path / "termination-log"),
        "HOSTENGINE_WAIT_SECONDS": "2",
    }


def gpu_check(
    tmp_path: Path, bin_dir: Path, host_engine: str = GPU_SERVICE, timeout_seconds: str = "30"
) -> tuple[subprocess.CompletedProcess[str], str]:
    env = {**check_env(tmp_path, bin_dir, host_engine), "DIAG_TIMEOUT_SECONDS": timeout_seconds}
    done = subprocess.run(
        ["bash", str(SCRIPTS / GPU_CHECK_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    termination = tmp_path / "termination-log"
    return done, termination.read_text() if termination.exists() else ""


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


def test_the_gpu_check_runs_on_the_gpu_operator_s_host_engine_and_starts_none(
    tmp_path: Path,
) -> None:
    done, said = gpu_check(tmp_path, stand_ins(tmp_path, PASSED, 0))
    assert done.returncode == 0, done.stderr
    assert said == ""
    assert calls(tmp_path) == [
        f"dcgmi discovery --host {GPU_SERVICE} --list",
        f"dcgmi diag --host {GPU_SERVICE} --run 2 -j",
    ]
    assert "passed" in done.stdout


def test_with_its_own_host_engine_the_check_starts_it_and_stops_it(tmp_path: Path) -> None:
    done, _ = gpu_check(tmp_path, stand_ins(tmp_path, PASSED, 0), host_engine="own")
    assert done.returncode == 0, done.stderr
    made = calls(tmp_path)
    assert made[0].startswith("hostengine --pid")
    assert made[-2] == "dcgmi diag --run 2 -j"  # no --host: its own, on localhost
    assert made[-1].startswith("hostengine --term")  # stopped on the way out


@pytest.mark.parametrize(
    ("output", "status", "words"),
    [
        (report(FAULTY_MEMORY), NVVS_ERROR, "Memory test failed on GPU 3"),
        (report(LOW_BANDWIDTH), NVVS_ERROR, "PCIe bandwidth too low on GPU 3"),
        # DCGM's own verdict: an ISOLATE error, whatever the report.
        ("Error: isolate", ISOLATE_ERROR, "Error: isolate"),
        (report(NO_ACCESS, FAULTY_MEMORY), NVVS_ERROR, "Memory test failed on GPU 3"),
    ],
    ids=["isolate-severity", "hardware-category", "isolate-status", "setup-and-hardware"],
)
def test_the_gpu_check_fails_the_gpus_only_on_an_error_dcgm_rates_as_theirs(
    tmp_path: Path, output: str, status: int, words: str
) -> None:
    done, said = gpu_check(tmp_path, stand_ins(tmp_path, output, status))
    assert done.returncode == 1, done.stderr
    assert said.startswith(f"dcgmi diag --run 2 (exit {status}): ")
    assert words in said


@pytest.mark.parametrize(
    ("output", "status", "words"),
    [
        # A plugin's Fail that is only the setup's: this pod may not read a file.
        (report(NO_ACCESS), NVVS_ERROR, "only errors of its setup, none of the GPUs: "),
        (report(CUDA_API), NVVS_ERROR, "cuInit failed"),
        # Errors of the run itself come without a report.
        ("Error: plugin failed to load", NVVS_ERROR, "Error: plugin failed to load"),
        ("Error: Unable to connect to host engine.", NO_CONNECTION, "could not run (exit 235)"),
    ],
    ids=["no-access", "cuda-api", "run-error", "no-connection"],
)
def test_a_check_that_could_not_judge_the_gpus_says_so_and_fails_nothing(
    tmp_path: Path, output: str, status: int, words: str
) -> None:
    done, said = gpu_check(tmp_path, stand_ins(tmp_path, output, status))
    assert done.returncode == 75, done.stderr  # EX_TEMPFAIL, sysexits.h
    assert words in said
    assert "gpu-check: NOT RUN: " in done.stderr


def test_a_host_engine_that_never_answers_is_named_and_no_diagnostic_runs(
    tmp_path: Path,
) -> None:
    done, said = gpu_check(tmp_path, stand_ins(tmp_path, PASSED, 0, answers=False))
    assert done.returncode == 75
    assert said.startswith(f"no answer from the GPU Operator's host engine ({GPU_SERVICE}): ")
    assert "ClusterPolicy dcgm.enabled" in said
    assert not [c for c in calls(tmp_path) if c.startswith("dcgmi diag")]


def test_a_diagnostic_past_its_time_is_stopped_and_judges_nothing(tmp_path: Path) -> None:
    bin_dir = stand_ins(tmp_path, PASSED, 0, diag_sleep=30)
    done, said = gpu_check(tmp_path, bin_dir, timeout_seconds="1")
    assert done.returncode == 75, done.stderr
    assert "dcgmi stopped" in calls(tmp_path)  # told to stop the diagnostic in the host engine
    assert "did not end within 1 s" in said


def test_sigterm_stops_the_diagnostic_and_judges_nothing(tmp_path: Path) -> None:
    bin_dir = stand_ins(tmp_path, PASSED, 0, diag_sleep=30)
    check = subprocess.Popen(
        ["bash", str(SCRIPTS / GPU_CHECK_SCRIPT)],
        env=check_env(tmp_path, bin_dir, GPU_SERVICE),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = tmp_path / "calls"
    while not (started.exists() and "dcgmi diag" in started.read_text()):
        assert check.poll() is None, check.communicate()
    check.terminate()
    _, err = check.communicate(timeout=30)
    assert check.returncode == 75, err
    assert "dcgmi stopped" in calls(tmp_path)
    assert "stopped (SIGTERM)" in (tmp_path / "termination-log").read_text()


def by_name(run: Any, kind: str, suffix: str) -> dict[str, Any]:
    (found,) = (m for m in manifests(run, kind) if m["metadata"]["name"].endswith(suffix))
    return found


@pytest.mark.parametrize(("stack", "overrides"), [GKE, OPENSHIFT], ids=["gke", "openshift"])
def test_the_runner_checks_the_flavor_s_nodes_with_the_training_pod_s_gpus(
    stack: str, overrides: tuple[str, ...], tmp_path: Path
) -> None:
    rendered = render(stack, overrides)
    run, s = rendered.run, rendered.settings
    (flavor,) = manifests(run, "ResourceFlavor")
    deployment = by_name(run, "Deployment", "node-health-runner")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    selector = ",".join(f"{k}={v}" for k, v in flavor["spec"]["nodeLabels"].items())
    assert env["HEALTH_RUNNER_NODES"] == selector
    assert env["HEALTH_RUNNER_RECHECK_SECONDS"] == str(12 * 3600)  # half of maxAgeHours
    (template,) = manifests(run, "PodTemplate")
    assert env["HEALTH_RUNNER_CHECKS"] == f"gpu={template['metadata']['name']}"
    # The scripts as they are in the repository, from the ConfigMaps they are mounted from.
    maps = {m["metadata"]["name"]: m["data"] for m in manifests(run, "ConfigMap")}
    (volume,) = pod["volumes"]
    shipped = maps[volume["configMap"]["name"]]
    assert shipped == {
        n: (SCRIPTS / n).read_text()
        for n in (
            HEALTH_RUNNER_SCRIPT,
            "health_check_jobs.py",
            "health_metrics.py",
            "prometheus_text.py",
            KUBE_API_SCRIPT,
        )
    }
    # ... which are all it needs: from them alone it starts, and asks for its settings.
    for name, text in shipped.items():
        (tmp_path / name).write_text(text)
    alone = subprocess.run(
        [sys.executable, "-E", str(tmp_path / HEALTH_RUNNER_SCRIPT)],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert alone.returncode == 78 and "bad or missing setting" in alone.stderr, alone.stderr
    check_pod = template["template"]["spec"]
    check_volume = next(v for v in check_pod["volumes"] if "configMap" in v)
    assert maps[check_volume["configMap"]["name"]] == {
        GPU_CHECK_SCRIPT: (SCRIPTS / GPU_CHECK_SCRIPT).read_text()
    }
    (check,) = check_pod["containers"]
    assert check["image"] == health.DCGM_IMAGE
    assert check["resources"]["limits"]["nvidia.com/gpu"] == str(s.gpus_per_node)
    assert check_pod["restartPolicy"] == "Never"
    assert check_pod["activeDeadlineSeconds"] == (2 + 15) * 60
    assert check_pod["automountServiceAccountToken"] is False
    # The GPU nodes' taints, and its own, so a failed node is checked again.
    training = manifests(run, "JobSet")[0]["spec"]["replicatedJobs"][0]["template"]["spec"]
    tolerated = training["template"]["spec"]["tolerations"]
    assert check_pod["tolerations"] == [
        *tolerated,
        {"key": "aiinfra/gpu-healthcheck", "operator": "Exists", "effect": "NoSchedule"},
    ]
    env_check = {e["name"]: e["value"] for e in check["env"]}
    assert env_check["DCGM_LEVEL"] == "2"
    # The GPU Operator's host engine on OpenShift (tests/test_vendor_openshift.py), on GKE its
    # own; level 2's two minutes plus ten before the diagnostic is stopped.
    engine = "nvidia-dcgm.nvidia-gpu-operator.svc:5555" if s.platform == "openshift" else "own"
    assert env_check["DCGM_HOST_ENGINE"] == engine
    assert env_check["DIAG_TIMEOUT_SECONDS"] == str((2 + 10) * 60)
    # A check that could not run is tried again when the gate retries a held run.
    assert env["HEALTH_RUNNER_RETRY_SECONDS"] == "600"
    # GKE's driver libraries are where GKE mounts them; OpenShift's where the toolkit puts them.
    assert ("LD_LIBRARY_PATH" in env_check) is (s.platform == "gke")
    # Restricted: no privilege, no capability, not root.
    assert check["securityContext"]["privileged"] is False
    assert check["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert check_pod["securityContext"]["runAsNonRoot"] is True
    assert "hostNetwork" not in check_pod and "hostPID" not in check_pod


def test_the_runner_may_write_nodes_only_through_its_admission_policy() -> None:
    rendered = render(*GKE)
    run, s = rendered.run, rendered.settings
    role = by_name(run, "Role", "node-health-runner")
    cluster_role = by_name(run, "ClusterRole", "node-health-runner")
    assert cluster_role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]}
    ]
    assert role["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list", "create", "delete"]},
        {
            "apiGroups": [""],
            "resources": ["podtemplates"],
            "resourceNames": [f"{s.name}-gpu-check"],
            "verbs": ["get"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    ]
    (policy,) = manifests(run, "ValidatingAdmissionPolicy")
    (binding,) = manifests(run, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    account = by_name(run, "Deployment", "node-health-runner")["spec"]["template"]["spec"][
        "serviceAccountName"
    ]
    user = f"system:serviceaccount:{s.namespace}:{account}"
    assert policy["spec"]["matchConditions"] == [
        {"name": "node-health-runner", "expression": f'request.userInfo.username == "{user}"'}
    ]
    assert policy["spec"]["failurePolicy"] == "Fail"
    written = next(v for v in policy["spec"]["variables"] if v["name"] == "written")
    assert yaml.safe_load(written["expression"]) == [
        health.RESULT_LABEL.format("gpu"),
        health.TIME_LABEL.format("gpu"),
    ]
    # The runner starts only once the policy binds it (the engine's order).
    runner_deployment = next(
        r for r in run.resources if r.type == "kubernetes:apps/v1:Deployment" and "runner" in r.name
    )
    binding_urn = next(
        r.urn
        for r in run.resources
        if r.type == "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
    )
    assert binding_urn in runner_deployment.options["dependsOn"]


def test_without_the_runner_the_stack_renders_none_of_it() -> None:
    run = run_stack("gcp-a3", *JOB_SET, *GKE_RWX, *GATE)
    assert manifests(run, "PodTemplate") == []
    assert manifests(run, "ValidatingAdmissionPolicy") == []
    assert [d["metadata"]["name"] for d in manifests(run, "Deployment")] == [
        "gpu-cluster-node-health-gate"
    ]


def test_checks_the_runner_does_not_run_are_named_in_a_warning() -> None:
    stack, overrides = GKE
    neper = (*overrides, "workload.queue.healthGate.checks[1]=neper")
    (warning,) = [w for w in run_stack(stack, *neper).warnings if "runner" in w]
    assert warning.startswith("gpu-cluster:workload.queue.healthGate.checks lists neper, which")
    # The default checks, gpu and nccl, are both the runner's.
    default = tuple(o for o in overrides if not o.startswith("workload.queue.healthGate.checks"))
    assert not [w for w in run_stack(stack, *default).warnings if "runner" in w]
    assert not [w for w in run_stack(stack, *overrides).warnings if "runner" in w]


def test_a_pass_records_finished_checks_clears_orphans_and_starts_the_due_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    nodes = [
        gpu_node("done", {}),
        gpu_node("busy", {}),
        gpu_node("fresh", ran(3600)),
        gpu_node("stale", ran(13 * 3600)),
        gpu_node("new", {}),
        # Failed by another check: the GPU check's pod could not be placed there.
        gpu_node("other", {}, [{"key": "aiinfra/nccl-healthcheck", "effect": "NoSchedule"}]),
    ]
    done = finished(runner.check_job(TEMPLATE, ["done"], GPU, SETTINGS), "pass")
    jobs = [
        done,
        finished(runner.check_job(TEMPLATE, ["busy"], GPU, SETTINGS), None),  # waits for GPUs
        finished(runner.check_job(TEMPLATE, ["gone"], GPU, SETTINGS), None),  # node left
    ]
    api = RecordedApi(nodes, jobs, {GPU.template: TEMPLATE}, [check_pod(done, "done", 0)])
    runner.reconcile(api, SETTINGS, NOW, set(), health_metrics.HealthMetrics())
    patch, *rest = api.writes
    assert patch[:2] == ("PATCH", "/api/v1/nodes/done")
    assert patch[2]["metadata"]["labels"]["aiinfra/gpu-healthcheck-result"] == "pass"
    assert [(m, p) for m, p, _ in rest] == [
        ("DELETE", f"{JOBS_PATH}/{check_jobs.job_name(GPU.template, ['done'])}"),
        ("DELETE", f"{JOBS_PATH}/{check_jobs.job_name(GPU.template, ['gone'])}"),
        ("POST", JOBS_PATH),
        ("POST", JOBS_PATH),
    ]
    assert api.started() == [("new",), ("stale",)]
    assert capsys.readouterr().out.splitlines() == [
        "done: gpu: pass",
        "new: gpu: checking",
        "stale: gpu: checking",
    ]


@pytest.mark.parametrize(
    ("pod_exit", "written"),
    [(1, {"fail"}), (None, set())],
    ids=["ran-and-failed", "never-started"],
)
def test_a_failed_check_is_the_node_s_result_only_if_it_ran_there(
    pod_exit: int | None, written: set[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A check pod that waited to its end (its image never came, say) says nothing of the
    node's GPUs: no result, no taint, and the node is checked again."""
    job = finished(runner.check_job(TEMPLATE, ["gpu-1"], GPU, SETTINGS), "fail")
    pod = check_pod(job, "gpu-1", pod_exit, "dcgmi diag --run 2 (exit 226): | Memory | Fail |")
    api = RecordedApi([gpu_node("gpu-1", {})], [job], {GPU.template: TEMPLATE}, [pod])
    runner.reconcile(api, SETTINGS, NOW, set(), health_metrics.HealthMetrics())
    assert {v[check_jobs.RESULT_LABEL.format("gpu")] for v in api.patched().values()} == written
    said = capsys.readouterr().out
    if written:
        assert "gpu-1: gpu: fail (dcgmi diag --run 2 (exit 226): | Memory | Fail |)" in said
    else:
        assert "gpu-1: gpu: not checked (gpu-1: the check did not run there" in said


OWN_TAINT_FAILED = {"key": "aiinfra/gpu-healthcheck", "value": "failed", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    "taints",
    [[], [OWN_TAINT_FAILED]],
    ids=["untainted", "tainted-by-an-earlier-failure"],
)
def test_a_check_that_could_not_run_is_an_error_and_never_taints_or_untaints(
    taints: list[dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """gpu-check.sh's exit 75: no host engine, a setup error. The node is labelled `error`
    (the gate keeps runs off it: no pass), its taints stay exactly as they were, and it is
    tried again after the retry delay."""
    job = finished(runner.check_job(TEMPLATE, ["gpu-1"], GPU, SETTINGS), "fail")
    why = "no answer from the GPU Operator's host engine (nvidia-dcgm...:5555)"
    pod = check_pod(job, "gpu-1", 75, why)
    api = RecordedApi([gpu_node("gpu-1", {}, taints)], [job], {GPU.template: TEMPLATE}, [pod])
    runner.reconcile(api, SETTINGS, NOW, set(), health_metrics.HealthMetrics())
    (patch,) = [body for method, _, body in api.writes if method == "PATCH"]
    assert patch["metadata"]["labels"]["aiinfra/gpu-healthcheck-result"] == "error"
    assert patch["spec"] == {"taints": taints or None}
    said = capsys.readouterr().out
    assert f"gpu-1: gpu: error: the check could not run ({why}); not tainted for it" in said
    # Labelled now: not due again until the retry delay has passed.
    labels = patch["metadata"]["labels"]
    assert not runner.due(labels, "gpu", NOW + 600, SETTINGS)
    assert runner.due(labels, "gpu", NOW + 601, SETTINGS)


@pytest.mark.parametrize(
    ("setting", "checks"),
    [
        ("gpu=t-gpu-check", (runner.Check("gpu", "t-gpu-check"),)),
        (
            "gpu=t-gpu-check nccl=t-nccl-check",
            (runner.Check("gpu", "t-gpu-check"), runner.Check("nccl", "t-nccl-check")),
        ),
        ("", None),
        ("gpu", None),
        ("=t-gpu-check", None),
    ],
)
def test_the_checks_setting_names_each_check_and_its_pod_template(
    setting: str, checks: tuple[Any, ...] | None
) -> None:
    if checks is None:
        with pytest.raises(ValueError, match="HEALTH_RUNNER_CHECKS"):
            runner.checks_from(setting)
    else:
        assert runner.checks_from(setting) == checks


@pytest.mark.parametrize(
    ("stack", "overrides", "kind", "endpoints", "scrapers"),
    [
        (*GKE, "PodMonitoring", "endpoints", {"kubernetes.io/metadata.name": "gke-gmp-system"}),
        (
            *OPENSHIFT,
            "PodMonitor",
            "podMetricsEndpoints",
            {"network.openshift.io/policy-group": "monitoring"},
        ),
    ],
    ids=["gke", "openshift"],
)
def test_the_platform_s_prometheus_scrapes_the_runner_and_nothing_else_reaches_it(
    stack: str,
    overrides: tuple[str, ...],
    kind: str,
    endpoints: str,
    scrapers: dict[str, str],
) -> None:
    """The runner serves its metrics (scripts/health_metrics.py) on its container's `metrics`
    port; the platform's scrape object selects its pod alone, and its NetworkPolicy lets only
    the platform's Prometheus in, on that port (the namespaces OpenShift's and GKE's managed
    collectors run in)."""
    run = render(stack, overrides).run
    deployment = by_name(run, "Deployment", "node-health-runner")
    template = deployment["spec"]["template"]
    (container,) = template["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    (port,) = container["ports"]
    assert (port["name"], str(port["containerPort"])) == (
        "metrics",
        env["HEALTH_RUNNER_METRICS_PORT"],
    )
    pod_labels = template["metadata"]["labels"]
    (scrape,) = (
        m
        for m in manifests(run, kind)
        if m["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    )
    # ... its pod alone: not the gate's, not the training pods.
    others = [
        d["spec"]["template"]["metadata"]["labels"]
        for d in manifests(run, "Deployment")
        if d is not deployment
    ]
    selector = scrape["spec"]["selector"]["matchLabels"]
    assert all(not selector.items() <= labels.items() for labels in others)
    (endpoint,) = scrape["spec"][endpoints]
    assert endpoint["port"] == "metrics"
    (policy,) = (
        p
        for p in manifests(run, "NetworkPolicy")
        if p["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    )
    assert policy["spec"]["ingress"] == [
        {
            "from": [{"namespaceSelector": {"matchLabels": scrapers}}],
            "ports": [{"port": "metrics", "protocol": "TCP"}],
        }
    ]


def test_the_pair_check_leaves_its_summary_where_the_runner_reads_it() -> None:
    """Rank 0 writes the summary to the file the kubelet takes the container's termination
    message from (the container's terminationMessagePath, /dev/termination-log unless set)."""
    run = render(
        "gcp-a3",
        (*JOB_SET, *GKE_RWX, *GATE[:1], "workload.queue.healthGate.checks[0]=nccl", RUNNER[-1]),
    ).run
    (template,) = manifests(run, "PodTemplate")
    (container,) = (
        c for c in template["template"]["spec"]["containers"] if c["name"] == "training"
    )
    env = {e["name"]: e.get("value") for e in container["env"]}
    path = container.get("terminationMessagePath", "/dev/termination-log")
    assert env["FABRIC_CHECK_MESSAGE_FILE"] == path
