"""Container images for the real nodes, built here with no registry: each is written as an OCI
image layout tarball (image-spec image-layout.md) that containerd imports (`ctr images import`).

- The sandbox (pause) image: Kubernetes' own build/pause/linux/pause.c from the k8s.io/kubernetes
  module zip at the tier's release, compiled as build/pause/Makefile compiles it (`-Os -Wall
  -Werror -static`), in an image shaped as build/pause/Dockerfile makes it (FROM scratch, /pause,
  USER 65535:65535, ENTRYPOINT ["/pause"]).
- The test image: a Debian bookworm rootfs made by debootstrap (--variant=minbase) with bash,
  coreutils and python3.

Both are cached in the tier's cache directory keyed by their inputs; a warm run builds nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.realtier.build import KUBERNETES_VERSION, Log, _digest, _download, cache_root
from tools.realtier.mounts import unmount_under

# build/pause/Makefile TAG at k8s.io/kubernetes v1.35.4 (kubeadm's constants.PauseVersion too).
PAUSE_VERSION = "3.10.1"
# build/pause/Makefile CFLAGS (the `REV` part of -DVERSION is a git describe, absent from a zip).
_PAUSE_CFLAGS = ("-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{PAUSE_VERSION}")
# build/pause/Dockerfile: USER 65535:65535.
_PAUSE_USER = "65535:65535"

# The test image's Debian release and packages; bookworm's python3 is 3.11, the tests' Python.
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
TEST_IMAGE_PACKAGES = ("bash", "coreutils", "python3", "procps", "iproute2")

# Images are named under localhost/ so that nothing ever tries to pull them from a registry.
_REPOSITORY = "localhost/gpu-cluster"


@dataclass(frozen=True)
class ImageArchive:
    """An OCI image layout tarball and the name containerd gives the image it holds."""

    name: str
    path: Path


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def write_oci_archive(rootfs: Path, name: str, config: Mapping[str, object], target: Path) -> None:
    """One image of one uncompressed layer (the rootfs, owners, modes and devices kept)."""
    layer = target.with_name(f".{target.name}.layer")
    with tarfile.open(layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(rootfs.iterdir()):
            tar.add(path, arcname=path.name)
    try:
        write_oci_layout(name, config, [layer], target)
    finally:
        layer.unlink()


def write_oci_layout(
    name: str, config: Mapping[str, object], layers: Sequence[Path], target: Path
) -> None:
    """An image of these uncompressed layer tarballs, bottom first, as an OCI image layout
    tarball (image-spec image-layout.md, manifest.md, config.md), named by the
    `io.containerd.image.name` annotation containerd's importer reads (containerd
    images/archive/importer.go) and the OCI ref-name tag."""
    layer_digests = [_file_sha256(layer) for layer in layers]
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": layer_digests},
    }
    config_blob = json.dumps(image_config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": _sha256(config_blob),
            "size": len(config_blob),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": digest,
                "size": layer.stat().st_size,
            }
            for layer, digest in zip(layers, layer_digests, strict=True)
        ],
    }
    manifest_blob = json.dumps(manifest, sort_keys=True).encode()
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": _sha256(manifest_blob),
                "size": len(manifest_blob),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                },
            }
        ],
    }
    blobs = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index, sort_keys=True).encode(),
        **{f"blobs/sha256/{_sha256(b)[7:]}": b for b in (config_blob, manifest_blob)},
    }
    staging = target.with_name(f".{target.name}.tmp")
    with tarfile.open(staging, mode="w") as tar:
        for member, content in blobs.items():
            info = tarfile.TarInfo(member)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        for layer, digest in zip(layers, layer_digests, strict=True):
            tar.add(layer, arcname=f"blobs/sha256/{digest[7:]}")
    staging.rename(target)


def _cached(kind: str, key: str) -> Path:
    return cache_root() / "images" / f"{kind}-{key}.tar"


def _command_output(command: list[str]) -> str | None:
    """What a host tool prints (its version), or None when it is not installed."""
    if shutil.which(command[0]) is None:
        return None
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def _pause() -> ImageArchive | None:
    """Where the pause image is (built or not), keyed by the release whose pause.c it compiles
    (its go.sum pins the zip) and the compiler; None without gcc."""
    gcc = _command_output(["gcc", "--version"])
    if gcc is None:
        return None
    key = _digest([KUBERNETES_VERSION, gcc.splitlines()[0], *_PAUSE_CFLAGS, _PAUSE_USER])
    return ImageArchive(f"{_REPOSITORY}/pause:{PAUSE_VERSION}", _cached("pause", key))


def _test() -> ImageArchive | None:
    """Where the test image is (built or not), keyed by its inputs; None without debootstrap."""
    debootstrap = _command_output(["dpkg-query", "-W", "-f=${Version}", "debootstrap"])
    if debootstrap is None or not debootstrap:
        return None
    key = _digest([DEBIAN_SUITE, DEBIAN_MIRROR, debootstrap, *TEST_IMAGE_PACKAGES])
    return ImageArchive(f"{_REPOSITORY}/test:{key}", _cached("test", key))


@dataclass(frozen=True)
class NodeImages:
    pause: ImageArchive
    test: ImageArchive


def locate_images() -> NodeImages | None:
    """The built images, or None when one is missing (never builds: tests must not)."""
    pause, test = _pause(), _test()
    if pause is None or test is None or not (pause.path.is_file() and test.path.is_file()):
        return None
    return NodeImages(pause, test)


def build_images(log: Log) -> NodeImages | None:
    """Build what is missing; None (and why, logged) when gcc or debootstrap is missing."""
    pause, test = _pause(), _test()
    if pause is None or test is None:
        log("real-node images: skipped (gcc or debootstrap not installed)")
        return None
    for image, make in ((pause, _build_pause), (test, _build_test)):
        if image.path.is_file():
            log(f"{image.name}: cached in {image.path}")
            continue
        image.path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=image.path.parent) as scratch:
            make(Path(scratch) / "rootfs", image)
        size = image.path.stat().st_size / 2**20
        log(f"{image.name}: built in {time.monotonic() - started:.0f} s, {size:.0f} MiB")
    return NodeImages(pause, test)


def _build_pause(rootfs: Path, image: ImageArchive) -> None:
    """Kubernetes' pause.c at the tier's release, compiled as build/pause/Makefile does."""
    source = _download("k8s.io/kubernetes", KUBERNETES_VERSION) / "build/pause/linux/pause.c"
    rootfs.mkdir()
    command = ["gcc", *_PAUSE_CFLAGS, "-o", str(rootfs / "pause"), str(source)]
    subprocess.run(command, check=True, capture_output=True)
    config = {"User": _PAUSE_USER, "Entrypoint": ["/pause"]}
    write_oci_archive(rootfs, image.name, config, image.path)


def _build_test(rootfs: Path, image: ImageArchive) -> None:
    """debootstrap's minimal Debian with the test image's packages."""
    command = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(TEST_IMAGE_PACKAGES)}",
        DEBIAN_SUITE,
        str(rootfs),
        DEBIAN_MIRROR,
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    finally:
        unmount_under(rootfs)  # debootstrap's /proc and /sys, if it stopped half-way
    if result.returncode != 0:
        raise RuntimeError(f"debootstrap failed:\n{result.stdout[-3000:]}{result.stderr[-1000:]}")
    # What a container image leaves out: the packages apt downloaded and its package lists.
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        shutil.rmtree(rootfs / cache)
        (rootfs / cache / "partial").mkdir(parents=True)
    config = {
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        "Cmd": ["/bin/bash"],
    }
    write_oci_archive(rootfs, image.name, config, image.path)
