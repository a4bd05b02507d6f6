"""One name per quantity (docs/architecture.md, "Names"): retired spellings stay out of the package.

- The kept fraction of a sparsifying compressor is ``ratio``; ``compress_ratio``
  (and the synchroniser's former ``kept_fraction``) may appear in ``hpcbench/``
  only in ``runtime/renamed.py``, which maps old result columns on read and
  words the refusal of an old config key.
- The ranks of a communicator are ``world_size``: no identifier, parameter,
  attribute or keyword of ``hpcbench/`` is spelled ``nranks``, ``n_ranks``,
  ``num_workers``... and the transport has no ``size``.
- Old files still read, old keys exit 2 naming the new key.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest

from hpcbench.lifecycle import run
from mpitools import ROOT

PACKAGE = Path(ROOT) / "hpcbench"
#: retired spellings of the kept fraction, anywhere in a source line (identifiers, strings, docstrings)
RETIRED_RATIO = re.compile(r"\b(compress_ratio|kept_fraction)\b")
#: the one module allowed to spell them (the read-side mapping and the exit-2 message)
ALLOWED = {PACKAGE / "runtime" / "renamed.py"}
#: retired names of a communicator's rank count, as identifiers (names, parameters, attributes, keywords)
RETIRED_WORLD = {"nranks", "n_ranks", "num_ranks", "nprocs", "n_procs", "num_procs", "comm_size",
                 "num_workers", "n_workers", "nworkers"}
DIGITS = str(Path(ROOT) / "jobs" / "configs" / "digits.yaml")


def _sources():
    return sorted(PACKAGE.rglob("*.py"))


def test_no_retired_kept_fraction_spelling_in_the_package():
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in _sources() if p not in ALLOWED
             for i, line in enumerate(p.read_text().splitlines(), 1) if RETIRED_RATIO.search(line)]
    assert not found, "retired spelling of the kept fraction (use ratio):\n" + "\n".join(found)


def test_no_retired_kept_fraction_spelling_in_job_files_and_figures():
    roots = [Path(ROOT) / "jobs", Path(ROOT) / "analysis"]
    found = [f"{p.relative_to(ROOT)}:{i}" for root in roots for p in sorted(root.rglob("*"))
             if p.suffix in (".py", ".yaml", ".yml", ".sbatch")
             for i, line in enumerate(p.read_text().splitlines(), 1) if RETIRED_RATIO.search(line)]
    assert not found, found


def _identifiers(tree: ast.AST):
    """Every name the module binds or reads: names, parameters, attributes, keywords, defs."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.arg):
            yield node.lineno, node.arg
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.value.lineno, node.arg
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.lineno, node.name


def test_no_retired_world_size_identifier_in_the_package():
    found = [f"{p.relative_to(ROOT)}:{line}: {name}" for p in _sources()
             for line, name in _identifiers(ast.parse(p.read_text())) if name in RETIRED_WORLD]
    assert not found, "use world_size for the ranks of a communicator:\n" + "\n".join(found)


def test_the_guards_see_what_they_guard(tmp_path):
    """The scans would catch a reappearing spelling (a scan that finds nothing in a planted file is broken)."""
    planted = "def f(nranks, world):\n    return world.size / nranks, g(n_workers=1), c.compress_ratio\n"
    names = {n for _, n in _identifiers(ast.parse(planted))}
    assert {"nranks", "n_workers"} <= names & RETIRED_WORLD
    assert RETIRED_RATIO.search(planted)
    tokens = [t.string for t in tokenize.generate_tokens(io.StringIO(planted).readline)]
    assert "compress_ratio" in tokens


def test_the_transport_and_worker_set_name_their_counts():
    from hpcbench.collectives.transport import Transport
    from hpcbench.runtime.workerset import WorkerSet

    assert hasattr(Transport, "world_size") and not hasattr(Transport, "size")
    assert "self.size" not in inspect.getsource(WorkerSet)


def test_an_old_files_renamed_column_reads_under_its_new_name(tmp_path):
    """A table an older run wrote with ``compress_ratio`` is read (rows, units, ``results show``) as ``ratio``."""
    from hpcbench.results import Column, ResultsFile
    from hpcbench.results.reader import read_table, table_columns, table_units
    from hpcbench.results_command.show import describe

    path = tmp_path / "old.h5"
    with ResultsFile(path, "train", {}) as rf:
        t = rf.table("decisions", [Column("step", "int64", "1", "step"),
                                   Column("compress_ratio", "float64", "1", "new fraction kept")], "old layout")
        t.append({"step": [0, 5], "compress_ratio": [0.2, 0.05]})
    table = read_table(path, "decisions")
    assert list(table) == ["step", "ratio"] and table["ratio"].tolist() == [0.2, 0.05]
    assert table_units(path, "decisions") == {"step": "1", "ratio": "1"}
    assert table_columns(path, "decisions")["ratio"] == ("1", "new fraction kept")
    text = "\n".join(describe(path)[1:])
    assert "ratio" in text and "compress_ratio" not in text and "0.05" in text


def test_new_runs_write_ratio():
    from hpcbench.results.records import columns_of
    from hpcbench.telemetry import TelemetryRecord

    names = [c.name for c in columns_of(TelemetryRecord)]
    assert "ratio" in names and not any(RETIRED_RATIO.search(n) for n in names)


def test_compressor_option_under_its_old_name_is_refused_naming_the_new_key():
    from pydantic import ValidationError

    from hpcbench.compress.config import CompressorConfig

    with pytest.raises(ValidationError, match=r"options\.compress_ratio: a retired key; write ratio"):
        CompressorConfig(name="topk", options={"compress_ratio": 0.1})
    with pytest.raises(ValidationError, match=r"options\.ratio: the kept fraction is this section's own key"):
        CompressorConfig(name="topk", options={"ratio": 0.1})
    c = CompressorConfig(name="topk", ratio=0.1).build()
    assert c.ratio == 0.1 and np.isclose(CompressorConfig(name="topk").build().ratio, 0.01)


@pytest.mark.parametrize("direction", ["uplink_compression", "downlink_compression"])
def test_fl_old_compression_option_exits_2_naming_both_keys(tmp_path, capsys, direction):
    from hpcbench.fl.job import FLJob

    out = tmp_path / "o.h5"
    code = run(FLJob, [DIGITS, "--progress", "false", f"--{direction}.name", "topk",
                       f"--{direction}.options", "{compress_ratio: 0.1}", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "options.compress_ratio" in err and "write ratio" in err
    assert "Traceback" not in err and not out.exists()


def test_train_job_wide_compressor_keys_exit_2_naming_the_sync_section(tmp_path, capsys):
    from hpcbench.train.job import TrainJob

    old = tmp_path / "old.yaml"
    old.write_text("compress_ratio: 0.1\n")
    out = tmp_path / "o.h5"
    assert run(TrainJob, [str(old), "--progress", "false", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "compress_ratio: 0.1: a retired key; write sync: [..., {name: compressed, compressor: {name: NAME, " \
           "ratio: VALUE}}]" in err and "Traceback" not in err and not out.exists()
