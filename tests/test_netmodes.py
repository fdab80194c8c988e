"""The network-mode plug-ins (gpu_cluster/config/netmodes/): the schema accepts exactly their
names, each platform exactly its own, and a mode registered there alone renders a whole stack
(docs/development.md, "Add a network mode")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpu_cluster.config.loading import load_settings
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.config.netmodes import NETWORK_MODES, find_mode
from gpu_cluster.config.netmodes.base import ModePlugin
from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.machines import MACHINES
from gpu_cluster.offline.engine import ProgramRun, run_program
from tests.edits import edited_config

# The check script's transport names (scripts/allreduce_check.py TRANSPORTS, but `any`).
CHECK_TRANSPORTS = {"socket", "ib", "gib", "tcpx", "tcpxo"}


class MadeUp(ModePlugin):
    """A mode that does not exist, registered only in NETWORK_MODES: RoCE-like on OpenShift with
    its own NCCL variables, preflight on by default and no pod parts of its own."""

    key = "made_up"
    name = "made-up"
    platforms = ("openshift",)
    transport = "ib"
    preflight_by_default = True

    def nccl_env(self, s: Settings) -> dict[str, str]:
        return {"NCCL_NET": "IB", "NCCL_MADE_UP_LANES": str(s.gpus_per_node)}


def test_every_plugin_has_a_unique_key_and_platform_name_pair() -> None:
    pairs = [(p, m.name) for m in NETWORK_MODES.values() for p in m.platforms]
    assert len(pairs) == len(set(pairs))
    assert all(key == m.key for key, m in NETWORK_MODES.items())
    assert {m.transport for m in NETWORK_MODES.values()} <= CHECK_TRANSPORTS


@pytest.mark.parametrize("machine", list(MACHINES))
def test_every_machine_names_a_gke_mode_that_runs_on_it(machine: str) -> None:
    mode = find_mode("gke", MACHINES[machine].network_mode)
    assert mode is not None
    assert machine in mode.machines()


def test_rdma_is_two_modes_found_by_platform() -> None:
    on_openshift, on_gke = find_mode("openshift", "rdma"), find_mode("gke", "rdma")
    assert on_openshift is not None and on_gke is not None
    assert (on_openshift.transport, on_gke.transport) == ("ib", "gib")
    assert find_mode("openshift", "tcpxo") is None


def _made_up_run(monkeypatch: pytest.MonkeyPatch) -> ProgramRun:
    monkeypatch.setitem(NETWORK_MODES, MadeUp.key, MadeUp())
    overrides = ("networkMode=made-up", "verify.enabled=true", "!tcp")
    return run_program(*edited_config("nerc-production", overrides), "nerc-production")


def _training_env(run: ProgramRun) -> dict[str, Any]:
    (sts,) = [r.inputs for r in run.of_type("kubernetes:apps/v1:StatefulSet")]
    (container,) = [
        c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "training"
    ]
    return {e["name"]: e.get("value") for e in container["env"]}


def test_a_mode_registered_only_in_the_registry_renders_a_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = _made_up_run(monkeypatch)
    env = _training_env(run)
    # Its NCCL settings, from the stack (4 GPUs a pod), and none of tcp's.
    assert env["NCCL_MADE_UP_LANES"] == "4"
    assert env["NCCL_NET"] == "IB"
    assert "NCCL_SOCKET_IFNAME" not in env
    assert env["PREFLIGHT"] == "1"
    # The fabric check expects its transport.
    rendered = json.dumps(run.manifests()) + json.dumps(run.outputs)
    assert "--expected-transport ib" in rendered or '"--expected-transport", "ib"' in rendered


def test_a_made_up_mode_is_accepted_on_its_platform_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(NETWORK_MODES, MadeUp.key, MadeUp())
    base = {"platform": "openshift", "networkMode": "made-up", "kubernetesVersion": "1.31"}
    assert load_settings(base).network_mode == "made-up"
    with pytest.raises(ConfigError, match="allowed: 'tcp', 'tcpxo', 'tcpx', 'rdma'"):
        load_settings({**base, "platform": "gke"})
    with pytest.raises(ConfigError, match="'tcpx' or 'made-up'"):
        load_settings({**base, "networkMode": "made-down"})
