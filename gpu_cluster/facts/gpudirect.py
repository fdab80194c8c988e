"""GPUDirect releases on GKE: images and the NCCL settings (or script) Google publishes with them.

The NCCL plugin installer, the receive-datapath manager (RxDM) sidecar and the NCCL environment
move together, so they are pinned here as one release, chosen by `gcp.gpudirectRelease` or, when
unset, by the stack's GKE minor version. Sources (GoogleCloudPlatform/container-engine-accelerators,
"CEA" below, commit 992db81 of 2026-06-11 unless named): gpudirect-tcpxo/README.md,
gpudirect-tcpxo/nccl-test-latest.yaml, gpudirect-tcpxo/best-practice.md,
gpudirect-tcpxo/nccl-tcpxo-installer.yaml, gpudirect-tcpx/README.md (98c85a6),
gpudirect-tcpx/nccl-config.yaml, gpudirect-tcpx/nccl-test-latest.yaml,
nri_device_injector/nri-device-injector.yaml; TCPXO release v1.0.17 from the plugin's own
repository, google/nccl-plugin-gpudirect-tcpxo (04815d1). tests/vendor/ keeps these facts as test
data.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # machines.py reads this module's paths: the type only
    from gpu_cluster.facts.machines import GpuMachine

# Where the installer DaemonSet puts the plugin and NCCL on the node, and where pods mount it.
HOST_LIB_DIR = "/home/kubernetes/bin/nvidia/lib64"
POD_LIB_DIR = "/usr/local/nvidia/lib64"
# The variable naming the release's NCCL environment script, which the launchers source
# (scripts/launch-common.sh), as AI-Hypercomputer/gpu-recipes' GKE workloads name it
# (src/helm-charts/{a3mega,a3ultra,a4}/jobset/templates/workload-jobset.yaml at 2e1fd5e).
NCCL_INIT_SCRIPT = "NCCL_INIT_SCRIPT"

# The node agents' DaemonSets, in kube-system, by their `k8s-app` label as Google's manifests
# name them (CEA gpudirect-tcpxo/nccl-tcpxo-installer.yaml, gpudirect-tcpx/
# nccl-tcpx-installer.yaml, nri_device_injector/nri-device-injector.yaml, gpudirect-rdma/
# nccl-rdma-installer.yaml).
NODE_AGENT_NAMESPACE = "kube-system"
DEVICE_INJECTOR_APP = "device-injector"


def installer_app(mode: str) -> str:
    """The NCCL plugin installer of network mode `mode` (tcpxo, tcpx or rdma)."""
    return f"nccl-{mode}-installer"


# Unix socket directory shared by the TCPX RxDM sidecar and the training container.
TCPX_SOCKET_DIR = "/run/tcpx"
# File RxDM writes once its buffer manager is ready, when HEALTH_CHECK_LOG_FILE names it; the
# name must not contain '_' (CEA gpudirect-tcpxo/best-practice.md, "Setup Startup Probe").
RXDM_HEALTH_FILE = "/run/health-check"

# NRI device injector that honours devices.gke.io/container.* annotations (CEA nri_device_injector).
NRI_INJECTOR_IMAGE = (
    "gcr.io/gke-release/nri-device-injector"
    "@sha256:6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970"
)
# Node-side helper image for the TCPXO pre-installation step (CEA uses plain "ubuntu"; pinned here).
HOST_TOOLS_IMAGE = "ubuntu:24.04"
# Pause image for installer DaemonSets (CEA gpudirect-tcpxo/nccl-tcpxo-installer.yaml).
PAUSE_IMAGE = (
    "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
)


# Minimum GKE patch per minor for A3 Mega with TCPXO (GoogleCloudPlatform/cluster-toolkit
# modules/compute/gke-node-pool/gpu_direct.tf at 1047080, 2026-06-25); later minors are all fine.
TCPXO_MIN_GKE: dict[int, str] = {
    28: "1.28.15-gke.3163000",
    29: "1.29.15-gke.2467000",
    30: "1.30.14-gke.1922000",
    31: "1.31.14-gke.1243000",
    32: "1.32.11-gke.1174000",
}


# End of standard support per GKE minor (GKE release schedule, as recorded by
# endoflife-date/endoflife.date products/google-kubernetes-engine.md `eol` at ca0c141 of
# 2026-08-21). After it GKE upgrades the cluster, whatever the maintenance exclusions.
GKE_END_OF_STANDARD_SUPPORT: dict[int, date] = {
    28: date(2025, 2, 4),
    29: date(2025, 4, 12),
    30: date(2025, 9, 30),
    31: date(2026, 1, 16),
    32: date(2026, 4, 11),
    33: date(2026, 8, 3),
    34: date(2026, 10, 1),
    35: date(2027, 4, 11),
    36: date(2027, 8, 9),
}


def gke_version_key(version: str) -> tuple[int, ...]:
    """'1.32.11-gke.1174000' -> (1, 32, 11, 1174000), for ordering GKE versions."""
    return tuple(int(part) for part in version.replace("-gke.", ".").split("."))


def gke_minor(version: str) -> int:
    """'1.35' or '1.35.1-gke.100' -> 35."""
    return int(version.split(".")[1])


class _PublishedForGkeMinors:
    """A release Google publishes for GKE minors (first, last or None)."""

    gke_minors: tuple[int, int | None]

    def serves_gke_minor(self, minor: int) -> bool:
        first, last = self.gke_minors
        return first <= minor and (last is None or minor <= last)

    def gke_minors_text(self) -> str:
        first, last = self.gke_minors
        return f"1.{first}-1.{last}" if last is not None else f"1.{first} or newer"


@dataclass(frozen=True)
class GpuDirectRelease(_PublishedForGkeMinors):
    mode: str  # network mode it serves: tcpxo or tcpx
    accelerator: str  # GKE accelerator type of the machine
    installer_image: str
    rxdm_image: str
    rxdm_command: tuple[str, ...]
    rxdm_args: tuple[str, ...]
    # What the RxDM sidecar adds to the runtime's default capabilities (Google's securityContext).
    rxdm_capabilities: tuple[str, ...]
    # Devices the RxDM sidecar needs (injected by the NRI device injector).
    rxdm_devices: tuple[str, ...]
    # Whether RxDM reports readiness through HEALTH_CHECK_LOG_FILE (TCPXO only, per Google).
    rxdm_health_check: bool
    # Whether the installer first binds the LLCM aperture PCI devices and loads import-helper on
    # the host, and makes its entry point executable (CEA gpudirect-tcpxo/
    # nccl-tcpxo-installer.yaml does both; gpudirect-tcpx/nccl-tcpx-installer.yaml neither).
    installer_prepares_host: bool
    nic_count: int
    # GKE minor versions Google publishes this release's settings for: (first, last or None).
    gke_minors: tuple[int, int | None]
    # The training container's NCCL env; with NCCL_INIT_SCRIPT, the release's own script sets
    # the rest when the launchers source it.
    nccl_env: tuple[tuple[str, str], ...]

    @property
    def nccl_init_script(self) -> str | None:
        """The release's NCCL environment script in the pod; None: nccl_env is every setting."""
        return dict(self.nccl_env).get(NCCL_INIT_SCRIPT)


# GPU device nodes of an 8-GPU machine, injected into the RxDM sidecar.
_GPU_DEVICES = (*(f"/dev/nvidia{i}" for i in range(8)), "/dev/nvidiactl", "/dev/nvidia-uvm")


def _gpu_nic_ifnames(n: int) -> str:
    return ",".join(f"eth{i}" for i in range(1, n + 1))


# TCPXO's NCCL settings come from the release's own nccl-env-profile.sh, which its installer
# copies beside the plugin: the pod names that directory and sources the profile before the
# workload (CEA gpudirect-tcpxo/README.md "NCCL configs"; google/nccl-plugin-gpudirect-tcpxo
# tcpxo_scripts/demo_mpi_entry_with_config_profile.sh and container_entry.sh
# install_nccl_env_profile at 04815d1). The profile sets every other NCCL variable and prepends
# NCCL_LIB_DIR to LD_LIBRARY_PATH (tcpxo_scripts/nccl-env-profile.sh line 46, 04815d1).
_TCPXO_NCCL_ENV = (
    ("NCCL_LIB_DIR", POD_LIB_DIR),
    (NCCL_INIT_SCRIPT, f"{POD_LIB_DIR}/nccl-env-profile.sh"),
    # Beside the profile in Google's manifests (CEA gpudirect-tcpxo/nccl-test-latest.yaml).
    ("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices"),
)


def _tcpxo_release(plugin: str, rxdm: str) -> GpuDirectRelease:
    """A TCPXO release: the installer (plugin) and RxDM tags Google pairs; the sidecar as CEA
    gpudirect-tcpxo/nccl-test-latest.yaml runs it at 992db81 (2026-06-11: shell + chmod,
    `--num_nics` retired "Nov 19, 2025" and removed from the manifests in abbe8dd)."""
    registry = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo"
    return GpuDirectRelease(
        mode="tcpxo",
        accelerator="nvidia-h100-mega-80gb",
        installer_image=f"{registry}/nccl-plugin-gpudirecttcpx-dev:{plugin}",
        rxdm_image=f"{registry}/tcpgpudmarxd-dev:{rxdm}",
        rxdm_command=("/bin/sh", "-c"),
        rxdm_args=(
            "set -ex\n"
            "chmod 755 /fts/entrypoint_rxdm_container.sh\n"
            "/fts/entrypoint_rxdm_container.sh --num_hops=2\n",
        ),
        rxdm_capabilities=("NET_ADMIN", "NET_BIND_SERVICE"),
        rxdm_devices=(*_GPU_DEVICES, "/dev/dmabuf_import_helper"),
        rxdm_health_check=True,
        installer_prepares_host=True,
        nic_count=8,
        # The README names no GKE versions since Feb 2025 (recommended ones are "not a hard
        # requirement"); GKE minors from 1.28 carry TCPXO (cluster-toolkit modules/compute/
        # gke-node-pool/gpu_direct.tf, TCPXO_MIN_GKE above).
        gke_minors=(28, None),
        nccl_env=_TCPXO_NCCL_ENV,
    )


# CEA gpudirect-tcpxo/README.md, release "Jan 9, 2026" (NCCL 2.28 shipped by the installer).
_TCPXO_2026_01_09 = _tcpxo_release("v1.0.15", "v1.0.21")

# Release v1.0.17 (google/nccl-plugin-gpudirect-tcpxo 04815d1, 2026-06-26, "GPUDirect-TCPXO
# v1.0.17": qualified with CUDA 13.2, GPU driver 595.71.05 and NCCL 2.28.7-1; RxDM 1.0.23 in
# buffer_mgmt_daemon/buffer_manager_version.h; the installer's `install --install-nccl` and
# nccl-env-profile.sh unchanged since v1.0.15). Google's manifests run this pair since CEA
# PR #626 (github.com/GoogleCloudPlatform/container-engine-accelerators/pull/626, merged,
# consulted 2026-11-23: tags only). Needs the node's driver to be R595 (595.71.05 qualified):
# the pool asks GKE for LATEST; which GKE patch ships R595 is unconfirmed here (README).
_TCPXO_V1_0_17 = _tcpxo_release("v1.0.17", "v1.0.23")

_TCPX_BINDINGS_TX = "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"
_TCPX_BINDINGS_RX = "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191"
# The TCPX sidecar's command in every CEA and cluster-toolkit manifest; the last argument carries
# the backslash-quote characters of its YAML plain scalar, exactly as Google runs it.
_TCPX_RXDM_COMMAND = (
    "/tcpgpudmarxd/build/app/tcpgpudmarxd",
    "--gpu_nic_preset",
    "a3vm",
    "--gpu_shmem_type",
    "fd",
    "--uds_path",
    TCPX_SOCKET_DIR,
    "--setup_param",
    '\\"--verbose 128 2 0 \\"',
)
# Settings common to both TCPX sets (CEA gpudirect-tcpx/nccl-config.yaml, all versions).
_TCPX_COMMON_ENV = (
    ("NCCL_SOCKET_IFNAME", "eth0"),
    ("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", _gpu_nic_ifnames(4)),
    ("NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0"),
    ("NCCL_CROSS_NIC", "0"),
    ("NCCL_PROTO", "Simple"),
    ("NCCL_NET_GDR_LEVEL", "PIX"),
    ("NCCL_P2P_PXN_LEVEL", "0"),
    ("NCCL_DYNAMIC_CHUNK_SIZE", "524288"),
    ("NCCL_P2P_NET_CHUNKSIZE", "524288"),
    ("NCCL_P2P_PCI_CHUNKSIZE", "524288"),
    ("NCCL_P2P_NVL_CHUNKSIZE", "1048576"),
    ("NCCL_BUFFSIZE", "4194304"),
    ("NCCL_NSOCKS_PERTHREAD", "4"),
    ("NCCL_SOCKET_NTHREADS", "1"),
    ("NCCL_GPUDIRECTTCPX_TX_BINDINGS", _TCPX_BINDINGS_TX),
    ("NCCL_GPUDIRECTTCPX_RX_BINDINGS", _TCPX_BINDINGS_RX),
    ("NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS", "500000"),
    # The RxDM socket lives in a volume shared with the sidecar, not in the image's /tmp.
    ("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX", TCPX_SOCKET_DIR),
)


def _tcpx_release(
    plugin: str, rxdm: str, gke_minors: tuple[int, int | None], env: tuple[tuple[str, str], ...]
) -> GpuDirectRelease:
    """A TCPX release: plugin and RxDM tags, the GKE minors it serves, its own NCCL settings."""
    registry = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx"
    return GpuDirectRelease(
        mode="tcpx",
        accelerator="nvidia-h100-80gb",
        installer_image=f"{registry}/nccl-plugin-gpudirecttcpx-dev:{plugin}",
        rxdm_image=f"{registry}/tcpgpudmarxd-dev:{rxdm}",
        rxdm_command=_TCPX_RXDM_COMMAND,
        rxdm_args=(),
        rxdm_capabilities=("NET_ADMIN",),
        rxdm_devices=_GPU_DEVICES,
        rxdm_health_check=False,  # Google publishes no health file for the TCPX daemon
        installer_prepares_host=False,
        nic_count=4,
        gke_minors=gke_minors,
        nccl_env=(*_TCPX_COMMON_ENV, *env),
    )


# GKE before 1.34: CEA gpudirect-tcpx/README.md (98c85a6) release "Feb 15, 2024" (plugin v3.1.9,
# RxDM v2.0.12) with CEA gpudirect-tcpx/nccl-config.yaml at 09a75de (2026-03-02). The README's
# list omits the four settings below; nccl-config.yaml, which Google ran with it, has them.
# NCCL_MIN_NCHANNELS as Google publishes it: NCCL 2.17 deprecated it for NCCL_MIN_CTAS but
# still reads it (NVIDIA/nccl docs/userguide/source/env.rst at 5067397).
_TCPX_V3_1_9 = _tcpx_release(
    "v3.1.9",
    "v2.0.12",
    (28, 33),
    (
        ("NCCL_ALGO", "Ring"),
        ("NCCL_GPUDIRECTTCPX_FORCE_ACK", "0"),
        ("NCCL_GPUDIRECTTCPX_TX_COMPLETION_NANOSLEEP", "1000"),
        ("NCCL_MAX_NCHANNELS", "8"),
        ("NCCL_MIN_NCHANNELS", "8"),
    ),
)

# GKE 1.34 and newer (COS 125, kernel devmem TCP): CEA gpudirect-tcpx/README.md (98c85a6) release
# "Jun 22, 2026" (plugin v3.1.12, RxDM v2.0.15) with CEA gpudirect-tcpx/nccl-config.yaml at
# 0e5609b (2026-06-01, "Finalize NCCL config for GKE 1.34+"). The README names no GKE version;
# the 1.34 boundary is from the commit messages of 21ed661 and e3ae253 (RxDM v2.0.15 "used in
# GKE 1.34").
_TCPX_V3_1_12 = _tcpx_release("v3.1.12", "v2.0.15", (34, None), (("NCCL_ALGO", "Ring,Tree"),))

RELEASES: dict[str, GpuDirectRelease] = {
    "tcpxo-2026-01-09": _TCPXO_2026_01_09,
    "tcpxo-v1.0.17": _TCPXO_V1_0_17,
    "tcpx-v3.1.9": _TCPX_V3_1_9,
    "tcpx-v3.1.12": _TCPX_V3_1_12,
}


def releases_for(mode: str, gke_minor: int) -> list[str]:
    """Names of the releases of `mode` published for GKE 1.<gke_minor>, newest last."""
    return [n for n, r in RELEASES.items() if r.mode == mode and r.serves_gke_minor(gke_minor)]


def release_for(mode: str, name: str | None, gke_minor: int) -> GpuDirectRelease:
    """The pinned release, or the newest one published for the GKE minor (the settings schema
    guarantees that one exists)."""
    return RELEASES[name or releases_for(mode, gke_minor)[-1]]


# --- GPUDirect RDMA with Google's gIB NCCL plugin (A3 Ultra, A4) --------------------------------


# Where the gIB installer puts the plugin, its scripts and tuner configs on the node, and where
# pods mount it; pods mount the whole driver directory (CEA gpudirect-rdma/nccl-test.yaml).
GIB_HOST_DIR = "/home/kubernetes/bin/gib"
GIB_POD_DIR = "/usr/local/gib"
NVIDIA_HOST_DIR = "/home/kubernetes/bin/nvidia"
NVIDIA_POD_DIR = "/usr/local/nvidia"

# The RDMA machines' ConnectX-7 RoCE NICs, one per GPU, besides their 2 gVNICs (host and a
# second VPC): cloud.google.com/compute/docs/gpus/gpu-network-bandwidth.
RDMA_NIC_COUNT = 8


@dataclass(frozen=True)
class GibRelease(_PublishedForGkeMinors):
    """One gIB NCCL plugin release: its installer and the NCCL settings published with it."""

    installer_image: str
    # The installer's `container_entry.sh install` flags (Google's manifest for this release).
    install_flags: tuple[str, ...]
    gke_minors: tuple[int, int | None]
    # The training container's NCCL env: the release's set_nccl_env.sh, which the launchers source.
    nccl_env: tuple[tuple[str, str], ...]

    def env_for(self, machine: GpuMachine) -> dict[str, str]:
        """NCCL environment for pods on `machine` (pure, versioned with the release)."""
        return {**dict(self.nccl_env), **dict(machine.after_nccl_script)}


# gIB's NCCL settings are its set_nccl_env.sh, which the installer copies to the node: "The source
# file includes all the necessary environment variables for NCCL/gIB and Google expects to update
# them in future NCCL/gIB releases" (docs.cloud.google.com/ai-hypercomputer/docs/nccl/test-vms,
# updated 2026-04-06). Google's GKE workloads source it in the container before the workload
# (CEA gpudirect-rdma/nccl-test.yaml at 992db81; gpu-recipes src/helm-charts/{a3ultra,a4}/jobset
# at 2e1fd5e), so each release brings its own values and none drift here.
_GIB_NCCL_ENV = ((NCCL_INIT_SCRIPT, f"{GIB_POD_DIR}/scripts/set_nccl_env.sh"),)


def _gib_release(tag: str, install_flags: tuple[str, ...]) -> GibRelease:
    """A gIB release: its installer tag and the `container_entry.sh install` flags Google's
    manifest runs it with. Each serves the oldest GKE minor with RDMA on either machine
    (GpuMachine.rdma_min_gke) and every newer one."""
    return GibRelease(
        installer_image=f"us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:{tag}",
        install_flags=install_flags,
        gke_minors=(31, None),
        nccl_env=_GIB_NCCL_ENV,
    )


# gIB v1.1.0: installer as CEA gpudirect-rdma/nccl-rdma-installer.yaml at 209d1af0 (2025-09-10,
# "upgrade nccl plugin to 1.1.0": `install --install-nccl`, which also puts gIB's own NCCL in
# the driver's lib64). Kept selectable: cluster-toolkit pins it (modules/management/
# kubectl-apply gib_supported_versions_x86, 1047080) and gpu-recipes' A3 Ultra recipes run it
# (training/a3ultra/*/recipe/values.yaml gibVersion, 2e1fd5e, 2026-08-12).
_GIB_V1_1_0 = _gib_release("v1.1.0", ("--install-nccl",))

# gIB v1.1.1: the release Google's GKE installer runs, CEA gpudirect-rdma/nccl-rdma-installer.yaml
# at 992db812 (2026-06-11): image v1.1.1 since 155bfa49 (2026-03-09), and `install` without
# `--install-nccl` since 2da1c92f (2026-05-06), so pods use their image's own NCCL. gpu-recipes'
# A4 recipes run v1.1.1 too (training/a4/*/recipe/values.yaml gibVersion, 2e1fd5e). The newest
# release whose GKE manifest is readable at a commit: v1.1.2 (gIB release notes,
# docs.cloud.google.com/ai-hypercomputer/docs/nccl/release-notes-x86, 2026-05-14) is only in
# open or unreadable pull requests (CEA #609; cluster-toolkit #5991, #6263 for v1.1.3).
_GIB_V1_1_1 = _gib_release("v1.1.1", ())

# Oldest first: the newest release published for the GKE minor is the default.
GIB_RELEASES: dict[str, GibRelease] = {"gib-v1.1.0": _GIB_V1_1_0, "gib-v1.1.1": _GIB_V1_1_1}


def gib_releases_for(gke_minor: int) -> list[str]:
    """Names of the gIB releases published for GKE 1.<gke_minor>, newest last."""
    return [n for n, r in GIB_RELEASES.items() if r.serves_gke_minor(gke_minor)]
