"""Contract (issue #23, class 1): nothing a stack sets is silently ignored.

A key that only some configurations read says so beside its field in the schema (`ReadWhen`,
gpu_cluster/config/reads.py). For every shipped stack and every key of the schema (the property
test's KEYS table, which covers the whole schema):
- a key the stack does not read is refused, whatever value it is given, naming the key (or the
  section it is in) and when it would be read;
- but for a network mode's own section under another mode the platform runs it in (`tcp` under
  `rdma`, `rdma` under `tcp` on OpenShift): that section is dormant, kept for the way back with a
  warning and changing nothing, while its keys meet the rules of its own mode;
- a key the stack reads changes what `pulumi up` would do (a resource, its options or an output)
  for at least one value, so "read" is never just a claim. NOT_SHOWN lists, with reasons, the
  few (stack, key) pairs where no single-key edit can show it.
Provider namespaces and stack-file placement are the other ways a key is ignored:
tests/test_ignored_config.py.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pulumi
import pytest
from pydantic import BaseModel

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.loading import settings_from
from gpu_cluster.config.messages import ConfigError, nested_model
from gpu_cluster.config.reads import ReadWhen
from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.gcp_catalog import GPU_MACHINE_ZONES
from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.stack_files import stack_file_config
from tests.as_of import AS_OF
from tests.conftest import BARCELONA_RWX, GKE_RWX, STACKS
from tests.contract import set_key
from tests.edits import edited_config
from tests.test_config_properties import KEYS

GKE_STACKS = {s for s in STACKS if stack_file_config(s)["gpu-cluster:platform"] == "gke"}
# What storage.mode rwx needs beside it on the per-pod stacks, whose classes provision no shared
# (ReadWriteMany) claims: a class that does.
SHARED_CLAIMS = {**dict.fromkeys(GKE_STACKS, GKE_RWX), "barcelona": BARCELONA_RWX}
# Valid values to try beyond the property test's (which favours boundaries and junk).
ALTERNATIVES: dict[str, list[Any]] = {
    "gcp.project": ["other-gpu-project"],
    "gcp.systemPool.diskSizeGb": [200],
    "gcp.systemPool.maxNodes": [20],
    "launcher.deepspeed.precision": ["fp16"],
    "rdma.bootstrapInterface": ["eth1"],
    "rdma.ibTimeout": [20],
    "rdma.nics[0].network": ["eno9np0-network"],
    "tcp.nsocksPerThread": [2],
    "pod.cpuLimit": ["500"],
    "storage.volumes[0].name": ["corpus"],
}
VOLUME = "storage.volumes[0]"
PRIORITY = "workload.queue.priorityClasses[0]"
EXISTING_CLAIM = (f"{VOLUME}.sharedClaim.claimName", "team-volume")
BUCKET = (f"{VOLUME}.gcsFuse.bucket", "team-volume")
LUSTRE = (
    (f"{VOLUME}.managedLustre.instance", "team-lustre"),
    (f"{VOLUME}.managedLustre.capacityGib", 36000),
)


def _volume(*source: tuple[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A whole writable volume at storage.volumes[0] from `source` (in place of gcp-a4's
    read-only bucket)."""
    only = (
        ()
        if any(key.startswith(f"{VOLUME}.gcsFuse") for key, _ in source)
        else ((f"{VOLUME}.gcsFuse", None),)
    )
    named = ((f"{VOLUME}.name", "volume"), (f"{VOLUME}.mountPath", "/volume"))
    return (*named, (f"{VOLUME}.readOnly", False), *only, *source)


# Edits a key needs beside it to be valid at all, applied to the baseline too (and, for a
# list item's key, to the refusal of an unread one: the item is complete but for that key).
COMPANIONS: dict[str, tuple[tuple[str, Any], ...]] = {
    **{
        f"codeSync.{key}": (("codeSync.repo", "https://github.com/org/repo.git"),)
        for key in ("ref", "period", "credentialsSecret", "image")
    },
    # GPUDirect modes fix the machine (and, below, serve whole machines).
    "gcp.machineType": (("networkMode", "tcp"),),
    # Flex-start brings its own placement.
    "gcp.placementMaxDistance": (("gcp.provisioning", "spot"),),
    # Preloaded images are read through image streaming.
    "gcp.secondaryBootDiskImage": (("gcp.imageStreaming", True),),
    # A data volume's key needs the rest of a volume: a name, a path and one source.
    **{
        f"{VOLUME}.{key}": _volume(EXISTING_CLAIM)
        for key in ("name", "mountPath", "readOnly", "minWriteGbps", "minReadGbps")
    },
    f"{VOLUME}.sharedClaim.claimName": _volume(EXISTING_CLAIM),
    **{
        f"{VOLUME}.sharedClaim.{key}": _volume(
            (f"{VOLUME}.sharedClaim.size", "1Ti"), (f"{VOLUME}.sharedClaim.storageClass", "rwx")
        )
        for key in ("size", "storageClass")
    },
    **{f"{VOLUME}.gcsFuse.{key}": _volume(BUCKET) for key in ("bucket", "mode", "onlyDir", "use")},
    **{
        f"{VOLUME}.managedLustre.{key}": _volume(*LUSTRE)
        for key in ("instance", "mode", "capacityGib", "throughput", "filesystem")
    },
    # A priority class is a name and a value.
    **{
        f"{PRIORITY}.{key}": ((f"{PRIORITY}.name", "high"), (f"{PRIORITY}.value", 1000))
        for key in ("name", "value")
    },
    f"{VOLUME}.managedLustre.mountPoint": _volume(
        *LUSTRE,
        (f"{VOLUME}.managedLustre.mode", "reference"),
        (f"{VOLUME}.managedLustre.mountPoint", "10.90.1.4@tcp:/lustrefs"),
    ),
}
# Keys read on a stack whose every accepted single-key edit renders the same, with the reason
# and where the key is shown read instead.
NOT_SHOWN: dict[tuple[str, str], str] = {
    **{
        (stack, "kubernetesVersion"): "gates features (native sidecars, the pod-index label); "
        "on GKE it must equal gcp.minMasterVersion's minor"
        for stack in STACKS
    },
    **{
        (stack, "platform"): "switching platform is a new config (every other test shows it)"
        for stack in STACKS
    },
    **{
        (stack, "workload.kind"): "a JobSet needs workload.command (and, on a per-pod stack, "
        "storage.mode rwx) beside it (tests/test_jobset.py)"
        for stack in STACKS
    },
    **{
        (stack, f"{VOLUME}.managedLustre.mode"): "reference needs managedLustre.mountPoint beside "
        "it, which create refuses (tests/test_volumes.py renders both)"
        for stack in GKE_STACKS
    },
    # gcp-a4: a queued JobSet on a flex-start pool with queued provisioning (#44 item 1).
    ("gcp-a4", "gcp.provisioning"): "another capacity type leaves gcp.queuedProvisioning unread: "
    "it goes beside it (tests/test_edit_matrix.py)",
    ("gcp-a4", "gcp.placementMaxDistance"): "needs a capacity type other than flex-start, which "
    "leaves gcp.queuedProvisioning unread (tests/test_edit_matrix.py)",
    ("gcp-a4", "storage.mode"): "per-pod claims need workload.kind statefulset beside it "
    "(tests/test_data_safety.py)",
    ("gcp-a4", "workload.queue.mode"): "reference leaves gcp.queuedProvisioning's check no queue "
    "of the stack's (refused: tests/test_bad_config.py)",
    **{
        ("gcp-a4", f"workload.queue.{key}"): "a flex-start pool starts empty: no topology-aware "
        "placement, which this needs (refused: tests/test_jobset.py)"
        for key in ("healthGate.enabled", "requiredLevel", "topologyLevels")
    },
    ("nerc-production", "networkMode"): "switching to rdma needs the NIC list (test_openshift)",
    ("barcelona", "rdma.networkAttachments"): "create and adopt need the NADs' ranges "
    "(test_openshift, BARCELONA_CREATES_NADS)",
    ("barcelona", "rdma.nics[0].hca"): "all NICs or none (test_openshift PINNED)",
    **{
        (stack, "gcp.allowUncatalogued"): "lifts a catalog check (tests/test_gcp_catalog.py)"
        for stack in GKE_STACKS
    },
    **{
        (stack, "secretEnv"): "a Pulumi secret, set plain here and refused as such "
        "(tests/test_secrets.py shows its tokens reach the Secret)"
        for stack in STACKS
    },
    ("a3-high", "gcp.gpudirectRelease"): "one TCPX release is published for GKE 1.35",
    ("gcp-a4", "gcp.gpudirectRelease"): "one gIB release is published",
    **{
        (stack, "storage.storageClassMode"): "every accepted value is the class's resolved "
        "default (tests/test_gke_storage.py shows it read on gcp-a4 with Hyperdisk)"
        for stack in STACKS
    },
}

# Keys of a dormant section no single-key edit can set validly, with the reason: held to their
# own mode's rules, they are refused as there.
NOT_KEPT = {"rdma.nics[0].hca": "all NICs or none (test_openshift PINNED)"}


def _rules(key: str) -> list[ReadWhen]:
    """The ReadWhen rules on `key` and on the sections above it, outermost first."""
    model: type[BaseModel] | None = Settings
    found: list[ReadWhen] = []
    for part in re.sub(r"\[\d+\]", "", key).split("."):
        assert model is not None, key
        field = next(f for n, f in model.model_fields.items() if (f.alias or n) == part)
        found += [m for m in field.metadata if isinstance(m, ReadWhen)]
        model = nested_model(field.annotation)
    return found


def _dormant(variant: Variant, key: str) -> str | None:
    """The network mode's own section `key` is in, when the variant keeps it dormant: `tcp`
    under any other mode, `rdma` under another mode on OpenShift (on GKE there is none)."""
    settings, section = _settings(variant), re.split(r"[.\[]", key)[0]
    if section == "tcp" and settings.network_mode != "tcp":
        return section
    if section == "rdma" and settings.platform == "openshift" and settings.network_mode != "rdma":
        return section
    return None


def _lone(variant: Variant, key: str) -> bool:
    """A key of a dormant rdma block the variant does not set: alone, it is a new, incomplete
    section, refused as such (test_bad_config); barcelona switched to tcp has the block."""
    return _dormant(variant, key) == "rdma" and not _sets_rdma(variant)


@functools.cache
def _sets_rdma(variant: Variant) -> bool:
    """Whether the variant's config has an rdma block (read once per variant, not per key)."""
    return "gpu-cluster:rdma" in edited_config(*variant)[0]


def _unread_by(variant: Variant, key: str) -> ReadWhen | None:
    """The rule that makes `key` unread in `variant`, or None when the variant reads it (a
    dormant section's keys: when it would, in its own mode)."""
    settings, section = _settings(variant), _dormant(variant, key)
    if section is not None:
        settings = settings.model_copy(update={"network_mode": section})
    return next((r for r in _rules(key) if not r.applies(settings)), None)


@functools.cache
def _settings(variant: Variant) -> Settings:
    return settings_from(*edited_config(*variant), PROVIDER_SETTINGS, as_of=AS_OF)[0]


def _fingerprint(run: ProgramRun) -> str:
    resources = [(r.type, r.name, r.inputs, r.options) for r in run.resources]
    return json.dumps([resources, run.outputs], sort_keys=True, default=str)


def _run(variant: Variant, edits: tuple[tuple[str, Any], ...]) -> ProgramRun | str:
    """The run with `edits` applied, or the refusal's message."""
    stack = variant[0]
    config, secret_keys = edited_config(*variant)
    for key, value in edits:
        set_key(config, key, value)
    run = ProgramRun()
    try:
        run_program(config, secret_keys, stack, record_into=run)
    except pulumi.RunError as exc:
        assert run.resources == [], "registered resources before refusing"
        return str(exc)
    return run


Variant = tuple[str, tuple[str, ...]]
SHIPPED: list[Variant] = [(stack, ()) for stack in STACKS]
# Switches no shipped stack sets, so that every rule of the schema is exercised.
SWITCHED: list[Variant] = [
    ("barcelona", ("verify.enabled=false",)),
    # Its rdma block dormant.
    ("barcelona", ("networkMode=tcp",)),
    ("gcp-a3", ("networkMode=tcp",)),
    ("nerc-production", ("!storage",)),
    (
        "nerc-production",
        ("workload.kind=jobset", "workload.command[0]=train.py", "workload.queue.mode=reference"),
    ),
    # A queue without the node health gate.
    ("nerc-production", ("workload.kind=jobset", "workload.command[0]=train.py")),
    # The gate without the stack's own runner.
    (
        "gcp-a3",
        (
            "workload.kind=jobset",
            "workload.command[0]=train.py",
            *GKE_RWX,
            "workload.queue.healthGate.enabled=true",
        ),
    ),
    # The runs' metrics without the ledger exporter (a StatefulSet stack).
    ("nerc-production", ("monitoring.runMetrics.enabled=true",)),
]
UNREAD = [
    (v, k) for v in SHIPPED + SWITCHED for k in sorted(KEYS) if _unread_by(v, k) and not _lone(v, k)
]
# Keys of dormant sections that their own mode reads.
DORMANT = [
    (v, k)
    for v in SHIPPED + SWITCHED
    for k in sorted(KEYS)
    if _dormant(v, k) and not _unread_by(v, k) and not _lone(v, k)
]
READ = [
    (v, k) for v in SHIPPED for k in sorted(KEYS) if not _unread_by(v, k) and not _dormant(v, k)
]
# The read keys a single-key edit can show read (NOT_SHOWN says why the others cannot).
SHOWN = [(v, k) for v, k in READ if (v[0], k) not in NOT_SHOWN]


def _id(case: tuple[Variant, str]) -> str:
    (stack, overrides), key = case
    return " ".join((stack, *overrides, key))


@pytest.mark.parametrize("case", UNREAD, ids=map(_id, UNREAD))
def test_a_key_the_stack_does_not_read_is_refused(case: tuple[Variant, str]) -> None:
    variant, key = case
    values = [v for v in KEYS[key] if v is not None]  # an explicit null is the key left out
    companions = COMPANIONS.get(key, ()) if key.startswith((VOLUME, PRIORITY)) else ()
    said = []
    for value in values:
        outcome = _run(variant, (*companions, (key, value)))
        assert isinstance(outcome, str), f"{key}={value!r} accepted on {variant} but not read"
        said.append(outcome)
    # Named with why it is not read: by its rule, or by a rule of its own section (a sriov NIC
    # "takes its device from 'resource'; remove 'master'").
    sections = [key[: m.start()] for m in re.finditer(r"\.|\[|$", key)]
    assert any(
        f"gpu-cluster:{section} is only used when" in message
        or (f"gpu-cluster:{section}:" in message and f"remove '{key.split('.')[-1]}'" in message)
        for message in said
        for section in sections
    ), said


@pytest.mark.parametrize("case", DORMANT, ids=map(_id, DORMANT))
def test_a_dormant_sections_key_is_kept_with_a_warning_and_changes_nothing(
    case: tuple[Variant, str],
) -> None:
    variant, key = case
    section = _dormant(variant, key)
    note = (
        f"gpu-cluster:{section} is kept but not used while networkMode is "
        f"{_settings(variant).network_mode!r}; it is used again when networkMode is {section!r}"
    )
    base = _fingerprint_of(variant, ())
    kept = []
    for value in [v for v in KEYS[key] if v is not None]:
        outcome = _run(variant, ((key, value),))
        if isinstance(outcome, str):  # a bad value, refused as in its own mode
            assert f"gpu-cluster:{section} is only used when" not in outcome, outcome
            continue
        assert _fingerprint(outcome) == base, f"{key}={value!r} changed {variant}"
        assert note in outcome.warnings
        kept.append(value)
    if key in NOT_KEPT:
        assert kept == [], f"{key} is listed in NOT_KEPT but kept {kept}"
    else:
        assert kept, f"no value of {key} was kept on {variant}"


def test_every_key_not_shown_read_is_read() -> None:
    """NOT_SHOWN names only keys the stack reads: one it stops reading leaves the list (and is
    then refused, above)."""
    read = {(variant[0], key) for variant, key in READ}
    assert set(NOT_SHOWN) - read == set()


@pytest.mark.parametrize("case", SHOWN, ids=map(_id, SHOWN))
def test_a_key_the_stack_reads_changes_what_it_deploys(case: tuple[Variant, str]) -> None:
    variant, key = case
    companions = COMPANIONS.get(key, ())
    if key == "gpusPerNode" and variant[0] in GKE_STACKS:
        companions = (("networkMode", "tcp"),)
    if key == "storage.mode" and variant[0] in SHARED_CLAIMS:
        companions = tuple(
            (name, value)
            for name, _, value in (o.partition("=") for o in SHARED_CLAIMS[variant[0]][1:])
        )
    base = _fingerprint_of(variant, companions)
    base_settings = _accepted_settings(variant, companions)
    for value in [*KEYS[key], *ALTERNATIVES.get(key, []), *_catalogued(variant, key)]:
        # A region moves with a zone in it that offers the machine, a zone with its region.
        beside: tuple[tuple[str, Any], ...] = ()
        if key == "gcp.region":
            beside = (("gcp.zone", _zone_in(variant, value)),)
        elif key == "gcp.zone" and isinstance(value, str):
            beside = (("gcp.region", value.rpartition("-")[0]),)
        edits = (*companions, *beside, (key, value))
        # A value that leaves the settings as the baseline's (the default, written out) cannot
        # change what the program deploys from them: rendered only when it changes them.
        if _accepted_settings(variant, edits) == base_settings:
            continue
        outcome = _run(variant, edits)
        if isinstance(outcome, ProgramRun) and _fingerprint(outcome) != base:
            return
    pytest.fail(f"no value of {key} changed {variant}'s resources, options or outputs")


def _accepted_settings(
    variant: Variant, edits: tuple[tuple[str, Any], ...]
) -> tuple[Settings, list[str]] | None:
    """The settings and warnings `edits` give; None when they are refused (the run then says
    more)."""
    config, secret_keys = edited_config(*variant)
    for key, value in edits:
        set_key(config, key, value)
    try:
        return settings_from(config, secret_keys, PROVIDER_SETTINGS, as_of=AS_OF)
    except ConfigError:
        return None


@functools.cache
def _fingerprint_of(variant: Variant, edits: tuple[tuple[str, Any], ...]) -> str:
    """The fingerprint of the run with `edits`, which must be accepted (one run per baseline)."""
    run = _run(variant, edits)
    assert isinstance(run, ProgramRun), run
    return _fingerprint(run)


def _zones(variant: Variant) -> tuple[str, ...]:
    """The zones the catalog has the variant's GPU machine in."""
    gcp = _settings(variant).gcp
    return GPU_MACHINE_ZONES[gcp.machine_type] if gcp else ()


def _catalogued(variant: Variant, key: str) -> list[str]:
    """Zones and regions that offer the variant's machine, as values of gcp.zone / gcp.region."""
    zones = _zones(variant)
    if key == "gcp.zone":
        return list(zones[:3])
    if key == "gcp.region":
        return sorted({z.rpartition("-")[0] for z in zones})[:3]
    return []


def _zone_in(variant: Variant, region: object) -> str:
    return next((z for z in _zones(variant) if z.startswith(f"{region}-")), f"{region}-a")


def test_the_unread_cases_cover_each_kind_of_rule() -> None:
    rules = {_unread_by(variant, key) for variant, key in UNREAD}
    rules |= {_rules(key)[0] for _, key in DORMANT}
    models: list[type[BaseModel]] = [Settings, *_sections(Settings)]
    declared = {
        m
        for model in models
        for f in model.model_fields.values()
        for m in f.metadata
        if isinstance(m, ReadWhen)
    }
    # Every declared rule is exercised by a shipped stack or a SWITCHED variant (a dormant
    # section's by its keys kept).
    assert declared - rules == set()


def _sections(model: type[BaseModel]) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    for f in model.model_fields.values():
        nested = nested_model(f.annotation)
        if nested is not None:
            found += [nested, *_sections(nested)]
    return found
