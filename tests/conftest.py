"""Shared fixtures: a ledger in tmp_path, small campaign specs on the shipped example data, and a throwaway
PostgreSQL database (``tests.postgres``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.postgres import postgres_server_url, postgres_url  # noqa: F401  (fixtures for every test module)

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
FREESOLV_SPEC = ROOT / "campaigns" / "freesolv" / "campaign.toml"
BUCHWALD_SPEC = ROOT / "campaigns" / "buchwald_hartwig" / "campaign.toml"


@pytest.fixture
def ledger(tmp_path):
    from orchestrator.ledger import Ledger

    store = Ledger.open(tmp_path / "ledger.db")
    yield store
    store.close()


def small_spec(path: Path = FREESOLV_SPEC, **overrides):
    """The example spec with a small lab budget, no early stop and the bo/random arms, so a campaign runs a few
    iterations quickly."""
    from orchestrator.spec import load_spec, validate_spec

    data = load_spec(path).model_dump()
    data["budget"]["lab_experiments"] = overrides.pop("lab_experiments", 12)
    data["stop"]["on_target"] = False
    # The loop's mechanics are tested on the fast arms; the llm arm has tests of its own.
    data["planner"]["main"], data["planner"]["control"] = "bo", "random"
    # Surveying xtb over 642 molecules costs a CPU-minute per campaign; the loop's mechanics are tested without it
    # (tests/orchestrator/loop/test_survey.py and the bench tests exercise the survey).
    data["screening"]["survey_share"] = 0.0
    for dotted, value in overrides.items():
        section, field = dotted.split("__")
        data[section][field] = value
    return validate_spec(data)


def surveyed_freesolv(tmp_path: Path, *, n_molecules: int, lab_experiments: int):
    """The example spec on the first ``n_molecules`` FreeSolv molecules, with the real ladder (descriptors, GFN2-xTB,
    the GAFF table) and a survey allowed (`[screening] survey_share = 0.5`), so a campaign surveys xtb in seconds."""
    import pandas as pd

    from orchestrator.spec import validate_spec

    frame = pd.read_csv(FREESOLV_SPEC.parent / "data" / "FreeSolv_gauche.csv").head(n_molecules)
    frame.to_csv(tmp_path / "pool.csv", index=False)
    data = small_spec(lab_experiments=lab_experiments, screening__survey_share=0.5).model_dump()
    data["space"]["pool"] = str(tmp_path / "pool.csv")
    return validate_spec(data)


@pytest.fixture
def freesolv_spec():
    return small_spec()
