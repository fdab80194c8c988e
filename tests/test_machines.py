"""The GPU machine records (gpu_cluster/facts/machines.py): every one holds what a render needs,
the schema accepts exactly them, and a machine registered there alone renders a whole stack
(docs/development.md, "Add a machine type")."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from typing import Any

import pytest

from gpu_cluster.config.loading import load_settings
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.facts import machines
from gpu_cluster.facts.gcp_catalog import GPU_MACHINE_ZONES
from gpu_cluster.facts.machines import MACHINES, Provisioning
from gpu_cluster.offline.engine import ProgramRun, run_program
from tests.edits import edited_config
from tools.realtier.nodes import GCE_MACHINES

# The machine types the program shipped with, in the order the schema has always listed them.
SHIPPED = ("a3-megagpu-8g", "a3-highgpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g")
# Compute Engine VPC MTUs: 1300 to 8896 bytes (cloud.google.com/vpc/docs/mtu).
VPC_MTU_RANGE = range(1300, 8896 + 1)
# A node pool name: a DNS-1035 label (cloud.google.com/kubernetes-engine/docs/reference/rest/v1/
# projects.locations.clusters.nodePools#NodePool "name"), kept short for the names built from it.
POOL_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,14}[a-z0-9])?$")

# A machine that does not exist, registered only in MACHINES: A4's facts with its own name,
# pool, accelerator, SSDs, VPC MTU and floor, so the render shows each came from the record.
MADE_UP = "a9-testgpu-8g"
MADE_UP_MACHINE = dataclasses.replace(
    MACHINES["a4-highgpu-8g"],
    pool_name="a9test",
    accelerator="nvidia-test-gpu",
    local_ssds=4,
    vpc_mtu=8244,
    busbw_floor_gbps=123.0,
    gcsfuse_checkpoint_option=None,
)
NODE_POOL = "gcp:container/nodePool:NodePool"


def gke_rdma(machine_type: str, **gcp: Any) -> dict[str, Any]:
    """A GKE rdma stack's settings on `machine_type`, zone us-central1-b vouched for."""
    return {
        "platform": "gke",
        "networkMode": "rdma",
        "kubernetesVersion": "1.35",
        "storage": {"mode": "per-pod"},
        "gcp": {
            "project": "my-gpu-project",
            "region": "us-central1",
            "zone": "us-central1-b",
            "machineType": machine_type,
            "provisioning": "spot",
            "allowUncatalogued": ["us-central1-b"],
            "authorizedNetworks": [{"cidrBlock": "203.0.113.0/24", "displayName": "operators"}],
            **gcp,
        },
    }


def test_the_schema_accepts_exactly_the_records_in_their_order() -> None:
    assert tuple(MACHINES) == SHIPPED
    with pytest.raises(ConfigError) as info:
        load_settings(gke_rdma("a3-edgegpu-8g"))
    assert (
        "gpu-cluster:gcp.machineType = 'a3-edgegpu-8g': Input should be 'a3-megagpu-8g', "
        "'a3-highgpu-8g', 'a3-ultragpu-8g' or 'a4-highgpu-8g'"
    ) in str(info.value)


@pytest.mark.parametrize("name", list(MACHINES))
def test_every_record_has_what_a_render_needs(name: str) -> None:
    m = MACHINES[name]
    assert POOL_NAME.match(m.pool_name)
    assert m.gpus > 0 and m.vcpus > 0 and m.memory_gb > 0 and m.local_ssds > 0
    assert m.accelerator.startswith("nvidia-")
    assert m.vpc_mtu in VPC_MTU_RANGE
    assert m.provisioning and set(m.provisioning) <= set(typing.get_args(Provisioning))
    assert len(set(m.provisioning)) == len(m.provisioning)
    assert m.busbw_floor_gbps > 0
    assert name in machines.machines_for(m.network_mode)
    # GPUDirect RDMA needs its minimum GKE version; the other modes have a release table.
    assert (m.rdma_min_gke is not None) == (m.network_mode == "rdma")
    assert not m.after_nccl_script or m.network_mode == "rdma"
    assert set(m.system_pool) <= {"machineType", "diskSizeGb"}
    # The dated catalog keeps each machine's zones (facts/gcp_catalog.py says why apart).
    assert GPU_MACHINE_ZONES[name]
    assert GCE_MACHINES[name] == (m.vcpus, m.memory_gb)


def test_pool_names_are_unique() -> None:
    names = [m.pool_name for m in MACHINES.values()]
    assert len(names) == len(set(names))


def _made_up_run(monkeypatch: pytest.MonkeyPatch) -> tuple[ProgramRun, dict[str, Any]]:
    monkeypatch.setitem(MACHINES, MADE_UP, MADE_UP_MACHINE)
    overrides = (
        f"gcp.machineType={MADE_UP}",
        # The catalog has no zones for it: the stack vouches for its zone, as for any machine
        # added since CATALOG_DATE.
        "gcp.allowUncatalogued[0]=us-central1-b",
    )
    run = run_program(*edited_config("gcp-a4", overrides), "gcp-a4")
    (pool,) = [p.inputs for p in run.of_type(NODE_POOL) if p.inputs["name"] != "system"]
    return run, pool


def test_a_machine_registered_only_in_machines_renders_a_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run, pool = _made_up_run(monkeypatch)
    config = pool["nodeConfig"]
    assert pool["name"] == "a9test"
    assert config["machineType"] == MADE_UP
    assert config["guestAccelerators"][0]["type"] == "nvidia-test-gpu"
    assert config["guestAccelerators"][0]["count"] == 8
    assert config["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 4}
    assert config["diskType"] == "hyperdisk-balanced"
    host = [n.inputs for n in run.of_type("gcp:compute/network:Network")]
    assert {n["name"]: n["mtu"] for n in host if n["name"] == "gpu-cluster-host"} == {
        "gpu-cluster-host": 8244
    }
    system = [p.inputs for p in run.of_type(NODE_POOL) if p.inputs["name"] == "system"]
    assert system[0]["nodeConfig"]["machineType"] == "e2-standard-16"
    # The fabric gate holds it to its own floor; the gIB installer runs on its accelerator.
    rendered = json.dumps(run.manifests())
    assert '"--expected-busbw-gbps", "123"' in rendered
    assert '"nvidia-test-gpu"' in rendered


def test_a_made_up_machine_is_accepted_and_refused_by_its_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The schema accepts it once registered (listed last in the refusal of another), and its
    capacity rule is the record's: on demand is refused as for A4."""
    monkeypatch.setitem(MACHINES, MADE_UP, MADE_UP_MACHINE)
    with pytest.raises(ConfigError, match=f"'a4-highgpu-8g' or '{MADE_UP}'"):
        load_settings(gke_rdma("a3-edgegpu-8g"))
    assert load_settings(gke_rdma(MADE_UP)).gcp is not None
    with pytest.raises(ConfigError, match=f"gcp.machineType '{MADE_UP}' only as 'flex-start'"):
        load_settings(gke_rdma(MADE_UP, provisioning="on-demand"))
