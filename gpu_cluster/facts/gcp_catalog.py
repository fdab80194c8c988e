"""Where a GKE stack can run, as the catalog below records it on CATALOG_DATE: Compute Engine's
zones, the zones that offer each GPU machine type the program supports, the machine types the
CPU system pool may use, and the GKE and Compute Engine limits on a pool's size and a node's run
time. Pure data plus lookups; gpu_cluster/config/catalog_rules.py turns it into config messages.

Every table names its source. The zone tables are Compute Engine's own listing
(`machineTypes.list` per zone of `zones.list`) as skypilot-org/skypilot-catalog records it,
because the stored copies of Google's "GPU regions and zones" page
(cloud.google.com/compute/docs/gpus/gpu-regions-zones) reached here without their tables.

What the program does with a value the catalog lacks (a zone Google opened after CATALOG_DATE,
a machine type added since): it refuses it, before any resource is registered, naming
CATALOG_DATE and the two ways out: refresh the catalog, or vouch for that one value in
`gcp.allowUncatalogued` (config/catalog_rules.py says why refusing beats warning).

How to refresh (any `gcloud` with a project that has the Compute Engine API):
1. GPU zones: `gcloud compute machine-types list --format="value(name,zone)"
   --filter="name=(a3-megagpu-8g a3-highgpu-8g a3-ultragpu-8g a4-highgpu-8g)"` lists every
   zone offering each machine type (the listing the skypilot catalog is built from); compare with
   Google's GPU regions and zones page and replace the tuples in GPU_MACHINE_ZONES.
2. Zones: `gcloud compute zones list --format="value(name)"`; update ZONE_LETTERS.
3. System pool shapes: `gcloud compute machine-types list --zones=<zone> --format="value(name)"`
   for the families in SYSTEM_POOL_MACHINE_TYPES; add a family's shapes only from such a listing
   or Google's machine-family pages.
4. Set CATALOG_DATE and each table's source comment (what was read, and when), then run
   `python -m pytest tests/test_gcp_catalog.py`: it checks the shipped stacks still pass and
   that every machine type the schema accepts has zones here. CATALOG_DATE is also the date the
   tests and snapshots are checked as of (tests/as_of.py): a shipped stack whose GKE minor has
   left support, or leaves it within the notice period, by the new date fails them.

GKE versions are not repeated here: the minors that exist, and until when each is supported,
are GKE_END_OF_STANDARD_SUPPORT (gpu_cluster/facts/gpudirect.py), which settings validation
checks `gcp.minMasterVersion` against as of the render's date (config/dates.py). Which exact
`1.N.P-gke.B` patches exist is not catalogued: GKE offers a moving window of patches per channel
and zone, which only `gcloud container get-server-config --zone <zone>` shows at the time; the
`1.N` form (GKE picks the newest patch) cannot name one that does not exist.
"""

from __future__ import annotations

import re
from datetime import date

# The day the tables below were last checked against their sources.
CATALOG_DATE = date(2026, 11, 23)

# Zones that exist, by region: region -> zone letters. Source: Compute Engine's zones.list as
# skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv at 8427bbf records it (its e2-standard-8
# rows, which span every region the catalog has; every GPU zone below is among them), consulted
# 2026-11-23. Not listed: us-central2, a TPU-only zone (skypilot-org/skypilot sky/catalog/
# data_fetchers/fetch_gcp.py `TPU_V4_ZONES` at 21fd554). A region opened since is refused until
# the catalog is refreshed or the zone vouched for.
ZONE_LETTERS: dict[str, str] = {
    "africa-south1": "abc",
    "asia-east1": "abc",
    "asia-east2": "abc",
    "asia-northeast1": "abc",
    "asia-northeast2": "abc",
    "asia-northeast3": "abc",
    "asia-south1": "abc",
    "asia-south2": "abc",
    "asia-southeast1": "abc",
    "asia-southeast2": "abc",
    "australia-southeast1": "abc",
    "australia-southeast2": "abc",
    "europe-central2": "abc",
    "europe-north1": "abc",
    "europe-north2": "abc",
    "europe-southwest1": "abc",
    "europe-west1": "bcd",
    "europe-west10": "abc",
    "europe-west12": "abc",
    "europe-west2": "abc",
    "europe-west3": "abc",
    "europe-west4": "abc",
    "europe-west6": "abc",
    "europe-west8": "abc",
    "europe-west9": "abc",
    "me-central1": "abc",
    "me-central2": "abc",
    "me-west1": "abc",
    "northamerica-northeast1": "abc",
    "northamerica-northeast2": "abc",
    "northamerica-south1": "abc",
    "southamerica-east1": "abc",
    "southamerica-west1": "abc",
    "us-central1": "abcf",
    "us-east1": "bcd",
    "us-east4": "abc",
    "us-east5": "abc",
    "us-south1": "abc",
    "us-west1": "abc",
    "us-west2": "abc",
    "us-west3": "abc",
    "us-west4": "abc",
}
ZONES: frozenset[str] = frozenset(
    f"{region}-{letter}" for region, letters in ZONE_LETTERS.items() for letter in letters
)

# Zones offering each GPU machine type the schema accepts (gcp.machineType: the records of
# facts/machines.py, kept here rather than in them because this catalog is refreshed as a whole from
# one listing and dated by CATALOG_DATE; tests/test_machines.py checks each has zones). Source:
# Compute Engine's per-zone machineTypes.list as skypilot-org/skypilot-catalog
# catalogs/v8/gcp/vms.csv records it at 8427bbf and at 006059e (both agree on these four; consulted
# 2026-11-23). That catalog drops a zone only when it finds no price for it, so a list may miss a
# zone, never add one. Google's GPU regions and zones page could not be read here to cross-check
# (see above).
GPU_MACHINE_ZONES: dict[str, tuple[str, ...]] = {
    "a3-megagpu-8g": (
        "asia-east1-c",
        "asia-northeast1-b",
        "asia-southeast1-b",
        "asia-southeast1-c",
        "australia-southeast1-c",
        "europe-north1-c",
        "europe-west1-b",
        "europe-west1-c",
        "europe-west3-c",
        "europe-west4-b",
        "europe-west4-c",
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
        "us-east4-a",
        "us-east4-b",
        "us-east4-c",
        "us-east5-a",
        "us-west1-a",
        "us-west1-b",
        "us-west4-a",
    ),
    "a3-highgpu-8g": (
        "asia-east1-c",
        "asia-northeast1-b",
        "asia-south1-c",
        "asia-south2-b",
        "asia-southeast1-b",
        "asia-southeast1-c",
        "australia-southeast1-c",
        "europe-north1-c",
        "europe-west1-b",
        "europe-west1-c",
        "europe-west3-c",
        "europe-west4-b",
        "europe-west4-c",
        "europe-west9-c",
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
        "us-east4-a",
        "us-east4-b",
        "us-east4-c",
        "us-east5-a",
        "us-west1-a",
        "us-west1-b",
        "us-west4-a",
    ),
    "a3-ultragpu-8g": (
        "asia-south1-b",
        "asia-south2-c",
        "europe-west1-b",
        "europe-west4-a",
        "us-central1-b",
        "us-east4-b",
        "us-east5-a",
        "us-south1-b",
        "us-west1-c",
    ),
    "a4-highgpu-8g": (
        "asia-northeast1-b",
        "asia-southeast1-b",
        "europe-north1-b",
        "europe-west4-b",
        "us-central1-b",
        "us-east1-b",
        "us-east4-b",
        "us-south1-b",
        "us-west2-c",
        "us-west3-b",
        "us-west3-c",
    ),
}


def _types(family: str, kinds: str, sizes: str, suffix: str = "") -> tuple[str, ...]:
    """('e2', 'standard highcpu', '2 4') -> e2-standard-2, e2-standard-4, e2-highcpu-2, ..."""
    return tuple(f"{family}-{k}-{n}{suffix}" for k in kinds.split() for n in sizes.split())


_ALL = "standard highmem highcpu"
_C3D = "4 8 16 30 60 90 180 360"
_C3D_LSSD = "8 16 30 60 90 180 360"
# Predefined CPU machine types the system pool may use, by family: the union of two listings of
# Compute Engine's predefined types, kubernetes/autoscaler cluster-autoscaler/cloudprovider/gce/
# gce_price_info.go `instancePrices` at 5a172bc and terraform-linters/tflint-ruleset-google
# rules/utils.go `validMachineTypes` at 0e702b3 (consulted 2026-11-23); where they differ (only
# n2-highcpu-128, in the first) the type is kept, as the check is "plausibly exists". GPU and
# TPU machines are left out: the system pool is the untainted CPU pool for GKE's own pods.
# Families neither listing has (c4a, c4d, n4d, ...) and newer C4 sizes are not here yet.
SYSTEM_POOL_MACHINE_TYPES: dict[str, frozenset[str]] = {
    "c2": frozenset(_types("c2", "standard", "4 8 16 30 60")),
    "c2d": frozenset(_types("c2d", _ALL, "2 4 8 16 32 56 112")),
    "c3": frozenset(
        (
            *_types("c3", _ALL, "4 8 22 44 88 176"),
            *_types("c3", "standard", "4 8 22 44 88 176", "-lssd"),
            *_types("c3", _ALL, "192", "-metal"),
        )
    ),
    "c3d": frozenset(
        (
            *_types("c3d", _ALL, _C3D),
            *_types("c3d", "standard highmem", _C3D_LSSD, "-lssd"),
        )
    ),
    "c4": frozenset(_types("c4", _ALL, "2 4 8 16 32 48 96 192")),
    "e2": frozenset(
        (
            *_types("e2", "standard highcpu", "2 4 8 16 32"),
            *_types("e2", "highmem", "2 4 8 16"),
            "e2-micro",
            "e2-small",
            "e2-medium",
        )
    ),
    # N1's shared-core types carry prefixes of their own.
    "f1": frozenset({"f1-micro"}),
    "g1": frozenset({"g1-small"}),
    "h3": frozenset({"h3-standard-88"}),
    "m1": frozenset(("m1-megamem-96", *_types("m1", "ultramem", "40 80 160"))),
    "m2": frozenset(("m2-megamem-416", "m2-hypermem-416", *_types("m2", "ultramem", "208 416"))),
    "m3": frozenset((*_types("m3", "megamem", "64 128"), *_types("m3", "ultramem", "32 64 128"))),
    "n1": frozenset(
        (
            "n1-standard-1",
            *_types("n1", _ALL, "2 4 8 16 32 64 96"),
            "n1-megamem-96",
            *_types("n1", "ultramem", "40 80 160"),
        )
    ),
    "n2": frozenset(_types("n2", _ALL, "2 4 8 16 32 48 64 80 96 128")),
    "n2d": frozenset(
        (
            *_types("n2d", "standard highcpu", "2 4 8 16 32 48 64 80 96 128 224"),
            *_types("n2d", "highmem", "2 4 8 16 32 48 64 80 96"),
        )
    ),
    "n4": frozenset(_types("n4", _ALL, "2 4 8 16 32 48 64 80")),
    "t2a": frozenset(_types("t2a", "standard", "1 2 4 8 16 32 48")),
    "t2d": frozenset(_types("t2d", "standard", "1 2 4 8 16 32 48 60")),
    "x4": frozenset(_types("x4", "megamem", "960 1440 1920", "-metal")),
    "z3": frozenset(_types("z3", "highmem", "88 176")),
}

# Custom machine types: <family>-custom-<vCPUs>-<memory MiB> for E2, N1, N2, N2D and N4, plain
# custom-<vCPUs>-<MiB> for N1, and E2's shared-core e2-custom-{micro,small,medium}-<MiB>
# (kubernetes/autoscaler cluster-autoscaler/cloudprovider/gce/machine_types.go at e7353a5;
# n4-custom from tflint-ruleset-google rules/utils.go `isCustomType` at 0e702b3). Only the form
# is checked: the vCPU and memory rules per family are not catalogued, and Compute Engine refuses
# a bad combination at pool creation. Extended-memory names (`-ext`) are not catalogued.
CUSTOM_MACHINE_TYPE = re.compile(
    r"^(?:(?:e2|n1|n2|n2d|n4)-)?custom-(?:[1-9][0-9]*)-(?:[1-9][0-9]*)$"
    r"|^e2-custom-(?:micro|small|medium)-(?:[1-9][0-9]*)$"
)

# Nodes one GKE node pool may have in one zone (GKE Standard): 1,000. cloud.google.com/
# kubernetes-engine/quotas, "Limits per cluster", row "Nodes per node pool zone" (consulted
# 2026-11-23; the same figure in each stored version read). The program's clusters are
# zonal and the GPU pool's nodes all live in gcp.zone, so this caps `nodes`.
GKE_NODES_PER_POOL_PER_ZONE = 1000

# Shortest run-time limit Compute Engine accepts for a VM (maxRunDuration): 30 seconds; the
# longest is 120 days. cloud.google.com/compute/docs/instances/limit-vm-runtime, "Restrictions"
# (read in the page's zh-CN rendering, the only stored copy whose list reached here: shortest
# limit 30 seconds, longest 120 days; consulted 2026-11-23). GKE's own field, NodeConfig
# maxRunDuration ("the maximum duration for the nodes to exist", container v1 API reference),
# states no bounds, and its flex-start pages (cloud.google.com/kubernetes-engine/docs/concepts/
# dws) give only the 7-day maximum, which the schema holds as FLEX_START_MAX_SECONDS. Not
# confirmed: whether GKE or flex-start VMs enforce a higher minimum than Compute Engine's.
MAX_RUN_DURATION_MIN_SECONDS = 30


def region_of(zone: str) -> str:
    """'us-central1-a' -> 'us-central1' (a zone is its region plus '-<letter>')."""
    return zone.rpartition("-")[0]


def machine_family(machine_type: str) -> str:
    """'n2d-standard-4' -> 'n2d'; a plain custom type ('custom-4-16384') is N1's."""
    family = machine_type.split("-", 1)[0]
    return "n1" if family == "custom" else family
