"""The fabric check ships with every stack that enables it, with the expectation of its mode."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from subprocess import CompletedProcess

import pytest
import yaml

from gpu_cluster.facts.machines import MACHINES
from gpu_cluster.offline.engine import run_program
from gpu_cluster.offline.stack_files import engine_config
from gpu_cluster.plan.launch import quantity_bytes
from gpu_cluster.plan.verify import GKE_CHECK_MAX_BYTES
from tests.conftest import (
    GKE_RWX,
    ROOT,
    container,
    env_of,
    run_stack,
    scripts_data,
    stack_context,
)
from tests.edits import A4_STATEFULSET
from tests.test_allreduce_check import ac, figures


def verify_argv(stack: str, *overrides: str) -> list[str]:
    """What launch-all.sh is started with: CLI TARGET... NAMESPACE STATEFULSET NODES
    COMMAND..."""
    argv = shlex.split(str(run_stack(stack, *overrides).outputs["verifyCommand"]))
    assert argv[:3] == ["python3", "-m", "gpu_cluster.launch_all"]
    return argv[3:]


def verify_args(stack: str, *overrides: str) -> list[str]:
    argv = verify_argv(stack, *overrides)
    return argv[argv.index("/opt/gpu-cluster/allreduce_check.py") + 1 :]


# Barcelona's NICs: their speed is the node's, read by the check from each pod's net1..net4; the
# fraction cluster-health-scanner holds RoCE machines to, A3 Ultra / A4's BANDWIDTH_THRESHOLD 250
# (81c525d nccl_healthcheck/a3ultra.yaml, a4.yaml) of 8 x 400 Gb/s = 400 GB/s (cloud.google.com/
# compute/docs/gpus/gpu-network-bandwidth).
LINE_RATE = ("--line-rate-fraction", "0.625", "--line-rate-interfaces", "net1,net2,net3,net4")


@pytest.mark.parametrize(
    ("stack", "overrides", "transport", "threshold", "max_bytes"),
    [
        ("barcelona", (), "ib", LINE_RATE, "1G"),
        # TCP over 100 Gb/s reaches 4-6 GB/s busbw at best (NVIDIA/nccl#450); 2.5 is below it.
        ("nerc-production", (), "socket", ("--expected-busbw-gbps", "2.5"), "1G"),
        # GKE: BANDWIDTH_THRESHOLD and END_MESSAGE_SIZE "8G" of GoogleCloudPlatform/
        # cluster-health-scanner deploy/helm/health_checks/nccl_healthcheck/<file> at 81c525d:
        ("a3-high", (), "tcpx", ("--expected-busbw-gbps", "60"), "8G"),  # a3.yaml
        ("gcp-a3", (), "tcpxo", ("--expected-busbw-gbps", "150"), "8G"),  # a3plus.yaml
        # (gcp-a4 as a StatefulSet: a JobSet stack checks the fabric in its runs, no verifyCommand)
        (
            "gcp-a4",
            (*A4_STATEFULSET, "gcp.machineType=a3-ultragpu-8g"),
            "gib",
            ("--expected-busbw-gbps", "250"),  # a3ultra.yaml
            "8G",
        ),
        ("gcp-a4", A4_STATEFULSET, "gib", ("--expected-busbw-gbps", "250"), "8G"),  # a4.yaml
        # Plain TCP on an A3 machine is not its GPUDirect fabric: the TCP floor and size.
        ("gcp-a3", ("networkMode=tcp",), "socket", ("--expected-busbw-gbps", "2.5"), "1G"),
    ],
)
def test_each_stack_checks_its_own_transport_and_bandwidth(
    stack: str,
    overrides: tuple[str, ...],
    transport: str,
    threshold: tuple[str, ...],
    max_bytes: str,
) -> None:
    args = verify_args(stack, *overrides)
    assert args[args.index("--expected-transport") + 1] == transport
    first = args.index(threshold[0])
    assert tuple(args[first : first + len(threshold)]) == threshold
    # One threshold: given, or derived from the line rate.
    assert ("--expected-busbw-gbps" in args) != ("--line-rate-fraction" in args)
    assert args[args.index("--max-bytes") + 1] == max_bytes
    script = scripts_data(run_stack(stack))["allreduce_check.py"]
    assert script == (ROOT / "scripts" / "allreduce_check.py").read_text()


def test_the_checks_run_from_what_the_config_map_ships(tmp_path: Path) -> None:
    """The fabric and storage checks import their modules from beside them: in a folder with
    only the ConfigMap's files, as in the pod, both start (and answer --help)."""
    data = scripts_data(run_stack("gcp-a4"))
    for name, text in data.items():
        (tmp_path / name).write_text(text)
    for script in ("allreduce_check.py", "storage_check.py"):
        shown = subprocess.run(
            [sys.executable, "-E", str(tmp_path / script), "--help"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert shown.returncode == 0 and shown.stdout.startswith("usage:"), shown.stderr


SCANNER = yaml.safe_load((ROOT / "tests" / "vendor" / "cluster_health_scanner.yaml").read_text())


def test_the_gke_floors_hold_the_quantity_the_scanner_measures_to_the_scanner_s_threshold() -> None:
    check = SCANNER["nccl_check"]
    floors = {name: m.busbw_floor_gbps for name, m in MACHINES.items()}
    assert {m: float(v) for m, v in check["bandwidth_threshold"].items()} == floors
    # all_gather_perf's "Avg bus bandwidth" over -b 2G -e 8G -f 2: the check's own defaults
    # average the same sizes of its sweep up to the plan's 8G, with all_gather's factor.
    assert check["benchmark"] == "all_gather_perf"
    defaults = ac.build_parser().parse_args([])
    assert defaults.factor == check["step_factor"]
    sizes = ac.size_sweep(8, ac.parse_size(GKE_CHECK_MAX_BYTES), defaults.factor)
    window = sizes[-defaults.avg_sizes :]
    assert window[0] == ac.parse_size(check["start_message_size"])
    assert window[-1] == ac.parse_size(check["end_message_size"])
    assert check["busbw_factor"] == "(n-1)/n"
    assert figures.bus_bandwidth_gbps(16.0, 16) == 15.0


def test_the_command_runs_on_every_pod_with_a_fixed_world() -> None:
    assert verify_argv("barcelona", "nodes=4")[:12] == [
        *("oc", "--context", "barcelona", "nccl-test", "ml-dev-env", "4"),
        *("env", "TORCHRUN_NNODES=4", "RDZV_ID=verify-ml-dev-env"),
        "/opt/gpu-cluster/launch-torchrun.sh",
        "/opt/gpu-cluster/allreduce_check.py",
        "--backend",
    ]


# A stand-in `oc`: pod 1's check fails at once; pod 0's waits (as a rank waits in the rendezvous
# for a peer that died) until launch-stop.sh runs.
FAKE_OC = """#!/usr/bin/env bash
echo "$*" >>"$STATE/oc.log"
case "$*" in
  *" get pod "*) echo pod/ml-dev-env-0 ;;
  *launch-stop.sh) touch "$STATE/stopped" ;;
  # launch-status.sh: pod 1's check has failed and pod 0's is stopped, so each launcher has
  # ended ("not running", 3) and launch-all takes the exec's exit as the pod's own, not as a
  # lost stream to follow (which it would ask again for 300 s).
  *ml-dev-env-1*launch-status.sh) exit 3 ;;
  *launch-status.sh) [[ -e $STATE/stopped ]] && exit 3; exit 0 ;;
  *ml-dev-env-1*) exit 1 ;;
  *) for _ in $(seq 300); do [[ -e $STATE/stopped ]] && exit 143; sleep 0.1; done ;;
esac
"""


def test_a_pod_that_fails_stops_the_check_everywhere_and_sets_the_exit_code(
    tmp_path: Path,
) -> None:
    (tmp_path / "oc").write_text(FAKE_OC)
    (tmp_path / "oc").chmod(0o755)
    env = {"PATH": f"{tmp_path}:{os.environ.get('PATH', '/usr/bin:/bin')}", "STATE": str(tmp_path)}
    command = str(run_stack("barcelona").outputs["verifyCommand"])
    result = subprocess.run(
        ["bash", "-c", command], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 1, result.stderr
    assert "ml-dev-env-1 failed (exit 1)" in result.stderr
    log = (tmp_path / "oc.log").read_text().splitlines()
    stops = [line for line in log if line.endswith("/opt/gpu-cluster/launch-stop.sh")]
    assert sorted(line.split()[5] for line in stops) == ["ml-dev-env-0", "ml-dev-env-1"]
    # Every call names the stack's context: the look-up of pod 0 first, then the pods' execs.
    assert log[0] == "--context barcelona get pod -n nccl-test ml-dev-env-0 -o name"
    assert all(line.startswith("--context barcelona exec ") for line in log[1:])


def test_overrides_and_opt_out() -> None:
    args = verify_args("barcelona", "verify.expectedBusbwGbps=50.5", "verify.requireGdr=true")
    assert args[args.index("--expected-busbw-gbps") + 1] == "50.5"
    assert "--line-rate-fraction" not in args  # a given threshold replaces the derived one
    gke = verify_args("gcp-a3", "verify.expectedBusbwGbps=120", "verify.maxBytes=2G")
    assert gke[gke.index("--expected-busbw-gbps") + 1] == "120"
    assert gke[gke.index("--max-bytes") + 1] == "2G"
    assert "--require-gdr" in args
    off = run_stack("barcelona", "verify.enabled=false")
    assert "verifyCommand" not in off.outputs
    assert "allreduce_check.py" not in scripts_data(off)


def test_preflight_is_shipped_and_wired_to_the_launchers_when_asked() -> None:
    # On by default in rdma mode (a too-small memlock must stop training), off elsewhere.
    assert env_of(container(run_stack("nerc-production")))["PREFLIGHT"] == "0"
    asked = env_of(container(run_stack("nerc-production", "verify.preflight=true")))
    assert asked["PREFLIGHT"] == "1"
    off = env_of(container(run_stack("barcelona", "verify.preflight=false")))
    assert off["PREFLIGHT"] == "0"
    run = run_stack("barcelona")
    env = env_of(container(run))
    assert env["PREFLIGHT"] == "1"
    assert env["SHM_MIN_BYTES"] == str(32 * 2**30)  # pod.shmSize 32Gi
    assert env["GPUS_PER_NODE"] == "4"
    # preflight.sh checks the same NICs the detection init container resolves
    assert env["RDMA_INTERFACES"] == "net1,net2,net3,net4"
    assert env["RDMA_HCAS"] == ",,,"  # every HCA detected
    assert env["RDMA_GID_INDEX"] == "nccl"
    # The VFs' MTU is the SriovNetworkNodePolicy's: checked only where rdma.mtu states it.
    assert "RDMA_MTU" not in env
    stated = env_of(container(run_stack("barcelona", "rdma.mtu=9000")))
    assert stated["RDMA_MTU"] == "9000"
    assert env["MEMLOCK_STRATEGY"] == "root-ipc-lock"
    assert scripts_data(run)["preflight.sh"] == (ROOT / "scripts" / "preflight.sh").read_text()
    assert "RDMA_INTERFACES" not in env_of(container(run_stack("nerc-production")))


def test_quantities_convert_to_bytes() -> None:
    assert quantity_bytes("64Gi") == 64 * 2**30
    assert quantity_bytes("500M") == 500 * 10**6
    assert quantity_bytes("1.5Gi") == 3 * 2**29
    assert quantity_bytes("1000") == 1000


# --- every output command: the stack's cluster, and no code from it ---------------------------

# A stand-in for oc and kubectl: logs its arguments and answers every call with shell code that
# leaves a mark if it runs, so a command that ran anything a pod sent back would show it; a
# `get -o json` gets an empty list that is also an object (the timeline reads both).
FAKE_CLI = """#!/usr/bin/env bash
echo "$*" >>"$STATE/cli.log"
case " $* " in
  *" -o json "*) echo '{"items": [], "metadata": {"uid": "u", "creationTimestamp": null}}' ;;
  *) echo 'touch "$STATE/ran-pod-output"' ;;
esac
"""
# python3 without site-packages: the launcher entry point needs no dependency installed.
BARE_PYTHON3 = f'#!/usr/bin/env bash\nexec {shlex.quote(sys.executable)} -S "$@"\n'


def run_with_fake_cli(command: str, tmp_path: Path) -> tuple[CompletedProcess[str], list[str]]:
    """`command` in bash from the project directory, against the stand-in oc and kubectl."""
    tmp_path.mkdir()
    for name, body in (("oc", FAKE_CLI), ("kubectl", FAKE_CLI), ("python3", BARE_PYTHON3)):
        (tmp_path / name).write_text(body)
        (tmp_path / name).chmod(0o755)
    result = subprocess.run(
        ["bash", "-c", command],
        env={
            "PATH": f"{tmp_path}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "STATE": str(tmp_path),
        },
        cwd=ROOT,
        input="",
        capture_output=True,
        text=True,
        check=False,
    )
    log = tmp_path / "cli.log"
    return result, log.read_text().splitlines() if log.exists() else []


# The outputs that run oc or kubectl, as docs/operations.md names them: a StatefulSet stack's
# ("After `pulumi up`"; verifyCommand with verify.enabled, "Verify the fabric") and a JobSet
# stack's ("Training as a JobSet"; its submitCommand runs pulumi, not oc or kubectl).
STATEFUL_SET_COMMANDS = (
    "shellCommand",
    "launchCommand",
    "statusCommand",
    "stopCommand",
    "syncCommand",
    "verifyCommand",
    "timelineCommand",
)
JOB_SET_COMMANDS = ("statusCommand", "logsCommand", "stopCommand", "timelineCommand")

# A JobSet stack of each platform (shared claims: a JobSet has no per-pod ones).
JOB_SET = ("workload.kind=jobset", "workload.command[0]=/workspace/train.py")
JOB_SET_STACKS = [
    ("nerc-production", JOB_SET),
    ("gcp-a3", (*JOB_SET, *GKE_RWX)),
    ("gcp-a4", ()),  # ships as one
]
# barcelona's shared-claims class, for its JobSet variant.
BARCELONA_JOB_SET = (*JOB_SET, "storage.mode=rwx", "storage.storageClass=cephfs")


def test_every_command_names_the_stacks_context_and_runs_no_code_from_the_cluster(
    stack: str, tmp_path: Path
) -> None:
    # gcp-a4 ships as a JobSet (JOB_SET_STACKS): its StatefulSet variant here.
    overrides = A4_STATEFULSET if stack == "gcp-a4" else ()
    check_commands(stack, overrides, STATEFUL_SET_COMMANDS, tmp_path)


@pytest.mark.parametrize(("stack", "overrides"), JOB_SET_STACKS, ids=[s for s, _ in JOB_SET_STACKS])
def test_a_job_set_stack_s_commands_name_its_context_and_run_no_code_from_the_cluster(
    stack: str, overrides: tuple[str, ...], tmp_path: Path
) -> None:
    check_commands(stack, overrides, JOB_SET_COMMANDS, tmp_path)


def check_commands(
    stack: str, overrides: tuple[str, ...], expected: tuple[str, ...], tmp_path: Path
) -> None:
    """The stack exports exactly the `expected` commands, each calling oc or kubectl with the
    stack's context only, and none running what the cluster answers."""
    outputs = run_stack(stack, *overrides).outputs
    commands = {k for k in outputs if k.endswith("Command") and k != "getCredentialsCommand"}
    # pulumi and the package's Kubernetes client, not oc or kubectl (tests/test_jobset.py)
    commands -= {"submitCommand", "runsCommand", "ledgerCommand"}
    assert commands == set(expected)
    context = stack_context(stack)
    for key in sorted(commands):
        result, calls = run_with_fake_cli(str(outputs[key]), tmp_path / key)
        assert result.returncode == 0, (key, result.stderr)
        assert calls, key
        assert [c for c in calls if not c.startswith(f"--context {context} ")] == [], key
        # Nothing a pod answered ran here, and launch-all.sh was never asked of a pod.
        assert not (tmp_path / key / "ran-pod-output").exists(), key
        assert not any("launch-all" in c for c in calls), key
    # ...and the pods are not handed launch-all.sh either: it runs only on the workstation.
    assert "launch-all.sh" not in scripts_data(run_stack(stack, *overrides))


KUBECONFIG_CONTENTS = "apiVersion: v1\nkind: Config\ncurrent-context: barcelona\n"


# No context; nor a kubeconfig file: contents cannot be named on a command line, and a cluster
# alone leaves the user and context to whichever is current.
KINDS = [((), STATEFUL_SET_COMMANDS), (BARCELONA_JOB_SET, JOB_SET_COMMANDS)]
KIND_IDS = ["statefulset", "jobset"]


@pytest.mark.parametrize(("overrides", "commands"), KINDS, ids=KIND_IDS)
@pytest.mark.parametrize(
    "target",
    [{}, {"kubernetes:kubeconfig": KUBECONFIG_CONTENTS}, {"kubernetes:cluster": "api-barcelona"}],
)
def test_a_stack_without_a_context_exports_commands_that_refuse_to_run(
    target: dict[str, str],
    overrides: tuple[str, ...],
    commands: tuple[str, ...],
    tmp_path: Path,
) -> None:
    config, secret_keys = engine_config("barcelona", overrides)
    del config["kubernetes:context"]
    run = run_program({**config, **target}, secret_keys, "barcelona")
    message = "this stack sets no kubernetes:context"
    assert any(message in w for w in run.warnings)
    for key in commands:
        result, calls = run_with_fake_cli(str(run.outputs[key]), tmp_path / key)
        assert result.returncode == 1 and message in result.stderr, key
        assert calls == [], key


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        # A kubeconfig file: named by its absolute path, whether or not a context is set.
        ({"kubernetes:kubeconfig": "/etc/kube/barcelona"}, "--kubeconfig /etc/kube/barcelona"),
        (
            {"kubernetes:kubeconfig": "/etc/kube/b", "kubernetes:context": "admin"},
            "--kubeconfig /etc/kube/b --context admin",
        ),
        # ~ as the provider expands it; a relative path from the project directory.
        ({"kubernetes:kubeconfig": "~/.kube/b"}, f"--kubeconfig {Path.home()}/.kube/b"),
        ({"kubernetes:kubeconfig": "kube/b"}, f"--kubeconfig {ROOT}/kube/b"),
        # Contents cannot be named on a command line: the context alone names the cluster.
        (
            {"kubernetes:kubeconfig": KUBECONFIG_CONTENTS, "kubernetes:context": "barcelona"},
            "--context barcelona",
        ),
        (
            {"kubernetes:context": "barcelona", "kubernetes:cluster": "api-barcelona"},
            "--context barcelona --cluster api-barcelona",
        ),
    ],
)
@pytest.mark.parametrize(("overrides", "commands"), KINDS, ids=KIND_IDS)
def test_every_command_names_the_kubeconfig_file_and_context_the_stack_deploys_with(
    target: dict[str, str],
    expected: str,
    overrides: tuple[str, ...],
    commands: tuple[str, ...],
    tmp_path: Path,
) -> None:
    config, secret_keys = engine_config("barcelona", overrides)
    del config["kubernetes:context"]
    run = run_program({**config, **target}, secret_keys, "barcelona")
    assert not any("sets no kubernetes:context" in w for w in run.warnings)
    for key in commands:
        result, calls = run_with_fake_cli(str(run.outputs[key]), tmp_path / key)
        assert result.returncode == 0, (key, result.stderr)
        assert calls, key
        assert [c for c in calls if not c.startswith(f"{expected} ")] == [], key
