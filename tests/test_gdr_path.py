"""The GPUDirect RDMA path check preflight.sh runs in rdma mode (scripts/gdr-path.sh), on the
fake nodes of tests/test_preflight.py: DMA-BUF (the open GPU kernel module on Linux 5.12 or
newer, NVIDIA's recommended path) or the legacy nvidia-peermem module, as NCCL looks for it; a
failure with verify.requireGdr, else a warning; and the stack's setting that asks for it."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT, container, env_of, run_stack
from tests.test_preflight import (
    OPEN_MODULE,
    PROPRIETARY_MODULE,
    Node,
    fails,
    healthy_node,
    passes,
    preflight,
)


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Node:
    return healthy_node(tmp_path_factory.mktemp("gdr") / "node")


def test_dma_buf_s_prerequisites_are_a_path(node: Node) -> None:
    out = passes(preflight(node.env()))
    assert "ok: GPUDirect RDMA: DMA-BUF (open GPU kernel module, Linux 5.14.0-570" in out


def test_nvidia_peermem_where_nccl_looks_for_it_is_a_path(node: Node) -> None:
    node.set_gpu_driver(PROPRIETARY_MODULE, "4.18.0-553.el8_10.x86_64")
    # NVIDIA/nccl src/transport/net_ib/gdr.cc: /sys/module/nvidia_peermem/version.
    (node.sys / "module/nvidia_peermem").mkdir(parents=True)
    (node.sys / "module/nvidia_peermem/version").write_text("580.95.05\n")
    out = passes(preflight({**node.env(), "GDR_REQUIRED": "true"}))
    assert "ok: GPUDirect RDMA: nvidia-peermem loaded" in out


@pytest.mark.parametrize(
    ("module", "kernel", "why"),
    [
        (PROPRIETARY_MODULE, "5.14.0-570.el9_6.x86_64", "not the open kernel module"),
        (OPEN_MODULE, "5.11.0-1.x86_64", "Linux 5.11.0-1.x86_64 is older than DMA-BUF's 5.12"),
        ("", "5.14.0", "driver/nvidia/version is unreadable"),
    ],
    ids=["proprietary-module", "old-kernel", "unreadable"],
)
def test_without_a_path_required_gdr_fails_naming_the_key_and_the_fix(
    node: Node, module: str, kernel: str, why: str
) -> None:
    node.set_gpu_driver(module, kernel)
    if not module:
        (node.proc / "driver/nvidia/version").unlink()
    (line,) = fails(preflight({**node.env(), "GDR_REQUIRED": "true"}), "GPUDirect RDMA")
    assert why in line
    assert "verify.requireGdr is true" in line
    assert "driver.kernelModuleType open" in line and "driver.rdma.enabled true" in line


def test_without_a_path_and_not_required_it_is_a_warning_not_a_failure(node: Node) -> None:
    node.set_gpu_driver(PROPRIETARY_MODULE, "5.14.0")
    out = passes(preflight({**node.env(), "NCCL_NET_GDR_LEVEL": "SYS"}))
    (warning,) = [line for line in out.splitlines() if line.startswith("preflight: warning: ")]
    assert "NCCL will stage through host memory" in warning
    assert "NCCL_NET_GDR_LEVEL=SYS has no effect" in warning
    assert out.splitlines()[-1] == "preflight: OK (17 checks)"  # a warning is no check


def test_the_rdma_stack_passes_verify_require_gdr_to_preflight() -> None:
    for setting, expected in (("true", "true"), ("false", "false")):
        env = env_of(container(run_stack("barcelona", f"verify.requireGdr={setting}")))
        assert env["GDR_REQUIRED"] == expected
    # Without the fabric check nothing requires it.
    assert (
        env_of(container(run_stack("barcelona", "verify.enabled=false")))["GDR_REQUIRED"] == "false"
    )


def test_a_gdr_level_nothing_checks_is_a_warning_naming_both_keys() -> None:
    (warning,) = [
        w for w in run_stack("barcelona", "rdma.gdrLevel=SYS").warnings if "gdrLevel" in w
    ]
    assert warning.startswith(
        "gpu-cluster:rdma.gdrLevel is 'SYS' but verify.requireGdr is false: nothing checks"
    )
    assert "set verify.requireGdr to true" in warning and "or unset rdma.gdrLevel" in warning
    checked = run_stack("barcelona", "rdma.gdrLevel=SYS", "verify.requireGdr=true")
    assert not [w for w in checked.warnings if "gdrLevel" in w]
    # LOC turns it off: nothing to check.
    assert not [w for w in run_stack("barcelona", "rdma.gdrLevel=LOC").warnings if "gdrLevel" in w]
    # The shipped stack leaves the level to NCCL.
    assert not [w for w in run_stack("barcelona").warnings if "gdrLevel" in w]


def test_the_dma_buf_prerequisites_are_the_gpu_operator_s() -> None:
    """tests/vendor/gpu_operator.yaml: the GPU Operator's GPUDirect RDMA page's table."""
    facts = yaml.safe_load((ROOT / "tests/vendor/gpu_operator.yaml").read_text())["gpudirect_rdma"]
    assert facts["recommended"] == "dma-buf"
    major, minor = facts["dma_buf"]["linux_kernel"].split(".")
    script = (ROOT / "scripts/gdr-path.sh").read_text()
    assert f"readonly DMABUF_KERNEL_MAJOR={major} DMABUF_KERNEL_MINOR={minor}\n" in script
    assert facts["dma_buf"]["gpu_driver"] == "open kernel module"
    assert facts["peermem"]["operator_setting"] == "driver.rdma.enabled"
    assert "driver.rdma.enabled true" in script
