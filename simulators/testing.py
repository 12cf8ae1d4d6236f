"""Contract tests every simulator must pass, as a mixin (in the manner of BoTorch's test mixins).

A simulator's test module subclasses ``SimulatorContract`` and supplies a factory and candidates::

    class TestMySimulator(SimulatorContract):
        def make_simulator(self):
            return MySimulator()
        def good_candidates(self):
            return [Molecule.parse("CCO"), Molecule.parse("c1ccccc1")]
        def failing_candidate(self):
            return Molecule(smiles="not-a-smiles", id="BROKEN")
        def wrong_kind_candidate(self):
            return Material.parse("NaCl")

pytest then runs every ``test_*`` method below against it. Third-party plug-ins can use it the same way.
pytest is imported inside the tests, so importing this module does not need it.
"""

from __future__ import annotations

import json
import math
import pickle

from simulators.base import CANDIDATE_KINDS, AnyCandidate, Simulator
from vocabulary.domain import Observation, SetupError

__all__ = ["SimulatorContract"]


class SimulatorContract:
    """Mixin of contract tests; subclasses implement the four hooks (return None where one does not apply)."""

    is_deterministic = True

    def make_simulator(self) -> Simulator:
        raise NotImplementedError

    def good_candidates(self) -> list[AnyCandidate]:
        """At least two candidates that evaluate with status "ok"."""
        raise NotImplementedError

    def failing_candidate(self) -> AnyCandidate | None:
        """A candidate of an applicable kind whose calculation fails."""
        raise NotImplementedError

    def wrong_kind_candidate(self) -> AnyCandidate | None:
        """A candidate of a kind the simulator does not apply to."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------- tests
    def test_satisfies_the_protocol(self) -> None:
        sim = self.make_simulator()
        assert isinstance(sim, Simulator), f"{type(sim).__name__} lacks Simulator attributes"
        assert isinstance(sim.name, str) and sim.name
        assert isinstance(sim.version, str) and sim.version
        assert isinstance(sim.fidelity, int) and sim.fidelity >= 0
        assert sim.implemented_properties and all(isinstance(p, str) for p in sim.implemented_properties)
        assert sim.applies_to and set(sim.applies_to) <= CANDIDATE_KINDS, sim.applies_to
        assert json.loads(json.dumps(sim.parameters)) == sim.parameters, "parameters must survive a JSON round trip"

    def test_good_candidates_come_back_ok_with_declared_float_properties(self) -> None:
        sim = self.make_simulator()
        for obs in sim.evaluate(self.good_candidates()):
            assert obs.status == "ok", obs.reason
            assert obs.properties and set(obs.properties) <= set(sim.implemented_properties), obs.properties
            assert all(isinstance(v, float) and math.isfinite(v) for v in obs.properties.values()), obs.properties

    def test_one_observation_per_input_in_order_with_provenance(self) -> None:
        sim = self.make_simulator()
        good = self.good_candidates()
        failing = self.failing_candidate()
        batch = good + ([failing] if failing is not None else []) + good[::-1]
        observations = sim.evaluate(batch)
        assert [o.candidate_id for o in observations] == [c.id for c in batch]
        for candidate, obs in zip(batch, observations, strict=True):
            assert isinstance(obs, Observation)
            assert (obs.source, obs.source_version, obs.fidelity) == (sim.name, sim.version, sim.fidelity)
            assert obs.cost_s == sim.cost_model(candidate), "cost_s must come from the cost model"
            assert obs.parameters == sim.parameters

    def test_failing_candidate_comes_back_failed_with_a_reason(self) -> None:
        failing = self.failing_candidate()
        if failing is None:
            return
        good = self.good_candidates()
        observations = self.make_simulator().evaluate([good[0], failing, good[1]])
        assert [o.status for o in observations] == ["ok", "failed", "ok"], [o.reason for o in observations]
        assert observations[1].reason and observations[1].properties == {}

    def test_wrong_kind_raises_setup_error_before_running(self, monkeypatch) -> None:
        import pytest

        wrong = self.wrong_kind_candidate()
        if wrong is None:
            return
        sim = self.make_simulator()
        assert wrong.type not in sim.applies_to
        ran = []
        for hook in ("calculate", "calculate_batch"):
            if hasattr(sim, hook):
                monkeypatch.setattr(sim, hook, lambda *args, _hook=hook: ran.append(_hook))
        with pytest.raises(SetupError, match=wrong.type):
            sim.evaluate([*self.good_candidates(), wrong])
        assert ran == [], f"{ran} ran before the setup error"

    def test_a_bare_candidate_or_string_is_a_setup_error(self) -> None:
        import pytest

        sim = self.make_simulator()
        for not_a_batch in (self.good_candidates()[0], "CCO"):
            with pytest.raises(SetupError):
                sim.evaluate(not_a_batch)

    def test_empty_batch_gives_no_observations(self) -> None:
        assert self.make_simulator().evaluate([]) == []

    def test_repeat_and_pickled_copy_agree(self) -> None:
        # executors (process pools, Ray) ship simulators to workers by pickling them
        if not self.is_deterministic:
            return
        sim = self.make_simulator()
        batch = self.good_candidates()
        first = sim.evaluate(batch)
        assert sim.evaluate(batch) == first
        assert pickle.loads(pickle.dumps(sim)).evaluate(batch) == first
