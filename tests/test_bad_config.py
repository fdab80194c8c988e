"""Bad stack config stops the real program before it registers any resource, with a message a
user can act on: the key as written in the stack file, the bad value, and what is allowed."""

from __future__ import annotations

import pulumi
import pytest

from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.stack_files import engine_config
from tests.conftest import A4_WITHOUT_QUEUED, BARCELONA_CREATES_NADS, BARCELONA_RWX, GKE_RWX
from tests.edits import A4_STATEFULSET, edited_config

# A GKE stack as a JobSet stack (shared claims: a JobSet has no per-pod ones).
_GKE_JOBSET = ("workload.kind=jobset", "workload.command[0]=t.py", *GKE_RWX)
# ... behind the node health gate; and asking for a check no checker labels.
GATED_GKE_JOBSET = (*_GKE_JOBSET, "workload.queue.healthGate.enabled=true")
UNKNOWN_HEALTH_CHECK = (*GATED_GKE_JOBSET, "workload.queue.healthGate.checks[0]=dcgm")
# nerc-production as a JobSet stack placed by rack, with the node health gate and its runner.
NERC_RUNNER = (
    "workload.kind=jobset",
    "workload.command[0]=train.py",
    "workload.queue.topologyLevels[0]=example.com/rack",
    "workload.queue.healthGate.enabled=true",
    "workload.queue.healthGate.runner.enabled=true",
)
# The longest label key Kubernetes takes: a 253-character prefix, '/', a 63-character name (317).
_LONGEST_LABEL_KEY = f"{'a' * 63}.{'b' * 63}.{'c' * 63}.{'d' * 61}/{'n' * 63}"
# (stack, --set overrides, fragments the message must contain)
CASES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    # wrong types
    ("barcelona", ("nodes=two",), ("gpu-cluster:nodes = 'two'", "valid integer")),
    ("barcelona", ("gpusPerNode=4.5",), ("gpu-cluster:gpusPerNode = '4.5'", "integer")),
    (
        "barcelona",
        ("namespaceMode=maybe",),
        ("gpu-cluster:namespaceMode = 'maybe'", "'create', 'adopt' or 'reference'"),
    ),
    # a renamed key says what replaced it
    (
        "nerc-production",
        ("createNamespace=false",),
        ("createNamespace was replaced by namespaceMode", "reference (was false)"),
    ),
    (
        "barcelona",
        ("rdma.minNchannels=4",),
        ("rdma.minNchannels was replaced by rdma.minCtas", "NCCL_MIN_CTAS"),
    ),
    (
        "barcelona",
        ("rdma.memlock=ulimit",),
        ("gpu-cluster:rdma.memlock = 'ulimit'", "'root-ipc-lock', 'machineconfig' or"),
    ),
    (
        "barcelona",
        ("rdma.machineConfigPool=gpu",),
        ("gpu-cluster:rdma.machineConfigPool is only used when rdma.memlock is 'machineconfig'",),
    ),
    (
        "barcelona",
        ("rdma.machineConfig=reference",),
        ("gpu-cluster:rdma.machineConfig is only used when rdma.memlock is 'machineconfig'",),
    ),
    (
        "barcelona",
        ("rdma.nics[0].master=eno5np0",),
        ("gpu-cluster:rdma.nics[0]", "flavour 'sriov' takes its device from 'resource'"),
    ),
    (
        "barcelona",
        ("storage.retainOnDelete=7",),
        ("gpu-cluster:storage.retainOnDelete = 7", "boolean"),
    ),
    (
        "barcelona",
        ("monitoring.runMetrics.enabled=true", "monitoring.runMetrics.port=29500"),
        ("gpu-cluster:monitoring.runMetrics.port = 29500 is launcher.masterPort",),
    ),
    (
        "barcelona",
        ("launcher.masterPort=http",),
        ("gpu-cluster:launcher.masterPort = 'http'", "integer"),
    ),
    (
        "barcelona",
        ("rdma.nics[0].routes=10.0.0.0/8",),
        ("gpu-cluster:rdma.nics[0].routes", "tuple"),
    ),
    # unknown keys (typos)
    ("barcelona", ("node=3",), ("gpu-cluster:node: unknown key", "nodes")),
    (
        "barcelona",
        ("storage.storgeClass=x",),
        ("gpu-cluster:storage.storgeClass: unknown key", "storageClass"),
    ),
    (
        "barcelona",
        ("rdma.nics[0].hcaName=mlx5_0",),
        ("gpu-cluster:rdma.nics[0].hcaName: unknown key", "hca"),
    ),
    (
        "gcp-a3",
        ("gcp.machinetype=a3-megagpu-8g",),
        ("gpu-cluster:gcp.machinetype: unknown key", "machineType"),
    ),
    (
        "nerc-production",
        ("launcher.deepspeed.zero=3",),
        ("launcher.deepspeed.zero: unknown key", "zeroStage"),
    ),
    # enum typos
    (
        "barcelona",
        ("platform=openshfit",),
        ("gpu-cluster:platform = 'openshfit'", "'openshift' or 'gke'"),
    ),
    (
        "barcelona",
        ("networkMode=RDMA",),
        ("gpu-cluster:networkMode = 'RDMA'", "'tcp', 'rdma', 'tcpxo' or 'tcpx'"),
    ),
    (
        "barcelona",
        ("storage.mode=shared",),
        ("gpu-cluster:storage.mode = 'shared'", "'rwx' or 'per-pod'"),
    ),
    (
        "barcelona",
        ("launcher.kind=mpirun",),
        ("gpu-cluster:launcher.kind = 'mpirun'", "'torchrun' or 'deepspeed'"),
    ),
    (
        "barcelona",
        ("rdma.nics[1].flavour=sriov-cni",),
        ("rdma.nics[1].flavour = 'sriov-cni'", "'sriov', 'macvlan' or 'host-device'"),
    ),
    (
        "barcelona",
        ("rdma.gdrLevel=5",),
        ("gpu-cluster:rdma.gdrLevel = 5", "'LOC', 'PIX', 'PXB', 'PHB' or 'SYS'"),
    ),
    ("barcelona", ("nccl.debug=DEBUG",), ("gpu-cluster:nccl.debug = 'DEBUG'", "'INFO'")),
    ("gcp-a3", ("gcp.provisioning=preemptible",), ("gcp.provisioning = 'preemptible'", "'spot'")),
    ("gcp-a3", ("gcp.releaseChannel=rapid",), ("gcp.releaseChannel = 'rapid'", "'RAPID'")),
    # impossible combinations
    (
        "nerc-production",
        ("networkMode=tcpxo",),
        ("networkMode = 'tcpxo' is not available on platform 'openshift'", "'tcp', 'rdma'"),
    ),
    (
        "gcp-a3",
        ("networkMode=rdma",),
        ("networkMode = 'rdma' needs gcp.machineType 'a3-ultragpu-8g' or 'a4-highgpu-8g'",),
    ),
    (
        "gcp-a4",
        ("networkMode=tcpxo",),
        ("networkMode = 'tcpxo' needs gcp.machineType 'a3-megagpu-8g', not 'a4-highgpu-8g'",),
    ),
    (
        "gcp-a4",
        ("gcp.gpudirectRelease=tcpx-v3.1.12",),
        (
            "gcp.gpudirectRelease = 'tcpx-v3.1.12' is not a known gIB (rdma) release",
            "'gib-v1.1.0', 'gib-v1.1.1'",
        ),
    ),
    (
        "gcp-a4",
        ("gcp.minMasterVersion=1.32.1-gke.1729000", "kubernetesVersion=1.32"),
        ("older than GPUDirect RDMA's minimum on a4-highgpu-8g: use 1.32.2-gke.1475000",),
    ),
    (
        "gcp-a4",
        (
            'rdma={"nics": [{"interface": "net1", "network": "n1", "resource": "a/b", '
            '"subnet": "10.9.0.0/24", "flavour": "sriov"}]}',
        ),
        ("gpu-cluster:rdma is only used when platform is 'openshift'",),
    ),
    ("nerc-production", ("networkMode=rdma",), ("gpu-cluster:rdma is required",)),
    # a NIC's resource must not replace the GPU request in the container's one resources map
    (
        "barcelona",
        ("rdma.nics[1].resource=nvidia.com/gpu",),
        ("gpu-cluster:rdma.nics[1].resource = 'nvidia.com/gpu'", "the GPUs' resource"),
    ),
    # keys that begin like pydantic's branch names (int..., str...) keep their place in the path
    (
        "barcelona",
        ("rdma.nics[0].interface=net 1",),
        ("gpu-cluster:rdma.nics[0].interface = 'net 1'",),
    ),
    (
        "gcp-a3",
        ("gcp.machineType=a3-highgpu-8g",),
        ("networkMode = 'tcpxo' needs gcp.machineType 'a3-megagpu-8g'",),
    ),
    (
        "a3-high",
        ("gcp.machineType=a3-megagpu-8g",),
        ("networkMode = 'tcpx' needs gcp.machineType 'a3-highgpu-8g'",),
    ),
    (
        "gcp-a3",
        ("gcp.provisioning=reservation",),
        ("provisioning 'reservation' needs 'reservation'",),
    ),
    (
        "gcp-a3",
        ("gcp.provisioning=spot", "gcp.maintenanceInterval=PERIODIC"),
        ("maintenanceInterval applies",),
    ),
    (
        "gcp-a3",
        ("gcp.provisioning=reservation", "gcp.reservation=r", "gcp.placementMaxDistance=2"),
        ("brings its own placement",),
    ),
    (
        "gcp-a4",
        ("verify.expectedBusbwGbps=450",),
        ("verify.expectedBusbwGbps = 450: above the 400 GB/s",),
    ),
    (
        "gcp-a4",
        ("gcp.provisioning=spot", "gcp.maxRunDurationSeconds=3600"),
        ("gcp.maxRunDurationSeconds is only used when gcp.provisioning is 'flex-start'",),
    ),
    (
        "gcp-a4",
        (A4_WITHOUT_QUEUED, "gcp.provisioning=on-demand"),
        (
            "gpu-cluster:gcp.provisioning = 'on-demand': Google offers gcp.machineType "
            "'a4-highgpu-8g' only as 'flex-start', 'reservation' or 'spot' capacity",
        ),
    ),
    # a storage class nothing creates
    (
        "gcp-a3",
        ("storage.storageClass=fast-ssd",),
        (
            "gpu-cluster:storage.storageClass = 'fast-ssd': GKE does not install it",
            "'standard-rwo', 'premium-rwo', 'standard'",
            "'hyperdisk-balanced'",
            "storage.storageClassMode: reference",
        ),
    ),
    (
        "gcp-a3",
        ("storage.storageClassMode=create",),
        ("storage.storageClassMode = 'create': GKE installs 'premium-rwo' itself",),
    ),
    (
        "barcelona",
        ("storage.storageClassMode=create",),
        ("storage.storageClassMode = 'create' is only available on platform 'gke'",),
    ),
    (
        "gcp-a4",
        ("storage.storageClassMode=copy",),
        ("gpu-cluster:storage.storageClassMode = 'copy'", "'create' or 'reference'"),
    ),
    (
        "gcp-a3",
        ("networkMode=rdma", "gcp.machineType=a3-ultragpu-8g"),
        ("gcp.provisioning = 'on-demand'", "'a3-ultragpu-8g' only as 'flex-start'"),
    ),
    (
        "gcp-a4",
        ("gcp.provisioning=flex-start", "gcp.maxRunDurationSeconds=700000"),
        ("gcp.maxRunDurationSeconds = 700000", "604800"),
    ),
    (
        "gcp-a4",
        ("gcp.provisioning=flex-start", "gcp.placementMaxDistance=2"),
        ("placementMaxDistance: flex-start nodes get best-effort compact placement",),
    ),
    (
        "gcp-a4",
        ("gcp.provisioning=flex-start", "gcp.minMasterVersion=1.32.2-gke.1475000"),
        ("older than flex-start's minimum: use 1.32.2-gke.1652000 or newer",),
    ),
    (
        "gcp-a4",
        ("gcp.provisioning=reservation", "gcp.reservation=res/blocks/b1"),
        ("gcp.reservation = 'res/blocks/b1'",),
    ),
    (
        "gcp-a4",
        ("gcp.provisioning=flex-start", "gcp.reservation=res"),
        ("gcp.reservation is only used when gcp.provisioning is 'reservation'",),
    ),
    (
        "gcp-a3",
        ("gcp.gpudirectRelease=tcpx-v3.1.12",),
        ("not a known tcpxo release", "'tcpxo-2026-01-09', 'tcpxo-v1.0.17'"),
    ),
    (
        "barcelona",
        ("launcher.minNodes=3",),
        ("launcher.minNodes/maxNodes = 3:2", "minNodes <= nodes"),
    ),
    ("barcelona", ("rdma.nics[0].hca=",), ("gpu-cluster:rdma.nics[0].hca = ''",)),
    (
        "barcelona",
        (*BARCELONA_CREATES_NADS, "rdma.nics[0].flavour=macvlan"),
        ("rdma.nics[0].master is required for flavour 'macvlan'",),
    ),
    # An SR-IOV VF's flags, as a SriovNetwork spells them (on/off), on SR-IOV NICs only.
    (
        "barcelona",
        (*BARCELONA_CREATES_NADS, "rdma.nics[0].spoofChk=no"),
        ("gpu-cluster:rdma.nics[0].spoofChk = 'no'", "'on' or 'off'"),
    ),
    (
        "barcelona",
        (
            *BARCELONA_CREATES_NADS,
            "rdma.nics[0].flavour=macvlan",
            "rdma.nics[0].master=eno5np0",
            "rdma.nics[0].trust=on",
        ),
        ("gpu-cluster:rdma.nics[0]", "'trust' sets a flag of an SR-IOV VF", "'macvlan' has none"),
    ),
    # Two SR-IOV NICs on one VF pool: Multus pairs their subnets with the VFs by chance.
    (
        "barcelona",
        ("rdma.nics[3].resource=openshift.io/eno5np0rdma",),
        (
            "gpu-cluster:rdma.nics[0].resource = rdma.nics[3].resource = "
            "'openshift.io/eno5np0rdma'",
            "a resource of its own",
        ),
    ),
    # keys the stack does not read
    (
        "barcelona",
        ("rdma.nics[0].spoofChk=off",),
        ("rdma.nics[0].spoofChk is only used when rdma.networkAttachments is 'create' or",),
    ),
    (
        "barcelona",
        ("rdma.nics[0].flavour=macvlan", "rdma.nics[0].master=eno5np0"),
        ("rdma.nics[0].master is only used when rdma.networkAttachments is 'create' or",),
    ),
    (
        "barcelona",
        ("rdma.nics[0].subnet=10.0.9.0/24",),
        ("rdma.nics[0].subnet is only used when rdma.networkAttachments is",),
    ),
    (
        "barcelona",
        ("rdma.networkAttachments=adopt",),
        ("rdma.nics[0].subnet is required when rdma.networkAttachments is 'adopt'",),
    ),
    # A lone key makes a new rdma block, incomplete: refused as such, not as unread.
    ("nerc-production", ("rdma.bootstrapInterface=eth1",), ("gpu-cluster:rdma.nics: required",)),
    # Another mode's section is kept for the way back (a warning), and held to its own rules.
    (
        "barcelona",
        ("networkMode=tcp", "rdma.memlock=ulimit"),
        ("gpu-cluster:rdma.memlock = 'ulimit'", "'root-ipc-lock', 'machineconfig' or"),
    ),
    (
        "barcelona",
        ("networkMode=tcp", "rdma.nics[1].interface=net1"),
        ("gpu-cluster:rdma.nics: interface net1 used by more than one NIC",),
    ),
    (
        "barcelona",
        ("networkMode=tcp", "rdma.machineConfigPool=gpu"),
        ("gpu-cluster:rdma.machineConfigPool is only used when rdma.memlock is 'machineconfig'",),
    ),
    (
        "barcelona",
        ("tcp.socketNthreads=8", "tcp.nsocksPerThread=16"),
        ("gpu-cluster:tcp.socketNthreads x tcp.nsocksPerThread must be <= 64",),
    ),
    (
        "gcp-a3",
        ("tcp.socketNthreads=17",),
        ("gpu-cluster:tcp.socketNthreads = 17", "less than or equal to 16"),
    ),
    ("gcp-a3", ("openshift.gpuNodeLabel=gpu",), ("gpu-cluster:openshift is only used when",)),
    ("nerc-production", ("gcp.project=my-project-1",), ("gpu-cluster:gcp is only used when",)),
    (
        "gcp-a3",
        ("networkMode=tcp", "gcp.gpudirectRelease=tcpxo-v1.0.17"),
        ("gcp.gpudirectRelease is only used when networkMode is 'tcpxo', 'tcpx' or 'rdma'",),
    ),
    ("barcelona", ("verify.enabled=false", "verify.iters=5"), ("verify.iters is only used when",)),
    # out of range numbers
    ("barcelona", ("nodes=0",), ("gpu-cluster:nodes = '0'", "greater than or equal to 1")),
    (
        "barcelona",
        ("gpusPerNode=17",),
        ("gpu-cluster:gpusPerNode = '17'", "less than or equal to 16"),
    ),
    ("barcelona", ("launcher.masterPort=80",), ("gpu-cluster:launcher.masterPort = 80", "1024")),
    ("barcelona", ("rdma.mtu=100000",), ("gpu-cluster:rdma.mtu = 100000", "9216")),
    ("barcelona", ("rdma.ibTimeout=40",), ("gpu-cluster:rdma.ibTimeout = 40", "31")),
    ("nerc-production", ("tcp.socketNthreads=16", "tcp.nsocksPerThread=8"), ("must be <= 64",)),
    ("gcp-a3", ("gcp.placementMaxDistance=9",), ("gcp.placementMaxDistance = 9", "3")),
    (
        "gcp-a3",
        ("gcp.authorizedNetworks[0].cidrBlock=203.0.113.1/24",),
        ("gpu-cluster:gcp.authorizedNetworks[0].cidrBlock = '203.0.113.1/24'", "no host bits"),
    ),
    (
        "gcp-a4",
        ("gcp.authorizedNetworks[0].cidrBlock=my-laptop",),
        ("gpu-cluster:gcp.authorizedNetworks[0].cidrBlock = 'my-laptop'", "IPv4 CIDR"),
    ),
    (
        "a3-high",
        ("gcp.authorizedNetworks[0].displayName=",),
        ("gpu-cluster:gcp.authorizedNetworks[0].displayName = ''", "at least 1 character"),
    ),
    (
        "a3-high",
        ("gcp.authorizedNetworks[0].name=x",),
        ("gcp.authorizedNetworks[0].name: unknown key", "cidrBlock, displayName"),
    ),
    # malformed CIDRs and node names, overlapping ranges
    (
        "barcelona",
        ("rdma.nics[0].subnet=10.0.103.0/33",),
        ("rdma.nics[0].subnet = '10.0.103.0/33'", "IPv4 CIDR"),
    ),
    (
        "barcelona",
        (*BARCELONA_CREATES_NADS, "rdma.nics[0].subnet=10.0.103.1/24"),
        ("rdma.nics[0].subnet = '10.0.103.1/24'", "host bits"),
    ),
    (
        "barcelona",
        (*BARCELONA_CREATES_NADS, "rdma.nics[1].subnet=10.0.103.0/25"),
        ("rdma.nics[1].subnet 10.0.103.0/25 overlaps rdma.nics[0].subnet",),
    ),
    ("gcp-a3", ("gcp.baseCidr=10.0.0.0/20",), ("gcp.baseCidr = '10.0.0.0/20'", "too small")),
    ("gcp-a3", ("gcp.baseCidr=10.0.0.0",), ("gcp.baseCidr = '10.0.0.0'", "prefix length")),
    (
        "barcelona",
        ("openshift.nodeNames[0]=MOC_Node",),
        ("openshift.nodeNames[0] = 'MOC_Node'", "node name"),
    ),
    ("barcelona", ("openshift.nodeNames[1]=moc-r4pcc02u17-nairr",), ("lists a node twice",)),
    # too few node names, GPU counts the machine lacks
    ("barcelona", ("nodes=6",), ("openshift.nodeNames lists 5 nodes but nodes = 6", "at least 6")),
    ("gcp-a3", ("gpusPerNode=16",), ("gpusPerNode = 16: a3-megagpu-8g has 8 GPUs",)),
    ("gcp-a3", ("gpusPerNode=4",), ("serves whole machines; set it to 8",)),
    # images without tags or with mutable ones
    (
        "barcelona",
        ("image=nvcr.io/nvidia/pytorch",),
        ("gpu-cluster:image = 'nvcr.io/nvidia/pytorch'", "tag or digest"),
    ),
    (
        "barcelona",
        ("image=pytorch/pytorch:latest",),
        ("gpu-cluster:image = 'pytorch/pytorch:latest'", "mutable"),
    ),
    (
        "barcelona",
        ("codeSync.repo=https://x/y.git", "codeSync.image=registry.k8s.io/git-sync/git-sync"),
        ("codeSync.image", "tag"),
    ),
    # versions and names
    (
        "gcp-a3",
        ("gcp.minMasterVersion=1.32.1-gke.1",),
        ("older than TCPXO's minimum", "1.32.11-gke.1174000"),
    ),
    ("gcp-a3", ("kubernetesVersion=1.28",), ("kubernetesVersion = '1.28'", "native sidecar")),
    (
        "barcelona",
        ("kubernetesVersion=v1.31",),
        ("gpu-cluster:kubernetesVersion = 'v1.31'", "pattern"),
    ),
    ("barcelona", ("namespace=NCCL_Test",), ("gpu-cluster:namespace = 'NCCL_Test'", "DNS-1123")),
    (
        "gcp-a3",
        ("gcp.zone=europe-west4-a",),
        ("zone 'europe-west4-a' is not in region 'us-central1'",),
    ),
    (
        "barcelona",
        ("storage.workspaceSize=100GB",),
        ("storage.workspaceSize = '100GB'", "quantity"),
    ),
    (
        "barcelona",
        ("rdma.nics[0].resource=eno5np0rdma",),
        ("rdma.nics[0].resource = 'eno5np0rdma'", "extended resource"),
    ),
    # workload.kind jobset: what a JobSet needs, and keys only a JobSet reads
    (
        "gcp-a4",
        ("workload.kind=statefulset", "!workload.command"),
        ("gpu-cluster:gcp.queuedProvisioning needs workload.kind 'jobset'", "forever"),
    ),
    (
        "gcp-a3",
        ("gcp.queuedProvisioning=true",),
        ("gpu-cluster:gcp.queuedProvisioning is only used when gcp.provisioning is 'flex-start'",),
    ),
    (
        "gcp-a4",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            *GKE_RWX,
            "workload.queue.requiredLevel=cloud.google.com/gce-topology-block",
        ),
        ("topology-aware placement needs the GPU nodes to exist", "flex-start"),
    ),
    (
        "nerc-production",
        ("workload.kind=jobset",),
        ("gpu-cluster:workload.command is required when workload.kind is 'jobset'",),
    ),
    (
        "barcelona",
        ("workload.kind=jobset", "workload.command[0]=train.py"),
        (
            "gpu-cluster:storage.mode = 'per-pod' needs workload.kind 'statefulset'",
            "use storage.mode 'rwx' and a storage.storageClass that provisions ReadWriteMany "
            "claims, which storage.storageClass = 'ocs-external-storagecluster-ceph-rbd' does not",
            "'ocs-external-storagecluster-cephfs'",
        ),
    ),
    # Shared (ReadWriteMany) claims on OpenShift of a Ceph RBD class would stay Pending.
    (
        "barcelona",
        ("storage.mode=rwx",),
        (
            "gpu-cluster:storage.storageClass = 'ocs-external-storagecluster-ceph-rbd': "
            "storage.mode 'rwx' makes ReadWriteMany claims, and a Ceph RBD class",
            "'ocs-external-storagecluster-cephfs'",
            "storage.mode 'per-pod'",
        ),
    ),
    (
        "nerc-production",
        (
            "storage.volumes[0].name=ckpt",
            "storage.volumes[0].mountPath=/ckpt",
            "storage.volumes[0].sharedClaim.size=1Ti",
            "storage.volumes[0].sharedClaim.storageClass=ocs-storagecluster-ceph-rbd",
        ),
        (
            "gpu-cluster:storage.volumes[0].sharedClaim.storageClass = "
            "'ocs-storagecluster-ceph-rbd': a Ceph RBD class",
            "'ocs-storagecluster-cephfs'",
        ),
    ),
    # Shared (ReadWriteMany) claims on GKE of a Persistent Disk class would stay Pending.
    (
        "gcp-a3",
        ("storage.mode=rwx",),
        ("gpu-cluster:storage.storageClass = 'premium-rwo': storage.mode 'rwx'", "reference"),
    ),
    (
        "gcp-a4",
        (*A4_STATEFULSET, "storage.mode=rwx"),
        ("gpu-cluster:storage.storageClass = 'hyperdisk-balanced'", "Persistent Disk"),
    ),
    (
        "gcp-a3",
        (
            "storage.volumes[0].name=ckpt",
            "storage.volumes[0].mountPath=/ckpt",
            "storage.volumes[0].sharedClaim.size=1Ti",
            "storage.volumes[0].sharedClaim.storageClass=standard-rwo",
        ),
        ("gpu-cluster:storage.volumes[0].sharedClaim.storageClass = 'standard-rwo'", "Pending"),
    ),
    # Filestore claims of a size the driver never provisions would stay Pending: a share
    # outside 100 GiB to 1 TiB, an instance above its tier's largest (cloud.google.com/filestore/
    # docs/service-tiers; kubernetes-sigs/gcp-filestore-csi-driver pkg/util/multishare_defs.go).
    (
        "gcp-a3",
        (
            "storage.mode=rwx",
            "storage.storageClass=enterprise-multishare-rwx",
            "storage.storageClassMode=reference",
            "storage.workspaceSize=50Gi",
        ),
        ("gpu-cluster:storage.workspaceSize = '50Gi'", "100Gi to 1Ti", "Pending"),
    ),
    (
        "gcp-a3",
        (*GKE_RWX, "storage.datasetsSize=64Ti"),
        ("gpu-cluster:storage.datasetsSize = '64Ti'", "'standard-rwx'", "at most 63.9Ti"),
    ),
    (
        "gcp-a3",
        (
            "storage.volumes[0].name=ckpt",
            "storage.volumes[0].mountPath=/ckpt",
            "storage.volumes[0].sharedClaim.size=11Ti",
            "storage.volumes[0].sharedClaim.storageClass=enterprise-rwx",
        ),
        ("gpu-cluster:storage.volumes[0].sharedClaim.size = '11Ti'", "at most 10Ti", "Pending"),
    ),
    (
        "nerc-production",
        ("workload.command[0]=train.py",),
        ("gpu-cluster:workload.command is only used when workload.kind is 'jobset'",),
    ),
    (
        "nerc-production",
        ("workload.kind=job",),
        ("gpu-cluster:workload.kind = 'job'", "'statefulset' or 'jobset'"),
    ),
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            "workload.queue.requiredLevel=example.com/rack",
        ),
        (
            "workload.queue.requiredLevel = 'example.com/rack' is not a placement level",
            "none: set workload.queue.topologyLevels",
        ),
    ),
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            "workload.queue.topologyLevels[0]=kubernetes.io/hostname",
        ),
        ("workload.queue.topologyLevels lists a label twice or 'kubernetes.io/hostname'",),
    ),
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            "workload.queue.mode=reference",
            "workload.queue.topologyLevels[0]=example.com/rack",
        ),
        ("workload.queue.topologyLevels is only used when workload.queue.mode is 'create'",),
    ),
    # a level Kueue's Topology CRD refuses: a label key of 317 characters (a 253-character
    # prefix and a 63-character name) is past its nodeLabel's maxLength of 316
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            f"workload.queue.topologyLevels[0]={_LONGEST_LABEL_KEY}",
        ),
        ("gpu-cluster:workload.queue.topologyLevels[0]", "has 317 characters", "at most 316"),
    ),
    # monitoring.dcgm: false while gkeComponents lists DCGM would be ignored (DCGM stays on)
    (
        "gcp-a3",
        (
            "monitoring.gkeComponents[0]=SYSTEM_COMPONENTS",
            "monitoring.gkeComponents[1]=DCGM",
            "monitoring.dcgm=false",
        ),
        ("gpu-cluster:monitoring.dcgm = false", "monitoring.gkeComponents lists 'DCGM'"),
    ),
    # A GKE dashboard with neither DCGM's nor the runs' GPU figures would show nothing
    (
        "gcp-a3",
        (
            "monitoring.gkeComponents[0]=SYSTEM_COMPONENTS",
            "monitoring.dcgm=false",
            "monitoring.dashboard=true",
        ),
        ("gpu-cluster:monitoring.dashboard = true", "GKE collects no GPU figure for it to show"),
    ),
    # GKE sends system metrics whenever it sends any (its managing-metrics guide)
    (
        "gcp-a3",
        ("monitoring.gkeComponents[0]=POD",),
        (
            "gpu-cluster:monitoring.gkeComponents = ['POD']",
            "GKE gets ['POD', 'DCGM']",
            "leaves out 'SYSTEM_COMPONENTS'",
        ),
    ),
    # Kueue's preemption policies, on a queue the stack creates; classes named once, int32
    (
        "nerc-production",
        ("workload.kind=jobset", "workload.command[0]=t.py", "workload.queue.preemption=Any"),
        (
            "gpu-cluster:workload.queue.preemption = 'Any'",
            "'Never', 'LowerPriority' or 'LowerOrNewerEqualPriority'",
        ),
    ),
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=t.py",
            "workload.queue.mode=reference",
            "workload.queue.preemption=LowerPriority",
        ),
        ("workload.queue.preemption is only used when workload.queue.mode is 'create'",),
    ),
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=t.py",
            "workload.queue.priorityClasses[0].name=high",
            "workload.queue.priorityClasses[0].value=10",
            "workload.queue.priorityClasses[1].name=high",
            "workload.queue.priorityClasses[1].value=20",
        ),
        ("gpu-cluster:workload.queue.priorityClasses names a class twice: high, high",),
    ),
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=t.py",
            "workload.queue.priorityClasses[0].name=high",
            "workload.queue.priorityClasses[0].value=2147483648",
        ),
        ("workload.queue.priorityClasses[0].value = 2147483648", "2147483647"),
    ),
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=t.py",
            "workload.queue.priorityClasses[0].name=High",
            "workload.queue.priorityClasses[0].value=1",
        ),
        ("workload.queue.priorityClasses[0].name = 'High'",),
    ),
    # a DCGM host engine at the check pod's own loopback, where nothing listens; a number that
    # is no IPv4 address (a host name's last part is never all digits, RFC 1123)
    (
        "nerc-production",
        (*NERC_RUNNER, "workload.queue.healthGate.runner.dcgmHostEngine=localhost"),
        ("runner.dcgmHostEngine = 'localhost'", "own loopback"),
    ),
    (
        "nerc-production",
        (*NERC_RUNNER, "workload.queue.healthGate.runner.dcgmHostEngine=127.0.0.1"),
        ("runner.dcgmHostEngine = '127.0.0.1'", "own loopback"),
    ),
    (
        "nerc-production",
        (*NERC_RUNNER, "workload.queue.healthGate.runner.dcgmHostEngine=1.2.3"),
        ("runner.dcgmHostEngine = '1.2.3'", "four numbers 0-255"),
    ),
    # run submitters no authenticator names so, or named twice
    (
        "nerc-production",
        (*NERC_RUNNER, "workload.runs.submitters.users[0]=alice "),
        ("submitters.users[0] = 'alice '", "whitespace at an end"),
    ),
    (
        "nerc-production",
        (
            *NERC_RUNNER,
            "workload.runs.submitters.users[0]=a",
            "workload.runs.submitters.users[1]=a",
        ),
        ("workload.runs.submitters.users lists 'a' twice",),
    ),
    # a boolean in a number's key (pydantic's lax mode would read true as 1: an hour)
    (
        "nerc-production",
        (*NERC_RUNNER, "workload.queue.healthGate.maxAgeHours=true"),
        ("healthGate.maxAgeHours = True", "is a boolean, but the key takes a number"),
    ),
    (
        "nerc-production",
        (*NERC_RUNNER, "workload.queue.healthGate.runner.dcgmLevel=true"),
        ("runner.dcgmLevel = True", "is a boolean, but the key takes a number"),
    ),
    # run submitters the API server makes of everyone (or every ServiceAccount)
    (
        "nerc-production",
        (*NERC_RUNNER, "workload.runs.submitters.groups[0]=system:authenticated"),
        ("submitters.groups[0] = 'system:authenticated'", "every requester"),
    ),
    (
        "nerc-production",
        (*NERC_RUNNER, "workload.runs.submitters.groups[0]=system:serviceaccounts:coops-767192"),
        ("submitters.groups[0] = 'system:serviceaccounts:coops-767192'", "every requester"),
    ),
    (
        "nerc-production",
        (*NERC_RUNNER, "workload.runs.submitters.users[0]=system:anonymous"),
        ("submitters.users[0] = 'system:anonymous'", "without credentials"),
    ),
    # Google Groups for RBAC takes only GKE's group name, in a domain
    (
        "gcp-a4",
        ("gcp.rbacSecurityGroup=ml-team@example.com",),
        ("gcp.rbacSecurityGroup = 'ml-team@example.com'", "gke-security-groups@<your domain>"),
    ),
    (
        "gcp-a4",
        ("gcp.rbacSecurityGroup=gke-security-groups@localhost",),
        ("gcp.rbacSecurityGroup = 'gke-security-groups@localhost'", "GKE takes a group"),
    ),
    (
        "gcp-a4",
        (f"gcp.rbacSecurityGroup=gke-security-groups@{'.'.join(['a' * 63] * 4)}.com",),
        ("gcp.rbacSecurityGroup = 'gke-security-groups@aaa", "a domain of 259 characters"),
    ),
    # the training in the namespace the stack installs Kueue into
    (
        "gcp-a3",
        (*_GKE_JOBSET, "namespace=kueue-system"),
        ("gpu-cluster:namespace = 'kueue-system'", "installs Kueue and JobSet"),
    ),
    # a DCGM host engine no resolver looks up: a host name's label of 64 characters (RFC 1035)
    (
        "nerc-production",
        (
            *NERC_RUNNER,
            f"workload.queue.healthGate.runner.dcgmHostEngine={'d' * 64}.example.com",
        ),
        ("gpu-cluster:workload.queue.healthGate.runner.dcgmHostEngine", "at most 63"),
    ),
    # the node health gate needs node names before admission, and its keys only with it on
    (
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            "workload.queue.healthGate.enabled=true",
        ),
        (
            "gpu-cluster:workload.queue.healthGate.enabled = true needs topology-aware placement",
            "set workload.queue.topologyLevels on OpenShift",
        ),
    ),
    (
        "gcp-a4",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            *GKE_RWX,
            "gcp.queuedProvisioning=true",
            "workload.queue.healthGate.enabled=true",
        ),
        ("a flex-start pool (gcp.provisioning) has none",),
    ),
    (
        "gcp-a3",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            *GKE_RWX,
            "workload.queue.healthGate.maxAgeHours=12",
        ),
        (
            "gpu-cluster:workload.queue.healthGate.maxAgeHours is only used when "
            "workload.queue.healthGate.enabled is true",
        ),
    ),
    (
        "gcp-a3",
        UNKNOWN_HEALTH_CHECK,
        ("workload.queue.healthGate.checks[0] = 'dcgm'", "'gpu', 'nccl' or 'neper'"),
    ),
    # the stack's health runner: it runs the gpu and nccl checks, on Kubernetes with admission
    # policies
    (
        "gcp-a3",
        (
            *GATED_GKE_JOBSET,
            "workload.queue.healthGate.runner.enabled=true",
            "workload.queue.healthGate.checks[0]=neper",
        ),
        (
            "gpu-cluster:workload.queue.healthGate.runner.enabled = true runs the 'gpu' and "
            "'nccl' checks, of which workload.queue.healthGate.checks lists neither",
        ),
    ),
    (
        "nerc-production",
        (
            *NERC_RUNNER,
            "kubernetesVersion=1.29",
        ),
        ("a ValidatingAdmissionPolicy, which needs kubernetesVersion 1.30 or newer",),
    ),
    (
        "gcp-a3",
        (*GATED_GKE_JOBSET, "workload.queue.healthGate.runner.dcgmLevel=3"),
        (
            "gpu-cluster:workload.queue.healthGate.runner.dcgmLevel is only used when "
            "workload.queue.healthGate.runner.enabled is true",
        ),
    ),
    (
        "gcp-a3",
        (
            *GATED_GKE_JOBSET,
            "workload.queue.healthGate.runner.enabled=true",
            "workload.queue.healthGate.runner.dcgmLevel=5",
        ),
        ("workload.queue.healthGate.runner.dcgmLevel", "1, 2, 3 or 4"),
    ),
    (
        "nerc-production",
        ("workload.kind=jobset", "workload.command[0]=train.py", "name=" + "a" * 52, "nodes=4096"),
        ("the last pod's name", "has 70 characters, over the 63 the webhook allows"),
    ),
    # JobSet's webhook counts the Job controller's 5 random characters in the pod names
    # (kubernetes-sigs/jobset v0.12.0 pkg/webhooks/jobset_webhook.go): 49 + len("-node-0-1") +
    # len("-abcde") = 64 > 63, though the hostname (58) fits.
    (
        "barcelona",
        ("workload.kind=jobset", "workload.command[0]=t.py", *BARCELONA_RWX, "name=" + "a" * 49),
        ("gpu-cluster:name = 'aaaa", "has 64 characters", "with nodes = 2, name takes at most 48"),
    ),
    # Kueue's AdmissionCheck names its ProvisioningRequestConfig (namespace-name) in
    # parameters.name, at most 63 characters (kueue v0.19.2 admissioncheck_types.go).
    (
        "gcp-a4",
        ("namespace=" + "n" * 40, "name=" + "b" * 23),
        (
            "gpu-cluster:namespace/name",
            "64 characters",
            "takes at most 63 in parameters.name",
            "at most 62 characters",
        ),
    ),
    # A Kueue Topology holds at most 16 levels (kueue v0.19.2 topology_types.go); the stack adds
    # the node's.
    (
        "barcelona",
        (
            "workload.kind=jobset",
            "workload.command[0]=t.py",
            *BARCELONA_RWX,
            *(f"workload.queue.topologyLevels[{i}]=example.com/level-{i}" for i in range(16)),
        ),
        ("gpu-cluster:workload.queue.topologyLevels", "at most 15 items"),
    ),
    # workload.controllers: what the stack installs, and where
    (
        "nerc-production",
        ("workload.kind=jobset", "workload.command[0]=t.py", "workload.controllers.install=true"),
        (
            "gpu-cluster:workload.controllers.install = true: on OpenShift Kueue and JobSet come "
            "from Red Hat's operators",
            "set false",
        ),
    ),
    (
        "gcp-a3",
        (*_GKE_JOBSET, "workload.controllers.kueueVersion=0.14.9"),
        (
            "gpu-cluster:workload.controllers.kueueVersion = '0.14.9'",
            "0.15.0 or later: the first to serve kueue.x-k8s.io/v1beta2",
        ),
    ),
    (
        "gcp-a3",
        (*_GKE_JOBSET, "workload.controllers.jobsetVersion=v0.12.0"),
        ("gpu-cluster:workload.controllers.jobsetVersion = 'v0.12.0'", "MAJOR.MINOR.PATCH"),
    ),
    (
        "gcp-a3",
        (
            *_GKE_JOBSET,
            "workload.controllers.install=false",
            "workload.controllers.kueueVersion=0.18.3",
        ),
        (
            "gpu-cluster:workload.controllers.kueueVersion is only used when the stack installs "
            "Kueue and JobSet",
        ),
    ),
    (
        "gcp-a3",
        ("workload.controllers.install=true",),
        ("gpu-cluster:workload.controllers is only used when workload.kind is 'jobset'",),
    ),
    # GKE's monitoring components: the API's names only, and only on GKE
    (
        "gcp-a4",
        ("monitoring.gkeComponents[0]=GPU",),
        ("gpu-cluster:monitoring.gkeComponents[0] = 'GPU'", "'SYSTEM_COMPONENTS'", "'DCGM'"),
    ),
    (
        "barcelona",
        ("monitoring.dcgm=false",),
        ("gpu-cluster:monitoring.dcgm is only used when platform is 'gke'",),
    ),
    # A runs' checkpoint directory on storage every pod of a run shares and may write: not the
    # container's own filesystem, not gcp-a4's read-only data bucket, not beside a mount.
    *(
        (
            "gcp-a4",
            (f"workload.runs.checkpointDir={where}",),
            (
                f"gpu-cluster:workload.runs.checkpointDir = {where!r} is on no storage the pods",
                "at or below one of: '/checkpoints', '/workspace'",
            ),
        )
        for where in ("/tmp/ckpt", "/data/ckpt", "/checkpointsx")
    ),
    # ... nor a directory no file system takes: a name of 256 bytes (Linux NAME_MAX 255)
    (
        "gcp-a4",
        (f"workload.runs.checkpointDir=/workspace/{'c' * 256}",),
        ("gpu-cluster:workload.runs.checkpointDir", "256 bytes", "at most 255"),
    ),
    (
        "barcelona",
        ("workload.runs.checkpointDir=/workspace/ckpt",),
        ("gpu-cluster:workload.runs is only used when workload.kind is 'jobset'",),
    ),
]


def registered(run: ProgramRun) -> list[str]:
    return [r.type for r in run.resources]


@pytest.mark.parametrize(
    ("stack", "overrides", "fragments"), CASES, ids=[" ".join(c[1]) for c in CASES]
)
def test_bad_config_stops_before_any_resource(
    stack: str, overrides: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    config, secret_keys = edited_config(stack, overrides)
    run = ProgramRun()
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, secret_keys, stack, record_into=run)
    assert registered(run) == []
    message = str(info.value)
    assert message.startswith("invalid stack config:")
    for fragment in fragments:
        assert fragment in message


def test_the_suite_is_broad() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize(
    ("stack", "overrides", "key"),
    [
        (
            "gcp-a3",
            UNKNOWN_HEALTH_CHECK,
            "workload.queue.healthGate.checks",
        ),
        (
            "nerc-production",
            (
                "workload.kind=jobset",
                "workload.command[0]=train.py",
                "workload.queue.topologyLevels[0]=Bad Label",
            ),
            "workload.queue.topologyLevels",
        ),
    ],
)
def test_a_list_whose_one_item_is_bad_is_named_once_by_that_item(
    stack: str, overrides: tuple[str, ...], key: str
) -> None:
    """Not also as too short: pydantic counts a list's valid items against its minimum."""
    config, secret_keys = engine_config(stack, overrides)
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, secret_keys, stack, record_into=ProgramRun())
    lines = str(info.value).splitlines()[1:]
    assert [line.split(" = ")[0].strip() for line in lines] == [f"gpu-cluster:{key}[0]"], lines


@pytest.mark.parametrize("value", ["1.2.3", "127.0.0.1"])
def test_a_union_key_is_refused_on_one_line_that_names_each_kind_of_value(value: str) -> None:
    """`dcgmHostEngine` is `own` or a host: one line, the host's reason and then `own`, not
    pydantic's line per member that led with "Input should be 'own'"."""
    key = "workload.queue.healthGate.runner.dcgmHostEngine"
    config, secret_keys = engine_config("nerc-production", (*NERC_RUNNER, f"{key}={value}"))
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, secret_keys, "nerc-production", record_into=ProgramRun())
    (line,) = [line for line in str(info.value).splitlines() if f"{key} =" in line]
    assert line.endswith("; or else 'own'"), line
    assert "Input should be" not in line


def test_the_stacks_own_service_accounts_are_refused_as_run_submitters() -> None:
    """Each ServiceAccount the stack renders (its training pods', the node health gate's and
    runner's, the runs' ledger exporter's), listed among the run submitters beside one of the
    user's, by its name or by its user name: refused, that entry named, before anything is
    registered; the user's alone renders."""
    stack = (*NERC_RUNNER, "monitoring.runMetrics.enabled=true", r"launcher.firstStepPattern=^s")
    config, secret_keys = edited_config("nerc-production", stack)
    rendered = ProgramRun()
    run_program(config, secret_keys, "nerc-production", record_into=rendered)
    accounts = rendered.of_type("kubernetes:core/v1:ServiceAccount")
    own = [(r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]) for r in accounts]
    assert len(own) == 4, own
    submitters = "workload.runs.submitters"
    config, secret_keys = edited_config("nerc-production", (*stack, f"{submitters}.users[0]=ci"))
    run_program(config, secret_keys, "nerc-production", record_into=ProgramRun())
    for namespace, account in own:
        for key, name in (
            ("serviceAccounts", account),
            ("users", f"system:serviceaccount:{namespace}:{account}"),
        ):
            config, secret_keys = edited_config(
                "nerc-production",
                (*stack, f"{submitters}.{key}[0]=ci-bot", f"{submitters}.{key}[1]={name}"),
            )
            run = ProgramRun()
            with pytest.raises(pulumi.RunError) as info:
                run_program(config, secret_keys, "nerc-production", record_into=run)
            assert registered(run) == []
            assert f"gpu-cluster:{submitters}.{key}[1] = {name!r} is the stack's own" in (
                str(info.value)
            )
