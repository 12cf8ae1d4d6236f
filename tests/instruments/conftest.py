"""Fixtures for the instrument tests."""

from __future__ import annotations

import pytest

from instruments import FunctionOracle, SimLabDriver

# schemathesis.toml loads schemathesis_hooks.py itself; a second import (pytest's doctest collection) would register
# its checks twice, which schemathesis refuses.
collect_ignore = ["schemathesis_hooks.py"]


@pytest.fixture
def sim_lab() -> SimLabDriver:
    """A seeded simulated lab whose oracle returns the candidate's ``x`` parameter, with noise sd 0.1."""
    return SimLabDriver(oracle=FunctionOracle(lambda c: c.values["x"], property="x"), noise_sd=0.1, seed=7)


@pytest.fixture
def serve_lab():
    """Start lab servers on free 127.0.0.1 ports in background threads: ``serve_lab(driver, **create_app_kwargs)``.

    ``port=`` reuses a given port (for restarts). Every server still running is stopped at teardown.
    """
    from instruments.server import ServerThread, create_app

    servers = []

    def start(driver, port: int = 0, **app_kwargs):
        server = ServerThread(create_app(driver, **app_kwargs), port=port).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
