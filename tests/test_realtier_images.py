"""The real nodes' image archives are OCI image layouts whose every reference checks out: the
index names the image and points at its manifest, the manifest at its config and layer by
digest and size, and the layer holds the rootfs (containerd's import is the real tier's test)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from tools.realtier.images import write_oci_archive


def _blob(archive: tarfile.TarFile, descriptor: dict[str, object]) -> bytes:
    algorithm, digest = str(descriptor["digest"]).split(":")
    member = archive.extractfile(f"blobs/{algorithm}/{digest}")
    assert member is not None
    data = member.read()
    assert hashlib.sha256(data).hexdigest() == digest
    assert len(data) == descriptor["size"]
    return data


def test_an_archive_is_a_valid_oci_layout_of_its_rootfs(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "bin" / "hello").write_text("#!/bin/sh\necho hello\n")
    (rootfs / "bin" / "hello").chmod(0o755)
    target = tmp_path / "image.tar"
    write_oci_archive(rootfs, "localhost/test/hello:1", {"Cmd": ["/bin/hello"]}, target)

    with tarfile.open(target) as archive:
        layout = archive.extractfile("oci-layout")
        assert layout is not None and json.load(layout) == {"imageLayoutVersion": "1.0.0"}
        index_file = archive.extractfile("index.json")
        assert index_file is not None
        (entry,) = json.load(index_file)["manifests"]
        assert entry["annotations"]["io.containerd.image.name"] == "localhost/test/hello:1"
        assert entry["annotations"]["org.opencontainers.image.ref.name"] == "1"
        manifest = json.loads(_blob(archive, entry))
        config = json.loads(_blob(archive, manifest["config"]))
        (layer_descriptor,) = manifest["layers"]
        layer = _blob(archive, layer_descriptor)

    assert config["config"] == {"Cmd": ["/bin/hello"]}
    # An uncompressed layer: its digest is also its diff ID.
    assert config["rootfs"]["diff_ids"] == [layer_descriptor["digest"]]
    with tarfile.open(fileobj=io.BytesIO(layer)) as files:
        hello = files.getmember("bin/hello")
        assert hello.mode & 0o777 == 0o755
        content = files.extractfile(hello)
        assert content is not None and content.read() == b"#!/bin/sh\necho hello\n"
