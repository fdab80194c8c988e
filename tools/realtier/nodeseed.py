"""A real node's containerd root with its images already imported, made once per image set and
given to each node as hard links, so that a node starts with its images in seconds instead of
unpacking them again (the training image: 4.9 GB, ~2 min a node).

The seed is a containerd root into which a containerd of its own imported the images (as
`ctr images import` does on a node) and that it then left. Its content blobs and committed
layer snapshots are never written again (containerd's content store is content-addressed and
immutable; a committed overlayfs snapshot is only ever a read-only lower directory,
containerd snapshots/overlay/overlay.go), so nodes share them as hard links; the two bolt
databases (containerd's metadata and the overlayfs snapshotter's) are written by each node and
are copied. A seed is keyed by the containerd release and the archives (whose names carry their
content's digest), kept in the tools' cache and made under a lock, so parallel test workers make
it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tools.realtier.build import cache_root
from tools.realtier.images import ImageArchive
from tools.realtier.kube import wait_for
from tools.realtier.noderuntime import containerd_config, import_image, kill_shims, terminate

# containerd's bolt databases, written by the containerd that opens them: its metadata
# (metadata/db.go, plugin io.containerd.metadata.v1.bolt) and the overlayfs snapshotter's
# (snapshots/overlay/overlay.go, metadata.db).
_DATABASES = (
    "io.containerd.metadata.v1.bolt/meta.db",
    "io.containerd.snapshotter.v1.overlayfs/metadata.db",
)


def _containerd_release() -> str:
    return subprocess.run(
        ["containerd", "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()


def seed_root(images: Sequence[ImageArchive]) -> Path:
    """The seeded containerd root for `images`, made now if the cache lacks it."""
    key = hashlib.sha256(
        "\n".join([_containerd_release(), *(i.path.name for i in images)]).encode()
    ).hexdigest()[:16]
    seeds = cache_root() / "node-seeds"
    seed = seeds / key
    seeds.mkdir(parents=True, exist_ok=True)
    with (seeds / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not seed.is_dir():
            _make_seed(images, seed)
    return seed


def _make_seed(images: Sequence[ImageArchive], seed: Path) -> None:
    # Short: containerd's socket path must fit a socket address.
    work = Path(tempfile.mkdtemp(prefix="seed-", dir=seed.parent))
    try:
        socket = work / "c.sock"
        config = work / "config.toml"
        empty = work / "none"
        empty.mkdir()
        sandbox = images[0].name
        config.write_text(containerd_config(work, socket, sandbox, empty, empty), encoding="utf-8")
        with (work / "containerd.log").open("wb") as log:
            containerd = subprocess.Popen(
                ["containerd", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT
            )
        try:
            wait_for("the seed's containerd socket", socket.exists, deadline_s=60)
            for image in images:
                import_image(socket, image.path)
        finally:
            terminate([containerd])
            kill_shims(socket)
        (work / "root").rename(seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def plant(seed: Path, root: Path) -> None:
    """`seed` as the containerd root `root` (which must not exist): hard links, the databases
    copied."""
    subprocess.run(["cp", "-a", "--link", str(seed), str(root)], check=True)
    for database in _DATABASES:
        linked = root / database
        copy = linked.with_name(f"{linked.name}.copy")
        shutil.copy2(linked, copy)
        copy.replace(linked)
