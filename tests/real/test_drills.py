"""Failure drills on two real nodes (issue #40): a run a person submitted with `gpu-cluster run
submit` trains examples/checkpointing/train.py, saving every SAVE_EVERY steps in the
CHECKPOINT_DIR the submit gave it on the shared workspace claim (tests/real/drills.py).

- One rank's training process killed (SIGKILL, as the OOM killer ends it): the JobSet restarts
  the run, whose new pods resume from the newest complete checkpoint, losing at most the steps
  since it.
- A pod deleted (SIGTERM and its grace period, as a drain or `kubectl delete pod` ends it): the
  script saves on SIGTERM, so the restarted run resumes where it stopped and loses no step.

After the kill, the run's goodput ledger (`gpu-cluster run status`) counts the restart as the
drill timed it. Each drill's recovery time is a measurement (bench/recovery.py prints them),
never asserted. A run preempted by a higher-priority one: tests/real/test_preemption.py. Not
shown: a node made unusable (two real nodes, both in use, leave no spare to reschedule on)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real.conftest import RealCluster
from tests.real.drills import (
    RUN,
    SAVE_EVERY,
    SCRIPT,
    STACK,
    delete_pod,
    drill,
    drill_config,
    ledger_seconds,
    provide_stack,
    submit_run,
)
from tests.real.training import kill_worker, training_cluster
from tools.realtier.build import Tools
from tools.realtier.images import NodeImages
from tools.realtier.stacks import StackRender, render

pytestmark = pytest.mark.real


@pytest.fixture
def config(node_images: NodeImages) -> tuple[str, ...]:
    found = drill_config(node_images)
    if not found:
        pytest.skip("training image not built: run `python -m tools.realtier build`")
    return found


@pytest.fixture
def stack(config: tuple[str, ...]) -> StackRender:
    return render(STACK, config)


@pytest.fixture
def nodes(
    tools: Tools, node_images: NodeImages, stack: StackRender, tmp_path: Path
) -> Iterator[RealCluster]:
    with training_cluster(tools, node_images, stack, tmp_path, queued=True) as cluster:
        yield cluster


def test_a_run_resumes_from_its_checkpoints_after_a_killed_rank_and_a_deleted_pod(
    nodes: RealCluster, stack: StackRender, config: tuple[str, ...], tmp_path: Path
) -> None:
    cluster, namespace = nodes, stack.settings.namespace
    volumes = tmp_path / "volumes"
    provide_stack(cluster, stack, volumes)
    printed = submit_run(cluster, config, tmp_path)
    assert f"CHECKPOINT_DIR=/workspace/checkpoints/{RUN}" in printed, printed

    killed = drill(cluster, namespace, "rank killed", lambda pod: kill_worker(cluster, pod, SCRIPT))
    # The newest complete save at the kill: the last multiple of SAVE_EVERY rank 0 had reached
    # (it may have gone on a step or two after it was last seen).
    assert killed.resumed_from % SAVE_EVERY == 0, killed
    assert killed.resumed_from >= killed.last_before - killed.last_before % SAVE_EVERY, killed
    # On the claim, where the submit said: complete step-<n> directories.
    saved = volumes / "ml-dev-env-workspace" / "checkpoints" / RUN
    assert [d for d in saved.glob("step-*") if (d / "COMPLETE").is_file()], saved
    # Its goodput ledger (`run status --svg`): its buckets sum to its wall time (each shown to
    # the second); the restart, from the failed Job's event to the new rank 0's first step, is
    # the kill to that step (what the drill measured) within 30 s: after the kill, torchrun,
    # the pod and the Job controller notice it, the Job's failure is recorded once its pods
    # have ended, and the drill sees the step a poll late (10 s in all, measured here).
    picture = tmp_path / "ledger.svg"
    spent = ledger_seconds(cluster, config, tmp_path, picture)
    wall = spent.pop("wall time")
    assert sum(spent.values()) == pytest.approx(wall, abs=len(spent)), spent
    assert killed.seconds - 30 <= spent["restarts"] <= killed.seconds + 1, (killed, spent)
    assert spent["earlier attempts (not on record)"] > 0 and spent["productive steps"] > 0, spent
    assert picture.read_text().count("<title>") == len(spent), picture.read_text()

    deleted = drill(cluster, namespace, "pod deleted", lambda pod: delete_pod(cluster, pod))
    # Saved on SIGTERM: the run resumes at or after the last step seen, nothing lost.
    assert deleted.resumed_from >= deleted.last_before, deleted
