"""Mounts left under a directory the tier made (debootstrap's /proc, a kubelet's volumes, a
containerd's snapshots and sandbox /dev/shm), unmounted before the directory is removed, so
that removing it never reaches into a mounted filesystem."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _unescape(field: str) -> str:
    # /proc/self/mountinfo escapes space, tab, newline and backslash as octal (proc(5)).
    return field.encode().decode("unicode_escape")


def mounts_under(root: Path) -> list[Path]:
    """Mount points at or below root, deepest first (the order they must be unmounted in)."""
    resolved = root.resolve()
    points = []
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        point = Path(_unescape(line.split()[4]))
        if point == resolved or resolved in point.parents:
            points.append(point)
    return sorted(points, key=lambda p: len(p.parts), reverse=True)


def unmount_under(root: Path) -> None:
    """Unmount everything at or below root; a busy mount is detached (umount --lazy)."""
    for point in mounts_under(root):
        if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(point)], capture_output=True)
