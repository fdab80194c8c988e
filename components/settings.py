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
import re
from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components.gcp_network import plan_addresses
from components.gpudirect import DEFAULT_RELEASE, RELEASES, TCPXO_MIN_GKE, gke_version_key

PROJECT = "gpu-cluster"

Platform = Literal["openshift", "gke"]
NetworkMode = Literal["tcp", "rdma", "tcpxo", "tcpx"]

# apps.kubernetes.io/pod-index pod label: beta (on by default) in Kubernetes 1.28.
MIN_KUBERNETES_MINOR = 28
# Native sidecars (init containers with restartPolicy Always): on by default from 1.29.
NATIVE_SIDECAR_MINOR = 29

# Which network modes each platform offers.
MODES_BY_PLATFORM: dict[str, tuple[str, ...]] = {
    "openshift": ("tcp", "rdma"),
    "gke": ("tcpxo", "tcpx", "tcp"),
}


class ConfigError(ValueError):
    """Stack config that cannot be deployed; the message names every offending key."""


# --- value types ---------------------------------------------------------------------------

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_IMAGE = re.compile(
    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$"
)
_RESOURCE_NAME = re.compile(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def _quantity(value: str) -> str:
    if not _QUANTITY.match(value):
        raise ValueError("must be a Kubernetes quantity such as 64Gi, 500Mi or 32")
    return value


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(
            "must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter, "
            "at most 63 characters"
        )
    return value


def _node_name(value: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError("must be a Kubernetes node name (lower-case DNS subdomain)")
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


Quantity = Annotated[str, AfterValidator(_quantity)]
DnsLabel = Annotated[str, AfterValidator(_dns_label)]
NodeName = Annotated[str, AfterValidator(_node_name)]
Image = Annotated[str, AfterValidator(_image)]
ResourceName = Annotated[str, AfterValidator(_resource_name)]
Cidr = Annotated[str, AfterValidator(_cidr)]
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


class StorageSettings(_Model):
    """Workspace and datasets volumes: shared RWX claims or one claim per pod."""

    mode: Literal["rwx", "per-pod"] = "rwx"
    storage_class: str | None = None
    workspace_size: Quantity = "100Gi"
    datasets_size: Quantity | None = "500Gi"
    # User data outlives `pulumi destroy` unless the stack opts out explicitly.
    retain_on_delete: bool = True


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
    subnet: Cidr
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
    credentials_secret: DnsLabel | None = None
    # kubernetes/git-sync release (registry.k8s.io/git-sync/git-sync).
    image: Image = "registry.k8s.io/git-sync/git-sync:v4.5.0"


class VerifySettings(_Model):
    """The built-in fabric check (all-reduce bandwidth + transport) shipped to every pod."""

    enabled: bool = True
    # PASS threshold for bus bandwidth at the largest size; None = the mode's sourced default.
    expected_busbw_gbps: float | None = Field(default=None, gt=0)
    max_bytes: str = Field(default="1G", pattern=r"^[0-9]+[KMG]?$")
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
    gpu_node_label: str = "nvidia.com/gpu.present"


MACHINE_GPUS: dict[str, int] = {
    # GCP accelerator-optimized machine families (reference/gcp-a3-gpudirect.md).
    "a3-megagpu-8g": 8,
    "a3-highgpu-8g": 8,
}


class GcpSettings(_Model):
    project: str = Field(pattern=r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
    region: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]$")
    zone: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]-[a-z]$")
    machine_type: Literal["a3-megagpu-8g", "a3-highgpu-8g"] = "a3-megagpu-8g"
    provisioning: Literal["on-demand", "spot", "reservation"] = "on-demand"
    reservation: str | None = None
    maintenance_interval: Literal["AS_NEEDED", "PERIODIC"] | None = None
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "UNSPECIFIED"] = "RAPID"
    min_master_version: str = Field(
        default="1.32.11-gke.1174000", pattern=r"^1\.\d+\.\d+-gke\.\d+$"
    )
    base_cidr: Cidr = "10.0.0.0/8"
    deletion_protection: bool = True
    private_nodes: bool = True
    # Own compact ResourcePolicy with this max distance; None = pool's built-in COMPACT placement.
    placement_max_distance: int | None = Field(default=None, ge=1, le=3)
    # Pinned GPUDirect release (installer, RxDM sidecar, NCCL settings); None = newest known.
    gpudirect_release: str | None = None

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
        return self


class Settings(_Model):
    """Root of the stack config: one field per top-level `gpu-cluster:<key>`."""

    platform: Platform
    name: DnsLabel = "gpu-cluster"
    namespace: DnsLabel = "gpu-cluster"
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

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def preflight(self) -> bool:
        if self.verify.preflight is not None:
            return self.verify.preflight
        return self.network_mode == "rdma"

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
    if s.network_mode == "rdma" and s.rdma is None:
        out.append("gpu-cluster:rdma is required when networkMode is 'rdma' (the NIC list)")
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
    if s.network_mode in ("tcpxo", "tcpx") and minor < NATIVE_SIDECAR_MINOR:
        out.append(
            f"gpu-cluster:kubernetesVersion = {s.kubernetes_version!r}: networkMode "
            f"{s.network_mode!r} runs its daemon as a native sidecar, which needs "
            f"1.{NATIVE_SIDECAR_MINOR} or newer"
        )
    lo, hi = s.elastic_range
    if not lo <= s.nodes <= hi:
        out.append(
            f"gpu-cluster:launcher.minNodes/maxNodes = {lo}:{hi} must satisfy "
            f"minNodes <= nodes ({s.nodes}) <= maxNodes"
        )
    if s.rdma is not None:
        out.extend(_rdma_problems(s.rdma))
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


# Network mode -> machine type it needs on GKE (reference/gcp-a3-gpudirect.md).
_GKE_MODE_MACHINE = {"tcpxo": "a3-megagpu-8g", "tcpx": "a3-highgpu-8g"}


def _gke_problems(s: Settings, gcp: GcpSettings) -> list[str]:
    out: list[str] = []
    needed = _GKE_MODE_MACHINE.get(s.network_mode)
    if needed and gcp.machine_type != needed:
        out.append(
            f"gpu-cluster:networkMode = {s.network_mode!r} needs gcp.machineType {needed!r}, "
            f"not {gcp.machine_type!r}"
        )
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
    if gcp.gpudirect_release is not None:
        release = RELEASES.get(gcp.gpudirect_release)
        allowed = [k for k, r in RELEASES.items() if r.mode == s.network_mode]
        if release is None or release.mode != s.network_mode:
            out.append(
                f"gpu-cluster:gcp.gpudirectRelease = {gcp.gpudirect_release!r} is not a known "
                f"{s.network_mode} release; allowed: {', '.join(map(repr, allowed)) or 'none'}"
            )
            return out
    minor = gke_version_key(gcp.min_master_version)[1]
    floor = TCPXO_MIN_GKE.get(minor)
    if minor < min(TCPXO_MIN_GKE):
        floor = TCPXO_MIN_GKE[min(TCPXO_MIN_GKE)]
    if (
        s.network_mode == "tcpxo"
        and floor
        and gke_version_key(gcp.min_master_version) < gke_version_key(floor)
    ):
        out.append(
            f"gpu-cluster:gcp.minMasterVersion = {gcp.min_master_version!r} is older than "
            f"TCPXO's minimum for 1.{minor} on a3-megagpu-8g: use {floor} or newer"
        )
    if int(s.kubernetes_version.split(".")[1]) < minor:
        out.append(
            f"gpu-cluster:kubernetesVersion = {s.kubernetes_version!r} is older than "
            f"gcp.minMasterVersion {gcp.min_master_version!r}; set it to 1.{minor} or newer"
        )
    try:
        plan_addresses(gcp.base_cidr, gpu_nic_count(s))
    except ValueError as exc:
        out.append(f"gpu-cluster:gcp.baseCidr = {gcp.base_cidr!r}: {exc}")
    return out


def _rdma_problems(rdma: RdmaSettings) -> list[str]:
    out: list[str] = []
    if "machine_config_pool" in rdma.model_fields_set and rdma.memlock != "machineconfig":
        out.append(
            f"gpu-cluster:rdma.machineConfigPool is only used with rdma.memlock 'machineconfig' "
            f"(it is {rdma.memlock!r}); remove it or set the strategy"
        )
    for attr, what in (("interface", "interface"), ("network", "network")):
        values = [getattr(nic, attr) for nic in rdma.nics]
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


def gpu_nic_count(s: Settings) -> int:
    """GPU NICs wired into the pods: the GPUDirect release's count, none for plain tcp."""
    if s.network_mode not in DEFAULT_RELEASE or s.gcp is None:
        return 0
    return RELEASES[s.gcp.gpudirect_release or DEFAULT_RELEASE[s.network_mode]].nic_count


# --- loading and error reporting -------------------------------------------------------------


SECRET_ENV_KEY = "secretEnv"


def decode_config(raw: Mapping[str, Any], secret_keys: Collection[str] = ()) -> dict[str, Any]:
    """Turn Pulumi's config map (strings, objects as JSON text) into plain values.

    `raw` maps keys without the project prefix to what the engine hands the program: every
    value is a string and structured values are JSON text. `secretEnv` keeps only its names
    (so no error message can ever echo a token) and must have been set with `--secret`.
    """
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, str) and value[:1] in ("{", "["):
            # Malformed JSON stays a string; the schema then says what it should be.
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(value)
        out[key] = value
    if SECRET_ENV_KEY in out:
        if f"{PROJECT}:{SECRET_ENV_KEY}" not in secret_keys:
            raise ConfigError(
                f"invalid stack config:\n  {PROJECT}:{SECRET_ENV_KEY} holds tokens in plain text; "
                f"set each with `pulumi config set --secret --path {SECRET_ENV_KEY}.NAME`"
            )
        names = out[SECRET_ENV_KEY]
        out["secretEnv"] = sorted(names) if isinstance(names, dict) else names
    return out


def load_settings(raw: Mapping[str, Any]) -> Settings:
    """Validate decoded stack config; raise ConfigError naming every bad key."""
    try:
        return Settings.model_validate(dict(raw))
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc)) from None


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
        model = _model_of(field.annotation) if field else None
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found:
            return found
    return None


def _format_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = err["loc"]
        key = _key_path(loc)
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
            lines.append(f"{PROJECT}:{key} = {err['input']!r}: {msg}")
    unique = list(dict.fromkeys(lines))
    return "invalid stack config:\n  " + "\n  ".join(unique)
