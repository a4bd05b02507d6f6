"""hpcbench reproduce without launching anything: the manifest loader, the quantity grammar, claims on fixture files."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from hpcbench.reproduce.claims import check_claim, mark_files, table_rows
from hpcbench.reproduce.command import main as reproduce_main
from hpcbench.reproduce.data import FigureData
from hpcbench.reproduce.expression import EmptySelection, ExpressionError, evaluate, parse
from hpcbench.reproduce.manifest import ROOT, ManifestError, load_manifest
from hpcbench.reproduce.plan import make_plan, render_value
from hpcbench.results import Column, ResultsFile

GOOD = """
version: 1
x-common: &common {minbytes: 1K, maxbytes: 4K}
figures:
  coll:
    title: collectives fixture
    paper: nccl-tests
    jobs:
      - id: sweep
        runner: collectives
        ranks: 2
        overrides: *common
        seeds: [1, 2]
        expected_s: 3
      - id: big
        runner: collectives
        ranks: 2
        tiers: [full]
        expected_s: 9
    analysis: {script: analysis/plot_collectives.py}
    claims:
      - {name: ring_busbw, mirrors: x, quantity: "mean(sweep.results.busbw[impl == 'ring' and size == 4 * KiB]) / mean(sweep.results.busbw[impl == 'mpi' and size == 4 * KiB])", op: ">=", threshold: 1.0}
      - {name: too_much, mirrors: x, quantity: "max(sweep.results.busbw)", op: ">=", threshold: 1000}
      - {name: stated, mirrors: "docs: 1.57x", quantity: "max(sweep.results.busbw)", op: ">=", threshold: 1, states: 1.57, tolerance: 0.01, unit: x}
      - {name: stated_range, mirrors: "docs: 2.9-3.1x", quantity: "max(sweep.results.busbw)", op: ">=", threshold: 1, states: [2.9, 3.1], unit: x}
      - {name: full_only, mirrors: x, quantity: "max(big.results.busbw)", op: ">=", threshold: 1, full_only: true}
      - {name: horovod, mirrors: x, quantity: "sweep.results.busbw[impl == 'horovod']", op: ">=", threshold: 1, missing_ok: not built}
      - {name: gloo, mirrors: x, quantity: "sweep.results.busbw[impl == 'gloo']", op: ">=", threshold: 1}
      - {name: per_seed, mirrors: x, quantity: "sweep.results.busbw[impl == 'ring' and size == 1 * KiB and seed == 2]", op: between, threshold: [1.5, 2.5]}
"""


def _manifest(tmp_path, text: str):
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def _collectives_file(path, busbw: dict, seed: int) -> None:
    cols = [Column("size", "int64", "B"), Column("impl", "str", ""), Column("busbw", "float64", "GB/s"),
            Column("p50", "float64", "us")]
    with ResultsFile(path, "collectives", {"seed": seed}, {"seed": seed, "world_size": 2}) as rf:
        t = rf.table("results", cols)
        for (size, impl), value in busbw.items():
            t.append({"size": size, "impl": impl, "busbw": value, "p50": 10.0})


@pytest.mark.parametrize("broken, entry", [
    ("runner: collectives", "figures.coll.jobs[sweep].runner: unknown runner"),
    ("quantity: \"max(sweep.results.busbw)\"", "figures.coll.claims[too_much].quantity"),
    ("expected_s: 3", "figures.coll.jobs[sweep]"),
    ("op: \">=\", threshold: 1000", "figures.coll.claims[too_much]"),
    ("script: analysis/plot_collectives.py", "figures.coll.analysis.script"),
    ("seeds: [1, 2]", "figures.coll.jobs[sweep].seeds"),
])
def test_bad_manifest_exits_2_naming_the_entry(tmp_path, capsys, broken, entry):
    replacement = {"runner: collectives": "runner: collectivez",
                   "quantity: \"max(sweep.results.busbw)\"": "quantity: \"__import__('os').system('true')\"",
                   "expected_s: 3": "expected_s: {full: 3}",
                   "op: \">=\", threshold: 1000": "op: between, threshold: 1000",
                   "script: analysis/plot_collectives.py": "script: analysis/no_such_script.py",
                   "seeds: [1, 2]": "seeds: [1, 1]"}[broken]
    path = _manifest(tmp_path, GOOD.replace(broken, replacement, 1))
    assert reproduce_main(["--manifest", str(path), "--list"]) == 2
    err = capsys.readouterr().err
    assert entry in err and str(path) in err


def test_more_bad_manifests(tmp_path):
    cases = {
        "unknown key": (GOOD.replace("title: collectives fixture", "title: x\n    colour: red"), "coll.colour"),
        "claim reads an unknown job": (GOOD.replace("max(sweep.results.busbw)", "max(nojob.results.busbw)"),
                                       "reads job 'nojob'"),
        "quick claim on a full-only job": (GOOD.replace(", full_only: true", ""), "mark the claim full_only"),
        "not a mapping": ("- 1\n- 2\n", "top level"),
        "not valid YAML": ("figures: [\n", "not valid YAML"),
        "a config for a flags runner": (GOOD.replace("ranks: 2\n        overrides", "ranks: 2\n        config: "
                                                                                  "jobs/configs/digits.yaml\n"
                                                                                  "        overrides", 1),
                                        "takes flags"),
        "a tolerance without the doc value": (GOOD.replace("states: 1.57, ", ""), "tolerance without states"),
        "a doc range low above high": (GOOD.replace("[2.9, 3.1]", "[3.1, 2.9]"), "low above high"),
        "a doc value its mirrors do not quote": (GOOD.replace("states: 1.57,", "states: 1.58,"),
                                                 "states 1.58 is not in mirrors"),
    }
    for what, (text, needle) in cases.items():
        with pytest.raises(ManifestError, match=None) as info:
            load_manifest(_manifest(tmp_path, text))
        assert needle in str(info.value), (what, str(info.value))
    with pytest.raises(ManifestError, match="unknown figure 'nope'"):
        make_plan(load_manifest(_manifest(tmp_path, GOOD)), "quick", tmp_path, ["nope"])


def test_the_repository_manifest_loads_and_plans_both_tiers(tmp_path):
    manifest = load_manifest(ROOT / "jobs" / "reproduce.yaml")
    quick, full = (make_plan(manifest, t, tmp_path) for t in ("quick", "full"))
    assert set(quick.figures) | set(quick.unavailable) == set(manifest.figures)
    assert quick.runs and len(full.runs) > len(quick.runs)
    assert all(fig in quick.drawings and quick.drawings[fig].inputs for fig in quick.figures)
    # every install runs the figures without requires; those on data sets installed apart come on top
    apart = {name for name, fig in manifest.figures.items() if fig.requires.dataset is not None}
    bundled = sum(r.expected_s for r in quick.runs if r.figure not in apart)
    assert bundled <= 30 * 60, "the quick tier must fit in 30 minutes on 2 cores"
    assert quick.expected_s - bundled <= 10 * 60, "figures on installed data sets: at most 10 more minutes"
    runners = {r.job.runner for r in quick.runs}
    assert runners == {"fl", "collectives", "compress", "costmodel", "pipeline", "train"}


@pytest.mark.parametrize("manifest_file", ["reproduce.yaml", "docs-tables.yaml"])
@pytest.mark.parametrize("tier", ["quick", "full"])
def test_every_fl_run_of_the_manifests_is_a_valid_job(tmp_path, monkeypatch, manifest_file, tier):
    """Each FL run's config file with its overrides (the tier's too) validates as ``hpcbench fl`` would read it,
    also for figures whose data set is not installed here (the fl-fmnist quick tier once asked for
    ``max_test_samples``, a key the job does not have, and nothing noticed until it was run)."""
    from hpcbench.fl.config import load_config
    from hpcbench.reproduce.manifest import Requires
    from hpcbench.reproduce.plan import FromResults

    monkeypatch.setattr(Requires, "missing", lambda self: None)
    plan = make_plan(load_manifest(ROOT / "jobs" / manifest_file), tier, tmp_path)
    runs = [r for r in plan.runs if r.job.runner == "fl"]
    assert runs
    for run in runs:
        overrides = {k: render_value(v, "config") for k, v in run.overrides.items() if not isinstance(v, FromResults)}
        load_config(ROOT / run.job.config if run.job.config else None, overrides)


def test_the_docs_tables_manifest_loads_and_each_figure_has_its_template(tmp_path):
    """jobs/docs-tables.yaml: one figure per docs table, rendered by docs/templates/FIGURE.md.j2."""
    manifest = load_manifest(ROOT / "jobs" / "docs-tables.yaml")
    plan = make_plan(manifest, "full", tmp_path)
    assert set(plan.figures) == set(manifest.figures) and plan.runs
    for figure in manifest.figures:
        assert (ROOT / "docs" / "templates" / f"{figure}.md.j2").is_file(), figure


@pytest.mark.parametrize("text, message", [
    ("__import__('os')", "unknown function"),
    ("a.b.c.__class__", "not allowed"),
    ("(lambda: 1)()", "unknown function"),
    ("[x for x in a.b.c]", "not allowed"),
    ("a.b.c[open('x')]", "unknown function 'open'"),
    ("a.b.c[x == a.b]", "not allowed in a row filter"),
    ("a.b.c[x == mean(a.b.c, 2)]", "exactly one argument"),
    ("min()", "one or more arguments"),
    ("mean(a.b.c, 2)", "exactly one argument"),
    ("os", "unknown name"),
    ("1 + 2", "reads no data"),
    ("a.b", "not allowed"),
    ("a.b.c ** 2", "not allowed"),
    ("a.b.c[", "syntax error"),
])
def test_quantities_outside_the_grammar_are_refused(text, message):
    with pytest.raises(ExpressionError, match=message):
        parse(text)


class _Tables:
    def __init__(self, tables):
        self.tables = tables

    def table(self, job, name):
        return self.tables[(job, name)]


def test_quantity_evaluation_by_hand():
    src = _Tables({("j", "t"): {"x": np.array([1.0, 2.0, 3.0, np.nan]), "k": np.array(["a", "b", "a", "b"],
                                                                                    dtype=object),
                                "size": np.array([1024, 2048, 1024, 4096])},
                   ("j", "attrs"): {"tta": np.array([10.0, 30.0]), "seed": np.array([1.0, 2.0])}})
    assert evaluate(parse("mean(j.t.x[k == 'a'])"), src).value == 2.0
    assert evaluate(parse("j.t.x[k == 'b' and size == 2 * KiB] / 4"), src).value == 0.5
    assert evaluate(parse("sum(j.t.x[k in ('a', 'b') and not size > 2048])"), src).value == 6.0
    assert evaluate(parse("mean(j.attrs.tta) - first(j.attrs.tta)"), src).value == 10.0
    assert evaluate(parse("count(j.t.x[size >= 1 * KiB])"), src).value == 4.0
    assert evaluate(parse("max(abs(j.t.x[k == 'a'] - 3))"), src).value == 2.0
    nan = evaluate(parse("mean(j.t.x)"), src)
    assert np.isnan(nan.value) and nan.notes == ["j.t.x: 1 of 4 values NaN"]
    with pytest.raises(EmptySelection, match="no rows match"):
        evaluate(parse("j.t.x[k == 'c']"), src)
    with pytest.raises(ExpressionError, match="gives 2 values"):
        evaluate(parse("j.t.x[k == 'a']"), src)
    with pytest.raises(ExpressionError, match="no column 'y'"):
        evaluate(parse("j.t.y"), src)


def test_quantities_inside_row_filters_and_several_arguments():
    """Time to accuracy as the training claims read it: the steps up to the first iteration at the target."""
    steps = {"step_s": np.array([9.0, 1.0, 2.0, 3.0, 4.0, 5.0]), "warmup": np.array([True] + [False] * 5),
             "iteration": np.array([-1, 0, 0, 1, 1, 2])}
    src = _Tables({("a", "steps"): steps, ("a", "iterations"): {"iteration": np.array([0, 1, 2]),
                                                                "accuracy": np.array([0.5, 0.96, 0.97])},
                   ("b", "attrs"): {"t": np.array([7.0, 2.5])}, ("c", "attrs"): {"t": np.array([4.0])}})
    tta = "sum(a.steps.step_s[not warmup and iteration <= first(a.iterations.iteration[accuracy >= {}])])"
    expr = parse(tta.format(0.95))
    assert {str(r) for r in expr.refs} == {"a.steps.step_s", "a.iterations.iteration"}
    assert evaluate(expr, src).value == 10.0
    assert evaluate(parse(tta.format(0.97)), src).value == 15.0
    with pytest.raises(EmptySelection, match="accuracy >= 0.99"):
        evaluate(parse(tta.format(0.99)), src)
    with pytest.raises(ExpressionError, match="in a row filter gives 3 values"):
        evaluate(parse("sum(a.steps.step_s[iteration <= a.iterations.iteration])"), src)
    assert evaluate(parse("min(b.attrs.t, c.attrs.t)"), src).value == 2.5
    assert evaluate(parse("max(b.attrs.t, c.attrs.t, 5)"), src).value == 7.0


def test_override_values_on_the_command_line():
    assert render_value("4:1", "config") == "'4:1'" and render_value(["even", "ring:priority"], "config") == \
        "[even, 'ring:priority']"
    assert render_value(None, "config") == "null" and render_value(2, "config") == "2"
    assert render_value(True, "flags") == "" and render_value(False, "flags") is None
    assert render_value(["ring", "mpi"], "flags") == "ring,mpi" and render_value("1K", "flags") == "1K"


def test_claims_on_fixture_files(tmp_path):
    plan = make_plan(load_manifest(_manifest(tmp_path, GOOD)), "quick", tmp_path / "out")
    runs = plan.runs_of("coll")
    assert [r.name for r in runs] == ["sweep-s1", "sweep-s2"] and runs[0].overrides["seed"] == 1
    for run, ring in zip(runs, (2.0, 2.2)):
        _collectives_file(run.output, {(1024, "ring"): ring, (1024, "mpi"): 1.0, (4096, "ring"): 3.0,
                                       (4096, "mpi"): 2.0}, seed=run.overrides["seed"])
    data = FigureData(runs)
    claims = {c.name: c for c in load_manifest(_manifest(tmp_path, GOOD)).figures["coll"].claims}
    results = {name: check_claim("coll", claim, data, "quick") for name, claim in claims.items()}
    assert results["ring_busbw"].verdict == "PASS" and results["ring_busbw"].value == 1.5
    assert results["too_much"].verdict == "FAIL" and results["too_much"].measured == "3"
    assert results["full_only"].verdict == "n/a" and results["full_only"].why == "full tier only"
    assert results["horovod"].verdict == "n/a" and results["horovod"].why.startswith("not built")
    assert results["gloo"].verdict == "FAIL" and "no rows match" in results["gloo"].why
    assert results["per_seed"].verdict == "PASS" and results["per_seed"].value == 2.2
    # a claim needing more cores than the machine's: its value shown, n/a saying why; enough cores: checked
    few = claims["ring_busbw"].model_copy(update={"min_cores": 4})
    short = check_claim("coll", few, data, "quick", cores=2)
    assert short.verdict == "n/a" and short.value == 1.5 and short.measured == "1.5"
    assert short.why == "needs 4 cores, this machine has 2"
    assert check_claim("coll", few, data, "quick", cores=4).verdict == "PASS"
    assert check_claim("coll", claims["too_much"].model_copy(update={"min_cores": 4}), data, "quick",
                       cores=8).verdict == "FAIL"
    rows = table_rows(list(results.values()))
    assert ("coll", "too_much", ">= 1000", "3", "FAIL", "-", "this code") in rows
    # the threshold and the docs are checked apart: a passing claim whose doc value drifted says so
    assert results["stated"].verdict == "PASS"
    assert results["stated"].doc == "doc drifted: states 1.57 x, measured 3 x"
    assert results["stated_range"].verdict == "PASS" and results["stated_range"].doc == "agrees (states 2.9-3.1 x)"
    assert check_claim("coll", claims["stated"].model_copy(update={"states": 3.005}), data,
                       "quick").doc == "agrees (states 3.005 x)"
    assert results["full_only"].doc == "-" and results["gloo"].doc == "-"
    # a claim reading files that other code made (kept by --reuse) names that code; others do not change
    marked = mark_files(results["stated"], {"sweep": "740279c"})
    assert marked.files == "other code: 740279c (--reuse)" and marked.verdict == "PASS"
    assert mark_files(results["stated"], {"big": "740279c"}).files == "this code"
    assert not any("nan" in cell for row in rows for cell in row)
    # a run that did not complete fails every claim reading its job, naming the run
    with ResultsFile(runs[1].output, "collectives", {}, overwrite=True) as rf:
        rf.close("failed", error="boom")
    failed = check_claim("coll", claims["ring_busbw"], FigureData(runs), "quick")
    assert failed.verdict == "FAIL" and "sweep-s2" in failed.why and "failed" in failed.why


class _FakeLauncher:
    """Runs end at once with exit 0; the drawing writes its PNG and exits ``draw_rc``."""

    name, asynchronous = "fake", False

    def __init__(self, draw_rc: int):
        self.draw_rc = draw_rc

    def start_run(self, run, argv):
        from hpcbench.reproduce.local import Handle

        return Handle(run.key, argv, "run.log", rc=0, wall_s=0.1)

    def start_draw(self, drawing, after):
        from hpcbench.reproduce.local import Handle

        drawing.png.parent.mkdir(parents=True, exist_ok=True)
        drawing.png.write_bytes(b"\x89PNG")
        return Handle(f"draw/{drawing.figure}", ["draw"], "draw.log", rc=self.draw_rc, wall_s=0.1)

    def wait(self, handles):  # pragma: no cover - every handle ends when started
        return []


@pytest.mark.parametrize("draw_rc, state", [(0, "drawn"), (1, "failed"), (2, "failed")])
def test_a_drawing_script_that_exits_non_zero_is_a_failed_figure(tmp_path, draw_rc, state):
    from hpcbench.reproduce.ledger import Ledger
    from hpcbench.reproduce.session import Session

    plan = make_plan(load_manifest(_manifest(tmp_path, GOOD)), "quick", tmp_path / "out")
    session = Session(plan, Ledger(tmp_path / "out" / "ledger.jsonl"), _FakeLauncher(draw_rc), say=lambda _: None,
                      code={"commit": "0" * 40})
    session.execute()
    assert plan.drawings["coll"].png.is_file()          # the script wrote its figure before exiting
    assert session.draws["coll"].state == state and session.draws["coll"].rc == draw_rc


def test_a_figure_whose_data_set_is_missing_is_na(tmp_path, monkeypatch, capsys):
    """``requires: {dataset: NAME}`` unmet: no runs, no drawing, its claims n/a with the reason; --list says so."""
    from hpcbench.datasets import installed

    missing = tmp_path / "no-fashion-mnist"
    monkeypatch.setitem(installed.INSTALLED, "fashion_mnist",
                        installed.InstalledDataset(str(missing), "apt-get install dataset-fashion-mnist",
                                                   installed.find_idx_set))
    text = GOOD.replace("    analysis: {script: analysis/plot_collectives.py}",
                        "    requires: {dataset: fashion_mnist}\n    analysis: {script: analysis/plot_collectives.py}")
    manifest = load_manifest(_manifest(tmp_path, text))
    plan = make_plan(manifest, "quick", tmp_path)
    assert plan.figures == [] and plan.runs == [] and plan.drawings == {}
    assert plan.unavailable == {"coll": f"fashion_mnist is not installed ({missing} missing; apt-get install "
                                        f"dataset-fashion-mnist)"}
    assert reproduce_main(["--manifest", str(tmp_path / "m.yaml"), "--list"]) == 0
    assert f"n/a here: fashion_mnist is not installed ({missing} missing" in capsys.readouterr().out
    out = tmp_path / "out"
    assert reproduce_main(["--manifest", str(tmp_path / "m.yaml"), "--tier", "quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "figure coll: n/a (fashion_mnist is not installed" in printed
    assert "8 n/a" in printed and not (out / "runs").exists()
    missing.mkdir()     # a folder without the files: incomplete, with the reader's reason
    assert "incomplete" in make_plan(manifest, "quick", tmp_path).unavailable["coll"]
    with pytest.raises(ManifestError, match="known data sets are fashion_mnist"):
        load_manifest(_manifest(tmp_path, text.replace("dataset: fashion_mnist", "dataset: imagenet")))


def test_a_figure_with_no_run_in_the_tier_is_na_with_the_reason(tmp_path):
    """Every job of a figure ``tiers: [full]``: the quick plan lists it n/a (not a figure with nothing to draw),
    the full plan runs it."""
    text = """
    version: 1
    figures:
      coll:
        title: collectives fixture
        paper: nccl-tests
        jobs:
          - {id: sweep, runner: collectives, ranks: 2, seeds: [1, 2], tiers: [full], expected_s: 3}
          - {id: big, runner: collectives, ranks: 2, tiers: [full], expected_s: 9}
        analysis: {script: analysis/plot_collectives.py}
        claims:
          - {name: ring, mirrors: x, quantity: "max(sweep.results.busbw)", op: ">=", threshold: 1, full_only: true}
    """
    manifest = load_manifest(_manifest(tmp_path, text))
    quick, full = (make_plan(manifest, t, tmp_path) for t in ("quick", "full"))
    assert "coll" not in quick.figures and not quick.runs
    assert quick.unavailable["coll"] == "no run in the quick tier (its jobs name tiers: full)"
    assert full.figures == ["coll"] and {r.job.id for r in full.runs} == {"sweep", "big"}
