"""The launchers source the GPUDirect release's NCCL script (NCCL_INIT_SCRIPT) as Google's GKE
workloads do, then set the pod's own NCCL_* values again (scripts/launch-common.sh).

The scripts run for real (bash) with a stand-in release script in tmp_path, written the way
Google's are (google/nccl-plugin-gpudirect-tcpxo tcpxo_scripts/nccl-env-profile.sh at 04815d1:
`${VAR:?}` checks, a pipeline that may fail, an unset LD_LIBRARY_PATH expanded), and a stand-in
trainer that prints the environment NCCL would read.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_stack
from tests.edits import A4_STATEFULSET

SCRIPTS = ROOT / "scripts"
LAUNCHERS = {name: SCRIPTS / f"launch-{name}.sh" for name in ("torchrun", "deepspeed")}
# What the stand-in trainer prints: the variables NCCL and the dynamic loader would read.
SHOWN = (
    "NCCL_NET",
    "NCCL_SOCKET_IFNAME",
    "NCCL_DEBUG",
    "NCCL_TUNER_CONFIG_PATH",
    "LD_LIBRARY_PATH",
)

# The launchers they start are given train.py, which must be there.
pytestmark = pytest.mark.usefixtures("beside_a_training_script")

# EX_UNAVAILABLE (sysexits.h): not a configuration error, so a JobSet restarts the pod.
SCRIPT_MISSING = 69
# A release script as Google writes them: it requires its directory, exports its settings
# unconditionally (the stack's NCCL_DEBUG included) and prepends to LD_LIBRARY_PATH.
RELEASE_SCRIPT = """\
: "${NCCL_LIB_DIR:?Must set NCCL_LIB_DIR}"
nic=$(cat /nonexistent/uevent 2>/dev/null | grep PCI_SLOT_NAME || echo "")
export LD_LIBRARY_PATH="${NCCL_LIB_DIR}:${LD_LIBRARY_PATH}"
export NCCL_NET=gIB
export NCCL_SOCKET_IFNAME=eth0
export NCCL_DEBUG=WARN
export NCCL_TUNER_CONFIG_PATH=${NCCL_LIB_DIR}/tuner.txtpb
"""


@pytest.fixture
def trainer(tmp_path: Path) -> Path:
    fake = tmp_path / "trainer"
    lines = "".join(f'echo "{v}=${{{v}-<unset>}}"\n' for v in SHOWN)
    fake.write_text(f"#!/bin/sh\n{lines}")
    fake.chmod(0o755)
    return fake


@pytest.fixture
def release_script(tmp_path: Path) -> Path:
    script = tmp_path / "gib/scripts/set_nccl_env.sh"
    script.parent.mkdir(parents=True)
    script.write_text(RELEASE_SCRIPT)
    return script


def launch(
    launcher: str, tmp_path: Path, trainer: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    """`launcher` with a valid rendezvous and only `env` besides, so nothing leaks in."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("a slots=8\nb slots=8\n")
    config = tmp_path / "ds_config.json"
    config.write_text("{}\n")
    full = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "NNODES": "2",
        "NODE_RANK": "0",
        "GPUS_PER_NODE": "8",
        "MASTER_ADDR": "train-0.train-headless",
        "MASTER_PORT": "29500",
        "TORCHRUN_BIN": str(trainer),
        "DEEPSPEED_BIN": str(trainer),
        "DEEPSPEED_HOSTFILE": str(hostfile),
        "DEEPSPEED_CONFIG": str(config),
        "NCCL_ENV_FILE": str(tmp_path / "absent.env"),
        "LAUNCH_PID_FILE": str(tmp_path / "launch.pid"),
        **env,
    }
    return subprocess.run(
        ["bash", str(LAUNCHERS[launcher]), "train.py"],
        env=full,
        capture_output=True,
        text=True,
        check=False,
    )


def shown(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines()[: len(SHOWN)])


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_the_release_script_is_sourced_and_the_pods_nccl_values_win(
    launcher: str, tmp_path: Path, trainer: Path, release_script: Path
) -> None:
    env = shown(
        launch(
            launcher,
            tmp_path,
            trainer,
            NCCL_INIT_SCRIPT=str(release_script),
            NCCL_LIB_DIR="/usr/local/gib/lib64",
            # What Google's A4 workload exports after the script, and the stack's level.
            NCCL_SOCKET_IFNAME="eth0,eth1",
            NCCL_DEBUG="INFO",
            LD_LIBRARY_PATH="/usr/local/cuda/lib64",
        )
    )
    assert env == {
        "NCCL_NET": "gIB",
        "NCCL_SOCKET_IFNAME": "eth0,eth1",
        "NCCL_DEBUG": "INFO",
        "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/lib64/tuner.txtpb",
        # Prepended, so the image's own entries stay.
        "LD_LIBRARY_PATH": "/usr/local/gib/lib64:/usr/local/cuda/lib64",
    }


def test_an_image_without_a_library_path_gets_no_working_directory_entry(
    tmp_path: Path, trainer: Path, release_script: Path
) -> None:
    env = shown(
        launch(
            "torchrun",
            tmp_path,
            trainer,
            NCCL_INIT_SCRIPT=str(release_script),
            NCCL_LIB_DIR="/usr/local/nvidia/lib64",
        )
    )
    # The script alone would leave "/usr/local/nvidia/lib64:", whose empty entry is the cwd.
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert env["NCCL_DEBUG"] == "WARN"  # the script's, where the pod sets none


def test_the_launchers_own_shell_options_are_back_after_the_script(
    tmp_path: Path, trainer: Path, release_script: Path
) -> None:
    # A script left tracing (or with -e/-u off) must not change the launcher after it.
    release_script.write_text(RELEASE_SCRIPT + "set -x +e +u\n")
    env = {"NCCL_INIT_SCRIPT": str(release_script), "NCCL_LIB_DIR": "/lib"}
    result = launch("torchrun", tmp_path, trainer, **env)
    assert shown(result)["NCCL_NET"] == "gIB"
    assert "--rdzv-backend" not in result.stderr  # the exec line was not traced


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_a_missing_release_script_stops_the_launch_naming_it(
    launcher: str, tmp_path: Path, trainer: Path
) -> None:
    missing = tmp_path / "gib/scripts/set_nccl_env.sh"
    result = launch(launcher, tmp_path, trainer, NCCL_INIT_SCRIPT=str(missing))
    assert result.returncode == SCRIPT_MISSING
    assert f"NCCL_INIT_SCRIPT {missing} is missing" in result.stderr
    assert "nccl-*-installer" in result.stderr and "gcp.gpudirectRelease" in result.stderr
    assert result.stdout == ""  # the trainer never started


def test_without_a_release_script_nothing_is_sourced(tmp_path: Path, trainer: Path) -> None:
    env = shown(launch("torchrun", tmp_path, trainer, NCCL_DEBUG="WARN"))
    assert (env["NCCL_NET"], env["LD_LIBRARY_PATH"]) == ("<unset>", "<unset>")


@pytest.mark.parametrize("present", [True, False])
def test_the_shell_command_loads_the_release_script_and_opens_without_it(
    tmp_path: Path, release_script: Path, present: bool
) -> None:
    # A stand-in `kubectl` runs what follows `--` here, with the repository's scripts where the
    # pod mounts them.
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(
        '#!/usr/bin/env bash\nwhile [ "$1" != -- ]; do shift; done\nshift\n'
        f'exec "${{@//\\/opt\\/gpu-cluster/{SCRIPTS}}}"\n'
    )
    kubectl.chmod(0o755)
    if not present:
        release_script.unlink()
    result = subprocess.run(
        ["bash", "-c", str(run_stack("gcp-a4", *A4_STATEFULSET).outputs["shellCommand"])],
        env={
            "PATH": f"{tmp_path}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "NCCL_INIT_SCRIPT": str(release_script),
            "NCCL_LIB_DIR": "/usr/local/gib/lib64",
            "NCCL_SOCKET_IFNAME": "eth0,eth1",
        },
        input='echo "net=${NCCL_NET-} ifname=$NCCL_SOCKET_IFNAME"\n',
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ("net=gIB" if present else "net=") + " ifname=eth0,eth1\n"
    assert ("is missing" in result.stderr) is not present
