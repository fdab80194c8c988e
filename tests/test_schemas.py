"""Everything rendered validates: built-in kinds against the upstream OpenAPI schemas for the
stack's Kubernetes version (strict: unknown fields fail), custom resources against their CRDs."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from gpu_cluster.config.loading import decode_config, load_settings
from tests.conftest import BARCELONA_CREATES_NADS, GKE_RWX, STACKS, manifests, run_stack
from tests.crd_schemas import BY_KIND, CNI_CONFIG
from tests.edits import edited_config

# Stack variants beyond the shipped files: every network mode and storage mode is covered.
VARIANTS = [(stack, ()) for stack in STACKS] + [
    ("barcelona", ("networkMode=tcp",)),
    ("barcelona", ("storage.mode=rwx", "storage.storageClass=ocs-external-storagecluster-cephfs")),
    ("barcelona", ("rdma.gidIndex=auto",)),
    ("barcelona", ("rdma.memlock=machineconfig",)),
    ("barcelona", ("namespaceMode=create", *BARCELONA_CREATES_NADS)),
    ("gcp-a3", ("networkMode=tcp",)),
    ("gcp-a3", ("gcp.placementMaxDistance=2",)),
    ("nerc-production", ("workload.kind=jobset", "workload.command[0]=train.py")),
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            "workload.queue.preemption=LowerPriority",
            "workload.queue.priorityClasses[0].name=low",
            "workload.queue.priorityClasses[0].value=-10",
        ),
    ),
    ("nerc-production", ("monitoring.runMetrics.enabled=true",)),
    ("gcp-a4", ("monitoring.runMetrics.enabled=true",)),
    ("gcp-a4", ("workload.kind=jobset", "workload.command[0]=train.py", *GKE_RWX)),
    (
        "gcp-a3",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            *GKE_RWX,
            "workload.queue.healthGate.enabled=true",
        ),
    ),
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            "workload.queue.topologyLevels[0]=example.com/rack",
            "workload.queue.healthGate.enabled=true",
        ),
    ),
    # The stack's own health runner on each platform.
    *(
        (
            stack,
            (
                "workload.kind=jobset",
                "workload.command[0]=train.py",
                *placed,
                "workload.queue.healthGate.enabled=true",
                "workload.queue.healthGate.checks[0]=gpu",
                "workload.queue.healthGate.runner.enabled=true",
            ),
        )
        for stack, placed in (
            ("gcp-a3", GKE_RWX),
            ("nerc-production", ("workload.queue.topologyLevels[0]=example.com/rack",)),
        )
    ),
    (
        "gcp-a4",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            *GKE_RWX,
            "gcp.queuedProvisioning=true",
        ),
    ),
]


def kubernetes_version(stack: str, overrides: tuple[str, ...]) -> str:
    config, _ = edited_config(stack, overrides)
    raw = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("gpu-cluster:")}
    return load_settings(decode_config(raw)).kubernetes_version


def validate(manifest: dict[str, Any], version: str) -> None:
    schema = BY_KIND.get(manifest["kind"])
    if schema is not None:
        jsonschema.validate(manifest, schema)
        if manifest["kind"] == "NetworkAttachmentDefinition":
            jsonschema.validate(json.loads(manifest["spec"]["config"]), CNI_CONFIG)
        if manifest["kind"] == "JobSet":
            for replicated in manifest["spec"]["replicatedJobs"]:
                job = {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": f"{manifest['metadata']['name']}-{replicated['name']}"},
                    "spec": replicated["template"]["spec"],
                }
                kubernetes_validate.validate(job, version, strict=True)
    else:
        kubernetes_validate.validate(manifest, version, strict=True)


@pytest.mark.parametrize(("stack", "overrides"), VARIANTS, ids=lambda v: str(v))
def test_every_object_validates(stack: str, overrides: tuple[str, ...]) -> None:
    version = kubernetes_version(stack, overrides)
    rendered = run_stack(stack, *overrides).manifests()
    assert rendered
    for manifest in rendered:
        validate(manifest, version)


def test_the_validators_are_strict() -> None:
    """Guards the test above: a misspelled field or a missing CRD key must fail validation."""
    sts = copy.deepcopy(manifests(run_stack("barcelona"), "StatefulSet")[0])
    sts["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(sts, "1.31")
    scc = copy.deepcopy(manifests(run_stack("barcelona"), "SecurityContextConstraints")[0])
    del scc["defaultAddCapabilities"]
    with pytest.raises(jsonschema.ValidationError):
        validate(scc, "1.31")
    created = run_stack("barcelona", *BARCELONA_CREATES_NADS)
    nad = copy.deepcopy(manifests(created, "NetworkAttachmentDefinition")[0])
    nad["spec"]["config"] = json.dumps({"cniVersion": "1.0.0", "name": "x", "type": "sriov"})
    with pytest.raises(jsonschema.ValidationError):
        validate(nad, "1.31")
    queued_stack, queued_overrides = VARIANTS[-3]
    queued = run_stack(queued_stack, *queued_overrides)
    job_set = copy.deepcopy(manifests(queued, "JobSet")[0])
    pod = job_set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["comand"] = ["train.py"]
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(job_set, "1.31")
    # Kueue v1beta1's spec.admissionChecks, which v1beta2's API server would prune.
    queue = copy.deepcopy(manifests(queued, "ClusterQueue")[0])
    queue["spec"]["admissionChecks"] = ["check"]
    with pytest.raises(jsonschema.ValidationError):
        validate(queue, "1.31")
    memlock = run_stack("barcelona", "rdma.memlock=machineconfig")
    config = copy.deepcopy(manifests(memlock, "MachineConfig")[0])
    del config["spec"]["config"]["ignition"]
    with pytest.raises(jsonschema.ValidationError):
        validate(config, "1.31")


def test_macvlan_and_host_device_nads_are_valid_cni() -> None:
    run = run_stack(
        "barcelona",
        "rdma.nics[0].flavour=macvlan",
        "rdma.nics[0].master=eno5np0",
        "rdma.nics[0].resource=rdma/rdma_shared_device_a",
        "rdma.nics[1].flavour=host-device",
        "rdma.nics[1].resource=nvidia.com/hostdev",
        *BARCELONA_CREATES_NADS,
    )
    configs = {n["metadata"]["name"]: n for n in manifests(run, "NetworkAttachmentDefinition")}
    for nad in configs.values():
        validate(nad, "1.31")
    macvlan = json.loads(configs["eno5np0-network"]["spec"]["config"])
    assert (macvlan["type"], macvlan["master"]) == ("macvlan", "eno5np0")
    assert "annotations" not in configs["eno5np0-network"]["metadata"]
    # NVIDIA's HostDeviceNetwork template: the resourceName annotation (Multus hands the
    # allocated device to the plugin) and no `device` field.
    hostdev_nad = configs["eno6np0-network"]
    assert hostdev_nad["metadata"]["annotations"] == {
        "k8s.v1.cni.cncf.io/resourceName": "nvidia.com/hostdev"
    }
    hostdev = json.loads(hostdev_nad["spec"]["config"])
    assert hostdev["type"] == "host-device" and "device" not in hostdev
    with_device = copy.deepcopy(hostdev_nad)
    with_device["spec"]["config"] = json.dumps({**hostdev, "device": "eno6np0"})
    with pytest.raises(jsonschema.ValidationError):
        validate(with_device, "1.31")
