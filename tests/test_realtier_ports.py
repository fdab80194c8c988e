"""The real tier's components listen on ports picked outside the kernel's ephemeral range, where
no client connection takes its local port before the component binds it."""

from __future__ import annotations

import random
import socket

import pytest

from tools.realtier.controlplane import EPHEMERAL_PORTS, PORTS_FROM, free_port


def test_a_free_port_lies_outside_the_ephemeral_range_and_is_not_one_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    low, high = (int(bound) for bound in EPHEMERAL_PORTS.read_text().split())
    first = free_port()
    assert PORTS_FROM <= first < low or high < first <= 65535
    with socket.create_server(("127.0.0.1", first)):
        other = free_port()
        picks = iter([first, other])  # the first pick is in use: the next one is taken
        monkeypatch.setattr(random, "choice", lambda _ports: next(picks))
        assert free_port() == other
