"""`python -m tools.realtier build` builds the tools (cached); `python -m tools.realtier up`
also starts a control plane with the upstream CRDs and fake GPU nodes for a stack (and, with
--controllers, the Kueue and JobSet managers), prints how to reach it, and stops it on Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from tools.realtier.build import build, log_to_stderr
from tools.realtier.images import build_images
from tools.realtier.torchimage import build_training_image


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.realtier", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build or find every tool the real tier uses")
    up = commands.add_parser("up", help="start a control plane (and build what is missing)")
    up.add_argument("--stack", help="add the fake GPU nodes this stack would run on")
    up.add_argument(
        "--controllers", action="store_true", help="also run Kueue and JobSet with their webhooks"
    )
    up.add_argument(
        "--real-nodes",
        type=int,
        default=0,
        metavar="N",
        help="also start N real nodes (kubelet, containerd, CNI, cluster DNS; needs root)",
    )
    args = parser.parse_args(argv)

    tools = build(log_to_stderr)
    if args.command == "build":
        # The real nodes' images (their sandbox, the tests', the training's), built with host tools.
        images = build_images(log_to_stderr)
        if images:
            build_training_image(images.test, log_to_stderr)
        for directory in tools.bin_dirs:
            print(directory)
        return 0
    # Imported here: `build` needs only the standard library (CI runs it before any install).
    from tools.realtier.controllers import start_controllers
    from tools.realtier.controlplane import ControlPlane
    from tools.realtier.kube import Kube, install_crds
    from tools.realtier.nodenet import NodeNetwork
    from tools.realtier.realnodes import NodeSpec, RealNodes
    from tools.realtier.stacks import fake_nodes

    images = build_images(log_to_stderr) if args.real_nodes else None
    network = NodeNetwork.claim(args.real_nodes) if images else None
    if network:
        network.up()
    plane = ControlPlane(tools, log_to_stderr, address=network.gateway if network else "127.0.0.1")
    nodes: RealNodes | None = None
    plane.start()
    try:
        kube = Kube(plane.kubeconfig)
        install_crds(kube, tools.crds)
        if args.controllers:
            start_controllers(plane, kube, tools)
        if args.stack:
            for node in fake_nodes(args.stack):
                kube.create(node.manifest())
        if network and images:
            specs = [NodeSpec(f"real-node-{i}") for i in range(args.real_nodes)]
            nodes = RealNodes(tools, plane, network, specs, (images.test,), images.pause)
            nodes.log = log_to_stderr
            nodes.start()
            log_to_stderr(f"the real nodes hold the test image {images.test.name}")
        log_to_stderr(f"ready: export KUBECONFIG={plane.kubeconfig}  (Ctrl-C stops and removes it)")
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        while not stop.wait(1):  # a timed wait, so the handlers get to run
            pass
    finally:
        if nodes:
            nodes.stop()
        plane.stop()
        if network:
            network.down()
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
