"""Code on every pod: a git-sync native sidecar keeps the repository checked out (pure).

The checkout lives in a pod-local volume, so pods never race on a shared RWX workspace.
git-sync v4 reads its flags from GITSYNC_* variables (kubernetes/git-sync README).
"""

from __future__ import annotations

from components.podspec import Container, EmptyDir, Mount
from components.settings import CodeSyncSettings

CODE_VOLUME = "code"
CODE_PATH = "/code"
# git-sync flips this symlink under its root to each new checkout, atomically.
CODE_LINK = "current"


def code_sync(cs: CodeSyncSettings) -> tuple[Container, EmptyDir, Mount]:
    """(sidecar, volume, training-container mount) for one repository."""
    mount = Mount(CODE_VOLUME, CODE_PATH)
    credentials: tuple[tuple[str, str, str], ...] = ()
    if cs.credentials_secret:
        credentials = (
            ("GITSYNC_USERNAME", cs.credentials_secret, "username"),
            ("GITSYNC_PASSWORD", cs.credentials_secret, "password"),
        )
    sidecar = Container(
        name="git-sync",
        image=cs.image,
        command=("/git-sync",),
        env=(
            ("GITSYNC_REPO", cs.repo),
            ("GITSYNC_REF", cs.ref),
            ("GITSYNC_ROOT", CODE_PATH),
            ("GITSYNC_LINK", CODE_LINK),
            ("GITSYNC_PERIOD", cs.period),
        ),
        secret_env=credentials,
        mounts=(mount,),
        restart_policy="Always",
        # git writes its config and temporary files under HOME in the image.
        read_only_root=False,
    )
    return sidecar, EmptyDir(CODE_VOLUME), Mount(CODE_VOLUME, CODE_PATH, read_only=True)
