"""Property: any stack config either stops with a message naming the key, before any resource,
or renders objects the API server would accept; either way no secret shows.

Hypothesis starts from a shipped stack file and edits one to three keys anywhere in the schema
(plausible values, boundary values and junk of every JSON shape, whole sections replaced by the
wrong shape, and the members of the contract's classes: values nested 10,000 deep, integers of
5,000 digits, numbers that are not finite or beyond what the engine or a Kubernetes quantity
holds, negative zero), some of them set as secrets, then runs the real program under the mock
engine. A run that fails must fail with `invalid stack config:` naming an edited key, register
nothing and show no secret; any other exception fails the test. A run that succeeds must
produce objects that pass the upstream OpenAPI schemas (kubernetes-validate) and the API
server's own rules checked below (names, label keys and values, quantities within what a
quantity holds, requests <= limits, non-empty claims), GCP names that GCP accepts, and no
secret in plain text. Fixed budget and derandomized: the same examples on every run.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import Any

import kubernetes_validate
import pulumi
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from gpu_cluster.config.loading import decode_config, load_settings
from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.stack_files import engine_config, stack_file_config
from tests.conftest import STACKS, schema_key_paths
from tests.contract import DEEP_LIST, DEEP_OBJECT, HUGE_INT, RawJson, set_key
from tests.test_schemas import validate

PROJECT = "gpu-cluster"
NIC = "rdma.nics[0]"

# Every key of the schema with values worth trying: valid ones, boundaries, near misses.
KEYS: dict[str, list[Any]] = {
    "platform": ["openshift", "gke"],
    "name": ["gpu-cluster", "a" * 40, "a" * 41, "a" * 52, "a" * 53, "9lives", "x-"],
    "namespace": ["training", "0-team", "a" * 63, "a" * 64, "Team"],
    "namespaceMode": ["create", "adopt", "reference", "keep"],
    # Large counts are the schema's range check (test_settings); per-pod stacks register two claims
    # per node, which would make examples slow without testing anything new.
    "nodes": [1, 2, 3, 17, 4097, 0],
    "gpusPerNode": [1, 4, 8, 16, 17],
    "networkMode": ["tcp", "rdma", "tcpxo", "tcpx"],
    "kubernetesVersion": ["1.28", "1.29", "1.31", "1.32", "1.35", "1.36", "1.27"],
    "image": ["nvcr.io/nvidia/pytorch:25.02-py3", "pytorch:latest", "repo@sha256:" + "a" * 64],
    "pod.cpuRequest": ["32", 32, "500m", "1e3", "0.5", "-1", "1.5.1"],
    "pod.memoryRequest": ["128Gi", "1e9", "2G", "1Ti"],
    "pod.cpuLimit": ["64", 64, "1", None],
    "pod.memoryLimit": ["256Gi", "1Gi", "3000Gi"],
    "pod.shmSize": ["64Gi", "1Mi", "0"],
    "pod.terminationGraceSeconds": [30, 1, 86400, 0, 86401, "30s"],
    "storage.mode": ["rwx", "per-pod"],
    "storage.storageClass": ["premium-rwo", "hyperdisk-balanced", "ceph.rbd", "Fast_SSD", None],
    "storage.storageClassMode": ["create", "reference", None, "adopt"],
    "storage.workspaceSize": ["100Gi", 1073741824, "0", "1e12"],
    "storage.datasetsSize": ["500Gi", None, "0Gi"],
    "storage.retainOnDelete": [True, False],
    "storage.volumes[0].name": ["data", "workspace", "Data", "a" * 64],
    "storage.volumes[0].mountPath": ["/data", "/usr/data", "data", "/data/", "/a/../b"],
    "storage.volumes[0].readOnly": [True, False],
    "storage.volumes[0].minWriteGbps": [0.5, 100, 0],
    "storage.volumes[0].minReadGbps": [1, 0],
    "storage.volumes[0].gcsFuse.bucket": ["team-data", "a" * 63, "a" * 64, "goog-x", "x.y"],
    "storage.volumes[0].gcsFuse.mode": ["create", "reference", "adopt"],
    "storage.volumes[0].gcsFuse.onlyDir": ["run-1", "a/b", "/abs", "a b"],
    "storage.volumes[0].gcsFuse.use": ["data", "checkpoints", "logs"],
    "storage.volumes[0].managedLustre.instance": ["gke-lustre", "a" * 63, "a" * 64, "Lustre"],
    "storage.volumes[0].managedLustre.mode": ["create", "reference", "adopt"],
    "storage.volumes[0].managedLustre.capacityGib": [36000, 9000, 0, 2**53 + 1],
    "storage.volumes[0].managedLustre.throughput": [125, 500, 1000, 300],
    "storage.volumes[0].managedLustre.filesystem": ["lustrefs", "fs1", "lustrefs1", "a-b"],
    "storage.volumes[0].managedLustre.mountPoint": ["10.90.1.4@tcp:/teamfs", "10.90.1.4", None],
    "storage.volumes[0].sharedClaim.size": ["10Ti", "0"],
    "storage.volumes[0].sharedClaim.storageClass": ["ocs-storagecluster-cephfs", "Bad_Class"],
    "storage.volumes[0].sharedClaim.claimName": ["team-corpus", "Bad"],
    "storage.protect": [True, False],
    "workload.kind": ["statefulset", "jobset", "job"],
    "workload.command": [["/workspace/train.py"], ["train.py", "--epochs", "3"], [], "train.py"],
    "workload.maxRestarts": [0, 3, 1001],
    "workload.restartStrategy": ["Recreate", "BlockingRecreate", "InPlaceRestart"],
    "workload.runs.submitters.groups": [["ml-team"], [], [""]],
    "workload.runs.submitters.users": [["alice@example.com", "system:admin"], [""]],
    "workload.runs.submitters.serviceAccounts": [["ci-pipeline"], ["Bad_SA"], ["a" * 254]],
    "workload.runs.checkpointDir": ["/workspace/ckpt", "/checkpoints", "/tmp/x", "ckpt", "/a/../b"],
    "workload.startTimeoutMinutes": [1, 1440, 0, 1441, "30m"],
    "workload.queue.mode": ["create", "reference", "adopt"],
    "workload.queue.preemption": ["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"],
    "workload.queue.priorityClasses[0].name": ["high", "batch-low", "High", "a" * 254],
    "workload.queue.priorityClasses[0].value": [1000, 0, -5, 2**31, "x"],
    "workload.queue.name": ["training", "Team"],
    "workload.queue.topologyLevels": [["example.com/rack"], [], ["kubernetes.io/hostname"]],
    "workload.queue.requiredLevel": [
        "cloud.google.com/gce-topology-block",
        "example.com/rack",
        "kubernetes.io/hostname",
    ],
    "workload.queue.healthGate.enabled": [True, False, "sometimes"],
    "workload.queue.healthGate.checks": [["gpu"], ["gpu", "nccl", "neper"], [], ["dcgm"]],
    "workload.queue.healthGate.maxAgeHours": [1, 720, 0, 721],
    "workload.queue.healthGate.retrySeconds": [10, 86400, 9],
    "workload.queue.healthGate.image": ["python:3.13-slim", "Bad Image"],
    "workload.queue.healthGate.runner.enabled": [True, False],
    "workload.queue.healthGate.runner.dcgmLevel": [1, 4, 0, "2"],
    "workload.queue.healthGate.runner.dcgmImage": [
        "nvcr.io/nvidia/cloud-native/dcgm:4.4.1-1-ubuntu22.04",
        "Bad Image",
    ],
    "workload.queue.healthGate.runner.dcgmHostEngine": [
        "own",
        "nvidia-dcgm.gpu-operator.svc",
        "10.0.0.5",
        "Bad_Host",
    ],
    "workload.controllers.install": [True, False],
    "workload.controllers.kueueVersion": ["0.18.3", "0.14.9", "v0.19.2", "0.19"],
    "workload.controllers.jobsetVersion": ["0.10.1", "0.10.0", "1.0"],
    "launcher.kind": ["torchrun", "deepspeed"],
    "launcher.minNodes": [1, 2, 5],
    "launcher.maxNodes": [1, 2, 8],
    "launcher.maxRestarts": [0, 100, 101],
    "launcher.masterPort": [29500, 1023, 65535],
    # x{4294967295}: a repeat count past re's MAXREPEAT (an OverflowError, not re.error).
    "launcher.firstStepPattern": [r"^step 1\b", "'loss': ", "(", ".*", "x" * 201, "x{4294967295}"],
    "launcher.deepspeed.zeroStage": [0, 3, 4],
    "launcher.deepspeed.precision": ["bf16", "fp8"],
    "launcher.deepspeed.microBatchSize": [1, 0],
    "launcher.deepspeed.gradientAccumulationSteps": [1, 8],
    "launcher.deepspeed.offloadOptimizer": [True, False],
    "nccl.debug": ["INFO", "WARN", "DEBUG"],
    "verify.enabled": [True, False],
    "verify.expectedBusbwGbps": [1.5, 90, 250, 0],
    "verify.maxBytes": ["64M", "1G", "4", "8"],
    "verify.iters": [1, 1000, 1001],
    "verify.requireGdr": [True, False],
    "verify.preflight": [True, False],
    "verify.storageCheckBytes": ["1G", "64M", "4", "0"],
    "monitoring.gkeComponents": [["SYSTEM_COMPONENTS", "DCGM"], [], ["DCGM", "DCGM"], ["GPU"]],
    "monitoring.dashboard": [True, False, "no"],
    "monitoring.dcgm": [True, False],
    "monitoring.runMetrics.enabled": [True, False, "yes"],
    "monitoring.runMetrics.port": [9464, 29500, 1023, 65536],
    "monitoring.runMetrics.ledgerImage": ["python:3.13-slim", "Bad Image"],
    "tcp.socketIfname": ["^lo,docker", "eth0"],
    "tcp.socketNthreads": [4, 16, 17],
    "tcp.nsocksPerThread": [4, 64],
    "rdma.mtu": [9000, 1280, 1279],
    "rdma.memlock": ["root-ipc-lock", "machineconfig", "preconfigured", "ulimit"],
    "rdma.machineConfigPool": ["worker", "gpu-worker", "Bad_Pool"],
    "rdma.machineConfig": ["create", "adopt", "reference", "keep"],
    "rdma.networkAttachments": ["create", "adopt", "reference", "skip"],
    "rdma.minCtas": [4, 0, 33],
    "rdma.bootstrapInterface": ["eth0", "net1"],
    "rdma.gidIndex": ["auto", "nccl", 3, 256],
    "rdma.gdrLevel": ["SYS", "PIX", "5"],
    "rdma.crossNic": [0, 1, 3],
    "rdma.ibTimeout": [22, 32],
    "rdma.trafficClass": [106, 256],
    "rdma.serviceLevel": [3, 16],
    "rdma.qpsPerConnection": [4, 129],
    f"{NIC}.interface": ["net1", "eth0", "net9", "averyveryverylongname"],
    f"{NIC}.network": ["eno5np0-network", "Net"],
    f"{NIC}.flavour": ["sriov", "macvlan", "host-device"],
    f"{NIC}.resource": ["openshift.io/eno5np0rdma", "rdma/rdma_shared_device_a", "x"],
    f"{NIC}.subnet": ["10.0.103.0/24", "10.0.104.0/24", "10.0.103.0/30", "8.8.8.0/24"],
    f"{NIC}.routes": [["192.168.77.0/24"], [], "10.0.0.0/8"],
    f"{NIC}.master": ["eno5np0", None],
    f"{NIC}.hca": ["mlx5_6", "mlx5_7", None],
    f"{NIC}.spoofChk": ["on", "off", "no", None],
    f"{NIC}.trust": ["on", "off", True, None],
    "codeSync.repo": ["https://github.com/org/repo.git", "ftp://x"],
    "codeSync.ref": ["main", "v1.2"],
    "codeSync.period": ["60s", "5m", "1d"],
    "codeSync.credentialsSecret": ["git-token", "1-token", "Bad"],
    "codeSync.image": ["registry.k8s.io/git-sync/git-sync:v4.5.0", "git-sync"],
    "openshift.nodeNames": [["gpu-1", "gpu-2"], ["gpu-1"], ["GPU_1", "gpu-2"]],
    "openshift.gpuNodeLabel": ["nvidia.com/gpu.present", "gpu", "-bad/key"],
    "openshift.prePull": [True, False],
    "gcp.project": ["my-gpu-project", "p"],
    "gcp.region": ["us-central1", "europe-west4"],
    "gcp.zone": ["us-central1-a", "us-central1-c", "europe-west4-a"],
    "gcp.machineType": [
        "a3-megagpu-8g",
        "a3-highgpu-8g",
        "a3-ultragpu-8g",
        "a4-highgpu-8g",
        "n1-standard-4",
    ],
    "gcp.provisioning": ["on-demand", "spot", "reservation", "flex-start"],
    "gcp.reservation": ["my-reservation", "r/reservationBlocks/b1", "r/blocks/b1", None],
    "gcp.maxRunDurationSeconds": [3600, 604800, 604801, None],
    "gcp.queuedProvisioning": [True, False],
    "gcp.maintenanceInterval": ["PERIODIC", "AS_NEEDED", None],
    "gcp.releaseChannel": ["REGULAR", "RAPID", "STABLE", "UNSPECIFIED", "NIGHTLY"],
    "gcp.minMasterVersion": ["1.35", "1.36", "1.35.1-gke.1000000", "1.32.11-gke.1174000", "1.99"],
    "gcp.holdMinorUpgrades": [True, False],
    "gcp.baseCidr": ["10.0.0.0/8", "172.16.0.0/12", "10.0.0.0/16", "11.0.0.0/8"],
    "gcp.deletionProtection": [True, False],
    "gcp.privateNodes": [True, False],
    "gcp.placementMaxDistance": [1, 3, 4, None],
    "gcp.secondaryBootDiskImage": [
        "projects/my-gpu-project/global/images/pytorch-25-01",
        "global/images/pytorch",
        "projects/my-gpu-project/global/images/Pytorch",
    ],
    "gcp.imageStreaming": [True, False],
    "gcp.gpudirectRelease": [
        "tcpxo-2026-01-09",
        "tcpxo-v1.0.17",
        "tcpx-v3.1.12",
        "tcpx-v3.1.9",
        "gib-v1.1.0",
        "gib-v1.1.1",
        "nope",
    ],
    "gcp.systemPool.machineType": ["e2-standard-4", "n2-standard-8", "E2"],
    "gcp.systemPool.minNodes": [1, 2, 0],
    "gcp.systemPool.maxNodes": [10, 1, 101],
    "gcp.systemPool.diskSizeGb": [100, 5],
    "gcp.allowUncatalogued": [["us-central1-z"], [], ["us-central1-a"], "x"],
    "gcp.authorizedNetworks[0].cidrBlock": ["198.51.100.7/32", "0.0.0.0/0", "10.0.0.1/8", "x"],
    "gcp.authorizedNetworks[0].displayName": ["ci-runner", ""],
    "gcp.rbacSecurityGroup": [
        "gke-security-groups@example.com",
        None,
        "gke-security-groups@Example.com",
        "ml@example.com",
    ],
}
KEYS["secretEnv"] = [{"HF_TOKEN": "hf_x"}, {"hf-token": "x"}, {"HF_TOKEN": 5}, ["HF_TOKEN"]]

_JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JUNK = st.recursive(
    _JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
SECTIONS = sorted({key.split(".")[0] for key in KEYS if "." in key})
# Values of the contract's classes: nested 10,000 deep, 5,000 digits, not finite, beyond what the
# engine (2^53 - 1) or a Kubernetes quantity (2^63 - 1) holds, integers written as floats,
# negative zero.
EXTREME = st.sampled_from(
    [
        DEEP_LIST,
        DEEP_OBJECT,
        HUGE_INT,
        RawJson("1e400"),
        RawJson("-1e400"),
        math.nan,
        math.inf,
        -math.inf,
        -0.0,
        1e308,
        2**53 + 1,
        2**63,
        2.5,
        "nan",
        "inf",
        "1e400",
        "-0",
        HUGE_INT.text,
        "9999999999999999999999Ei",
        "8Ei",
        "1e19",
        "1e3",
    ]
)
# What a secret edit's text carries, to be looked for wherever it must not show.
MARKER = "zqsecret7731"


def test_the_generator_covers_every_key_of_the_schema() -> None:
    assert set(schema_key_paths("[0]")) == set(KEYS)


# Keys of the other platform mostly end in "only used when platform is ..." refusals; drawing
# them less often leaves more examples that render.
_OTHER_PLATFORM = {"openshift": ("gcp.",), "gke": ("rdma.", "openshift.nodeNames")}


def own_keys(stack: str) -> list[str]:
    """The schema's keys less the other platform's."""
    platform = stack_file_config(stack)[f"{PROJECT}:platform"]
    return sorted(k for k in KEYS if not k.startswith(_OTHER_PLATFORM[platform]))


Edit = tuple[str, Any, bool]  # key, value, set as a secret


def plausible_edit(keys: list[str]) -> st.SearchStrategy[Edit]:
    """A plain edit of one of `keys` to a value from its row of KEYS."""
    key = st.sampled_from(keys)
    return key.flatmap(lambda k: st.tuples(st.just(k), st.sampled_from(KEYS[k]), st.just(False)))


def edits(stack: str) -> st.SearchStrategy[list[Edit]]:
    key = st.sampled_from(own_keys(stack)) | st.sampled_from(sorted(KEYS))
    plausible = key.flatmap(lambda k: st.tuples(st.just(k), st.sampled_from(KEYS[k])))
    # Mostly plausible values, some junk of any JSON shape or of the contract's classes, now
    # and then a whole section of the wrong shape; one edit in eight a secret.
    edit = st.one_of(
        plausible,
        plausible,
        plausible,
        key.flatmap(lambda k: st.tuples(st.just(k), JUNK)),
        key.flatmap(lambda k: st.tuples(st.just(k), EXTREME)),
        st.tuples(st.sampled_from(SECTIONS), st.one_of(JUNK, EXTREME)),
    )
    secret = st.sampled_from([False] * 7 + [True])
    return st.lists(st.tuples(edit, secret).map(lambda e: (*e[0], e[1])), min_size=1, max_size=3)


def marked(value: Any) -> Any:
    """`value` with MARKER in each of its texts (numbers and RawJson carry none)."""
    if isinstance(value, str):
        return value + MARKER
    if isinstance(value, list):
        return [marked(v) for v in value]
    if isinstance(value, dict):
        return {k: marked(v) for k, v in value.items()}
    return value


# --- what the API server and GCP would refuse -----------------------------------------------

# kubernetes/apimachinery pkg/util/validation/validation.go and pkg/api/resource/quantity.go
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUANTITY = re.compile(
    r"^[+-]?(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)
# pkg/api/resource math.go maxAllowed: the most a quantity holds.
QUANTITY_MAX = 2**63 - 1
BINARY = {s: 1024 ** (i + 1) for i, s in enumerate(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# GCP: RFC 1035 names of at most 63 characters; GKE clusters at most 40.
GCP_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
# Cloud Storage's own rule: 3-63 of a-z, 0-9, '-', '_', '.', starting and ending with a letter or
# a digit (cloud.google.com/storage/docs/buckets#naming).
GCS_BUCKET_NAME = re.compile(r"^[a-z0-9][-_.a-z0-9]{1,61}[a-z0-9]$")
GCS_BUCKET = "gcp:storage/bucket:Bucket"


def quantity(text: str) -> Fraction:
    match = QUANTITY.match(text)
    assert match, f"{text!r} is not a quantity"
    suffix = match.group(2) or ""
    number = Fraction(text[: len(text) - len(suffix)])
    if suffix in BINARY:
        return Fraction(number * BINARY[suffix])
    exponent = int(suffix[1:]) if suffix[:1] in ("e", "E") else DECIMAL[suffix]
    scale = Fraction(10) ** exponent
    return Fraction(number * scale)


def label_problems(labels: dict[str, str]) -> list[str]:
    out = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if prefix and not (len(prefix) <= 253 and DNS_SUBDOMAIN.match(prefix)):
            out.append(f"label key {key!r}")
        if not (len(name) <= 63 and QUALIFIED_NAME.match(name)):
            out.append(f"label key {key!r}")
        if not (len(value) <= 63 and LABEL_VALUE.match(value)):
            out.append(f"label value {value!r}")
    return out


def container_problems(container: dict[str, Any]) -> list[str]:
    out = []
    if not (len(container["name"]) <= 63 and DNS_1123_LABEL.match(container["name"])):
        out.append(f"container name {container['name']!r}")
    resources = container.get("resources", {})
    requests, limits = resources.get("requests", {}), resources.get("limits", {})
    for name, value in {**requests, **limits}.items():
        if quantity(str(value)) < 0:
            out.append(f"{name} quantity {value!r} is negative")
        # CPU is read in millicores (pkg/api/resource quantity.go MilliValue).
        if quantity(str(value)) * (1000 if name == "cpu" else 1) > QUANTITY_MAX:
            out.append(f"{name} quantity {value!r} is beyond what a quantity holds")
    for name, value in requests.items():
        if name in limits and quantity(str(value)) > quantity(str(limits[name])):
            out.append(f"{container['name']}: {name} request {value} above limit {limits[name]}")
    return out


def apiserver_problems(manifest: dict[str, Any]) -> list[str]:
    """What the API server would refuse beyond the OpenAPI schema."""
    kind, meta = manifest["kind"], manifest["metadata"]
    name = meta["name"]
    out = label_problems(meta.get("labels", {}))
    name_rule = {"Namespace": DNS_1123_LABEL, "Service": DNS_1035_LABEL}.get(kind, DNS_SUBDOMAIN)
    limit = 63 if kind in ("Namespace", "Service") else 253
    if not (len(name) <= limit and name_rule.match(name)):
        out.append(f"{kind} name {name!r}")
    if "namespace" in meta and not DNS_1123_LABEL.match(meta["namespace"]):
        out.append(f"namespace {meta['namespace']!r}")
    spec = manifest.get("spec", {})
    template = spec.get("template", {})
    if template:
        out += label_problems(template.get("metadata", {}).get("labels", {}))
        pod = template["spec"]
        for container in pod["containers"] + pod.get("initContainers", []):
            out += container_problems(container)
        for volume in pod.get("volumes", []):
            size = volume.get("emptyDir", {}).get("sizeLimit")
            if size is not None and not 0 <= quantity(str(size)) <= QUANTITY_MAX:
                out.append(f"emptyDir size {size!r}")
    if kind == "StatefulSet":
        # The controller-revision-hash pod label: <name>-<hash of up to 10 characters>.
        if len(f"{name}-0123456789") > 63:
            out.append(f"StatefulSet name {name!r} too long for its revision label")
        claims = spec.get("volumeClaimTemplates", [])
    elif kind == "PersistentVolumeClaim":
        claims = [manifest]
    else:
        claims = []
    for claim in claims:
        size = claim["spec"]["resources"]["requests"]["storage"]
        if not 0 < quantity(str(size)) <= QUANTITY_MAX:
            out.append(f"claim size {size!r}")
        storage_class = claim["spec"].get("storageClassName")
        if storage_class is not None and not DNS_SUBDOMAIN.match(storage_class):
            out.append(f"storage class {storage_class!r}")
    return out


def gcp_problems(run: ProgramRun) -> list[str]:
    out = []
    for r in run.resources:
        if r.type.startswith("gcp:") and "name" in r.inputs:
            name = str(r.inputs["name"])
            limit = 40 if r.type == "gcp:container/cluster:Cluster" else 63
            rule = GCS_BUCKET_NAME if r.type == GCS_BUCKET else GCP_NAME
            if not (len(name) <= limit and rule.match(name)):
                out.append(f"{r.type} name {name!r}")
    return out


def run_edited(
    stack: str, changes: list[Edit], run: ProgramRun
) -> tuple[dict[str, str], list[str]]:
    """Run the program on `stack` with `changes` applied (a secret's texts marked, its
    top-level key secret), recording into `run`; returns the config and secret keys it ran
    with (pulumi.RunError when the program refuses them)."""
    config, secret_keys = engine_config(stack)
    for key, value, secret in changes:
        set_key(config, key, marked(value) if secret else value)
        if secret:
            secret_keys.append(f"{PROJECT}:{re.split(r'[.[]', key)[0]}")
    run_program(config, secret_keys, stack, record_into=run)
    return config, secret_keys


def validated_version(config: dict[str, str], secret_keys: list[str]) -> str:
    raw = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith(f"{PROJECT}:")}
    wanted = load_settings(decode_config(raw, secret_keys), secret_keys).kubernetes_version
    latest = ".".join(kubernetes_validate.latest_version().split(".")[:2])
    return min(wanted, latest, key=lambda v: int(v.split(".")[1]))


@settings(
    max_examples=300,
    derandomize=True,
    database=None,  # derandomized: nothing to replay, nothing to write
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(case=st.sampled_from(STACKS).flatmap(lambda s: st.tuples(st.just(s), edits(s))))
# Found by this test after two branches met: name limits asked an unknown release for its NICs.
@example(case=("a3-high", [("gcp.gpudirectRelease", "nope", False)]))
# One of each class the generator draws from, whatever it draws: a RecursionError, int()'s
# ValueError, a NaN threshold taken, an OverflowError in the render, a crash on a nested secret.
@example(case=("barcelona", [("rdma", DEEP_LIST, False)]))
@example(case=("barcelona", [("verify.iters", HUGE_INT, False)]))
@example(case=("nerc-production", [("verify.expectedBusbwGbps", math.nan, False)]))
@example(case=("barcelona", [("pod.shmSize", "9" * 400 + "Gi", False)]))
@example(case=("nerc-production", [("secretEnv", {"HF_TOKEN": {"part": "x"}}, True)]))
def test_any_config_is_refused_by_key_or_renders_what_the_api_server_accepts(
    case: tuple[str, list[Edit]],
) -> None:
    stack, changes = case
    run = ProgramRun()
    try:
        config, secret_keys = run_edited(stack, changes, run)
    except pulumi.RunError as exc:
        message = str(exc)
        assert message.startswith("invalid stack config:"), message
        assert run.resources == [], "registered resources before refusing"
        assert MARKER not in message, message
        named = {key.split(".")[0].split("[")[0] for key, _, _ in changes}
        assert any(f"{PROJECT}:{key}" in message for key in named) or any(
            re.search(rf"\b{re.escape(key.split('.')[-1].split('[')[0])}\b", message)
            for key, _, _ in changes
        ), f"no edited key named in: {message}"
        event("refused")
        return
    event("rendered")
    recorded = json.dumps([[r.inputs for r in run.resources], run.outputs], default=str)
    assert MARKER not in recorded
    version = validated_version(config, secret_keys)
    problems = gcp_problems(run)
    for manifest in run.manifests():
        validate(manifest, version)
        problems += apiserver_problems(manifest)
    assert problems == []
