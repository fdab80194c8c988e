"""The GCP catalog (gpu_cluster/facts/gcp_catalog.py) and its checks. Contract: on GKE, gcp.zone
must be a zone that exists, lies in gcp.region and offers gcp.machineType; the system pool's
machine type must exist; `nodes` must fit one GKE node pool in one zone; a run-time limit must be
one Compute Engine accepts. Each refusal starts with the full key, names the value and what is
allowed, and stays short. A well-formed value the catalog lacks passes only when
gcp.allowUncatalogued vouches for it, and an entry no value needs is refused. Every shipped GKE
stack passes. The tables are generated from the catalog itself, so a refreshed catalog is
tested as it stands."""

from __future__ import annotations

import random
import string
import typing

import pytest

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.catalog_rules import (
    gcp_catalog_problems,
    max_run_duration_problems,
    node_count_problems,
    system_pool_machine_type_problems,
    zone_problems,
)
from gpu_cluster.config.loading import settings_from
from gpu_cluster.facts import machines
from gpu_cluster.facts.gcp_catalog import (
    CATALOG_DATE,
    GKE_NODES_PER_POOL_PER_ZONE,
    GPU_MACHINE_ZONES,
    MAX_RUN_DURATION_MIN_SECONDS,
    SYSTEM_POOL_MACHINE_TYPES,
    ZONE_LETTERS,
    ZONES,
    region_of,
)
from gpu_cluster.offline.stack_files import engine_config
from tests.as_of import AS_OF
from tests.conftest import STACKS

MACHINES = sorted(GPU_MACHINE_ZONES)
CATALOGUED_SYSTEM_TYPES = sorted(t for types in SYSTEM_POOL_MACHINE_TYPES.values() for t in types)
# Long enough for the key, the value, a clipped list of what is allowed and the way out.
MAX_MESSAGE = 400
WAYS_OUT = "gcp.allowUncatalogued"


def a_stack(**changes: typing.Any) -> dict[str, typing.Any]:
    """gcp_catalog_problems' arguments for a valid A3 Mega stack, with `changes`."""
    base: dict[str, typing.Any] = {
        "region": "us-central1",
        "zone": "us-central1-a",
        "machine_type": "a3-megagpu-8g",
        "system_pool_machine_type": "e2-standard-4",
        "nodes": 2,
        "max_run_duration_seconds": None,
    }
    return {**base, **changes}


def test_every_machine_the_schema_accepts_has_catalogued_zones() -> None:
    # The schema accepts exactly the records (tests/test_machines.py).
    assert set(machines.MACHINES) == set(GPU_MACHINE_ZONES)


@pytest.mark.parametrize("machine", MACHINES)
def test_catalogued_gpu_zones_exist_and_are_listed_once_in_order(machine: str) -> None:
    zones = GPU_MACHINE_ZONES[machine]
    assert zones
    assert set(zones) <= ZONES
    assert zones == tuple(sorted(set(zones)))


@pytest.mark.parametrize("machine", MACHINES)
def test_a_machine_is_accepted_in_exactly_the_zones_that_offer_it(machine: str) -> None:
    accepted = {z for z in ZONES if not zone_problems(z, region_of(z), machine)}
    assert accepted == set(GPU_MACHINE_ZONES[machine])


@pytest.mark.parametrize("machine", MACHINES)
def test_a_zone_without_the_machine_is_refused_naming_where_it_is(machine: str) -> None:
    offering = GPU_MACHINE_ZONES[machine]
    for zone in sorted(ZONES - set(offering)):
        region = region_of(zone)
        [message] = zone_problems(zone, region, machine)
        assert message.startswith(f"gpu-cluster:gcp.zone = {zone!r}: the catalog ({CATALOG_DATE})")
        assert f"has {machine} (gcp.machineType) in " in message
        here = [z for z in offering if region_of(z) == region]
        if here:
            # The same region's zones that have it come first, grouped: us-central1-a/b/c.
            letters = "/".join(z[-1] for z in here)
            assert f"in {region}-{letters}; elsewhere: " in message
        else:
            assert f"in no zone of {region}; elsewhere: " in message
        assert message.endswith(f"or list it in {WAYS_OUT}")
        assert len(message) <= MAX_MESSAGE


def test_the_message_for_a_neighbouring_zone() -> None:
    [message] = gcp_catalog_problems(**a_stack(zone="us-central1-f"))
    assert message.startswith(
        "gpu-cluster:gcp.zone = 'us-central1-f': the catalog (2026-11-23) has a3-megagpu-8g "
        "(gcp.machineType) in us-central1-a/b/c; elsewhere: asia-east1-c, "
    )


@pytest.mark.parametrize("machine", MACHINES)
def test_a_zone_of_another_region_is_refused(machine: str) -> None:
    regions = sorted(ZONE_LETTERS)
    for zone in GPU_MACHINE_ZONES[machine]:
        home = region_of(zone)
        other = regions[(regions.index(home) + 1) % len(regions)]
        assert zone_problems(zone, other, machine) == [
            f"gpu-cluster:gcp.region = {other!r}: gcp.zone {zone!r} is in region {home!r}; "
            f"set gcp.region to {home!r} or pick a zone of {other!r}"
        ]


def _unknown_zones() -> list[str]:
    """Well-formed zone names the catalog lacks: near misses and seeded random ones."""
    near = ["us-central1-d", "us-central1-x", "us-east1-a", "europe-west1-a", "us-central9-a"]
    rng = random.Random(20261123)
    made: list[str] = []
    while len(made) < 10:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
        zone = f"{word}-{rng.choice(['north', 'west', 'central'])}{rng.randint(1, 12)}-" + (
            rng.choice(string.ascii_lowercase)
        )
        if zone not in ZONES:
            made.append(zone)
    return near + made


@pytest.mark.parametrize("zone", _unknown_zones())
def test_a_zone_the_catalog_lacks_is_refused_until_vouched_for(zone: str) -> None:
    stack = a_stack(zone=zone, region=region_of(zone))
    [message] = gcp_catalog_problems(**stack)
    assert message.startswith(
        f"gpu-cluster:gcp.zone = {zone!r} is not a zone in the catalog ({CATALOG_DATE}); "
    )
    assert "refresh gpu_cluster/facts/gcp_catalog.py" in message
    assert message.endswith(WAYS_OUT)
    assert len(message) <= MAX_MESSAGE
    assert gcp_catalog_problems(**stack, allow_uncatalogued=[zone]) == []


def test_a_missing_zone_names_its_regions_zones() -> None:
    [message] = zone_problems("us-central1-x", "us-central1", "a3-megagpu-8g")
    assert "; us-central1 has us-central1-a/b/c/f; " in message


@pytest.mark.parametrize(
    "zone", ["uscentral1a", "us-central1", "us-central1-aa", "US-CENTRAL1-A", "us-central-a", ""]
)
def test_a_malformed_zone_is_refused_even_when_listed(zone: str) -> None:
    assert zone_problems(zone, "us-central1", "a3-megagpu-8g", [zone]) == [
        f"gpu-cluster:gcp.zone = {zone!r} is not a zone name (<region>-<letter>, e.g. "
        "'us-central1-a')"
    ]


def test_vouching_for_a_zone_lifts_only_the_catalog_check() -> None:
    # A catalogued zone whose machine list may be behind Google's.
    assert (
        gcp_catalog_problems(**a_stack(zone="us-central1-f"), allow_uncatalogued=["us-central1-f"])
        == []
    )
    # The region must still be the zone's.
    problems = gcp_catalog_problems(
        **a_stack(zone="us-east7-a", region="us-central1"), allow_uncatalogued=["us-east7-a"]
    )
    assert problems == [
        "gpu-cluster:gcp.region = 'us-central1': gcp.zone 'us-east7-a' is in region 'us-east7'; "
        "set gcp.region to 'us-east7' or pick a zone of 'us-central1'"
    ]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("us-central1-a", "already has a3-megagpu-8g in 'us-central1-a'; remove it"),
        ("e2-standard-4", "already has 'e2-standard-4'; remove it"),
        ("us-east4-a", "which is neither gcp.zone nor gcp.systemPool.machineType; remove it"),
        ("n9-standard-2", "which is neither gcp.zone nor gcp.systemPool.machineType; remove it"),
    ],
)
def test_an_entry_no_value_needs_is_refused(entry: str, expected: str) -> None:
    [message] = gcp_catalog_problems(**a_stack(), allow_uncatalogued=[entry])
    assert message.startswith(f"gpu-cluster:gcp.allowUncatalogued lists {entry!r}")
    assert message.endswith(expected)


@pytest.mark.parametrize("machine_type", CATALOGUED_SYSTEM_TYPES)
def test_every_catalogued_system_pool_machine_is_accepted(machine_type: str) -> None:
    assert system_pool_machine_type_problems(machine_type) == []


@pytest.mark.parametrize(
    "machine_type",
    [
        "e2-custom-4-16384",
        "e2-custom-medium-4096",
        "custom-2-7680",
        "n1-custom-2-7680",
        "n2-custom-8-32768",
        "n2d-custom-8-32768",
        "n4-custom-4-8192",
    ],
)
def test_custom_machines_of_families_that_have_them_are_accepted(machine_type: str) -> None:
    assert system_pool_machine_type_problems(machine_type) == []


@pytest.mark.parametrize(
    ("machine_type", "expected"),
    [
        ("e2-standard-6", "has no such e2 machine; e2 has e2-custom-<vCPUs>-<MiB>, "),
        ("n2-standard-3", "has no such n2 machine; n2 has n2-custom-<vCPUs>-<MiB>, "),
        ("c2-standard-2", "has no such c2 machine; c2 has c2-standard-{4,8,16,30,60}; "),
        ("c2-custom-4-16384", "has no such c2 machine; c2 has c2-standard-{4,8,16,30,60}; "),
        ("e2-custom-0-1024", "has no such e2 machine; "),
        ("e3-standard-4", "family 'e3' is not in the catalog (2026-11-23) of CPU machines"),
        # GPU machines are not for the CPU system pool.
        ("a3-highgpu-8g", "family 'a3' is not in the catalog (2026-11-23) of CPU machines"),
    ],
)
def test_a_system_pool_machine_the_catalog_lacks_is_refused(
    machine_type: str, expected: str
) -> None:
    [message] = gcp_catalog_problems(**a_stack(system_pool_machine_type=machine_type))
    assert message.startswith(f"gpu-cluster:gcp.systemPool.machineType = {machine_type!r}: ")
    assert expected in message
    assert message.endswith(WAYS_OUT)
    assert len(message) <= MAX_MESSAGE
    assert (
        gcp_catalog_problems(
            **a_stack(system_pool_machine_type=machine_type), allow_uncatalogued=[machine_type]
        )
        == []
    )


@pytest.mark.parametrize("nodes", [1, 2, GKE_NODES_PER_POOL_PER_ZONE])
def test_a_pool_up_to_gkes_per_zone_limit_is_accepted(nodes: int) -> None:
    assert node_count_problems(nodes) == []


@pytest.mark.parametrize("nodes", [GKE_NODES_PER_POOL_PER_ZONE + 1, 4096])
def test_a_pool_beyond_gkes_per_zone_limit_is_refused(nodes: int) -> None:
    assert gcp_catalog_problems(**a_stack(nodes=nodes)) == [
        f"gpu-cluster:nodes = {nodes}: a GKE node pool holds at most 1000 nodes per zone "
        "(cloud.google.com/kubernetes-engine/quotas) and the GPU pool's nodes all run in "
        "gcp.zone; use at most 1000"
    ]


@pytest.mark.parametrize("seconds", [None, MAX_RUN_DURATION_MIN_SECONDS, 3600, 7 * 24 * 3600])
def test_a_run_time_compute_engine_accepts_is_accepted(seconds: int | None) -> None:
    assert max_run_duration_problems(seconds) == []


@pytest.mark.parametrize("seconds", [MAX_RUN_DURATION_MIN_SECONDS - 1, 1, 0])
def test_a_run_time_below_compute_engines_minimum_is_refused(seconds: int) -> None:
    flex = a_stack(machine_type="a4-highgpu-8g", zone="us-central1-b")
    assert gcp_catalog_problems(**{**flex, "max_run_duration_seconds": seconds}) == [
        f"gpu-cluster:gcp.maxRunDurationSeconds = {seconds}: Compute Engine accepts a VM "
        "run-time limit of at least 30 seconds (cloud.google.com/compute/docs/instances/"
        "limit-vm-runtime); use 30 or more, or unset it for flex-start's 7 days"
    ]


def test_every_problem_is_reported_at_once() -> None:
    problems = gcp_catalog_problems(
        **a_stack(
            zone="us-central1-x",
            region="us-east4",
            system_pool_machine_type="e2-standard-6",
            nodes=1001,
            max_run_duration_seconds=1,
        ),
        allow_uncatalogued=["nowhere-1-a"],
    )
    keys = [p.split(" ", 1)[0] for p in problems]
    assert keys == [
        "gpu-cluster:gcp.region",
        "gpu-cluster:gcp.zone",
        "gpu-cluster:gcp.systemPool.machineType",
        "gpu-cluster:nodes",
        "gpu-cluster:gcp.maxRunDurationSeconds",
        "gpu-cluster:gcp.allowUncatalogued",
    ]


GKE_STACKS = [
    s
    for s in STACKS
    if settings_from(*engine_config(s), PROVIDER_SETTINGS, as_of=AS_OF)[0].platform == "gke"
]


def test_the_shipped_gke_stacks_are_found() -> None:
    assert {"gcp-a3", "a3-high", "gcp-a4"} <= set(GKE_STACKS)


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_every_shipped_gke_stack_passes_the_catalog(stack: str) -> None:
    # settings_from runs the catalog's checks (config/gke.py) and raises on any problem.
    settings, _ = settings_from(*engine_config(stack), PROVIDER_SETTINGS, as_of=AS_OF)
    gcp = settings.gcp
    assert gcp is not None and not gcp.allow_uncatalogued
    assert gcp.zone in GPU_MACHINE_ZONES[gcp.machine_type]
