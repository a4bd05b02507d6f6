#!/usr/bin/env python
"""Bit-identity of the federated runner against an earlier revision (the FL-in-parts refactor's check).

Runs a fixed set of short ``hpcbench.fl`` jobs with this checkout and with
revision ``--before`` (extracted with ``git archive`` into a temporary
directory; the repository is not touched) and compares every HDF5 dataset
and table column of each pair of result files exactly (bytes; strings by
value), and every attribute, except what measures the machine, the time or
the code version (wall and CPU seconds, memory, host names, dates, run ids,
the git commit). The jobs: the digits job at ``-np 1, 2, 4`` (``auto``:
numpy), every client-training engine (``sequential``, ``batched``,
``numpy`` with FedProx), q-FedAvg with Oort, every executor training at
once, FedBuff at ``-np 1`` and ``3``, compressed uplinks (top-k, top-k with
FLOPs-charged compute), Shakespeare's CharLSTM, FedScale's femnist job
file, ``fl-bench``'s job (100 participants of 1,000 clients, numpy and
sequential), and a kill at step 6 then ``--resume`` at another world size,
synchronous and FedBuff, with Oort, FedYogi, top-k and a decaying learning
rate (every piece of state a checkpoint holds).

Usage (repository root)::

    python scripts/fl_bits.py --before 740279c [--only digits-np1,fedbuff-np3] [--keep DIR]

Prints one line per job and per compared file, ``identical`` or
``DIFFERS`` (with what differs), and exits 1 if anything differs or a job
ended with another status than expected.
"""

from __future__ import annotations

import argparse
import difflib
import io
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

D = "jobs/configs/digits.yaml"
#: the checkpoint test's settings (tests/test_fl_checkpoint.py): Oort's pacer, FedYogi, decay, top-k with residuals
CK = ["--traces.availability.format", "none", "--rounds", "6", "--eval_interval", "3", "--selection", "oort",
      "--selection.pacer_step", "2", "--aggregator", "fedyogi", "--aggregator.eta", "0.01", "--decay_factor",
      "0.9", "--decay_round", "2", "--uplink_compression.name", "topk", "--checkpoint_interval", "2",
      "--target_accuracy", "0.1"]
CKA = ["--traces.availability.format", "none", "--mode", "async", "--rounds", "6", "--eval_interval", "3",
       "--selection", "oort", "--aggregator", "fedyogi", "--aggregator.eta", "0.01", "--uplink_compression.name",
       "topk", "--checkpoint_interval", "2"]
#: hpcbench.bench.fl_scaling's job (its _job_flags), 4 rounds
BENCH = ["--rounds", "4", "--participants", "100", "--dataset.num_clients", "1000", "--dataset.samples_per_client",
         "20", "--traces.availability.format", "none", "--eval_interval", "4"]
#: name, ranks, arguments, and what the job is: "" (a run, exit 0), "cut" (killed: exit != 0) or "resume:NAME"
#: (continues NAME's file in place, exit 0)
JOBS = [
    ("digits-np1", 1, [D, "--rounds", "10"], ""),
    ("digits-np2", 2, [D, "--rounds", "10"], ""),
    ("digits-np4", 4, [D, "--rounds", "10"], ""),
    ("digits-seq-np3", 3, [D, "--rounds", "6", "--client_training", "sequential"], ""),
    ("digits-batched-np3", 3, [D, "--rounds", "6", "--client_training", "batched"], ""),
    ("digits-numpy-fedprox-np2", 2, [D, "--rounds", "6", "--client_training", "numpy", "--aggregator", "fedprox"], ""),
    ("digits-seq-qfedavg-np1", 1, [D, "--rounds", "5", "--client_training", "sequential", "--aggregator", "qfedavg",
                                   "--selection", "oort"], ""),
    ("digits-allconc-np4", 4, [D, "--rounds", "5", "--executor_concurrency", "all"], ""),
    ("fedbuff-np1", 1, ["jobs/configs/digits-fedbuff.yaml", "--rounds", "15"], ""),
    ("fedbuff-np3", 3, ["jobs/configs/digits-fedbuff.yaml", "--rounds", "15"], ""),
    ("topk-np2", 2, ["jobs/configs/digits-topk.yaml", "--rounds", "8"], ""),
    ("topk-flops-np2", 2, ["jobs/configs/digits-topk-flops.yaml", "--rounds", "4"], ""),
    ("shakespeare-np2", 2, ["jobs/configs/shakespeare.yaml", "--rounds", "2", "--participants", "3",
                            "--local_steps", "2", "--eval_interval", "1", "--dataset.max_test_samples", "50"], ""),
    ("fedscale-femnist-np2", 2, ["--fedscale-conf", "tests/data/fedscale/femnist_conf.yml", "--dataset.name",
                                 "digits", "--model.name", "mlp", "--rounds", "3", "--traces.device.format",
                                 "flhetbench-device", "--traces.bandwidth.format", "mobiperf",
                                 "--traces.availability.format", "none"], ""),
    ("flbench-numpy-np3", 3, [*BENCH, "--client_training", "numpy"], ""),
    ("flbench-seq-np3", 3, [*BENCH, "--client_training", "sequential"], ""),
    ("ck-full-np2", 2, [D, *CK], ""),
    ("ck-cut-np2", 2, [D, *CK, "--fault-inject", "0:6:exit"], "cut"),
    ("ck-cut-resume-np3", 3, [D, *CK, "--resume", "{out}/ck-cut-np2.h5.ckpt"], "resume:ck-cut-np2"),
    ("cka-full-np3", 3, [D, *CKA], ""),
    ("cka-cut-np3", 3, [D, *CKA, "--fault-inject", "0:6:exit"], "cut"),
    ("cka-cut-resume-np2", 2, [D, *CKA, "--resume", "{out}/cka-cut-np3.h5.ckpt"], "resume:cka-cut-np3"),
]
#: datasets that measure the machine
MACHINE = {"wall_time_s", "round_wall_s", "train_wall_s", "train_cpu_s", "peak_rss_bytes", "hostname", "wall_s",
           "wall_to_accuracy_s"}
#: attributes that record the machine, the time or the code version
PROVENANCE = {"end_time", "start_time", "heartbeat", "run_id", "writer_pid", "git_commit", "wall_s", "hosts",
              "wall_to_accuracy_s", "resumed_at", "oversubscribed", "load_average", "slurm_job_nodelist"}


def run_jobs(code: Path, out: Path, only: set[str] | None) -> bool:
    """Run the jobs with the package in ``code``, results in ``out``; False if one ended unexpectedly."""
    from hpcbench.runtime.launch import run_mpi

    out.mkdir(parents=True, exist_ok=True)
    ok = True
    for name, n, args, kind in JOBS:
        if only and name not in only:
            continue
        target = out / f"{name}.h5"
        if kind.startswith("resume:"):  # continues the cut run's file in place
            target = out / f"{kind.split(':', 1)[1]}.h5"
        argv = ["-m", "hpcbench.fl", *[a.replace("{out}", str(out)) for a in args], "--progress", "false",
                "--output", str(target)] + ([] if kind.startswith("resume:") else ["--overwrite"])
        t = time.perf_counter()
        proc = run_mpi(n, argv, timeout=900, cwd=code, env={"PYTHONPATH": str(code)})
        (out / f"{name}.log").write_text(proc.stdout + "\n--stderr--\n" + proc.stderr)
        good = (proc.returncode != 0) if kind == "cut" else (proc.returncode == 0)
        ok &= good
        print(f"  {code.name or code}: {name} exit {proc.returncode} {'' if good else 'UNEXPECTED '}"
              f"({time.perf_counter() - t:.0f} s)", flush=True)
    return ok


def _datasets(h5) -> dict:
    import h5py

    found = {}
    h5.visititems(lambda k, v: found.__setitem__(k, v) if isinstance(v, h5py.Dataset) else None)
    return found


def compare_file(a: Path, b: Path) -> list[str]:
    """What differs between result files ``a`` and ``b`` (their folders' paths read as one)."""
    import h5py

    bad = []
    folders = (str(a.parent.resolve()), str(b.parent.resolve()))
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        da, db = _datasets(fa), _datasets(fb)
        if set(da) != set(db):
            bad.append(f"datasets only on one side: {sorted(set(da) ^ set(db))}")
        for key in sorted(set(da) & set(db)):
            if key.rsplit("/", 1)[-1] in MACHINE:
                continue
            x, y = da[key][()], db[key][()]
            if x.dtype != y.dtype or x.shape != y.shape:
                bad.append(f"{key}: {x.dtype}{x.shape} against {y.dtype}{y.shape}")
            elif (x.tolist() != y.tolist()) if x.dtype.kind == "O" else (x.tobytes() != y.tobytes()):
                bad.append(f"{key}: values differ")
        for group in ["/"] + [k for k in fa if isinstance(fa[k], h5py.Group)]:
            aa, ab = dict(fa[group].attrs), dict(fb[group].attrs) if group in fb else {}
            for key in sorted((set(aa) | set(ab)) - PROVENANCE):
                va, vb = aa.get(key), ab.get(key)
                va = va.replace(folders[0], "{OUT}") if isinstance(va, str) else va
                vb = vb.replace(folders[1], "{OUT}") if isinstance(vb, str) else vb
                if repr(va) == repr(vb):
                    continue
                if isinstance(va, str) and isinstance(vb, str):
                    lines = [d for d in difflib.unified_diff(va.splitlines(), vb.splitlines(), lineterm="", n=0)
                             if d[:1] in "+-" and d[:3] not in ("+++", "---")]
                    bad.append(f"attribute {group}:{key}: {lines[:4]}")
                else:
                    bad.append(f"attribute {group}:{key}: {str(va)[:60]!r} against {str(vb)[:60]!r}")
    return bad


def compare(before: Path, after: Path) -> bool:
    """Compare every result file of ``before`` with its namesake in ``after``; print one line each."""
    ok = True
    for path in sorted(before.glob("*.h5")):
        other = after / path.name
        bad = compare_file(path, other) if other.exists() else [f"missing in {after}"]
        print(f"  {'identical' if not bad else 'DIFFERS  '}  {path.name}")
        for line in bad:
            print(f"      {line}")
        ok &= not bad
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="740279c", help="revision to compare against (default: before the FL "
                                                         "runner was split into parts)")
    ap.add_argument("--only", default="", help="comma-separated job names (default: all)")
    ap.add_argument("--keep", type=Path, help="keep the result files here (before/ and after/)")
    args = ap.parse_args(argv)
    only = {n for n in args.only.split(",") if n} or None
    unknown = (only or set()) - {job[0] for job in JOBS}
    if unknown:
        ap.error(f"--only: unknown jobs {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="fl-bits-") as tmp:
        tmp = Path(tmp)
        code = tmp / "before"
        code.mkdir()
        archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(code, filter="data")
        out = args.keep or tmp / "out"
        print(f"jobs with revision {args.before}:")
        ok = run_jobs(code, out / "before", only)
        print("jobs with this checkout:")
        ok &= run_jobs(ROOT, out / "after", only)
        print(f"result files, revision {args.before} against this checkout:")
        ok &= compare(out / "before", out / "after")
    print("all identical" if ok else "DIFFERENCES or unexpected exits (above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
