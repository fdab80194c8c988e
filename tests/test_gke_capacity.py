"""How a multi-node GKE stack gets its nodes (#44 item 1): flex-start VMs come one by one unless
queued provisioning asks for all of a run's nodes at once, and the shipped A4 stack asks so."""

from __future__ import annotations

import pytest

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.loading import settings_from
from gpu_cluster.offline.replacements import plan
from tests.as_of import AS_OF
from tests.conftest import manifests, one, other_warnings, rows, run_stack
from tests.edits import A4_STATEFULSET, edited_config
from tests.test_edit_matrix import summary, violations

# Google, docs.cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest (read
# 2026-11-28): "Use flex-start with queued provisioning [...] when [...] your workloads are
# required to run across multiple nodes simultaneously. For smaller workloads that can run on a
# single node, use Flex-start VMs."
WARNING = (
    "gpu-cluster:gcp.provisioning = 'flex-start' with gpu-cluster:nodes = 2 and "
    "gcp.queuedProvisioning false: GKE obtains each flex-start node on its own, so a node can "
    "arrive and bill while the run waits for the others; set gcp.queuedProvisioning: true (all "
    "of a run's nodes at once, or none; needs workload.kind 'jobset' with workload.queue.mode "
    "'create'), or use gcp.provisioning 'reservation' (Google: flex-start without queued "
    "provisioning is for workloads that run on a single node)"
)


def warnings_of(stack: str, *overrides: str) -> list[str]:
    """The program's warnings on `stack` with overrides (`!key` removes a top-level key), less
    the shipped files' placeholder warnings."""
    config = edited_config(stack, overrides)
    return other_warnings(settings_from(*config, PROVIDER_SETTINGS, as_of=AS_OF)[1])


# The JobSet gcp-a4 ships, and a StatefulSet (its workload block removed: the kind's default).
@pytest.mark.parametrize("kind", [(), ("!workload",)], ids=["jobset", "statefulset"])
def test_several_nodes_on_plain_flex_start_warn_naming_the_key(kind: tuple[str, ...]) -> None:
    overrides = ("gcp.queuedProvisioning=false", *kind)
    assert WARNING in warnings_of("gcp-a4", *overrides)
    # The render carries it too (pulumi preview and up log it).
    assert WARNING in run_stack("gcp-a4", *overrides).warnings


# queuedProvisioning is read with flex-start only: another capacity type goes without it.
OTHER_CAPACITY = "!gcp.queuedProvisioning"


@pytest.mark.parametrize(
    "edit",
    [
        ("gcp.queuedProvisioning=false", "nodes=1"),  # one node has nothing to wait for
        (OTHER_CAPACITY, "gcp.provisioning=reservation", "gcp.reservation=a4-res"),
        (OTHER_CAPACITY, "gcp.provisioning=spot"),
    ],
)
def test_one_node_or_other_capacity_does_not_warn(edit: tuple[str, ...]) -> None:
    assert warnings_of("gcp-a4", *edit) == []


def test_the_shipped_a4_stack_gets_both_nodes_at_once() -> None:
    """gcp-a4 runs a queued JobSet on a queued-provisioning pool, as cluster-toolkit's
    examples/gke-consumption-options/dws-flex-start-queued-provisioning does (1047080): Kueue
    admits the run only once GKE's ProvisioningRequest holds every node."""
    assert warnings_of("gcp-a4") == []
    run = run_stack("gcp-a4")
    (pool,) = [r for r in run.of_type("gcp:container/nodePool:NodePool") if r.name.endswith("a4")]
    assert pool.inputs["queuedProvisioning"] == {"enabled": True}
    assert pool.inputs["nodeConfig"]["flexStart"] is True
    assert manifests(run, "StatefulSet") == []
    config = one(run, "ProvisioningRequestConfig")["spec"]
    assert config["provisioningClassName"] == "queued-provisioning.gke.io"
    (check,) = one(run, "ClusterQueue")["spec"]["admissionChecksStrategy"]["admissionChecks"]
    assert check["name"] == one(run, "AdmissionCheck")["metadata"]["name"]


def test_a_stack_deployed_from_the_old_file_is_not_switched_under_its_claims() -> None:
    """gcp-a4 deployed as it shipped before (a StatefulSet, per-pod Hyperdisk claims) and then
    given this file: the per-pod claims would go, so the engine stops at their protect until
    the owner opts in (storage.protect false) or keeps the StatefulSet in their own file."""
    steps = plan(rows(run_stack("gcp-a4", *A4_STATEFULSET)), rows(run_stack("gcp-a4")))
    # The edit, key by key: the file's values where A4_STATEFULSET differs.
    edit = (
        "workload.kind=jobset",
        "gcp.queuedProvisioning=true",
        "storage.mode=rwx",
        "storage.storageClass=standard-rwx",
        "storage.storageClassMode=reference",
    )
    assert violations(edit, steps) == []
    assert summary(steps) == {"delete PersistentVolumeClaim!": 4, "replace NodePool": 1}
