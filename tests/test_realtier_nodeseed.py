"""A node planted from the seeded containerd root shares the seed's immutable files (content
blobs, committed layers) and owns its databases, so one node's writes never reach the seed or
another node (the real tier's real-node tests run containerd on planted roots)."""

from __future__ import annotations

from pathlib import Path

from tools.realtier.nodeseed import plant

BLOB = "io.containerd.content.v1.content/blobs/sha256/ab12"
LAYER_FILE = "io.containerd.snapshotter.v1.overlayfs/snapshots/1/fs/usr/bin/python3"
DATABASES = (
    "io.containerd.metadata.v1.bolt/meta.db",
    "io.containerd.snapshotter.v1.overlayfs/metadata.db",
)


def test_a_planted_root_links_the_layers_and_copies_the_databases(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    for relative in (BLOB, LAYER_FILE, *DATABASES):
        (seed / relative).parent.mkdir(parents=True, exist_ok=True)
        (seed / relative).write_text(relative)
    (seed / LAYER_FILE).chmod(0o755)

    nodes = [tmp_path / "node-0" / "root", tmp_path / "node-1" / "root"]
    for root in nodes:
        root.parent.mkdir()
        plant(seed, root)

    for relative in (BLOB, LAYER_FILE):
        inodes = {(root / relative).stat().st_ino for root in (seed, *nodes)}
        assert len(inodes) == 1, relative
    assert (nodes[0] / LAYER_FILE).stat().st_mode & 0o777 == 0o755
    for relative in DATABASES:
        (nodes[0] / relative).write_text("node-0 wrote this")
        assert (seed / relative).read_text() == relative
        assert (nodes[1] / relative).read_text() == relative
        assert (nodes[1] / relative).stat().st_ino != (seed / relative).stat().st_ino
