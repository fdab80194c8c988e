"""The in-pod Python scripts (scripts/*.py) as modules for their tests, importing their
siblings (kube_api.py) as they do in the pod, where they sit side by side."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.conftest import ROOT

SCRIPTS = ROOT / "scripts"


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py as the module `name`: the one a sibling imported, if one did (so that
    both see the same classes)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.append(str(SCRIPTS))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
