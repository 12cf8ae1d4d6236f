"""An outside driver, written against the public kit (``instruments.BaseDriver``) in a module that is not part of this
project, registered the way an installed package registers it (a ``dist-info`` folder with an ``entry_points.txt``
under ``closedloop.instruments``), runs a campaign from ``closedloop run``; the ledger records its observations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from orchestrator.ledger import Ledger

MOLECULES = ["C", "CC", "CCC", "CCCC", "CCCCC", "CCCCCC", "CO", "CCO", "CCCO", "CCCCO", "CN", "CCN"]

OUTSIDE_DRIVER = textwrap.dedent('''
    """A benchtop balance that weighs one sample at a time: only its instrument logic, over the kit's frontend."""

    import asyncio

    from instruments import BaseDriver, SafetyEnvelope


    class BenchtopDriver(BaseDriver):
        name = "benchtop"
        version = "9.1.0"

        def __init__(self, *, scale: float = 1.0, settle_s: float = 0.01):
            super().__init__(envelope=SafetyEnvelope(name="benchtop", forbidden_hazards={"explosive"}))
            self.scale, self.settle_s = float(scale), float(settle_s)

        async def describe(self):
            return {"stations": {"balance": 1}, "max_parallel_jobs": 2, "property": "y"}

        async def run(self, entry):
            start = self.book.now()
            await asyncio.sleep(self.settle_s)
            heavy_atoms = sum(ch.isalpha() for ch in entry.job.candidate.smiles)
            self.finish(entry, value=self.scale * heavy_atoms, uncertainty=0.0,
                        station_log=[("balance", start, self.book.now())])
''')


def _install_outside_driver(site: Path) -> None:
    """What ``pip install benchtop-lab`` would leave in site-packages: the module and its dist-info."""
    (site / "benchtop_lab.py").write_text(OUTSIDE_DRIVER)
    dist_info = site / "benchtop_lab-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: benchtop-lab\nVersion: 0.1.0\n")
    (dist_info / "entry_points.txt").write_text("[closedloop.instruments]\nbenchtop = benchtop_lab:BenchtopDriver\n")


def test_an_outside_base_driver_runs_a_campaign_from_the_cli(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _install_outside_driver(site)
    (tmp_path / "pool.csv").write_text("smiles\n" + "".join(f"{smiles}\n" for smiles in MOLECULES))
    spec = tmp_path / "campaign.toml"
    spec.write_text('[campaign]\nname = "benchtop"\nkind = "molecule"\n[objective]\nproperty = "y"\n'
                    'direction = "maximize"\n[space]\npool = "pool.csv"\ncolumn = "smiles"\n'
                    '[lab]\ndriver = "benchtop"\n[lab.parameters]\nscale = 2.0\n'
                    '[budget]\nlab_experiments = 4\n[planner]\nmain = "random"\ncontrol = "bo"\nbatch_size = 2\n')
    db = tmp_path / "ledger.db"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}

    run = subprocess.run(
        [sys.executable, "-m", "orchestrator.interfaces.cli_main", "run", str(spec), "--db", str(db), "--json",
         "--control-share", "0"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )

    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["stop_reason"].startswith("lab budget used"), summary
    ledger = Ledger.open(db, read_only=True)
    try:
        observed = [event.payload for event in ledger.events(summary["campaign_id"], types=["Observed"])]
    finally:
        ledger.close()
    assert len(observed) == 4
    assert {o["driver"] for o in observed} == {"benchtop"}
    assert all(o["status"] == "ok" for o in observed)
    # the values are the outside driver's own measurement: scale (2) x the molecule's heavy atoms
    possible = {2.0 * sum(ch.isalpha() for ch in smiles) for smiles in MOLECULES}
    assert {o["value"] for o in observed} <= possible
