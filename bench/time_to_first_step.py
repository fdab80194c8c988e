"""Measured on real nodes: a JobSet's start behind Kueue, from its creation to the first training
step, phase by phase.

    python bench/time_to_first_step.py

Needs root, containerd and the real tier's tools and images, the training image among them
(`python -m tools.realtier build`; `.ci/run` builds them). A fresh control plane with two real
nodes (tools/realtier/realnodes.py) that already hold the training image (imported before the
clock starts: "image present"), the real Kueue and JobSet managers, then nerc-production as a
JobSet queued by Kueue (tests/real/training.py: the stack sized for the nodes, training a small
DDP model on gloo) created as pulumi-kubernetes creates it. Once every rank has stepped, the
start's phases as `timelineCommand` reads them (gpu_cluster.timeline with the built kubectl), in
seconds since the JobSet was created. Containers really run here, but on CPUs shared with
everything else on this host, with no GPU, NCCL or registry: a floor for what a cluster adds.
A measurement, not a test: nothing is asserted.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from gpu_cluster.timeline import fetch, phases  # noqa: E402
from tests.real.training import (  # noqa: E402
    FIRST_STEP_PATTERN,
    JOBSET,
    stepped_on_every_rank,
    submit,
    training_cluster,
    training_render,
)
from tools.realtier.build import locate  # noqa: E402
from tools.realtier.images import locate_images  # noqa: E402


def main() -> int:
    tools, images = locate(), locate_images()
    stack = training_render(images, JOBSET) if images is not None else None
    if tools is None or images is None or stack is None:
        print("the real tier's tools or images are not built: python -m tools.realtier build")
        return 1
    s = stack.settings
    with tempfile.TemporaryDirectory(prefix="first-step-") as workdir:
        started = time.monotonic()
        with training_cluster(tools, images, stack, Path(workdir), queued=True) as cluster:
            print(f"two real nodes holding the image, Kueue and JobSet: {_since(started)}")
            submitted = time.monotonic()
            submit(cluster, stack, Path(workdir) / "volumes")
            stepped_on_every_rank(cluster.kube, stack, 1)
            print(f"created until step 1 seen on every rank: {_since(submitted)}")
            cli = [str(tools.binary("kubectl")), "--kubeconfig", str(cluster.kubeconfig)]
            run = fetch(cli, s.namespace, "jobset", s.name, first_step=FIRST_STEP_PATTERN)
    found = phases(run)
    created = found[0].at
    assert created is not None
    print(f"{'phase':<14}{'s since the JobSet was created':>32}")
    for phase in found:
        since = f"{(phase.at - created).total_seconds():.0f}" if phase.at is not None else "-"
        print(f"{phase.name:<14}{since:>32}")
    return 0


def _since(start: float) -> str:
    return f"{time.monotonic() - start:.0f} s"


if __name__ == "__main__":
    sys.exit(main())
