"""The training image: the test image plus a second layer holding PyTorch and what it requires,
copied from the Python environment that runs the tests (no second download: PyPI serves only
torch's CUDA build for Linux x86_64 here, and the CPU index is unreachable).

The layer holds exactly the files each installed distribution's RECORD lists (PEP 376/627),
for torch, numpy and their requirements transitively, under Debian's site directory for
locally installed packages, plus the distributions' console scripts (`torchrun`) as pip
writes them. Cached in the tier's cache keyed by the test image and every distribution's name
and version; a warm run builds nothing.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import re
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from tools.realtier.build import Log, _digest, cache_root
from tools.realtier.images import ImageArchive, write_oci_layout

# What the training runs import: torch (with gloo) and numpy (torch warns without it); and
# DeepSpeed, which launch-deepspeed.sh (launcher.kind: deepspeed) starts.
TRAINING_DISTRIBUTIONS = ("torch", "numpy", "deepspeed")
# Debian bookworm's python3 is 3.11; Debian's site.py adds /usr/local/lib/python3.X/dist-packages
# for locally installed packages (Debian python3 README, "Installing modules").
_IMAGE_PYTHON = (3, 11)
_SITE = PurePosixPath(f"usr/local/lib/python{_IMAGE_PYTHON[0]}.{_IMAGE_PYTHON[1]}/dist-packages")
_SCRIPTS = PurePosixPath("usr/local/bin")
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _normalized(name: str) -> str:
    """PEP 503's normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements_closure(roots: tuple[str, ...]) -> list[importlib.metadata.Distribution]:
    """The installed distributions these need, transitively, with the extras each requirement
    names (torch's `cuda-toolkit[cudart,...]` brings the CUDA runtime); markers evaluated here."""
    # Imported here: `python -m tools.realtier build` runs before CI installs anything.
    from packaging.requirements import Requirement

    found: dict[str, importlib.metadata.Distribution] = {}
    visited: set[tuple[str, str]] = set()
    pending = [(name, "") for name in roots]
    while pending:
        name, extra = pending.pop()
        key = (_normalized(name), extra)
        if key in visited:
            continue
        visited.add(key)
        distribution = found.setdefault(key[0], importlib.metadata.distribution(name))
        for line in distribution.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                pending += [(requirement.name, e) for e in ("", *requirement.extras)]
    return [found[name] for name in sorted(found)]


def _training(test: ImageArchive) -> tuple[ImageArchive, list[importlib.metadata.Distribution]]:
    distributions = requirements_closure(TRAINING_DISTRIBUTIONS)
    versions = [f"{_normalized(d.metadata['Name'])}=={d.version}" for d in distributions]
    key = _digest([test.path.name, *versions])
    torch_version = importlib.metadata.version("torch").replace("+", "-")
    name = f"localhost/gpu-cluster/training:{torch_version}-{key}"
    return ImageArchive(name, cache_root() / "images" / f"training-{key}.tar"), distributions


def locate_training_image(test: ImageArchive) -> ImageArchive | None:
    """The built training image, or None (never builds: tests must not)."""
    if sys.version_info[:2] != _IMAGE_PYTHON:
        return None
    image, _ = _training(test)
    return image if image.path.is_file() else None


def build_training_image(test: ImageArchive, log: Log) -> ImageArchive | None:
    """Build it when missing; None (and why, logged) when this Python cannot fill it."""
    if sys.version_info[:2] != _IMAGE_PYTHON:
        log(f"training image: skipped (Python {sys.version_info[:2]}, the image's {_IMAGE_PYTHON})")
        return None
    try:
        image, distributions = _training(test)
    except ModuleNotFoundError as missing:  # torch, or packaging, not installed
        log(f"training image: skipped ({missing} is not installed)")
        return None
    if image.path.is_file():
        log(f"{image.name}: cached in {image.path}")
        return image
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=image.path.parent) as scratch:
        base = Path(scratch) / "base.tar"
        _extract_layer(test.path, base)
        packages = Path(scratch) / "packages.tar"
        write_packages_layer(distributions, packages)
        config = {"Env": [f"PATH={_PATH}"], "Cmd": ["/bin/bash"]}
        write_oci_layout(image.name, config, [base, packages], image.path)
    size = image.path.stat().st_size / 2**20
    log(f"{image.name}: built in {time.monotonic() - started:.0f} s, {size:.0f} MiB")
    return image


def _extract_layer(archive: Path, target: Path) -> None:
    """The one layer of a single-layer OCI image layout tarball (the test image)."""
    with tarfile.open(archive) as tar:
        index = json.loads(_member(tar, "index.json"))
        manifest = json.loads(_member(tar, _blob(index["manifests"][0]["digest"])))
        (layer,) = manifest["layers"]
        source = tar.extractfile(_blob(layer["digest"]))
        assert source is not None
        with target.open("wb") as stream:
            while chunk := source.read(1 << 20):
                stream.write(chunk)


def _blob(digest: str) -> str:
    return f"blobs/sha256/{digest.removeprefix('sha256:')}"


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    stream = tar.extractfile(name)
    assert stream is not None
    return stream.read()


def _installed_files(distribution: importlib.metadata.Distribution) -> Iterator[tuple[Path, str]]:
    """(host path, path inside the site directory) of each file its RECORD lists in the site
    directory (scripts outside it, `../../../bin/...`, are written for the image instead)."""
    for record in distribution.files or []:
        if record.parts[0] == "..":
            continue
        yield Path(str(distribution.locate_file(record))), record.as_posix()


def installed_scripts(
    distribution: importlib.metadata.Distribution,
) -> Iterator[tuple[str, bytes]]:
    """(name, content for the image) of each script it installs in the environment's bin
    directory that is no console script (DeepSpeed's `deepspeed`, from setup.py's `scripts`):
    a Python one gets the image's interpreter, as pip rewrites its `#!python` line."""
    entry_points = {e.name for e in distribution.entry_points.select(group="console_scripts")}
    for record in distribution.files or []:
        if record.parts[:4] != ("..", "..", "..", "bin") or record.name in entry_points:
            continue
        content = Path(str(distribution.locate_file(record))).read_bytes()
        first, newline, rest = content.partition(b"\n")
        if first.startswith(b"#!") and b"python" in first:
            content = b"#!/usr/bin/python3" + newline + rest
        yield record.name, content


def write_packages_layer(
    distributions: list[importlib.metadata.Distribution], target: Path
) -> None:
    with tarfile.open(target, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directories: set[PurePosixPath] = set()

        def add_parents(path: PurePosixPath) -> None:
            for parent in reversed(path.parents):
                if parent not in directories and parent != PurePosixPath("."):
                    directories.add(parent)
                    info = tarfile.TarInfo(str(parent))
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)

        for distribution in distributions:
            for source, relative in _installed_files(distribution):
                if not source.is_file():
                    continue  # RECORD lists .pyc files that were never compiled
                member = _SITE / relative
                add_parents(member)
                info = tar.gettarinfo(str(source), arcname=str(member))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                with source.open("rb") as stream:
                    tar.addfile(info, stream)
            scripts = [
                (entry.name, _console_script(entry.module, entry.attr).encode())
                for entry in distribution.entry_points.select(group="console_scripts")
            ]
            for name, content in [*scripts, *installed_scripts(distribution)]:
                script = _SCRIPTS / name
                add_parents(script)
                info = tarfile.TarInfo(str(script))
                info.size, info.mode = len(content), 0o755
                tar.addfile(info, io.BytesIO(content))


def _console_script(module: str, attribute: str) -> str:
    """A console script as pip writes one (pip's _internal/operations/install/wheel.py)."""
    return (
        "#!/usr/bin/python3\n"
        "import sys\n"
        f"from {module} import {attribute.split('.')[0]}\n"
        "if __name__ == '__main__':\n"
        f"    sys.exit({attribute}())\n"
    )
