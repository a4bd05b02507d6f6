"""scripts/keep_results.py: a reproduction's runs kept as a compact extract with their provenance."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np

from mpitools import ROOT

SCRIPT = ROOT / "scripts" / "keep_results.py"
COMMIT = "740279cff91f63a10fcfa67a085696168bea5797"


def _run_file(path, seed, accuracy, commit=COMMIT, rows=2):
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as h5:
        h5.attrs.update({"status": "completed", "git_commit": commit, "writer_host": "vm", "seed": seed,
                         "start_time": f"2026-11-29T01:0{seed}:00+00:00", "end_time": f"2026-11-29T01:0{seed}:30+00:00",
                         "config_json": "{}", "run_id": "x",
                         "trace_file": str(path.parent / f"conv-s{seed}.trace.json")})
        group = h5.create_group("convergence")
        group.attrs["columns"] = json.dumps(["compressor", "test_accuracy"])
        group.create_dataset("compressor", data=np.array(["none", "topk", "dgc"][:rows], dtype=h5py.string_dtype()))
        group.create_dataset("test_accuracy", data=np.array([accuracy, accuracy - 0.01, 0.5][:rows]))


def _out(tmp_path, commits=(COMMIT, COMMIT), rows=2):
    out = tmp_path / "out"
    ledger = []
    for seed, commit in enumerate(commits, start=1):
        path = out / "runs" / "conv-fig" / f"conv-s{seed}.h5"
        _run_file(path, seed, 0.97 + seed / 1000, commit, rows)
        ledger.append({"kind": "run", "rc": 0, "output": str(path), "load_average": [1.5 + seed, 1.0, 1.0]})
    (out / "ledger.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ledger))
    return out


def _keep(out, dest, *args):
    return subprocess.run([sys.executable, str(SCRIPT), str(out), "conv", "--tier", "full", "--no-timing",
                           "--dest", str(dest), *args], capture_output=True, text=True, timeout=120)


def test_tables_rows_and_the_manifest_are_kept_with_the_provenance(tmp_path):
    out, dest = _out(tmp_path), tmp_path / "measured"
    proc = _keep(out, dest, "--manifest", "jobs/docs-tables.yaml", "--tables", "convergence")
    assert proc.returncode == 0, proc.stderr
    kept = json.loads((dest / "conv.json").read_text())
    prov = kept["provenance"]
    assert prov["command"] == "hpcbench reproduce --manifest jobs/docs-tables.yaml conv-fig --tier full"
    assert prov["commit"] == COMMIT and prov["timing"] is False and "2.5-3.5" in prov["load"]
    assert [r["run"] for r in kept["runs"]] == ["conv-s1", "conv-s2"]
    first = kept["runs"][0]
    assert first["job"] == "conv" and first["seed"] == 1 and "config_json" not in first and "run_id" not in first
    assert first["trace_file"] == "OUT/runs/conv-fig/conv-s1.trace.json"     # no machine's folder in a kept file
    assert first["tables"]["convergence"] == [{"compressor": "none", "test_accuracy": 0.971},
                                              {"compressor": "topk", "test_accuracy": 0.961}]
    # without --tables nor --manifest: attributes only, the default manifest's command
    assert _keep(out, dest).returncode == 0
    kept = json.loads((dest / "conv.json").read_text())
    assert "tables" not in kept["runs"][0]
    assert kept["provenance"]["command"] == "hpcbench reproduce conv-fig --tier full"


def test_a_missing_or_long_table_and_mixed_commits_exit_2_writing_nothing(tmp_path, monkeypatch):
    dest = tmp_path / "measured"
    proc = _keep(_out(tmp_path), dest, "--tables", "rounds")
    assert proc.returncode == 2 and "no table 'rounds'" in proc.stderr and not dest.exists()
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import keep_results

    monkeypatch.setattr(keep_results, "MAX_ROWS", 2)
    try:
        keep_results.keep(_out(tmp_path / "long", rows=3), "conv", None, None, False, "full", None, ["convergence"])
    except SystemExit as exc:
        assert "has 3 rows, more than the 2" in str(exc)
    else:
        raise AssertionError("a table over MAX_ROWS was kept")
    proc = _keep(_out(tmp_path / "mixed", commits=(COMMIT, COMMIT[:-1] + "0")), dest)
    assert proc.returncode == 2 and "one clean commit" in proc.stderr and not dest.exists()
    proc = _keep(_out(tmp_path / "dirty", commits=(COMMIT, COMMIT + "-dirty")), dest, "--across-commits")
    assert proc.returncode == 2 and "one clean commit" in proc.stderr and not dest.exists()


def test_across_commits_names_each_commit_with_its_runs_oldest_first(tmp_path):
    other = COMMIT[:-1] + "0"
    out, dest = _out(tmp_path, commits=(other, COMMIT, COMMIT)), tmp_path / "measured"
    proc = _keep(out, dest, "--across-commits")
    assert proc.returncode == 0, proc.stderr
    kept = json.loads((dest / "conv.json").read_text())
    assert kept["provenance"]["commit"] == f"{other}, {COMMIT}"
    assert kept["provenance"]["commits"] == {other: 1, COMMIT: 2}
    assert kept["provenance"]["command"] == "hpcbench reproduce conv-fig --tier full --reuse"
    assert [r["git_commit"] for r in kept["runs"]] == [other, COMMIT, COMMIT]
    # one commit with the flag: as without it
    assert _keep(_out(tmp_path / "one"), dest, "--across-commits").returncode == 0
    prov = json.loads((dest / "conv.json").read_text())["provenance"]
    assert prov["commit"] == COMMIT and "commits" not in prov
