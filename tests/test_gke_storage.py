"""The StorageClass a GKE stack's claims name exists when the claims are created: GKE installs
standard-rwo, premium-rwo and standard; the stack creates the Hyperdisk Balanced class; any
other class is refused by name unless the stack says it exists (storage.storageClassMode)."""

from __future__ import annotations

import pytest

from gpu_cluster.config.storage_rules import storage_class_problems
from gpu_cluster.facts.gke_storage import (
    CREATABLE_CLASSES,
    FILESTORE_CLASSES,
    GKE_PREINSTALLED_CLASSES,
    HYPERDISK_BALANCED,
)
from gpu_cluster.offline.engine import ProgramRun, RecordedResource
from gpu_cluster.offline.render import kubernetes_yaml
from gpu_cluster.plan.gke_storage import resolved_mode, storage_class_to_create
from tests.conftest import STACKS, manifests, plan_from, run_stack
from tests.edits import A4_STATEFULSET

STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
COMPONENT = "gpu-cluster:gke_storage:GkeStorageClass"
PLATFORM_URN = "urn:pulumi:gcp-a4::gpu-cluster::gpu-cluster:gke:GkePlatform::gpu-cluster"


def storage_classes(run: ProgramRun) -> list[str]:
    return [m["metadata"]["name"] for m in manifests(run, "StorageClass")]


def workload_claims(run: ProgramRun) -> list[RecordedResource]:
    """The workspace and datasets claims (a stack's data volumes are TrainingStorage's)."""
    return [c for c in run.of_type(PVC) if "TrainingWorkload" in c.parent]


def test_the_a4_stack_creates_the_hyperdisk_class_its_claims_name() -> None:
    run = run_stack("gcp-a4", *A4_STATEFULSET)
    (resource,) = run.of_type(STORAGE_CLASS)
    manifest = resource.inputs
    assert manifest["metadata"]["name"] == "hyperdisk-balanced"
    assert manifest["provisioner"] == "pd.csi.storage.gke.io"
    assert manifest["parameters"]["type"] == "hyperdisk-balanced"
    assert manifest["volumeBindingMode"] == "WaitForFirstConsumer"
    assert manifest["allowVolumeExpansion"] is True
    claims = workload_claims(run)
    assert len(claims) == 4  # workspace and datasets for each of the 2 pods
    for claim in claims:
        assert claim.inputs["spec"]["storageClassName"] == manifest["metadata"]["name"]
        assert resource.urn in claim.options["dependsOn"], claim.name


def test_the_class_is_a_name_prefixed_child_of_its_component_under_the_platform() -> None:
    run = run_stack("gcp-a4", *A4_STATEFULSET)
    (resource,) = run.of_type(STORAGE_CLASS)
    (component,) = run.of_type(COMPONENT)
    assert resource.name == "gpu-cluster-storage-class"
    assert resource.parent == component.urn and component.parent == PLATFORM_URN
    # In the new cluster, through the provider built from its endpoint, like every object.
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    assert resource.options["provider"] == provider.urn.split("::")[-1] + "-id"


def test_destroy_deletes_the_class_it_holds_no_data() -> None:
    """Kept claims keep their volumes without it; a retained class would make the next
    `pulumi up` fail on the leftover (AlreadyExists)."""
    for overrides in ((), ("storage.retainOnDelete=false",)):
        (resource,) = run_stack("gcp-a4", *A4_STATEFULSET, *overrides).of_type(STORAGE_CLASS)
        assert resource.options["retainOnDelete"] is False
        assert resource.options["protect"] is False


def test_the_class_comes_before_the_claims_in_the_rendered_yaml() -> None:
    rendered = kubernetes_yaml(run_stack("gcp-a4", *A4_STATEFULSET))
    kinds = [line.removeprefix("kind: ") for line in rendered.splitlines()]
    kinds = [k for k in kinds if k in ("StorageClass", "PersistentVolumeClaim")]
    assert kinds[0] == "StorageClass" and kinds.count("StorageClass") == 1


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        ("gcp-a3", ()),  # premium-rwo: GKE installs it
        ("a3-high", ()),
        ("gcp-a3", ("storage.storageClass=standard-rwo",)),
        ("gcp-a3", ("storage.storageClass=standard",)),
        ("gcp-a4", ()),  # standard-rwx: GKE installs it with the Filestore driver
        ("gcp-a4", (*A4_STATEFULSET, "storage.storageClassMode=reference")),  # made outside
        ("barcelona", ()),
        ("nerc-production", ()),
        ("barcelona", ("storage.storageClass=hyperdisk-balanced",)),  # OpenShift: its own
    ],
)
def test_no_class_is_created_for_one_the_cluster_has(
    stack: str, overrides: tuple[str, ...]
) -> None:
    run = run_stack(stack, *overrides)
    assert storage_classes(run) == []
    assert all(c.options["dependsOn"] == [] for c in workload_claims(run))


def test_a_referenced_class_keeps_the_claims_as_they_are() -> None:
    created, referenced = (
        run_stack("gcp-a4", *A4_STATEFULSET),
        run_stack("gcp-a4", *A4_STATEFULSET, "storage.storageClassMode=reference"),
    )
    assert [c.inputs for c in created.of_type(PVC)] == [c.inputs for c in referenced.of_type(PVC)]
    # Switching to a class made outside the stack deletes ours and replaces no claim.
    steps = [
        s
        for s in plan_from("gcp-a4", A4_STATEFULSET, ("storage.storageClassMode=reference",))
        if s.op != "update"
    ]
    assert [(s.type, s.op) for s in steps] == [
        (COMPONENT, "delete"),
        (STORAGE_CLASS, "delete"),
    ]


def test_gke_stacks_create_a_hyperdisk_class_when_asked() -> None:
    run = run_stack("gcp-a3", "storage.storageClass=hyperdisk-balanced")
    assert storage_classes(run) == ["hyperdisk-balanced"]


def test_every_creatable_class_is_one_gke_does_not_install() -> None:
    assert set(CREATABLE_CLASSES).isdisjoint(GKE_PREINSTALLED_CLASSES)
    assert CREATABLE_CLASSES["hyperdisk-balanced"] is HYPERDISK_BALANCED
    for name, spec in CREATABLE_CLASSES.items():
        assert spec.name == name


@pytest.mark.parametrize(
    ("platform", "storage_class", "mode", "resolved", "created"),
    [
        ("gke", "hyperdisk-balanced", None, "create", True),
        ("gke", "hyperdisk-balanced", "create", "create", True),
        ("gke", "hyperdisk-balanced", "reference", "reference", False),
        ("gke", "premium-rwo", None, "reference", False),
        ("gke", "my-class", "reference", "reference", False),
        ("gke", None, None, None, False),
        ("openshift", "hyperdisk-balanced", None, "reference", False),
        ("openshift", "ocs-storagecluster-ceph-rbd", None, "reference", False),
    ],
)
def test_the_mode_defaults_to_create_only_for_a_class_the_program_knows_on_gke(
    platform: str, storage_class: str | None, mode: str | None, resolved: str | None, created: bool
) -> None:
    assert resolved_mode(platform, storage_class, mode) == resolved  # type: ignore[arg-type]
    spec = storage_class_to_create(platform, storage_class, mode)  # type: ignore[arg-type]
    assert (spec is not None) == created
    assert storage_class_problems(platform, storage_class, mode) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("platform", "storage_class", "mode", "fragments"),
    [
        (
            "gke",
            "fast-ssd",
            None,
            (
                "gpu-cluster:storage.storageClass = 'fast-ssd': GKE does not install it",
                "'standard-rwo', 'premium-rwo', 'standard'",
                "'hyperdisk-balanced'",
                "storage.storageClassMode: reference",
            ),
        ),
        ("gke", "fast-ssd", "create", ("storage.storageClass = 'fast-ssd'", "cannot create")),
        (
            "gke",
            "premium-rwo",
            "create",
            ("gpu-cluster:storage.storageClassMode = 'create'", "GKE installs 'premium-rwo'"),
        ),
        (
            "openshift",
            "hyperdisk-balanced",
            "create",
            ("storage.storageClassMode = 'create' is only available on platform 'gke'",),
        ),
    ],
)
def test_a_class_nobody_creates_is_refused_naming_the_key_and_the_choices(
    platform: str, storage_class: str | None, mode: str | None, fragments: tuple[str, ...]
) -> None:
    (message,) = storage_class_problems(platform, storage_class, mode)  # type: ignore[arg-type]
    for fragment in fragments:
        assert fragment in message


def test_every_shipped_stack_has_the_class_its_claims_name() -> None:
    for stack in STACKS:
        run = run_stack(stack)
        # A claim bound to a volume the stack writes (a bucket's) needs no class to exist.
        names = {
            c.inputs["spec"].get("storageClassName")
            for c in run.of_type(PVC)
            if "volumeName" not in c.inputs["spec"]
        }
        clusters = [r.inputs for r in run.of_type("gcp:container/cluster:Cluster")]
        if clusters:
            (cluster,) = clusters
            filestore = cluster.get("addonsConfig", {}).get("gcpFilestoreCsiDriverConfig", {})
            # Filestore's classes come with its CSI driver, which the stack turns on.
            installed = FILESTORE_CLASSES if filestore.get("enabled") else {}
            allowed = {*GKE_PREINSTALLED_CLASSES, *installed, *storage_classes(run), None}
            assert names <= allowed, stack
