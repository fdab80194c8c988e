"""detect-rdma.sh where it runs: an init container with a read-only root filesystem and no
writable TMPDIR (gpu_cluster/plan/netmodes/openshift_rdma.py; read-only by default in
plan/podspec.py).

Bash before 5.1 writes every here-string (`<<<`) and here-document to a temporary file, which
fails there ("cannot create temp file for here-document: Read-only file system"); 5.1 and later
use a pipe for short ones (bminor/bash CHANGES at 637f5c8, bash-5.1-alpha item 1c). The
training image is the user's and its bash can be older, so the script and the file it sources
use neither.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fake_sysfs import HCAS, fake_ip, sriov_node
from tests.prerequisites import unavailable

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
# detect-rdma.sh and the file it sources.
DETECT_FILES = ("detect-rdma.sh", "rdma-sysfs.sh")
# `<<<` (here-string), `<<WORD`, `<<-WORD`, `<<'WORD'` (here-documents).
HERE_DOCUMENT = re.compile(r"<<")
COMMENT = re.compile(r"(^|\s)#.*$")


@pytest.mark.parametrize("name", DETECT_FILES)
def test_no_here_strings_or_documents(name: str) -> None:
    text = (SCRIPTS / name).read_text()
    found = [
        f"{name}:{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), start=1)
        if HERE_DOCUMENT.search(COMMENT.sub("", line))
    ]
    assert not found, "bash < 5.1 needs a temporary file for these:\n" + "\n".join(found)


# Inside a user and mount namespace: every directory bash would put a temporary file in
# (lib/sh/tmpfile.c get_sys_tmpdir: $TMPDIR, /tmp, /var/tmp, /usr/tmp, else the working
# directory) made read-only, as in the container; a tmpfs for the script's own output, as the
# pod's emptyDir. BASH_COMPAT=50 makes bash >= 5.2 back here-strings with temporary files as
# bash < 5.1 does (bminor/bash CHANGES, bash-5.2-rc1 item 1d, at 637f5c8). --rbind: a plain
# bind of a directory with mounts below it (a real-node test's, running beside this one) cannot
# be remounted read-only in a user namespace, whose copies of those mounts are locked.
READ_ONLY_TMP = """
set -e
for dir in /tmp /var/tmp /usr/tmp; do
  [[ -d $dir ]] || continue
  mount --rbind "$dir" "$dir"
  mount -o remount,bind,ro "$dir"
done
mount -t tmpfs gpu-cluster-run "$OUT_DIR"
cd /tmp
env BASH_COMPAT=50 TMPDIR=/tmp bash "$@"
# The env file is on this namespace's tmpfs, gone with it: show it.
cat "$NCCL_ENV_FILE"
"""


def unshare() -> str:
    found = shutil.which("unshare")
    probe = [found, "--user", "--map-root-user", "--mount", "true"] if found else []
    if not found or subprocess.run(probe, capture_output=True, check=False).returncode != 0:
        unavailable("needs unshare with user namespaces (util-linux) for a read-only /tmp")
    return found


def detect_with_read_only_tmp(tmp_path: Path, hcas: str) -> subprocess.CompletedProcess[str]:
    sysfs = sriov_node(tmp_path / "sys")
    out = tmp_path / "run"
    out.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "OUT_DIR": str(out),
        "RDMA_INTERFACES": "net1,net2,net3,net4",
        "RDMA_HCAS": hcas,
        "RDMA_GID_INDEX": "auto",
        "SYSFS_ROOT": str(sysfs),
        "IP_BIN": str(fake_ip(sysfs)),
        "NCCL_ENV_FILE": str(out / "nccl.env"),
    }
    script = ["bash", "-c", READ_ONLY_TMP, "_", str(SCRIPTS / "detect-rdma.sh")]
    command = [unshare(), "--user", "--map-root-user", "--mount", *script]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("hcas", ["", ",".join(HCAS)], ids=["detected", "pinned"])
def test_detects_with_no_writable_temporary_directory(tmp_path: Path, hcas: str) -> None:
    # Both paths: devices detected, and pins checked against the GID hits (the pin's filter).
    result = detect_with_read_only_tmp(tmp_path, hcas)
    assert result.returncode == 0, result.stderr
    assert "cannot create temp file" not in result.stderr
    assert result.stdout.endswith(
        "export NCCL_IB_HCA==mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1\nexport NCCL_IB_GID_INDEX=3\n"
    )
