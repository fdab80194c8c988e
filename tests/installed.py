"""The package as a user gets it: its wheel, built from a copy of this checkout, installed into
a fresh virtualenv that cannot import the checkout."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
# No PYTHONPATH: it could put the checkout before the installed package.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run(*args: str, cwd: Path, python: str = sys.executable) -> str:
    """`python ARGS` in `cwd`; its stdout (the test fails on a non-zero exit)."""
    done = subprocess.run(
        [python, *args], cwd=cwd, env=ENV, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# Makes a module unimportable in an environment, as if not installed: a finder ahead of every
# other that answers "No module named ..." for it and its submodules, loaded by a .pth file.
HIDER = """import sys


class HiddenModules:
    names = {names!r}

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in cls.names:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, HiddenModules)
"""


def install_wheel(into: Path, hidden: tuple[str, ...] = ()) -> Path:
    """Build the wheel and install it into a new virtualenv `into`/venv; returns the venv.
    `hidden`: top-level modules of this interpreter's packages the venv cannot import (an
    optional dependency left out)."""
    # Built from a copy, so the build leaves nothing in the checkout.
    source = into / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "gpu_cluster", "scripts"):
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    dist = into / "dist"
    run("-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source), cwd=into)
    [wheel] = dist.glob("gpu_cluster-*.whl")
    venv = into / "venv"
    run("-m", "venv", "--system-site-packages", str(venv), cwd=into)
    python = str(venv / "bin" / "python")
    # On top of this interpreter's packages (Pulumi's SDKs, pydantic; when it runs in a
    # virtualenv, --system-site-packages reaches only the base interpreter's), never the source
    # tree: a .pth file appends them after the new environment's own site-packages.
    new_site = run("-c", PURELIB, cwd=into, python=python).strip()
    (Path(new_site) / "outer-environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    if hidden:
        (Path(new_site) / "hidden_modules.py").write_text(HIDER.format(names=set(hidden)))
        (Path(new_site) / "hidden-modules.pth").write_text("import hidden_modules\n")
    run("-m", "pip", "install", "--no-deps", "-q", str(wheel), cwd=into, python=python)
    return venv
