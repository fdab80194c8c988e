"""What an OpenShift RDMA stack is warned about in the preview: cluster-wide settings it leaves to
the cluster admin (whereabouts' IP reconciler, the memlock drop-in's node disruption policy) and
the memlock MachineConfig's pool when it is left at every worker."""

from __future__ import annotations

from tests.conftest import BARCELONA_ADOPTS_NADS, BARCELONA_CREATES_NADS, run_stack

MACHINECONFIG = "rdma.memlock=machineconfig"


def test_nads_the_stack_renders_warn_that_openshift_runs_no_ip_reconciler_for_them() -> None:
    # OpenShift deploys whereabouts-reconciler only for a whereabouts network listed in the
    # Network CR (openshift/cluster-network-operator pkg/network/multus_ipam.go at 0f229ae).
    for nads in (BARCELONA_CREATES_NADS, BARCELONA_ADOPTS_NADS):
        reconciler = [w for w in run_stack("barcelona", *nads).warnings if "whereabouts" in w]
        assert len(reconciler) == 1, nads
        assert reconciler[0].startswith("gpu-cluster:rdma.networkAttachments = ")
        assert "whereabouts-reconciler" in reconciler[0]
        assert "OpenShift: RDMA addresses" in reconciler[0]
    # Referenced NADs carry their own IPAM; a tcp stack has none.
    for stack in ("barcelona", "nerc-production"):
        assert not [w for w in run_stack(stack).warnings if "whereabouts" in w], stack


def test_an_unset_machine_config_pool_warns_that_every_worker_is_lifted() -> None:
    (pool,) = [
        w for w in run_stack("barcelona", MACHINECONFIG).warnings if "machineConfigPool" in w
    ]
    assert pool.startswith("gpu-cluster:rdma.machineConfigPool is unset: 'worker'")
    assert "every worker node" in pool
    # A stated pool, a GPU pool or `worker` itself, is the stack's choice: no warning.
    for stated in ("gpu", "worker"):
        warnings = run_stack(
            "barcelona", MACHINECONFIG, f"rdma.machineConfigPool={stated}"
        ).warnings
        assert not [w for w in warnings if "machineConfigPool" in w], stated


def test_the_reboot_warning_names_the_crio_restart_policy_that_avoids_it() -> None:
    (disruption,) = [w for w in run_stack("barcelona", MACHINECONFIG).warnings if "reboots" in w]
    assert "node disruption policy" in disruption
    assert "/etc/crio/crio.conf.d/99-gpu-cluster-memlock" in disruption
    assert "crio.service" in disruption
