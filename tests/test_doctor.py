"""`gpu-cluster doctor`: each check's PASS, FAIL and SKIP, with stand-in pulumi, oc, kubectl and
gcloud on PATH (PATH holds nothing else, so the machine's own tools never answer)."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest

from gpu_cluster.offline.cli import main
from gpu_cluster.offline.doctor import TESTED_PULUMI_CLI
from tests.conftest import ROOT
from tools.realtier.build import PULUMI_VERSION

# (exit status, stdout, stderr) for each command line a stand-in expects; any other fails
# loudly (64), so a test also pins the exact command the doctor runs.
Answers = dict[str, tuple[int, str, str]]

PULUMI_READY: Answers = {
    "version": (0, "v3.259.0\n", ""),
    "whoami --non-interactive": (0, "alice\n", ""),
}
# barcelona's context (kubernetes:context) and its API server's /version (a real answer's shape:
# kubernetes apimachinery pkg/version Info).
VERSION = "--context barcelona get --raw /version --request-timeout=30s"
OC_READY: Answers = {
    "config get-contexts -o name": (0, "admin\nbarcelona\n", ""),
    VERSION: (0, '{"major": "1", "minor": "31", "gitVersion": "v1.31.4"}\n', ""),
}
GCP_A3 = ("--stack", "gcp-a3", "--set", "gcp.project=team-b-training")
GCP_A3_MINE = (*GCP_A3, "--set", "gcp.authorizedNetworks[0].cidrBlock=198.51.100.7/32")
GCP_A3_READY = (*GCP_A3, "--set", "gcp.authorizedNetworks[0].cidrBlock=192.168.10.0/24")
SERVICES = "services list --enabled --project team-b-training --format=value(config.name)"
ENABLED_APIS = (
    "compute.googleapis.com\ncontainer.googleapis.com\niam.googleapis.com\n"
    "cloudresourcemanager.googleapis.com\nmonitoring.googleapis.com\nstorage.googleapis.com\n"
)
GKE_CONTEXT = "gke_team-b-training_us-central1-a_gpu-cluster"  # gpu-cluster: the default name
KUBECTL_READY: Answers = {
    "config get-contexts -o name": (0, f"{GKE_CONTEXT}\n", ""),
    f"--context {GKE_CONTEXT} get --raw /version --request-timeout=30s": (
        0,
        '{"gitVersion": "v1.35.1-gke.1000"}\n',
        "",
    ),
}


def stand_in(answers: Answers) -> str:
    """A shell script (builtins only: PATH has nothing else) answering each command line."""
    cases = "".join(
        f"  {shlex.quote(line)}) printf %s {shlex.quote(out)}; printf %s {shlex.quote(err)} >&2;"
        f" exit {status} ;;\n"
        for line, (status, out, err) in answers.items()
    )
    unexpected = '  *) echo "stand-in: unexpected $*" >&2; exit 64 ;;\n'
    return f'#!/bin/sh\ncase "$*" in\n{cases}{unexpected}esac\n'


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Answers | str]:
    """The stand-ins to put on PATH (name: its answers, or its script), which holds nothing
    else; `run` writes them."""
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return {}


def doctor(tmp_path: Path, tools: dict[str, Answers | str], *args: str) -> int:
    """`gpu-cluster doctor ARGS` with exactly `tools` on PATH, and as python3 the interpreter
    running the tests (which has the package's dependencies, not the package)."""
    bin_dir = tmp_path / "bin"
    shutil.rmtree(bin_dir, ignore_errors=True)
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    for name, answers in tools.items():
        script = answers if isinstance(answers, str) else stand_in(answers)
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    return main(["doctor", *args])


def run(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    tools: dict[str, Answers | str],
    *args: str,
) -> tuple[int, list[str]]:
    """The exit code and the lines on stdout."""
    code = doctor(tmp_path, tools, *args)
    return code, capsys.readouterr().out.splitlines()


def test_a_ready_openshift_stack_passes_every_check(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    tools.update(pulumi=PULUMI_READY, oc=OC_READY)
    code, lines = run(capsys, tmp_path, tools, "--stack", "barcelona")
    assert lines == [
        "PASS Pulumi CLI: v3.259.0 (3.x from 3.174.0 on; 3.259.0 is tested)",
        "PASS state login: logged in as alice",
        f"PASS oc: {tmp_path / 'bin' / 'oc'}",
        PYTHON_PASS,
        "PASS kube context barcelona: in the kubeconfig",
        "PASS kube API: answers (Kubernetes v1.31.4)",
    ]
    assert code == 0


PYTHON_PASS = (
    "PASS python3 for the exported commands: imports gpu_cluster.launch_all and "
    "gpu_cluster.timeline"
)


def test_python3_that_cannot_import_the_package_fails_with_the_virtualenv_to_activate(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A project of one's own: its directory holds no package, and the python3 on PATH does
    not have it installed (the package lives in an inactive virtualenv)."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.barcelona.yaml", "__main__.py"):
        shutil.copy(ROOT / name, project / name)
    tools.update(pulumi=PULUMI_READY, oc=OC_READY)
    code, lines = run(
        capsys, tmp_path, tools, "--stack", "barcelona", "--project-dir", str(project)
    )
    assert lines[3] == (
        "FAIL python3 for the exported commands: `python3 -c 'import gpu_cluster.launch_all, "
        "gpu_cluster.timeline'`: ModuleNotFoundError: No module named 'gpu_cluster'; fix: "
        "activate the project's virtualenv (source venv/bin/activate, or the one Pulumi.yaml's "
        "runtime.options.virtualenv names) or install the package for this python3 "
        "(pip install gpu-cluster)"
    )
    assert code == 1


INSTALL_PULUMI = "fix: curl -fsSL https://get.pulumi.com | sh -s -- --version 3.259.0"


@pytest.mark.parametrize(
    ("pulumi", "expected"),
    [
        (None, ["FAIL Pulumi CLI: pulumi is not on PATH; " + INSTALL_PULUMI, "SKIP state login"]),
        (
            {**PULUMI_READY, "version": (0, "v3.173.1\n", "")},
            ["FAIL Pulumi CLI: v3.173.1; the program needs 3.x from 3.174.0 on; " + INSTALL_PULUMI],
        ),
        (
            {**PULUMI_READY, "version": (0, "v4.0.0\n", "")},
            ["FAIL Pulumi CLI: v4.0.0; the program needs 3.x"],
        ),
        (
            {
                **PULUMI_READY,
                "whoami --non-interactive": (
                    255,
                    "",
                    "error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI "
                    "sessions\n",
                ),
            },
            [
                "PASS Pulumi CLI: v3.259.0",
                "FAIL state login: not logged in: error: PULUMI_ACCESS_TOKEN must be set for "
                "login during non-interactive CLI sessions; fix: pulumi login (Pulumi Cloud), "
                "pulumi login --local or pulumi login gs://BUCKET",
            ],
        ),
    ],
    ids=["missing", "too-old", "not-3.x", "logged-out"],
)
def test_the_pulumi_cli_and_its_login(
    pulumi: Answers | None,
    expected: list[str],
    tmp_path: Path,
    tools: dict[str, Answers | str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    tools.update(oc=OC_READY, **({"pulumi": pulumi} if pulumi else {}))
    code, lines = run(capsys, tmp_path, tools, "--stack", "barcelona")
    for start in expected:
        assert any(line.startswith(start) for line in lines), (start, lines)
    assert code == 1


def test_a_login_that_would_prompt_fails_instead_of_waiting(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    """stdin is empty: a prompt reads end of file at once."""
    prompting = (
        '#!/bin/sh\n[ "$1" = version ] && { echo v3.259.0; exit 0; }\n'
        "read -r token || { echo 'error: no token given' >&2; exit 255; }\necho alice\n"
    )
    tools.update(oc=OC_READY, pulumi=prompting)
    code, lines = run(capsys, tmp_path, tools, "--stack", "barcelona")
    assert "FAIL state login: not logged in: error: no token given" in lines[1]
    assert code == 1


@pytest.mark.parametrize(
    ("oc", "expected"),
    [
        (
            None,
            [
                "FAIL oc: not on PATH; fix: install the OpenShift CLI",
                "SKIP kube context: needs oc",
                "SKIP kube API: needs the kube context (above)",
            ],
        ),
        (
            {**OC_READY, "config get-contexts -o name": (0, "admin\n", "")},
            [
                "FAIL kube context barcelona: not in the kubeconfig; fix: oc login "
                '--server=API_URL && oc config rename-context "$(oc config current-context)" '
                "barcelona",
                "SKIP kube API: needs the kube context (above)",
            ],
        ),
        (
            {
                **OC_READY,
                VERSION: (
                    1,
                    "",
                    "error: You must be logged in to the server (Unauthorized)\n",
                ),
            },
            [
                "PASS kube context barcelona: in the kubeconfig",
                "FAIL kube API: no answer: error: You must be logged in to the server "
                "(Unauthorized); fix: oc login",
            ],
        ),
    ],
    ids=["no-oc", "no-context", "logged-out"],
)
def test_the_openshift_context_and_its_api(
    oc: Answers | None,
    expected: list[str],
    tmp_path: Path,
    tools: dict[str, Answers | str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    tools.update(pulumi=PULUMI_READY, **({"oc": oc} if oc else {}))
    code, lines = run(capsys, tmp_path, tools, "--stack", "barcelona")
    for start in expected:
        assert any(line.startswith(start) for line in lines), (start, lines)
    assert code == 1


def test_a_stack_without_a_context_fails_with_the_key_to_set(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    tools.update(pulumi=PULUMI_READY, oc=OC_READY)
    code, lines = run(
        capsys, tmp_path, tools, "--stack", "barcelona", "--set", "kubernetes:context="
    )
    assert lines[4].startswith("FAIL kube context: the stack sets no kubernetes:context")
    assert lines[4].endswith(
        "; fix: pulumi config set kubernetes:context CONTEXT --stack barcelona"
    )
    assert lines[5] == "SKIP kube API: needs the kube context (above)"
    assert code == 1


# nerc-production as a queued JobSet (as `gpu-cluster new` writes one): its namespace
# (coops-767192, namespaceMode: reference) needs Red Hat's Kueue label.
NERC_JOBSET = (
    *("--stack", "nerc-production", "--set", "workload.kind=jobset"),
    *("--set", "workload.command[0]=/workspace/train.py"),
)
NERC_CONTEXT = "--context nerc-production"
NAMESPACE_READ = f"{NERC_CONTEXT} get namespace coops-767192 -o json"
NERC_OC: Answers = {
    "config get-contexts -o name": (0, "nerc-production\n", ""),
    f"{NERC_CONTEXT} get --raw /version --request-timeout=30s": (
        0,
        '{"gitVersion": "v1.31.4"}',
        "",
    ),
}
LABEL = "Kueue's label kueue.openshift.io/managed=true on namespace coops-767192"


@pytest.mark.parametrize(
    ("namespace", "expected", "exit_code"),
    [
        (
            (0, '{"metadata": {"labels": {"kueue.openshift.io/managed": "true"}}}', ""),
            f"PASS {LABEL}: set",
            0,
        ),
        (
            (0, '{"metadata": {"labels": {"kubernetes.io/metadata.name": "coops-767192"}}}', ""),
            f"FAIL {LABEL}: unset: every run would wait at Kueue's admission; fix: oc --context "
            "nerc-production label namespace coops-767192 kueue.openshift.io/managed=true "
            "(a cluster admin)",
            1,
        ),
        (
            (1, "", 'Error from server (NotFound): namespaces "coops-767192" not found\n'),
            f"FAIL {LABEL}: the namespace does not exist (namespaceMode: reference needs it); "
            "fix: oc new-project coops-767192",
            1,
        ),
    ],
    ids=["labelled", "unlabelled", "no-namespace"],
)
def test_kueue_label_on_an_openshift_jobset_stack(
    namespace: tuple[int, str, str],
    expected: str,
    exit_code: int,
    tmp_path: Path,
    tools: dict[str, Answers | str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    tools.update(pulumi=PULUMI_READY, oc={**NERC_OC, NAMESPACE_READ: namespace})
    code, lines = run(capsys, tmp_path, tools, *NERC_JOBSET)
    assert lines[-1] == expected
    assert code == exit_code


def test_kueue_label_is_skipped_when_the_api_does_not_answer(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    unreachable = (1, "", "Unable to connect to the server: dial tcp: i/o timeout\n")
    oc = {**NERC_OC, f"{NERC_CONTEXT} get --raw /version --request-timeout=30s": unreachable}
    tools.update(pulumi=PULUMI_READY, oc=oc)
    code, lines = run(capsys, tmp_path, tools, *NERC_JOBSET)
    assert lines[-1] == f"SKIP {LABEL}: needs the cluster's API (above)"
    assert code == 1  # the API's FAIL


def test_the_label_is_not_checked_where_the_stack_creates_the_namespace(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    tools.update(pulumi=PULUMI_READY, oc=NERC_OC)
    code, lines = run(capsys, tmp_path, tools, *NERC_JOBSET, "--set", "namespaceMode=create")
    assert not [line for line in lines if "Kueue" in line]
    assert code == 0


def test_a_ready_gke_stack_passes_every_check(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    tools.update(
        pulumi=PULUMI_READY,
        gcloud={SERVICES: (0, ENABLED_APIS, "")},
        kubectl=KUBECTL_READY,
        **{"gke-gcloud-auth-plugin": {}},
    )
    code, lines = run(capsys, tmp_path, tools, *GCP_A3_READY)
    assert lines[5:] == [
        PYTHON_PASS,
        f"PASS kube context {GKE_CONTEXT}: in the kubeconfig",
        "PASS kube API: answers (Kubernetes v1.35.1-gke.1000)",
        "PASS GCP API compute.googleapis.com: enabled in team-b-training",
        "PASS GCP API container.googleapis.com: enabled in team-b-training",
        "PASS GCP API iam.googleapis.com: enabled in team-b-training",
        "PASS GCP API cloudresourcemanager.googleapis.com: enabled in team-b-training",
        # The stack's dashboard (monitoring.dashboard, on for GKE).
        "PASS GCP API monitoring.googleapis.com: enabled in team-b-training",
        "PASS placeholders: none left in Pulumi.gcp-a3.yaml",
    ]
    assert code == 0


def test_gke_before_its_first_pulumi_up(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    """No context yet (the cluster does not exist): SKIP with get-credentials, not FAIL; image
    streaming's API is needed and not enabled: FAIL with the command that enables it."""
    tools.update(
        pulumi=PULUMI_READY,
        gcloud={SERVICES: (0, ENABLED_APIS, "")},
        kubectl={"config get-contexts -o name": (0, "", "")},
        **{"gke-gcloud-auth-plugin": {}},
    )
    code, lines = run(capsys, tmp_path, tools, *GCP_A3_READY, "--set", "gcp.imageStreaming=true")
    assert (
        f"SKIP kube context {GKE_CONTEXT}: not in the kubeconfig: the exported commands need it "
        "once pulumi up made the cluster; fix: gcloud container clusters get-credentials "
        "gpu-cluster --zone us-central1-a --project team-b-training"
    ) in lines
    assert "SKIP kube API: needs the kube context (above)" in lines
    assert (
        "FAIL GCP API containerfilesystem.googleapis.com: not enabled in team-b-training; fix: "
        "gcloud services enable containerfilesystem.googleapis.com --project team-b-training"
    ) in lines
    assert code == 1


def test_gcp_apis_are_skipped_without_credentials_or_gcloud(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    no_credentials = (
        1,
        "",
        "ERROR: (gcloud.services.list) You do not currently have an active account selected.\n",
    )
    plugin: Answers = {}
    tools.update(
        pulumi=PULUMI_READY,
        gcloud={SERVICES: no_credentials},
        kubectl=KUBECTL_READY,
        **{"gke-gcloud-auth-plugin": plugin},
    )
    code, lines = run(capsys, tmp_path, tools, *GCP_A3_READY)
    assert (
        "SKIP GCP APIs of project team-b-training: gcloud could not list them: ERROR: "
        "(gcloud.services.list) You do not currently have an active account selected.; "
        "fix: gcloud auth login"
    ) in lines
    assert code == 0  # a SKIP is no FAIL
    del tools["gcloud"], tools["gke-gcloud-auth-plugin"]
    code, lines = run(capsys, tmp_path, tools, *GCP_A3_READY)
    assert [line for line in lines if "GCP API" in line] == [
        "SKIP GCP APIs of project team-b-training: gcloud is not on PATH; fix: install the "
        "Google Cloud CLI (cloud.google.com/sdk/docs/install)"
    ]
    assert (
        "FAIL gke-gcloud-auth-plugin: not on PATH; fix: gcloud components install "
        "gke-gcloud-auth-plugin"
    ) in lines
    assert code == 1


def test_placeholders_fail_with_their_commands(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    tools.update(pulumi=PULUMI_READY, kubectl=KUBECTL_READY)
    code, lines = run(capsys, tmp_path, tools, "--stack", "gcp-a3")
    assert "SKIP GCP APIs of project my-gpu-project: gcp.project is the shipped placeholder" in (
        "\n".join(lines)
    )
    assert lines[-2].startswith("FAIL placeholder gpu-cluster:gcp.project: ")
    assert lines[-2].endswith(
        "; fix: pulumi config set --path gcp.project YOUR_PROJECT_ID --stack gcp-a3"
    )
    assert lines[-1].startswith(
        "FAIL placeholder gpu-cluster:gcp.authorizedNetworks[0].cidrBlock: "
    )
    assert lines[-1].endswith(
        "; fix: pulumi config set --path 'gcp.authorizedNetworks[0].cidrBlock' "
        "YOUR_EGRESS_IP/32 --stack gcp-a3"
    )
    # Each placeholder is a FAIL line, not also a warning.
    assert "placeholder" not in capsys.readouterr().err
    code, lines = run(capsys, tmp_path, tools, *GCP_A3_MINE)
    assert lines[-1].startswith("FAIL placeholder gpu-cluster:gcp.authorizedNetworks[0]")
    assert code == 1


def test_a_refused_config_exits_2_before_any_check(
    tmp_path: Path, tools: dict[str, Answers | str], capsys: pytest.CaptureFixture[str]
) -> None:
    tools.update(pulumi={})  # any call fails loudly: none may be made
    code = doctor(tmp_path, tools, "--stack", "barcelona", "--set", "nodes=0")
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.startswith("error: ") and "gpu-cluster:nodes" in captured.err


def test_the_tested_cli_is_the_one_the_real_tier_builds() -> None:
    assert f"v{TESTED_PULUMI_CLI}" == PULUMI_VERSION
