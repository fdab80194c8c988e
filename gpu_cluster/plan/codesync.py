"""Code on every pod: a git-sync native sidecar keeps the repository checked out (pure).

The checkout lives in a pod-local volume, so pods never race on a shared RWX workspace.
git-sync v4 reads its flags from GITSYNC_* variables (kubernetes/git-sync README).
"""

from __future__ import annotations

from gpu_cluster.config.sections.compute import CodeSyncSettings
from gpu_cluster.plan.podspec import Container, EmptyDir, Mount

CODE_VOLUME = "code"
CODE_PATH = "/code"
# git-sync flips this symlink under its root to each new checkout, atomically.
CODE_LINK = "current"


# Keys of the Secret that holds a secret codeSync's values, and the variables they feed.
SECRET_SOURCE_KEYS = (
    ("GITSYNC_REPO", "repo"),
    ("GITSYNC_REF", "ref"),
    ("GITSYNC_PERIOD", "period"),
)


def code_sync(
    cs: CodeSyncSettings, source_secret: str | None = None
) -> tuple[Container, EmptyDir, Mount]:
    """(sidecar, volume, training-container mount) for one repository. With `source_secret`
    (the name of a Secret with SECRET_SOURCE_KEYS) the repository URL, ref and period come
    from it, never from literal env: a secret codeSync may carry credentials in its URL."""
    mount = Mount(CODE_VOLUME, CODE_PATH)
    credentials: tuple[tuple[str, str, str], ...] = ()
    if cs.credentials_secret:
        credentials = (
            ("GITSYNC_USERNAME", cs.credentials_secret, "username"),
            ("GITSYNC_PASSWORD", cs.credentials_secret, "password"),
        )
    source: tuple[tuple[str, str], ...] = (
        ("GITSYNC_REPO", cs.repo),
        ("GITSYNC_REF", cs.ref),
        ("GITSYNC_PERIOD", cs.period),
    )
    if source_secret is not None:
        credentials += tuple((var, source_secret, key) for var, key in SECRET_SOURCE_KEYS)
        source = ()
    sidecar = Container(
        name="git-sync",
        image=cs.image,
        command=("/git-sync",),
        env=(*source, ("GITSYNC_ROOT", CODE_PATH), ("GITSYNC_LINK", CODE_LINK)),
        secret_env=credentials,
        mounts=(mount,),
        restart_policy="Always",
        # git writes its config and temporary files under HOME in the image.
        read_only_root=False,
    )
    return sidecar, EmptyDir(CODE_VOLUME), Mount(CODE_VOLUME, CODE_PATH, read_only=True)
