"""The fault and fuzz suite (issue 18): every way a pool, a history file or a spec enters closedloop, fed hostile input.

Each property says what a clean answer is. Input that cannot be used is refused with the project's own error
(``SetupError``, ``HistoryImportError``, ``SpecError``, ``InvalidCandidate``), whose message names the file, the line
or field and the value; never a pandas, ``OverflowError``, ``KeyError`` or ``UnicodeDecodeError`` traceback. Under
``on_bad_rows = "skip"`` every row left out is listed, and every row not listed is in the pool. A refused campaign
leaves the ledger as it was, and the command line says so in one ``error:`` line with exit code 2.

The cells are drawn from spellings that broke something once (``Fe1e-400O`` read as O2, ``NaN`` as a missing
sodium nitride, ``CCO C`` as ethanol, a 400-digit integer as an ``OverflowError``, a row with one field too many as a
shifted table) and from arbitrary text and bytes. ``derandomize=True`` makes every run draw the same examples.
"""

from __future__ import annotations

import csv
import io
import math
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import Ledger, verify
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.importing import HistoryFile, HistoryImportError, read_history
from orchestrator.space.checks import as_float, iter_csv_records
from orchestrator.space.pool import load_pool
from orchestrator.space.stream import condition_space_from_csv, count_rows, stream_top_k
from orchestrator.spec import SpecError, load_spec, validate_spec
from vocabulary.domain import (
    ClosedLoopError,
    InvalidCandidate,
    Material,
    Molecule,
    SetupError,
    parse_candidate,
)


def fuzz(n: int) -> settings:
    """``n`` examples, the same ones every run, no deadline (rdkit and pymatgen warm up on first use)."""
    return settings(max_examples=n, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


NUMBERS = ["1", "-2.5", "0", "7", "nan", "NaN", "inf", "-inf", "1e400", "-1e400", "1e308", "9" * 25, "-" + "9" * 400,
           "1e-400", "", " ", "abc", "٣", "1_000", "0x10", "True", "NA", "None", "1,5"]
SMILES = ["CCO", "OCC", "C(C)O", "c1ccccc1", "CCN", "CCCC", "C1CC", "CC(C", "[Xx]", "CCO C", "C\tC", "CCO\nC", "NaN",
          "None", "", "é", "C" * 30]
FORMULAS = ["NaCl", "NaN", "Fe2O3", "O3Fe2", "LiFePO4", "Fe1e-400O", "Fe0O", "Fe1e308O", "Fe999999999999999999999O",
            "XzO", "Li0.5CoO2", "Fe١O", "H1e-10", "Fe(OH)0", "", "NA"]
CATEGORIES = ["p", "q", "none", "None", "NA", "", "ü", "1"]


def cell(spellings: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(spellings), st.text(max_size=5))


def to_csv(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


@contextmanager
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


# ---------------------------------------------------------------------------------------------------- candidates
SYMBOLS = ["Fe", "O", "H", "Na", "N", "Cl", "Li", "Co", "Xx", "D", "e"]
AMOUNTS = ["", "0", "0.0", "1", "2", ".5", "1.", "1e-400", "1e-9", "1e-7", "1e-6", "3e-6", "1.234567891", "999999",
           "1000001", "1e308", "1e400", "9" * 30, "-1", "٣", "1_0", "nan", "inf", "2.0000000001", " "]


@fuzz(300)
@given(parts=st.lists(st.tuples(st.sampled_from(SYMBOLS), st.sampled_from(AMOUNTS)), min_size=1, max_size=4),
       grouped=st.booleans())
@example(parts=[("Fe", "1e-400"), ("O", "")], grouped=False)  # lead (a): it read as O2
@example(parts=[("Fe", "999999999999999999999"), ("O", "")], grouped=False)  # read as Fe1e21O
def test_a_formula_is_refused_or_keeps_every_element_it_names(parts, grouped):
    text = "".join(symbol + amount for symbol, amount in parts)
    text = f"({text})2" if grouped else text
    try:
        material = Material.parse(text)
    except InvalidCandidate as exc:
        assert repr(text) in str(exc)
        return
    composition = material.to_composition()
    assert {e.symbol for e in composition.elements} == set(re.findall(r"[A-Z][a-z]*", text)), "no element dropped"
    assert all(1e-6 <= amount <= 2e6 for amount in composition.values())
    assert Material.parse(material.formula).id == material.id, "the canonical formula reads back as itself"


@fuzz(150)
@given(parts=st.lists(st.sampled_from(["C", "O", "N", "c1ccccc1", "(", ")", "=", "#", "[Na+]", ".", " ", "\t", "\n",
                                       "é", "1", "Cl"]), min_size=1, max_size=6))
@example(parts=["CCO", " ", "C"])  # rdkit reads 'C' as the name of ethanol
def test_a_smiles_is_refused_or_read_whole(parts):
    text = "".join(parts)
    try:
        molecule = Molecule.parse(text)
    except InvalidCandidate as exc:
        assert repr(text) in str(exc)
        return
    assert not any(ch.isspace() for ch in text.strip()), "whitespace inside a SMILES is never read past"
    assert Molecule.parse(molecule.smiles).id == molecule.id


@fuzz(200)
@given(value=st.one_of(st.sampled_from(NUMBERS), st.text(max_size=8), st.integers(), st.floats(), st.booleans(),
                       st.none(), st.integers(min_value=10**300, max_value=10**400)))
def test_a_cell_is_a_float_nan_or_infinite_never_an_overflow(value):
    number = as_float(value)
    assert isinstance(number, float)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**309:
        assert number == (math.inf if value > 0 else -math.inf)


# ---------------------------------------------------------------------------------------------------- pools
@st.composite
def pool_rows(draw, kind: str) -> list[list[str]]:
    """A pool table (header first): candidate column(s), the lab truth ``y`` and a table rung's ``z``."""
    header = ["a", "b", "y", "z"] if kind == "conditions" else ["x", "y", "z"]
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        if kind == "conditions":
            candidate = [draw(cell(NUMBERS)), draw(cell(CATEGORIES))]
        else:
            candidate = [draw(cell(SMILES if kind == "molecule" else FORMULAS))]
        rows.append([*candidate, draw(cell(NUMBERS)), draw(cell(NUMBERS))])
    rows += draw(st.lists(st.sampled_from(rows), max_size=2))  # exact duplicates
    return [header, *rows]


def pool_spec(directory: Path, kind: str, on_bad_rows: str, replicates: str = "must_agree", *,
              has_truth: bool = True) -> dict:
    space = {"columns": ["a", "b"]} if kind == "conditions" else {"column": "x"}
    return {"campaign": {"name": "fuzz", "kind": kind}, "objective": {"direction": "maximize"},
            "space": {"pool": "pool.csv", **space, "on_bad_rows": on_bad_rows, "replicates": replicates},
            "ladder": [{"name": "t", "simulator": "table", "column": "z"}] if has_truth else [],
            "lab": {"oracle_column": "y"} if has_truth else {"driver": "http"}, "budget": {"lab_experiments": 1},
            "planner": {"main": "random", "control": None, "control_share": 0}, "base_dir": str(directory)}


def _load(directory: Path, kind: str, on_bad_rows: str, replicates: str = "must_agree", *, has_truth: bool = True):
    """The pool, or the refusal's message (a SetupError, and nothing else)."""
    try:
        return load_pool(validate_spec(pool_spec(directory, kind, on_bad_rows, replicates, has_truth=has_truth)))
    except SetupError as exc:
        return str(exc)


def _row_candidate(kind: str, record: list[str], pool):
    raw = {"a": record[0], "b": record[1]} if kind == "conditions" else record[0]
    return parse_candidate(kind, raw, pool.space)


@pytest.mark.parametrize("kind", ["molecule", "material", "conditions"])
@fuzz(40)
@given(data=st.data(), replicates=st.sampled_from(["must_agree", "average"]))
def test_refuse_and_skip_agree_and_every_row_is_used_or_listed(kind, data, replicates):
    rows = data.draw(pool_rows(kind))
    with folder() as directory:
        (directory / "pool.csv").write_text(to_csv(rows))
        refused, skipped = _load(directory, kind, "refuse", replicates), _load(directory, kind, "skip", replicates)
        records = list(iter_csv_records(directory / "pool.csv"))
        if isinstance(skipped, str):  # every row is bad: both refuse, naming the file
            assert isinstance(refused, str) and "pool.csv" in refused and "pool.csv" in skipped
            return
        lines = [int(re.match(r"line (\d+): ", row).group(1)) for row in skipped.skipped_rows]
        assert len(set(lines)) == len(lines) <= len(records), "each bad row listed once, by its line"
        if skipped.skipped_rows:
            message = refused
            assert isinstance(message, str) and message.startswith(f"pool pool.csv has {len(lines)} bad row(s): ")
            assert all(row in message for row in skipped.skipped_rows[:5]), "refusal names the rows skip lists"
        else:
            assert not isinstance(refused, str) and refused.ids == skipped.ids
        for line, record in records:
            if line not in lines:  # a row not listed is in the pool, with its own finite values
                candidate = _row_candidate(kind, record, skipped)
                assert candidate.id in skipped.index, f"line {line} {record} was dropped without a word"
        assert np.isfinite(skipped.columns["y"]).all() and not np.isinf(skipped.columns["z"]).any()
        assert np.isfinite(skipped.features).all()


@fuzz(60)
@given(header=st.sampled_from([["a", "b", "y"], ["b", "a", "y"], ["a", "b"], ["a", "b", "y", ""], ["a", "a", "y"],
                               ["a", "b", "y", "y"], ["\ufeffa", "b", "y"]]),
       rows=st.lists(st.tuples(st.sampled_from(["1", "2", "3"]), st.sampled_from(["p", "q"]),
                               st.sampled_from(["1", "2", "3"]), st.sampled_from([[], [""], ["7"], ["7", "8"]])),
                     min_size=1, max_size=4),
       newline=st.sampled_from(["\n", "\r\n"]))
@example(header=["a", "b", "y"], rows=[("1", "p", "2", ["7"])], newline="\n")  # read as a=p, b=2, y=7: shifted
def test_a_pool_loads_only_with_each_value_on_its_own_row(header, rows, newline):
    order = [name.lstrip("\ufeff") for name in header]
    lines = [",".join(header)] + [",".join([{"a": a, "b": b, "y": y}.get(name, "") for name in order] + extra)
                                  for a, b, y, extra in rows]
    with folder() as directory:
        (directory / "pool.csv").write_text(newline.join(lines) + newline)
        pool = _load(directory, "conditions", "refuse", "average")
    if isinstance(pool, str):
        assert "pool.csv" in pool
        return
    written: dict[tuple, list[float]] = {}
    for a, b, y, _ in rows:
        written.setdefault((float(a), b), []).append(float(y))
    loaded = {(c.values["a"], c.values["b"]): pool.column("y")[c.id] for c in pool.candidates}
    assert loaded == pytest.approx({key: float(np.mean(values)) for key, values in written.items()})


@fuzz(60)
@given(content=st.one_of(st.binary(max_size=48), st.text(max_size=48).map(str.encode)),
       prefix=st.sampled_from([b"", b"x,y\n", b"x,y,z\nCCO,1,2\n", b"\xef\xbb\xbfx\n", b"x,x\n"]))
def test_any_bytes_in_a_streamed_pool_are_refused_by_name(content, prefix):
    with folder() as directory:
        path = directory / "pool.csv"
        path.write_bytes(prefix + content)
        for call in (lambda: count_rows(path),
                     lambda: stream_top_k(path, "molecule", lambda X: X.sum(axis=1), 3, column="x"),
                     lambda: condition_space_from_csv(path, ["x"])):
            try:
                call()
            except SetupError as exc:
                assert "pool.csv" in str(exc), str(exc)


@pytest.mark.parametrize("kind", ["molecule", "material"])
@fuzz(30)
@given(data=st.data(), chunk_size=st.sampled_from([1, 2, 5]))
def test_the_stream_honours_on_bad_rows_like_the_pool(kind, data, chunk_size):
    """Lead (c): the streamed pool refuses what the in-memory pool refuses, with the same message, and under skip
    lists the same rows and keeps the same candidates."""
    rows = data.draw(pool_rows(kind))
    with folder() as directory:
        path = directory / "pool.csv"
        path.write_text(to_csv(rows))
        for on_bad_rows in ("refuse", "skip"):
            pool = _load(directory, kind, on_bad_rows, has_truth=False)
            try:
                top = stream_top_k(path, kind, lambda X: -np.arange(len(X), dtype=float), len(rows),
                                   column="x", chunk_size=chunk_size, on_bad_rows=on_bad_rows)
            except SetupError as exc:
                assert isinstance(pool, str), f"the stream refused what the pool loads: {exc}"
                if on_bad_rows == "refuse":
                    assert str(exc) == pool
                continue
            assert not isinstance(pool, str), f"the pool refused what the stream reads: {pool}"
            assert top.skipped_rows == pool.skipped_rows and top.n_invalid == len(pool.skipped_rows)
            assert {c.candidate.id for c in top.best} == set(pool.ids)


@fuzz(40)
@given(a=st.lists(cell(NUMBERS), min_size=1, max_size=6), b=st.lists(cell(CATEGORIES), min_size=1, max_size=6),
       chunk_size=st.sampled_from([1, 3, 100]))
@example(a=["1", "9" * 25], b=["p", "q"], chunk_size=1)  # a 25-digit integer made the column categorical
@example(a=["1", "inf", "3"], b=["p", "p", "q"], chunk_size=2)  # inf became the upper bound
@example(a=["1e-400", ":"], b=["p", "p"], chunk_size=1)  # chunks of two kinds: the stream's choice was "0.0"
@example(a=["nan", "9" * 25, "-2.5"], b=["p", "p", "p"], chunk_size=1)  # pandas kept "nan" as text in the pool
@example(a=["NA", "9" * 25, "x"], b=["p", "p", "p"], chunk_size=100)  # "NA" a choice of both, as text
def test_a_streamed_conditions_space_equals_the_pools(a, b, chunk_size):
    n = min(len(a), len(b))
    rows = [["a", "b", "y", "z"], *([a[i], b[i], "1", "1"] for i in range(n))]
    with folder() as directory:
        (directory / "pool.csv").write_text(to_csv(rows))
        pool = _load(directory, "conditions", "skip", "average")
        try:
            space = condition_space_from_csv(directory / "pool.csv", ["a", "b"], chunk_size=chunk_size)
        except SetupError:
            assert isinstance(pool, str)
            return
    if not isinstance(pool, str):
        assert space == pool.space
        assert all(math.isfinite(p.low) and math.isfinite(p.high) for p in space.parameters if p.kind != "categorical")


# ---------------------------------------------------------------------------------------------------- history
@pytest.fixture(scope="module")
def history_specs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("history")
    specs = {}
    for kind, text in [("molecule", "x,y\nCCO,1\nCCC,2\nc1ccccc1,3\nCCN,4\n"),
                       ("material", "x,y\nNaCl,1\nFe2O3,2\nNaN,3\n"),
                       ("conditions", "a,b,y\n1,p,1\n2,q,2\n3,p,3\n")]:
        (directory / f"{kind}.csv").write_text(text)
        data = pool_spec(directory, kind, "refuse", has_truth=True)
        data["space"]["pool"], data["ladder"] = f"{kind}.csv", []
        data["objective"]["property"] = "y"
        specs[kind] = validate_spec(data)
    return specs


@pytest.mark.parametrize("kind", ["molecule", "material", "conditions"])
@fuzz(50)
@given(data=st.data())
def test_a_history_file_is_read_whole_or_refused_naming_its_lines(history_specs, kind, data):
    spec = history_specs[kind]
    header = data.draw(st.sampled_from([["x", "y"], ["y", "x"], ["X", "y"], ["x", "z"], ["a", "b", "y"], ["x", "x", "y"],
                                        ["a", "b", "y", "y"]]))
    pool_cells = {"x": ["CCO", "OCC", "CCC", "c1ccccc1", "CCN", "NaCl", "NaN", "Fe2O3"], "a": ["1", "2", "3"],
                  "b": ["p", "q"]}
    rows = [[data.draw(cell(pool_cells.get(column, NUMBERS))) for column in header]
            for _ in range(data.draw(st.integers(0, 4)))]
    content = data.draw(st.one_of(st.just(to_csv([header, *rows]).encode()), st.binary(max_size=40)))
    with folder() as directory:
        path = directory / "past.csv"
        path.write_bytes(content)
        pool = load_pool(spec).copy()
        try:
            imported = read_history(spec, pool, path)
        except HistoryImportError as exc:
            message = str(exc)
            assert "past.csv" in message and "Traceback" not in message
            if "bad row" in message or " line " in message:
                assert re.search(r"line \d+[: ]", message), message
            return
        assert len(imported) == len(list(iter_csv_records(path))), "every row imported, or none"
        assert len({candidate.id for _, candidate, _ in imported}) == len(imported)
        assert all(math.isfinite(value) and candidate.id in pool.index for _, candidate, value in imported)


# ---------------------------------------------------------------------------------------------------- specs
SPEC = """[campaign]
name = {name}
kind = "molecule"
seed = {seed}
[objective]
direction = "target"
target = {target}
tolerance = {tolerance}
[space]
inline = ["CCO", "CCC"]
[lab]
oracle = {{CCO = 1.0, CCC = {truth}}}
noise_sd = {noise}
[budget]
lab_experiments = {budget}
lab_hours = {hours}
"""
TOML_VALUES = ["0", "1", "-1", "0.5", "nan", "-nan", "inf", "-inf", "1e400", "9" * 30, "-" + "9" * 30, '"x"', '""',
               "true", "[]", "{}", "2**63", "1_000", "0x10"]


def _finite_everywhere(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite_everywhere(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite_everywhere(v) for v in value)
    return True


@fuzz(120)
@given(values=st.fixed_dictionaries({key: st.sampled_from(TOML_VALUES) for key in
                                     ["seed", "target", "tolerance", "truth", "noise", "budget", "hours"]}),
       name=st.sampled_from(['"fuzz"', '"é😀"', '"\\u0000"', '""', '"a/b"']),
       garbage=st.one_of(st.none(), st.binary(max_size=24)))
@example(values={"seed": str(2**63), "target": "nan", "tolerance": "1", "truth": "2", "noise": "0", "budget": "1",
                 "hours": "1"}, name='"fuzz"', garbage=None)  # the seed broke the ledger's integer column
@example(values={}, name='"fuzz"', garbage=b"name = \"\xff\"")  # not UTF-8
def test_a_spec_file_loads_finite_or_is_refused_naming_each_field(values, name, garbage):
    with folder() as directory:
        path = directory / "campaign.toml"
        path.write_bytes(garbage if garbage is not None else SPEC.format(name=name, **values).encode())
        try:
            spec = load_spec(path)
        except SpecError as exc:
            assert str(exc).startswith(f"invalid campaign spec {path}:")
            assert exc.problems and all(field and message for field, message in exc.problems)
            return
    dumped = spec.model_dump()
    assert _finite_everywhere(dumped), "no NaN or inf reaches a campaign"
    assert -(2**63) <= spec.campaign.seed < 2**63, "the seed fits the ledger's 64-bit column"


# ---------------------------------------------------------------------------------------------------- the ledger
def _ledger_state(db: Path) -> dict[str, tuple[str, int]]:
    ledger = Ledger.open(db)
    try:
        return {c.id: (c.status, ledger.n_events(c.id)) for c in ledger.campaigns()}
    finally:
        ledger.close()


@pytest.fixture(scope="module")
def ledger_with_a_campaign(tmp_path_factory):
    """A file ledger holding one campaign, and a spec file over a small pool beside it."""
    directory = tmp_path_factory.mktemp("ledger")
    (directory / "pool.csv").write_text("smiles,y\nCCO,1\nCCC,2\nCCCC,3\nCCN,4\nc1ccccc1,5\n")
    (directory / "campaign.toml").write_text(
        '[campaign]\nname = "fuzz"\nkind = "molecule"\n[objective]\nproperty = "y"\ndirection = "maximize"\n'
        '[space]\npool = "pool.csv"\ncolumn = "smiles"\n[lab]\noracle_column = "y"\n[budget]\nlab_experiments = 1\n'
        '[planner]\nmain = "random"\ncontrol = "bo"\ncontrol_share = 0.5\n')
    db = directory / "ledger.db"
    with Campaign.start(load_spec(directory / "campaign.toml"), db=db, campaign_id="first") as campaign:
        campaign.run(max_steps=2)
    return directory, db


def test_a_failed_import_after_validation_leaves_no_campaign(ledger_with_a_campaign, monkeypatch):
    """Lead (b): the history passed every check, then the import failed (here the surrogate's warm-up fit)."""
    directory, db = ledger_with_a_campaign
    (directory / "past.csv").write_text("smiles,y\nCCO,1\nCCC,2\n")
    spec = load_spec(directory / "campaign.toml").with_overrides(planner="bo")
    assert read_history(spec, load_pool(spec).copy(), directory / "past.csv"), "the file itself is fine"
    before = _ledger_state(db)

    def fails(*args, **kwargs):
        raise SetupError("the warm-up fit failed")

    monkeypatch.setattr("orchestrator.loop.importing._warm_surrogate", fails)
    with pytest.raises(SetupError, match="warm-up fit failed"):
        Campaign.start(spec, db=db, campaign_id="orphan", history=HistoryFile(directory / "past.csv"))
    assert _ledger_state(db) == before, "no campaign row, no events"
    result = CliRunner().invoke(app, ["run", str(directory / "campaign.toml"), "--db", str(db), "--planner", "bo",
                                      "--history", str(directory / "past.csv"), "--campaign-id", "orphan"])
    assert result.exit_code == 2 and result.stderr == "error: the warm-up fit failed\n", result.output
    assert _ledger_state(db) == before
    monkeypatch.undo()
    with Campaign.start(spec, db=db, campaign_id="orphan", history=HistoryFile(directory / "past.csv")) as campaign:
        assert campaign.imported.n_appended == 2, "the id is free: nothing was left behind"
        assert [e.type for e in campaign.ledger.events("orphan")][:3] == ["CampaignStarted", "Proposed", "Observed"]
        assert verify(campaign.ledger, "orphan").is_identical


@fuzz(12)
@given(target=st.sampled_from(["pool", "history", "spec"]), data=st.data())
def test_the_cli_refuses_bad_input_in_one_error_line_and_writes_nothing(ledger_with_a_campaign, target, data):
    directory, db = ledger_with_a_campaign
    good_pool = (directory / "pool.csv").read_text()
    spec_text = (directory / "campaign.toml").read_text()
    bad_row = data.draw(st.sampled_from(["C1CC,1", "CCO C,2", "Fe1e-400O,3", f"CCCCC,{'9' * 400}", "CCCCC,inf",
                                         "CCO,1,2", "OCC,9", "é,1"]))
    with folder() as work:
        (work / "pool.csv").write_text(good_pool)
        (work / "campaign.toml").write_text(spec_text)
        argv = ["run", str(work / "campaign.toml"), "--db", str(db), "--max-steps", "1"]
        if target == "pool":
            (work / "pool.csv").write_bytes(data.draw(st.one_of(st.just((good_pool + bad_row + "\n").encode()),
                                                                st.binary(max_size=32))))
        elif target == "history":
            (work / "past.csv").write_bytes(data.draw(st.one_of(st.just(f"smiles,y\nCCN,4\n{bad_row}\n".encode()),
                                                                st.binary(max_size=32))))
            argv += ["--history", str(work / "past.csv")]
        else:
            (work / "campaign.toml").write_bytes(data.draw(st.one_of(
                st.just(spec_text.replace("lab_experiments = 1", f"lab_experiments = {bad_row.split(',')[1]}")
                        .encode()),
                st.just(spec_text.replace('kind = "molecule"', 'kind = "molecule"\nseed = nan').encode()),
                st.binary(max_size=32))))
        before = _ledger_state(db)
        result = CliRunner().invoke(app, argv)
        after = _ledger_state(db)
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit | None)
    if result.exit_code == 2:
        lines = result.stderr.rstrip("\n").splitlines()
        assert lines[0].startswith("error: ") and all(line.startswith("  - ") for line in lines[1:]), result.stderr
        assert after == before, "a refused campaign leaves the ledger as it was"
    else:  # the input was usable after all: exactly one campaign more
        assert set(after) - set(before) and len(after) == len(before) + 1


def test_a_refused_campaign_start_releases_what_it_took(ledger_with_a_campaign, monkeypatch):
    """A failure while recording the start closes the campaign: its lease is free and the id can start again."""
    directory, db = ledger_with_a_campaign
    spec = load_spec(directory / "campaign.toml")
    before = _ledger_state(db)

    def append_fails(self, *args, **kwargs):
        raise ClosedLoopError("the disk is full")

    with monkeypatch.context() as patch:
        patch.setattr(Ledger, "append_many", append_fails)
        with pytest.raises(ClosedLoopError, match="disk is full") as failure:
            Campaign.start(spec, db=db, campaign_id="retry")
    assert _ledger_state(db) == before
    # the traceback keeps the half-started campaign alive, so only closing it, not garbage collection, frees its lease
    with Campaign.start(spec, db=db, campaign_id="retry") as campaign:
        assert campaign.ledger.n_events("retry") == 1
    assert failure.value
