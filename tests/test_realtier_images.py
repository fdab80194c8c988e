"""The real nodes' image archives are OCI image layouts whose every reference checks out: the
index names the image and points at its manifest, the manifest at its config and layer by
digest and size, and the layer holds the rootfs (containerd's import is the real tier's test)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.prerequisites import unavailable
from tools.realtier.images import write_oci_archive
from tools.realtier.torchimage import (
    installed_scripts,
    requirements_closure,
    write_packages_layer,
)


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


def test_the_packages_layer_holds_each_required_distribution_and_its_scripts(
    tmp_path: Path,
) -> None:
    """pytest and what it requires, as the training image's second layer holds torch's: every
    file its RECORD lists under Debian's local site directory, its console script on PATH."""
    distributions = requirements_closure(("pytest",))
    names = {d.metadata["Name"].lower() for d in distributions}
    assert {"pytest", "pluggy", "iniconfig", "packaging"} <= names, names
    target = tmp_path / "packages.tar"
    write_packages_layer(distributions, target)

    site = "usr/local/lib/python3.11/dist-packages"
    with tarfile.open(target) as layer:
        members = {m.name: m for m in layer.getmembers()}
        script = layer.extractfile(members["usr/local/bin/pytest"])
        assert script is not None
        text = script.read().decode()
        pluggy = layer.extractfile(members[f"{site}/pluggy/__init__.py"])
        assert pluggy is not None
        installed = Path(importlib.import_module("pluggy").__file__ or "")
        assert pluggy.read() == installed.read_bytes()
    assert members["usr/local/bin/pytest"].mode & 0o777 == 0o755
    assert text.startswith("#!/usr/bin/python3\n"), text
    # The script does what the installed `pytest` does (run here by this Python, which has it).
    (tmp_path / "pytest-script").write_text(text)
    ran = subprocess.run(
        [sys.executable, str(tmp_path / "pytest-script"), "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout + ran.stderr == f"pytest {importlib.metadata.version('pytest')}\n"
    assert members[site].isdir()
    assert not any(name.startswith(("..", "/")) for name in members)


def test_a_distributions_own_bin_scripts_get_the_images_python() -> None:
    """DeepSpeed installs `deepspeed` as a plain script (setup.py's `scripts`, not a console
    entry point), its first line naming this environment's Python: the image's copy names the
    image's and is otherwise the same file."""
    try:
        deepspeed = importlib.metadata.distribution("deepspeed")
    except importlib.metadata.PackageNotFoundError:
        unavailable("DeepSpeed is not installed (.ci/run installs it)")
    scripts = dict(installed_scripts(deepspeed))
    installed = (Path(sys.executable).parent / "deepspeed").read_bytes()
    first, _, rest = installed.partition(b"\n")
    assert first.startswith(b"#!") and b"python" in first, first
    assert scripts["deepspeed"] == b"#!/usr/bin/python3\n" + rest
