"""`pulumi destroy --exclude-protected` through the real engine (docs/contract.md): a stack that
created its namespace leaves the claims and that namespace in the cluster, bound, whichever of
storage.retainOnDelete and storage.protect is on; with both off it deletes them.

The OpenShift stacks, each in one cluster: every combination of the two switches is a stack of
its own (its own namespace, so its own claims and volumes), brought up with `pulumi up` and then
destroyed; what is left is read from the API server. GKE stacks register their claims and
namespace with the same options (tests/test_data_safety.py) but cannot go through the engine
here (docs/real-tier.md).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.conftest import BARCELONA_CREATES_NADS
from tests.real.cluster_state import claim_phase, exists, provision, stack_engine
from tests.real.conftest import Cluster
from tools.realtier.stacks import render, volumes_for

pytestmark = pytest.mark.real

# The stack creates its NADs in the namespace it creates (as tests/real/test_engine.py does).
CREATES_ITS_NAMESPACE = {
    "barcelona": (*BARCELONA_CREATES_NADS, "namespaceMode=create"),
    "nerc-production": ("namespaceMode=create",),
}
SWITCHES = list(itertools.product(("true", "false"), repeat=2))


@pytest.mark.parametrize("stack", sorted(CREATES_ITS_NAMESPACE))
def test_destroy_excluding_protected_keeps_the_claims_and_namespace_unless_both_switches_are_off(
    cluster: Cluster, tmp_path: Path, stack: str
) -> None:
    kube = cluster.kube
    for n, (retain, protect) in enumerate(SWITCHES):
        overrides = (
            *CREATES_ITS_NAMESPACE[stack],
            f"namespace=destroy-{n}",
            f"storage.retainOnDelete={retain}",
            f"storage.protect={protect}",
        )
        stack_render = render(stack, overrides)
        claims = stack_render.of_kind("PersistentVolumeClaim")
        (namespace,) = stack_render.of_kind("Namespace")
        assert claims
        if n == 0:
            provision(kube, stack_render)  # the hosts, shared by every stack here
        else:
            kube.create_all(volumes_for(claims))
        engine = stack_engine(cluster, f"{stack}-{n}", tmp_path / str(n), stack_file_of=stack)
        engine.up(*overrides)
        engine.destroy(exclude_protected=True)

        left = [o["metadata"]["name"] for o in [namespace, *claims] if exists(kube, o)]
        both_off = (retain, protect) == ("false", "false")
        assert len(left) == (0 if both_off else 1 + len(claims)), (retain, protect, left)
        assert all(claim_phase(kube, c) == "Bound" for c in claims if exists(kube, c))
