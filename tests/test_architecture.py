"""The house rules of the code, read from its imports: no module imports itself round a circle, and no import runs
upward between the floors (vocabulary <- plug-ins <- engine <- command line and public face).

Every import counts, including those inside functions (they still run, only later); imports under
``if TYPE_CHECKING:`` do not count for the floors (they never run: annotations only), but they may not close a circle
either (a circle hidden from the interpreter is still two modules that each need the other); imports in docstrings and
comments do not count. The graph is built with ``ast`` over the project's own packages, so the test needs nothing
installed and sees a module even when its optional dependency is missing.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("vocabulary", "orchestrator", "simulators", "instruments", "rewards", "closedloop")
PLUG_INS = ("simulators", "instruments", "rewards")
#: The engine's floors, from the ground up: a module may import its own floor and the floors below it, never above.
#: ``card`` is the campaign card the whole engine reads (the spec, its seeds, the planners' names).
ENGINE_FLOORS = ("card", "ledger", "space", "policy", "loop", "replay", "environment", "exports", "scale", "bench",
                 "interfaces")
CARD = frozenset({"orchestrator.spec", "orchestrator.spec_fields", "orchestrator.spec_objectives",
                  "orchestrator.spec_model_prior", "orchestrator.seeding",
                  "orchestrator.planner_registry"})
MAX_TOP_LEVEL_MODULES = 12
MAX_MODULE_LINES = 600


def floor_of(module: str) -> str | None:
    """The engine floor of an ``orchestrator`` module; None for the package itself (the engine's facade) and for
    modules outside the engine."""
    if module in CARD:
        return "card"
    parts = module.split(".")
    if parts[0] != "orchestrator" or len(parts) < 2:
        return None
    assert parts[1] in ENGINE_FLOORS, f"{module} is on no floor: move it into one of {ENGINE_FLOORS}, or the card"
    return parts[1]


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported_names(module: str, path: Path, *, typing_too: bool = False) -> set[tuple[str, str]]:
    """What ``module`` imports, as (origin, name) pairs: ``import a.b`` gives (``a.b``, ""), ``from a import b`` gives
    (``a``, ``b``), where ``b`` is a submodule of ``a`` or a name defined in ``a``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in (ast.walk(tree) if typing_too else _runtime_nodes(tree)):
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


def _import_graph(*, typing_too: bool = False) -> dict[str, set[str]]:
    """Our module -> the modules of ours it imports: ``from a import b`` imports the submodule ``a.b`` if there is
    one, else the module ``a`` (a name resolves to the longest module that holds it). The package ``__init__`` that
    Python runs on the way to a submodule is not counted, as import linters do not count it. ``typing_too`` counts the
imports under ``if TYPE_CHECKING:`` as well."""
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in modules.items():
        targets = {owner(f"{origin}.{name}" if f"{origin}.{name}" in modules else origin)
                   for origin, name in _imported_names(module, path, typing_too=typing_too)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


GRAPH = _import_graph()
TYPED_GRAPH = _import_graph(typing_too=True)


def test_the_graph_sees_the_project():
    assert {"orchestrator.loop.graph", "orchestrator.loop.campaign", "simulators", "instruments.simlab",
            "rewards.rubric"} <= set(GRAPH)
    assert "vocabulary.domain" in GRAPH["instruments.base"], "the parser must resolve absolute imports"
    assert "orchestrator.interfaces.cli_common" in GRAPH["orchestrator.interfaces.cli"], "the parser must resolve relative imports"


def test_no_module_imports_itself_round_a_circle():
    try:
        tuple(graphlib.TopologicalSorter(GRAPH).static_order())
    except graphlib.CycleError as exc:
        circle = " -> ".join(exc.args[1])
        pytest.fail(f"import circle: {circle}. Move what both sides need into a module below them both.")


def test_no_circle_hides_behind_type_checking():
    try:
        tuple(graphlib.TopologicalSorter(TYPED_GRAPH).static_order())
    except graphlib.CycleError as exc:
        circle = " -> ".join(exc.args[1])
        pytest.fail(f"import circle through `if TYPE_CHECKING:` imports: {circle}. The annotation still needs the "
                    "other module: move the type both sides need into a module below them both (a Protocol or a "
                    "small dataclass), or pass the values instead.")


@pytest.mark.parametrize("package", PLUG_INS)
def test_plug_ins_import_only_the_vocabulary_of_the_engine(package):
    upward = sorted((module, target) for module, targets in GRAPH.items()
                    if module.split(".")[0] == package
                    for target in targets if target.split(".")[0] in ("orchestrator", "closedloop"))
    assert not upward, f"{package} reaches into the engine: {upward}; a plug-in imports only `vocabulary`"


def test_the_vocabulary_imports_nothing_of_ours():
    outside = sorted((module, target) for module, targets in GRAPH.items() if module.split(".")[0] == "vocabulary"
                     for target in targets if target.split(".")[0] != "vocabulary")
    assert not outside, f"the vocabulary is the ground floor and imports nothing of ours: {outside}"


def test_no_import_runs_upward_between_the_engines_floors():
    upward = sorted((module, target) for module, targets in GRAPH.items() if floor_of(module)
                    for target in targets if floor_of(target)
                    and ENGINE_FLOORS.index(floor_of(target)) > ENGINE_FLOORS.index(floor_of(module)))
    assert not upward, (f"imports that run up a floor ({' < '.join(ENGINE_FLOORS)}): {upward}; move what both need "
                        "down to the lower floor")


def test_nothing_of_ours_imports_the_interfaces():
    offending = sorted((module, target) for module, targets in GRAPH.items()
                       if floor_of(module) != "interfaces" and module.split(".")[0] != "closedloop"
                       for target in targets if floor_of(target) == "interfaces")
    assert not offending, f"the interfaces (command line, MCP, dashboard) are the top floor of the engine: {offending}"


def test_nothing_below_the_public_face_imports_it():
    offending = sorted((module, target) for module, targets in GRAPH.items()
                       if not module.startswith("closedloop")
                       for target in targets if target.split(".")[0] == "closedloop")
    assert not offending, f"the public face `closedloop` is the top floor, imported by nobody of ours: {offending}"


def test_every_floor_is_a_folder_that_says_what_it_owns_and_may_import():
    for floor in ENGINE_FLOORS[1:]:
        init = ROOT / "orchestrator" / floor / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "may import" in doc.lower(), f"{init.relative_to(ROOT)}'s docstring must say what the floor may import"


def test_the_engines_top_level_stays_small():
    top = sorted(p.name for p in (ROOT / "orchestrator").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules directly in orchestrator/: {top}; file them on a floor"


def test_no_module_is_too_long_to_read():
    long = sorted((str(path.relative_to(ROOT)), n) for path in _modules().values()
                  if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES)
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}; split each by concept"
