"""Measured on real nodes: how long a run takes to step again after a fault, and the steps it
loses, per drill (issue #40).

    python bench/recovery.py [--restart-strategy Recreate|BlockingRecreate]

Needs root, containerd and the real tier's tools and images, the training image among them
(`python -m tools.realtier build`). Two real nodes holding the image, the real Kueue and JobSet
managers, nerc-production as a JobSet stack, and a run submitted with `gpu-cluster run submit`
training examples/checkpointing/train.py (a save every 4 steps of 0.5 s) with its checkpoints on
the shared workspace claim (tests/real/drills.py); its start, from the submit to its first step,
phase by phase as `gpu-cluster run status` shows it (seconds since the JobSet was created). Then,
in turn: one rank's training process killed, and rank 0's pod deleted. For each: seconds from the
fault to rank 0's first step after the resume (polled once a second), the last step rank 0 was seen
at before the fault (it goes on while the fault is injected: a `kubectl exec`, or the grace period)
and the step the new pods resumed from. A kill loses the steps since the newest save (fewer than 4
here); SIGTERM saves the step the run stopped at, so a deleted pod loses none. Restart strategy:
workload.restartStrategy, JobSet's Recreate unless the flag says BlockingRecreate (no new pod until
every old one is gone). Then the run is stopped and the preemption drill runs on the same nodes
(tests/real/preemption.py; the stack's queue has workload.queue.preemption LowerPriority and the
classes low and high throughout): a `--priority low` run saves, a `--priority high` one makes Kueue
evict it, is stopped once it steps, and the low run is admitted again. Last, the low run stopped, a
run on one node (`--nodes 1`) whose node is made unusable (tainted NoExecute, as a failing node is
drained): seconds from the taint to its rank 0's first step on the other node, as for the first
two. For the preemption: seconds from the eviction (the Workload's Evicted condition, whole
seconds) to the low run's save on SIGTERM (its COMPLETE file's time), and from the re-admission
(Admitted, whole seconds) to its rank 0's first step after it; the time the high run holds the
quota is the user's, not measured. CPUs shared with everything else on this host, no GPU: a floor
for what a cluster adds. A measurement, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from tests.conftest import stack_context  # noqa: E402
from tests.real.cluster_state import paste  # noqa: E402
from tests.real.drills import (  # noqa: E402
    RUN,
    SCRIPT,
    STACK,
    delete_pod,
    drill,
    drill_config,
    node_drill,
    provide_stack,
    run_command,
    run_status,
    stepping_past,
    submit_run,
)
from tests.real.preemption import LOW, PRIORITIES, preemption_drill  # noqa: E402
from tests.real.training import kill_worker, training_cluster  # noqa: E402
from tools.realtier.build import locate  # noqa: E402
from tools.realtier.images import locate_images  # noqa: E402
from tools.realtier.stacks import render  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--restart-strategy", choices=("Recreate", "BlockingRecreate"), default="Recreate"
    )
    strategy = parser.parse_args().restart_strategy
    tools, images = locate(), locate_images()
    config = drill_config(images) if images is not None else ()
    if tools is None or images is None or not config:
        print("the real tier's tools or images are not built: python -m tools.realtier build")
        return 1
    config = (*config, *PRIORITIES, f"workload.restartStrategy={strategy}")
    stack = render(STACK, config)
    namespace = stack.settings.namespace
    with tempfile.TemporaryDirectory(prefix="recovery-") as workdir:
        root = Path(workdir)
        with training_cluster(tools, images, stack, root, queued=True) as cluster:
            provide_stack(cluster, stack, root / "volumes")
            submit_run(cluster, config, root)
            stepping_past(cluster, namespace, 0)
            status = run_status(cluster, config, root, root / "ledger.svg")
            start = status.split("the current pods' start:\n", 1)[1].split("\n\n", 1)[0]
            results = [
                drill(cluster, namespace, "rank killed", lambda p: kill_worker(cluster, p, SCRIPT)),
                drill(cluster, namespace, "pod deleted", lambda p: delete_pod(cluster, p)),
            ]
            paste(cluster, root, stack_context(STACK), run_command(config, "stop", RUN))
            submit_run(cluster, config, root, LOW, ("--priority", LOW))
            checkpoints = root / "volumes" / "ml-dev-env-workspace" / "checkpoints" / LOW
            preempted = preemption_drill(cluster, namespace, config, root, checkpoints)
            paste(cluster, root, stack_context(STACK), run_command(config, "stop", LOW))
            results.append(node_drill(cluster, namespace, config, root).recovery)
    print("the first run's start, `run submit` to its first step, as `run status` shows it:")
    print(start, end="\n\n")
    print(f"restart strategy {strategy}")
    print(f"{'drill':<15}{'s to step again':>16}{'last step seen':>16}{'resumed from':>14}")
    for r in results:
        print(f"{r.fault:<15}{r.seconds:>16.0f}{r.last_before:>16}{r.resumed_from:>14}")
    p = preempted
    print(
        f"\npreempted: eviction -> saved {p.evicted_to_saved:.0f} s, re-admission -> stepping "
        f"{p.readmitted_to_stepping:.0f} s; last step seen {p.last_before}, saved {p.saved}, "
        f"resumed from {p.resumed_from}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
