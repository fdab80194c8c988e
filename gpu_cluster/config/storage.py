"""The stack's storage: the workspace and datasets claims every stack has, and the training-data
volumes a stack adds (`storage.volumes`: on GKE a Cloud Storage bucket through the FUSE driver or
a Managed Lustre instance, on either platform a shared claim)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from gpu_cluster.config.base import Section
from gpu_cluster.config.reads import VERIFY_ENABLED, ReadWhen
from gpu_cluster.config.values import (
    BucketName,
    DnsLabel,
    MountPath,
    Size,
    StorageClassName,
    Subdomain,
)
from gpu_cluster.facts.gke_storage import StorageClassMode

# Where every training container mounts the workspace claim (shared by the pods in mode rwx).
WORKSPACE_PATH = "/workspace"
# How Google's training recipes mount a bucket: read-mostly data, or checkpoints (facts/gcs.py).
VolumeUse = Literal["data", "checkpoints"]


class GcsFuseSettings(Section):
    """A Cloud Storage bucket mounted through GKE's Cloud Storage FUSE CSI driver."""

    bucket: BucketName
    """Bucket name: 3-63 lower-case letters, digits, `-` and `_` (globally unique)."""
    mode: Literal["create", "reference"] = "create"
    """`create`: the stack creates the bucket in `gcp.region` (hierarchical namespace, uniform
    bucket-level access, public access prevented), protected and kept on `pulumi destroy` as
    the claims are (`storage.protect`, `storage.retainOnDelete`); `reference`: it exists. Either
    way the pods' ServiceAccount gets `roles/storage.objectUser` on it (`roles/storage.objectViewer`
    when every volume on it is `readOnly`), through Workload Identity Federation for GKE.
    """
    only_dir: str | None = Field(default=None, pattern=r"^[^/\s,][^\s,]*$")
    """Mount only this folder of the bucket (gcsfuse `only-dir`); unset: the whole bucket."""
    use: VolumeUse = "data"
    """`data` (read-mostly training data) or `checkpoints` (written every few steps, read back
    on restart): the mount options Google's gpu-recipes storage chart gives each.
    """


class ManagedLustreSettings(Section):
    """A Google Cloud Managed Lustre instance in `gcp.zone`, on the cluster's host VPC."""

    instance: str = Field(pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
    """The instance's name: 1-63 lower-case letters, digits and `-`, starting with a letter, not
    ending with `-`."""
    mode: Literal["create", "reference"] = "create"
    """`create`: the stack creates the instance (with the private services access range, the
    peering and the firewall rule Lustre needs on the host VPC), protected and kept on `pulumi
    destroy` as the claims are; `reference`: it exists, reachable from the cluster's VPC
    (`mountPoint`)."""
    capacity_gib: int = Field(ge=1, le=1_000_000_000)
    """Capacity in GiB: the instance's size (`create`; a larger value grows it in place, GCP
    refuses a smaller one and sizes off its tier's minimum and step, cloud.google.com/
    managed-lustre/docs/create-instance#performance-tiers), or the referenced instance's size
    (the volume's capacity, as the Lustre CSI driver asks)."""
    throughput: Literal[125, 250, 500, 1000] = 500
    """`create`: MB/s per TiB of capacity (the performance tier, fixed at creation: a change
    is a new instance). Default 500, as cluster-toolkit's managed-lustre module."""
    filesystem: str = Field(default="lustrefs", pattern=r"^[A-Za-z0-9]{1,8}$")
    """`create`: the file system's name, 1-8 letters and digits (fixed at creation)."""
    mount_point: str | None = Field(
        default=None, pattern=r"^(\d{1,3}\.){3}\d{1,3}@tcp:/[A-Za-z0-9]{1,8}$"
    )
    """`reference`: the instance's mount point, `IP@tcp:/FILESYSTEM` (`gcloud lustre instances
    describe INSTANCE --location ZONE --format 'value(mountPoint)'`)."""

    @model_validator(mode="after")
    def _by_mode(self) -> ManagedLustreSettings:
        if self.mode == "create" and self.mount_point is not None:
            raise ValueError("mountPoint is only used with mode reference; remove 'mountPoint'")
        if self.mode == "reference":
            if self.mount_point is None:
                raise ValueError("mode reference needs mountPoint (the instance's IP@tcp:/NAME)")
            for key in sorted({"throughput", "filesystem"} & self.model_fields_set):
                raise ValueError(f"{key} describes an instance the stack creates; remove '{key}'")
        return self


class SharedClaimSettings(Section):
    """A ReadWriteMany claim: one the stack creates (`size`) or one that exists (`claimName`)."""

    size: Size | None = None
    """Size of the claim the stack creates, `<stack name>-<volume name>`."""
    storage_class: StorageClassName | None = None
    """Its class, used by name (an RWX class: CephFS or NFS on OpenShift, Filestore on GKE,
    whose CSI driver the stack then turns on); unset: the cluster default. Only with `size`.
    """
    claim_name: Subdomain | None = None
    """An existing claim in the stack's namespace to mount instead (the stack leaves it alone)."""

    @model_validator(mode="after")
    def _one_source(self) -> SharedClaimSettings:
        if (self.size is None) == (self.claim_name is None):
            raise ValueError(
                "set exactly one of size (a new claim) and claimName (an existing one)"
            )
        if self.storage_class is not None and self.size is None:
            raise ValueError("storageClass is only used with size (a claim the stack creates)")
        return self


class DataVolume(Section):
    """A volume every training pod mounts: set exactly one of `gcsFuse`, `managedLustre` and
    `sharedClaim`."""

    name: DnsLabel
    """The volume's name in the pod (DNS-1035 label); unique among `storage.volumes`."""
    mount_path: MountPath
    """Where the training container sees it, an absolute path outside the image's system
    directories and the pod's own mounts (`/workspace`, `/datasets`, `/code`, ...).
    """
    read_only: bool = False
    """Mount it read-only (a bucket only mounted read-only is also granted read-only)."""
    min_write_gbps: Annotated[float | None, VERIFY_ENABLED] = Field(
        default=None, gt=0, allow_inf_nan=False
    )
    """The storage check fails below this save rate (GB/s per pod, all its GPUs' streams
    together); unset: it reports, never fails. Not on a `readOnly` volume.
    """
    min_read_gbps: Annotated[float | None, VERIFY_ENABLED] = Field(
        default=None, gt=0, allow_inf_nan=False
    )
    """The storage check fails below this restore (read) rate, GB/s per pod; unset: it reports."""
    gcs_fuse: Annotated[
        GcsFuseSettings | None,
        ReadWhen(
            lambda s: s.platform == "gke",
            "platform is 'gke' (Cloud Storage FUSE is GKE's CSI driver; elsewhere use sharedClaim)",
        ),
    ] = None
    """GKE: a Cloud Storage bucket through the Cloud Storage FUSE CSI driver (the stack enables the
    driver on the cluster)."""
    managed_lustre: Annotated[
        ManagedLustreSettings | None,
        ReadWhen(
            lambda s: s.platform == "gke",
            "platform is 'gke' (Managed Lustre is GKE's CSI driver here; elsewhere use "
            "sharedClaim)",
        ),
    ] = None
    """GKE: a Managed Lustre instance through GKE's Lustre CSI driver (the stack enables the
    driver on the cluster)."""
    shared_claim: SharedClaimSettings | None = None
    """A ReadWriteMany claim (both platforms)."""

    @model_validator(mode="after")
    def _one_profile(self) -> DataVolume:
        sources = [self.gcs_fuse, self.managed_lustre, self.shared_claim]
        if sum(source is not None for source in sources) != 1:
            raise ValueError(
                f"volume {self.name!r}: set exactly one of gcsFuse (a Cloud Storage bucket), "
                "managedLustre (a Managed Lustre instance) and sharedClaim (a ReadWriteMany claim)"
            )
        if self.read_only and self.min_write_gbps is not None:
            raise ValueError(f"volume {self.name!r}: minWriteGbps on a readOnly volume")
        return self


class StorageSettings(Section):
    """Workspace and datasets volumes: shared RWX claims or one claim per pod."""

    mode: Literal["rwx", "per-pod"] = "rwx"
    """Shared ReadWriteMany claims (`rwx`), or one claim per pod (`per-pod`: standalone claims
    named as the StatefulSet's volumeClaimTemplates name them). On GKE `rwx` needs a class that
    provisions ReadWriteMany (Filestore's, referenced): no Persistent Disk class does. On
    OpenShift no Ceph RBD class of OpenShift Data Foundation does (`*-ceph-rbd`): its CephFS
    class (`*-cephfs`) or an NFS class does.
    """
    # A StorageClass name (DNS-1123 subdomain), or "" for none: pre-provisioned volumes.
    storage_class: StorageClassName | None = None
    """Storage class of the claims, a DNS-1123 subdomain; unset: the cluster default; `""`: none,
    the claims bind to pre-provisioned volumes. On GKE: one GKE installs (`standard-rwo`,
    `premium-rwo`, `standard`;
    docs.cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/gce-pd-csi-driver and
    concepts/persistent-volumes), or `hyperdisk-balanced`, which GKE does not install and the
    stack creates; any other class is refused unless `storage.storageClassMode` is `reference`.
    A Filestore class (`standard-rwx`, `premium-rwx`, `enterprise-rwx`,
    `enterprise-multishare-rwx`, `zonal-rwx`, `regional-rwx`), referenced, has the stack turn on
    GKE's Filestore CSI driver, which installs them: a claim smaller than its tier's smallest
    instance gets (and is billed) one of that size (`premium-rwx`: 2.5Ti), and a size no
    instance or share of the class holds is refused (docs/operations.md, "Training as a JobSet").
    """
    # create: the stack creates the class (GKE: one the program knows, hyperdisk-balanced);
    # reference: it exists in the cluster. None: create on GKE a class the program knows and GKE
    # does not install, reference any other (plan/gke_storage.py).
    storage_class_mode: Annotated[
        StorageClassMode | None,
        ReadWhen(lambda s: s.storage.storage_class is not None, "storage.storageClass is set"),
    ] = None
    """Default on GKE: `create` for `hyperdisk-balanced`, else `reference`. `create`: the stack
    creates the class (GKE only; `hyperdisk-balanced`: `pd.csi.storage.gke.io`, `type:
    hyperdisk-balanced`, 250Mi / 7000 IOPS provisioned, `WaitForFirstConsumer`, volume
    expansion, reclaim `Delete`, as cluster-toolkit's `gke-storage` module), the claims wait for
    it, and `pulumi destroy` deletes it (no data in it). `reference`: the class exists in the
    cluster and is used by name. A `hyperdisk-balanced` made by hand earlier (as the `gcp-a4`
    file once asked) makes the create fail with AlreadyExists: delete it first (`kubectl delete
    storageclass hyperdisk-balanced`; bound claims and their volumes are not affected) or set
    `reference`. Only with `storage.storageClass`.
    """
    workspace_size: Size = "100Gi"
    """`/workspace` volume, a quantity > 0 (growing it grows the claims in place)."""
    datasets_size: Size | None = "500Gi"
    """`/datasets` volume, a quantity > 0 or null (null: none)."""
    volumes: tuple[DataVolume, ...] = ()
    """Training-data and checkpoint volumes every pod mounts, besides the workspace and datasets
    (docs/operations.md, "Training data and checkpoints").
    """
    # User data outlives `pulumi destroy` unless the stack opts out explicitly.
    retain_on_delete: bool = True
    """Claims, the buckets and Lustre instances of `storage.volumes`, and a namespace the program
    created survive `pulumi destroy`, scale-down, renames and `namespaceMode` changes.
    """
    # Claims carry Pulumi's `protect`, and so does a namespace the program created while it is
    # not retained: an update or destroy that would delete or replace one (a changed name,
    # namespace, namespaceMode, storage mode, class or access mode, a per-pod scale-down) stops
    # at preview until the stack sets this to false for that one update.
    protect: bool = True
    """**Opt-in key**: `false` lets an update replace or delete claims, the buckets and Lustre
    instances of `storage.volumes`, and a namespace the program created that is not retained
    (see docs/contract.md).
    """
