"""The package's import graph: no cycle, no import up a layer (:data:`LAYERS`, the plan
of the package), and no stage leaning on a sibling stage.

Read from the source with ``ast`` (nothing is imported), so a cycle that import order
happens to tolerate today is still found. Two graphs are checked:

* what runs at import time (module level, class bodies), where importing ``a.b.c`` from
  outside package ``a.b`` counts as importing ``a.b`` too (Python runs the package's
  ``__init__`` first: that is how a shared module importing ``pipeline.stages.common``
  would run every stage module);
* every import, also one inside a function, module by module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pipeline
from pipeline.stages import GRAPH, STAGES

ROOT = Path(pipeline.__file__).parent
PACKAGE = "pipeline"
STAGE_PACKAGE = f"{PACKAGE}.stages"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _with_parents(name: str, modules: dict[str, Path], importer: str, lazy: bool) -> set[str]:
    """``name`` and (not ``lazy``) the packages above it that are modules of ours, except
    the root package and packages ``importer`` is inside of (Python is running those)."""
    if lazy:
        return {name} & set(modules)
    parts = name.split(".")
    found = {".".join(parts[:i]) for i in range(2, len(parts))}
    found = {p for p in found if not importer.startswith(f"{p}.")} | {name}
    return {m for m in found if m in modules}


def _import_nodes(tree: ast.Module, lazy: bool) -> list[ast.Import | ast.ImportFrom]:
    """Import statements of a module: all of them, or (not ``lazy``) those that run when
    it is imported (not in a function body, not under ``if TYPE_CHECKING``)."""
    if lazy:
        return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found


def _imports(
    name: str, path: Path, modules: dict[str, Path], lazy: bool = True
) -> dict[str, set[str]]:
    """Modules of ours that ``name`` imports, each with the names it takes from it.

    ``lazy``: every import, each naming only the module it names; otherwise the imports
    that run at import time, with the packages Python initialises on the way.
    """
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    found: dict[str, set[str]] = {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in _import_nodes(tree, lazy):
        if isinstance(node, ast.Import):
            for alias in node.names:
                for m in _with_parents(alias.name, modules, name, lazy):
                    found.setdefault(m, set())
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if not base.startswith(PACKAGE):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:  # `from pipeline import schema`: the module itself
                    for m in _with_parents(sub, modules, name, lazy):
                        found.setdefault(m, set())
                else:
                    for m in _with_parents(base, modules, name, lazy):
                        found.setdefault(m, set())
                    found.setdefault(base, set()).add(alias.name)
    found.pop(name, None)
    return found


def _graph(lazy: bool = True) -> dict[str, dict[str, set[str]]]:
    modules = _modules()
    return {name: _imports(name, path, modules, lazy) for name, path in modules.items()}


def _cycle(graph: dict[str, dict[str, set[str]]]) -> list[str] | None:
    """One import cycle as a list of modules, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


@pytest.mark.parametrize("lazy", [False, True], ids=["at-import", "every-import"])
def test_no_import_cycle(lazy: bool) -> None:
    cycle = _cycle(_graph(lazy))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_evaluate_and_rank_import_each_other_at_module_level_only() -> None:
    """No import inside a function between ``pipeline.evaluate`` and ``pipeline.rank``: a
    function-level import there would be hiding a cycle the graph above cannot see."""
    modules = _modules()
    packages = (f"{PACKAGE}.evaluate", f"{PACKAGE}.rank")
    wrong = []
    for name, path in modules.items():
        home = next((p for p in packages if name == p or name.startswith(f"{p}.")), None)
        if home is None:
            continue
        lazy = set(_imports(name, path, modules, lazy=True))
        eager = set(_imports(name, path, modules, lazy=False))
        for target in sorted(lazy - eager):
            if any(target == p or target.startswith(f"{p}.") for p in packages if p != home):
                wrong.append(f"{name} imports {target} inside a function")
    assert not wrong, wrong


def test_the_cycle_finder_finds_one() -> None:
    graph = {"a": {"b": set()}, "b": {"c": set()}, "c": {"a": set()}, "d": {}}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b": set()}, "b": {}}) is None


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _stage_of(module: str) -> str | None:
    """The stage whose module or package ``module`` is (``pipeline.stages.negatives.rules``:
    ``negatives``), or None."""
    for stage in STAGES:
        home = f"{STAGE_PACKAGE}.{stage.name}"
        if module == home or module.startswith(f"{home}."):
            return stage.name
    return None


def test_no_module_takes_a_stages_private_names() -> None:
    """Neither ``from pipeline.stages.x import _name`` nor ``x._name``, in any module outside
    stage ``x`` (its module, or the modules of its package)."""
    modules = _modules()
    wrong = []
    for name, imported in _graph().items():
        for target, names in imported.items():
            if _stage_of(target) not in (None, _stage_of(name)):
                wrong += [f"{name} imports {target}.{n}" for n in sorted(names) if _private(n)]
        tree = ast.parse(modules[name].read_text(encoding="utf-8"))
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                for a in node.names:
                    if f"{node.module}.{a.name}" in modules:
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname and a.name in modules:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _stage_of(aliases[node.value.id]) not in (None, _stage_of(name))
                and _private(node.attr)
            ):
                wrong.append(f"{name} uses {aliases[node.value.id]}.{node.attr}")
    assert not wrong, wrong


def test_no_stage_imports_another_stage() -> None:
    """Stage modules (and the modules of a stage package) share vocabulary through shared
    modules, never through each other; only ``pipeline.stages`` itself lists them."""
    wrong = []
    for name, imported in _graph().items():
        if name == STAGE_PACKAGE or _stage_of(name) is None:
            continue
        for target in imported:
            if _stage_of(target) not in (None, _stage_of(name)):
                wrong.append(f"{name} imports {target}")
    assert not wrong, wrong


def test_the_stage_list_is_the_graph() -> None:
    """Every stage is a module or package of ``pipeline.stages`` with exactly one module
    defining STAGE, listed once, after the stages it reads."""
    assert [s.name for s in STAGES] == list(GRAPH)
    defined = [
        name
        for name, path in _modules().items()
        if name.startswith(f"{STAGE_PACKAGE}.") and "STAGE =" in path.read_text(encoding="utf-8")
    ]
    assert sorted(_stage_of(name) or name for name in defined) == sorted(s.name for s in STAGES)
    for i, stage in enumerate(STAGES):
        assert set(stage.reads) <= {s.name for s in STAGES[:i]}, stage.name


def test_the_stage_checks_see_stage_packages() -> None:
    assert _stage_of(f"{STAGE_PACKAGE}.negatives.rules") == "negatives"
    assert _stage_of(f"{STAGE_PACKAGE}.negatives") == "negatives"
    assert _stage_of(f"{STAGE_PACKAGE}.negativesx") is None
    assert _stage_of(STAGE_PACKAGE) is None


# --------------------------------------------------------------------- layers
# The plan of the package, bottom to top: a module imports only from its own layer or the
# layers below it (every import, also one inside a function). A module is in the layer of
# the longest prefix that names it; a module no layer names fails the test below, so a
# new module gets a place in the plan when it is written.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("pipeline", "core")),
    ("corpus", ("corpus",)),
    ("rules", ("rules",)),
    ("engine", ("engine",)),
    ("rank", ("rank",)),
    ("evaluate", ("evaluate",)),
    ("hub", ("hub",)),
    ("stages", ("stages",)),
    ("synth", ("synth",)),
    # the release as other libraries' tasks (MTEB): reads a release, uses evaluate's helpers;
    # nothing in the package imports it (make mteb runs it as a module)
    ("integrations", ("integrations",)),
    ("api", ("api",)),
    ("jobs", ("jobs",)),
    ("cli", ("cli", "__main__")),
)  # fmt: skip


def _layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            full = PACKAGE if prefix == PACKAGE else f"{PACKAGE}.{prefix}"
            exact_only = prefix == PACKAGE  # the package's __init__, not everything in it
            if module == full or (not exact_only and module.startswith(f"{full}.")):
                if best is None or len(full) > best[0]:
                    best = (len(full), i)
    return None if best is None else best[1]


def test_every_module_has_a_layer() -> None:
    assert [m for m in _modules() if _layer_of(m) is None] == []


def test_no_import_runs_up_a_layer() -> None:
    """0 imports from a lower layer to a higher one, counting imports inside functions."""
    wrong = []
    for name, imported in _graph(lazy=True).items():
        mine = _layer_of(name)
        for target in imported:
            theirs = _layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                wrong.append(f"{name} ({LAYERS[mine][0]}) imports {target} ({LAYERS[theirs][0]})")
    assert not wrong, "\n".join(sorted(wrong))


def test_the_layer_finder_takes_the_longest_prefix() -> None:
    names = [n for n, _ in LAYERS]
    assert names[_layer_of("pipeline.engine.context")] == "engine"
    assert names[_layer_of("pipeline.stages.negatives.rules")] == "stages"
    assert names[_layer_of("pipeline")] == "core"
    assert _layer_of("pipeline.nosuchmodule") is None


def test_the_layers_are_the_folders_in_the_order_the_docs_list_them() -> None:
    """docs/internals.md ("Code layout") lists the package's folders bottom to top:
    :data:`LAYERS` is that list, one folder per layer, so an import that runs up a folder
    as the docs show them fails :func:`test_no_import_runs_up_a_layer`."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "internals.md").read_text()
    listing = text.split("## Code layout", 1)[1].split("```", 2)[1]
    folders = re.findall(r"^  (\w+)(?:/|\.py)", listing, flags=re.M)
    assert folders == [name for name, _ in LAYERS]
    for name, prefixes in LAYERS:  # each layer is its folder (core also holds __init__)
        assert set(prefixes) - {"pipeline", "__main__"} == {name}, name


# Imports the layer order alone allows but the plan does not: (importer, imported), each a
# module or package, every import counted. A stage touches the work directory through its
# context only (engine/context.py), never engine/workdir.py.
FORBIDDEN: tuple[tuple[str, str], ...] = (
    ("pipeline.rules", "pipeline.engine"),  # rules take frames and paths, not a context
    ("pipeline.rules", "pipeline.stages"),
    ("pipeline.stages", "pipeline.engine.workdir"),  # the context is a stage's work dir
)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(f"{prefix}.")


def _forbidden_imports(graph: dict[str, dict[str, set[str]]]) -> list[str]:
    return sorted(
        f"{name} imports {target}"
        for name, imported in graph.items()
        for target in imported
        for importer, banned in FORBIDDEN
        if _under(name, importer) and _under(target, banned)
    )


def test_no_forbidden_import() -> None:
    """0 imports of :data:`FORBIDDEN`, counting imports inside functions."""
    wrong = _forbidden_imports(_graph(lazy=True))
    assert not wrong, "\n".join(wrong)


def test_the_forbidden_imports_are_found() -> None:
    """An import of :data:`FORBIDDEN` is reported, also one of a module inside the package."""
    graph = {
        "pipeline.rules.visible": {"pipeline.engine.context": set(), "pipeline.core": set()},
        "pipeline.rules": {"pipeline.stages": set()},
        "pipeline.stages.release": {"pipeline.engine.workdir": set(), "pipeline.engine": set()},
    }
    assert _forbidden_imports(graph) == [
        "pipeline.rules imports pipeline.stages",
        "pipeline.rules.visible imports pipeline.engine.context",
        "pipeline.stages.release imports pipeline.engine.workdir",
    ]


# What the stages take from evaluation and Hub code, by name: the release stage's own
# outputs need them (the leak audit's reading-free probe, whose verdict can fail the build,
# the dataset card, a release file, and the bibliography evaluation's field-popularity
# baseline, a judgment-side release file ranked by the evaluation's tie rule). All sit below
# stages in LAYERS and import no stage;
# any other name, or a whole-module import, is a stage leaning on a consumer of the release.
STAGES_FROM_EVALUATE_AND_HUB: dict[tuple[str, str], frozenset[str]] = {
    ("pipeline.stages.release.audit", "pipeline.evaluate.audit"): frozenset({"reading_free_probe"}),
    ("pipeline.stages.release.stage", "pipeline.evaluate.audit"): frozenset(
        {"write_field_baselines"}
    ),
    ("pipeline.stages.release.metadata", "pipeline.hub.card"): frozenset({"render_release_card"}),
}


def _stage_imports_of_evaluate_and_hub(graph: dict[str, dict[str, set[str]]]) -> list[str]:
    wrong = []
    for name, imported in graph.items():
        if not _under(name, STAGE_PACKAGE):
            continue
        for target, names in imported.items():
            if not (_under(target, f"{PACKAGE}.evaluate") or _under(target, f"{PACKAGE}.hub")):
                continue
            allowed = STAGES_FROM_EVALUATE_AND_HUB.get((name, target), frozenset())
            if not names:
                wrong.append(f"{name} imports module {target}")
            wrong += [f"{name} imports {target}.{n}" for n in sorted(names - allowed)]
    return sorted(wrong)


def test_stages_take_only_the_probe_and_the_card_from_evaluate_and_hub() -> None:
    wrong = _stage_imports_of_evaluate_and_hub(_graph(lazy=True))
    assert not wrong, "\n".join(wrong)


def test_a_stage_leaning_on_evaluate_or_hub_is_found() -> None:
    graph = {
        "pipeline.stages.release.metadata": {
            "pipeline.hub.card": {"render_release_card", "add_results"},
        },
        "pipeline.stages.release.audit": {"pipeline.evaluate.audit": {"reading_free_probe"}},
        "pipeline.stages.split": {"pipeline.evaluate.scoring.compute": set()},
    }
    assert _stage_imports_of_evaluate_and_hub(graph) == [
        "pipeline.stages.release.metadata imports pipeline.hub.card.add_results",
        "pipeline.stages.split imports module pipeline.evaluate.scoring.compute",
    ]
