"""The one schema of stack config.

Every key a user may write in `Pulumi.<stack>.yaml` (under the `gpu-cluster:` namespace) is a
field here, spelled as in the stack file (camelCase). `load_settings` turns the raw config map
into a validated, frozen `Settings` tree or raises `ConfigError` naming the key, the bad value and
what is allowed. Nothing in this module imports Pulumi: it is unit-testable on its own.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import re
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, date, datetime
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from gpu_cluster.plan.gcp_network import plan_addresses
from gpu_cluster.plan.gke_storage import StorageClassMode, storage_class_problems
from gpu_cluster.plan.gpudirect import (
    GIB_RELEASES,
    GKE_END_OF_STANDARD_SUPPORT,
    GPUDIRECT_MODES,
    RDMA_MACHINES,
    RDMA_NIC_COUNT,
    RELEASES,
    TCPXO_MIN_GKE,
    GibRelease,
    GpuDirectRelease,
    gib_releases_for,
    gke_minor,
    gke_version_key,
    release_for,
    releases_for,
)

PROJECT = "gpu-cluster"

Platform = Literal["openshift", "gke"]
NetworkMode = Literal["tcp", "rdma", "tcpxo", "tcpx"]

# apps.kubernetes.io/pod-index pod label: beta (on by default) in Kubernetes 1.28.
MIN_KUBERNETES_MINOR = 28
# Native sidecars (init containers with restartPolicy Always): on by default from 1.29.
NATIVE_SIDECAR_MINOR = 29
# The StatefulSet controller labels each pod controller-revision-hash=<name>-<hash>, the hash up
# to 10 characters, and a label value holds 63 (kubernetes/kubernetes
# pkg/controller/history/controller_history.go ControllerRevisionName; issue #64023).
STATEFULSET_NAME_MAX = 63 - len("-") - 10
# GKE cluster names: 1-40 characters, DNS-1035 (cloud.google.com/kubernetes-engine/docs/
# reference/rest/v1/projects.locations.clusters#Cluster "name").
GKE_CLUSTER_NAME_MAX = 40
# Compute Engine resource names: RFC 1035, at most 63 characters
# (cloud.google.com/compute/docs/naming-resources).
GCP_NAME_MAX = 63
# The pod's primary (cluster network) interface: CNI plugins and Multus name it eth0.
POD_PRIMARY_INTERFACE = "eth0"
# Fastest line rate a GPU NIC reaches today, GB/s: 400 Gb/s ConnectX-7 (NVIDIA ConnectX-7
# datasheet); A3 Mega 8 x 200 Gb/s, A3 High 4 x 200 Gb/s GPU NICs
# (cloud.google.com/compute/docs/gpus/gpudirect). Bus bandwidth cannot exceed the fabric's.
NIC_LINE_RATE_GBPS = 50.0
# A3 Ultra / A4: 8 x 400 Gb/s CX-7 RoCE NICs, 3,200 Gb/s per VM (cloud.google.com/compute/docs/
# gpus/gpu-network-bandwidth).
GKE_FABRIC_GBPS = {"tcpxo": 200.0, "tcpx": 100.0, "rdma": 400.0}
# Smallest all-reduce of the fabric check's sweep (scripts/allreduce_check.py --min-bytes).
CHECK_MIN_BYTES = 8

# Which network modes each platform offers.
MODES_BY_PLATFORM: dict[str, tuple[str, ...]] = {
    "openshift": ("tcp", "rdma"),
    "gke": ("tcpxo", "tcpx", "rdma", "tcp"),
}


class ConfigError(ValueError):
    """Stack config that cannot be deployed; the message names every offending key."""


# --- value types ---------------------------------------------------------------------------

# Kubernetes quantity grammar (kubernetes/apimachinery pkg/api/resource/quantity.go):
# <signedNumber><suffix>, number = digits | digits.digits | digits. | .digits, suffix = binary SI
# (Ki..Ei), decimal SI (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2).
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_SUFFIX_SCALE: dict[str, Fraction] = {
    **{s: Fraction(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: Fraction(10) ** e for s, e in (("n", -9), ("u", -6), ("m", -3), ("k", 3), ("M", 6))},
    **{s: Fraction(10) ** e for s, e in (("G", 9), ("T", 12), ("P", 15), ("E", 18))},
}
# DNS-1035 label: Service names and names that become GCP resource names
# (kubernetes/apimachinery pkg/util/validation/validation.go IsDNS1035Label).
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# DNS-1123 label: namespaces (IsDNS1123Label; may start with a digit).
_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Label keys and values (IsQualifiedName, IsValidLabelValue): 63 characters per name part.
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE_MAX = 63
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
_IMAGE = re.compile(
    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$"
)
_RESOURCE_NAME = re.compile(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
# Ranges a cluster network may use: RFC 1918 private space and RFC 6598 shared space (both valid
# GCP subnet ranges, cloud.google.com/vpc/docs/subnets#valid-ranges). Loopback, link-local,
# multicast, public and reserved ranges are refused by GCP or unroutable between pods.
USABLE_PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)


def parse_quantity(value: str) -> Fraction:
    """The exact value of a Kubernetes quantity string; ValueError when it is not one."""
    match = _QUANTITY.match(value)
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix[:1] in ("e", "E"):
        exponent = int(suffix[1:])
        if abs(exponent) > 64:  # far beyond any resource; keeps the arithmetic bounded
            raise ValueError(f"exponent out of range: {value!r}")
        return number * Fraction(10) ** exponent
    return number * _SUFFIX_SCALE.get(suffix, Fraction(1))


def _as_text(value: Any) -> Any:
    """Plain numbers are valid quantities (`cpuRequest: 32`, `memoryLimit: 1e9`)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _quantity(value: str) -> str:
    try:
        amount = parse_quantity(value)
    except ValueError:
        raise ValueError("must be a Kubernetes quantity such as 64Gi, 500Mi, 32 or 1e9") from None
    if amount < 0:
        raise ValueError("must not be negative")
    return value


def _size(value: str) -> str:
    if parse_quantity(value) <= 0:
        raise ValueError("must be greater than zero (Kubernetes refuses zero-size claims)")
    return value


def _dns_label(value: str) -> str:
    if len(value) > DNS_LABEL_MAX or not _DNS_1035_LABEL.match(value):
        raise ValueError(
            "must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter, "
            f"at most {DNS_LABEL_MAX} characters"
        )
    return value


def _namespace(value: str) -> str:
    if len(value) > DNS_LABEL_MAX or not _DNS_1123_LABEL.match(value):
        raise ValueError(
            "must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending "
            f"with a letter or digit, at most {DNS_LABEL_MAX} characters"
        )
    return value


def _subdomain(value: str) -> str:
    if len(value) > DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', at most "
            f"{DNS_SUBDOMAIN_MAX} characters"
        )
    return value


def _node_name(value: str) -> str:
    if len(value) > DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN.match(value):
        raise ValueError("must be a Kubernetes node name (lower-case DNS subdomain)")
    return value


def _label_key(value: str) -> str:
    prefix, slash, name = value.rpartition("/")
    if (
        # IsQualifiedName: a written '/' needs a non-empty prefix ("prefix part must be non-empty")
        (slash and (len(prefix) > DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN.match(prefix)))
        or len(name) > LABEL_VALUE_MAX
        or not _QUALIFIED_NAME.match(name)
    ):
        raise ValueError(
            "must be a label key: an optional DNS subdomain prefix and '/', then at most 63 "
            "letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
    return value


def _image(value: str) -> str:
    if not _IMAGE.match(value):
        raise ValueError(
            "must be an image reference with an explicit tag or digest, e.g. registry/repo:1.2.3"
        )
    if value.endswith(":latest"):
        raise ValueError("':latest' is mutable; pin a version tag or a digest")
    return value


def _resource_name(value: str) -> str:
    if not _RESOURCE_NAME.match(value):
        raise ValueError("must be an extended resource name such as openshift.io/eno5np0rdma")
    return value


def _cidr(value: str) -> str:
    if "/" not in value:
        raise ValueError("must be an IPv4 CIDR with a prefix length, e.g. 10.0.0.0/8")
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"must be an IPv4 CIDR with no host bits set ({exc})") from None
    return str(network)


def _private_cidr(value: str) -> str:
    network = ipaddress.IPv4Network(_cidr(value))
    if not any(network.subnet_of(r) for r in USABLE_PRIVATE_RANGES):
        raise ValueError(
            "must lie inside a private range (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 or "
            "100.64.0.0/10)"
        )
    return str(network)


Quantity = Annotated[str, BeforeValidator(_as_text), AfterValidator(_quantity)]
Size = Annotated[str, BeforeValidator(_as_text), AfterValidator(_quantity), AfterValidator(_size)]
DnsLabel = Annotated[str, AfterValidator(_dns_label)]
Namespace = Annotated[str, AfterValidator(_namespace)]
Subdomain = Annotated[str, AfterValidator(_subdomain)]
NodeName = Annotated[str, AfterValidator(_node_name)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
Image = Annotated[str, AfterValidator(_image)]
ResourceName = Annotated[str, AfterValidator(_resource_name)]
Cidr = Annotated[str, AfterValidator(_cidr)]
PrivateCidr = Annotated[str, AfterValidator(_private_cidr)]
Interface = Annotated[str, Field(pattern=r"^[a-z][a-z0-9]{0,14}$")]
EnvName = Annotated[str, Field(pattern=r"^[A-Z_][A-Z0-9_]*$")]


class _Model(BaseModel):
    """Stack-file keys are camelCase; unknown keys are errors, never silently ignored."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, frozen=True, validate_default=True
    )


# --- sections --------------------------------------------------------------------------------


class PodSettings(_Model):
    """Per-pod compute resources of the training container."""

    cpu_request: Quantity = "32"
    memory_request: Quantity = "128Gi"
    cpu_limit: Quantity | None = None
    memory_limit: Quantity = "256Gi"
    # NCCL and the PyTorch dataloader use /dev/shm; the 64 MiB container default breaks them.
    shm_size: Quantity = "64Gi"

    @model_validator(mode="after")
    def _requests_within_limits(self) -> PodSettings:
        # The API server refuses a request above its limit (kubernetes/kubernetes
        # pkg/apis/core/validation ValidateResourceRequirements: "must be less than or equal to").
        for resource, request, limit in (
            ("cpu", self.cpu_request, self.cpu_limit),
            ("memory", self.memory_request, self.memory_limit),
        ):
            if limit is not None and parse_quantity(request) > parse_quantity(limit):
                raise ValueError(
                    f"{resource}Request {request} is above {resource}Limit {limit}; Kubernetes "
                    "refuses a request larger than its limit"
                )
        return self


class StorageSettings(_Model):
    """Workspace and datasets volumes: shared RWX claims or one claim per pod."""

    mode: Literal["rwx", "per-pod"] = "rwx"
    storage_class: Subdomain | None = None  # a StorageClass name (DNS-1123 subdomain)
    # create: the stack creates the class (GKE: one the program knows, hyperdisk-balanced);
    # reference: it exists in the cluster. None: create on GKE a class the program knows and GKE
    # does not install, reference any other (plan/gke_storage.py).
    storage_class_mode: StorageClassMode | None = None
    workspace_size: Size = "100Gi"
    datasets_size: Size | None = "500Gi"
    # User data outlives `pulumi destroy` unless the stack opts out explicitly.
    retain_on_delete: bool = True
    # Claims carry Pulumi's `protect`: an update or destroy that would delete or replace one (a
    # changed name, namespace, mode, class or access mode, a per-pod scale-down) stops at preview
    # until the stack sets this to false for that one update.
    protect: bool = True


class DeepSpeedSettings(_Model):
    zero_stage: Literal[0, 1, 2, 3] = 2
    precision: Literal["bf16", "fp16", "fp32"] = "bf16"
    micro_batch_size: int = Field(default=4, ge=1)
    gradient_accumulation_steps: int = Field(default=1, ge=1)
    offload_optimizer: bool = False


class LauncherSettings(_Model):
    kind: Literal["torchrun", "deepspeed"] = "torchrun"
    # Elastic range for torchrun (--nnodes=min:max); both default to `nodes`.
    min_nodes: int | None = Field(default=None, ge=1)
    max_nodes: int | None = Field(default=None, ge=1)
    max_restarts: int = Field(default=0, ge=0, le=100)
    master_port: int = Field(default=29500, ge=1024, le=65535)
    deepspeed: DeepSpeedSettings = DeepSpeedSettings()


class NicSettings(_Model):
    """One RDMA NIC as the pod sees it (net1..netN) and how Multus attaches it."""

    interface: Interface
    network: DnsLabel  # NetworkAttachmentDefinition name
    flavour: Literal["sriov", "macvlan", "host-device"]
    resource: ResourceName  # device-plugin resource the pod requests for this NIC
    subnet: PrivateCidr
    routes: tuple[Cidr, ...] = ()
    # Host interface for macvlan (its parent) or host-device (the device moved into the pod).
    master: Interface | None = None
    # mlx5 device behind the interface; None = detected at pod start (the default: SR-IOV VF
    # device names follow VF allocation, so a pin can go stale).
    hca: str | None = Field(default=None, pattern=r"^[a-z0-9_]+$")

    @model_validator(mode="after")
    def _master_matches_flavour(self) -> NicSettings:
        if self.flavour == "macvlan" and self.master is None:
            raise ValueError("flavour 'macvlan' needs 'master' (the parent host interface)")
        if self.flavour != "macvlan" and self.master is not None:
            # Multus hands sriov and host-device the device the kubelet allocated for
            # 'resource'; a fixed device would override it (containernetworking/plugins
            # host-device.go getLink checks `device` first).
            raise ValueError(
                f"flavour {self.flavour!r} takes its device from 'resource'; remove 'master'"
            )
        return self


# How RDMA memory registration gets enough locked memory (see RdmaSettings.memlock).
MemlockStrategy = Literal["root-ipc-lock", "machineconfig", "preconfigured"]
# What the program does about an object that may already exist in the cluster.
ExistingObject = Literal["create", "adopt", "reference"]


class RdmaSettings(_Model):
    """RoCE over Multus-attached NICs (networkMode: rdma)."""

    nics: tuple[NicSettings, ...] = Field(min_length=1, max_length=16)
    # MTU every RDMA interface must have: preflight checks it; macvlan NADs set it. SR-IOV VFs
    # get theirs from the SriovNetworkNodePolicy (sriov-cni ignores a NAD's mtu).
    mtu: int = Field(default=9000, ge=1280, le=9216)
    # Pod interface NCCL uses for bootstrap (the cluster network, not an RDMA NIC).
    bootstrap_interface: Interface = "eth0"
    # None: NCCL >= 2.21 picks the GID ('nccl') when every NIC has its own GID table (sriov,
    # host-device); detected per pod ('auto') when a macvlan shares an HCA, where NCCL's pick
    # (lowest RoCE v2 IPv4 index) can be another pod's or the host's GID. Or a fixed index.
    gid_index: Literal["auto", "nccl"] | Annotated[int, Field(ge=0, le=255)] | None = None
    # root-ipc-lock: only the training container runs as UID 0 with IPC_LOCK (own SCC);
    # machineconfig: a CRI-O drop-in raises the default memlock on the GPU MachineConfigPool
    # (cluster-admin; every node of the pool reboots); preconfigured: the nodes already do.
    memlock: MemlockStrategy = "root-ipc-lock"
    # MachineConfigPool of the GPU nodes (memlock: machineconfig).
    machine_config_pool: DnsLabel = "worker"
    # The memlock MachineConfig is cluster-wide, one per pool, shared by every stack on it
    # (memlock: machineconfig). create: this stack creates and owns it; adopt: it exists (made
    # by a stack since destroyed, or by hand) and this stack takes it over; reference: another
    # stack or the platform team owns it and this one only relies on it. A created or adopted
    # one is kept on `pulumi destroy`: removing it reboots the pool under every other stack.
    machine_config: ExistingObject = "create"
    # NetworkAttachmentDefinitions: create them, adopt existing ones (Pulumi import) or use
    # existing ones by name without managing them.
    network_attachments: ExistingObject = "create"
    # NCCL_MIN_NCHANNELS; None = NCCL's default.
    min_nchannels: int | None = Field(default=None, ge=1, le=64)
    # Documented NCCL_NET_GDR_LEVEL values; None lets NCCL decide from the topology.
    gdr_level: Literal["LOC", "PIX", "PXB", "PHB", "SYS"] | None = None
    cross_nic: Literal[0, 1, 2] = 0
    ib_timeout: int | None = Field(default=None, ge=1, le=31)
    traffic_class: int | None = Field(default=None, ge=0, le=255)
    service_level: int | None = Field(default=None, ge=0, le=15)
    qps_per_connection: int | None = Field(default=None, ge=1, le=128)

    @property
    def gid(self) -> Literal["auto", "nccl"] | int:
        """gidIndex with its default resolved (see the field's comment)."""
        if self.gid_index is not None:
            return self.gid_index
        return "auto" if any(nic.flavour == "macvlan" for nic in self.nics) else "nccl"


class TcpSettings(_Model):
    """Plain-Ethernet NCCL (networkMode: tcp)."""

    socket_ifname: str = "^lo,docker"
    # NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD must stay <= 64 (NCCL env docs).
    socket_nthreads: int | None = Field(default=None, ge=1, le=16)
    nsocks_per_thread: int | None = Field(default=None, ge=1, le=64)


class CodeSyncSettings(_Model):
    """Keep a git repository checked out in every pod (git-sync as a native sidecar)."""

    repo: str = Field(pattern=r"^(https://|ssh://|git@)\S+$")
    ref: str = "main"
    period: str = Field(default="60s", pattern=r"^[0-9]+(s|m|h)$")
    # Existing Secret with keys `username` and `password` (an HTTPS token); None = public repo.
    credentials_secret: Subdomain | None = None
    # kubernetes/git-sync release (registry.k8s.io/git-sync/git-sync): v4.7.1, newest v4 release
    # as of 2026-09 (kubernetes/git-sync releases; v4.6.0 was mostly CVE fixes, kubernetes/k8s.io
    # #9118). Same GITSYNC_* flags since v4.0.
    image: Image = "registry.k8s.io/git-sync/git-sync:v4.7.1"


class VerifySettings(_Model):
    """The built-in fabric check (all-reduce bandwidth + transport) shipped to every pod."""

    enabled: bool = True
    # PASS threshold for bus bandwidth at the largest size; None = the sourced default of the mode
    # or, on GKE's GPUDirect machines, of the machine (gpu_cluster/plan/verify.py).
    expected_busbw_gbps: float | None = Field(default=None, gt=0)
    # Largest all-reduce of the sweep (binary units); None = 8G on GKE's GPUDirect machines (the
    # size Google's health check measures its floor at), 1G elsewhere (plan/verify.py).
    max_bytes: str | None = Field(default=None, pattern=r"^[0-9]+[KMG]?$")
    iters: int = Field(default=20, ge=1, le=1000)
    # Also require GPUDirect RDMA (GDRDMA) in rdma mode.
    require_gdr: bool = False
    # Launchers run preflight.sh (GPUs, /dev/shm, memlock, RDMA links, DeepSpeed) before
    # training; None = on in rdma mode (a too-small memlock must stop training), off otherwise.
    preflight: bool | None = None


class NcclSettings(_Model):
    debug: Literal["VERSION", "WARN", "INFO", "TRACE"] = "WARN"


class OpenShiftSettings(_Model):
    # GPU nodes the pods may run on; empty = any node with GPUs.
    node_names: tuple[NodeName, ...] = ()
    # Node label that marks GPU nodes (set by the NVIDIA GPU operator's feature discovery).
    gpu_node_label: LabelKey = "nvidia.com/gpu.present"


MACHINE_GPUS: dict[str, int] = {
    # GPUs per machine (cloud.google.com/compute/docs/accelerator-optimized-machines, A3 series).
    "a3-megagpu-8g": 8,
    "a3-highgpu-8g": 8,
    "a3-ultragpu-8g": 8,  # A3 Ultra, 8 x H200
    "a4-highgpu-8g": 8,  # A4, 8 x B200
}

# How the GPU pool gets its capacity (GcpSettings.provisioning).
Provisioning = Literal["on-demand", "spot", "reservation", "flex-start"]
# Capacity each machine type is offered with. A3 Ultra and A4 come only through reservations
# (whole, a block or sub-block, or a calendar-mode future reservation), flex-start or Spot, never
# on demand: docs.cloud.google.com/ai-hypercomputer/docs/consumption-models (consulted
# 2026-11-23) lists no on-demand option for them, and every GoogleCloudPlatform/cluster-toolkit
# blueprint for them (examples/gke-a4, gke-a3-ultragpu, gke-consumption-options; 1047080)
# consumes a reservation or flex-start. A3 Mega and A3 High are also sold on demand.
MACHINE_PROVISIONING: dict[str, tuple[Provisioning, ...]] = {
    "a3-megagpu-8g": ("on-demand", "spot", "reservation", "flex-start"),
    "a3-highgpu-8g": ("on-demand", "spot", "reservation", "flex-start"),
    "a3-ultragpu-8g": ("flex-start", "reservation", "spot"),
    "a4-highgpu-8g": ("flex-start", "reservation", "spot"),
}


class SystemPoolSettings(_Model):
    """The CPU pool for GKE's own workloads (kube-dns, metrics-server, konnectivity): the GPU
    pool's nvidia.com/gpu taint keeps them off the A3 nodes. Defaults: GoogleCloudPlatform/
    cluster-toolkit modules/scheduler/gke-cluster variables.tf (1047080, 2026-06-25), which the
    gke-a3-megagpu and gke-a3-highgpu blueprints keep."""

    machine_type: str = Field(default="e2-standard-4", pattern=r"^[a-z0-9]+-[a-z0-9-]+$")
    min_nodes: int = Field(default=2, ge=1, le=100)
    max_nodes: int = Field(default=10, ge=1, le=100)
    disk_size_gb: int = Field(default=100, ge=10, le=65536)

    @model_validator(mode="after")
    def _range(self) -> SystemPoolSettings:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"minNodes ({self.min_nodes}) must be <= maxNodes ({self.max_nodes})")
        return self


# The system pool's machine and boot disk where the GPU machine's blueprint sizes it itself:
# cluster-toolkit's A3 Ultra and A4 blueprints run it on e2-standard-16 with 200 GB
# (examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml and examples/gke-a4/gke-a4.yaml,
# system_node_pool_machine_type and system_node_pool_disk_size_gb, 1047080); the A3 Mega and
# A3 High blueprints keep the module's defaults above.
SYSTEM_POOL_BY_MACHINE: dict[str, dict[str, Any]] = {
    "a3-ultragpu-8g": {"machineType": "e2-standard-16", "diskSizeGb": 200},
    "a4-highgpu-8g": {"machineType": "e2-standard-16", "diskSizeGb": 200},
}


class AuthorizedNetwork(_Model):
    """One address range allowed to reach the cluster's control plane (GKE master authorized
    networks; cluster-toolkit modules/scheduler/gke-cluster `master_authorized_networks`)."""

    cidr_block: Cidr
    display_name: str = Field(min_length=1)


# Most authorized ranges GKE takes: 50 on a cluster with a public endpoint and public nodes, 100
# on a private cluster (cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks,
# "Limitations", consulted 2026-11-24).
AUTHORIZED_NETWORKS_MAX = {False: 50, True: 100}


# A reservation, optionally a block or sub-block of it (see GcpSettings.reservation).
_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
RESERVATION_PATTERN = (
    rf"^(projects/[a-z][-a-z0-9]{{4,28}}[a-z0-9]/reservations/)?{_NAME}"
    rf"(/reservationBlocks/{_NAME}(/reservationSubBlocks/{_NAME})?)?$"
)
# Longest a flex-start VM runs: 7 days (cloud.google.com/kubernetes-engine/docs/concepts/dws).
FLEX_START_MAX_SECONDS = 7 * 24 * 3600
# Oldest GKE version with flex-start for GPU node pools (docs.cloud.google.com/ai-hypercomputer/
# docs/create/gke-ai-hypercompute; cloud.google.com/kubernetes-engine/docs/concepts/dws).
FLEX_START_MIN_GKE = "1.32.2-gke.1652000"


class GcpSettings(_Model):
    project: str = Field(pattern=r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
    region: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]$")
    zone: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]-[a-z]$")
    machine_type: Literal["a3-megagpu-8g", "a3-highgpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g"] = (
        "a3-megagpu-8g"
    )
    # flex-start: Dynamic Workload Scheduler's flex-start VMs (cloud.google.com/kubernetes-engine/
    # docs/concepts/dws); queued provisioning is not offered: its nodes come only through
    # ProvisioningRequests, which the StatefulSet never makes.
    # A3 Ultra and A4 are not offered on demand (MACHINE_PROVISIONING).
    provisioning: Provisioning = "on-demand"
    # A specific reservation: its name (same project) or projects/<p>/reservations/<name>,
    # optionally narrowed to a block or sub-block: <name>/reservationBlocks/<block>[/
    # reservationSubBlocks/<sub-block>] (GoogleCloudPlatform/cluster-toolkit modules/compute/
    # gke-node-pool reservation_definitions.tf; AI-Hypercomputer/xpk src/xpk/core/reservation.py).
    reservation: str | None = Field(default=None, pattern=RESERVATION_PATTERN)
    # flex-start only: how long each node may run, in seconds (at most 7 days per flex-start VM,
    # cloud.google.com/kubernetes-engine/docs/concepts/dws); None = GKE's default.
    max_run_duration_seconds: int | None = Field(default=None, ge=1, le=FLEX_START_MAX_SECONDS)
    maintenance_interval: Literal["AS_NEEDED", "PERIODIC"] | None = None
    # REGULAR as cluster-toolkit's gke-a3-highgpu blueprint; a channel is what lets the
    # maintenance exclusion below hold minor upgrades.
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "UNSPECIFIED"] = "REGULAR"
    # "1.N" (GKE picks the channel's newest patch of that minor) or an exact "1.N.P-gke.B".
    min_master_version: str = Field(default="1.35", pattern=r"^1\.\d+(\.\d+-gke\.\d+)?$")
    # Maintenance exclusion NO_MINOR_OR_NODE_UPGRADES until the minor's end of support, so
    # auto-upgrades never move the cluster off the minor its GPUDirect release is pinned for
    # (cluster-toolkit examples/gke-a3-highgpu/gke-a3-highgpu.yaml).
    hold_minor_upgrades: bool = True
    base_cidr: PrivateCidr = "10.0.0.0/8"
    # GKE's own deletion protection and Pulumi's `protect` on the cluster: an update that would
    # replace it (a force-new field such as the zone) or a destroy stops until this is false.
    deletion_protection: bool = True
    private_nodes: bool = True
    # Own compact ResourcePolicy with this max distance; None = pool's built-in COMPACT placement.
    placement_max_distance: int | None = Field(default=None, ge=1, le=3)
    # Pinned GPUDirect release (installer, RxDM sidecar or gIB plugin, NCCL settings); None =
    # the newest one published for the GKE minor of minMasterVersion.
    gpudirect_release: str | None = None
    system_pool: SystemPoolSettings = SystemPoolSettings()
    # Ranges allowed to reach the control plane's endpoint; GKE refuses every other outside
    # address. Required of a stack that creates the cluster (cluster_problems): no default is
    # both safe and deployable.
    authorized_networks: tuple[AuthorizedNetwork, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def _system_pool_for_the_machine(cls, data: Any) -> Any:
        """The GPU machine's system pool size where cluster-toolkit sizes it per machine
        (SYSTEM_POOL_BY_MACHINE); keys the stack sets win. Anything malformed is left to the
        schema to report."""
        if not isinstance(data, Mapping):
            return data
        defaults = SYSTEM_POOL_BY_MACHINE.get(str(data.get("machineType")))
        pool = data.get("systemPool", {})
        if defaults is None or not isinstance(pool, Mapping):
            return data
        return {**data, "systemPool": {**defaults, **pool}}

    @model_validator(mode="after")
    def _zone_in_region(self) -> GcpSettings:
        if not self.zone.startswith(self.region + "-"):
            raise ValueError(f"zone {self.zone!r} is not in region {self.region!r}")
        if self.provisioning == "reservation" and not self.reservation:
            raise ValueError("provisioning 'reservation' needs 'reservation' (its name)")
        if self.provisioning != "reservation" and self.reservation:
            raise ValueError("'reservation' is only used with provisioning 'reservation'")
        if self.provisioning == "reservation" and self.placement_max_distance is not None:
            raise ValueError(
                "placementMaxDistance: a reservation brings its own placement policy; "
                "adding another fails node pool creation"
            )
        if self.provisioning == "spot" and self.maintenance_interval is not None:
            raise ValueError("maintenanceInterval applies to reserved or on-demand capacity")
        if self.max_run_duration_seconds is not None and self.provisioning != "flex-start":
            raise ValueError(
                "maxRunDurationSeconds is only used with provisioning 'flex-start' "
                f"(it is {self.provisioning!r})"
            )
        if self.provisioning == "flex-start" and self.placement_max_distance is not None:
            raise ValueError(
                "placementMaxDistance: flex-start nodes get best-effort compact placement from "
                "GKE itself (docs.cloud.google.com/ai-hypercomputer/docs/create/"
                "gke-ai-hypercompute); remove it or use another provisioning"
            )
        return self


class Settings(_Model):
    """Root of the stack config: one field per top-level `gpu-cluster:<key>`."""

    platform: Platform
    name: DnsLabel = "gpu-cluster"
    namespace: Namespace = "gpu-cluster"
    # create: the program creates (and by default retains) it; adopt: imports an existing one;
    # reference: it exists and the program leaves it alone.
    namespace_mode: ExistingObject = "create"
    nodes: int = Field(default=2, ge=1, le=4096)
    gpus_per_node: int = Field(default=8, ge=1, le=16)
    network_mode: NetworkMode = "tcp"
    kubernetes_version: str = Field(default="1.32", pattern=r"^1\.[0-9]{2}$")
    image: Image = "nvcr.io/nvidia/pytorch:25.01-py3"
    pod: PodSettings = PodSettings()
    storage: StorageSettings = StorageSettings()
    launcher: LauncherSettings = LauncherSettings()
    nccl: NcclSettings = NcclSettings()
    verify: VerifySettings = VerifySettings()
    tcp: TcpSettings = TcpSettings()
    rdma: RdmaSettings | None = None
    code_sync: CodeSyncSettings | None = None
    # Names of the env vars set from `secretEnv` (a Pulumi secret object: name -> token).
    # Only the names reach the schema; the values stay Pulumi secrets end to end.
    secret_env: tuple[EnvName, ...] = ()
    openshift: OpenShiftSettings = OpenShiftSettings()
    gcp: GcpSettings | None = None
    # Top-level keys set as Pulumi secrets (only SECRET_CAPABLE_KEYS get this far).
    _secret_keys: frozenset[str] = PrivateAttr(default=frozenset())

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "createNamespace" in data:
            raise ValueError(
                "gpu-cluster:createNamespace was replaced by namespaceMode: use "
                "namespaceMode: create (was true) or reference (was false), or adopt to import "
                "an existing namespace"
            )
        return data

    @model_validator(mode="after")
    def _cross_field_rules(self) -> Settings:
        problems = list(_cross_field_problems(self))
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def is_secret(self, key: str) -> bool:
        """Whether top-level `key` (as in the stack file) is a Pulumi secret."""
        return key in self._secret_keys

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def preflight(self) -> bool:
        if self.verify.preflight is not None:
            return self.verify.preflight
        return self.network_mode == "rdma" and self.rdma is not None

    @property
    def elastic_range(self) -> tuple[int, int]:
        lo = self.launcher.min_nodes or self.nodes
        hi = self.launcher.max_nodes or self.nodes
        return lo, hi


def _cross_field_problems(s: Settings) -> list[str]:
    out: list[str] = []
    allowed_modes = MODES_BY_PLATFORM[s.platform]
    if s.network_mode not in allowed_modes:
        out.append(
            f"gpu-cluster:networkMode = {s.network_mode!r} is not available on platform "
            f"{s.platform!r}; allowed: {', '.join(map(repr, allowed_modes))}"
        )
    if s.network_mode == "rdma" and s.rdma is None and s.platform == "openshift":
        out.append("gpu-cluster:rdma is required when networkMode is 'rdma' (the NIC list)")
    if s.rdma is not None and s.platform == "gke":
        out.append(
            "gpu-cluster:rdma is only used on platform 'openshift'; on GKE the RDMA NICs come "
            "with gcp.machineType; remove it"
        )
    if s.platform == "gke":
        if s.gcp is None:
            out.append("gpu-cluster:gcp is required when platform is 'gke' (project, region, zone)")
        else:
            out.extend(_gke_problems(s, s.gcp))
    elif s.gcp is not None:
        out.append("gpu-cluster:gcp is only used when platform is 'gke'; remove it")
    if s.openshift.node_names:
        if s.platform != "openshift":
            out.append("gpu-cluster:openshift.nodeNames is only used when platform is 'openshift'")
        if len(set(s.openshift.node_names)) != len(s.openshift.node_names):
            out.append("gpu-cluster:openshift.nodeNames lists a node twice")
        if len(s.openshift.node_names) < s.nodes:
            out.append(
                f"gpu-cluster:openshift.nodeNames lists {len(s.openshift.node_names)} nodes but "
                f"nodes = {s.nodes}: one pod runs per node, so list at least {s.nodes}"
            )
    minor = int(s.kubernetes_version.split(".")[1])
    if minor < MIN_KUBERNETES_MINOR:
        out.append(
            f"gpu-cluster:kubernetesVersion = {s.kubernetes_version!r}: needs "
            f"1.{MIN_KUBERNETES_MINOR} or newer (NODE_RANK comes from the pod-index label)"
        )
    sidecars = [
        *([f"networkMode {s.network_mode!r}"] if s.network_mode in ("tcpxo", "tcpx") else []),
        *(["codeSync (git-sync)"] if s.code_sync is not None else []),
    ]
    if sidecars and minor < NATIVE_SIDECAR_MINOR:
        out.append(
            f"gpu-cluster:kubernetesVersion = {s.kubernetes_version!r}: {' and '.join(sidecars)} "
            f"run as native sidecars, which need 1.{NATIVE_SIDECAR_MINOR} or newer"
        )
    out.extend(_name_problems(s))
    out.extend(
        storage_class_problems(s.platform, s.storage.storage_class, s.storage.storage_class_mode)
    )
    out.extend(_verify_problems(s))
    lo, hi = s.elastic_range
    if not lo <= s.nodes <= hi:
        out.append(
            f"gpu-cluster:launcher.minNodes/maxNodes = {lo}:{hi} must satisfy "
            f"minNodes <= nodes ({s.nodes}) <= maxNodes"
        )
    if s.rdma is not None:
        out.extend(_rdma_problems(s.rdma, s.nodes))
    tcp = s.tcp
    if (
        tcp.socket_nthreads
        and tcp.nsocks_per_thread
        and tcp.socket_nthreads * tcp.nsocks_per_thread > 64
    ):
        out.append(
            "gpu-cluster:tcp.socketNthreads x tcp.nsocksPerThread must be <= 64 (NCCL limit)"
        )
    return out


# Network mode -> machine types it needs on GKE (cloud.google.com/kubernetes-engine/docs/how-to/
# gpu-bandwidth-gpudirect-tcpx: TCPXO on A3 Mega, TCPX on A3 High; docs.cloud.google.com/
# ai-hypercomputer/docs/create/gke-ai-hypercompute: GPUDirect RDMA on A3 Ultra and A4).
_GKE_MODE_MACHINES: dict[str, tuple[str, ...]] = {
    "tcpxo": ("a3-megagpu-8g",),
    "tcpx": ("a3-highgpu-8g",),
    "rdma": tuple(RDMA_MACHINES),
}


def _today() -> date:
    return datetime.now(UTC).date()


def _gke_problems(s: Settings, gcp: GcpSettings) -> list[str]:
    out: list[str] = []
    needed = _GKE_MODE_MACHINES.get(s.network_mode)
    if needed and gcp.machine_type not in needed:
        out.append(
            f"gpu-cluster:networkMode = {s.network_mode!r} needs gcp.machineType "
            f"{' or '.join(map(repr, needed))}, not {gcp.machine_type!r}"
        )
    out.extend(_provisioning_problems(gcp))
    out.extend(_authorized_network_problems(gcp))
    have = MACHINE_GPUS[gcp.machine_type]
    if s.gpus_per_node > have:
        out.append(
            f"gpu-cluster:gpusPerNode = {s.gpus_per_node}: {gcp.machine_type} has {have} GPUs"
        )
    elif needed and s.gpus_per_node != have:
        out.append(
            f"gpu-cluster:gpusPerNode = {s.gpus_per_node}: networkMode {s.network_mode!r} serves "
            f"whole machines; set it to {have}"
        )
    version_problems = _gke_version_problems(s, gcp)
    out.extend(version_problems)
    if s.network_mode in GPUDIRECT_MODES and version_problems:
        return out  # the GPU NIC count comes from the release, which is in question
    try:
        plan_addresses(gcp.base_cidr, gpu_nic_count(s), rdma_nic_count(s))
    except ValueError as exc:
        out.append(f"gpu-cluster:gcp.baseCidr = {gcp.base_cidr!r}: {exc}")
    return out


def _provisioning_problems(gcp: GcpSettings) -> list[str]:
    """Capacity Google sells for the machine type (MACHINE_PROVISIONING)."""
    offered = MACHINE_PROVISIONING[gcp.machine_type]
    if gcp.provisioning in offered:
        return []
    default = "" if "provisioning" in gcp.model_fields_set else " (the default)"
    choices = ", ".join(map(repr, offered[:-1])) + f" or {offered[-1]!r}"
    return [
        f"gpu-cluster:gcp.provisioning = {gcp.provisioning!r}{default}: Google offers "
        f"gcp.machineType {gcp.machine_type!r} only as {choices} capacity; use one of them "
        "('flex-start' needs no reservation; 'reservation' takes gcp.reservation: a reservation, "
        "a block or sub-block of one, or a calendar-mode future reservation)"
    ]


def _authorized_network_problems(gcp: GcpSettings) -> list[str]:
    """The control plane is closed to every outside address but the listed ranges; an empty
    list would also lock out this program, which creates the Kubernetes objects through that
    endpoint from wherever `pulumi up` runs. (A missing list: cluster_problems.)"""
    nets = gcp.authorized_networks
    if nets is not None and not nets:
        return [
            f"{_AUTHORIZED_KEY} is empty: the control plane would refuse every outside address, "
            "this program's own Kubernetes calls from where `pulumi up` runs included; list at "
            f"least that range as {_AUTHORIZED_ENTRY}"
        ]
    limit = AUTHORIZED_NETWORKS_MAX[gcp.private_nodes]
    if nets is not None and len(nets) > limit:
        kind = "a private cluster" if gcp.private_nodes else "a cluster with public nodes"
        return [f"{_AUTHORIZED_KEY} lists {len(nets)} ranges; GKE takes at most {limit} on {kind}"]
    return []


_AUTHORIZED_KEY = "gpu-cluster:gcp.authorizedNetworks"
_AUTHORIZED_ENTRY = "{cidrBlock: <range>, displayName: <who>}"


def cluster_problems(s: Settings) -> list[str]:
    """What a stack that creates its GKE cluster must also say (a program that only adds pieces
    to an existing cluster, as examples/a3-mega-pool does, leaves these to that cluster): who
    may reach the control plane. No default is both safe and deployable."""
    if s.gcp is None or s.gcp.authorized_networks is not None:
        return []
    return [
        f"{_AUTHORIZED_KEY} is required: list the ranges allowed to reach the cluster's control "
        f"plane, each {_AUTHORIZED_ENTRY}: where `pulumi up` and kubectl run (VPN or office "
        "egress, CI runner); GKE refuses every other address. 0.0.0.0/0 opens it to the whole "
        "internet (authentication still applies)"
    ]


def _gke_version_problems(s: Settings, gcp: GcpSettings) -> list[str]:
    """Release channel, GKE version and GPUDirect release must be a combination Google supports
    today, and kubernetesVersion must name the minor the cluster runs."""
    out: list[str] = []
    version = gcp.min_master_version
    minor = gke_minor(version)
    key = f"gpu-cluster:gcp.minMasterVersion = {version!r}"
    supported = sorted(GKE_END_OF_STANDARD_SUPPORT)
    end = GKE_END_OF_STANDARD_SUPPORT.get(minor)
    today = _today()
    current = [f"1.{m}" for m in supported if GKE_END_OF_STANDARD_SUPPORT[m] >= today]
    if end is None:
        out.append(
            f"{key}: GKE 1.{minor} is not in this program's support table (known: 1.{supported[0]}"
            f"-1.{supported[-1]}); add its end of support to GKE_END_OF_STANDARD_SUPPORT in "
            "gpu_cluster/plan/gpudirect.py from Google's release schedule first"
        )
    elif end < today:
        out.append(
            f"{key}: GKE 1.{minor} left standard support on {end.isoformat()}; use one of "
            f"{', '.join(current) or 'a newer minor'} (README: moving a stack to a new release)"
        )
    if s.kubernetes_version != f"1.{minor}":
        out.append(
            f"gpu-cluster:kubernetesVersion = {s.kubernetes_version!r} must be '1.{minor}', the "
            f"minor of gcp.minMasterVersion {version!r} (the cluster is held on it)"
        )
    if gcp.hold_minor_upgrades and gcp.release_channel == "UNSPECIFIED":
        out.append(
            "gpu-cluster:gcp.releaseChannel = 'UNSPECIFIED': holdMinorUpgrades needs a release "
            "channel (GKE allows the NO_MINOR_OR_NODE_UPGRADES exclusion only on a channel); "
            "use 'REGULAR' or set holdMinorUpgrades to false"
        )
    if s.network_mode in GPUDIRECT_MODES:
        out.extend(_gpudirect_release_problems(s.network_mode, gcp, minor))
    if s.network_mode == "rdma":
        out.extend(_gib_release_problems(gcp, minor))
    rdma_machine = RDMA_MACHINES.get(gcp.machine_type)
    if (
        s.network_mode == "rdma"
        and rdma_machine is not None
        and _older_than(version, rdma_machine.min_gke)
    ):
        out.append(
            f"{key} is older than GPUDirect RDMA's minimum on {gcp.machine_type}: use "
            f"{rdma_machine.min_gke} or newer"
        )
    if gcp.provisioning == "flex-start" and _older_than(version, FLEX_START_MIN_GKE):
        out.append(f"{key} is older than flex-start's minimum: use {FLEX_START_MIN_GKE} or newer")
    floor = TCPXO_MIN_GKE.get(max(minor, min(TCPXO_MIN_GKE)))
    if (
        s.network_mode == "tcpxo"
        and floor
        and "-gke." in version
        and gke_version_key(version) < gke_version_key(floor)
    ):
        out.append(
            f"{key} is older than TCPXO's minimum for 1.{minor} on a3-megagpu-8g: "
            f"use {floor} or newer"
        )
    return out


def _gpudirect_release_problems(mode: str, gcp: GcpSettings, minor: int) -> list[str]:
    allowed = [k for k, r in RELEASES.items() if r.mode == mode]
    name = gcp.gpudirect_release
    if name is not None:
        release = RELEASES.get(name)
        if release is None or release.mode != mode:
            return [
                f"gpu-cluster:gcp.gpudirectRelease = {name!r} is not a known {mode} release; "
                f"allowed: {', '.join(map(repr, allowed))}"
            ]
        if not release.serves_gke_minor(minor):
            fits = " or ".join(map(repr, releases_for(mode, minor))) or "another GKE minor"
            return [
                f"gpu-cluster:gcp.gpudirectRelease = {name!r} is published for GKE "
                f"{release.gke_minors_text()}, not for gcp.minMasterVersion "
                f"{gcp.min_master_version!r}; use {fits}"
            ]
    elif not releases_for(mode, minor):
        return [
            f"gpu-cluster:gcp.minMasterVersion = {gcp.min_master_version!r}: no {mode} release "
            f"is published for GKE 1.{minor}; releases: "
            + ", ".join(f"{n} (GKE {RELEASES[n].gke_minors_text()})" for n in allowed)
        ]
    return []


def _older_than(version: str, floor: str) -> bool:
    """Whether a minMasterVersion is older than an exact GKE version; "1.N" stands for the
    newest patch of 1.N, so only a minor below the floor's is older."""
    exact = version if "-gke." in version else f"{version}.999-gke.999999999"
    return gke_version_key(exact) < gke_version_key(floor)


def _gib_release_problems(gcp: GcpSettings, minor: int) -> list[str]:
    name = gcp.gpudirect_release
    if name is not None:
        release = GIB_RELEASES.get(name)
        if release is None:
            return [
                f"gpu-cluster:gcp.gpudirectRelease = {name!r} is not a known gIB (rdma) release; "
                f"allowed: {', '.join(map(repr, GIB_RELEASES))}"
            ]
        if not release.serves_gke_minor(minor):
            return [
                f"gpu-cluster:gcp.gpudirectRelease = {name!r} is published for GKE "
                f"{release.gke_minors_text()}, not for gcp.minMasterVersion "
                f"{gcp.min_master_version!r}"
            ]
    elif not gib_releases_for(minor):
        return [
            f"gpu-cluster:gcp.minMasterVersion = {gcp.min_master_version!r}: no gIB release is "
            f"published for GKE 1.{minor}; releases: "
            + ", ".join(f"{n} (GKE {r.gke_minors_text()})" for n, r in GIB_RELEASES.items())
        ]
    return []


def _name_problems(s: Settings) -> list[str]:
    """`name` becomes the StatefulSet, Service and (GKE) cluster and VPC names."""
    out: list[str] = []
    limit, why = STATEFULSET_NAME_MAX, "the StatefulSet's controller-revision-hash pod label"
    if s.platform == "gke":
        limit, why = GKE_CLUSTER_NAME_MAX, "the GKE cluster name"
        longest = max(_GCP_NAME_SUFFIXES, key=len)
        if len(s.name) + len(longest) > GCP_NAME_MAX:
            out.append(
                f"gpu-cluster:name = {s.name!r}: the GCP resource name {s.name + longest!r} "
                f"exceeds {GCP_NAME_MAX} characters"
            )
    if len(s.name) > limit:
        out.append(
            f"gpu-cluster:name = {s.name!r} has {len(s.name)} characters; at most {limit} fit {why}"
        )
    return out


# Suffixes gke.py appends to `name` for VPCs, subnets, firewalls, router and policy; GPU VPCs
# counted as many as any release wires, so the limit holds whatever the stack's release (which
# may itself be in question when names are checked) and across mode switches.
_GCP_NAME_SUFFIXES = (
    "-host",
    "-host-internal",
    "-compact",
    *(f"-gpu{i}-internal" for i in range(1, max(r.nic_count for r in RELEASES.values()) + 1)),
    f"-rdma-{RDMA_NIC_COUNT - 1}",
)


def _verify_problems(s: Settings) -> list[str]:
    """Fabric-check settings that could never PASS."""
    out: list[str] = []
    v = s.verify
    if v.require_gdr and s.network_mode == "tcp":
        out.append(
            "gpu-cluster:verify.requireGdr: GPUDirect RDMA never shows on NCCL's socket "
            "transport (networkMode 'tcp'); remove it"
        )
    ceiling = GKE_FABRIC_GBPS.get(s.network_mode)
    if s.network_mode == "rdma" and s.rdma is not None:
        ceiling = NIC_LINE_RATE_GBPS * len(s.rdma.nics)
    expected = v.expected_busbw_gbps
    if expected is not None and ceiling is not None and expected > ceiling:
        out.append(
            f"gpu-cluster:verify.expectedBusbwGbps = {v.expected_busbw_gbps:g}: above the "
            f"{ceiling:g} GB/s the fabric's NICs can carry, so the check could never pass"
        )
    if v.max_bytes is not None and _size_bytes(v.max_bytes) < CHECK_MIN_BYTES:
        out.append(
            f"gpu-cluster:verify.maxBytes = {v.max_bytes!r}: the sweep starts at "
            f"{CHECK_MIN_BYTES} bytes; use at least {CHECK_MIN_BYTES}"
        )
    return out


def _size_bytes(text: str) -> int:
    """Bytes of a verify.maxBytes value (binary units, as the check script reads them)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text.rstrip("KMG")) * units.get(text[-1], 1)


def _rdma_problems(rdma: RdmaSettings, nodes: int) -> list[str]:
    out: list[str] = []
    for field, key in (
        ("machine_config_pool", "machineConfigPool"),
        ("machine_config", "machineConfig"),
    ):
        if field in rdma.model_fields_set and rdma.memlock != "machineconfig":
            out.append(
                f"gpu-cluster:rdma.{key} is only used with rdma.memlock 'machineconfig' "
                f"(it is {rdma.memlock!r}); remove it or set the strategy"
            )
    # Every pod network namespace has `lo` (containernetworking/plugins plugins/main/loopback).
    taken = {POD_PRIMARY_INTERFACE: "the pod's primary interface", "lo": "the pod's loopback"}
    taken.setdefault(rdma.bootstrap_interface, "rdma.bootstrapInterface (NCCL's bootstrap)")
    for i, nic in enumerate(rdma.nics):
        if nic.interface in taken:
            out.append(
                f"gpu-cluster:rdma.nics[{i}].interface = {nic.interface!r} is "
                f"{taken[nic.interface]}; name the RDMA interfaces net1, net2, ..."
            )
        # Whereabouts hands out the range's addresses minus network and broadcast
        # (k8snetworkplumbingwg/whereabouts pkg/allocate), one per pod.
        usable = max(ipaddress.IPv4Network(nic.subnet).num_addresses - 2, 0)
        if usable < nodes:
            out.append(
                f"gpu-cluster:rdma.nics[{i}].subnet {nic.subnet} has {usable} usable addresses "
                f"for {nodes} pods; use a larger range"
            )
    for attr, what in (("interface", "interface"), ("network", "network"), ("hca", "hca")):
        values = [getattr(nic, attr) for nic in rdma.nics if getattr(nic, attr) is not None]
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            out.append(
                f"gpu-cluster:rdma.nics: {what} {', '.join(dupes)} used by more than one NIC"
            )
    hcas = [nic.hca for nic in rdma.nics]
    if any(hcas) and not all(hcas):
        out.append("gpu-cluster:rdma.nics: give 'hca' for every NIC or for none (detected)")
    nets = [ipaddress.IPv4Network(nic.subnet) for nic in rdma.nics]
    for i, a in enumerate(nets):
        for j in range(i + 1, len(nets)):
            if a.overlaps(nets[j]):
                out.append(
                    f"gpu-cluster:rdma.nics[{j}].subnet {nets[j]} overlaps rdma.nics[{i}].subnet "
                    f"{a}: each NIC needs its own subnet"
                )
    return out


def gpudirect_release(s: Settings) -> GpuDirectRelease:
    """The GPUDirect release a tcpxo/tcpx stack runs (validated by the schema)."""
    assert s.gcp is not None and s.network_mode in GPUDIRECT_MODES
    return release_for(s.network_mode, s.gcp.gpudirect_release, gke_minor(s.gcp.min_master_version))


def gib_release(s: Settings) -> GibRelease:
    """The gIB release an rdma stack on GKE runs (validated by the schema)."""
    assert s.gcp is not None and s.network_mode == "rdma"
    name = s.gcp.gpudirect_release
    return GIB_RELEASES[name or gib_releases_for(gke_minor(s.gcp.min_master_version))[-1]]


def gpu_nic_count(s: Settings) -> int:
    """GPU NICs with a VPC each: the GPUDirect release's count, the second gVNIC of an RDMA
    machine, none for plain tcp."""
    if s.gcp is None:
        return 0
    if s.network_mode == "rdma":
        return 1
    if s.network_mode not in GPUDIRECT_MODES:
        return 0
    return gpudirect_release(s).nic_count


def rdma_nic_count(s: Settings) -> int:
    """RDMA NICs, each with a subnet of the one RoCE VPC (GKE rdma only)."""
    return RDMA_NIC_COUNT if s.gcp is not None and s.network_mode == "rdma" else 0


# --- loading and error reporting -------------------------------------------------------------


SECRET_ENV_KEY = "secretEnv"
CODE_SYNC_KEY = "codeSync"
# Namespaces a stack may hold besides the project's: the providers the program uses, and the
# engine's own (`pulumi:tags`, `pulumi:disable-default-providers`).
PROVIDER_NAMESPACES = ("kubernetes", "gcp", "pulumi")
# Namespaces whose near-misses are refused as typos (edit distance at most this); shorter
# names such as `gcp` have too many legitimate neighbours to guess.
_TYPO_DISTANCE = {PROJECT: 3, "kubernetes": 2}
# The engine carries numbers as IEEE doubles: larger integers would change on the way.
MAX_EXACT_INT = 2**53 - 1
# Top-level keys whose values may be Pulumi secrets: each reaches the cluster only through a
# Kubernetes Secret (workload.py). Every other key becomes names, specs or outputs in plain text.
SECRET_CAPABLE_KEYS = (SECRET_ENV_KEY, CODE_SYNC_KEY)
# Parts of a secret `codeSync` that cannot stay secret: the sidecar's image, and the name of a
# Secret the pod refers to; a secret codeSync leaves them at their defaults.
_CODE_SYNC_PLAIN_ONLY = ("image", "credentialsSecret")
SECRET_MASK = "[secret]"


def _edit_distance(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insertions, deletions, substitutions, swaps."""
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


def check_namespaces(keys: Iterable[str]) -> list[str]:
    """Warnings for config namespaces nothing reads; ConfigError for a key under a misspelt
    namespace of the project or its providers (the program would silently never see it)."""
    problems: list[str] = []
    ignored: dict[str, list[str]] = {}
    for key in sorted(keys):
        namespace = key.partition(":")[0]
        if namespace == PROJECT or namespace in PROVIDER_NAMESPACES:
            continue
        folded = re.sub(r"[-_.\s]", "", namespace.lower())
        meant = next(
            (
                known
                for known, limit in _TYPO_DISTANCE.items()
                if folded == known.replace("-", "")
                or _edit_distance(namespace.lower(), known) <= limit
            ),
            None,
        )
        if meant is not None:
            problems.append(
                f"{key}: namespace {namespace!r} is not {meant!r} (a typo?); "
                f"this key would be ignored, write it as {meant}:{key.partition(':')[2]}"
            )
        else:
            ignored.setdefault(namespace, []).append(key)
    if problems:
        raise ConfigError("invalid stack config:\n  " + "\n  ".join(problems))
    read = ", ".join((PROJECT, *PROVIDER_NAMESPACES))
    return [
        f"{', '.join(found)}: namespace {namespace!r} is not read by this program or its "
        f"providers ({read}); ignored"
        for namespace, found in ignored.items()
    ]


def _numbers_out_of_range(value: Any, path: str) -> list[str]:
    if isinstance(value, bool):
        return []
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{PROJECT}:{path}: not a finite number"]
    if isinstance(value, (int, float)) and abs(value) > MAX_EXACT_INT:
        return [f"{PROJECT}:{path}: number too large (at most 2^53 - 1, the engine's exact range)"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _numbers_out_of_range(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _numbers_out_of_range(v, f"{path}[{i}]")]
    return []


def _secret_problems(config: Mapping[str, Any], secret: Collection[str]) -> list[str]:
    """Secret keys the program cannot keep secret, and credentials in plain config."""
    out: list[str] = []
    for key in sorted(secret):
        if key not in config:
            continue
        if key not in SECRET_CAPABLE_KEYS:
            out.append(
                f"{PROJECT}:{key} is set as a secret, but its value becomes resource names, "
                f"specs or outputs in plain text; set it without --secret (keys that may be "
                f"secret: {', '.join(SECRET_CAPABLE_KEYS)})"
            )
        elif key == CODE_SYNC_KEY and isinstance(config[key], dict):
            out.extend(
                f"{PROJECT}:{CODE_SYNC_KEY}.{part} cannot be secret (it names an image or a "
                f"Secret the pod refers to); leave it out of a secret {CODE_SYNC_KEY}"
                for part in _CODE_SYNC_PLAIN_ONLY
                if part in config[key]
            )
    code_sync = config.get(CODE_SYNC_KEY)
    if CODE_SYNC_KEY not in secret and isinstance(code_sync, dict):
        repo = code_sync.get("repo")
        if isinstance(repo, str) and _url_credentials(repo):
            out.append(
                f"{PROJECT}:{CODE_SYNC_KEY}.repo holds credentials in plain text (value not "
                f"shown); set it with `pulumi config set --secret --path {CODE_SYNC_KEY}.repo URL`"
                f" or use {CODE_SYNC_KEY}.credentialsSecret"
            )
    if SECRET_ENV_KEY in config and SECRET_ENV_KEY not in secret:
        out.append(
            f"{PROJECT}:{SECRET_ENV_KEY} holds tokens in plain text; "
            f"set each with `pulumi config set --secret --path {SECRET_ENV_KEY}.NAME`"
        )
    return out


def _url_credentials(url: str) -> bool:
    """Whether a repository URL carries a password or token (`https://user:token@host/...`,
    `https://token@host/...`); ssh's `git@host` names a user, not a credential."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return False
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    return bool(at) and (scheme != "ssh" or ":" in userinfo)


def decode_config(raw: Mapping[str, Any], secret_keys: Collection[str] = ()) -> dict[str, Any]:
    """Turn Pulumi's config map (strings, objects as JSON text) into plain values.

    `raw` maps keys without the project prefix to what the engine hands the program: every
    value is a string and structured values are JSON text; `secret_keys` are fully qualified.
    Refuses secret keys the program would show in plain text, credentials outside secrets and
    numbers the engine cannot carry. `secretEnv` keeps only its names (so no error message can
    ever echo a token).
    """
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, str) and value[:1] in ("{", "["):
            # Malformed JSON stays a string; the schema then says what it should be.
            with contextlib.suppress(json.JSONDecodeError, ValueError):
                value = json.loads(value)
        out[key] = value
    secret = _secret_top_keys(secret_keys)
    problems = _secret_problems(out, secret)
    problems += [p for key, value in out.items() for p in _numbers_out_of_range(value, key)]
    if problems:
        raise ConfigError("invalid stack config:\n  " + "\n  ".join(problems))
    if SECRET_ENV_KEY in out:
        names = out[SECRET_ENV_KEY]
        out[SECRET_ENV_KEY] = sorted(names) if isinstance(names, dict) else names
    return out


def _secret_top_keys(secret_keys: Collection[str]) -> frozenset[str]:
    prefix = PROJECT + ":"
    return frozenset(k[len(prefix) :] for k in secret_keys if k.startswith(prefix))


def load_settings(raw: Mapping[str, Any], secret_keys: Collection[str] = ()) -> Settings:
    """Validate decoded stack config; raise ConfigError naming every bad key. Values of
    `secret_keys` (fully qualified) never appear in a message."""
    secret = _secret_top_keys(secret_keys)
    # decode_config left only secretEnv's names, which are not secret.
    masked = secret - {SECRET_ENV_KEY}
    try:
        settings = Settings.model_validate(dict(raw))
    except ValidationError as exc:
        message = _format_errors(exc, masked)
        for value in _leaves([raw[k] for k in masked if k in raw]):
            message = message.replace(value, SECRET_MASK)
        raise ConfigError(message) from None
    problems = cluster_problems(settings)
    if problems:
        raise ConfigError("invalid stack config:\n  " + "\n  ".join(problems))
    settings._secret_keys = secret  # set once, right after validation
    return settings


def _leaves(value: Any) -> list[str]:
    """Every non-empty string inside `value`, longest first (so no part of one stays). Other
    scalars are masked where the message names their key (_format_errors)."""
    if isinstance(value, dict):
        found = [leaf for v in value.values() for leaf in _leaves(v)]
    elif isinstance(value, list):
        found = [leaf for v in value for leaf in _leaves(v)]
    else:
        found = [value] if isinstance(value, str) and value else []
    return sorted(set(found), key=len, reverse=True)


def _key_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith(("function-after", "literal", "int", "str", "tagged-union")):
            continue  # pydantic's union-branch names, not keys
        else:
            path += ("." if path else "") + part
    return path


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    model: type[BaseModel] | None = Settings
    for part in loc[:-1]:
        if model is None or isinstance(part, int):
            continue
        field = next((f for f in model.model_fields.values() if f.alias == part), None)
        model = nested_model(field.annotation) if field else None
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The settings section a field's annotation holds (through Optional, tuple, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = nested_model(arg)
        if found:
            return found
    return None


# Longer values are clipped in messages: the key and the start of the value are what help.
_MAX_SHOWN = 80


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _format_errors(exc: ValidationError, secret: Collection[str] = ()) -> str:
    lines = []
    for err in exc.errors():
        loc = err["loc"]
        key = _key_path(loc)
        shown = SECRET_MASK if loc and loc[0] in secret else _shown(err["input"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(_allowed_keys(loc))
            lines.append(f"{PROJECT}:{key}: unknown key (a typo?); allowed here: {allowed}")
        elif not key:
            lines.extend(msg.split("\n"))
        elif err["type"] == "missing":
            lines.append(f"{PROJECT}:{key}: required but not set")
        elif isinstance(err["input"], dict):
            lines.append(f"{PROJECT}:{key}: {msg}")
        else:
            lines.append(f"{PROJECT}:{key} = {shown}: {msg}")
    unique = list(dict.fromkeys(lines))
    return "invalid stack config:\n  " + "\n  ".join(unique)
