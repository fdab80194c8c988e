"""GPUDirect-TCPX(O) releases on GKE: images and the NCCL settings Google publishes with them.

The NCCL plugin installer, the receive-datapath manager (RxDM) sidecar and the NCCL environment
move together, so they are pinned here as one release, chosen by `gcp.gpudirectRelease`.
Sources: GoogleCloudPlatform/container-engine-accelerators (CEA) gpudirect-tcpxo/README.md,
gpudirect-tcpxo/nccl-tcpxo-installer.yaml, gpudirect-tcpx/nccl-tcpx-installer.yaml,
gpudirect-tcpx/nccl-config.yaml, nri_device_injector/nri-device-injector.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass

# Where the installer DaemonSet puts the plugin and NCCL on the node, and where pods mount it.
HOST_LIB_DIR = "/home/kubernetes/bin/nvidia/lib64"
POD_LIB_DIR = "/usr/local/nvidia/lib64"
# Unix socket directory shared by the TCPX RxDM sidecar and the training container.
TCPX_SOCKET_DIR = "/run/tcpx"

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
# modules/scheduler/gke-cluster gpu_direct.tf); minors after the last one listed are all fine.
TCPXO_MIN_GKE: dict[int, str] = {
    28: "1.28.15-gke.3163000",
    29: "1.29.15-gke.2467000",
    30: "1.30.14-gke.1922000",
    31: "1.31.14-gke.1243000",
    32: "1.32.11-gke.1174000",
}


def gke_version_key(version: str) -> tuple[int, ...]:
    """'1.32.11-gke.1174000' -> (1, 32, 11, 1174000), for ordering GKE versions."""
    return tuple(int(part) for part in version.replace("-gke.", ".").split("."))


@dataclass(frozen=True)
class GpuDirectRelease:
    mode: str  # network mode it serves: tcpxo or tcpx
    accelerator: str  # GKE accelerator type of the machine
    installer_image: str
    rxdm_image: str
    rxdm_command: tuple[str, ...]
    # What the RxDM sidecar needs: it programs flow steering on the GPU NICs.
    rxdm_capabilities: tuple[str, ...]
    # Devices the RxDM sidecar needs (injected by the NRI device injector); empty for TCPX.
    rxdm_devices: tuple[str, ...]
    nic_count: int
    nccl_env: tuple[tuple[str, str], ...]


# GPU device nodes of an 8-GPU machine, injected into the RxDM sidecar.
_GPU_DEVICES = (*(f"/dev/nvidia{i}" for i in range(8)), "/dev/nvidiactl", "/dev/nvidia-uvm")


def _gpu_nic_ifnames(n: int) -> str:
    return ",".join(f"eth{i}" for i in range(1, n + 1))


# CEA gpudirect-tcpxo/README.md, release "Jan 9, 2026" (NCCL 2.28 shipped by the installer).
_TCPXO_2026_01_09 = GpuDirectRelease(
    mode="tcpxo",
    accelerator="nvidia-h100-mega-80gb",
    installer_image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
    rxdm_image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21",
    rxdm_command=("/fts/entrypoint_rxdm_container.sh", "--num_hops=2", "--num_nics=8"),
    rxdm_capabilities=("NET_ADMIN", "NET_BIND_SERVICE"),
    rxdm_devices=(*_GPU_DEVICES, "/dev/dmabuf_import_helper"),
    nic_count=8,
    nccl_env=(
        ("NCCL_FASTRAK_CTRL_DEV", "eth0"),
        ("NCCL_FASTRAK_IFNAME", _gpu_nic_ifnames(8)),
        ("NCCL_SOCKET_IFNAME", "eth0"),
        ("NCCL_CROSS_NIC", "0"),
        ("NCCL_PROTO", "Simple,LL128"),
        ("NCCL_MIN_NCHANNELS", "4"),
        ("NCCL_TUNER_PLUGIN", "libnccl-tuner.so"),
        ("NCCL_TUNER_CONFIG_PATH", f"{POD_LIB_DIR}/a3plus_tuner_config.textproto"),
        (
            "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE",
            f"{POD_LIB_DIR}/a3plus_guest_config.textproto",
        ),
        ("NCCL_NVLSTREE_MAX_CHUNKSIZE", "131072"),  # enforced by the guest config checker
        ("NCCL_P2P_NET_CHUNKSIZE", "524288"),
        ("NCCL_P2P_PCI_CHUNKSIZE", "524288"),
        ("NCCL_P2P_NVL_CHUNKSIZE", "1048576"),
        ("NCCL_FASTRAK_NUM_FLOWS", "2"),
        ("NCCL_FASTRAK_USE_SNAP", "1"),
        ("NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS", "600000"),
        ("NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL", "0"),
        ("NCCL_BUFFSIZE", "8388608"),
        ("NCCL_NET_GDR_LEVEL", "PIX"),
        ("NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING", "0"),
        ("NCCL_FASTRAK_USE_LLCM", "1"),
        ("NCCL_NVLS_ENABLE", "1"),
        ("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices"),
    ),
)

_TCPX_BINDINGS_TX = "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"
_TCPX_BINDINGS_RX = "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191"

# CEA gpudirect-tcpx/nccl-test-unprivileged-without-hostnetwork.yaml (plugin v3.1.12 with RxDM
# v2.0.15) and gpudirect-tcpx/nccl-config.yaml (NCCL settings); A3 High has 4 GPU NICs.
_TCPX_V3_1_12 = GpuDirectRelease(
    mode="tcpx",
    accelerator="nvidia-h100-80gb",
    installer_image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.12",
    rxdm_image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.15",
    rxdm_command=(
        "/tcpgpudmarxd/build/app/tcpgpudmarxd",
        "--gpu_nic_preset",
        "a3vm",
        "--gpu_shmem_type",
        "fd",
        "--uds_path",
        "/run/tcpx",
        "--setup_param",
        "--verbose 128 2 0 ",
    ),
    rxdm_capabilities=("NET_ADMIN",),
    rxdm_devices=_GPU_DEVICES,
    nic_count=4,
    nccl_env=(
        ("NCCL_SOCKET_IFNAME", "eth0"),
        ("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", _gpu_nic_ifnames(4)),
        ("NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0"),
        ("NCCL_CROSS_NIC", "0"),
        ("NCCL_ALGO", "Ring,Tree"),
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
    ),
)

RELEASES: dict[str, GpuDirectRelease] = {
    "tcpxo-2026-01-09": _TCPXO_2026_01_09,
    "tcpx-v3.1.12": _TCPX_V3_1_12,
}
DEFAULT_RELEASE = {"tcpxo": "tcpxo-2026-01-09", "tcpx": "tcpx-v3.1.12"}


def release_for(mode: str, name: str | None) -> GpuDirectRelease:
    """The pinned release for a GPUDirect network mode (validated by the settings schema)."""
    return RELEASES[name or DEFAULT_RELEASE[mode]]
