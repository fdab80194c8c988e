"""The GKE stack's rules (machines, capacity, versions, releases, addresses) and what its
settings resolve to."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from gpu_cluster.config.catalog_rules import gcp_catalog_problems
from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.netmodes.gke_modes import older_than
from gpu_cluster.facts.gcp import (
    ARTIFACT_REGISTRY_IMAGE,
    AUTHORIZED_NETWORKS_MAX,
    FLEX_START_MIN_GKE,
)
from gpu_cluster.facts.gcp_network import plan_addresses
from gpu_cluster.facts.gpudirect import GKE_END_OF_STANDARD_SUPPORT, gke_minor
from gpu_cluster.facts.machines import MACHINES
from gpu_cluster.facts.ngc import DEFAULT_TRAINING_IMAGE, sets_net_plugin_spcx

if TYPE_CHECKING:  # the loader and rules.py call these rules: the types only
    from gpu_cluster.config.schema import Settings
    from gpu_cluster.config.sections.gcp import GcpSettings


def gke_problems(s: Settings, gcp: GcpSettings) -> list[str]:
    out: list[str] = []
    mode = mode_of(s)
    needed = mode.machines()
    if needed and gcp.machine_type not in needed:
        out.append(
            f"gpu-cluster:networkMode = {s.network_mode!r} needs gcp.machineType "
            f"{' or '.join(map(repr, needed))}, not {gcp.machine_type!r}"
        )
    out.extend(
        gcp_catalog_problems(
            region=gcp.region,
            zone=gcp.zone,
            machine_type=gcp.machine_type,
            system_pool_machine_type=gcp.system_pool.machine_type,
            nodes=s.nodes,
            max_run_duration_seconds=gcp.max_run_duration_seconds,
            allow_uncatalogued=gcp.allow_uncatalogued,
        )
    )
    out.extend(_provisioning_problems(gcp))
    if gcp.queued_provisioning and (
        s.workload.kind != "jobset" or s.workload.queue.mode != "create"
    ):
        out.append(
            "gpu-cluster:gcp.queuedProvisioning needs workload.kind 'jobset' with "
            "workload.queue.mode 'create': a queued pool's nodes come only through the "
            "ProvisioningRequests Kueue makes for runs admitted by the stack's queue, so a "
            "StatefulSet's pods (or another queue's runs) would wait for nodes forever"
        )
    out.extend(_authorized_network_problems(gcp))
    have = MACHINES[gcp.machine_type].gpus
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
    if mode.nics_from_release and version_problems:
        return out  # the GPU NIC count comes from the release, which is in question
    try:
        plan_addresses(gcp.base_cidr, mode.gpu_nic_count(s), mode.rdma_nic_count(s))
    except ValueError as exc:
        out.append(f"gpu-cluster:gcp.baseCidr = {gcp.base_cidr!r}: {exc}")
    return out


def _provisioning_problems(gcp: GcpSettings) -> list[str]:
    """Capacity Google sells for the machine type (GpuMachine.provisioning)."""
    offered = MACHINES[gcp.machine_type].provisioning
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
    """Release channel, GKE version and GPUDirect release must be a combination Google
    publishes, and kubernetesVersion must name the minor the cluster runs. Whether the minor is
    still supported depends on the date: support_window, outside the schema."""
    out: list[str] = []
    version = gcp.min_master_version
    minor = gke_minor(version)
    key = f"gpu-cluster:gcp.minMasterVersion = {version!r}"
    supported = sorted(GKE_END_OF_STANDARD_SUPPORT)
    if minor not in GKE_END_OF_STANDARD_SUPPORT:
        out.append(
            f"{key}: GKE 1.{minor} is not in this program's support table (known: 1.{supported[0]}"
            f"-1.{supported[-1]}); add its end of support to GKE_END_OF_STANDARD_SUPPORT in "
            "gpu_cluster/facts/gpudirect.py from Google's release schedule first"
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
    out.extend(mode_of(s).gke_version_problems(s, gcp, minor))
    if gcp.provisioning == "flex-start" and older_than(version, FLEX_START_MIN_GKE):
        out.append(f"{key} is older than flex-start's minimum: use {FLEX_START_MIN_GKE} or newer")
    return out


# How long before its minor leaves standard support a stack hears about it (a warning), time
# to move it to a newer minor before GKE upgrades the cluster regardless of the hold.
SUPPORT_NOTICE_DAYS = 60


def support_window(s: Settings, as_of: date) -> tuple[list[str], list[str]]:
    """(ended, ending) as of `as_of`: the stack's GKE minor has left standard support (the
    caller refuses or warns, as config.dates.AsOf says), or leaves it within
    SUPPORT_NOTICE_DAYS (a warning). Empty off GKE and for a minor the support table lacks
    (the schema refuses that one)."""
    if s.gcp is None:
        return [], []
    version = s.gcp.min_master_version
    minor = gke_minor(version)
    end = GKE_END_OF_STANDARD_SUPPORT.get(minor)
    if end is None or (end - as_of).days > SUPPORT_NOTICE_DAYS:
        return [], []
    # The minors still supported on the later of the two dates: where the stack can move.
    after = max(end, as_of)
    newer = [f"1.{m}" for m, e in sorted(GKE_END_OF_STANDARD_SUPPORT.items()) if e > after]
    where = (
        f"use {' or '.join(newer) or 'a newer minor'} "
        "(docs/operations.md: moving a stack to the next GKE release)"
    )
    key = f"gpu-cluster:gcp.minMasterVersion = {version!r}"
    if end < as_of:
        ended = f"GKE 1.{minor} left standard support on {end.isoformat()}"
        return [f"{key}: {ended} (as of {as_of.isoformat()}); {where}"], []
    days = (end - as_of).days
    return [], [
        f"{key}: GKE 1.{minor} leaves standard support on {end.isoformat()}, {days} days after "
        f"{as_of.isoformat()}; GKE then upgrades the cluster whatever the hold; {where}"
    ]


def image_streaming_warnings(s: Settings) -> list[str]:
    """A warning when the GPU pool streams images but the training image is not in Artifact
    Registry: GKE then pulls it whole, as without streaming (ARTIFACT_REGISTRY_IMAGE). Not a
    refusal: the setting is valid and still serves any other image the stack's pods use."""
    if s.gcp is None or not s.gcp.image_streaming or re.match(ARTIFACT_REGISTRY_IMAGE, s.image):
        return []
    return [
        f"gpu-cluster:gcp.imageStreaming is true but gpu-cluster:image = {s.image!r} is not in "
        "Artifact Registry (<location>-docker.pkg.dev/...): GKE streams only images there and "
        "pulls this one whole, as without streaming; push it to Artifact Registry or set "
        "gcp.imageStreaming to false"
    ]


def net_plugin_warnings(s: Settings) -> list[str]:
    """A warning when a GKE stack whose NCCL needs Google's plugin (tcpxo, tcpx, rdma) runs an NGC
    PyTorch release that selects HPC-X's plugin instead (sets_net_plugin_spcx). Not a refusal:
    an image built from it may unset NCCL_NET_PLUGIN again."""
    if s.gcp is None or not mode_of(s).needs_google_plugin or not sets_net_plugin_spcx(s.image):
        return []
    return [
        f"gpu-cluster:image = {s.image!r} sets NCCL_NET_PLUGIN=spcx (NGC PyTorch 26.06 and "
        "newer), so NCCL loads HPC-X's net plugin and not Google's, which networkMode "
        f"{s.network_mode!r} needs; use an nvcr.io/nvidia/pytorch release up to 26.05 (the "
        f"default is {DEFAULT_TRAINING_IMAGE}) or an image built from it that unsets "
        "NCCL_NET_PLUGIN"
    ]


# The project id the shipped GKE stack files hold, for the user to replace (README, "Stacks").
PLACEHOLDER_PROJECT = "my-gpu-project"
# Address ranges no host has, reserved for documentation (RFC 5737 section 3: TEST-NET-1..3).
DOCUMENTATION_RANGES = tuple(
    ipaddress.IPv4Network(r) for r in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
)


# Domain names reserved for documentation and tests, which no one's Google Workspace or Cloud
# Identity domain is (RFC 2606: example.com/.net/.org and the TLDs .example, .test, .invalid,
# .localhost).
DOCUMENTATION_DOMAINS = ("example.com", "example.net", "example.org")
RESERVED_TLDS = ("example", "test", "invalid", "localhost")


def documentation_domain(domain: str) -> bool:
    return domain in DOCUMENTATION_DOMAINS or domain.endswith(
        tuple(f".{d}" for d in (*DOCUMENTATION_DOMAINS, *RESERVED_TLDS))
    )


@dataclass(frozen=True)
class Placeholder:
    """A value a GKE stack file must not keep before `pulumi up`: the warning naming it and the
    `pulumi config set` command (without --stack) that replaces it."""

    warning: str
    fix: str


def placeholders(s: Settings) -> list[Placeholder]:
    """The shipped placeholder project, an authorized network no client is in (a documentation
    range: `pulumi up` could not reach the cluster it creates), one every address is in, and a
    Google Groups for RBAC group in a documentation domain."""
    if s.gcp is None:
        return []
    out = []
    if s.gcp.project == PLACEHOLDER_PROJECT:
        fix = "pulumi config set --path gcp.project YOUR_PROJECT_ID"
        out.append(
            Placeholder(
                f"gpu-cluster:gcp.project = {PLACEHOLDER_PROJECT!r} is the shipped files' "
                f"placeholder: set your project before pulumi up ({fix})",
                fix,
            )
        )
    for i, network in enumerate(s.gcp.authorized_networks or ()):
        key = f"gpu-cluster:gcp.authorizedNetworks[{i}].cidrBlock = {network.cidr_block!r}"
        fix = f"pulumi config set --path 'gcp.authorizedNetworks[{i}].cidrBlock' YOUR_EGRESS_IP/32"
        block = ipaddress.IPv4Network(network.cidr_block)  # an IPv4 CIDR (values.Cidr)
        if any(block.subnet_of(r) for r in DOCUMENTATION_RANGES):
            problem = "is a documentation range (RFC 5737) no client is in: pulumi up could not "
            problem += "reach the cluster it creates"
        elif block.prefixlen == 0:
            problem = "lets every address reach the control plane's endpoint"
        else:
            continue
        listed = "list the addresses pulumi up, CI and kubectl run from"
        out.append(Placeholder(f"{key} {problem}; {listed}", fix))
    group = s.gcp.rbac_security_group
    if group is not None and documentation_domain(group.partition("@")[2]):
        fix = "pulumi config set --path gcp.rbacSecurityGroup gke-security-groups@YOUR_DOMAIN"
        out.append(
            Placeholder(
                f"gpu-cluster:gcp.rbacSecurityGroup = {group!r} is in a domain reserved for "
                f"documentation (RFC 2606), which is no one's Google Workspace: set your "
                f"domain's ({fix})",
                fix,
            )
        )
    return out


def submitter_group_warnings(s: Settings) -> list[str]:
    """A warning for run submitters named by group on GKE: a Google group reaches RBAC only on a
    cluster with Google Groups for RBAC (its authenticatorGroupsConfig, the security group
    gke-security-groups@<domain>; cloud.google.com/kubernetes-engine/docs/how-to/
    google-groups-rbac), which the stack's cluster turns on only with gcp.rbacSecurityGroup.
    Not a refusal: it may be turned on outside the stack."""
    groups = s.workload.runs.submitters.groups
    if s.gcp is None or s.workload.kind != "jobset" or not groups:
        return []
    if s.gcp.rbac_security_group is not None:
        return []
    return [
        f"gpu-cluster:workload.runs.submitters.groups = {list(groups)}: GKE puts a Google group "
        "in a user's groups only when the cluster has Google Groups for RBAC "
        "(authenticatorGroupsConfig), which this stack's cluster does not set; until it does, "
        "these groups' members cannot submit runs: set gcp.rbacSecurityGroup "
        "(gke-security-groups@<your domain>, with these groups among its members) or name the "
        "people in users"
    ]


def placeholder_warnings(s: Settings) -> list[str]:
    """Warnings for each placeholder. Not refusals: the shipped files render with them, and an
    open endpoint is a choice."""
    return [p.warning for p in placeholders(s)]
