"""The one schema of stack config.

Every key a user may write in `Pulumi.<stack>.yaml` (under the `gpu-cluster:` namespace) is a
field here, spelled as in the stack file (camelCase). Declarations only: each key's type,
default and values alone. Rules across keys live in rules.py and gke.py, and run where the config
is loaded: `validate_settings` holds the values to both, `load_settings` turns the raw config map
into a validated, frozen `Settings` tree or raises `ConfigError` naming the key, the bad value and
what is allowed (loading.py). Nothing in this layer imports Pulumi: it is unit-testable on its
own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, model_validator

from gpu_cluster.config.base import Section
from gpu_cluster.config.netmodes import find_mode
from gpu_cluster.config.reads import VERIFY_ENABLED, ReadWhen
from gpu_cluster.config.storage import StorageSettings
from gpu_cluster.config.values import (
    Cidr,
    CpuQuantity,
    DnsLabel,
    EnvName,
    HealthCheck,
    HostInterface,
    Image,
    Interface,
    JobSetVersion,
    KueueVersion,
    LabelKey,
    LogPattern,
    MachineType,
    Namespace,
    NetworkMode,
    NodeName,
    PrivateCidr,
    Quantity,
    ResourceName,
    Subdomain,
    SweepSize,
    SyncPeriod,
)
from gpu_cluster.config.workload import installs_controllers
from gpu_cluster.facts.gcp import FLEX_START_MAX_SECONDS, RESERVATION_PATTERN
from gpu_cluster.facts.health import DCGM_IMAGE, DCGM_LEVEL, GPU_CHECK
from gpu_cluster.facts.kubernetes import POD_START_MINUTES, resource_quantity
from gpu_cluster.facts.kueue import (
    HEALTH_GATE_IMAGE,
    JOBSET_CHART_VERSION,
    KUEUE_CHART_VERSION,
    TOPOLOGY_LEVELS_MAX,
)
from gpu_cluster.facts.machines import MACHINES, Provisioning
from gpu_cluster.facts.ngc import DEFAULT_TRAINING_IMAGE

PROJECT = "gpu-cluster"

Platform = Literal["openshift", "gke"]


def _gcp(s: Settings) -> GcpSettings:
    assert s.gcp is not None  # a GcpSettings field is read only inside gcp
    return s.gcp


def _mode_reads(s: Settings, section: str) -> bool:
    """Whether the stack's network mode reads its own section `section` (`tcp`, `rdma`)."""
    mode = find_mode(s.platform, s.network_mode)
    return mode is not None and mode.section == section


def _reads_release(s: Settings) -> bool:
    mode = find_mode(s.platform, s.network_mode)
    return mode is not None and mode.reads_release


def _transport(s: Settings) -> str | None:
    mode = find_mode(s.platform, s.network_mode)
    return mode.transport if mode is not None else None


# Keys read only in some configurations (reads.py); the predicates get the whole config.
_NAD_FIELD = ReadWhen(
    lambda s: s.rdma is not None and s.rdma.network_attachments != "reference",
    "rdma.networkAttachments is 'create' or 'adopt' (they describe the "
    "NetworkAttachmentDefinition, which a stack that references it does not render)",
)
_MACHINECONFIG = ReadWhen(
    lambda s: s.rdma is not None and s.rdma.memlock == "machineconfig",
    "rdma.memlock is 'machineconfig'",
)
_CHECK = VERIFY_ENABLED
_AWAITED = ReadWhen(
    lambda s: (
        s.workload.kind == "statefulset" or (s.platform == "openshift" and s.openshift.pre_pull)
    ),
    "workload.kind is 'statefulset' or openshift.prePull is true (`pulumi up` awaits no pods "
    "otherwise)",
)


# --- sections --------------------------------------------------------------------------------


class PodSettings(Section):
    """Per-pod compute resources of the training container."""

    cpu_request: CpuQuantity = "32"
    """Training container CPU request, a quantity (a plain number too); <= `pod.cpuLimit`."""
    memory_request: Quantity = "128Gi"
    """Memory request (<= `pod.memoryLimit`)."""
    cpu_limit: CpuQuantity | None = None
    """CPU limit (unset: none)."""
    memory_limit: Quantity = "256Gi"
    """Memory limit."""
    # NCCL and the PyTorch dataloader use /dev/shm; the 64 MiB container default breaks them.
    shm_size: Quantity = "64Gi"
    """Size of the memory-backed `/dev/shm`."""

    @model_validator(mode="after")
    def _requests_within_limits(self) -> PodSettings:
        # The API server refuses a request above its limit (kubernetes/kubernetes
        # pkg/apis/core/validation ValidateResourceRequirements: "must be less than or equal to").
        for resource, request, limit in (
            ("cpu", self.cpu_request, self.cpu_limit),
            ("memory", self.memory_request, self.memory_limit),
        ):
            if limit is not None and resource_quantity(request) > resource_quantity(limit):
                raise ValueError(
                    f"{resource}Request {request} is above {resource}Limit {limit}; Kubernetes "
                    "refuses a request larger than its limit"
                )
        return self


class DeepSpeedSettings(Section):
    zero_stage: Literal[0, 1, 2, 3] = 2
    """ZeRO stage in `ds_config.json`."""
    precision: Literal["bf16", "fp16", "fp32"] = "bf16"
    """Mixed precision."""
    micro_batch_size: int = Field(default=4, ge=1)
    """Per-GPU micro batch."""
    gradient_accumulation_steps: int = Field(default=1, ge=1)
    """Gradient accumulation."""
    offload_optimizer: bool = False
    """ZeRO optimizer offload to CPU."""


class LauncherSettings(Section):
    kind: Literal["torchrun", "deepspeed"] = "torchrun"
    """What `launchCommand` starts."""
    # Elastic range for torchrun (--nnodes=min:max); both default to `nodes`.
    min_nodes: int | None = Field(default=None, ge=1)
    """Lower end of the torchrun elastic range (`--nnodes=min:max`); unset: `nodes`."""
    max_nodes: int | None = Field(default=None, ge=1)
    """Upper end of the torchrun elastic range (`--nnodes=min:max`); unset: `nodes`."""
    max_restarts: int = Field(default=0, ge=0, le=100)
    """torchrun `--max-restarts`."""
    master_port: int = Field(default=29500, ge=1024, le=65535)
    """Rendezvous port on pod 0."""
    first_step_pattern: LogPattern | None = None
    """A line the training prints at its first step, as a Python regular expression matched
    anywhere in the line (e.g. `^step 1\\b` or `'loss': `): `timelineCommand`'s `first step` is
    when pod 0's training container first printed such a line. Unset: no such phase (the
    program cannot tell a step from the training's output by itself).
    """
    deepspeed: DeepSpeedSettings = DeepSpeedSettings()
    """`ds_config.json` settings (`launcher.kind: deepspeed`, or a script that calls
    `deepspeed.initialize`).
    """


_JOBSET = ReadWhen(lambda s: s.workload.kind == "jobset", "workload.kind is 'jobset'")


_CREATED_QUEUE = ReadWhen(
    lambda s: s.workload.queue.mode == "create", "workload.queue.mode is 'create'"
)
_GATED = ReadWhen(
    lambda s: s.workload.queue.health_gate.enabled, "workload.queue.healthGate.enabled is true"
)


_RUNNING_GPU_CHECK = ReadWhen(
    lambda s: (
        s.workload.queue.health_gate.enabled
        and s.workload.queue.health_gate.runner.enabled
        and GPU_CHECK in s.workload.queue.health_gate.checks
    ),
    "workload.queue.healthGate.runner.enabled is true and healthGate.checks lists gpu",
)


class HealthRunnerSettings(Section):
    """The stack's own health runner: it runs the GPU and NCCL checks on the stack's GPU nodes
    and labels them as cluster-health-scanner does (docs/operations.md, "Node health gate")."""

    enabled: bool = False
    """`true`: a controller in the namespace runs the checks of `checks` it knows on the
    stack's GPU nodes whose last result is older than half of `maxAgeHours` (or missing), when
    their GPUs are free, and labels each node with the result; a failed node is also tainted
    (`aiinfra/<check>-healthcheck=failed:NoSchedule`). `gpu`: DCGM diagnostics on each node.
    `nccl`: the fabric check (`verify`'s thresholds) in pods like the training pods, on two nodes
    at once; a pair that fails is checked again, each node with one that passed, to find the
    bad one. It may patch nodes, and an admission policy the stack creates lets it change
    nothing on a node but those labels and taints. `false`: something else
    (cluster-health-scanner) runs the checks."""
    dcgm_level: Annotated[Literal[1, 2, 3, 4], _RUNNING_GPU_CHECK] = DCGM_LEVEL
    """DCGM diagnostics' run level: 1 seconds, 2 about two minutes, 3 about 15, 4 longer."""
    dcgm_image: Annotated[Image, _RUNNING_GPU_CHECK] = DCGM_IMAGE
    """The image the GPU check runs in: NVIDIA's DCGM image (`nv-hostengine`, `dcgmi`, bash),
    of the host engine's DCGM release."""
    # None: the platform's (dcgm_host_engine_of); "own": nv-hostengine in the check's pod.
    dcgm_host_engine: Annotated[Literal["own"] | Subdomain | None, _RUNNING_GPU_CHECK] = None
    """The DCGM host engine the GPU check's `dcgmi diag` runs on: a host name or address (port
    5555), or `own`: the check starts one in its pod, unprivileged (some diagnostics need root).
    Unset: on OpenShift `nvidia-dcgm.nvidia-gpu-operator.svc`, the GPU Operator's (ClusterPolicy
    `dcgm.enabled`), whose Service sends each pod to its own node's; on GKE `own`. A check that
    cannot reach it, or that DCGM could not run, leaves the node untainted (docs/operations.md,
    "Node health gate")."""


class HealthGateSettings(Section):
    """The node health gate: a Kueue admission check that admits a run only onto nodes that
    passed health checks recently (docs/operations.md, "Node health gate")."""

    enabled: bool = False
    """`true`: the stack's ClusterQueue gets the admission check, and a small controller in the
    namespace answers it from the nodes' health-check labels; a run placed on a node that lacks
    a pass of every check in `checks` within `maxAgeHours` is held (Kueue tries it again after
    `retrySeconds`). Something must run the checks and label the nodes: the stack's own
    `runner` (the `gpu` and `nccl` checks), or on GKE cluster-health-scanner's health runner.
    Needs node-level placement (a Topology).
    """
    checks: Annotated[tuple[HealthCheck, ...], _GATED, Field(min_length=1)] = ("gpu", "nccl")
    """The checks every node of a run must have passed (cluster-health-scanner's: `gpu` DCGM
    diagnostics, `nccl` pairwise all_gather bandwidth, `neper` NIC throughput)."""
    max_age_hours: Annotated[int, _GATED, Field(ge=1, le=720)] = 24
    """How old a pass may be, 1..720."""
    retry_seconds: Annotated[int, _GATED, Field(ge=10, le=86400)] = 600
    """How long Kueue waits before trying a held run again, 10..86400."""
    image: Annotated[Image, _GATED] = HEALTH_GATE_IMAGE
    """The image the controller's script runs in: any with Python 3.11 or later."""
    runner: Annotated[HealthRunnerSettings, _GATED] = HealthRunnerSettings()
    """Whether the stack runs the `gpu` and `nccl` checks itself."""


class QueueSettings(Section):
    """The Kueue queue a JobSet waits in (`workload.kind: jobset`)."""

    # create: the stack creates the queue; reference: the platform team's LocalQueue exists.
    mode: Literal["create", "reference"] = "create"
    """`create`: the stack creates a ClusterQueue whose quota is its `nodes` GPU nodes (one run
    at a time: a second one waits), a ResourceFlavor for its GPU nodes, a Topology when
    placement levels are known (GKE, or `workload.queue.topologyLevels`) and the namespace's
    LocalQueue; cluster-scoped ones are named after `name`. `reference`: the LocalQueue
    `workload.queue.name` exists in the namespace and the stack creates none of them.
    """
    name: DnsLabel | None = None
    """The LocalQueue's name; unset: `name`."""
    topology_levels: Annotated[
        tuple[LabelKey, ...] | None,
        _CREATED_QUEUE,
        Field(min_length=1, max_length=TOPOLOGY_LEVELS_MAX - 1),
    ] = None
    """Node labels of the placement levels, broadest first (e.g. `[example.com/rack]`); the
    node (`kubernetes.io/hostname`) is always the last level, added by the stack (a Kueue
    Topology holds at most 16 levels, so at most 15 here). Unset: on GKE Compute Engine's
    block, sub-block and host (cluster-toolkit's `gke-default`), except on a flex-start pool,
    which starts empty; on OpenShift none (no topology-aware placement).
    """
    required_level: LabelKey | None = None
    """All pods of a run land in one domain of this level (Kueue's
    `podset-required-topology`); one of the levels. Unset: the block on GKE, the first level of
    `workload.queue.topologyLevels` on OpenShift. With `mode: reference`, a level of the
    referenced queue's Topology.
    """
    health_gate: Annotated[
        HealthGateSettings,
        _CREATED_QUEUE,
    ] = HealthGateSettings()
    """The node health gate on the stack's queue."""


_INSTALLED = ReadWhen(installs_controllers, "the stack installs Kueue and JobSet")


class ControllerSettings(Section):
    """Kueue and JobSet, the controllers a JobSet stack's runs need in the cluster."""

    install: bool | None = None
    """`true`: the stack installs both from their upstream Helm charts (GKE only), JobSet in
    `jobset-system`, then Kueue in `kueue-system`, each as the chart's defaults set it up, and
    creates the queue once they run. `false`: both already run in the cluster, and the stack
    reads first that they serve its APIs (a queue it references: that it exists). Unset: `true` on
    GKE (the stack's own cluster has neither), `false` on OpenShift (Red Hat's operators install
    them there; docs/operations.md, "Training as a JobSet").
    """
    kueue_version: Annotated[KueueVersion, _INSTALLED] = KUEUE_CHART_VERSION
    """Kueue's chart version (its release, without `v`); 0.15.0 or later."""
    jobset_version: Annotated[JobSetVersion, _INSTALLED] = JOBSET_CHART_VERSION
    """JobSet's chart version (its release, without `v`); 0.10.1 or later."""


class WorkloadSettings(Section):
    """What runs the training pods: a StatefulSet a person starts training in, or a JobSet
    queued by Kueue that starts it by itself."""

    kind: Literal["statefulset", "jobset"] = "statefulset"
    """`statefulset`: idle pods, training started with `launchCommand` (per-pod storage
    possible). `jobset`: one JobSet (JobSet and Kueue must run in the cluster) admitted by
    Kueue, whose pods run the launcher with `workload.command` and restart together on a
    failure; no session needs to stay open. See docs/operations.md, "Training as a JobSet".
    New stacks run `jobset` (`gpu-cluster new` writes it); unset is `statefulset`, the kind of
    stacks written before JobSets, with a warning until the stack states it.
    """
    command: Annotated[tuple[str, ...], _JOBSET] = ()
    """Required with `jobset`: the training script and its arguments, run by the launcher
    (`launcher.kind`) on every pod, e.g. `[/workspace/train.py, --epochs, "3"]`.
    """
    max_restarts: Annotated[int, _JOBSET] = Field(default=0, ge=0, le=1000)
    """How often the JobSet restarts all its pods after one fails (JobSet
    `failurePolicy.maxRestarts`; not torchrun's `launcher.maxRestarts`, which restarts workers
    inside the pods). A launcher's configuration error (exit 78) fails the run at once.
    """
    queue: Annotated[QueueSettings, _JOBSET] = QueueSettings()
    """The Kueue queue."""
    controllers: Annotated[ControllerSettings, _JOBSET] = ControllerSettings()
    """Whether the stack installs Kueue and JobSet, and which releases."""
    start_timeout_minutes: Annotated[int, _AWAITED] = Field(
        default=POD_START_MINUTES, ge=1, le=24 * 60
    )
    """How long `pulumi up` waits for the StatefulSet's pods (`statefulset`) and the pre-pull
    DaemonSet's (`openshift.prePull`) to run before it fails; a second `pulumi up` carries on
    from there. Each new node first pulls the whole training image: raise it for images that
    take longer.
    """


# An SR-IOV VF flag as a SriovNetwork spells it (k8snetworkplumbingwg/sriov-network-operator
# api/v1/sriovnetwork_types.go at 249e200: spoofChk and trust, enum on/off).
OnOff = Literal["on", "off"]


class NicSettings(Section):
    """One RDMA NIC as the pod sees it (net1..netN) and how Multus attaches it."""

    interface: Interface
    """Pod interface (`net1`...): an interface name of 1..15 letters, digits, `_`, `.`, `-`."""
    network: Subdomain  # NetworkAttachmentDefinition name (a custom resource's: DNS subdomain)
    """NetworkAttachmentDefinition name (a DNS-1123 subdomain)."""
    flavour: Literal["sriov", "macvlan", "host-device"]
    """CNI plugin."""
    resource: ResourceName  # device-plugin resource the pod requests for this NIC
    """Device-plugin resource, an extended resource `<domain>/<name>`, not `kubernetes.io/`:
    one of its own per sriov or host-device NIC (`openshift.io/eno5np0rdma`,
    `nvidia.com/hostdev_eno5np0`); macvlan NICs may share one (`rdma/rdma_shared_device_a`).
    """
    # The NetworkAttachmentDefinition's IPAM range and routes: required of a stack that creates or
    # adopts the NADs, unread when it only references them (rules.py).
    subnet: Annotated[PrivateCidr | None, _NAD_FIELD] = None
    """Whereabouts range, a private CIDR (one per NIC, non-overlapping, an address per pod);
    required unless `rdma.networkAttachments: reference` (a referenced NAD has its own).
    """
    routes: Annotated[tuple[Cidr, ...], _NAD_FIELD] = ()
    """Extra routes via this NIC, a list of CIDRs (not with `networkAttachments: reference`)."""
    # Host interface for macvlan (its parent) or host-device (the device moved into the pod).
    master: Annotated[HostInterface | None, _NAD_FIELD] = None
    """Parent host interface (any name the kernel allows): macvlan only, required for it unless
    `networkAttachments: reference` (sriov and host-device get the allocated device from
    `resource`).
    """
    # The VF's spoof check and trust mode, as a SriovNetwork's spoofChk and trust. Unset leaves
    # them out of the NAD, as the operator renders an unset field, and sriov-cni then leaves the
    # VF's flags as they are (k8snetworkplumbingwg/sriov-network-operator api/v1/helper.go
    # RenderNetAttDef at 249e200; k8snetworkplumbingwg/sriov-cni pkg/sriov/sriov.go at 1b7acc5).
    spoof_chk: Annotated[OnOff | None, _NAD_FIELD] = None
    """SR-IOV only: the VF's spoof check (`on`, `off`), as a SriovNetwork's `spoofChk`; unset:
    left as the VF has it. `off` lets the pod send from addresses that are not its own.
    """
    trust: Annotated[OnOff | None, _NAD_FIELD] = None
    """SR-IOV only: the VF's trust mode (`on`, `off`), as a SriovNetwork's `trust`; unset: left as
    the VF has it. `on` lets the pod change its MAC address and turn on promiscuous mode.
    """
    # mlx5 device behind the interface; None = detected at pod start (the default: SR-IOV VF
    # device names follow VF allocation, so a pin can go stale).
    hca: str | None = Field(default=None, pattern=r"^[a-z0-9_]+$")
    """RDMA device behind the interface, `mlx5_N` (all NICs or none); unset: detected. A pin that
    does not match what the pod has stops the pod, naming the device found.
    """

    @model_validator(mode="after")
    def _master_only_for_macvlan(self) -> NicSettings:
        if self.flavour != "macvlan" and self.master is not None:
            # Multus hands sriov and host-device the device the kubelet allocated for
            # 'resource'; a fixed device would override it (containernetworking/plugins
            # host-device.go getLink checks `device` first).
            raise ValueError(
                f"flavour {self.flavour!r} takes its device from 'resource'; remove 'master'"
            )
        for key, value in (("spoofChk", self.spoof_chk), ("trust", self.trust)):
            if value is not None and self.flavour != "sriov":
                raise ValueError(
                    f"{key!r} sets a flag of an SR-IOV VF; flavour {self.flavour!r} has none: "
                    f"remove {key!r}"
                )
        return self


# How RDMA memory registration gets enough locked memory (see RdmaSettings.memlock).
MemlockStrategy = Literal["root-ipc-lock", "machineconfig", "preconfigured"]
# What the program does about an object that may already exist in the cluster.
ExistingObject = Literal["create", "adopt", "reference"]


class RdmaSettings(Section):
    """RoCE over Multus-attached NICs (networkMode: rdma)."""

    nics: tuple[NicSettings, ...] = Field(min_length=1, max_length=16)
    """The RDMA NICs, in pod order (1..16); required in `rdma` mode."""
    # The interfaces' MTU is the node's: an SR-IOV VF's is the SriovNetworkNodePolicy's (sriov-cni
    # ignores a NAD's mtu), a macvlan's its parent's unless the NAD sets a smaller one. So it is a
    # fact only when stated: None = not checked, macvlan NADs inherit the parent's.
    mtu: int | None = Field(default=None, ge=1280, le=9216)
    """MTU each RDMA interface must have: preflight then checks it, and macvlan NADs set it (at most
    the parent interface's). Unset: preflight only reports each interface's MTU; macvlan
    interfaces get their parent's, SR-IOV VFs the SriovNetworkNodePolicy `mtu` (never a NAD's).
    """
    # Pod interface NCCL uses for bootstrap (the cluster network, not an RDMA NIC).
    bootstrap_interface: Interface = "eth0"
    """`NCCL_SOCKET_IFNAME` for bootstrap, matched exactly (`=eth0`); an interface name as
    `rdma.nics[].interface`.
    """
    # None: NCCL >= 2.21 picks the GID ('nccl') when every NIC has its own GID table (sriov,
    # host-device); detected per pod ('auto') when a macvlan shares an HCA, where NCCL's pick
    # (lowest RoCE v2 IPv4 index) can be another pod's or the host's GID. Or a fixed index.
    gid_index: Literal["auto", "nccl"] | Annotated[int, Field(ge=0, le=255)] | None = None
    """Default `nccl`; `auto` if a NIC is macvlan. `nccl`: left to NCCL >= 2.21 (each SR-IOV VF /
    host-device NIC has its own GID table); `auto`: detected per pod by the interface's own IPv4
    address (a macvlan's shared HCA also lists the host's and other pods' GIDs); or a fixed
    index.
    """
    # root-ipc-lock: only the training container runs as UID 0 with IPC_LOCK (own SCC);
    # machineconfig: a CRI-O drop-in raises the default memlock on the GPU MachineConfigPool
    # (cluster-admin; every node of the pool reboots); preconfigured: the nodes already do.
    memlock: MemlockStrategy = "root-ipc-lock"
    """How verbs memory registration gets enough locked memory; see docs/operations.md, "OpenShift:
    RDMA memory locking".
    """
    # MachineConfigPool of the GPU nodes (memlock: machineconfig).
    machine_config_pool: Annotated[DnsLabel, _MACHINECONFIG] = "worker"
    """MachineConfigPool of the GPU nodes (`memlock: machineconfig`). Unset it is `worker`,
    every worker node, with a warning: set a pool of the GPU nodes only (or `worker` to keep it).
    """
    # The memlock MachineConfig is cluster-wide, one per pool, shared by every stack on it
    # (memlock: machineconfig). create: this stack creates and owns it; adopt: it exists (made
    # by a stack since destroyed, or by hand) and this stack takes it over; reference: another
    # stack or the platform team owns it and this one only relies on it. A created or adopted
    # one is kept on `pulumi destroy`: removing it reboots the pool under every other stack.
    machine_config: Annotated[ExistingObject, _MACHINECONFIG] = "create"
    """The pool's memlock MachineConfig (`memlock: machineconfig`, one per pool for every stack on
    it): create and own it, import an existing one and own it, or rely on another owner's; never
    deleted by the stack (see docs/operations.md, "OpenShift: RDMA memory locking").
    """
    # NetworkAttachmentDefinitions: create them, adopt existing ones (Pulumi import) or use
    # existing ones by name without managing them.
    network_attachments: ExistingObject = "create"
    """The NADs: create them, import existing ones, or use existing ones by name."""
    # NCCL_MIN_CTAS (since NCCL 2.17, replacing NCCL_MIN_NCHANNELS; up to 64 since 2.25, 32
    # before: NVIDIA/nccl docs/userguide/source/env.rst at 5067397); None = NCCL's default.
    min_ctas: int | None = Field(default=None, ge=1, le=64)
    """`NCCL_MIN_CTAS`, the minimum number of CTAs (channels) per collective (NCCL >= 2.17;
    above 32 needs NCCL >= 2.25); unset: NCCL's default.
    """
    # Documented NCCL_NET_GDR_LEVEL values; None lets NCCL decide from the topology.
    gdr_level: Literal["LOC", "PIX", "PXB", "PHB", "SYS"] | None = None
    """`NCCL_NET_GDR_LEVEL`; unset: NCCL decides from the topology. A level but `LOC` without
    `verify.requireGdr` is warned about: nothing then checks that GPUDirect RDMA is there."""
    cross_nic: Literal[0, 1, 2] = 0
    """`NCCL_CROSS_NIC`."""
    ib_timeout: int | None = Field(default=None, ge=1, le=31)
    """`NCCL_IB_TIMEOUT`; unset: NCCL's default."""
    traffic_class: int | None = Field(default=None, ge=0, le=255)
    """`NCCL_IB_TC`; unset: NCCL's default."""
    service_level: int | None = Field(default=None, ge=0, le=15)
    """`NCCL_IB_SL`; unset: NCCL's default."""
    qps_per_connection: int | None = Field(default=None, ge=1, le=128)
    """`NCCL_IB_QPS_PER_CONNECTION`; unset: NCCL's default."""

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "minNchannels" in data:
            raise ValueError(
                "rdma.minNchannels was replaced by rdma.minCtas: NCCL 2.17 deprecated "
                "NCCL_MIN_NCHANNELS for NCCL_MIN_CTAS; rename the key (same value, 1..64)"
            )
        return data

    @property
    def gid(self) -> Literal["auto", "nccl"] | int:
        """gidIndex with its default resolved (see the field's comment)."""
        if self.gid_index is not None:
            return self.gid_index
        return "auto" if any(nic.flavour == "macvlan" for nic in self.nics) else "nccl"


class TcpSettings(Section):
    """Plain-Ethernet NCCL (networkMode: tcp)."""

    socket_ifname: str = "^lo,docker"
    """`NCCL_SOCKET_IFNAME` in `tcp` mode."""
    # NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD must stay <= 64 (NCCL env docs).
    socket_nthreads: int | None = Field(default=None, ge=1, le=16)
    """NCCL socket threads (`NCCL_SOCKET_NTHREADS`; its product with `tcp.nsocksPerThread` <= 64);
    unset: NCCL's default.
    """
    nsocks_per_thread: int | None = Field(default=None, ge=1, le=64)
    """Sockets per thread (`NCCL_NSOCKS_PERTHREAD`; its product with `tcp.socketNthreads` <= 64);
    unset: NCCL's default.
    """


class CodeSyncSettings(Section):
    """Keep a git repository checked out in every pod (git-sync as a native sidecar)."""

    repo: str = Field(pattern=r"^(https://|ssh://|git@)\S+$")
    """Repository (`https://`, `ssh://` or `git@` URL) a git-sync sidecar keeps checked out at
    `/code/current` in every pod; unset `codeSync`: no sync. A URL with credentials only as a
    secret (see docs/contract.md).
    """
    ref: str = "main"
    """Branch, tag or commit."""
    period: SyncPeriod = "60s"
    """How often to pull: a Go duration >= 10ms (`60s`, `1m30s`, `500ms`)."""
    # Existing Secret with keys `username` and `password` (an HTTPS token); None = public repo.
    credentials_secret: Subdomain | None = None
    """Existing Secret with keys `username` and `password` (token); unset: a public repository."""
    # kubernetes/git-sync release (registry.k8s.io/git-sync/git-sync): v4.7.1, newest v4 release
    # as of 2026-09 (kubernetes/git-sync releases; v4.6.0 was mostly CVE fixes, kubernetes/k8s.io
    # #9118). Same GITSYNC_* flags since v4.0.
    image: Image = "registry.k8s.io/git-sync/git-sync:v4.7.1"
    """git-sync release."""


class VerifySettings(Section):
    """The built-in fabric check (all_gather bandwidth + transport) shipped to every pod."""

    enabled: bool = True
    """Ship the all_gather fabric check, after the storage check of the `storage.volumes` paths
    (`scripts/storage_check.py`): a StatefulSet stack exports `verifyCommand`; a JobSet stack's
    runs pass both on their nodes before training starts (`scripts/fabric-gate.sh`).
    """
    # PASS threshold for the average all_gather bus bandwidth over the sweep's three largest sizes;
    # None = the sourced default of the mode or, on GKE's GPUDirect machines, of the machine
    # (gpu_cluster/plan/verify.py).
    expected_busbw_gbps: Annotated[float | None, _CHECK] = Field(
        default=None, gt=0, allow_inf_nan=False
    )
    """PASS threshold, in GB/s, for the average all_gather bus bandwidth over the sweep's three
    largest sizes (what Google's NCCL health check measures). Default on GKE per machine: A3 High
    60, A3 Mega 150, A3 Ultra and A4 250; `rdma` on OpenShift: 0.625 x the slowest node's RDMA
    NICs' link speeds as the pods read them (not judged, with a warning, where a NIC reports
    none); `tcp`: 2.5 (see docs/operations.md, "Verify the fabric").
    """
    # Largest all_gather of the sweep (binary units); None = 8G on GKE's GPUDirect machines (the
    # size Google's health check measures its floor at), 1G elsewhere (plan/verify.py).
    max_bytes: Annotated[SweepSize | None, _CHECK] = None
    """Largest all_gather in the sweep: a size the check script reads (`64M`, `1G`, `2t`, `512MiB`,
    a number of bytes; binary units). Default `8G` on GKE's A3 / A4 machines in their GPUDirect
    mode, else `1G`.
    """
    iters: Annotated[int, _CHECK] = Field(default=20, ge=1, le=1000)
    """Timed iterations per size."""
    # Also require GPUDirect RDMA (GDRDMA) in rdma mode.
    require_gdr: Annotated[
        bool,
        ReadWhen(
            lambda s: s.verify.enabled and _transport(s) != "socket",
            "verify.enabled is true and networkMode is not 'tcp' (GPUDirect RDMA never shows on "
            "NCCL's socket transport)",
        ),
    ] = False
    """`rdma`: also require GPUDirect RDMA (`GDRDMA`) in the fabric check, and on OpenShift
    preflight fails a node without its path (DMA-BUF or `nvidia-peermem`; else a warning)."""
    storage_check_bytes: Annotated[
        SweepSize,
        ReadWhen(
            lambda s: s.verify.enabled and bool(s.storage.volumes),
            "verify.enabled is true and storage.volumes lists a volume",
        ),
    ] = "1G"
    """What the storage check writes and reads back on each `storage.volumes` path, per pod, in
    one file per GPU (binary units: `512M`, `1G`, `4G`); a read-only volume: read of the files
    there, up to this much.
    """
    # Launchers run preflight.sh (GPUs, /dev/shm, memlock, RDMA links, DeepSpeed) before
    # training; None = on in rdma mode (a too-small memlock must stop training), off otherwise.
    preflight: bool | None = None
    """Default `true` in `rdma`, else `false`: launchers run `preflight.sh` (GPUs, `/dev/shm`,
    DeepSpeed >= 0.14.5 for `deepspeed`, memlock, RDMA links and MTUs) and do not start training
    when it fails.
    """


class NcclSettings(Section):
    debug: Literal["VERSION", "WARN", "INFO", "TRACE"] = "WARN"
    """`NCCL_DEBUG`."""


class OpenShiftSettings(Section):
    # GPU nodes the pods may run on; empty = any node with GPUs.
    node_names: tuple[NodeName, ...] = ()
    """Only these nodes (node names of at most 63 characters, at least `nodes` of them); empty: any
    GPU node.
    """
    # Node label that marks GPU nodes (set by the NVIDIA GPU operator's feature discovery).
    gpu_node_label: LabelKey = "nvidia.com/gpu.present"
    """Label key GPU nodes carry (`=true`)."""
    pre_pull: bool = False
    """Pull `image` onto every node the training pods may run on (`nodeNames`, else every GPU
    node) before the workload starts or changes, and keep it there: a DaemonSet whose one
    container idles in that image (as xpk's `cluster cacheimage`). An `image` edit is pulled
    while the previous run still trains, and a tag no node can pull stops `pulumi up` before the
    workload is touched. Off by default: on a shared cluster with no `nodeNames` it pulls onto
    every GPU node.
    """


class SystemPoolSettings(Section):
    """The CPU pool for GKE's own workloads (kube-dns, metrics-server, konnectivity): the GPU
    pool's nvidia.com/gpu taint keeps them off the A3 nodes. Defaults: GoogleCloudPlatform/
    cluster-toolkit modules/scheduler/gke-cluster variables.tf (1047080, 2026-06-25), which the
    gke-a3-megagpu and gke-a3-highgpu blueprints keep."""

    machine_type: str = Field(default="e2-standard-4", pattern=r"^[a-z0-9]+-[a-z0-9-]+$")
    """Untainted CPU pool for kube-dns, metrics-server and other GKE system pods. Default
    `e2-standard-4`; `e2-standard-16` with `a3-ultragpu-8g` or `a4-highgpu-8g`
    (cluster-toolkit's A3 Ultra and A4 blueprints).
    """
    min_nodes: int = Field(default=2, ge=1, le=100)
    """System pool autoscaling range, lower end."""
    max_nodes: int = Field(default=10, ge=1, le=100)
    """System pool autoscaling range, upper end."""
    disk_size_gb: int = Field(default=100, ge=10, le=65536)
    """System pool boot disk in GB. Default `100`; `200` with `a3-ultragpu-8g` or `a4-highgpu-8g`.
    """

    @model_validator(mode="after")
    def _range(self) -> SystemPoolSettings:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"minNodes ({self.min_nodes}) must be <= maxNodes ({self.max_nodes})")
        return self


class AuthorizedNetwork(Section):
    """One address range allowed to reach the cluster's control plane (GKE master authorized
    networks; cluster-toolkit modules/scheduler/gke-cluster `master_authorized_networks`)."""

    cidr_block: Cidr
    """An IPv4 CIDR, e.g. your VPN or office egress (`198.51.100.0/24`) or a CI runner's address
    (`203.0.113.7/32`).
    """
    display_name: str = Field(min_length=1)
    """A name for the range, shown in the console (cluster-toolkit's blueprints use
    `kubectl-access-network`).
    """


class GcpSettings(Section):
    project: str = Field(pattern=r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
    """GCP project (required on GKE)."""
    # Checked against the dated catalog of regions and zones (facts/gcp_catalog.py).
    region: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]+$")
    """GCP region (required on GKE)."""
    zone: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
    """GCP zone, inside `gcp.region` (required on GKE)."""
    machine_type: MachineType = "a3-megagpu-8g"
    """`tcpxo` needs Mega, `tcpx` needs High, `rdma` needs A3 Ultra (H200, GKE >=
    1.31.4-gke.1183000) or A4 (B200, GKE >= 1.32.2-gke.1475000).
    """
    # flex-start: Dynamic Workload Scheduler's flex-start VMs (cloud.google.com/kubernetes-engine/
    # docs/concepts/dws), with queued provisioning for a JobSet stack (gcp.queuedProvisioning).
    # A3 Ultra and A4 are not offered on demand (GpuMachine.provisioning).
    provisioning: Provisioning = "on-demand"
    """Capacity type; `a3-ultragpu-8g` and `a4-highgpu-8g` are not sold on demand (AI Hypercomputer
    consumption options: reservations, incl. blocks and calendar-mode future reservations,
    flex-start, Spot), so `on-demand` is refused for them; `flex-start` (GKE >=
    1.32.2-gke.1652000): the pool scales 0..`nodes` as the pods ask, no reservation, no own
    placement policy, no auto-repair; with `gcp.queuedProvisioning` a JobSet stack's runs get
    all their nodes at once through Kueue.
    """
    # A specific reservation: its name (same project) or projects/<p>/reservations/<name>,
    # optionally narrowed to a block or sub-block: <name>/reservationBlocks/<block>[/
    # reservationSubBlocks/<sub-block>] (GoogleCloudPlatform/cluster-toolkit modules/compute/
    # gke-node-pool reservation_definitions.tf; AI-Hypercomputer/xpk src/xpk/core/reservation.py).
    reservation: Annotated[
        str | None,
        ReadWhen(
            lambda s: _gcp(s).provisioning == "reservation", "gcp.provisioning is 'reservation'"
        ),
    ] = Field(default=None, pattern=RESERVATION_PATTERN)
    """The specific reservation, block or sub-block to consume (with `reservation`): `<name>`,
    `projects/<p>/reservations/<name>`, either with
    `/reservationBlocks/<block>[/reservationSubBlocks/<sub-block>]`. A bare `<name>` is in
    `gcp.project` and the pool names it by its full `projects/<p>/reservations/...` path, as
    cluster-toolkit does; a block pins the pool's node location to the zone.
    """
    # flex-start only: how long each node may run, in seconds (at most 7 days per flex-start VM,
    # cloud.google.com/kubernetes-engine/docs/concepts/dws); None = GKE's default.
    max_run_duration_seconds: Annotated[
        int | None,
        ReadWhen(
            lambda s: _gcp(s).provisioning == "flex-start", "gcp.provisioning is 'flex-start'"
        ),
    ] = Field(default=None, ge=1, le=FLEX_START_MAX_SECONDS)
    """`flex-start` only: how long each node may run, 1..604800 (flex-start VMs run at most 7
    days).
    """
    queued_provisioning: Annotated[
        bool,
        ReadWhen(
            lambda s: _gcp(s).provisioning == "flex-start", "gcp.provisioning is 'flex-start'"
        ),
    ] = False
    """`flex-start` only: the pool's nodes come through ProvisioningRequests Kueue makes for an
    admitted run (GKE queued provisioning: all nodes of a run at once, or none), not one by one
    as pods wait. Needs `workload.kind: jobset` with `workload.queue.mode: create`: the queue
    gets the ProvisioningRequest admission check. Auto-repair and auto-upgrade are off, as
    cluster-toolkit's dws-flex-start-queued-provisioning example sets them.
    """
    maintenance_interval: Literal["AS_NEEDED", "PERIODIC"] | None = None
    """Must match the reservation's."""
    # REGULAR as cluster-toolkit's gke-a3-highgpu blueprint; a channel is what lets the
    # maintenance exclusion below hold minor upgrades.
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "UNSPECIFIED"] = "REGULAR"
    """GKE release channel (a channel is needed for `holdMinorUpgrades`)."""
    # "1.N" (GKE picks the channel's newest patch of that minor) or an exact "1.N.P-gke.B".
    # Numbers of up to 9 digits: config/gke.py converts them, and int() refuses 4300.
    min_master_version: str = Field(
        default="1.35", pattern=r"^1\.\d{1,9}(\.\d{1,9}-gke\.\d{1,9})?$"
    )
    """GKE version, `1.NN` or `1.NN.P-gke.N`; its minor must be in standard support today, match
    `kubernetesVersion`, and have a GPUDirect release (docs/operations.md, "Supported GKE
    versions"); exact patches are checked against TCPXO's minimum per minor.
    """
    # Maintenance exclusion NO_MINOR_OR_NODE_UPGRADES until the minor's end of support, so
    # auto-upgrades never move the cluster off the minor its GPUDirect release is pinned for
    # (cluster-toolkit examples/gke-a3-highgpu/gke-a3-highgpu.yaml).
    hold_minor_upgrades: bool = True
    """Maintenance exclusion `NO_MINOR_OR_NODE_UPGRADES` until the minor's end of support."""
    base_cidr: PrivateCidr = "10.0.0.0/8"
    """Private CIDR (/12 or larger) every subnet and range is carved from."""
    # GKE's own deletion protection and Pulumi's `protect` on the cluster: an update that would
    # replace it (a force-new field such as the zone) or a destroy stops until this is false.
    deletion_protection: bool = True
    """**Opt-in key**: GKE's deletion protection and Pulumi's `protect` on the cluster; `false`
    lets an update replace or delete it.
    """
    private_nodes: bool = True
    """No public node IPs (adds Cloud Router + NAT)."""
    # Own compact ResourcePolicy with this max distance; None = pool's built-in COMPACT placement.
    placement_max_distance: int | None = Field(default=None, ge=1, le=3)
    """Own compact ResourcePolicy with this max distance (1..3)."""
    # Pinned GPUDirect release (installer, RxDM sidecar or gIB plugin, NCCL settings); None =
    # the newest one published for the GKE minor of minMasterVersion.
    gpudirect_release: Annotated[
        str | None,
        ReadWhen(
            _reads_release,
            "networkMode is 'tcpxo', 'tcpx' or 'rdma' (plain 'tcp' runs no GPUDirect release)",
        ),
    ] = None
    """Pinned installer + RxDM (or gIB plugin) + NCCL settings: `tcpxo-v1.0.17`,
    `tcpxo-2026-01-09`, `tcpx-v3.1.9`, `tcpx-v3.1.12`, `gib-v1.1.1`, `gib-v1.1.0` (rdma);
    unset: the newest for the GKE minor.
    """
    # Off by default, as cluster-toolkit's gke-node-pool `enable_gcfs` (false; none of its A3 or
    # A4 blueprints sets it: GoogleCloudPlatform/cluster-toolkit modules/compute/gke-node-pool/
    # variables.tf, 1047080): it needs an API most projects have not enabled, and the default
    # image (nvcr.io) is not in Artifact Registry, so it would only be pulled whole anyway
    # (facts/gcp.py ARTIFACT_REGISTRY_IMAGE). Updated in place, the pool kept
    # (hashicorp/terraform-provider-google node_config.go, gcfs_config not ForceNew, e03b7622).
    image_streaming: bool = False
    """GKE image streaming on the GPU pool (`gcfs_config`): containers start while their image
    streams from Artifact Registry. Helps only an `image` in Artifact Registry
    (`<location>-docker.pkg.dev/...`; any other is pulled whole as without it, and the stack
    warns); needs the Container File System API (`containerfilesystem.googleapis.com`) enabled
    in `gcp.project`. A change updates the pool in place (no new pool, no data touched); GKE
    applies it to the pool's nodes.
    """
    # GKE preloads the container images on this disk image into every GPU node from a secondary
    # boot disk (mode CONTAINER_IMAGE_CACHE, read through image streaming): docs.cloud.google.com/
    # kubernetes-engine/docs/how-to/data-container-image-preloading; the terraform provider's
    # sample and acceptance test pair it with gcfs_config enabled (terraform-docs-samples
    # gke/standard/zonal/secondary-boot-disk, hashicorp/terraform-provider-google
    # resource_container_node_pool_test.go). ForceNew (node_config.go, e03b7622): a new pool.
    secondary_boot_disk_image: Annotated[
        str | None,
        ReadWhen(
            lambda s: _gcp(s).image_streaming,
            "gcp.imageStreaming is true (GKE reads preloaded images through image streaming: "
            "set it too)",
        ),
    ] = Field(
        default=None,
        pattern=r"^projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/global/images/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
    )
    """A disk image holding the training image (and any other),
    `projects/<p>/global/images/<name>`: GKE gives every GPU node a secondary boot disk from it
    and starts containers from the images on it instead of pulling them (docs/operations.md,
    "Preloading the image"). Needs `gcp.imageStreaming: true`. A change makes a new GPU pool
    (the old one is deleted first).
    """
    system_pool: SystemPoolSettings = SystemPoolSettings()
    """The untainted CPU system pool (below)."""
    # Values of gcp.zone or gcp.systemPool.machineType the stack vouches for although the
    # catalog (facts/gcp_catalog.py, dated) lacks them: a zone or machine newer than the catalog.
    allow_uncatalogued: tuple[str, ...] = ()
    """Values of `gcp.zone` or `gcp.systemPool.machineType` the stack vouches for although the
    dated catalog (`gpu_cluster/facts/gcp_catalog.py`) lacks them; an entry the catalog already
    has, or that neither key uses, is refused (docs/operations.md, "Zones, machine types and GCP
    limits").
    """
    # Ranges allowed to reach the control plane's endpoint; GKE refuses every other outside
    # address. Required of a stack that creates the cluster (cluster_problems): no default is
    # both safe and deployable.
    authorized_networks: tuple[AuthorizedNetwork, ...] | None = None
    """**Required on GKE**: list (1..50; 1..100 with `gcp.privateNodes`) of the only outside ranges
    the control plane's endpoint accepts (GKE master authorized networks, always on; the
    cluster's own nodes and Google's management always get through, every Google Cloud VM's
    address does not). List where `pulumi up` and `kubectl` run: this program creates the
    Kubernetes objects through that endpoint, so an empty list is refused. `0.0.0.0/0` opens it
    to the whole internet (authentication still applies), as before this key existed. Edits
    apply in place.
    """

    @model_validator(mode="before")
    @classmethod
    def _system_pool_for_the_machine(cls, data: Any) -> Any:
        """The GPU machine's system pool size where cluster-toolkit sizes it per machine
        (GpuMachine.system_pool); keys the stack sets win. Anything malformed is left to the
        schema to report."""
        if not isinstance(data, Mapping):
            return data
        machine = MACHINES.get(str(data.get("machineType")))
        defaults = machine.system_pool if machine else None
        pool = data.get("systemPool", {})
        if not defaults or not isinstance(pool, Mapping):
            return data
        return {**data, "systemPool": {**defaults, **pool}}

    @model_validator(mode="after")
    def _zone_in_region(self) -> GcpSettings:
        if not self.zone.startswith(self.region + "-"):
            raise ValueError(f"zone {self.zone!r} is not in region {self.region!r}")
        if self.provisioning == "reservation" and not self.reservation:
            raise ValueError("provisioning 'reservation' needs 'reservation' (its name)")
        if self.provisioning == "reservation" and self.placement_max_distance is not None:
            raise ValueError(
                "placementMaxDistance: a reservation brings its own placement policy; "
                "adding another fails node pool creation"
            )
        if self.provisioning == "spot" and self.maintenance_interval is not None:
            raise ValueError("maintenanceInterval applies to reserved or on-demand capacity")
        if self.provisioning == "flex-start" and self.placement_max_distance is not None:
            raise ValueError(
                "placementMaxDistance: flex-start nodes get best-effort compact placement from "
                "GKE itself (docs.cloud.google.com/ai-hypercomputer/docs/create/"
                "gke-ai-hypercompute); remove it or use another provisioning"
            )
        return self


class Settings(Section):
    """Root of the stack config: one field per top-level `gpu-cluster:<key>`."""

    platform: Platform
    """Where the cluster runs."""
    name: DnsLabel = "gpu-cluster"
    """DNS-1035 label of at most 52 characters (GKE: at most 40): the StatefulSet, Service and
    ConfigMap name prefix; the GKE cluster's name.
    """
    namespace: Namespace = "gpu-cluster"
    """DNS-1123 label: the namespace of the workload (to create: not one every cluster has, nor
    `kube-*` or the platform's own).
    """
    # create: the program creates (and by default retains) it; adopt: imports an existing one;
    # reference: it exists and the program leaves it alone.
    namespace_mode: ExistingObject = "create"
    """`create`: the program creates it and keeps it on `pulumi destroy`, renames and a switch to
    `reference` (deleting a namespace deletes every claim in it); with `storage.retainOnDelete:
    false` it is protected instead, as the claims are (see docs/contract.md); `adopt`: imports
    an existing one (kept on destroy); `reference`: it exists and the program leaves it alone.
    Replaces `createNamespace` (`true` = `create`, `false` = `reference`).
    """
    nodes: int = Field(default=2, ge=1, le=4096)
    """GPU nodes, one pod each."""
    gpus_per_node: int = Field(default=8, ge=1, le=16)
    """GPUs per pod (GKE: at most the machine's 8; TCPX(O) needs all 8)."""
    network_mode: NetworkMode = "tcp"
    """`tcp`/`rdma` on OpenShift; `tcpxo`/`tcpx`/`rdma`/`tcp` on GKE (`rdma` there: GPUDirect RDMA
    with gIB on A3 Ultra / A4, no `rdma` key).
    """
    kubernetes_version: str = Field(default="1.32", pattern=r"^1\.[0-9]{2}$")
    """The cluster's Kubernetes minor, `1.NN` (objects are validated against it; >= 1.28; on GKE
    the minor of `gcp.minMasterVersion`).
    """
    image: Image = DEFAULT_TRAINING_IMAGE
    """Training image: a reference the kubelet parses, with a tag or a digest (`sha256`, `sha384`,
    `sha512`); `:latest` without a digest is refused. The default, NGC PyTorch 26.04, is a CUDA 13
    image: the nodes' driver must be R580 or newer (docs/operations.md, "Launchers and images").
    On GKE's GPUDirect modes an NGC PyTorch tag from 26.06 warns (it selects HPC-X's NCCL plugin).
    """
    pod: PodSettings = PodSettings()
    """Compute resources of the training container."""
    storage: StorageSettings = StorageSettings()
    """Workspace and datasets volumes."""
    launcher: LauncherSettings = LauncherSettings()
    """What `launchCommand` starts, and how."""
    workload: WorkloadSettings = WorkloadSettings()
    """The controller that runs the training pods."""
    nccl: NcclSettings = NcclSettings()
    """NCCL settings common to every mode."""
    verify: VerifySettings = VerifySettings()
    """The fabric check (docs/operations.md, "Verify the fabric")."""
    tcp: Annotated[
        TcpSettings,
        ReadWhen(lambda s: _mode_reads(s, "tcp"), "networkMode is 'tcp'", mode="tcp"),
    ] = TcpSettings()
    """NCCL over plain Ethernet (`networkMode: tcp`)."""
    rdma: Annotated[
        RdmaSettings | None,
        ReadWhen(
            lambda s: _mode_reads(s, "rdma"),
            "platform is 'openshift' and networkMode is 'rdma' (on GKE the RDMA NICs come with "
            "gcp.machineType)",
            mode="rdma",
        ),
    ] = None
    """RoCE over Multus-attached NICs (`networkMode: rdma` on OpenShift)."""
    code_sync: CodeSyncSettings | None = None
    """git-sync sidecar keeping a repository checked out in every pod; unset: no sync."""
    # Names of the env vars set from `secretEnv` (a Pulumi secret object: name -> token).
    # Only the names reach the schema; the values stay Pulumi secrets end to end.
    secret_env: tuple[EnvName, ...] = ()
    """**Secret** map of `NAME` -> token: env vars from a Kubernetes Secret (`pulumi config set
    --secret --path secretEnv.HF_TOKEN hf_...`); plain-text values are refused. A name also keys
    the Secret: letters, digits, `-`, `_`, `.`; and none the program sets itself (`NODE_RANK`,
    `MASTER_ADDR` and the other rendezvous variables, `NCCL_*`, `RDMA_*`, `LD_LIBRARY_PATH`...),
    which the secret would replace.
    """
    openshift: Annotated[
        OpenShiftSettings,
        ReadWhen(lambda s: s.platform == "openshift", "platform is 'openshift'"),
    ] = OpenShiftSettings()
    """OpenShift placement of the pods."""
    gcp: Annotated[
        GcpSettings | None, ReadWhen(lambda s: s.platform == "gke", "platform is 'gke'")
    ] = None
    """GKE: where and on what the cluster runs (required on GKE)."""
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

    def is_secret(self, key: str) -> bool:
        """Whether top-level `key` (as in the stack file) is a Pulumi secret."""
        return key in self._secret_keys

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def queue_name(self) -> str:
        """The LocalQueue a JobSet waits in."""
        return self.workload.queue.name or self.name

    @property
    def preflight(self) -> bool:
        if self.verify.preflight is not None:
            return self.verify.preflight
        mode = find_mode(self.platform, self.network_mode)
        return mode is not None and mode.preflight_by_default

    @property
    def elastic_range(self) -> tuple[int, int]:
        lo = self.launcher.min_nodes or self.nodes
        hi = self.launcher.max_nodes or self.nodes
        return lo, hi
