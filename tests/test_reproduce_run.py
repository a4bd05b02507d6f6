"""hpcbench reproduce end to end on a tiny manifest: claims table, broken claim, report, resumability, Slurm.

The fixture manifest runs the cost-model benchmark at 2 ranks on a 100 kB
buffer (about a second per run), a second job reading the first one's
results (a ``from:`` override), and draws with ``analysis/plot_costmodel.py``.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mpitools import ROOT, mpiexec_path

MANIFEST = """
version: 1
figures:
  tiny:
    title: cost model fixture
    paper: Thakur, Rabenseifner and Gropp (2005)
    jobs:
      - id: cost
        runner: costmodel
        ranks: 2
        overrides: {links: 10Gbit, alphas: 1e-5, sizes-mb: "0.1", algorithms: "ring,tree", reps: 1}
        expected_s: 3
      - id: again
        runner: costmodel
        ranks: 2
        overrides: {links: 10Gbit, alphas: 1e-5, sizes-mb: "0.1", algorithms: ring, reps: {from: "count(cost.results.ratio)"}}
        expected_s: 3
    analysis: {script: analysis/plot_costmodel.py}
    claims:
      - {name: measured, mirrors: a fixture, quantity: "max(cost.results.measured) * 1000", op: ">", threshold: 0, unit: ms}
      - {name: reps_from_results, mirrors: a fixture stating 3, quantity: "first(again.attrs.world_size)", op: between, threshold: [2, 2], states: 3, tolerance: 0.5}
      - {name: broken, mirrors: a threshold no run can meet, quantity: "max(cost.results.ratio)", op: ">=", threshold: 1.0e9}
"""

pytestmark = pytest.mark.mpi


def _reproduce(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    mpiexec_path()
    return subprocess.run([sys.executable, "-m", "hpcbench.cli", "reproduce", *args], capture_output=True, text=True,
                          timeout=600, cwd=str(cwd), stdin=subprocess.DEVNULL)


def _rows(stdout: str) -> dict[str, list[str]]:
    """``claim -> row`` of the printed table (columns separated by two or more spaces)."""
    rows = [re.split(r"\s{2,}", line.strip()) for line in stdout.splitlines() if line.startswith("tiny ")]
    return {row[1]: row for row in rows}


def _claims(stdout: str) -> dict[str, str]:
    """``claim -> result`` from the printed table."""
    return {name: row[4] for name, row in _rows(stdout).items()}


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.links, self.ids = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a["src"])
        if tag == "a" and a.get("href") and not a["href"].startswith("#"):
            self.links.append(a["href"])
        if a.get("id"):
            self.ids.append(a["id"])


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("repro")
    manifest = base / "m.yaml"
    manifest.write_text(textwrap.dedent(MANIFEST))
    out = base / "out"
    return manifest, out, _reproduce("--manifest", str(manifest), "--out", str(out))


def test_a_broken_claim_fails_alone_and_the_status_is_1(first_run):
    _, _, proc = first_run
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _claims(proc.stdout) == {"measured": "PASS", "reps_from_results": "PASS", "broken": "FAIL"}
    header = next(line for line in proc.stdout.splitlines() if re.match(r"figure\s{2,}claim", line))
    assert re.split(r"\s{2,}", header.strip()) == ["figure", "claim", "threshold", "measured", "result", "docs",
                                                    "files"]
    rows = _rows(proc.stdout)
    # the threshold passes while the value the docs state has drifted: both are shown
    assert rows["reps_from_results"][4:] == ["PASS", "doc drifted: states 3, measured 2", "this code"]
    assert rows["measured"][5:] == ["-", "this code"]
    assert "docs: 1 drifted of 1 stated" in proc.stdout
    assert "from results: reps=2" in proc.stdout
    assert not re.search(r"\bnan\b", proc.stdout, re.IGNORECASE)


def test_the_report_shows_every_figure_and_every_image_it_references_exists(first_run):
    manifest, out, _ = first_run
    report = out / "report.html"
    refs = _Refs()
    refs.feed(report.read_text(encoding="utf-8"))
    assert refs.images, "the report shows no figure"
    for src in refs.images:
        if src.startswith("data:image/png;base64,"):
            assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            assert (report.parent / src).is_file(), src
    for href in refs.links:
        assert (report.parent / href).is_file(), href
    assert any(h.endswith(".pdf") for h in refs.links)
    from hpcbench.reproduce.manifest import load_manifest

    for figure in load_manifest(manifest).figures:
        assert f"fig-{figure}" in refs.ids
    text = report.read_text(encoding="utf-8")
    assert "MPI library" in text and "broken" in text and "cost.h5" in text


def test_a_second_run_starts_no_job_and_a_changed_job_runs_again(first_run):
    manifest, out, _ = first_run
    outputs = sorted((out / "runs" / "tiny").glob("*.h5"))
    stamps = [p.stat().st_mtime_ns for p in outputs]
    proc = _reproduce("--manifest", str(manifest), "--out", str(out))
    assert proc.returncode == 1 and _claims(proc.stdout)["broken"] == "FAIL"
    assert proc.stdout.count("skipped (completed with the same config)") == 2, proc.stdout
    assert "rank(s), expected" not in proc.stdout
    assert [p.stat().st_mtime_ns for p in outputs] == stamps
    ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    runs = [e for e in ledger if e["kind"] == "run"]
    assert len(runs) == 2 and all(e["rc"] == 0 and e["wall_s"] > 0 and e["command"][0].endswith("mpiexec")
                                  for e in runs)
    manifest.write_text(manifest.read_text().replace('algorithms: ring, reps', 'algorithms: tree, reps'))
    proc = _reproduce("--manifest", str(manifest), "--out", str(out))
    assert proc.stdout.count("skipped (completed with the same config)") == 1
    assert "tiny/again: costmodel on 2 rank(s), expected 3 s (the manifest's settings changed)" in proc.stdout


def test_files_of_other_code_run_again_unless_reused_and_then_the_claims_say_so(first_run):
    manifest, out, _ = first_run
    ledger = out / "ledger.jsonl"
    proc = _reproduce("--manifest", str(manifest), "--out", str(out))       # both files up to date
    assert proc.stdout.count("skipped (completed with the same config)") == 2, proc.stdout
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    here = next(e["code"] for e in reversed(entries) if e["kind"] == "run")
    assert len(here["commit"]) in (0, 40) and here["python"] and here["numpy"] and here["mpi_library"]
    # the files were made by another commit, one this clone does not hold (so no package tree to compare): rewrite
    # the code identity their ledger lines name, as a line written before package_tree was recorded
    for e in entries:
        if e["kind"] == "run":
            e["code"] = {**e["code"], "commit": "0" * 40, "package_diff_sha256": ""}
            e["code"].pop("package_tree", None)
    ledger.write_text("".join(json.dumps(e) + "\n" for e in entries))
    outputs = sorted((out / "runs" / "tiny").glob("*.h5"))
    stamps = [p.stat().st_mtime_ns for p in outputs]
    proc = _reproduce("--manifest", str(manifest), "--out", str(out), "--reuse")
    assert proc.stdout.count("skipped (kept (--reuse) though made by other code: commit 0000000 -> ") == 2, \
        proc.stdout
    assert [p.stat().st_mtime_ns for p in outputs] == stamps
    rows = _rows(proc.stdout)
    assert {name: row[6] for name, row in rows.items()} == {name: "other code: 0000000 (--reuse)" for name in rows}
    assert "3 computed from other code's files (--reuse)" in proc.stdout
    report = (out / "report.html").read_text(encoding="utf-8")
    assert report.count("other code: 0000000 (--reuse)") == 3
    # without --reuse both run again, and the claims are computed from this code's files
    proc = _reproduce("--manifest", str(manifest), "--out", str(out))
    assert proc.stdout.count("(made by other code: commit 0000000 -> ") == 2, proc.stdout
    assert [p.stat().st_mtime_ns for p in outputs] != stamps
    assert {row[6] for row in _rows(proc.stdout).values()} == {"this code"}


def _slurm_down() -> str:
    from hpcbench.reproduce.slurm import slurm_available

    return slurm_available()


@pytest.mark.skipif(bool(_slurm_down()), reason=f"no Slurm: {_slurm_down()}")
def test_the_slurm_launcher_runs_the_same_manifest(tmp_path):
    manifest = tmp_path / "m.yaml"
    manifest.write_text(textwrap.dedent(MANIFEST))
    out = tmp_path / "out"
    proc = _reproduce("--manifest", str(manifest), "--out", str(out), "--launcher", "slurm")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _claims(proc.stdout) == {"measured": "PASS", "reps_from_results": "PASS", "broken": "FAIL"}
    assert (out / "figures" / "tiny.png").is_file() and (out / "report.html").is_file()
    scripts = sorted((out / "slurm" / "tiny").glob("*.sbatch"))
    assert [p.name for p in scripts] == ["again.sbatch", "cost.sbatch", "draw.sbatch"]
    assert "srun --mpi=pmi2" in (out / "slurm" / "tiny" / "cost.sbatch").read_text()
    draws = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "draw" and e["rc"] == 0 and e["job_id"] for e in draws)
