"""The value types of stack config (gpu_cluster/config/values.py) against the rules they stand
for: each accepts what Kubernetes (or the tool that reads the value) accepts and refuses the
rest, or refuses with a message saying why the program needs more. The real API server judges
the same generated values in tests/real/test_value_contract.py."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_cluster.config.loading import load_settings
from gpu_cluster.config.messages import ConfigError

NIC = {
    "interface": "net1",
    "network": "eno5np0-network",
    "flavour": "sriov",
    "resource": "openshift.io/eno5np0rdma",
    "subnet": "10.0.103.0/24",
}


def openshift(**extra: Any) -> dict[str, Any]:
    return {"platform": "openshift", **extra}


def rdma_nic(**changes: Any) -> dict[str, Any]:
    return openshift(networkMode="rdma", rdma={"nics": [{**NIC, **changes}]})


# One stack per value type, with the value at `{}`.
WITH_VALUE = {
    "name": lambda v: openshift(name=v),
    "namespace": lambda v: openshift(namespace=v),
    "storageClass": lambda v: openshift(storage={"storageClass": v}),
    "nodeName": lambda v: openshift(nodes=1, openshift={"nodeNames": [v]}),
    "labelKey": lambda v: openshift(openshift={"gpuNodeLabel": v}),
    "image": lambda v: openshift(image=v),
    "resource": lambda v: rdma_nic(resource=v),
    "quantity": lambda v: openshift(pod={"cpuRequest": v}),
    "size": lambda v: openshift(storage={"workspaceSize": v}),
}
VALID = {
    "name": "gpu",
    "namespace": "team",
    "storageClass": "ceph.rbd",
    "nodeName": "gpu-1",
    "labelKey": "nvidia.com/gpu.present",
    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
    "resource": "openshift.io/eno5np0rdma",
    "quantity": "32",
    "size": "100Gi",
}


def refusal(raw: dict[str, Any]) -> str | None:
    try:
        load_settings(raw)
    except ConfigError as error:
        return str(error)
    return None


@pytest.mark.parametrize("kind", sorted(WITH_VALUE))
def test_a_final_newline_is_refused_as_the_api_server_refuses_it(kind: str) -> None:
    """Go's `$` ends at the end of the text; Python's `re.match` with `$` let "team\\n" through."""
    assert refusal(WITH_VALUE[kind](VALID[kind])) is None
    assert refusal(WITH_VALUE[kind](VALID[kind] + "\n")) is not None
