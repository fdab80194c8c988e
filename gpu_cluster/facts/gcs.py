"""Cloud Storage buckets and GKE's Cloud Storage FUSE CSI driver: names, the driver, and the
mount options Google's training recipes use per kind of data."""

from __future__ import annotations

import re

# Bucket names: 3-63 characters of a-z, 0-9, '-', '_' (and '.', which needs a verified domain:
# not taken here), starting and ending with a letter or digit; not starting with "goog" and not
# containing "google" (cloud.google.com/storage/docs/buckets#naming, consulted 2026-11-24).
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]")
BUCKET_NAME_FORBIDDEN = re.compile(r"google")

# The CSI driver's name, which a PersistentVolume names (GoogleCloudPlatform/gcs-fuse-csi-driver
# README; AI-Hypercomputer/gpu-recipes src/helm-charts/storage/gcs-fuse/templates/pv.yaml,
# 2e1fd5e, 2026-08-12).
GCS_FUSE_DRIVER = "gcsfuse.csi.storage.gke.io"

# Mount options per use, as gpu-recipes' storage chart writes them (same pv.yaml): cache every
# lookup's metadata for the whole run (training data does not change under a run) and none of
# the lookups that failed.
DATA_MOUNT_OPTIONS = (
    "implicit-dirs",
    "metadata-cache:negative-ttl-secs:0",
    "metadata-cache:ttl-secs:-1",
    "metadata-cache:stat-cache-max-size-mb:-1",
    "metadata-cache:type-cache-max-size-mb:-1",
)
# Checkpoints add streaming writes and an unbounded file cache with parallel downloads (restore
# reads whole files).
CHECKPOINT_MOUNT_OPTIONS = (
    *DATA_MOUNT_OPTIONS,
    "write:enable-streaming-writes:true",
    "file-cache:max-size-mb:-1",
    "file-cache:cache-file-for-range-read:true",
    "file-cache:enable-parallel-downloads:true",
)
# A machine may add one more (facts/machines.py GpuMachine.gcsfuse_checkpoint_option).
# No uid/gid options: the kubelet hands the pods' fsGroup to the driver, which mounts with it as
# the group, file-mode 664 and dir-mode 775 (gcs-fuse-csi-driver pkg/csi_driver/utils.go,
# VOLUME_MOUNT_GROUP, 5fcdc04), so the non-root training user (in that group) reads and writes.
# Volume attributes of every gpu-recipes PV: the driver skips its own bucket access check at
# mount (the pods' access is granted by IAM, checked by GCS on use) and prefetches metadata.
VOLUME_ATTRIBUTES = (
    ("skipCSIBucketAccessCheck", "true"),
    ("gcsfuseMetadataPrefetchOnMount", "true"),
)
# The StorageClass name gpu-recipes' static PVs and claims share: a name that binds them, not a
# class that exists (no provisioner is asked; same chart, pv.yaml and pvc.yaml).
STATIC_CLASS = "gcs-fuse-storage"
# A static PV's capacity is not enforced by GCS; the chart's default.
NOMINAL_CAPACITY = "2048Gi"

# Tells GKE's webhook to inject the gcsfuse sidecar into the pod (gcs-fuse-csi-driver README).
INJECT_ANNOTATION = "gke-gcsfuse/volumes"
# The sidecar unlimited ("0": no limit, the default request), as gpu-recipes' A4 nemo-training
# and maxtext-training launchers set it (src/helm-charts/a4/{nemo,maxtext}-training/templates,
# 2e1fd5e; one recipe: "if limited the gcsfuse read performance decreases drastically"). A
# limit alone would also become the request (gcs-fuse-csi-driver pkg/webhook/config.go,
# populateResource): the A4 job chart's 1Ti memory and 2Ti ephemeral storage would be asked
# of every node.
SIDECAR_ANNOTATIONS = (
    ("gke-gcsfuse/cpu-limit", "0"),
    ("gke-gcsfuse/memory-limit", "0"),
    ("gke-gcsfuse/ephemeral-storage-limit", "0"),
)

# What the pods' Kubernetes ServiceAccount is granted on each bucket, through Workload Identity
# Federation for GKE with no Google service account: objectViewer to read, objectUser to also
# write (gcs-fuse-csi-driver docs/authentication.md, 5fcdc04, 2026-08-21).
READ_ROLE = "roles/storage.objectViewer"
READ_WRITE_ROLE = "roles/storage.objectUser"
