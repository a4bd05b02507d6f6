"""The import rules of docs/architecture.md, read from the source (no imports run).

Every import statement counts, at the top of a module or inside a function (a function-local import hides
nothing here): the modules of ``hpcbench/`` import each other without a cycle; core never imports a runner
nor the results writer (the job lifecycle, a layer above core, opens a runner's file); no layer imports one
above it;
``compress`` never imports ``collectives``;
``analysis/`` never imports MPI or torch.distributed.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "hpcbench"
RUNNERS = ("hpcbench.fl", "hpcbench.bench", "hpcbench.train", "hpcbench.pipeline", "hpcbench.cli",
           "hpcbench.results_command")
CORE = ("collectives", "compress", "allocation", "monitors", "sync", "traces", "results", "runtime", "policies",
        "optim", "controller", "telemetry", "data", "datasets", "models")
#: the layers, top first: a module imports its own layer's modules and those of the layers below, never above
#: (the commands read the list of runners, ``cli.SUBCOMMANDS``; the runners are jobs of the lifecycle, which
#: drives them on core)
LAYERS = (("hpcbench.cli", "hpcbench.reproduce", "hpcbench.results_command"),
          ("hpcbench.fl", "hpcbench.bench", "hpcbench.train", "hpcbench.pipeline"),
          ("hpcbench.lifecycle",),
          ("hpcbench",))
#: import cycles tolerated for now, each a set of modules (empty: none is)
ALLOWED_CYCLES: tuple[frozenset[str], ...] = ()


def _imports(path: Path) -> set[str]:
    """Absolute module names imported anywhere in ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[:-1]  # a module's package; for __init__.py, the package itself
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph(root: Path) -> dict[str, set[str]]:
    """Module -> the ``hpcbench`` modules it imports, for every module under ``root/hpcbench``.

    ``from P import N`` is an edge to ``P.N`` where that is a module, else to ``P``; ``import A.B`` to ``A.B``
    (or the nearest package above it that exists). The packages above an imported module are not edges:
    Python runs a package's ``__init__`` before its modules, so an ``__init__`` that loads its members on
    demand and a member that imports a sibling make no cycle.
    """
    files = {_module(p, root): p for p in _files(root / "hpcbench")}

    def nearest(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in files.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        names = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                        if node.level else node.module)
                names += [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
        graph[module] = {target for name in names if name.startswith("hpcbench")
                         and (target := nearest(name)) not in (None, module)}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found, one at a time: each is cut at its first edge and the graph sorted again."""
    graph = {m: set(d) for m, d in graph.items()}
    found = []
    while True:
        try:
            tuple(graphlib.TopologicalSorter(graph).static_order())
            return found
        except graphlib.CycleError as exc:
            cycle = exc.args[1]           # [a, b, ..., a]: each imports the one before it
            found.append(cycle)
            graph[cycle[1]].discard(cycle[0])


def _layer(module: str) -> int:
    for i, layer in enumerate(LAYERS):
        if any(module == top or module.startswith(top + ".") for top in layer):
            return i
    raise AssertionError(module)


def _files(folder: Path):
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _offending(files, banned) -> list[str]:
    bad = []
    for path in files:
        for name in _imports(path):
            if any(name == b or name.startswith(b + ".") for b in banned):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    return bad


@pytest.mark.parametrize("core", [c for c in CORE if (PKG / c).is_dir()])
def test_core_never_imports_a_runner(core):
    assert _offending(_files(PKG / core), RUNNERS) == []


@pytest.mark.parametrize("core", [c for c in CORE if (PKG / c).is_dir() and c != "results"])
def test_core_never_imports_the_results_writer(core):
    """Core returns numbers; the job lifecycle (``hpcbench.lifecycle``, a layer above) opens a runner's file."""
    assert _offending(_files(PKG / core), ("hpcbench.results",)) == []


def test_compress_never_imports_collectives():
    assert _offending(_files(PKG / "compress"), ("hpcbench.collectives",)) == []


def test_policies_never_touch_mpi():
    """A policy decides; the loop makes the decision collective (no communicator, no collective in a policy)."""
    assert _offending(_files(PKG / "policies"), ("mpi4py", "hpcbench.collectives", "hpcbench.runtime.wait",
                                                 "torch.distributed")) == []


def test_analysis_never_imports_mpi():
    assert _offending(_files(ROOT / "analysis"), ("mpi4py", "torch.distributed", "horovod")) == []


def test_the_checker_sees_relative_and_absolute_imports(tmp_path):
    """The rule checker itself: it must catch both spellings (else the tests above cannot fail)."""
    pkg = tmp_path / "hpcbench" / "collectives"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("from ..fl import job\nimport hpcbench.bench.x\nfrom hpcbench import results\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        bad = _offending([pkg / "a.py"], RUNNERS)
    finally:
        ROOT = saved
    assert sorted(bad) == ["hpcbench/collectives/a.py imports hpcbench.bench.x",
                           "hpcbench/collectives/a.py imports hpcbench.fl",
                           "hpcbench/collectives/a.py imports hpcbench.fl.job"]


def test_every_folder_of_the_package_has_a_layer():
    """A new folder is named a command, a runner, the lifecycle or core here before its imports can be checked."""
    known = {m.split(".")[1] for layer in LAYERS[:-1] for m in layer} | set(CORE)
    folders = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    assert folders - known == set()


def test_the_import_graph_has_no_cycle():
    """Function-local imports included: none may hide a cycle (only ``ALLOWED_CYCLES``, listed, may stay)."""
    cycles = [c for c in _cycles(_graph(ROOT)) if frozenset(c) not in ALLOWED_CYCLES]
    assert cycles == []


def test_no_module_imports_a_layer_above_its_own():
    graph = _graph(ROOT)
    up = [f"{m} imports {d}" for m, deps in graph.items() for d in deps if _layer(d) < _layer(m)]
    assert up == []


def test_the_graph_checker_finds_a_cycle_behind_a_function_local_import(tmp_path):
    """The checker itself: a cycle closed inside a function is found (else the test above cannot fail)."""
    pkg = tmp_path / "hpcbench" / "train"
    pkg.mkdir(parents=True)
    (tmp_path / "hpcbench" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from hpcbench.train.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from hpcbench import train\nimport hpcbench.train.a\n")
    graph = _graph(tmp_path)
    assert graph["hpcbench.train.c"] == {"hpcbench.train", "hpcbench.train.a"}
    assert [sorted(c) for c in _cycles(graph)] == [["hpcbench.train.a", "hpcbench.train.a", "hpcbench.train.b"]]
