"""scripts/render_docs.py: the docs' generated blocks match the kept result files, which carry their provenance."""

from __future__ import annotations

import json
import subprocess
import sys

from mpitools import ROOT

SCRIPT = ROOT / "scripts" / "render_docs.py"

PROVENANCE = {"commit": "740279cff91f63a10fcfa67a085696168bea5797", "host": "vm", "cpu": "a CPU", "cores": 2,
              "load": "1-minute load average 3.0-5.0", "command": "hpcbench reproduce tiny --tier quick",
              "date": "2026-11-29T01:04:26+00:00 to 2026-11-29T01:05:00+00:00", "timing": False}

TEMPLATE = """| run | virtual s |
|---|---|
{% for r in select(figure="tiny") %}
| {{ r.run }} | {{ r.time_to_accuracy_s|num("{:.1f}") }} |
{% endfor %}
| mean | {{ runs|map(attribute="time_to_accuracy_s")|mean|num("{:.1f}") }} |
"""


def _render(root, *args):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), *args], capture_output=True,
                          text=True, timeout=120)


def _tree(tmp_path):
    (tmp_path / "docs" / "measured").mkdir(parents=True)
    (tmp_path / "docs" / "templates").mkdir()
    source = {"name": "tiny", "provenance": PROVENANCE,
              "runs": [{"figure": "tiny", "run": "a-s1", "time_to_accuracy_s": 100.0},
                       {"figure": "tiny", "run": "a-s2", "time_to_accuracy_s": 152.84}]}
    (tmp_path / "docs" / "measured" / "tiny.json").write_text(json.dumps(source))
    (tmp_path / "docs" / "templates" / "tiny.md.j2").write_text(TEMPLATE)
    (tmp_path / "docs" / "a.md").write_text("# A\n\ntext\n\n<!-- generated: tiny -->\nstale\n<!-- /generated -->\n\n"
                                            "more text\n")
    return tmp_path


def test_the_repository_docs_match_their_kept_files():
    proc = _render(ROOT, "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_block_is_rendered_from_its_file_with_its_provenance_and_check_fails_on_a_changed_number(tmp_path):
    root = _tree(tmp_path)
    doc = root / "docs" / "a.md"
    assert _render(root, "--check").returncode == 1                        # "stale" is not what the file renders
    assert _render(root).returncode == 0
    text = doc.read_text()
    assert "| a-s2 | 152.8 |" in text and "| mean | 126.4 |" in text and "stale" not in text
    assert "commit 740279c" in text and "load average 3.0-5.0" in text and "2026-11-29" in text
    # runs of several commits: each named with its runs
    source = json.loads((root / "docs" / "measured" / "tiny.json").read_text())
    source["provenance"] = {**PROVENANCE, "commit": f"{'1' * 40}, {PROVENANCE['commit']}",
                            "commits": {"1" * 40: 1, PROVENANCE["commit"]: 1}}
    (root / "docs" / "measured" / "tiny.json").write_text(json.dumps(source))
    assert _render(root).returncode == 0
    assert "commits 1111111 (1 run), 740279c (1 run), vm" in doc.read_text()
    source["provenance"] = PROVENANCE
    (root / "docs" / "measured" / "tiny.json").write_text(json.dumps(source))
    assert _render(root).returncode == 0
    assert text.startswith("# A\n\ntext\n\n<!-- generated: tiny -->\n") and text.endswith("\n\nmore text\n")
    assert _render(root, "--check").returncode == 0
    assert _render(root).returncode == 0 and doc.read_text() == text           # rendering again changes nothing
    # a number typed over in the block
    doc.write_text(text.replace("| 152.8 |", "| 152.9 |"))
    proc = _render(root, "--check")
    assert proc.returncode == 1 and "docs/a.md: block tiny differs from what its sources render" in proc.stderr
    doc.write_text(text)
    # a number changed in the kept file
    source = json.loads((root / "docs" / "measured" / "tiny.json").read_text())
    source["runs"][0]["time_to_accuracy_s"] = 101.0
    (root / "docs" / "measured" / "tiny.json").write_text(json.dumps(source))
    assert _render(root, "--check").returncode == 1


def test_a_source_without_provenance_or_over_budget_fails_the_check(tmp_path):
    root = _tree(tmp_path)
    assert _render(root).returncode == 0
    path = root / "docs" / "measured" / "tiny.json"
    source = json.loads(path.read_text())
    del source["provenance"]["load"]
    path.write_text(json.dumps(source))
    proc = _render(root, "--check")
    assert proc.returncode == 1 and "provenance lacks load" in proc.stderr
    del source["provenance"]["commit"]
    path.write_text(json.dumps(source))
    assert "provenance lacks commit, load" in _render(root, "--check").stderr
    source["provenance"].update(PROVENANCE)
    path.write_text(json.dumps(source))
    assert _render(root, "--check").returncode == 0
    (root / "docs" / "measured" / "big.h5").write_bytes(b"\0" * (600 * 1024))
    proc = _render(root, "--check")
    assert proc.returncode == 1 and "docs/measured/big.h5: 600 KiB, over the 512 KiB" in proc.stderr


def test_a_block_without_template_or_source_exits_2_and_the_audit_counts_tables(tmp_path):
    root = _tree(tmp_path)
    doc = root / "docs" / "a.md"
    doc.write_text(doc.read_text() + "\n<!-- generated: nothing -->\n<!-- /generated -->\n")
    proc = _render(root)
    assert proc.returncode == 2 and "nothing.json" in proc.stderr
    doc.write_text("<!-- generated: tiny -->\n<!-- /generated -->\n\n"
                   "<!-- measured: commit 1234567, a 2-core VM, 2026-01-02; no file: the run's file was not kept -->\n"
                   "| a | b |\n|---|---|\n| 1.5 | 22 |\n\n| a | b |\n|---|---|\n| 3.25 | 4.5 |\n\n"
                   "| words | only |\n|---|---|\n| a | b |\n\n"
                   "<!-- not measured: defaults -->\n| key | default |\n|---|---|\n| lr | 0.01 |\n| mu | 0.1 |\n")
    proc = _render(root, "--audit")
    assert proc.returncode == 0
    assert "generated blocks: 1; labelled tables: 1; tables with numbers neither generated nor labelled: 1" \
        in proc.stdout
    assert "docs/a.md:9" in proc.stdout


def test_the_audit_lists_prose_measurements_without_a_label(tmp_path):
    root = _tree(tmp_path)
    (root / "docs" / "a.md").write_text(
        "# A\n\nThe ring took 37.7 s, 1.53x less than MPI.\n\n"            # line 3: unlabelled
        "Settings in code only: `0.5 ms`, and integers: 10 Gbit/s, 2 ranks.\n\n"
        "Re-measured at 3f9eff0: 35.2 s.\n\n"                              # names its commit
        "The file [here](measured/x.json) says 12.5 ms.\n\n"               # links a kept file
        "<!-- not measured: the emulated step -->\nEach step sleeps 0.174 s.\n\n"
        "```\nprinted 4.2 ms\n```\n\n"                                     # code fence
        "## B\n\n<!-- measured: commit 1234567, a 2-core VM, 2026-01-02; no file: typed -->\n"
        "| a | b |\n|---|---|\n| 1.5 | 2.5 |\n\nThe table's 1.5 ms against 2.5 ms.\n\n"  # shares the table's label
        "## C\n\nAnother section: 0.9x and 3.0 %.\n\n"                    # line 29: a new section, unlabelled
        "Introduces the table: 2.5 s.\n\n<!-- measured: commit 1234567, a 2-core VM, 2026-01-02; no file: typed -->\n"
        "| a | b |\n|---|---|\n| 1.5 | 2.5 |\n\n"
        "## D\n\nThe readings below: commit 3f9eff0, a 2-core VM, 2026-11-29.\n\n- a transfer took 0.33 s.\n")
    proc = _render(root, "--audit")
    assert proc.returncode == 0
    assert "prose paragraphs with measurement-like numbers and no label (a report, not checked): 2" in proc.stdout
    assert "docs/a.md:3: 37.7 s, 1.53x" in proc.stdout and "docs/a.md:29: 0.9x, 3.0 %" in proc.stdout
    assert _render(root, "--check").returncode == 0                       # a report, not a check
