"""The one schema of stack config: its root, `Settings`.

Every key a user may write in `Pulumi.<stack>.yaml` (under the `gpu-cluster:` namespace) is a
field here or in a section below it (sections/, one module per concern; storage.py), spelled as
in the stack file (camelCase). Declarations only: each key's type, default and values alone, and
when the stack reads it (`ReadWhen`). Rules across keys live in rules.py and gke.py, and run
where the config is loaded: `validate_settings` holds the values to both, `load_settings` turns
the raw config map into a validated, frozen `Settings` tree or raises `ConfigError` naming the
key, the bad value and what is allowed (loading.py); what the settings resolve to is derived.py's.
Nothing in this layer imports Pulumi: it is unit-testable on its own.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PrivateAttr

from gpu_cluster.config.base import Section
from gpu_cluster.config.netmodes import find_mode
from gpu_cluster.config.reads import ON_GKE, ReadWhen
from gpu_cluster.config.sections.checks import VerifySettings
from gpu_cluster.config.sections.compute import (
    CodeSyncSettings,
    LauncherSettings,
    OpenShiftSettings,
    PodSettings,
)
from gpu_cluster.config.sections.gcp import GcpSettings
from gpu_cluster.config.sections.monitoring import MonitoringSettings
from gpu_cluster.config.sections.network import (
    ExistingObject,
    NcclSettings,
    RdmaSettings,
    TcpSettings,
)
from gpu_cluster.config.sections.workload import WorkloadSettings
from gpu_cluster.config.storage import StorageSettings
from gpu_cluster.config.values import (
    DnsLabel,
    EnvName,
    Image,
    Namespace,
    NetworkMode,
)
from gpu_cluster.facts.ngc import DEFAULT_TRAINING_IMAGE

PROJECT = "gpu-cluster"

Platform = Literal["openshift", "gke"]


def _mode_reads(s: Settings, section: str) -> bool:
    """Whether the stack's network mode reads its own section `section` (`tcp`, `rdma`)."""
    mode = find_mode(s.platform, s.network_mode)
    return mode is not None and mode.section == section


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
    monitoring: MonitoringSettings = MonitoringSettings()
    """GPU, cluster and queue metrics."""
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
    gcp: Annotated[GcpSettings | None, ON_GKE] = None
    """GKE: where and on what the cluster runs (required on GKE)."""
    # Top-level keys set as Pulumi secrets (only SECRET_CAPABLE_KEYS get this far).
    _secret_keys: frozenset[str] = PrivateAttr(default=frozenset())

    def is_secret(self, key: str) -> bool:
        """Whether top-level `key` (as in the stack file) is a Pulumi secret."""
        return key in self._secret_keys
