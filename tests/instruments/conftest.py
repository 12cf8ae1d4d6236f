"""Fixtures for the instrument tests."""

from __future__ import annotations

import pytest

from instruments import FunctionOracle, SimLabDriver


@pytest.fixture
def sim_lab() -> SimLabDriver:
    """A seeded simulated lab whose oracle returns the candidate's ``x`` parameter, with noise sd 0.1."""
    return SimLabDriver(oracle=FunctionOracle(lambda c: c.values["x"], property="x"), noise_sd=0.1, seed=7)
