"""The preemption drill on two real nodes (issue #40, tests/real/preemption.py): the drills'
stack with `workload.queue.preemption: LowerPriority` and two priority classes, `low` and
`high`. A `--priority low` run trains examples/checkpointing/train.py and saves; a `--priority
high` run submitted to the same queue (the quota holds one) makes Kueue evict the low one,
whose pods get SIGTERM and save the step they stopped at; the high run steps, and is stopped
with `gpu-cluster run stop`; Kueue admits the low run again and it resumes from the step it
saved, losing none. A class the stack does not offer is refused, and nothing is created.

The eviction -> saved and re-admission -> stepping times are measurements (bench/recovery.py
prints them), never asserted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_cluster.facts.kueue import JOBSET_API
from tests.conftest import stack_context
from tests.real.cluster_state import paste
from tests.real.conftest import RealCluster
from tests.real.drills import STACK, drill_config, provide_stack, run_command, submit_run
from tests.real.preemption import HIGH, LOW, PRIORITIES, preemption_drill
from tests.real.training import training_cluster
from tools.realtier.build import Tools
from tools.realtier.images import NodeImages
from tools.realtier.stacks import StackRender, render

pytestmark = pytest.mark.real


@pytest.fixture
def config(node_images: NodeImages) -> tuple[str, ...]:
    found = drill_config(node_images)
    if not found:
        pytest.skip("training image not built: run `python -m tools.realtier build`")
    return (*found, *PRIORITIES)


@pytest.fixture
def stack(config: tuple[str, ...]) -> StackRender:
    return render(STACK, config)


@pytest.fixture
def nodes(
    tools: Tools, node_images: NodeImages, stack: StackRender, tmp_path: Path
) -> Iterator[RealCluster]:
    with training_cluster(tools, node_images, stack, tmp_path, queued=True) as cluster:
        yield cluster


def test_a_preempted_run_saves_and_resumes_where_it_stopped_once_admitted_again(
    nodes: RealCluster, stack: StackRender, config: tuple[str, ...], tmp_path: Path
) -> None:
    cluster, namespace = nodes, stack.settings.namespace
    volumes = tmp_path / "volumes"
    provide_stack(cluster, stack, volumes)

    refused = paste(
        cluster,
        tmp_path,
        stack_context(STACK),
        run_command(config, "submit", "--name", "urgent", "--priority", "urgent") + " 2>&1; :",
    )
    assert f"it offers {LOW}, {HIGH}; nothing was created" in refused, refused
    assert not cluster.kube.list(JOBSET_API, "JobSet", namespace)

    submit_run(cluster, config, tmp_path, LOW, ("--priority", LOW))
    checkpoints = volumes / "ml-dev-env-workspace" / "checkpoints" / LOW
    preempted = preemption_drill(cluster, namespace, config, tmp_path, checkpoints)
    # SIGTERM saved the step the low run stopped at (at or after the last one seen before the
    # high run came), and it resumed from that save: no step lost.
    assert preempted.saved >= preempted.last_before, preempted
    assert preempted.resumed_from == preempted.saved, preempted
