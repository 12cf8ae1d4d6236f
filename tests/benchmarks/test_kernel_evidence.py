"""benchmarks/kernel_evidence.py: the leave-one-data-set-out decision on the kernel default."""

from __future__ import annotations

import pytest

from benchmarks.kernel_evidence import adopts, decision_table, main


def _cells(ratios: dict[str, float]) -> list[dict]:
    return [{"name": name, "ratio": ratio} for name, ratio in ratios.items()]


def test_a_rule_that_wins_everywhere_is_adopted_on_every_fold():
    decision = decision_table(_cells({"a": 0.8, "b": 0.9, "c": 0.7}))
    assert all(f["adopted"] and f["generalised"] for f in decision["folds"])
    assert decision["change_default"] and decision["verdict"] == "adopt evidence as the default"


def test_a_rule_one_set_supports_is_not_adopted():
    decision = decision_table(_cells({"a": 0.4, "b": 1.1, "c": 1.2}))
    by_fold = {f["held_out"]: f for f in decision["folds"]}
    assert not by_fold["a"]["adopted"] and not by_fold["a"]["generalised"], "held out, a would have gained"
    assert not decision["change_default"] and decision["verdict"] == "keep auto as the default"


def test_ties_keep_the_default():
    assert not adopts([1.0, 1.0, 1.0])
    assert not decision_table(_cells({"a": 1.0, "b": 1.0}))["change_default"]


def test_an_unknown_cell_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as raised:
        main(["--only", "nope"])
    assert raised.value.code == 2 and "unknown data set" in capsys.readouterr().err
