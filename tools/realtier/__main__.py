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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.realtier", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build or find every tool the real tier uses")
    up = commands.add_parser("up", help="start a control plane (and build what is missing)")
    up.add_argument("--stack", help="add the fake GPU nodes this stack would run on")
    up.add_argument(
        "--controllers", action="store_true", help="also run Kueue and JobSet with their webhooks"
    )
    args = parser.parse_args(argv)

    tools = build(log_to_stderr)
    if args.command == "build":
        # The real nodes' images (their sandbox and the tests'), built with host tools.
        build_images(log_to_stderr)
        for directory in tools.bin_dirs:
            print(directory)
        return 0
    # Imported here: `build` needs only the standard library (CI runs it before any install).
    from tools.realtier.controllers import start_controllers
    from tools.realtier.controlplane import ControlPlane
    from tools.realtier.kube import Kube, install_crds
    from tools.realtier.stacks import fake_nodes

    plane = ControlPlane(tools, log_to_stderr)
    plane.start()
    try:
        kube = Kube(plane.kubeconfig)
        install_crds(kube, tools.crds)
        if args.controllers:
            start_controllers(plane, kube, tools)
        if args.stack:
            for node in fake_nodes(args.stack):
                kube.create(node.manifest())
        log_to_stderr(f"ready: export KUBECONFIG={plane.kubeconfig}  (Ctrl-C stops and removes it)")
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        while not stop.wait(1):  # a timed wait, so the handlers get to run
            pass
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
