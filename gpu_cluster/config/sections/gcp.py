"""The GKE stack's section (`gcp`): where and on what the cluster runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from gpu_cluster.config.base import Section
from gpu_cluster.config.netmodes import find_mode
from gpu_cluster.config.reads import ReadWhen
from gpu_cluster.config.values import (
    Cidr,
    MachineType,
    PrivateCidr,
    RbacSecurityGroup,
)
from gpu_cluster.facts.gcp import FLEX_START_MAX_SECONDS, RESERVATION_PATTERN
from gpu_cluster.facts.machines import MACHINES, Provisioning

if TYPE_CHECKING:  # the predicates get the whole config
    from gpu_cluster.config.schema import Settings


def _gcp(s: Settings) -> GcpSettings:
    assert s.gcp is not None  # a GcpSettings field is read only inside gcp
    return s.gcp


def _reads_release(s: Settings) -> bool:
    mode = find_mode(s.platform, s.network_mode)
    return mode is not None and mode.reads_release


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

    # Google Groups for RBAC: GKE adds the Google groups a user belongs to (the groups that are
    # members of this one) to the user's Kubernetes groups (cloud.google.com/kubernetes-engine/
    # docs/how-to/google-groups-rbac). Not ForceNew (terraform-provider-google-beta v7.45.0;
    # tests/vendor/gcp_force_new.json lists no authenticatorGroupsConfig): set in place.
    rbac_security_group: RbacSecurityGroup | None = None
    """Google Groups for RBAC on the cluster (its `authenticatorGroupsConfig`): the group
    `gke-security-groups@<your domain>` whose member groups GKE passes to RBAC, so that
    `workload.runs.submitters.groups` may name Google groups (without it they warn). The groups
    must exist in your Google Workspace or Cloud Identity domain first (a documentation domain
    such as `example.com` warns, and `gpu-cluster doctor` fails it). Edits apply in place.
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
