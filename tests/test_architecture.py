"""The house rules of the code, read from its imports: no module imports itself round a circle, and no import runs
upward between the floors (vocabulary <- plug-ins <- engine <- command line and public face).

Every import counts, including those inside functions (they still run, only later); imports under
``if TYPE_CHECKING:`` do not (they never run: annotations only), nor do those in docstrings and comments. The graph is built with ``ast`` over the project's own packages, so the test needs nothing
installed and sees a module even when its optional dependency is missing.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "simulators", "instruments", "rewards", "closedloop")
PLUG_INS = ("simulators", "instruments", "rewards")
#: The shared vocabulary (ARCHITECTURE.md): the only modules of the engine a plug-in package may import.
VOCABULARY = frozenset({"orchestrator.domain", "orchestrator.events"})
#: The command line's modules: only each other and the console script may import them.
COMMAND_LINE = frozenset({"orchestrator.cli", "orchestrator.cli_main", "orchestrator.cli_bench",
                          "orchestrator.cli_rewards", "orchestrator.cli_common"})


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported_names(module: str, path: Path) -> set[tuple[str, str]]:
    """What ``module`` imports, as (origin, name) pairs: ``import a.b`` gives (``a.b``, ""), ``from a import b`` gives
    (``a``, ``b``), where ``b`` is a submodule of ``a`` or a name defined in ``a``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            names.update((origin, alias.name) for alias in node.names)
    return names


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def _import_graph() -> dict[str, set[str]]:
    """Our module -> the modules of ours it imports: ``from a import b`` imports the submodule ``a.b`` if there is
    one, else the module ``a`` (a name resolves to the longest module that holds it). The package ``__init__`` that
    Python runs on the way to a submodule is not counted, as import linters do not count it."""
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in modules.items():
        targets = {owner(f"{origin}.{name}" if f"{origin}.{name}" in modules else origin)
                   for origin, name in _imported_names(module, path)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


GRAPH = _import_graph()


def test_the_graph_sees_the_project():
    assert {"orchestrator.graph", "orchestrator.campaign", "simulators", "instruments.simlab",
            "rewards.rubric"} <= set(GRAPH)
    assert "orchestrator.domain" in GRAPH["instruments.base"], "the parser must resolve absolute imports"
    assert "orchestrator.cli_common" in GRAPH["orchestrator.cli"], "the parser must resolve relative imports"


def test_no_module_imports_itself_round_a_circle():
    try:
        tuple(graphlib.TopologicalSorter(GRAPH).static_order())
    except graphlib.CycleError as exc:
        circle = " -> ".join(exc.args[1])
        pytest.fail(f"import circle: {circle}. Move what both sides need into a module below them both.")


@pytest.mark.parametrize("package", PLUG_INS)
def test_plug_ins_import_only_the_vocabulary_of_the_engine(package):
    upward = sorted((module, target) for module, targets in GRAPH.items()
                    if module.split(".")[0] == package
                    for target in targets if target.split(".")[0] == "orchestrator" and target not in VOCABULARY)
    assert not upward, f"{package} reaches into the engine: {upward}; a plug-in imports only {sorted(VOCABULARY)}"


def test_the_vocabulary_imports_nothing_of_ours():
    for module in VOCABULARY:
        assert not GRAPH[module] - VOCABULARY, f"{module} imports {sorted(GRAPH[module] - VOCABULARY)}"


def test_nothing_below_the_public_face_imports_it():
    offending = sorted((module, target) for module, targets in GRAPH.items()
                       if not module.startswith("closedloop")
                       for target in targets if target.split(".")[0] == "closedloop")
    assert not offending, f"the public face `closedloop` is the top floor, imported by nobody of ours: {offending}"


def test_nothing_but_the_command_line_imports_the_command_line():
    offending = sorted((module, target) for module, targets in GRAPH.items()
                       if module not in COMMAND_LINE and not module.startswith("closedloop")
                       for target in targets if target in COMMAND_LINE)
    assert not offending, f"the command line is the top floor of the engine: {offending}"
