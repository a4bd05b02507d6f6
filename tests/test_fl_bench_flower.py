"""Process-tree memory (hpcbench.bench.process_memory) and the Flower comparison's inputs (flower_compare)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from hpcbench.bench.flower_compare import ranks_only, resolve_python
from hpcbench.bench.peers import check_job
from hpcbench.bench.process_memory import TreeMemory, TreeSampler, descendants, tree_memory
from hpcbench.fl.config import FLConfig
from hpcbench.runtime.errors import InputError

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs Linux /proc")

_HOLD = """
import subprocess, sys, time
import numpy as np
mb, grandchild = int(sys.argv[1]), int(sys.argv[2])
if grandchild:  # a child holding grandchild MB, started first
    child = subprocess.Popen([sys.executable, "-c", sys.argv[3], sys.argv[2], "0"], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
held = np.ones(mb << 17)  # mb MiB of float64, written so resident
print("ready", flush=True)
time.sleep(60)
"""


def test_tree_memory_counts_descendants():
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, "50", "150", _HOLD], stdout=subprocess.PIPE, text=True)
    tree = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        tree = descendants(proc.pid)
        assert len(tree) == 2 and tree[0] == proc.pid
        mem = tree_memory(proc.pid)
        assert mem.processes == 2
        assert mem.rss_bytes >= 200 << 20      # 50 + 150 MiB written by the two processes
        assert 200 << 20 <= mem.pss_bytes <= mem.rss_bytes
        assert sum(v[2] for v in mem.by_name.values()) == 2
        assert sum(v[0] for v in mem.by_name.values()) == mem.rss_bytes
        alone = tree_memory(tree[1])
        assert alone.processes == 1 and 150 << 20 <= alone.rss_bytes < mem.rss_bytes
        with TreeSampler(proc.pid, interval_s=0.05) as sampler:
            deadline = time.monotonic() + 30.0  # a loaded machine may take long over one pass
            while len(sampler.samples) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
        peak = sampler.peak()
        assert len(sampler.samples) >= 2 and peak.pss_bytes >= 200 << 20
        with pytest.raises(ValueError):
            sampler.peak(start=time.time() + 100)
    finally:
        for pid in reversed(tree[1:]):  # the grandchild this test started, then the child
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        proc.kill()
        proc.wait()


def test_ranks_only_leaves_out_the_launcher():
    mem = TreeMemory(600, 300, 3, {"mpiexec": (100, 50, 1), "hydra_pmi_proxy": (100, 50, 1), "python": (400, 200, 1)})
    assert ranks_only(mem) == (400, 200)


def test_peers_check_the_job_config():
    ok = FLConfig.model_validate({"dataset": {"num_clients": 100, "samples_per_client": 20}}).model_dump()
    check_job(ok, "--flower")
    cnn = FLConfig.model_validate({"dataset": {"name": "fashion_mnist", "samples_per_client": None},
                                   "model": {"name": "cnn"}}).model_dump()
    check_job(cnn, "--pfl")
    for change, key in (({"aggregator": {"name": "fedyogi"}}, "aggregator.name"), ({"momentum": 0.5}, "momentum"),
                        ({"decay_factor": 0.9}, "decay_factor"),
                        ({"aggregator": {"name": "fedavg", "server_learning_rate": 2.0}},
                         "aggregator.server_learning_rate"),
                        ({"uplink_compression": {"name": "topk", "ratio": 0.01}}, "uplink_compression"),
                        ({"model": {"name": "mobilenet_v2"},
                          "dataset": {"name": "fashion_mnist", "samples_per_client": None}}, "model.name")):
        bad = FLConfig.model_validate({"dataset": {"num_clients": 100, "samples_per_client": 20}, **change})
        with pytest.raises(InputError, match=f"--pfl: .*{key}"):
            check_job(bad.model_dump(), "--pfl")


def test_resolve_python(tmp_path):
    import importlib.util

    assert resolve_python("none") is None
    if all(importlib.util.find_spec(m) is not None for m in ("flwr", "ray")):
        assert resolve_python(sys.executable) == sys.executable
    else:  # checked before any launch (issue 35 part 4): a Python without Flower is refused at once
        with pytest.raises(InputError, match="--flower: .* cannot import flwr and ray"):
            resolve_python(sys.executable)
    with pytest.raises(InputError, match="--flower: '/bin/false' cannot import flwr and ray \\(exit 1"):
        resolve_python("/bin/false")
    auto = resolve_python("auto")
    assert auto in (None, sys.executable)
    with pytest.raises(InputError, match="--flower"):
        resolve_python(str(tmp_path / "no-python"))
