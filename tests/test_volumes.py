"""Training-data volumes (storage.volumes) in the render: Cloud Storage buckets on GKE through the
Cloud Storage FUSE CSI driver, shared claims on both platforms; the config rules for them; and
the lists the rules rely on, held to what the program renders.

Google's own objects, field by field: tests/test_vendor_gke.py (tests/vendor/gke_gpudirect.yaml,
`gcs_fuse`). The API server binding the claims and taking the objects:
tests/real/test_stacks_come_up.py (gcp-a4 ships two buckets)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpu_cluster.config.loading import load_settings
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.config.storage import StorageSettings
from gpu_cluster.config.volume_rules import RESERVED_MOUNT_ROOTS, RESERVED_VOLUME_NAMES
from gpu_cluster.facts.gcs import GCS_FUSE_DRIVER, READ_ROLE, READ_WRITE_ROLE
from gpu_cluster.offline.engine import (
    MOCK_LUSTRE_IP,
    MOCK_PEERING_RANGE,
    MOCK_PROJECT_NUMBER,
    ProgramRun,
)
from gpu_cluster.plan.gke_storage import uses_filestore
from tests.conftest import GKE_RWX, STACKS, manifests, one, pod_spec, run_stack
from tests.edits import A4_STATEFULSET
from tests.test_jobset import job_of

BUCKET_TYPE = "gcp:storage/bucket:Bucket"
GRANT_TYPE = "gcp:storage/bucketIAMMember:BucketIAMMember"
JOBSET = ("workload.kind=jobset", "workload.command[0]=/workspace/train.py", *GKE_RWX)
SHARED = (
    "storage.volumes[0].name=checkpoints",
    "storage.volumes[0].mountPath=/checkpoints",
    "storage.volumes[0].sharedClaim.size=10Ti",
    "storage.volumes[0].sharedClaim.storageClass=ocs-storagecluster-cephfs",
    "storage.volumes[1].name=corpus",
    "storage.volumes[1].mountPath=/corpus",
    "storage.volumes[1].readOnly=true",
    "storage.volumes[1].sharedClaim.claimName=team-corpus",
)


def inputs(run: ProgramRun, type_: str) -> dict[str, dict[str, Any]]:
    return {r.name: r.inputs for r in run.of_type(type_)}


def options(run: ProgramRun, type_: str) -> list[dict[str, Any]]:
    return [r.options for r in run.of_type(type_)]


def template(run: ProgramRun) -> dict[str, Any]:
    """The training pods' template, whichever kind runs them."""
    if not manifests(run, "JobSet"):
        found: dict[str, Any] = one(run, "StatefulSet")["spec"]["template"]
        return found
    pods: dict[str, Any] = job_of(one(run, "JobSet"))["template"]
    return pods


def mounts(run: ProgramRun) -> dict[str, dict[str, Any]]:
    (training,) = [c for c in template(run)["spec"]["containers"] if c["name"] == "training"]
    return {m["mountPath"]: m for m in training["volumeMounts"]}


def volumes(run: ProgramRun) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in template(run)["spec"]["volumes"]}


def pod_annotations(run: ProgramRun) -> dict[str, str]:
    annotations: dict[str, str] = template(run)["metadata"]["annotations"]
    return annotations


# --- GKE: buckets ----------------------------------------------------------------------------


def test_gcp_a4_creates_its_buckets_keeps_them_and_mounts_them_through_the_fuse_driver() -> None:
    run = run_stack("gcp-a4")
    buckets = inputs(run, BUCKET_TYPE)
    assert sorted(b["name"] for b in buckets.values()) == [
        "my-gpu-project-checkpoints",
        "my-gpu-project-training-data",
    ]
    for bucket in buckets.values():
        assert bucket["location"] == "us-central1"
        assert bucket["hierarchicalNamespace"] == {"enabled": True}
        assert bucket["uniformBucketLevelAccess"] is True
        assert bucket["publicAccessPrevention"] == "enforced"
        assert bucket["forceDestroy"] is False
    for opts in options(run, BUCKET_TYPE):
        assert opts["protect"] and opts["retainOnDelete"]
    cluster = one_resource(run, "gcp:container/cluster:Cluster")
    assert cluster["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    assert mounts(run)["/data"]["readOnly"] is True
    assert not mounts(run)["/checkpoints"].get("readOnly")
    by_claim = {
        v.get("persistentVolumeClaim", {}).get("claimName"): k for k, v in volumes(run).items()
    }
    assert by_claim["gpu-cluster-training-data"] == "training-data"
    assert by_claim["gpu-cluster-checkpoints"] == "checkpoints"
    annotations = pod_annotations(run)
    assert annotations["gke-gcsfuse/volumes"] == "true"
    # Unlimited: a limit alone would also be the sidecar's request on every node.
    for resource in ("cpu", "memory", "ephemeral-storage"):
        assert annotations[f"gke-gcsfuse/{resource}-limit"] == "0"


def one_resource(run: ProgramRun, type_: str) -> dict[str, Any]:
    (found,) = run.of_type(type_)
    return found.inputs


def test_each_bucket_s_claim_is_bound_to_a_volume_of_the_bucket_alone() -> None:
    run = run_stack("gcp-a4")
    pvs = {pv["spec"]["claimRef"]["name"]: pv for pv in manifests(run, "PersistentVolume")}
    claims = {c["metadata"]["name"]: c for c in manifests(run, "PersistentVolumeClaim")}
    for claim_name, bucket in (
        ("gpu-cluster-training-data", "my-gpu-project-training-data"),
        ("gpu-cluster-checkpoints", "my-gpu-project-checkpoints"),
    ):
        pv, claim = pvs[claim_name], claims[claim_name]
        assert pv["metadata"]["name"] == f"training-{claim_name}-{bucket}"
        assert pv["spec"]["claimRef"]["namespace"] == "training"
        assert pv["spec"]["csi"]["driver"] == GCS_FUSE_DRIVER
        assert pv["spec"]["csi"]["volumeHandle"] == bucket
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        assert claim["spec"]["volumeName"] == pv["metadata"]["name"]
        assert claim["spec"]["storageClassName"] == pv["spec"]["storageClassName"]
        assert claim["spec"]["accessModes"] == pv["spec"]["accessModes"] == ["ReadWriteMany"]
    checkpoint_options = pvs["gpu-cluster-checkpoints"]["spec"]["mountOptions"]
    assert "write:enable-streaming-writes:true" in checkpoint_options
    # gcsfuse <= 3.5.0 does not know A4 as a high-performance machine (facts/gcs.py).
    assert "machine-type:a3-highgpu-8g" in checkpoint_options
    assert (
        "write:enable-streaming-writes:true"
        not in pvs["gpu-cluster-training-data"]["spec"]["mountOptions"]
    )


def test_the_pods_get_the_least_role_on_each_bucket_as_their_own_service_account() -> None:
    run = run_stack("gcp-a4")
    grants = {g["bucket"]: g for g in inputs(run, GRANT_TYPE).values()}
    assert grants["my-gpu-project-training-data"]["role"] == READ_ROLE  # mounted read-only
    assert grants["my-gpu-project-checkpoints"]["role"] == READ_WRITE_ROLE
    (account,) = (
        a["metadata"]
        for a in manifests(run, "ServiceAccount")
        if a["metadata"]["name"] == pod_spec(run)["serviceAccountName"]
    )
    for grant in grants.values():
        assert grant["member"] == (
            f"principal://iam.googleapis.com/projects/{MOCK_PROJECT_NUMBER}/locations/global/"
            "workloadIdentityPools/my-gpu-project.svc.id.goog/subject/ns/"
            f"{account['namespace']}/sa/{account['name']}"
        )


def test_a_referenced_bucket_is_granted_not_created_and_read_write_wins() -> None:
    run = run_stack(
        "gcp-a3",
        "storage.volumes[0].name=shards",
        "storage.volumes[0].mountPath=/shards",
        "storage.volumes[0].readOnly=true",
        "storage.volumes[0].gcsFuse.bucket=team-shards",
        "storage.volumes[0].gcsFuse.mode=reference",
        "storage.volumes[0].gcsFuse.onlyDir=v2/train",
        "storage.volumes[1].name=scratch",
        "storage.volumes[1].mountPath=/scratch",
        "storage.volumes[1].gcsFuse.bucket=team-shards",
        "storage.volumes[1].gcsFuse.mode=reference",
    )
    assert run.of_type(BUCKET_TYPE) == []
    (grant,) = inputs(run, GRANT_TYPE).values()
    assert (grant["bucket"], grant["role"]) == ("team-shards", READ_WRITE_ROLE)
    pvs = {pv["spec"]["claimRef"]["name"]: pv["spec"] for pv in manifests(run, "PersistentVolume")}
    assert "only-dir:v2/train" in pvs["gpu-cluster-shards"]["mountOptions"]
    assert not any(o.startswith("only-dir") for o in pvs["gpu-cluster-scratch"]["mountOptions"])
    # A3 Mega is a high-performance machine to every gcsfuse: no workaround.
    assert not any(
        o.startswith("machine-type") for spec in pvs.values() for o in spec["mountOptions"]
    )


def test_without_volumes_a_stack_renders_no_storage_and_no_driver() -> None:
    run = run_stack("gcp-a3")
    assert run.of_type("gpu-cluster:storage:TrainingStorage") == []
    assert "addonsConfig" not in one_resource(run, "gcp:container/cluster:Cluster")
    assert manifests(run, "PersistentVolume") == []
    assert not any(k.startswith("gke-gcsfuse/") for k in pod_annotations(run))


def test_the_pods_wait_for_their_grants_and_claims_in_both_kinds() -> None:
    for overrides, kind in (
        (A4_STATEFULSET, "kubernetes:apps/v1:StatefulSet"),
        (JOBSET, "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"),
    ):
        run = run_stack("gcp-a4", *overrides)
        (controller,) = run.of_type(kind)
        waits = set(controller.options["dependsOn"])
        for dependency in (
            *run.of_type(GRANT_TYPE),
            *run.of_type("kubernetes:core/v1:PersistentVolumeClaim"),
        ):
            if "-storage-" in dependency.name:
                assert dependency.urn in waits, dependency.name
        assert set(mounts(run)) >= {"/data", "/checkpoints"}
        assert pod_annotations(run)["gke-gcsfuse/volumes"] == "true"


def test_a_changed_mount_option_restarts_the_pods() -> None:
    before = pod_annotations(run_stack("gcp-a4"))
    after = pod_annotations(run_stack("gcp-a4", "storage.volumes[0].gcsFuse.onlyDir=shard-1"))
    assert before["gpu-cluster/volumes-sha256"] != after["gpu-cluster/volumes-sha256"]


# --- GKE: Managed Lustre --------------------------------------------------------------------

LUSTRE = (
    "storage.volumes[2].name=scratch",
    "storage.volumes[2].mountPath=/lustre",
    "storage.volumes[2].managedLustre.instance=gke-lustre",
    "storage.volumes[2].managedLustre.capacityGib=36000",
)
LUSTRE_TYPE = "gcp:lustre/instance:Instance"
HOST_VPC = "gpu-cluster-host-id"  # the mock's ID of the host VPC, what the nodes' eth0 is on


def test_a_created_lustre_instance_joins_the_host_vpc_with_its_peering_and_firewall() -> None:
    run = run_stack("gcp-a4", *LUSTRE, "storage.volumes[2].managedLustre.throughput=1000")
    (instance,) = run.of_type(LUSTRE_TYPE)
    assert instance.inputs == {
        "instanceId": "gke-lustre",
        "project": "my-gpu-project",
        "location": "us-central1-b",
        "network": HOST_VPC,
        "capacityGib": "36000",
        "perUnitStorageThroughput": "1000",
        "filesystem": "lustrefs",
    }
    assert instance.options["protect"] and instance.options["retainOnDelete"]
    (psa,) = run.of_type("gcp:compute/globalAddress:GlobalAddress")
    assert (psa.inputs["purpose"], psa.inputs["addressType"], psa.inputs["network"]) == (
        "VPC_PEERING",
        "INTERNAL",
        HOST_VPC,
    )
    (peering,) = run.of_type("gcp:servicenetworking/connection:Connection")
    assert peering.inputs["reservedPeeringRanges"] == [psa.inputs["name"]]
    assert peering.urn in instance.options["dependsOn"]  # the instance needs the peering
    (firewall,) = [f for f in run.of_type("gcp:compute/firewall:Firewall") if "lustre" in f.name]
    assert firewall.inputs["network"] == HOST_VPC
    assert firewall.inputs["sourceRanges"] == [f"{MOCK_PEERING_RANGE}/{psa.inputs['prefixLength']}"]
    assert firewall.inputs["allows"] == [{"protocol": "tcp", "ports": ["988"]}]
    cluster = one_resource(run, "gcp:container/cluster:Cluster")
    assert cluster["addonsConfig"]["lustreCsiDriverConfig"] == {"enabled": True}


def test_a_lustre_claim_binds_to_a_volume_naming_the_instance_and_its_address() -> None:
    run = run_stack("gcp-a4", *A4_STATEFULSET, *LUSTRE)
    (pv,) = [p for p in manifests(run, "PersistentVolume") if "gke-lustre" in p["metadata"]["name"]]
    claim = next(
        c
        for c in manifests(run, "PersistentVolumeClaim")
        if c["metadata"]["name"] == "gpu-cluster-scratch"
    )
    assert pv["spec"]["csi"] == {
        "driver": "lustre.csi.storage.gke.io",
        "volumeHandle": "my-gpu-project/us-central1-b/gke-lustre",
        "volumeAttributes": {"ip": MOCK_LUSTRE_IP, "filesystem": "lustrefs"},
    }
    assert pv["spec"]["capacity"] == {"storage": "36000Gi"}
    assert claim["spec"]["volumeName"] == pv["metadata"]["name"]
    assert claim["spec"]["storageClassName"] == pv["spec"]["storageClassName"] == ""
    assert mounts(run)["/lustre"]["name"] == "scratch"
    # The pods wait for the volume, which comes once the instance is up.
    (sts,) = run.of_type("kubernetes:apps/v1:StatefulSet")
    (pv_resource,) = [
        r
        for r in run.of_type("kubernetes:core/v1:PersistentVolume")
        if r.name.endswith("scratch-volume")
    ]
    assert pv_resource.urn in sts.options["dependsOn"]


def test_a_referenced_lustre_instance_is_mounted_by_its_mount_point_and_nothing_is_created() -> (
    None
):
    run = run_stack(
        "gcp-a4",
        *LUSTRE,
        "storage.volumes[2].managedLustre.mode=reference",
        "storage.volumes[2].managedLustre.mountPoint=10.90.1.4@tcp:/teamfs",
    )
    for type_ in (LUSTRE_TYPE, "gcp:compute/globalAddress:GlobalAddress"):
        assert run.of_type(type_) == []
    (pv,) = [p for p in manifests(run, "PersistentVolume") if "gke-lustre" in p["metadata"]["name"]]
    assert pv["spec"]["csi"]["volumeAttributes"] == {"ip": "10.90.1.4", "filesystem": "teamfs"}
    cluster = one_resource(run, "gcp:container/cluster:Cluster")
    assert cluster["addonsConfig"]["lustreCsiDriverConfig"] == {"enabled": True}


# --- GKE: Filestore -------------------------------------------------------------------------

# GKE's Filestore classes (docs.cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/
# filestore-csi-driver, "Create a StorageClass"; regional-rwx for the regional tier).
FILESTORE_CLASSES = (
    "standard-rwx",
    "premium-rwx",
    "enterprise-rwx",
    "enterprise-multishare-rwx",
    "zonal-rwx",
    "regional-rwx",
)
FILESTORE_ON = {"gcpFilestoreCsiDriverConfig": {"enabled": True}}


def addons(run: ProgramRun) -> dict[str, Any]:
    found: dict[str, Any] = one_resource(run, "gcp:container/cluster:Cluster").get(
        "addonsConfig", {}
    )
    return found


def test_claims_of_a_filestore_class_turn_its_csi_driver_on() -> None:
    """Whichever claims name it: the shared workspace and datasets, per-pod ones (each pod's
    own instance; 200Gi, under basic SSD's smallest instance, gets one of 2.5Ti), a volume's."""
    for overrides in (
        GKE_RWX,
        ("storage.storageClass=premium-rwx", "storage.storageClassMode=reference"),
        (
            "storage.volumes[0].name=ckpt",
            "storage.volumes[0].mountPath=/ckpt",
            "storage.volumes[0].sharedClaim.size=1Ti",
            "storage.volumes[0].sharedClaim.storageClass=enterprise-multishare-rwx",
        ),
    ):
        assert addons(run_stack("gcp-a3", *overrides)) == FILESTORE_ON, overrides
    both = addons(run_stack("gcp-a4", *GKE_RWX))  # its buckets keep the FUSE driver on
    assert both == {**FILESTORE_ON, "gcsFuseCsiDriverConfig": {"enabled": True}}


def test_without_a_filestore_class_the_filestore_driver_is_left_alone() -> None:
    assert addons(run_stack("gcp-a3")) == {}  # premium-rwo: Persistent Disk
    hyperdisk = run_stack("gcp-a4", *A4_STATEFULSET)
    assert addons(hyperdisk) == {"gcsFuseCsiDriverConfig": {"enabled": True}}


@pytest.mark.parametrize("storage_class", FILESTORE_CLASSES)
def test_every_filestore_class_turns_the_driver_on(storage_class: str) -> None:
    for storage in (
        {"storageClass": storage_class, "storageClassMode": "reference"},
        {
            "mode": "per-pod",
            "volumes": [
                {
                    "name": "ckpt",
                    "mountPath": "/ckpt",
                    "sharedClaim": {"size": "1Ti", "storageClass": storage_class},
                }
            ],
        },
    ):
        assert uses_filestore(load_settings({**GKE, "storage": storage})), storage
    assert not uses_filestore(load_settings(GKE))


@pytest.mark.parametrize(
    ("storage_class", "size", "refused"),
    [
        # An instance class rounds a smaller claim up to its tier's smallest instance.
        ("standard-rwx", "1Gi", False),
        ("premium-rwx", "100Gi", False),
        ("enterprise-rwx", "100Gi", False),
        # Above the tier's largest instance (cloud.google.com/filestore/docs/service-tiers).
        ("standard-rwx", "63.9Ti", False),
        ("standard-rwx", "64Ti", True),
        ("premium-rwx", "64Ti", True),
        ("enterprise-rwx", "10Ti", False),
        ("enterprise-rwx", "10241Gi", True),
        ("zonal-rwx", "100Ti", False),
        ("zonal-rwx", "101Ti", True),
        ("regional-rwx", "100Ti", False),
        ("regional-rwx", "101Ti", True),
        # A share: 100 GiB to 1 TiB, else the driver refuses it.
        ("enterprise-multishare-rwx", "99Gi", True),
        ("enterprise-multishare-rwx", "100Gi", False),
        ("enterprise-multishare-rwx", "1Ti", False),
        ("enterprise-multishare-rwx", "1025Gi", True),
    ],
)
def test_a_filestore_claim_is_refused_only_at_a_size_never_provisioned(
    storage_class: str, size: str, refused: bool
) -> None:
    config = {
        **GKE,
        "storage": {
            "storageClass": storage_class,
            "storageClassMode": "reference",
            "workspaceSize": size,
            "datasetsSize": None,
        },
    }
    if not refused:
        assert load_settings(config).storage.workspace_size == size
        return
    with pytest.raises(ConfigError) as raised:
        load_settings(config)
    (line,) = [x for x in str(raised.value).splitlines() if "storage.workspaceSize" in x]
    assert line.strip().startswith(f"gpu-cluster:storage.workspaceSize = {size!r}: ")
    assert f"'{storage_class}'" in line and "Pending" in line


# --- shared claims ---------------------------------------------------------------------------


def test_openshift_creates_a_shared_claim_and_mounts_an_existing_one_untouched() -> None:
    run = run_stack("nerc-production", *SHARED)
    claims = {c["metadata"]["name"]: c for c in manifests(run, "PersistentVolumeClaim")}
    created = claims["ml-dev-env-checkpoints"]["spec"]
    assert created["accessModes"] == ["ReadWriteMany"]
    assert created["storageClassName"] == "ocs-storagecluster-cephfs"
    assert created["resources"] == {"requests": {"storage": "10Ti"}}
    assert "team-corpus" not in claims
    assert volumes(run)["corpus"]["persistentVolumeClaim"]["claimName"] == "team-corpus"
    assert mounts(run)["/corpus"]["readOnly"] is True
    assert manifests(run, "PersistentVolume") == []
    assert not any(k.startswith("gke-gcsfuse/") for k in pod_annotations(run))
    (storage_claim,) = [
        r for r in run.of_type("kubernetes:core/v1:PersistentVolumeClaim") if "-storage-" in r.name
    ]
    assert storage_claim.options["protect"] and storage_claim.options["retainOnDelete"]


def test_a_stack_that_opts_out_keeps_nothing_of_its_volumes() -> None:
    run = run_stack("gcp-a4", "storage.retainOnDelete=false", "storage.protect=false")
    for type_ in (BUCKET_TYPE, "kubernetes:core/v1:PersistentVolume"):
        for opts in options(run, type_):
            assert not opts["protect"] and not opts["retainOnDelete"]
    for pv in manifests(run, "PersistentVolume"):
        assert pv["metadata"]["annotations"] == {"gpu-cluster/retain-on-delete": "false"}


# --- the lists the rules rely on -------------------------------------------------------------

VARIANTS = [(stack, ()) for stack in STACKS] + [
    ("nerc-production", ("codeSync.repo=https://example.com/x.git",)),
    ("gcp-a3", JOBSET),
]


@pytest.mark.parametrize(("stack", "overrides"), VARIANTS)
def test_the_program_s_own_pod_volumes_and_mounts_are_the_reserved_ones(
    stack: str, overrides: tuple[str, ...]
) -> None:
    """A data volume can neither take the name of a volume the program gives the pods nor be
    mounted over or inside a directory the training container already uses."""
    run = run_stack(stack, *overrides)
    data_claims = {
        r.inputs["metadata"]["name"]
        for r in run.of_type("kubernetes:core/v1:PersistentVolumeClaim")
        if "-storage-" in r.name
    }
    own = {
        name
        for name, v in volumes(run).items()
        if v.get("persistentVolumeClaim", {}).get("claimName") not in data_claims
    }
    assert own <= set(RESERVED_VOLUME_NAMES)
    data_paths = {path for path, m in mounts(run).items() if m["name"] not in own}
    for path in set(mounts(run)) - data_paths:
        assert any(path == r or path.startswith(r + "/") for r in RESERVED_MOUNT_ROOTS), path


# --- config ----------------------------------------------------------------------------------

GKE: dict[str, Any] = {
    "platform": "gke",
    "networkMode": "tcp",
    "kubernetesVersion": "1.35",
    "gcp": {
        "project": "my-gpu-project",
        "region": "us-central1",
        "zone": "us-central1-b",
        "authorizedNetworks": [{"cidrBlock": "203.0.113.0/24", "displayName": "vpn"}],
    },
    "storage": {"mode": "per-pod"},  # GKE's default class has no shared claims
}
BUCKET = {"name": "data", "mountPath": "/data", "gcsFuse": {"bucket": "team-data"}}
LAKE = {"name": "lake", "mountPath": "/lake"}


def refusal(config: dict[str, Any], *volumes: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as err:
        load_settings({**config, "storage": {"volumes": list(volumes)}})
    return str(err.value)


@pytest.mark.parametrize(
    ("volume", "says"),
    [
        ({**BUCKET, "sharedClaim": {"size": "1Ti"}}, "set exactly one of gcsFuse"),
        ({"name": "data", "mountPath": "/data"}, "set exactly one of gcsFuse"),
        ({**BUCKET, "name": "workspace"}, "storage.volumes[0].name = 'workspace'"),
        ({**BUCKET, "name": "nccl-env"}, "the pods already have a volume of that name"),
        ({**BUCKET, "mountPath": "/usr/share/data"}, "storage.volumes[0].mountPath = "),
        ({**BUCKET, "mountPath": "/workspace/data"}, "overlaps /workspace"),
        ({**BUCKET, "mountPath": "/opt"}, "overlaps /opt"),
        ({**BUCKET, "mountPath": "/data/"}, "no trailing '/'"),
        ({**BUCKET, "mountPath": "data"}, "must be an absolute path"),
        ({**BUCKET, "mountPath": "/a/../data"}, "must be an absolute path"),
        ({**BUCKET, "mountPath": "/"}, "must be an absolute path"),
        ({**BUCKET, "gcsFuse": {"bucket": "Team-Data"}}, "must be a Cloud Storage bucket name"),
        ({**BUCKET, "gcsFuse": {"bucket": "team.data"}}, "names with dots"),
        ({**BUCKET, "gcsFuse": {"bucket": "my-google-data"}}, "refuses bucket names"),
        ({**BUCKET, "gcsFuse": {"bucket": "goog-data"}}, "starting with 'goog'"),
        ({**BUCKET, "gcsFuse": {"bucket": "ab"}}, "3-63"),
        ({**BUCKET, "gcsFuse": {"bucket": "team-data", "mode": "adopt"}}, "'create' or"),
        ({**BUCKET, "gcsFuse": {"bucket": "team-data", "onlyDir": "/abs"}}, "onlyDir"),
        (
            {"name": "ckpt", "mountPath": "/ckpt", "sharedClaim": {"size": "1Ti"}},
            "sharedClaim.storageClass: required on GKE",
        ),
        (
            {"name": "c", "mountPath": "/c", "sharedClaim": {"size": "1Ti", "claimName": "x"}},
            "set exactly one of size",
        ),
        (
            {
                "name": "c",
                "mountPath": "/c",
                "sharedClaim": {"claimName": "x", "storageClass": "y"},
            },
            "storageClass is only used with size",
        ),
        ({**BUCKET, "gcsFuse": {"bucket": "team-data", "use": "logs"}}, "gcsFuse.use"),
        (
            {**LAKE, "managedLustre": {"instance": "fs", "capacityGib": 9000, "mode": "reference"}},
            "mode reference needs mountPoint",
        ),
        (
            {
                **LAKE,
                "managedLustre": {
                    "instance": "fs",
                    "capacityGib": 9000,
                    "mountPoint": "10.0.0.2@tcp:/fs",
                },
            },
            "remove 'mountPoint'",
        ),
        (
            {
                **LAKE,
                "managedLustre": {
                    "instance": "fs",
                    "capacityGib": 9000,
                    "mode": "reference",
                    "mountPoint": "10.0.0.2@tcp:/fs",
                    "throughput": 250,
                },
            },
            "remove 'throughput'",
        ),
        (
            {**LAKE, "managedLustre": {"instance": "Fs", "capacityGib": 9000}},
            "managedLustre.instance",
        ),
        (
            {**LAKE, "managedLustre": {"instance": "fs", "capacityGib": 9000, "throughput": 300}},
            "managedLustre.throughput",
        ),
        (
            {
                **LAKE,
                "managedLustre": {"instance": "fs", "capacityGib": 9000, "filesystem": "lustrefs1"},
            },
            "managedLustre.filesystem",
        ),
        ({**LAKE, "managedLustre": {"instance": "fs"}}, "managedLustre.capacityGib: required"),
    ],
)
def test_a_bad_volume_is_refused_naming_its_key(volume: dict[str, Any], says: str) -> None:
    message = refusal(GKE, volume)
    assert says in message, message
    assert "gpu-cluster:storage.volumes" in message or "storage.volumes" in message


def test_volumes_may_not_share_a_name_a_mount_or_what_they_create() -> None:
    message = refusal(GKE, BUCKET, {**BUCKET, "mountPath": "/data/more"})
    assert "2 volumes are named 'data'" in message
    assert "overlaps another volume's /data" in message
    assert "bucket 'team-data' is created by 2 volumes" in message
    lustre = {"instance": "fs", "capacityGib": 9000}
    message = refusal(
        GKE,
        {**LAKE, "managedLustre": lustre},
        {"name": "lake2", "mountPath": "/lake2", "managedLustre": lustre},
    )
    assert "Lustre instance 'fs' is created by 2 volumes" in message


def test_gke_s_storage_is_refused_off_gke_naming_the_alternative() -> None:
    message = refusal({"platform": "openshift"}, BUCKET)
    assert "gpu-cluster:storage.volumes[0].gcsFuse is only used when platform is 'gke'" in message
    assert "use sharedClaim" in message
    lustre = {**LAKE, "managedLustre": {"instance": "fs", "capacityGib": 9000}}
    message = refusal({"platform": "openshift"}, lustre)
    assert "storage.volumes[0].managedLustre is only used when platform is 'gke'" in message


def test_shared_claims_on_gke_need_a_class_that_provisions_read_write_many() -> None:
    """GKE's default class and the other Persistent Disk classes provision no ReadWriteMany
    file system; a referenced class (Filestore's) is taken, and per-pod claims."""
    for storage, says in (
        ({}, "gpu-cluster:storage.storageClass unset (GKE's default, 'standard-rwo')"),
        ({"storageClass": "standard"}, "gpu-cluster:storage.storageClass = 'standard'"),
    ):
        with pytest.raises(ConfigError, match=re.escape(says)):
            load_settings({**GKE, "storage": storage})
    for storage in (
        {"storageClass": "standard-rwx", "storageClassMode": "reference"},
        {"mode": "per-pod"},
    ):
        taken = load_settings({**GKE, "storage": storage}).storage
        assert taken == StorageSettings.model_validate(storage)


def test_shared_claims_on_openshift_need_a_class_that_provisions_read_write_many() -> None:
    """OpenShift Data Foundation's Ceph RBD classes provision ReadWriteMany claims only as block
    devices; its CephFS class is taken, and per-pod claims of the RBD class."""
    for rbd, cephfs in (
        ("ocs-storagecluster-ceph-rbd", "ocs-storagecluster-cephfs"),
        ("ocs-external-storagecluster-ceph-rbd", "ocs-external-storagecluster-cephfs"),
    ):
        with pytest.raises(ConfigError) as refused:
            load_settings({"platform": "openshift", "storage": {"storageClass": rbd}})
        message = str(refused.value)
        assert f"gpu-cluster:storage.storageClass = '{rbd}': storage.mode 'rwx'" in message
        assert f"(the same Ceph cluster's CephFS class, '{cephfs}', or an NFS class)" in message
        claim = {"size": "1Ti", "storageClass": rbd}
        volume = {"name": "ckpt", "mountPath": "/ckpt", "sharedClaim": claim}
        with pytest.raises(ConfigError, match=re.escape(f"sharedClaim.storageClass = '{rbd}'")):
            load_settings({"platform": "openshift", "storage": {"volumes": [volume]}})
        for storage in ({"storageClass": cephfs}, {"mode": "per-pod", "storageClass": rbd}):
            taken = load_settings({"platform": "openshift", "storage": storage}).storage
            assert taken == StorageSettings.model_validate(storage)


def test_a_good_volume_list_is_taken_on_each_platform() -> None:
    shared = {"name": "ckpt", "mountPath": "/ckpt", "sharedClaim": {"size": "1Ti"}}
    settings = load_settings({"platform": "openshift", "storage": {"volumes": [shared]}})
    assert [v.name for v in settings.storage.volumes] == ["ckpt"]
    reference = {**BUCKET, "gcsFuse": {"bucket": "team-data", "mode": "reference"}}
    settings = load_settings(
        {
            **GKE,
            # Per-pod claims: GKE's default class provisions no shared (ReadWriteMany) claim.
            "storage": {
                "mode": "per-pod",
                "volumes": [BUCKET, {**reference, "name": "b", "mountPath": "/b"}],
            },
        }
    )
    assert len(settings.storage.volumes) == 2
