"""`gpu-cluster run status`'s last step: the last line of rank 0's log tail (read with
timestamps) that the stack's first-step pattern matches, with when it was printed."""

from __future__ import annotations

import datetime

from gpu_cluster.offline.run_records import RunRecords, last_step

PATTERN = r"^step (\d+) loss "
NOW = datetime.datetime(2026, 11, 29, 5, 0, 30, tzinfo=datetime.UTC)


def records(tail: str) -> RunRecords:
    return RunRecords(events=[], log="", tail=tail, nodes=None)


def test_the_last_matching_line_is_shown_with_its_time_and_age() -> None:
    tail = (
        "p step 4 loss 0.4\n"  # cut by the tail: no timestamp, not read
        "2026-11-29T05:00:10.123456789Z step 5 loss 0.31\n"
        "2026-11-29T05:00:20.5Z step 6 loss 0.30\n"
        "2026-11-29T05:00:21.0Z saved step-6\n"
    )
    assert last_step(records(tail), PATTERN, NOW) == (
        "last step: step 6 loss 0.30 (rank 0, 05:00:20 UTC, 10 s ago)"
    )


def test_a_log_without_a_step_says_none_yet() -> None:
    tail = "2026-11-29T05:00:10Z waiting for the rendezvous\n"
    assert last_step(records(tail), PATTERN, NOW) == (
        "last step: none printed by rank 0's current pod yet"
    )
    assert last_step(records(""), PATTERN, NOW).endswith("yet")
