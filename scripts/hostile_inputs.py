#!/usr/bin/env python
"""A battery of hostile inputs over every runner: no traceback, no hang, no memory blow-up, no file left.

Usage (from the repository root)::

    python scripts/hostile_inputs.py [--np 1] [--only fl,train] [--group inputs] [--sample 20] [--report FILE.json]

Each case is one command line a hostile or careless user could type (bad
values, YAML alias bombs, pickle memo bombs, deeply nested JSON, non-finite
floats, impossible sizes, clobbering paths, crafted checkpoints and result
files, out-of-range fault specs...) for ``fl``, ``train``, ``pipeline``,
``bench.collectives``, ``bench.compress``, ``bench.costmodel``, ``fl-bench``,
``results`` or ``reproduce``; input files include devices, FIFOs and sparse
files beyond their size bound. It runs in a fresh empty folder (relative outputs land
there) under ``mpiexec -n NP`` (the MPI runners; ``fl-bench``, ``results``
and ``reproduce`` start without it), while a sampler reads the resident memory of
every process of the tree every 20 ms. A case passes when:

- the exit status is the expected one (2 for bad input unless noted);
- stderr holds no Python traceback;
- it ended within ``--limit-s`` seconds (10: "no hang");
- no process grew more than 1 GiB beyond the runner's baseline (the peak
  of its cheapest refused input, e.g. an unknown flag, measured first);
- the folder holds exactly what the case put there before (same files,
  same bytes): no result file, checkpoint or folder left behind, nothing
  an existing file held replaced.

Cases of the output rules (``_output_cases``: side outputs, files in use
by another live run, reading live or failed results files) may put FIFOs,
folders and symbolic links in the folder and have a helper process hold
some of its files as a running job does (``Case.held``) while the case
runs; ``--outputs-only`` runs only them.

Prints one line per case and the totals; exit status 0 when every case
passes. ``--sample N`` runs every N-th case (the test suite runs a few).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIGITS = str(ROOT / "jobs" / "configs" / "digits.yaml")
GIB = 1 << 30

MPI_RUNNERS = {"fl": "hpcbench.fl", "train": "hpcbench.train", "pipeline": "hpcbench.pipeline",
               "collectives": "hpcbench.bench.collectives", "compress": "hpcbench.bench.compress",
               "costmodel": "hpcbench.bench.costmodel"}
PLAIN_RUNNERS = {"fl-bench": ["-m", "hpcbench.bench.fl_scaling"], "results": ["-m", "hpcbench.cli", "results"],
                 "reproduce": ["-m", "hpcbench.cli", "reproduce"]}

#: special values of ``Case.files``: a FIFO, an empty folder
FIFO = "<fifo>"
FOLDER = "<folder>"


@dataclass
class Case:
    """One hostile input: a runner, its arguments, files to create first, and the expected exit status."""

    runner: str
    args: list[str]
    files: dict = field(default_factory=dict)
    expect: tuple = (2,)
    note: str = ""
    #: files (or folders, ending with ``/``) of the case's folder that another live run holds during the case
    #: (:mod:`hpcbench.runtime.outputs` locks, taken by a helper process): the case may not touch them
    held: tuple = ()
    #: symbolic links to create: name -> target
    links: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------- hostile files
@dataclass(frozen=True)
class Fifo:
    """A named pipe to create in the case's folder (nothing ever writes to it)."""


@dataclass(frozen=True)
class Sparse:
    """A file of ``size`` zero bytes that takes no disk (a hole), for inputs beyond a size bound."""

    size: int


def _make(path: Path, data) -> None:
    if isinstance(data, Fifo):
        os.mkfifo(path)
    elif isinstance(data, Sparse):
        with open(path, "wb") as fh:
            fh.truncate(data.size)
    else:
        path.write_bytes(data)


def _bomb_yaml(levels=9, width=9, key="rounds") -> bytes:
    lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return ("\n".join(lines) + f"\n{key}: *a{levels - 1}\n").encode()


def _merge_bomb() -> bytes:
    lines = ["b0: &b0 {x: 1}"]
    lines += [f"b{i}: &b{i} {{<<: [{', '.join([f'*b{i - 1}'] * 9)}], y{i}: 1}}" for i in range(1, 9)]
    return ("\n".join(lines) + "\nrounds: *b8\n").encode()


def _shared(levels=40):
    x: list = [1.0]
    for _ in range(levels):
        x = [x, x]
    return x


def _pickle_bomb() -> bytes:
    return pickle.dumps({1: {"computation": _shared(), "communication": 1.0}})


def _behave_bomb() -> bytes:
    return pickle.dumps({1: {"active": _shared(), "inactive": [], "finish_time": 10.0}})


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def _deep_json() -> bytes:
    return b"[" * 200_000 + b"]" * 200_000


def _fedscale(job_conf: str, top: str = "") -> bytes:
    return (top + "job_conf:\n" + job_conf).encode()


def _checkpoint_bytes(kind: str) -> bytes:
    if kind == "garbage":
        return os.urandom(4096)
    if kind == "zip":
        return b"PK\x03\x04" + os.urandom(2000)
    if kind == "pickle":
        return pickle.dumps({"format": "hpcbench-fl-checkpoint/2", "params": [1.0]}, protocol=4)
    header = b"HPCBENCH-FL-CHECKPOINT\n"
    if kind == "header":
        return header + b'{"format": "hpcbench-fl-checkpoint/2", "sha256": "00", "bytes": 5}\n12345'
    if kind == "deep-header":
        return header + b"[" * 5000 + b"\n"
    raise ValueError(kind)


def _h5(kind: str) -> bytes:
    """A crafted result file, written with h5py to a temporary name and returned as bytes."""
    import h5py

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.h5"
        with h5py.File(path, "w") as h5:
            if kind == "deep-config":
                h5.attrs["kind"] = "fl"
                h5.attrs["config_json"] = "[" * 100_000 + "]" * 100_000
                h5.create_group("rounds").attrs["columns"] = "[]"
            elif kind == "no-rounds":
                h5.attrs["kind"] = "fl"
                h5.attrs["config_json"] = "{}"
            elif kind == "bad-config":
                h5.attrs["kind"] = "fl"
                h5.attrs["config_json"] = '{"aggregator": 5}'
                group = h5.create_group("rounds")
                group.attrs["columns"] = '["round"]'
                group.create_dataset("round", data=[1])
            elif kind == "status-garbage":
                h5.attrs["schema_version"] = 1
                h5.attrs["kind"] = "fl"
                h5.attrs["status"] = "running"
                h5.attrs["heartbeat"] = "yesterday"
        return path.read_bytes()


# --------------------------------------------------------------------------------------------- cases
def cases() -> list[Case]:
    c: list[Case] = []
    fl = lambda *a, **k: c.append(Case("fl", [DIGITS, "--progress", "false", "--rounds", "2", *a], **k))  # noqa: E731
    out = ["--output", "o.h5"]
    # values of config keys
    for key, value in [("rounds", "abc"), ("rounds", "0"), ("rounds", "-1"), ("rounds", "1e20"),
                       ("rounds", "[1, 2]"), ("rounds", "{a: 1}"), ("dataset.alpha", ".inf"),
                       ("dataset.alpha", ".nan"), ("dataset.alpha", "-1"), ("dataset.alpha", "0"),
                       ("dataset.name", "femnist"), ("model.name", "resnet18"), ("participants", "0"),
                       ("participants", "1000000000"), ("local_steps", "1000000000000"), ("batch_size", "0"),
                       ("learning_rate", ".nan"), ("learning_rate", "-.inf"), ("overcommitment", ".inf"),
                       ("selection", "bogus"), ("selection.pacer_step", "x"), ("aggregator", "fednova"),
                       ("aggregator.server_learning_rate", ".inf"), ("traces.compute_scale", "1.0e+400"),
                       ("seed", "-1"), ("job_name", "../../etc"), ("executor_concurrency", "0"),
                       ("uplink_compression.name", "zip"), ("mode", "asyncx"), ("eval_interval", "0"),
                       ("checkpoint_interval", "-1"), ("dataset.num_clients", "100000000000"),
                       ("traces.availability.format", "bogus"), ("asynchronous.arrival_interval_s", ".nan")]:
        fl(f"--{key}", value, *out)
    fl("--local_steps", "100000", "--rounds", "100000", *out, note="years of training")
    # files given as inputs
    fl("--traces.bandwidth.path", "deep.json", *out, files={"deep.json": _deep_json()})
    fl("--traces.bandwidth.path", "missing.json", *out)
    fl("--traces.bandwidth.path", ".", *out)
    fl("--traces.bandwidth.path", "bad.json", *out, files={"bad.json": b"{not json"})
    fl("--traces.bandwidth.path", "null.json", *out, files={"null.json": b"[null, 1e999]"})
    fl("--traces.device.format", "fedscale-capacity", "--traces.device.path", "cap.pkl", *out,
       files={"cap.pkl": _pickle_bomb()})
    fl("--traces.device.format", "fedscale-capacity", "--traces.device.path", "evil.pkl", *out,
       files={"evil.pkl": pickle.dumps(_Evil())})
    fl("--traces.availability.format", "fedscale-behavior", "--traces.availability.path", "beh.pkl", *out,
       files={"beh.pkl": _behave_bomb()})
    fl("--traces.availability.format", "fedscale-behavior", "--traces.availability.path", "trunc.pkl", *out,
       files={"trunc.pkl": pickle.dumps({1: {"active": [1.0]}})[:-3]})
    c.append(Case("fl", ["bomb.yaml", "--progress", "false", *out], files={"bomb.yaml": _bomb_yaml()}))
    c.append(Case("fl", ["merge.yaml", "--progress", "false", *out], files={"merge.yaml": _merge_bomb()}))
    c.append(Case("fl", ["self.yaml", *out], files={"self.yaml": b"rounds: &r [*r]\n"}))
    c.append(Case("fl", ["bin.yaml", *out], files={"bin.yaml": os.urandom(300)}))
    c.append(Case("fl", ["deep.yaml", *out], files={"deep.yaml": b"[" * 100_000}))
    c.append(Case("fl", ["list.yaml", *out], files={"list.yaml": b"- 1\n- 2\n"}))
    c.append(Case("fl", ["empty.yaml", *out], files={"empty.yaml": b""}))
    c.append(Case("fl", [".", *out]))
    c.append(Case("fl", ["missing.yaml", *out]))
    c.append(Case("fl", ["--rounds", _flow_bomb(), *out]))
    # FedScale job files
    for conf in (_fedscale("  - data_set: femnist\n  - model: resnet18\n  - filter_less: 21\n  - noise_factor: 1\n"),
                 _fedscale("  - device_conf_file: $NO_SUCH_VARIABLE/x\n"), _fedscale("  rounds: 5\n"),
                 _fedscale("  - rounds: *a\n", "a: &a [1, 2]\n"), b"ps_ip: 1.2.3.4\n",
                 _fedscale("  - rounds: many\n  - learning_rate: .inf\n")):
        c.append(Case("fl", ["--fedscale-conf", "conf.yml", "--progress", "false", *out], files={"conf.yml": conf}))
    c.append(Case("fl", ["--fedscale-conf", "bomb.yml", *out], files={"bomb.yml": _bomb_yaml(key="job_conf")}))
    c.append(Case("fl", ["--fedscale-conf", ".", *out]))
    # outputs, checkpoints, resumes
    for template in ["res/{job_name.__class__}.h5", "res/{job_name[0]}.h5", "res/{job_name!r}.h5",
                     "res/{}.h5", "{bogus}.h5", "{job_name.h5", "  ", "/nonexistent-hpcbench/dir/x.h5", "."]:
        fl("--output", template)
    fl("--output", "keep.h5", files={"keep.h5": b"earlier results"}, note="existing output")
    fl("--checkpoint_interval", "1", "--output", "a.h5", "--checkpoint", "a.h5")
    fl("--checkpoint_interval", "1", "--output", "a.h5", "--checkpoint", "{output}")
    fl("--checkpoint_interval", "1", "--output", "a.h5", "--checkpoint", "/proc/nope/x.ckpt")
    fl("--checkpoint_interval", "1", "--output", "a.h5", "--checkpoint", "/proc/x.ckpt")
    fl("--checkpoint_interval", "1", "--output", "a.h5", "--checkpoint", "notes.txt", files={"notes.txt": b"mine"})
    fl("--checkpoint_interval", "1", "--output", "a.h5", "--checkpoint", "{output.__class__}")
    for kind in ("garbage", "zip", "pickle", "header", "deep-header"):
        fl("--resume", "c.ckpt", *out, files={"c.ckpt": _checkpoint_bytes(kind)})
    fl("--resume", "missing.ckpt", *out)
    fl("--resume", ".", *out)
    for spec in ("99:2:raise", "0:0:raise", "0:3:raise", "x", "0:1:explode", "-1:1:raise"):
        fl("--fault-inject", spec, *out)
    fl("--no-such-flag", "1", *out)
    fl("--rounds", *out, note="flag without its value")

    # train
    tr = lambda *a, **k: c.append(Case("train", ["--progress", "false", *a, "--output", "o.h5"], **k))  # noqa: E731
    for key, value in [("image_size", "100000"), ("image_size", "4"), ("batch_size", "0"), ("lr", ".inf"),
                       ("model", "resnet1000"), ("sync", "[]"), ("sync", "[bogus]"), ("link.bandwidth", "fast"),
                       ("link.bandwidth", "0Gbit"), ("link.latency_s", ".nan"), ("bucket_mb", ".nan"),
                       ("compress_ratio", "2"), ("monitors", "[bogus]"), ("iterations", "0"),
                       ("time_dilation", "0.5"), ("profile_file", "missing.h5"), ("profile_file", "."),
                       ("link.trace_index", "-1"), ("schedule", "lifo"), ("compute", "quantum")]:
        tr(f"--{key}", value)
    tr("--link.kind", "model", "--link.bandwidth=-1Gbit")
    tr("--compute", "emulated", "--profile_file", "bad.h5", files={"bad.h5": b"not hdf5"})
    c.append(Case("train", ["bomb.yaml", "--output", "o.h5"], files={"bomb.yaml": _bomb_yaml(key="sync")}))
    # bring your own model and dataset (tests/byo_user_train.py, importable as tests.byo_user_train), real data sets
    user = "tests.byo_user_train"
    for model, data in [("no_such_module_xyz:make", "digits"), (f"{user}:NOT_CALLABLE", "digits"),
                        (f"{user}:nothing", "digits"), ("a:b:c", "digits"), (f"{user}:small_cnn", None),
                        (f"{user}:wrong_output", f"{user}:stripes"), (f"{user}:not_a_module", f"{user}:stripes"),
                        (f"{user}:raises", f"{user}:stripes"), ("leaf_cnn", f"{user}:flat_images"),
                        ("leaf_cnn", f"{user}:float_labels"), ("leaf_cnn", f"{user}:a_list"),
                        ("digits_mlp", "fashion_mnist"), ("leaf_cnn", "shakespeare")]:
        tr("--model", model, *(["--dataset.name", data] if data else []))
    tr("--model", "leaf_cnn", "--dataset.path", "missing-folder", note="Fashion-MNIST not where it is named")
    tr("--model", "leaf_cnn", "--dataset.name", "idx", "--dataset.path", ".", note="a folder without IDX files")
    tr("--model", "leaf_cnn", "--dataset.name", "idx", "--dataset.path", ".", files={
        "train-images-idx3-ubyte": b"\x00\x00\x08\x03" + (10 ** 9).to_bytes(4, "big") * 3,
        "train-labels-idx1-ubyte": b"", "t10k-images-idx3-ubyte": b"", "t10k-labels-idx1-ubyte": b""},
       note="IDX header claiming 10^27 bytes")
    for options in ("{hidden_dense: 0}", "{hidden_dense: many}", "{hidden_dense: 100000000000}", "{width: 2}"):
        tr("--model", "leaf_cnn", "--model_options", options)

    # pipeline
    pl = lambda *a, **k: c.append(Case("pipeline", [*a, "--output", "o.h5"], **k))  # noqa: E731
    for key, value in [("model.hidden", "100000000"), ("model.layers", "1000000"), ("model.heads", "3"),
                       ("devices.speed", "x:1"), ("devices.speed", "[]"), ("devices.speed", "[.inf]"),
                       ("devices.mem_cap_mb", "-1"), ("allocators", "[bogus]"), ("schedule", "bogus"),
                       ("batch_size", "7"), ("time_dilation", ".inf"), ("allocators", "[{name: sky-milp, time_limit_s: .nan}]"),
                       ("link.trace_index", "0"), ("lr", "-1"), ("iterations", "0")]:
        pl(f"--{key}", value)
    for kind in ("model", "shared"):
        for bandwidth in ("fast", "0Gbit", "-1Gbit"):
            pl("--link.kind", kind, f"--link.bandwidth={bandwidth}")
    c.append(Case("pipeline", ["bomb.yaml", "--output", "o.h5"], files={"bomb.yaml": _bomb_yaml(key="allocators")}))

    # collectives
    co = lambda *a, **k: c.append(Case("collectives", [*a, "--output", "o.h5"], **k))  # noqa: E731
    for args in (["-b", "64G", "-e", "64G"], ["-b", "1G", "-e", "1K"], ["-f", "1"], ["-a", "bogus"], ["-o", "bogus"],
                 ["-d", "bogus"], ["--link", "fast"], ["--link-alpha", "nan"], ["--overlap-factor", "inf"],
                 ["-n", "0"], ["-w", "-1"], ["-b", "xyz"], ["-e", "99999999999G"], ["-r", "bogus"]):
        co(*args)
    c.append(Case("collectives", ["--output", "/nonexistent-hpcbench/x.h5", "-b", "1K", "-e", "1K"]))
    c.append(Case("collectives", ["--output", "{op.__class__}.h5", "-b", "1K", "-e", "1K"]))

    # compress
    cp = lambda *a, **k: c.append(Case("compress", [*a, "--out", "o.h5"], **k))  # noqa: E731
    for args in (["--sizes-mb", "1000000"], ["--sizes-mb", "inf"], ["--sizes-mb", "-1"], ["--ratio", "0"],
                 ["--ratio", "nan"], ["--alpha", "inf"], ["--trace", "missing.json"], ["--trace", "."],
                 ["--compressors", "bogus"], ["--link", "fast"], ["--repeats", "0"], ["--threads", "0"],
                 ["--outputs", "bogus"], ["--trace-scale", "0"], ["--sizes-mb", ""]):
        cp(*args)
    cp("--trace", "deep.json", files={"deep.json": _deep_json()})
    cp("--trace", "bad.json", files={"bad.json": b"[{\"x\": 1}"})

    # costmodel
    cm = lambda *a, **k: c.append(Case("costmodel", [*a, "--output", "o.h5"], **k))  # noqa: E731
    for args in (["--links", "fast"], ["--alphas", "inf"], ["--sizes-mb", "0"], ["--sizes-mb", "5000"],
                 ["--sizes-mb", "nan"], ["--algorithms", "bogus"], ["--dilation", "0.5"], ["--reps", "0"],
                 ["--gamma", "nan"], ["--gamma", "-1"], ["--links", ""]):
        cm(*args)
    c.append(Case("costmodel", ["--output", "{start.real}.h5"]))

    # fl-bench (launches mpiexec itself: every bad input must be refused before any launch)
    fb = lambda *a, **k: c.append(Case("fl-bench", ["--flower", "none", *a], **k))  # noqa: E731
    for args in (["--np", "0"], ["--np", "100000"], ["--np", "x"], ["--rounds", "2", "--warmup", "5"],
                 ["--clients", "0"], ["--participants", "-1"], ["--client-training", "bogus"],
                 ["--local_steps", "abc"], ["--dataset.alpha", ".inf"], ["--registry-clients", "-5"],
                 ["--rounds", "0"], ["--bogus-job-flag", "1"], ["--fedscale-conf", "x.yml"],
                 ["--client_training", "numpy"]):
        fb(*args)

    # results
    rs = lambda *a, **k: c.append(Case("results", list(a), **k))  # noqa: E731
    rs("show", "missing.h5")
    rs("show", ".")
    rs("show", "garbage.h5", files={"garbage.h5": os.urandom(1000)})
    rs("show", "odd.h5", files={"odd.h5": _h5("status-garbage")}, expect=(0,), note="unreadable heartbeat: unknown")
    rs("show", "foreign.h5", files={"foreign.h5": _h5("foreign")}, note="an HDF5 file hpcbench did not write")
    rs("export", "--fedscale", "missing.h5")
    rs("export", "--fedscale", ".")
    rs("export", "--fedscale", "garbage.h5", files={"garbage.h5": os.urandom(1000)})
    for kind in ("deep-config", "no-rounds", "bad-config"):
        rs("export", "--fedscale", "x.h5", files={"x.h5": _h5(kind)})
    rs("export", "--fedscale", "x.h5", "-o", ".", files={"x.h5": _h5("bad-config")})
    rs("bogus-action")
    rs()
    return c + _output_cases() + _input_cases()


def _results_h5(status: str = "completed") -> bytes:
    """A small hpcbench results file (schema, kind fl, one rounds table) with root attribute ``status``."""
    import h5py

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.h5"
        with h5py.File(path, "w") as h5:
            h5.attrs.update(schema_version=1, kind="fl", status=status, config_json="{}", config_yaml="",
                            run_id="r1", heartbeat="2026-01-01T00:00:00+00:00")
            group = h5.create_group("rounds")
            group.attrs.update(columns='["round"]', rows=1)
            group.create_dataset("round", data=[1], maxshape=(None,))
        return path.read_bytes()


def _failed_lock(run_id: str = "r1") -> bytes:
    """The lock file a run leaves when its results file could not record its failure (a full disk)."""
    return json.dumps({"host": "elsewhere", "pid": 1, "run_id": run_id, "state": "failed",
                       "error": "OSError: [Errno 28] No space left on device"}).encode()


def _output_cases() -> list[Case]:
    """Issue 35 parts 1, 2, 5: every file a run writes follows the output rules; files in use by another run are
    refused; results read while written or after a write error (docs/architecture.md, Data-safety guarantees)."""
    c: list[Case] = []
    fl = lambda *a, **k: c.append(Case("fl", [DIGITS, "--progress", "false", "--rounds", "2", *a], **k))  # noqa: E731
    ck = ["--checkpoint_interval", "1"]
    # side outputs: folder names, non-regular files, links, inputs, each other
    fl("--output", "DIR/", note="trailing slash: never a file named DIR")
    fl("--output", "sub/DIR/")
    fl("--output", "o.h5", *ck, "--checkpoint", "ck/")
    fl("--output", "fifo", files={"fifo": FIFO})
    fl("--output", "fifo", "--overwrite", files={"fifo": FIFO})
    fl("--output", "link.h5", "--overwrite", files={"real.h5": b"mine"}, links={"link.h5": "real.h5"})
    fl("--output", "o.h5", *ck, "--checkpoint", "d", files={"d": FOLDER})
    fl("--output", "o.h5", *ck, "--checkpoint", "fifo", "--overwrite", files={"fifo": FIFO})
    c.append(Case("fl", ["conf.yaml", "--progress", "false", "--output", "conf.yaml", "--overwrite"],
                  files={"conf.yaml": b"rounds: 2\n"}, note="the output is the config"))
    c.append(Case("fl", ["conf.yaml", "--progress", "false", "--output", "o.h5", *ck, "--checkpoint", "conf.yaml",
                         "--overwrite"], files={"conf.yaml": b"rounds: 2\n"}, note="the checkpoint is the config"))
    fl("--output", "keep.h5", "--tensorboard", "tb", files={"keep.h5": b"mine"}, note="no tb folder left")
    fl("--output", "o.h5", "--tensorboard", "tb", files={"tb/o/notes": b"mine"}, note="a run folder in use")
    fl("--output", "o.h5", "--tensorboard", "f", files={"f": b"a file"})
    # concurrent runs: a file another live run holds is refused whatever the flags, nothing truncated
    fl("--output", "o.h5", "--overwrite", files={"o.h5": b"another run's results"}, held=("o.h5",))
    fl("--output", "o.h5", held=("o.h5",), note="held, not yet created")
    fl("--output", "n.h5", *ck, "--checkpoint", "c.ckpt", "--overwrite", files={"c.ckpt": b"another run's"},
       held=("c.ckpt",))
    fl("--output", "n.h5", "--tensorboard", "tb", "--overwrite", files={"tb": FOLDER}, held=("tb/n/",))
    # train and pipeline: the Chrome trace
    quick = ["jobs/configs/train-quick.yaml", "--warmup", "1", "--iterations", "2", "--batches_per_iter", "2",
             "--model", "digits_mlp", "--batch_size", "4", "--sync", "[ring]"]
    quick[0] = str(ROOT / quick[0])
    tr = lambda *a, **k: c.append(Case("train", [*quick, "--progress", "false", *a], **k))  # noqa: E731
    tr("--chrome_trace", "o.h5", "--output", "o.h5", note="the trace would replace the results")
    tr("--chrome_trace", "o.h5", "--output", "o.h5", "--overwrite", files={"o.h5": b"earlier results"})
    tr("--chrome_trace", "keep.json", "--output", "o.h5", files={"keep.json": b"mine"})
    tr("--chrome_trace", "true", "--output", "o.h5", files={"o.trace.json": b"mine"})
    tr("--chrome_trace", "fifo", "--output", "o.h5", "--overwrite", files={"fifo": FIFO})
    tr("--chrome_trace", "traces/", "--output", "o.h5")
    tr("--chrome_trace", "d", "--output", "o.h5", "--overwrite", files={"d": FOLDER})
    tr("--output", "o.h5", "--overwrite", files={"o.h5": b"another run's"}, held=("o.h5",))
    small = [str(ROOT / "jobs" / "configs" / "pipeline-quick.yaml"), "--model.layers", "5", "--model.hidden", "16",
             "--model.heads", "2", "--model.seq_len", "8", "--batch_size", "8", "--micro_batches", "4",
             "--iterations", "3", "--warmup", "1", "--compute", "emulated", "--allocators", "[even]"]
    pl = lambda *a, **k: c.append(Case("pipeline", [*small, *a], **k))  # noqa: E731
    pl("--chrome_trace", "o.h5", "--output", "o.h5")
    pl("--chrome_trace", "true", "--output", "o.h5", files={"o.trace.json": b"mine"})
    pl("--chrome_trace", "fifo", "--output", "o.h5", "--overwrite", files={"fifo": FIFO})
    pl("--chrome_trace", "t.json", "--output", "o.h5", "--overwrite", held=("t.json",))
    # the micro-benchmarks' outputs
    c.append(Case("collectives", ["-b", "1K", "-e", "1K", "--output", "DIR/"]))
    c.append(Case("collectives", ["-b", "1K", "-e", "1K", "--output", "o.h5", "--overwrite"],
                  files={"o.h5": b"another run's"}, held=("o.h5",)))
    c.append(Case("compress", ["--sizes-mb", "0.01", "--out", "fifo", "--overwrite"], files={"fifo": FIFO}))
    c.append(Case("costmodel", ["--sizes-mb", "0.1", "--output", "res/", "--overwrite"]))
    # results: export's -o, reading files in use or left failed
    rs = lambda *a, **k: c.append(Case("results", list(a), **k))  # noqa: E731
    rs("export", "--fedscale", "x.h5", "-o", "DIR/", files={"x.h5": _results_h5()})
    rs("export", "--fedscale", "x.h5", "-o", "fifo", "--overwrite", files={"x.h5": _results_h5(), "fifo": FIFO})
    rs("export", "--fedscale", "x.h5", "-o", "x.h5", "--overwrite", files={"x.h5": _results_h5()},
       note="the export would replace its input")
    rs("export", "--fedscale", "x.h5", "-o", "p.pkl", "--overwrite", files={"x.h5": _results_h5(), "p.pkl": b"x"},
       held=("p.pkl",))
    rs("show", "x.h5", files={"x.h5": _results_h5("running")}, held=("x.h5",), expect=(0,),
       note="a file a live run holds: shown, running")
    rs("ls", ".", files={"x.h5": _results_h5("running")}, held=("x.h5",), expect=(0,))
    rs("show", "x.h5", files={"x.h5": _results_h5("running"), ".x.h5.lock": _failed_lock()}, expect=(0,),
       note="a full disk kept the failure in the lock file: shown failed")
    rs("show", "x.h5", files={"x.h5": os.urandom(2000), ".x.h5.lock": _failed_lock()},
       note="unreadable after a full disk: one line naming the failure")
    rs("ls", ".", files={"x.h5": os.urandom(2000), ".x.h5.lock": _failed_lock()}, expect=(0,))
    # reproduce: one session per --out folder
    c.append(Case("reproduce", ["--out", "D"], files={"D": FOLDER}, held=("D/",)))
    c.append(Case("reproduce", ["--out", "D"], files={"D": b"a file"}))
    return c


_REPRODUCE_MANIFEST = """version: 1
figures:
  tiny:
    title: fixture
    paper: a fixture
    jobs:
      - {id: cost, runner: costmodel, ranks: 1, overrides: {sizes-mb: "0.1", reps: 1}, expected_s: 3}
    analysis: {script: analysis/plot_costmodel.py}
    claims:
      - {name: c, mirrors: x, quantity: "max(cost.results.measured)", op: ">", threshold: THRESHOLD}
"""


def _input_cases() -> list[Case]:
    """Issue 35 parts 3, 4, 6 and 7: inputs bounded before they are read, values checked before the run,
    ``reproduce``'s arguments and manifest, FedScale job files read with FedScale's types."""
    from hpcbench.runtime.bounded import INPUT_BOUNDS

    c: list[Case] = []
    out = ["--output", "o.h5"]
    over = {kind: Sparse(bound + 1) for kind, bound in INPUT_BOUNDS.items()}
    fl = lambda *a, **k: c.append(Case("fl", [*a, "--progress", "false", "--rounds", "2", *out], **k))  # noqa: E731
    # part 3: every kind of input file as the zero device, a FIFO and a file one byte over its bound
    for name, files in (("/dev/zero", {}), ("in.yaml", {"in.yaml": Fifo()}), ("in.yaml", {"in.yaml": over["config"]})):
        fl(name, files=files)
        fl("--fedscale-conf", name, files=files)
        c.append(Case("pipeline", [name, *out], files=files))
    for name, files in (("/dev/zero", {}), ("/dev/urandom", {}), ("t.json", {"t.json": Fifo()}),
                        ("t.json", {"t.json": over["trace"]})):
        fl(DIGITS, "--traces.device.path", name, files=files)
    fl(DIGITS, "--traces.device.format", "fedscale-capacity", "--traces.device.path", "cap.pkl",
       files={"cap.pkl": Fifo()})
    fl(DIGITS, "--traces.availability.format", "fedscale-behavior", "--traces.availability.path", "/dev/zero")
    for name, files in (("/dev/zero", {}), ("c.ckpt", {"c.ckpt": Fifo()}), ("c.ckpt", {"c.ckpt": over["checkpoint"]})):
        fl(DIGITS, "--resume", name, files=files)
    for name, files in (("/dev/zero", {}), ("r.h5", {"r.h5": Fifo()}), ("r.h5", {"r.h5": over["results"]})):
        c.append(Case("results", ["show", name], files=files))
        c.append(Case("reproduce", ["--manifest", name.replace(".h5", ".yaml"), "--list"],
                      files={k.replace(".h5", ".yaml"): over["manifest"] if isinstance(v, Sparse) else v
                             for k, v in files.items()}))
    c.append(Case("results", ["export", "--fedscale", "r.h5", "-o", "x.pkl"], files={"r.h5": Fifo()}))
    c.append(Case("train", ["--progress", "false", "--compute", "emulated", "--profile_file", "p.h5", *out],
                  files={"p.h5": Fifo()}))
    c.append(Case("compress", ["--trace", "/dev/urandom", "--out", "o.h5"]))
    c.append(Case("compress", ["--trace", "t.json", "--out", "o.h5"], files={"t.json": Fifo()}))
    # part 4: values and products of values checked before the run
    c.append(Case("collectives", ["-n", str(10**12), "-b", "1K", "-e", "1K", *out]))
    c.append(Case("compress", ["--sizes-mb", "1e-9", "--out", "o.h5"]))
    c.append(Case("compress", ["--threads", "100000", "--out", "o.h5"]))
    c.append(Case("costmodel", ["--reps", str(10**12), *out]))
    c.append(Case("fl-bench", ["--np", "2,2", "--flower", "none"]))
    c.append(Case("fl-bench", ["--np", "1,2", "--flower", "/bin/false"]))
    c.append(Case("train", ["st.yaml", "--progress", "false", *out],
                  files={"st.yaml": b"policies:\n  - {name: stellatrain, min_batch: 64, max_batch: 8}\n"}))
    # part 6: reproduce's manifest and --out
    manifest = _REPRODUCE_MANIFEST.replace("THRESHOLD", "0").encode()
    c.append(Case("reproduce", ["--manifest", "bin.yaml", "--list"], files={"bin.yaml": bytes(range(256)) * 8}))
    c.append(Case("reproduce", ["--manifest", "m.yaml", "--list"],
                  files={"m.yaml": _REPRODUCE_MANIFEST.replace("THRESHOLD", ".nan").encode()}))
    c.append(Case("reproduce", ["--manifest", "m.yaml", "--out", "notes.txt"],
                  files={"m.yaml": manifest, "notes.txt": b"mine"}))
    for place in ("/proc", "/sys/kernel", "/sys/hpcbench-nope/out"):
        c.append(Case("reproduce", ["--manifest", "m.yaml", "--out", place], files={"m.yaml": manifest}))
    # part 7: FedScale's types and its older total_worker
    for conf in (_fedscale("  - total_worker: 100\n  - num_participants: 8\n"), _fedscale("  - rounds: 10.0\n"),
                 _fedscale("  - gradient_policy: fed-yogi\n  - yogi_eta: fast\n")):
        c.append(Case("fl", ["--fedscale-conf", "conf.yml", "--progress", "false", *out], files={"conf.yml": conf}))
    return c


def _flow_bomb() -> str:
    parts = ["&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    parts += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]
    return "[" + ", ".join(parts) + "]"


# ------------------------------------------------------------------------------------------ running
def _tree_rss(pid: int) -> dict[int, int]:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return {}
    out = {}
    for p in procs:
        try:
            out[p.pid] = p.memory_info().rss
        except psutil.Error:
            pass
    return out


def _snapshot(folder: Path) -> dict[str, str]:
    """Each entry's digest; a FIFO or a large (sparse) file by its type, size and change time, never read."""
    import stat

    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            out[rel] = f"-> {os.readlink(path)}"
        elif stat.S_ISREG(st.st_mode) and st.st_size <= 64 << 20:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif stat.S_ISDIR(st.st_mode):
            out[rel] = "<dir>"
        else:
            out[rel] = f"<mode {st.st_mode:o}, {st.st_size} bytes, changed {st.st_mtime_ns}>"
    return out


_HOLD = """
import sys
from hpcbench.runtime.outputs import Output, claim_outputs
name = sys.argv[1]
claimed = claim_outputs([Output("held", name.rstrip("/"), folder=name.endswith("/"), may_exist=True)], "another-run")
print("held", flush=True)
sys.stdin.read()
"""


def _hold(folder: Path, name: str) -> subprocess.Popen:
    """A process holding ``folder/name`` as a live run does, until its stdin is closed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, name], cwd=folder, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "held":
        raise RuntimeError(f"could not hold {name}")
    return proc


@dataclass
class Outcome:
    case: Case
    rc: int
    wall_s: float
    peak_rss: int
    problems: list


def run_case(case: Case, np_: int, limit_s: float, baseline: int, kill_s: float = 60.0) -> Outcome:
    """Run one case in a fresh folder; check status, traceback, time, memory and files."""
    folder = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        for name, data in case.files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            if data == FIFO:
                os.mkfifo(folder / name)
            elif data == FOLDER:
                (folder / name).mkdir(exist_ok=True)
            else:
                _make(folder / name, data)
        for name, target in case.links.items():
            (folder / name).symlink_to(target)
        holders = [_hold(folder, name) for name in case.held]
        before = _snapshot(folder)
        if case.runner in MPI_RUNNERS:
            from hpcbench.runtime.launch import find_mpiexec

            cmd = [find_mpiexec(), "-n", str(np_), sys.executable, "-m", MPI_RUNNERS[case.runner], *case.args]
        else:
            cmd = [sys.executable, *PLAIN_RUNNERS[case.runner], *case.args]
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get(
            "PYTHONPATH", ""))
        env.pop("FEDSCALE_HOME", None)
        peak = {"rss": 0}
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        done = threading.Event()
        killed = {"why": ""}

        def sample():
            while not done.wait(0.02):
                rss = _tree_rss(proc.pid)
                if rss:
                    peak["rss"] = max(peak["rss"], max(rss.values()))
                if peak["rss"] > baseline + 3 * GIB:
                    killed["why"] = "memory"
                    _kill(proc)
                    return

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            stdout, stderr = proc.communicate(timeout=kill_s)
        except subprocess.TimeoutExpired:
            killed["why"] = killed["why"] or "timeout"
            _kill(proc)
            stdout, stderr = proc.communicate()
        wall = time.monotonic() - start
        done.set()
        sampler.join()
        err = stderr.decode("utf-8", "replace")
        problems = []
        if killed["why"]:
            problems.append(f"killed ({killed['why']})")
        if proc.returncode not in case.expect:
            problems.append(f"exit {proc.returncode}, expected {'/'.join(map(str, case.expect))}")
        if "Traceback" in err:
            problems.append("traceback")
        if wall > limit_s:
            problems.append(f"took {wall:.1f} s")
        if peak["rss"] - baseline > GIB:
            problems.append(f"grew {(peak['rss'] - baseline) / GIB:.2f} GiB")
        after = _snapshot(folder)
        for holder in holders:
            holder.stdin.close()
            holder.wait(30)
        if after != before:
            changed = sorted(set(after) ^ set(before) | {k for k in before if after.get(k) != before[k]})
            problems.append(f"files changed: {', '.join(changed[:5])}")
        if Path("/nonexistent-hpcbench").exists():
            problems.append("created /nonexistent-hpcbench")
            shutil.rmtree("/nonexistent-hpcbench", ignore_errors=True)
        return Outcome(case, proc.returncode, wall, peak["rss"], problems + ([err.strip().splitlines()[-1][:200]]
                                                                               if problems and err.strip() else []))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kill(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--np", type=int, default=1, help="ranks of the MPI runners (default 1)")
    parser.add_argument("--only", default="", help="comma-separated runners (default: all)")
    parser.add_argument("--sample", type=int, default=1, help="run every N-th case")
    parser.add_argument("--limit-s", type=float, default=10.0, help="longest a case may take (s)")
    parser.add_argument("--report", default=None, help="write the outcomes as JSON here")
    parser.add_argument("--group", choices=("all", "inputs", "outputs"), default="all",
                        help="inputs: only the cases of _input_cases() (bounded input files, values checked before "
                             "the run, reproduce's arguments, FedScale's types); outputs: only _output_cases() "
                             "(the output rules, concurrent runs, live reading)")
    parser.add_argument("--outputs-only", action="store_true", help="the same as --group outputs")
    args = parser.parse_args(argv)
    group = "outputs" if args.outputs_only else args.group
    todo = {"all": cases, "inputs": _input_cases, "outputs": _output_cases}[group]()
    if args.only:
        keep = set(args.only.split(","))
        todo = [c for c in todo if c.runner in keep]
    todo = todo[::args.sample]
    runners = sorted({c.runner for c in todo})
    baselines = {}
    for runner in runners:  # the cheapest refused input: an unknown flag (train/fl-bench: a bad value)
        probe = Case(runner, ["--no-such-flag-hpcbench"] if runner not in ("results",) else ["show", "none.h5"])
        baselines[runner] = run_case(probe, args.np, 1e9, 0).peak_rss
    print(f"{len(todo)} cases over {', '.join(runners)}; -n {args.np}; baselines (peak RSS of a refused flag): "
          + ", ".join(f"{r} {b / 2**20:.0f} MiB" for r, b in baselines.items()), flush=True)
    outcomes = []
    for i, case in enumerate(todo, 1):
        o = run_case(case, args.np, args.limit_s, baselines[case.runner])
        outcomes.append(o)
        mark = "ok  " if not o.problems else "FAIL"
        shown = " ".join(case.args)[:90]
        print(f"{mark} {i:3d} {case.runner:<11} rc={o.rc:<3} {o.wall_s:5.1f}s {o.peak_rss / 2**20:6.0f}MiB  "
              f"{shown}" + (f"\n       {'; '.join(o.problems)}" if o.problems else ""), flush=True)
    failed = [o for o in outcomes if o.problems]
    by = {}
    for o in outcomes:
        by.setdefault(o.case.runner, [0, 0])[0 if not o.problems else 1] += 1
    print(f"\n{len(outcomes) - len(failed)} of {len(outcomes)} cases passed; "
          + ", ".join(f"{r}: {ok} ok, {bad} failed" for r, (ok, bad) in sorted(by.items()))
          + f"; slowest {max(o.wall_s for o in outcomes):.1f} s; largest growth "
          f"{max(o.peak_rss - baselines[o.case.runner] for o in outcomes) / 2**20:.0f} MiB")
    if args.report:
        Path(args.report).write_text(json.dumps([{"runner": o.case.runner, "args": o.case.args, "rc": o.rc,
                                                   "wall_s": o.wall_s, "peak_rss": o.peak_rss,
                                                   "problems": o.problems} for o in outcomes], indent=1))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
