"""Where a JobSet stack's runs keep their checkpoints (workload.runs.checkpointDir): a directory
on storage every pod of a run shares and may write, under which each run gets its own,
`<checkpointDir>/<run name>`, given to the run as CHECKPOINT_DIR (docs/operations.md,
"Checkpoints: what a training script does")."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from gpu_cluster.config.storage import WORKSPACE_PATH

if TYPE_CHECKING:  # the loader calls checkpoint_problems (through rules.py): the types only
    from gpu_cluster.config.schema import Settings

# The environment variable a run's checkpoint directory reaches the training script in
# (examples/checkpointing/train.py reads it).
CHECKPOINT_DIR_ENV = "CHECKPOINT_DIR"
KEY = "gpu-cluster:workload.runs.checkpointDir"


def shared_writable_mounts(s: Settings) -> tuple[str, ...]:
    """The mounts every pod of a run shares and may write: the writable storage.volumes, then
    the workspace claim when the pods share it (storage.mode rwx)."""
    volumes = tuple(v.mount_path for v in s.storage.volumes if not v.read_only)
    return (*volumes, *((WORKSPACE_PATH,) if s.storage.mode == "rwx" else ()))


def checkpoint_root(s: Settings) -> str | None:
    """workload.runs.checkpointDir, or by default: the writable volume kept for checkpoints (a
    bucket with gcsFuse.use checkpoints, else a volume named `checkpoints`), else `checkpoints`
    in the shared workspace; None when the pods share no writable storage."""
    if s.workload.runs.checkpoint_dir is not None:
        return s.workload.runs.checkpoint_dir
    writable = [v for v in s.storage.volumes if not v.read_only]
    for volume in writable:
        if volume.gcs_fuse is not None and volume.gcs_fuse.use == "checkpoints":
            return volume.mount_path
    for volume in writable:
        if volume.name == "checkpoints":
            return volume.mount_path
    if s.storage.mode == "rwx":
        return f"{WORKSPACE_PATH}/checkpoints"
    return None


def checkpoint_problems(s: Settings) -> list[str]:
    """A checkpointDir outside every shared writable mount: each pod would write its own."""
    wanted = s.workload.runs.checkpoint_dir
    if wanted is None:
        return []
    mounts = shared_writable_mounts(s)
    if any(PurePosixPath(wanted).is_relative_to(m) for m in mounts):
        return []
    allowed = ", ".join(map(repr, mounts)) or "none: add a writable storage.volumes entry"
    return [
        f"{KEY} = {wanted!r} is on no storage the pods of a run share and may write, so each "
        f"pod would keep checkpoints of its own that a restart may not find; use a directory "
        f"at or below one of: {allowed}"
    ]
