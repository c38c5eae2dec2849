"""A private Azurite whose free ports were taken before node bound them picks others; given ports, it says so."""

from __future__ import annotations

import socket

import pytest

from devhost.azurite import Azurite, free_port


def test_a_private_azurite_whose_port_was_taken_picks_other_ports() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        held = taken.getsockname()[1]
        az = Azurite(ports=(held, free_port(), free_port()), _own_ports=True)  # as private() would have picked
        try:
            az.start(timeout=120)  # the bound only stops a hang
            assert held not in az.ports and az.running() and az.proc is not None
        finally:
            az.close()


def test_an_azurite_on_given_ports_names_the_port_that_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        az = Azurite(ports=(taken.getsockname()[1], free_port(), free_port()))
        try:
            with pytest.raises(RuntimeError, match="could not bind its ports"):
                az.start(timeout=120)
        finally:
            az.close()
