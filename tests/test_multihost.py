"""Jobs on 2 and 4 emulated hosts, and 3+1 (``tests/hosttools.py``): every node-aware path as a cluster runs it.

Skipped, with the reason, where UTS/mount namespaces are not permitted (not
root, a container without them). Launches are few and small: each costs
seconds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest

from hosttools import run_on_hosts
from hpcbench.results import read_attrs, read_table
from mpitools import run_mpi, wait_unlocked

pytestmark = pytest.mark.mpi

LAYOUTS = {"2x2": (2, 2), "3+1": (3, 1), "4x1": (1, 1, 1, 1)}


def _ok(proc):
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


def _hostnames(path) -> list[str]:
    return read_attrs(path)["hostnames"].split(",")


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_node_aware_paths_at_any_layout(layout):
    """tests/mpi/test_host_groups.py on the hosts: grouping, node-local rank, provenance, binary_tree_star and
    hierarchical bits, and the bytes the hierarchical allreduce sends across hosts."""
    hosts = LAYOUTS[layout]
    proc = run_on_hosts(hosts, ["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/mpi/test_host_groups.py"],
                        timeout=420)
    _ok(proc)
    assert proc.stdout.count(" passed") == sum(hosts)


def test_stellatrain_controller_on_two_hosts():
    """tests/mpi/test_train_stellatrain.py at 2x2: telemetry metered on every rank of both hosts, the controller's
    batch and ratio decisions in force on every rank before the same step, the Chrome trace valid."""
    proc = run_on_hosts((2, 2), ["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                 "tests/mpi/test_train_stellatrain.py"], timeout=420)
    _ok(proc)
    assert proc.stdout.count(" passed") == 4 and " failed" not in proc.stdout


def test_collectives_benchmark_on_two_hosts_lists_both_and_checks_every_algorithm(tmp_path):
    out = tmp_path / "c.h5"
    proc = run_on_hosts((2, 2), ["-m", "hpcbench.collectives.bench", "-a", "mpi,ring,binary_tree_star,hierarchical",
                                 "-b", "1K", "-e", "1M", "-f", "32", "-n", "5", "-w", "1", "--rounds", "1",
                                 "--output", str(out)], timeout=300)
    _ok(proc)
    assert "ranks=4 hosts=2 " in proc.stdout and "# Check: OK (0 wrong elements)" in proc.stdout
    assert _hostnames(out) == ["node0", "node0", "node1", "node1"]
    assert read_attrs(out)["unique_hosts"] == 2
    # both emulated hosts share this machine's cores: judged together
    over = read_attrs(out)["oversubscribed"]
    assert over == ("node0+node1: 4 ranks on %d cores" % os.cpu_count() if os.cpu_count() < 4 else ""), over
    rows = read_table(out, "results")
    assert {"hierarchical", "binary_tree_star", "ring", "mpi"} <= set(rows["impl"])


def test_link_model_between_hosts_charges_only_messages_across(tmp_path):
    """costmodel --link-scope between_hosts at 2x2, 1 Gbit/s: 4 MB takes at least the modelled inter-host
    time of each algorithm (the two-level prediction is a lower bound: the intra-host part is taken as free).
    The host's ranks share its modelled link: hierarchical's two owners per host cross at once, so its
    inter-host phase takes at least 2 (ranks per host) x what one owner's messages take on a link of its own."""
    out = tmp_path / "cm.h5"
    proc = run_on_hosts((2, 2), ["-m", "hpcbench.bench.costmodel", "--links", "100Mbit", "--alphas", "0",
                                 "--sizes-mb", "4", "--algorithms", "hierarchical,ring", "--link-scope",
                                 "between_hosts", "--reps", "1", "--gamma", "0", "--output", str(out)], timeout=300)
    _ok(proc)
    rows = read_table(out, "results")
    assert list(rows["hosts"]) == ["2+2", "2+2"] and set(rows["scope"]) == {"between_hosts"}
    pred = dict(zip(rows["algorithm"], rows["predicted"]))
    one_link = 2 * 0.5 * 2e6 * 80e-9                # 2 x (G-1)/G x m/L at 80 ns/B: one owner alone on a card
    assert pred["hierarchical"] == pytest.approx(2 * one_link)       # L = 2 owners share the card
    assert pred["ring"] == pytest.approx(2 * 3 / 4 * 4e6 * 80e-9, rel=0.01)
    assert np.all(rows["measured"] >= 0.95 * rows["predicted"])
    measured = dict(zip(rows["algorithm"], rows["measured"]))
    assert measured["hierarchical"] >= 0.95 * 2 * one_link


@pytest.mark.parametrize("layout", ["2x2", "3+1"])
def test_link_model_between_hosts_serialises_a_hosts_senders(layout):
    """Every rank of the first host sends 1 MB across at once over the modelled 100 Mbit/s link: the host's
    card sends them one after the other, so the modelled completions (stamps, not wall times) lie at least
    one transfer apart and the last is at least (senders) x one transfer after the first one's start."""
    proc = run_on_hosts(LAYOUTS[layout], [str(Path(__file__).parent / "cardprobe.py"), str(10 ** 6)], timeout=240)
    _ok(proc)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("CARDPROBE ")]
    assert len(lines) == 1, proc.stdout
    rows = json.loads(lines[0].split(" ", 1)[1])
    assert len(rows) == LAYOUTS[layout][0]
    tx = rows[0]["tx"]
    done = sorted(r["ready_at"] for r in rows)
    assert all(b - a >= tx * (1 - 1e-9) for a, b in zip(done, done[1:])), (done, tx)
    assert done[-1] - (done[0] - tx) >= len(rows) * tx * (1 - 1e-9)


# ------------------------------------------------------------------ FL: executors per node, same bits
FL = ["-m", "hpcbench.fl", "jobs/configs/digits.yaml", "--rounds", "4", "--eval_interval", "2", "--progress",
      "false", "--executor_concurrency", "1"]


@pytest.fixture(scope="module")
def fl_one_host(tmp_path_factory):
    out = tmp_path_factory.mktemp("fl1") / "fl.h5"
    proc = run_mpi(4, [*FL, "--output", str(out)], timeout=300)
    _ok(proc)
    return out


@pytest.mark.parametrize("layout", ["2x2", "3+1", "4x1"])
def test_fl_executors_per_node_and_bits_of_one_host(layout, fl_one_host, tmp_path):
    """One executor per node per round (executor_concurrency 1), in rotation on each node; the model's bits
    are those of the one-host run at the same -np."""
    hosts = LAYOUTS[layout]
    out = tmp_path / "fl.h5"
    proc = run_on_hosts(hosts, [*FL, "--output", str(out)], timeout=300)
    _ok(proc)
    with h5py.File(out, "r") as h5, h5py.File(fl_one_host, "r") as h0:
        assert h5["model/final_parameters"][()].tobytes() == h0["model/final_parameters"][()].tobytes()
    clients = read_table(out, "clients")
    trained = clients["executor_rank"] >= 0
    per_round = [sorted(set(clients["executor_rank"][trained & (clients["round"] == r)])) for r in range(1, 5)]
    # rank 0 aggregates; executors: 2x2 -> node0 [1], node1 [2, 3]; 3+1 -> node0 [1, 2], node1 [3];
    # 4x1 -> node0 none, node1..node3 one each
    want = {"2x2": [[1, 2], [1, 3], [1, 2], [1, 3]], "3+1": [[1, 3], [2, 3], [1, 3], [2, 3]],
            "4x1": [[1, 2, 3]] * 4}[layout]
    assert per_round == want
    assert _hostnames(out) == [f"node{i}" for i, k in enumerate(hosts) for _ in range(k)]


def test_a_rank_raising_on_the_second_host_ends_every_rank(tmp_path):
    """Rank 3 (on node1) raises at its second step of a long sweep: every rank on both hosts ends within
    seconds (the lifecycle's failure notice, then MPI_Abort across hosts; the launch's 120 s limit is a hang
    guard, not a speed check), the file is failed, naming the rank.

    A rank that vanishes: the next test."""
    out = tmp_path / "c.h5"
    proc = run_on_hosts((2, 2), ["-m", "hpcbench.collectives.bench", "-a", "mpi,ring,hierarchical", "-b", "1K",
                                 "-e", "64M", "-f", "2", "-n", "50", "--fault-inject", "3:2:raise",
                                 "--output", str(out)], timeout=120)     # the hang guard: a job left waiting fails
    assert proc.returncode == 1, proc.stdout + proc.stderr
    wait_unlocked(out)
    attrs = read_attrs(out)
    assert attrs["status"] == "failed" and attrs["error"].startswith("rank 3"), dict(attrs)


@pytest.mark.parametrize("rank", [3, 0, 1])
def test_a_rank_vanishing_on_any_host_ends_every_rank(tmp_path, rank):
    """Rank ``rank`` leaves with ``os._exit(1)`` (``--fault-inject R:2:exit``: no handler runs, as after SIGKILL)
    at 2x2. MPICH 5.0.2's Hydra alone then fails to signal the other host's proxy ("unable to write data to
    proxy") and the survivors wait for ever; hpcbench's watch (``hpcbench.runtime.peerwatch``) ends every rank
    within seconds. Rank 3 (the other host): rank 0 marks the file failed naming the rank. Rank 1 (rank 0's host):
    Hydra's proxy there also kills rank 0, so the file is failed or, when the kill came first, "running" with a
    stale heartbeat. Rank 0 itself: the others stop, and its file stays "running" (nothing ran there to mark it)."""
    out = tmp_path / "c.h5"
    proc = run_on_hosts((2, 2), ["-m", "hpcbench.collectives.bench", "-a", "mpi,ring,hierarchical", "-b", "1K",
                                 "-e", "64M", "-f", "2", "-n", "50", "--fault-inject", f"{rank}:2:exit",
                                 "--output", str(out)], timeout=120)     # the hang guard: without the watch it fails
    assert proc.returncode != 0, proc.stdout + proc.stderr
    wait_unlocked(out)
    attrs = read_attrs(out)
    if rank == 0:       # nothing ran on rank 0 to mark it: "running", its heartbeat going stale (results.status)
        assert "stopped: rank 0 vanished" in proc.stderr, proc.stderr
        assert attrs["status"] == "running", dict(attrs)
        return
    if rank == 1:       # rank 0's own host: its proxy kills rank 0 too, before or after the watch marks the file
        assert attrs["status"] in ("failed", "running"), dict(attrs)
        assert attrs["status"] == "running" or attrs["error"].startswith(("rank 1: vanished", "Terminated")), \
            dict(attrs)
        return
    assert attrs["status"] == "failed" and attrs["error"].startswith(f"rank {rank}: vanished"), dict(attrs)


# ------------------------------------------------------------------ training and pipeline runners
def test_training_resizes_across_hosts(tmp_path):
    """The elastic trainer at 2x2: 4 workers, then 1 (node0 only), then 3 (node1 joining again)."""
    out = tmp_path / "t.h5"
    proc = run_on_hosts((2, 2), ["-m", "hpcbench.train", "jobs/configs/train-quick.yaml", "--warmup", "1",
                                 "--iterations", "4", "--batches_per_iter", "2", "--progress", "false",
                                 "--model", "digits_mlp", "--batch_size", "8", "--sync", "[ring]",
                                 "--elastic", "{schedule: '0:4, 2:1, 3:3'}", "--output", str(out)], timeout=300)
    _ok(proc)
    assert read_attrs(out)["unique_hosts"] == 2
    resizes = read_table(out, "resizes")
    assert [(int(o), int(n), str(k)) for o, n, k in zip(resizes["old"], resizes["new"], resizes["kind"])] == \
        [(4, 1, "shrink"), (1, 3, "grow")]
    assert {1, 3, 4} <= {int(w) for w in read_table(out, "steps")["workers"]}


def test_interference_on_two_hosts_takes_the_two_level_models_choice(tmp_path):
    """Training at 2x2 over a 10 Mbit/s link modelled between hosts only (``link.scope: between_hosts``), the ring,
    rank 1's link 4x slower from step 2: every worker's throughput falls, and the interference policy switches
    to the algorithm the two-level model prices fastest for the step's gradient on hosts 2+2 (free inside a
    host, the slow link between): the hierarchical allreduce, which sends m/2 per rank across hosts against the
    ring's 3m/2."""
    from hpcbench.collectives.algorithms import find, names
    from hpcbench.collectives.linkcost import HostLinks, fastest_allreduce_hosts

    out, slow_from, factor = tmp_path / "t.h5", 2, 4.0
    proc = run_on_hosts((2, 2), ["-m", "hpcbench.train", "--model", "digits_mlp", "--warmup", "1", "--iterations",
                                 "2", "--batches_per_iter", "2", "--batch_size", "8", "--progress", "false",
                                 "--profile_steps", "1", "--sync", "[ring]", "--link.kind", "model",
                                 "--link.latency_s", "0", "--link.bandwidth", "10Mbit", "--link.scope",
                                 "between_hosts", "--link.slow", f"[{{rank: 1, from_step: {slow_from}, factor: 4}}]",
                                 "--policies", "[interference]", "--output", str(out)], timeout=300)
    _ok(proc)
    attrs = read_attrs(out)
    assert "between hosts only" in attrs["link_model"] and int(attrs["buckets"]) == 1
    algs = [a for a in names() if find(a).cost is not None]
    want, _ = fastest_allreduce_hosts(algs, [int(attrs["gradient_bytes"])],
                                      HostLinks((2, 2), 0.0, 0.0, 0.0, factor * 8 / 10e6))
    d = read_table(out, "decisions")
    assert list(d["policy"]) == ["interference"] and list(d["algorithm"]) == [want] and want == "hierarchical"
    assert int(d["decided_step"][0]) >= slow_from and "two-level model, hosts 2+2" in d["reason"][0]


def test_train_summary_predicts_with_the_two_level_model(tmp_path):
    """At 2x2 with the link modelled between hosts only, the summary's predicted communication of the
    hierarchical allreduce is the two-level model's (inside a host free, the host's card shared), not the
    one-level model's, which would price every message on the slow link."""
    from hpcbench.collectives.cost import link_beta, predict_allreduce
    from hpcbench.collectives.linkcost import HostLinks, predict_allreduce_hosts

    out = tmp_path / "t.h5"
    proc = run_on_hosts((2, 2), ["-m", "hpcbench.train", "--model", "digits_mlp", "--warmup", "1", "--iterations",
                                 "1", "--batches_per_iter", "2", "--batch_size", "8", "--progress", "false",
                                 "--profile_steps", "1", "--sync", "[hierarchical]", "--link.kind", "model",
                                 "--link.latency_s", "0", "--link.bandwidth", "10Mbit", "--link.scope",
                                 "between_hosts", "--output", str(out)], timeout=300)
    _ok(proc)
    m = int(read_attrs(out)["gradient_bytes"])
    two = predict_allreduce_hosts("hierarchical", m, HostLinks((2, 2), 0.0, 0.0, 0.0, link_beta(10e6)))
    one = predict_allreduce("hierarchical", m, 4, 0.0, link_beta(10e6), local_size=2)
    got = float(read_table(out, "summary")["predicted_comm_s"][0])
    assert got == pytest.approx(two, rel=1e-9) and abs(one - two) > 0.2 * two, (got, two, one)


def test_pipeline_on_two_hosts(tmp_path):
    out = tmp_path / "p.h5"
    proc = run_on_hosts((2, 2), ["-m", "hpcbench.pipeline", "jobs/configs/pipeline-quick.yaml", "--model.layers", "5",
                                 "--model.hidden", "16", "--model.heads", "2", "--model.seq_len", "8",
                                 "--batch_size", "8", "--micro_batches", "4", "--iterations", "2", "--warmup", "1",
                                 "--output", str(out)], timeout=300)
    _ok(proc)
    assert _hostnames(out) == ["node0", "node0", "node1", "node1"]
    assert read_attrs(out)["status"] == "completed"
