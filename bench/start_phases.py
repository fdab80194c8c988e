"""Measured on the real tier: the Kubernetes part of each shipped stack's start, phase by phase.

    python bench/start_phases.py [--stacks barcelona,gcp-a3]

Needs the real tier's tools (`python -m tools.realtier build`; `.ci/run` builds them). For each
stack: a fresh control plane on loopback, the stack's fake GPU nodes and a volume per claim, the
stack's objects created as pulumi-kubernetes creates them (one create call each), then, once the
training pods are Ready, the start's phases as `timelineCommand` reads them (gpu_cluster.timeline
with the built kubectl), in seconds since the workload was submitted. kwok plays the kubelets: no
image is pulled and no container runs, so this is the control plane's share of a start
(scheduling, controllers, admission), not a real cluster's; bench/critical_path.py estimates the
rest. A measurement, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from gpu_cluster.plan.launch import node_agents  # noqa: E402
from gpu_cluster.timeline import fetch, phases  # noqa: E402
from tests.real.cluster_state import come_up, provision  # noqa: E402
from tools.realtier.build import Tools, locate  # noqa: E402
from tools.realtier.controlplane import ControlPlane  # noqa: E402
from tools.realtier.kube import Kube, install_crds  # noqa: E402
from tools.realtier.stacks import render  # noqa: E402

STACKS = tuple(
    sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in PROJECT_DIR.glob("Pulumi.*.yaml"))
)
# The phases a StatefulSet start on kwok records (no image pull, no admission; agents: the
# stacks with node agents).
SHOWN = ("nodes ready", "agents ready", "scheduled", "initialized", "started", "ready")


def measure(tools: Tools, stack: str) -> dict[str, float | None]:
    """Seconds from submission to each phase of `stack`'s start on a fresh control plane."""
    with (
        tempfile.TemporaryDirectory(prefix="start-phases-") as workdir,
        ControlPlane(tools, workdir=Path(workdir) / "control-plane") as plane,
    ):
        kube = Kube(plane.kubeconfig)
        install_crds(kube, tools.crds)
        stack_render = render(stack)
        provision(kube, stack_render)
        sts, _ = come_up(kube, stack_render)
        cli = [str(tools.binary("kubectl")), "--kubeconfig", str(plane.kubeconfig)]
        meta = sts["metadata"]
        agents = list(node_agents(stack_render.settings))
        found = phases(fetch(cli, meta["namespace"], "statefulset", meta["name"], agents))
    submitted = found[0].at
    assert submitted is not None
    return {
        p.name: (p.at - submitted).total_seconds() if p.at is not None else None
        for p in found
        if p.name in SHOWN
    }


def report(tools: Tools, stacks: list[str]) -> str:
    lines = [
        "| stack | " + " | ".join(f"{name}, s" for name in SHOWN) + " |",
        "|---|" + "---|" * len(SHOWN),
    ]
    for stack in stacks:
        at = measure(tools, stack)
        cells = ["-" if at.get(name) is None else f"{at[name]:.0f}" for name in SHOWN]
        lines.append(f"| {stack} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stacks", default=",".join(STACKS), help="comma-separated stacks")
    args = parser.parse_args(argv)
    tools = locate()
    if tools is None:
        print("real-tier tools not built: run `python -m tools.realtier build`", file=sys.stderr)
        return 2
    print(report(tools, [s for s in args.stacks.split(",") if s]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
