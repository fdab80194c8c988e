"""The training container on every GKE mode (#44 item 2): non-root, nothing added, and no
setting anywhere that does nothing. Google's manifests run the workload as root; why each mode
needs no root is listed beside its deviation in tests/vendor/gke_gpudirect.yaml."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import STACKS, pod_spec, run_stack

# The UID the training pods run as on GKE, where no SCC assigns one (gpu_cluster/components/
# gke.py TRAINING_UID): above 10000, clear of the node's users.
GKE_TRAINING_UID = 10001
# One stack per GKE mode: tcpxo (A3 Mega), tcpx (A3 High), rdma with gIB (A4).
GKE_MODES = ["gcp-a3", "a3-high", "gcp-a4"]


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec["containers"], *spec.get("initContainers", [])]


def runs_as(spec: dict[str, Any], c: dict[str, Any]) -> int | None:
    """The UID a container runs as: its own runAsUser, else the pod's."""
    uid: int | None = c.get("securityContext", {}).get(
        "runAsUser", spec.get("securityContext", {}).get("runAsUser")
    )
    return uid


@pytest.mark.parametrize("stack", GKE_MODES)
def test_the_training_container_runs_non_root_with_no_capability(stack: str) -> None:
    spec = pod_spec(run_stack(stack))
    (training,) = [c for c in spec["containers"] if c["name"] == "training"]
    assert runs_as(spec, training) == GKE_TRAINING_UID
    assert spec["securityContext"]["runAsNonRoot"] is True
    context = training["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["allowPrivilegeEscalation"] is False and context["privileged"] is False


@pytest.mark.parametrize("stack", STACKS)
def test_a_capability_is_added_only_where_it_takes_effect(stack: str) -> None:
    """Kubernetes grants no ambient capabilities (kubernetes/kubernetes#56374): one added to a
    container that runs as another UID than 0 is never effective, a setting that does nothing."""
    spec = pod_spec(run_stack(stack))
    for c in containers(spec):
        if c.get("securityContext", {}).get("capabilities", {}).get("add"):
            assert runs_as(spec, c) == 0, (stack, c["name"])
