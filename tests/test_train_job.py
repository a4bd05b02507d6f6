"""``python -m hpcbench.train`` end to end at -np 2: real and emulated runs, the figure scripts, bad input."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import numpy as np
import pytest

from hpcbench.results import read_attrs, read_table
from mpitools import ROOT, run_mpi

QUICK = ["jobs/configs/train-quick.yaml", "--warmup", "1", "--iterations", "2", "--batches_per_iter", "2",
         "--progress", "false"]


@pytest.mark.mpi
def test_real_run_side_by_side_writes_kungfu_lines_and_tables(tmp_path):
    """ResNet-18 at 32x32: hpcbench's ring (overlapped) beside DDP, one file."""
    out = tmp_path / "r.h5"
    proc = run_mpi(2, ["-m", "hpcbench.train", *QUICK, "--batch_size", "4", "--sync", "[ring, ddp]",
                       "--bucket_mb", "8", "--output", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "compute real" in proc.stdout and "time dilation 1" in proc.stdout and "link shared" in proc.stdout
    assert proc.stdout.count("Iter #") == 4 and proc.stdout.count("Img/sec per worker: ") == 2
    attrs = read_attrs(out)
    assert attrs["compute_mode"] == "real" and attrs["time_dilation"] == 1.0 and attrs["status"] == "completed"
    assert attrs["parameters"] == 11689512 and attrs["buckets"] == 5   # 46.8 MB in buckets closed at >= 8 MiB
    summary = read_table(out, "summary")
    assert list(summary["sync"].astype(str)) == ["ring", "ddp"]
    assert np.all(summary["img_per_s_worker"] > 0)
    steps = read_table(out, "steps")
    ring = (steps["sync"].astype(str) == "ring") & ~steps["warmup"]
    assert np.all((steps["hidden_fraction"][ring] >= 0) & (steps["hidden_fraction"][ring] <= 1))
    assert np.all(steps["comm_span_s"][ring] > 0) and np.all(np.isfinite(steps["loss"][ring]))
    assert np.all(steps["local_sq_norm"][~steps["warmup"]] > 0)       # ring's hooks and DDP's comm hook
    np.testing.assert_allclose(steps["samples_per_s_total"], 2 * steps["samples_per_s_worker"])
    assert np.all(steps["policy_s"] == 0) and np.all(steps["telemetry_s"] == 0)     # no policies, no telemetry


@pytest.mark.mpi
def test_emulated_dilated_run_feeds_the_figure_script(tmp_path):
    """Emulated compute over a modelled 1 Gbit/s link, dilated; prediction recorded; figure 9 drawn."""
    out = tmp_path / "e.h5"
    proc = run_mpi(2, ["-m", "hpcbench.train", *QUICK, "--model", "digits_mlp", "--batch_size", "16",
                       "--compute", "emulated", "--compute_time_s", "0.02", "--time_dilation", "3",
                       "--link.kind", "model", "--link.bandwidth", "1Gbit", "--sync", "[ring, sma]",
                       "--bucket_mb", "0.01", "--output", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "compute emulated (given" in proc.stdout and "time dilation 3" in proc.stdout
    attrs = read_attrs(out)
    assert attrs["compute_mode"] == "emulated" and attrs["time_dilation"] == 3.0
    assert "1Gbit" in attrs["link_model"]
    s = read_table(out, "summary")
    assert np.all(np.isfinite(s["predicted_efficiency"]))
    # emulated compute is the given 20 ms: modelled (undilated) step times. No upper bound: load only lengthens
    # a step (the dilation's own arithmetic, 3x slept and 1/3 read, is checked on a virtual clock in
    # tests/test_train_emulated.py)
    assert 0.018 < float(np.median(s["step_s"]))
    png = tmp_path / "f9.png"
    fig = subprocess.run([sys.executable, "analysis/plot_train_scaling.py", str(out), "-o", str(png)],
                         capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert fig.returncode == 0, fig.stderr
    assert png.read_bytes()[:4] == b"\x89PNG" and "ring" in fig.stdout
    what = subprocess.run([sys.executable, "-m", "hpcbench.train.reporting.whatif", str(out), "--workers", "2", "64",
                           "--bandwidth", "1Gbit", "--latency-s", "0"],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert what.returncode == 0, what.stderr
    ring = next(line for line in what.stdout.splitlines() if line.startswith("ring "))
    assert f"{s['predicted_efficiency'][0]:.3f}" in ring        # the run's own prediction at its 2 workers
    fig = subprocess.run([sys.executable, "analysis/plot_train_monitors.py", str(out), "-o", str(png)],
                         capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert fig.returncode == 2 and "interleaved" in fig.stderr       # no monitor variants in this file


@pytest.mark.mpi
def test_emulated_priority_schedule_side_by_side_and_a_replayed_profile(tmp_path):
    """``schedule: priority`` over a modelled link: the order in the header and the summary, each bucket's
    forward need time in the buckets table, the prediction recorded; a FIFO entry beside it; a replayed profile."""
    out = tmp_path / "p.h5"
    proc = run_mpi(2, ["-m", "hpcbench.train", *QUICK, "--model", "digits_cnn", "--batch_size", "16",
                       "--compute", "emulated", "--compute_time_s", "0.03", "--time_dilation", "4",
                       "--link.kind", "model", "--link.bandwidth", "100Mbit",
                       "--sync", "[ring, rabenseifner, ring:fifo]", "--bucket_mb", "0.001", "--schedule", "priority",
                       "--output", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "schedule priority" in proc.stdout and proc.stdout.count("[priority schedule, bucket order ") == 2
    assert read_attrs(out)["schedule"] == "priority"
    b = read_table(out, "buckets")
    assert len(b["bytes"]) >= 3 and np.all(np.diff(b["need_s"]) <= 0)     # bucket 0 holds the last layers
    s = read_table(out, "summary")
    assert [str(x).split()[0] for x in s["schedule"]] == ["priority", "priority", "fifo"]
    assert list(s["sync"].astype(str)) == ["ring", "rabenseifner", "ring:fifo"]
    assert np.all((s["efficiency"] > 0) & np.isfinite(s["predicted_efficiency"]))   # no timing test: see docs
    # a second run replays the first one's profile (one timeline for a sweep): same buckets, same prediction
    again = tmp_path / "again.h5"
    proc = run_mpi(1, ["-m", "hpcbench.train", *QUICK, "--model", "digits_cnn", "--batch_size", "16",
                       "--compute", "emulated", "--link.kind", "model", "--link.bandwidth", "100Mbit",
                       "--sync", "[ring]", "--bucket_mb", "0.001", "--profile_file", str(out), "--output", str(again)],
                      timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_attrs(again)["profile_file"] == str(out)
    b2 = read_table(again, "buckets")
    for k in ("bytes", "ready_s", "need_s"):
        np.testing.assert_array_equal(b2[k], b[k])
    bad = run_mpi(1, ["-m", "hpcbench.train", *QUICK, "--compute", "emulated", "--profile_file", str(out),
                      "--output", str(tmp_path / "bad.h5")], timeout=120)
    assert bad.returncode == 2 and "profile_file" in bad.stderr and "digits_cnn" in bad.stderr
    assert not (tmp_path / "bad.h5").exists()


@pytest.mark.parametrize("n,args,needle", [
    (2, ["--sync", "[ring, warp]"], "warp"),
    (1, ["--time_dilation", "4"], "time_dilation"),
    (1, ["--monitors", "[gns_typo]"], "gns_typo"),
    (3, ["--policies", "[{name: batch_schedule, batch_size: {5: 0}}]"],
     "key 'policies.0.batch_schedule.batch_size.5' has bad value 0"),
    (2, ["--policies", "[stellatrain]"], "'stellatrain' sets the compression ratio; sync 'ring' cannot change it"),
    (2, ["--sync", "[{name: compressed, compressor: qsgd, optimizer: {name: sgd}}]"], "needs a sparse compressor"),
])
def test_bad_input_exits_2_without_output(tmp_path, n, args, needle):
    out = tmp_path / "bad.h5"
    proc = run_mpi(n, ["-m", "hpcbench.train", *QUICK, *args, "--output", str(out)], timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("overrides,needle", [
    ({"compute": "emulated", "sync": "[ddp]"}, "'ddp' needs compute: real"),
    ({"compute_time_s": "0.1"}, "compute_time_s"),
    ({"link.bandwidth": "fast"}, "link.bandwidth"),
    ({"sync": "[sma]", "monitors": "[probe]"}, "averages models"),
    ({"interleave_monitors": "true"}, "interleave_monitors"),
    ({"sync": "[{name: compressed, compressor: zip}]"}, "unknown compressor 'zip'; registered: "),
    ({"sync": "[{name: compressed, compressor: {name: qsgd, ratio: 0.1}}]"}, "compressor 'qsgd' takes no ratio"),
    ({"sync": "[{name: sma, alpha: 1.5}]"}, "sync.0.sma.alpha"),
    ({"sync": "[{name: sma, algorithm: warp}]"}, "unknown allreduce algorithm 'warp'"),
    ({"sync": "[{name: ring, alpha: 0.1}]"}, "sync.0.ring.alpha"),
    ({"sync": "[sma, {name: sma, alpha: 0.5}]"}, "entry 'sma' listed twice"),
    ({"sync": "[warp]"}, "unknown synchroniser 'warp'; registered: mpi, ring"),
    ({"model": "resnet1000"}, "resnet1000"),
    ({"sync": "[]"}, "at least one"),
    ({"schedule": "priority", "sync": "[ring, mpi]"}, "sync 'mpi' has none"),
    ({"sync": "[ring, mpi:priority]"}, "sync 'mpi:priority' has none"),
    ({"sync": "[ring:lifo]"}, "sync.0.ring.schedule"),
    ({"profile_file": "x.h5"}, "profile_file: 'x.h5' needs compute: emulated"),
    ({"schedule": "priority", "overlap": "false"}, "needs overlap: true"),
    ({"schedule": "lifo"}, "schedule"),
    ({"policies": "[{name: batch_schedule}]"}, "give a schedule"),
    ({"policies": "[{name: batch_schedule, batch_size: '0:8', unit: week}]"}, "policies.0.batch_schedule.unit"),
    ({"policies": "[{batch_size: {0: 8}}]"}, "no name; registered: batch_schedule"),
    ({"policies": "[{name: batch_schedule, batch_size: {0: 8}, lr: {0: 1}}]"}, "policies.0.batch_schedule.lr"),
    ({"policies": "[warp]"}, "unknown policy 'warp'; registered: batch_schedule"),
    ({"model": "resnet18", "policies": "[{name: batch_schedule, unit: epoch, batch_size: {2: 8}}]"},
     "policies.0: 'batch_schedule' acts on epochs; synthetic images have none: set epoch_size"),
    ({"policies": "[stellatrain]"}, "policies.0: 'stellatrain' sets the compression ratio; sync 'ring' cannot"),
    ({"sync": "[{name: compressed, compressor: qsgd}]", "policies": "[stellatrain]"}, "sync 'compressed' cannot"),
    ({"policies": "[{name: stellatrain, solver: warp}]"}, "unknown batch solver 'warp'; registered: nelder-mead"),
    ({"policies": "[{name: stellatrain, initial_ratio: 0}]"}, "policies.0.stellatrain.initial_ratio"),
    ({"speed": "'2:1'", "device": "auto"}, "speed: '2:1' with real compute needs device: cpu"),
    ({"sync": "[{name: compressed, compressor: topk, staleness: 1}]", "compute": "emulated"},
     "sync 'compressed': staleness needs compute: real"),
    ({"sync": "[{name: compressed, optimizer: {name: sgd}}]"}, "needs a sparse compressor"),
    ({"sync": "[{name: compressed, compressor: topk, optimizer: {name: sgd, lr: 1}}]"}, "lr is the job's lr"),
    ({"sync": "[{name: compressed, compressor: topk, optimizer: {name: lamb}}]"}, "unknown sparse optimizer 'lamb'"),
    ({"sync": "[{name: compressed, compressor: topk, staleness: 2}]"}, "sync.0.compressed.staleness"),
    ({"compute": "emulated", "speed": "fast"}, "speed"),
    ({"link.wan_mean": "100Mbit", "link.trace_index": "0"}, "both set the link's bandwidth over time; give one"),
    ({"link.wan_mean": "fast"}, "link.wan_mean"),
    ({"chrome_trace": "' '"}, "chrome_trace"),
])
def test_config_errors_name_the_key_and_value(monkeypatch, overrides, needle):
    from hpcbench import monitors
    from hpcbench.runtime.config import ConfigError
    from hpcbench.train.config import load_config

    monkeypatch.setitem(monitors.MONITORS, "probe", monitors.Monitor)
    with pytest.raises(ConfigError, match=needle.replace("[", "\\[")):
        load_config(str(ROOT / "jobs/configs/train-quick.yaml"), overrides)


def test_every_synchroniser_and_model_is_accepted_by_name():
    """The config's names are the registries' (no second list)."""
    from hpcbench.sync import names
    from hpcbench.train.config import load_config
    from hpcbench.train.workloads.models import MODELS

    cfg = load_config(None, {"sync": "[" + ", ".join(names()) + "]"})
    assert cfg.sync_labels() == names() and {"ring", "rabenseifner", "tree", "star", "binary_tree_star", "auto",
                                             "mpi", "horovod", "ddp", "compressed", "sma", "pair"} <= set(names())
    for m in MODELS:
        assert load_config(None, {"model": m}).model == m


def test_each_synchroniser_is_built_from_its_own_section():
    """``sync: [{name: sma, alpha: 0.5}, {name: compressed, compressor: {name: topk, ratio: 0.1}}]`` (and plain
    names): each entry's options reach its synchroniser and no other; --help lists every section's keys."""
    from mpi4py import MPI

    from hpcbench.sync import build
    from hpcbench.train.config import TrainConfig, load_config
    from hpcbench.runtime.config import keys_help

    cfg = load_config(None, {"sync": "[ring:priority, {name: sma, alpha: 0.5, algorithm: tree}, "
                                     "{name: compressed, compressor: {name: topk, ratio: 0.1}, label: topk10}, "
                                     "{name: compressed, compressor: qsgd}]"})
    assert [(label, sched) for label, _, sched in cfg.sync_entries()] == [
        ("ring:priority", "priority"), ("sma", "fifo"), ("topk10", "fifo"), ("compressed", "fifo")]
    syncs = [build(section, MPI.COMM_SELF, bucket_bytes=4096, seed=3) for section in cfg.sync]
    try:
        ring, sma, topk, qsgd = syncs
        assert sma.config.alpha == 0.5 and sma.config.algorithm == "tree" and ring.config.schedule == "priority"
        assert type(topk.compressor).__name__ == "TopKCompressor" and topk.compressor.ratio == 0.1
        assert type(qsgd.compressor).__name__ == "QSGDCompressor" and sma.bucket_bytes == 4096 and sma.seed == 3
    finally:
        for s in syncs:
            s.close()
    text = keys_help(TrainConfig)
    assert "sync entry {name: sma}" in text and "sync[].alpha (default 0.1)" in text
    assert "sync[].compressor.ratio (default None)" in text and "--sync (default ['ring'])" in text
    assert "policies entry {name: batch_schedule}:\n    policies[].unit (default 'step')" in text


_BOOM = """
import sys, time
from hpcbench.policies import POLICIES, Policy

class Boom(Policy):
    name, decides = "boom", frozenset({"batch_size"})

    def after_step(self, ctx, telemetry):
        if ctx.rank == ctx.world_size - 1 and ctx.step == 2:
            print(f"BOOM AT {time.time()!r}", file=sys.stderr, flush=True)
            raise ZeroDivisionError("a bug in the policy")

POLICIES.register("boom", Boom)
from hpcbench.train.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.mpi
@pytest.mark.parametrize("n", [3])
def test_a_policy_that_raises_ends_every_rank_sooner_than_the_job_reached_it_naming_the_policy(tmp_path, n):
    """The last rank's policy raises in after_step of step 2; the others wait in the next step's exchange: the
    lifecycle ends them all (exit 1), the message names the policy, the hook, the step and the rank. Promptness is
    a ratio measured in the same run: from the raise to the end takes less than from the launch to the raise."""
    out = tmp_path / "boom.h5"
    started = time.time()
    proc = run_mpi(n, ["-c", _BOOM, *QUICK, "--model", "digits_mlp", "--batch_size", "4", "--sync", "[ring]",
                       "--policies", "[boom]", "--output", str(out)], timeout=120)
    ended = time.time()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"policy 'boom' raised in after_step at step 2 on rank {n - 1}: ZeroDivisionError: a bug in the policy" \
        in proc.stderr
    raised = float(re.search(r"BOOM AT ([0-9.]+)", proc.stderr).group(1))
    assert ended - raised < raised - started, \
        f"{ended - raised:.1f} s from the raise to the end of every rank, {raised - started:.1f} s to the raise"


@pytest.mark.mpi
def test_sparse_optimizer_and_staleness_run_end_to_end_and_feed_the_tta_figure(tmp_path):
    """2:1 workers on real compute, the sparse optimizer with staleness 1 interleaved with plain top-k; the
    time-to-accuracy figure's curves are the steps' times summed, by hand."""
    sys.path.insert(0, str(ROOT / "analysis"))
    from plot_stellatrain_tta import accuracy_curves, main as plot_main, time_to

    out = tmp_path / "s.h5"
    proc = run_mpi(2, ["-m", "hpcbench.train", *QUICK, "--model", "digits_cnn", "--speed", "'2:1'",
                       "--warmup", "0", "--interleave_sync", "true", "--bucket_mb", "0.01",
                       "--sync", "[{name: compressed, compressor: topk, label: plain}, {name: compressed, compressor: "
                                 "topk, optimizer: {name: sgd, momentum: 0.9}, staleness: 1, label: stale}]",
                       "--output", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    curves = accuracy_curves(out)
    steps = read_table(out, "steps")
    for label in ("plain", "stale"):
        rows = steps["sync"].astype(str) == label
        t = np.cumsum(steps["step_s"][rows])
        np.testing.assert_allclose(curves[label]["time_s"], t[[1, 3]])       # 2 iterations of 2 steps
        assert curves[label]["steps"] == 4 and len(curves[label]["accuracy"]) == 2
        assert time_to(curves[label], 0.0) == curves[label]["time_s"][0] and time_to(curves[label], 1.1) == np.inf
    assert plot_main([str(out), "-o", str(tmp_path / "tta.png")]) == 0 and (tmp_path / "tta.png").stat().st_size


def test_interleaved_entries_take_turns_in_a_williams_design():
    """``interleave_sync``: warm-ups in the design's last round, then its rounds in turn; an entry that ends
    early drops out of the rounds; without interleaving each entry runs to its end."""
    from hpcbench.runtime.interleave import balanced_orders
    from hpcbench.train.job import TrainJob

    seen = []

    def entry(name, rounds):
        for k in range(rounds):
            seen.append(f"{name}{k}")
            yield k

    names = "ABCD"
    TrainJob._drive([entry(c, 5) for c in names], interleave=True)
    orders = balanced_orders(4)
    want = [f"{names[i]}{k}" for k, o in enumerate(orders[-1:] + orders) for i in o]
    assert seen == want
    seen.clear()
    TrainJob._drive([entry("A", 3), entry("B", 1)], interleave=True)
    assert seen == ["A0", "B0", "A1", "A2"]
    seen.clear()
    TrainJob._drive([entry("A", 2), entry("B", 2)], interleave=False)
    assert seen == ["A0", "A1", "B0", "B1"]


@pytest.mark.mpi
def test_interleaved_entries_are_compared_in_the_configured_order(tmp_path):
    """Three entries interleaved end in the design's last round (not the configured order); the closing
    table still lists them as configured, each over the first one's throughput."""
    out = tmp_path / "i.h5"
    proc = run_mpi(2, ["-m", "hpcbench.train", *QUICK, "--model", "digits_cnn", "--batch_size", "16",
                       "--interleave_sync", "true", "--sync", "[ring, sma, pair]", "--output", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = proc.stdout[proc.stdout.index("x first"):].splitlines()[1:4]
    assert [line.split()[0] for line in table] == ["ring", "sma", "pair"]
    assert table[0].split()[-1] == "1.000"
    it = read_table(out, "iterations")
    assert list(it["sync"].astype(str)) == ["ring", "sma", "pair", "sma", "pair", "ring"]   # rounds 0 1 2, 1 2 0
