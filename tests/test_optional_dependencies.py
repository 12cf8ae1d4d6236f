"""A missing optional dependency is one line naming the extra that installs it, in the API and on the command line.

Absence is simulated by ``sys.modules[name] = None``, which makes ``import name`` raise ``ModuleNotFoundError`` as if
the package were not installed (its loaded submodules are taken out too, so nothing is served from the cache).
"""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import orchestrator.exports.formats as export_formats
import orchestrator.loop.campaign as campaign_module
import orchestrator.policy.planners.llm_models as llm_models
import orchestrator.replay.report_plots as report_plots
import orchestrator.scale.fanout as fanout
import simulators.chgnet as chgnet_rung
import simulators.dft as dft_rung
import simulators.xtb as xtb_rung
from orchestrator.ledger import Ledger
from orchestrator.policy.planners.surrogate import GPSurrogate
from simulators.executor_ray import RayExecutor
from tests.conftest import FREESOLV_SPEC, ROOT
from vocabulary.domain import MissingDependency, SetupError, import_optional

botorch_arm = importlib.import_module("orchestrator.policy.planners.botorch_acquisition")


def hide(monkeypatch, *names: str) -> None:
    """Make ``names`` (top-level packages or submodules) look uninstalled until the test ends."""
    for name in names:
        for loaded in [m for m in sys.modules if m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)


def install_hint(extra: str) -> str:
    return f'install it with pip install "closedloop[{extra}]"'


def assert_one_line_hint(error: BaseException, module: str, extra: str) -> None:
    message = str(error)
    assert isinstance(error, MissingDependency), f"{type(error).__name__}: {message}"
    assert "\n" not in message
    assert f"needs {module}, which is not installed" in message or message.startswith(f"{module} is not installed")
    assert message.endswith(install_hint(extra)), message
    assert (error.module, error.extra) == (module, extra)


def _not_reached(*_args, **_kwargs):
    raise AssertionError("the dependency check must come first")


# Each case: the modules hidden, the module the message must name, its extra, and a call that needs it.
CASES = {
    "torch (bo planner)": (("torch",), "torch", "bayes", lambda tmp: GPSurrogate.fit(np.zeros((3, 1)), np.arange(3.0))),
    "pyro (bo planner)": (("pyro",), "pyro", "bayes", lambda tmp: GPSurrogate.fit(np.zeros((3, 1)), np.arange(3.0))),
    "matplotlib (report plots)": (("matplotlib",), "matplotlib", "plots", lambda tmp: report_plots._figure(4, 3)),
    "datasets (hf export)": (("datasets",), "datasets", "rl", lambda tmp: export_formats.FORMATS["hf"]([], tmp)),
    "ray (campaign fan-out)": (("ray",), "ray", "ray", lambda tmp: fanout.run_campaigns_on_ray([], db=tmp / "x.db")),
    "ray (RayExecutor)": (("ray",), "ray", "ray", lambda tmp: RayExecutor()),
    "ray (RayExecutor connect)": (("ray",), "ray", "ray", lambda tmp: RayExecutor._connect(object())),
    "psycopg (postgres checkpoints)": (
        ("psycopg",), "psycopg", "postgres", lambda tmp: campaign_module._postgres_checkpointer(object())),
    "langgraph-checkpoint-postgres": (
        ("langgraph.checkpoint.postgres",), "langgraph.checkpoint.postgres", "postgres",
        lambda tmp: campaign_module._postgres_checkpointer(object())),
    "tblite (xtb rung)": (("tblite",), "tblite", "xtb", lambda tmp: xtb_rung.XTBSimulator()),
    "tblite (xtb single point)": (("tblite",), "tblite", "xtb", lambda tmp: xtb_rung.gfn2_single_point(None)),
    "pyscf (dft rung)": (("pyscf",), "pyscf", "dft", lambda tmp: dft_rung.DFTSimulator()),
    "pyscf (dft single point)": (("pyscf",), "pyscf", "dft", lambda tmp: dft_rung.b3lyp_single_point(None)),
    "chgnet (chgnet rung)": (("chgnet",), "chgnet", "materials", lambda tmp: chgnet_rung.CHGNetSimulator()),
    "chgnet (model)": (("chgnet",), "chgnet", "materials", lambda tmp: chgnet_rung._model.__wrapped__()),
    "chgnet (optimiser)": (("chgnet",), "chgnet", "materials", lambda tmp: chgnet_rung._struct_optimizer.__wrapped__("FIRE")),
    "torch (chgnet rung)": (("torch",), "torch", "materials",
                            lambda tmp: chgnet_rung.CHGNetSimulator.calculate(object(), None)),
    "llama_cpp (local model)": (("llama_cpp",), "llama_cpp", "llm", lambda tmp: llm_models._load_llama(str(tmp / "m.gguf"), 64)),
    "llama_cpp (grammar)": (("llama_cpp",), "llama_cpp", "llm", lambda tmp: llm_models.json_grammar.__wrapped__("{}")),
    "langchain (provider models)": (("langchain",), "langchain", "llm",
                                    lambda tmp: llm_models.load_chat_model("openai:gpt-4o-mini")),
    "torch (botorch arm)": (("torch",), "torch", "bench", lambda tmp: botorch_arm.propose_botorch(*[None] * 4, seed=0)),
    "botorch (botorch arm)": (("botorch",), "botorch", "bench", lambda tmp: botorch_arm.propose_botorch(*[None] * 4, seed=0)),
    "gpytorch (botorch arm)": (("gpytorch",), "gpytorch", "bench",
                               lambda tmp: botorch_arm.propose_botorch(*[None] * 4, seed=0)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_missing_optional_module_is_one_line_naming_its_extra(case, monkeypatch, tmp_path):
    hidden, module, extra, needs_it = CASES[case]
    if "gpytorch" in hidden:  # botorch imports gpytorch: load it first if it is here, so only gpytorch is missing
        try:
            import botorch  # noqa: F401
        except ImportError:
            pass
    hide(monkeypatch, *hidden)
    with pytest.raises(MissingDependency) as info:
        needs_it(tmp_path)
    assert_one_line_hint(info.value, module, extra)


def test_a_ledger_without_alembic_names_the_core_install(monkeypatch, tmp_path):
    hide(monkeypatch, "alembic")
    with pytest.raises(MissingDependency) as info:
        Ledger.open(tmp_path / "ledger.db")
    message = str(info.value)
    assert "\n" not in message and info.value.module == "alembic" and info.value.extra == ""
    assert message.startswith("opening a ledger") and "needs alembic, which is not installed" in message
    assert "pip install closedloop" in message and "pip install -e ." in message


def test_a_gguf_model_without_llama_cpp_names_the_llm_extra(monkeypatch, tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    hide(monkeypatch, "llama_cpp")
    with pytest.raises(SetupError, match=r'pip install "closedloop\[llm\]"') as info:
        llm_models.load_chat_model(str(model))
    assert "\n" not in str(info.value)


def test_a_provider_without_its_integration_package_names_it():
    # In a fresh interpreter: LangChain remembers a provider's class once another test has made one.
    pytest.importorskip("langchain")
    script = ("import sys; sys.modules['langchain_openai'] = None\n"
              "from vocabulary.domain import SetupError\n"
              "from orchestrator.policy.planners import llm_models\n"
              "try:\n    llm_models.load_chat_model('openai:gpt-4o-mini')\n"
              "except SetupError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")})
    assert "pip install langchain-openai" in done.stdout, done.stdout + done.stderr
    assert done.stdout.strip().count("\n") == 0


# --------------------------------------------------------------------------------------------------- the helper
def test_import_optional_returns_the_module():
    assert import_optional("json", "dev") is sys.modules["json"]


def test_a_missing_dependency_of_an_installed_package_is_the_one_named(monkeypatch, tmp_path):
    package = tmp_path / "closedloop_fake_plugin"
    package.mkdir()
    (package / "__init__.py").write_text("import closedloop_fake_requirement\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingDependency) as info:
        import_optional("closedloop_fake_plugin", "ladders", "the fake rung")
    assert str(info.value) == ('the fake rung needs closedloop_fake_requirement, which is not installed; '
                               'install it with pip install "closedloop[ladders]"')


def test_an_installed_but_broken_package_says_why_on_one_line(monkeypatch, tmp_path):
    package = tmp_path / "closedloop_broken_plugin"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('libfoo.so: cannot open shared object file\\n(see above)')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingDependency) as info:
        import_optional("closedloop_broken_plugin", "dft")
    message = str(info.value)
    assert message == ('closedloop_broken_plugin cannot be imported (libfoo.so: cannot open shared object file '
                       '(see above)); reinstall it with pip install "closedloop[dft]"')


def test_missing_dependency_survives_pickling_between_processes():
    error = MissingDependency("pyscf", "dft", "the dft rung")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is MissingDependency and str(copy) == str(error) and copy.extra == "dft"


# --------------------------------------------------------------------------------------------------- the CLI
def _console_script() -> Path:
    script = Path(sys.executable).with_name("closedloop")
    if not script.exists():
        pytest.skip(f"no closedloop console script beside {sys.executable}; pip install -e . first")
    return script


def _run_hidden(tmp_path: Path, hidden: list[str], command: list[str]) -> subprocess.CompletedProcess:
    """Run a command with ``hidden`` modules made uninstalled from interpreter start-up (by a sitecustomize)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(f"import sys\nfor name in {hidden!r}:\n    sys.modules[name] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "OMP_NUM_THREADS": "1",
           "COLUMNS": "60"}  # narrow: a wrapped message would show up as a second line
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def assert_one_error_line(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def test_the_console_script_is_the_guarded_entry_point():
    text = _console_script().read_text()
    assert "orchestrator.interfaces.cli_main" in text, "reinstall closedloop (pip install -e .): the entry point changed"


def test_run_without_alembic_is_one_error_line(tmp_path):
    result = _run_hidden(tmp_path, ["alembic"], [str(_console_script()), "run", str(FREESOLV_SPEC), "--db",
                                                 str(tmp_path / "run.db"), "--planner", "bo", "--lab-budget", "4"])
    assert_one_error_line(result, "needs alembic, which is not installed", "pip install closedloop")


def test_an_error_that_escapes_a_command_is_one_error_line(tmp_path):
    # `ls` catches only ledger errors: the missing dependency escapes the command and cli_main reports it
    (tmp_path / "empty.db").write_bytes(b"")
    result = _run_hidden(tmp_path, ["alembic"], [str(_console_script()), "ls", "--db", str(tmp_path / "empty.db")])
    assert_one_error_line(result, "needs alembic, which is not installed")


def test_the_extra_in_brackets_survives_the_terminal(tmp_path):
    # rich reads "[rl]" as markup and drops it unless escaped; `python -m orchestrator.interfaces.cli` takes the same path
    code = textwrap.dedent("""
        import sys, typer
        from orchestrator.interfaces.cli import app
        from vocabulary.domain import import_optional

        @app.command("needs-datasets")
        def needs_datasets() -> None:
            import_optional("datasets", "rl", "the hf export format")

        from orchestrator.interfaces.cli_main import main
        main()
    """)
    result = _run_hidden(tmp_path, ["datasets"], [sys.executable, "-c", code, "needs-datasets"])
    assert_one_error_line(result, 'the hf export format needs datasets, which is not installed; '
                                  'install it with pip install "closedloop[rl]"')


def test_python_dash_m_still_runs_the_cli(tmp_path):
    result = _run_hidden(tmp_path, [], [sys.executable, "-m", "orchestrator.interfaces.cli", "ls", "--db", str(tmp_path / "no.db")])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("error: no ledger database at"), result.stderr


def test_env_serve_without_openenv_is_one_error_line(tmp_path):
    result = _run_hidden(tmp_path, ["openenv"], [sys.executable, "-m", "orchestrator.interfaces.cli", "env", "serve",
                                                 str(FREESOLV_SPEC), "--port", "0"])
    assert_one_error_line(result, "the OpenEnv environment needs openenv, which is not installed; "
                                  'install it with pip install "closedloop[openenv]"')


def test_the_verifiers_taskset_without_verifiers_names_its_extra(tmp_path):
    code = "import closedloop\ntry:\n    closedloop.CampaignTaskset\nexcept Exception as exc:\n    print(exc)\n"
    result = _run_hidden(tmp_path, ["verifiers"], [sys.executable, "-c", code])
    assert result.stdout.strip() == ('the verifiers taskset needs verifiers, which is not installed; '
                                     'install it with pip install "closedloop[verifiers]"'), result.stderr
