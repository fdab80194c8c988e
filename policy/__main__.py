"""Policy pack entry point: `pulumi preview --policy-pack policy` runs this file.

The CLI runs it with this directory first on sys.path; the project root goes on it too, for
`policy.gpu_cluster_policies` and the `gpu_cluster` package it reads the pinned releases from.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policy.gpu_cluster_policies import POLICIES  # noqa: E402

PolicyPack(
    name="gpu-cluster-policy",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=list(POLICIES),
)
