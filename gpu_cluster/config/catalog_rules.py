"""A GKE stack's `gcp` section against the catalog in gcp_catalog: one message per problem,
each starting with the full key it is about, naming the value and what is allowed.

The contract these checks keep (docs/contract.md): bad config stops before any resource
is registered. A zone that does not exist, a zone that does not offer the GPU machine, a system
pool machine type that does not exist, a pool larger than GKE allows in one zone or a run time
shorter than Compute Engine accepts would otherwise fail part-way through `pulumi up`: after the
VPCs, and for everything but a missing zone after the (protected) cluster, whose zone is
force-new.

A well-formed value the catalog lacks is refused, not warned about. A warning scrolls past in CI
and the failure it predicts comes anyway; most such values are typos (`us-central1-d`, a machine
in the neighbouring zone). A stale catalog must not block a real new zone forever, though, so the
message names CATALOG_DATE and two ways out: refresh the catalog (gcp_catalog says how), or list
the value in `gcp.allowUncatalogued`, which lifts the catalog check for exactly that value (the
stack file then shows, in review, what its author vouched for). An entry the catalog already
accepts, or that names neither gcp.zone nor gcp.systemPool.machineType, is refused too, so the
list empties itself as the catalog catches up instead of silently widening.

Pure: no pydantic, no Pulumi. The entry point for the schema's GKE checks: gcp_catalog_problems.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from gpu_cluster.facts.gcp_catalog import (
    CATALOG_DATE,
    CUSTOM_MACHINE_TYPE,
    GKE_NODES_PER_POOL_PER_ZONE,
    GPU_MACHINE_ZONES,
    MAX_RUN_DURATION_MIN_SECONDS,
    SYSTEM_POOL_MACHINE_TYPES,
    ZONES,
    machine_family,
    region_of,
)

_PREFIX = "gpu-cluster:"
ALLOW_KEY = f"{_PREFIX}gcp.allowUncatalogued"
# What a message offers when the catalog may be behind Google.
_WAYS_OUT = "newer? refresh gpu_cluster/facts/gcp_catalog.py or list it in gcp.allowUncatalogued"
_ZONE_FORM = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
# Families whose custom machine types the catalog knows (gcp_catalog.CUSTOM_MACHINE_TYPE).
_CUSTOM_FAMILIES = ("e2", "n1", "n2", "n2d", "n4")
# At most this many groups (a region's zones, a kind of machine) in one message.
_MAX_GROUPS = 4


def gcp_catalog_problems(
    *,
    region: str,
    zone: str,
    machine_type: str,
    system_pool_machine_type: str,
    nodes: int,
    max_run_duration_seconds: int | None,
    allow_uncatalogued: Collection[str] = (),
) -> list[str]:
    """Everything the catalog refuses in a GKE stack: gcp.region/gcp.zone (the zone exists, is
    in the region and offers gcp.machineType), gcp.systemPool.machineType, nodes (one pool, one
    zone), gcp.maxRunDurationSeconds, and gcp.allowUncatalogued itself."""
    allowed = frozenset(allow_uncatalogued)
    return [
        *zone_problems(zone, region, machine_type, allowed),
        *system_pool_machine_type_problems(system_pool_machine_type, allowed),
        *node_count_problems(nodes),
        *max_run_duration_problems(max_run_duration_seconds),
        *allow_uncatalogued_problems(
            allow_uncatalogued,
            zone=zone,
            machine_type=machine_type,
            system_pool_machine_type=system_pool_machine_type,
        ),
    ]


def zone_problems(
    zone: str, region: str, machine_type: str, allow_uncatalogued: Collection[str] = ()
) -> list[str]:
    """The zone is a zone, lies in `region`, exists and offers `machine_type` (the last two
    unless `allow_uncatalogued` lists the zone)."""
    key = f"{_PREFIX}gcp.zone = {zone!r}"
    if not _ZONE_FORM.match(zone):
        return [f"{key} is not a zone name (<region>-<letter>, e.g. 'us-central1-a')"]
    out: list[str] = []
    home = region_of(zone)
    if home != region:
        out.append(
            f"{_PREFIX}gcp.region = {region!r}: gcp.zone {zone!r} is in region {home!r}; set "
            f"gcp.region to {home!r} or pick a zone of {region!r}"
        )
    if zone in allow_uncatalogued:
        return out
    offering = GPU_MACHINE_ZONES.get(machine_type)
    if zone not in ZONES:
        neighbours = sorted(z for z in ZONES if region_of(z) == home)
        where = (
            f"{home} has {zone_list(neighbours)}"
            if neighbours
            else f"nor is region {home!r}; {_region_hint(offering)}"
        )
        out.append(f"{key} is not a zone in the catalog ({CATALOG_DATE}); {where}; {_WAYS_OUT}")
    elif offering is None:
        out.append(
            f"{_PREFIX}gcp.machineType = {machine_type!r} has no zones in the catalog "
            f"({CATALOG_DATE}); add them to GPU_MACHINE_ZONES in gpu_cluster/facts/gcp_catalog.py"
        )
    elif zone not in offering:
        here = [z for z in offering if region_of(z) == home]
        elsewhere = [z for z in offering if region_of(z) != home]
        where = zone_list(here) if here else f"no zone of {home}"
        out.append(
            f"{key}: the catalog ({CATALOG_DATE}) has {machine_type} (gcp.machineType) in {where}; "
            f"elsewhere: {zone_list(elsewhere)}; {_WAYS_OUT}"
        )
    return out


def system_pool_machine_type_problems(
    machine_type: str, allow_uncatalogued: Collection[str] = ()
) -> list[str]:
    """The system pool's machine type is a catalogued predefined type or a custom type of a
    family that has them (unless `allow_uncatalogued` lists it)."""
    if machine_type in allow_uncatalogued or _catalogued_machine_type(machine_type):
        return []
    key = f"{_PREFIX}gcp.systemPool.machineType = {machine_type!r}"
    family = machine_family(machine_type)
    types = SYSTEM_POOL_MACHINE_TYPES.get(family)
    if types is None:
        return [
            f"{key}: family {family!r} is not in the catalog ({CATALOG_DATE}) of CPU machines "
            f"for the system pool: {', '.join(sorted(SYSTEM_POOL_MACHINE_TYPES))}; {_WAYS_OUT}"
        ]
    custom = [f"{family}-custom-<vCPUs>-<MiB>"] if family in _CUSTOM_FAMILIES else []
    return [
        f"{key}: the catalog ({CATALOG_DATE}) has no such {family} machine; {family} has "
        f"{shape_list(types, first=custom)}; {_WAYS_OUT}"
    ]


def node_count_problems(nodes: int) -> list[str]:
    """The GPU pool's nodes all live in gcp.zone (the cluster is zonal), so GKE's per-zone pool
    size is the limit (also for flex-start, whose pool scales up to `nodes`)."""
    limit = GKE_NODES_PER_POOL_PER_ZONE
    if nodes <= limit:
        return []
    return [
        f"{_PREFIX}nodes = {nodes}: a GKE node pool holds at most {limit} nodes per zone "
        f"(cloud.google.com/kubernetes-engine/quotas) and the GPU pool's nodes all run in "
        f"gcp.zone; use at most {limit}"
    ]


def max_run_duration_problems(seconds: int | None) -> list[str]:
    """Compute Engine's shortest run-time limit (the 7-day flex-start maximum is the schema's)."""
    floor = MAX_RUN_DURATION_MIN_SECONDS
    if seconds is None or seconds >= floor:
        return []
    return [
        f"{_PREFIX}gcp.maxRunDurationSeconds = {seconds}: Compute Engine accepts a VM run-time "
        f"limit of at least {floor} seconds (cloud.google.com/compute/docs/instances/"
        f"limit-vm-runtime); use {floor} or more, or unset it for flex-start's 7 days"
    ]


def allow_uncatalogued_problems(
    allow_uncatalogued: Iterable[str],
    *,
    zone: str,
    machine_type: str,
    system_pool_machine_type: str,
) -> list[str]:
    """Each entry vouches for a value this stack uses and the catalog does not accept."""
    out: list[str] = []
    for value in dict.fromkeys(allow_uncatalogued):
        if value == zone:
            known = zone in GPU_MACHINE_ZONES.get(machine_type, ())
            redundant = f"{machine_type} in {value!r}" if known else None
        elif value == system_pool_machine_type:
            redundant = repr(value) if _catalogued_machine_type(value) else None
        else:
            out.append(
                f"{ALLOW_KEY} lists {value!r}, which is neither gcp.zone nor "
                "gcp.systemPool.machineType; remove it"
            )
            continue
        if redundant:
            out.append(
                f"{ALLOW_KEY} lists {value!r}, but the catalog of {CATALOG_DATE} already has "
                f"{redundant}; remove it"
            )
    return out


def zone_list(zones: Iterable[str]) -> str:
    """Zones grouped by region, in order of first appearance, clipped: 'us-central1-a/b/c,
    us-east4-a, ..., and 3 more'."""
    letters: dict[str, list[str]] = {}
    for zone in zones:
        letters.setdefault(region_of(zone), []).append(zone.rpartition("-")[2])
    groups = [f"{region}-{'/'.join(found)}" for region, found in letters.items()]
    return _clipped(groups) if groups else "none"


def shape_list(machine_types: Iterable[str], first: Iterable[str] = ()) -> str:
    """Machine types grouped by kind, sizes in order, after `first`, clipped:
    'e2-highcpu-{2,4,8,16,32}, e2-highmem-{2,4,8,16}, ..., and 2 more'."""
    sizes: dict[str, list[int]] = {}
    single: list[str] = []
    for name in machine_types:
        found = re.fullmatch(r"([a-z0-9]+-[a-z]+)-([0-9]+)(-[a-z]+)?", name)
        if found is None:
            single.append(name)
            continue
        kind, size, suffix = found.groups()
        sizes.setdefault(f"{kind}-{{}}{suffix or ''}", []).append(int(size))
    grouped = [pattern.format(_sizes(found)) for pattern, found in sorted(sizes.items())]
    return _clipped([*first, *grouped, *sorted(single)])


def _sizes(found: list[int]) -> str:
    ordered = sorted(found)
    return str(ordered[0]) if len(ordered) == 1 else "{" + ",".join(map(str, ordered)) + "}"


def _clipped(groups: list[str]) -> str:
    if len(groups) <= _MAX_GROUPS:
        return ", ".join(groups)
    return ", ".join(groups[:_MAX_GROUPS]) + f", and {len(groups) - _MAX_GROUPS} more"


def _region_hint(offering: tuple[str, ...] | None) -> str:
    if offering:
        return f"the machine is in {zone_list(offering)}"
    return "`gcloud compute zones list` shows today's zones"


def _catalogued_machine_type(machine_type: str) -> bool:
    family = machine_family(machine_type)
    return machine_type in SYSTEM_POOL_MACHINE_TYPES.get(family, ()) or bool(
        CUSTOM_MACHINE_TYPE.match(machine_type)
    )
