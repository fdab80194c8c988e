"""The real tier's components listen on ports picked below the kernel's ephemeral range, where
no client connection takes its local port before the component binds it."""

from __future__ import annotations

import random
import socket

import pytest

from tools.realtier.controlplane import EPHEMERAL_PORTS, PORTS_FROM, free_port


def test_a_free_port_lies_below_the_ephemeral_range_and_is_not_one_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ephemeral_low = int(EPHEMERAL_PORTS.read_text().split()[0])
    first = free_port()
    assert PORTS_FROM <= first < ephemeral_low
    with socket.create_server(("127.0.0.1", first)):
        other = free_port()
        picks = iter([first, other])  # the first pick is in use: the next one is taken
        monkeypatch.setattr(random, "randrange", lambda _low, _high: next(picks))
        assert free_port() == other
