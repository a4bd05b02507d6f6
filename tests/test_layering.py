"""The import rules of docs/architecture.md, read from the source (no imports run).

core never imports a runner nor (but for the job lifecycle) the results writer;
``compress`` never imports ``collectives``;
``analysis/`` never imports MPI or torch.distributed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "hpcbench"
RUNNERS = ("hpcbench.fl", "hpcbench.bench", "hpcbench.train", "hpcbench.pipeline", "hpcbench.cli",
           "hpcbench.results_command")
CORE = ("collectives", "compress", "allocation", "monitors", "sync", "traces", "results", "runtime", "policies",
        "optim", "controller", "telemetry", "datasets")


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
    """Only the job lifecycle (which opens a runner's file) may; the rest return numbers."""
    files = [p for p in _files(PKG / core) if p != PKG / "runtime" / "lifecycle.py"]
    assert _offending(files, ("hpcbench.results",)) == []


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
