#!/usr/bin/env python
"""Bit-identity of the training runner against an earlier revision (the step-loop refactor's check).

Runs the same short training jobs with this checkout and with revision
``--before`` (extracted with ``git archive`` into a temporary directory; the
repository is not touched) and compares everything in them that does not
depend on timing:

- real compute at ``-np N`` (digits CNN; every deterministic synchroniser,
  the priority schedule, compressed top-k; and KungFu's synthetic ResNet-18
  with the GNS and variance monitors interleaved): a SHA-256 of every rank's
  final parameters per entry (printed by a wrapper around the worker's
  ``close``, which both revisions call after the last step's updates), and
  the losses, local gradient norms, monitor outputs and accuracies of the
  result files;
- emulated compute over a modelled link, both revisions replaying the same
  profile (``profile_file``): the tables' structure, buckets, profile,
  predictions and ideal throughput.

Usage (repository root)::

    python scripts/train_bits.py --before 5a46517 --np 2

Prints one line per compared item, ``identical`` or ``DIFFERS``, and exits 1
if anything differs. ``--keep DIR`` keeps the result files.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: prints a SHA-256 of the replica's parameters whenever a worker closes, then runs the training runner
WRAPPER = r"""
import hashlib, sys
from mpi4py import MPI
import hpcbench.train.steps.worker as W
_close = W.Worker.close
def close(self):
    h = hashlib.sha256()
    for p in self.model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    print(f"PARAMS rank {MPI.COMM_WORLD.rank} {h.hexdigest()}", flush=True)
    _close(self)
W.Worker.close = close
from hpcbench.train.__main__ import main
sys.exit(main(sys.argv[1:]))
"""

COMMON = ["--warmup", "1", "--iterations", "2", "--batches_per_iter", "3", "--progress", "false", "--overwrite"]
DIGITS = ["--model", "digits_cnn", "--batch_size", "8", "--bucket_mb", "0.002", "--lr", "0.1"]
SYNC = "ring, ring:priority, rabenseifner, tree, sma, pair, mpi"
#: the compressed entry in each syntax: job-wide keys (revisions before the sync sections), its own section
COMPRESSED = {"job-wide": (f"[{SYNC}, compressed]", ["--compressor", "topk", "--compress_ratio", "0.1"]),
              "section": (f"[{SYNC}, {{name: compressed, compressor: {{name: topk, ratio: 0.1}}}}]", [])}


def syntax(code_dir: Path) -> str:
    """``job-wide`` when the revision's training config still declares the job-wide compressor keys."""
    config = (code_dir / "hpcbench" / "train" / "config.py").read_text()
    return "job-wide" if re.search(r"^\s+compress_ratio\s*:", config, flags=re.M) else "section"
FIG8 = ["jobs/configs/train-fig8.yaml", "--image_size", "32", "--batch_size", "4", "--iterations", "2",
        "--batches_per_iter", "2", "--warmup", "1"]
EMULATED = ["--compute", "emulated", "--time_dilation", "2", "--link.kind", "model", "--link.bandwidth", "1Gbit",
            "--sync", f"[{SYNC}]"]


def run(side: str, code_dir: Path, np_: int, args: list[str], out: Path) -> list[list[str]]:
    """One job with one revision's code; returns the parameter hashes it printed: per entry, every rank's."""
    env = dict(os.environ, PYTHONPATH=str(code_dir), OMP_NUM_THREADS="1")
    mpiexec = Path(sys.executable).with_name("mpiexec")
    cmd = [str(mpiexec), "-n", str(np_), sys.executable, "-c", WRAPPER, *args, "--output", str(out)]
    proc = subprocess.run(cmd, cwd=code_dir, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{side}: {' '.join(args[:4])}... failed ({proc.returncode}):\n{proc.stdout[-3000:]}"
                         f"\n{proc.stderr[-3000:]}")
    per_rank: dict[int, list[str]] = {}
    for rank, digest in re.findall(r"^PARAMS rank (\d+) (\w+)$", proc.stdout, flags=re.M):
        per_rank.setdefault(int(rank), []).append(digest)
    return [list(entry) for entry in zip(*(per_rank[r] for r in sorted(per_rank)))]


def same(name: str, a, b) -> bool:
    """Print whether ``a`` and ``b`` (arrays, or lists of strings) are identical, bit for bit."""
    a, b = np.asarray(a), np.asarray(b)
    ok = a.shape == b.shape and (a.dtype.kind in "OUS" and bool(np.all(a == b)) or
                                 a.dtype.kind not in "OUS" and a.tobytes() == b.tobytes())
    print(f"  {'identical' if ok else 'DIFFERS  '}  {name} ({a.size} values)")
    return ok


def compare_files(before: Path, after: Path, tables: dict) -> bool:
    """Compare the given columns of each table of two result files."""
    from hpcbench.results import read_table

    ok = True
    for table, columns in tables.items():
        a, b = read_table(before, table), read_table(after, table)
        for c in columns:
            x, y = a[c], b[c]
            if x.dtype.kind in "OSU":
                x, y = x.astype(str), y.astype(str)
            ok &= same(f"{table}.{c}", x, y)
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="5a46517", help="revision to compare against (default: before the "
                                                         "step-loop refactor)")
    ap.add_argument("--np", type=int, default=2, dest="np_", help="MPI ranks")
    ap.add_argument("--keep", type=Path, help="keep the result files here")
    args = ap.parse_args(argv)
    from hpcbench.results import read_table

    with tempfile.TemporaryDirectory(prefix="train-bits-") as tmp:
        tmp = Path(tmp)
        before = tmp / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True).stdout
        with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
            tar.extractall(before, filter="data")
        out = args.keep or tmp / "out"
        out.mkdir(parents=True, exist_ok=True)
        sides = {"before": before, "after": ROOT}
        ok, hashes = True, {}
        for side, code in sides.items():
            sync, extra = COMPRESSED[syntax(code)]
            hashes[side] = run(side, code, args.np_, [*COMMON, *DIGITS, "--sync", sync, *extra],
                               out / f"{side}-digits.h5")
            hashes[side] += run(side, code, args.np_, [*FIG8, *COMMON], out / f"{side}-fig8.h5")
        print(f"real compute at -np {args.np_} (revision {args.before} against this checkout):")
        for i, (a, b) in enumerate(zip(hashes["before"], hashes["after"])):
            ranks = "the same on every rank" if len(set(a)) == 1 else "differing between ranks (model averaging)"
            print(f"  {'identical' if a == b else 'DIFFERS  '}  final parameters of entry {i}, SHA-256 "
                  f"{' '.join(h[:12] for h in a)} ({ranks})")
            ok &= a == b
        ok &= same("number of parameter hashes", [len(hashes["before"])], [len(hashes["after"])])
        ok &= compare_files(out / "before-digits.h5", out / "after-digits.h5", {
            "steps": ["sync", "variant", "iteration", "step", "loss", "local_sq_norm"],
            "iterations": ["sync", "iteration", "accuracy"],
            "summary": ["sync", "final_accuracy", "schedule"],
            "buckets": ["bytes", "params"]})
        ok &= compare_files(out / "before-fig8.h5", out / "after-fig8.h5", {
            "steps": ["variant", "iteration", "loss", "local_sq_norm",
                      *(c for c in read_table(out / "before-fig8.h5", "steps")
                        if c.startswith(("gns_", "variance_")))]})
        profile = out / "before-digits.h5"
        for side, code in sides.items():
            run(side, code, args.np_, [*COMMON, *DIGITS, *EMULATED, "--profile_file", str(profile)],
                out / f"{side}-emulated.h5")
        print(f"emulated compute at -np {args.np_}, the same replayed profile:")
        ok &= compare_files(out / "before-emulated.h5", out / "after-emulated.h5", {
            "steps": ["sync", "variant", "iteration", "step", "warmup"],
            "summary": ["sync", "status", "workers", "predicted_step_s", "predicted_efficiency", "predicted_comm_s",
                        "ideal_img_per_s_total", "schedule"],
            "buckets": ["bytes", "params", "ready_s", "need_s"],
            "profile": ["numel", "ready_s", "need_s"]})
    print("all identical" if ok else "SOME OUTPUTS DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
