"""Where the scripts that run inside pods live (pure).

They are real files under version control in scripts/ at the repository root; the wheel ships
them as gpu_cluster/scripts/ (pyproject.toml maps the folder there), so a program that installs
the package finds them too.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent
_INSTALLED = _PACKAGE / "scripts"
SCRIPTS_PATH = _INSTALLED if _INSTALLED.is_dir() else _PACKAGE.parent / "scripts"
# This package, some of whose pure modules a controller script imports (shipped beside it).
PACKAGE_PATH = _PACKAGE
PACKAGE = _PACKAGE.name
# The Kubernetes client the controller scripts (node_health_gate.py, node_health_runner.py)
# import from beside them.
KUBE_API_SCRIPT = "kube_api.py"
