"""The hierarchical allreduce against ring, binary_tree_star and MPI on emulated hosts, with a modelled link
between hosts; every result file kept.

    python scripts/hierarchical_hosts.py OUTDIR [--layouts 2x2,4x1] [--links 1Gbit,10Gbit]

Per layout (emulated hosts, :mod:`hpcbench.runtime.emulated_hosts`), two jobs:

* ``hpcbench.bench.costmodel --link-scope between_hosts``: measured time of
  ``hierarchical``, ``binary_tree_star`` and ``ring`` when every message
  between hosts takes the modelled time (messages inside a host: shared
  memory), against the two-level prediction
  (:func:`hpcbench.collectives.linkcost.predict_allreduce_hosts`), busbw per
  size, ``--dilation 4``;
* ``hpcbench collectives -a mpi,ring,binary_tree_star,hierarchical --link RATE
  --link-scope between_hosts`` per rate: the same algorithms beside MPI, whose
  messages are not modelled (its column is the real loopback).

The load average before and after each job goes to ``OUTDIR/loads.json``.
``--table`` prints the markdown table of docs/collectives.md from the kept
files of OUTDIR instead of running anything.

``--netem``: a measured, not modelled, link instead (root). Each of
``--netem-links`` (``none`` for an unshaped link) is a network of its own
for the 2x2 emulated hosts (:mod:`hpcbench.runtime.emulated_net`: a network
namespace per host, the link shaped by ``tc``, ``netem`` or ``tbf`` where
the kernel has no ``netem``), and ``hpcbench collectives -a
mpi,ring,binary_tree_star,hierarchical`` runs over it without any link
model: every algorithm, MPI too, crosses the same shaped interface. The
links take turns ``--repeats`` times; the 1-minute load is sampled every
2 s during each job. Writes ``OUTDIR/netem-LINK-rR.h5`` (and ``.txt``, the
printed output) per job and ``OUTDIR/hierarchical-netem.json``: provenance
(commit of the files, host, CPU, cores, load, command, dates, the shaper),
and per link, size and algorithm the median over repeats of the busbw and
time, each job's bytes on the link, and for the three hpcbench algorithms
the two-level prediction (:func:`~hpcbench.collectives.linkcost.predict_allreduce_hosts`:
the intra-host link free, the inter-host link at the shaped rate with
``--alpha`` latency; the host's card shared by its ranks, as the model
prices it) and measured/predicted; for ``hierarchical`` also the
prediction with a link per rank (the model before the card was shared,
``predicted_link_per_rank_s``). Prints the markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

from hpcbench.runtime import launch

LAYOUTS = {"2x2": (2, 2), "4x1": (1, 1, 1, 1)}
ALGS = "hierarchical,binary_tree_star,ring"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir")
    p.add_argument("--layouts", default="2x2,4x1")
    p.add_argument("--links", default="1Gbit,10Gbit")
    p.add_argument("--sizes-mb", default="0.25,1,4")
    p.add_argument("--table", action="store_true", help="print the table from OUTDIR's files and exit")
    p.add_argument("--netem", action="store_true", help="a tc-shaped link between the hosts instead of a model")
    p.add_argument("--netem-links", default="none,1gbit,10gbit", help="--netem: rates (none: not shaped)")
    p.add_argument("--netem-sizes", default="64K:16M", help="--netem: smallest:largest size, x4 between")
    p.add_argument("--repeats", type=int, default=2, help="--netem: turns of the links")
    p.add_argument("--alpha", type=float, default=5e-5, help="--netem: the model's inter-host latency, s")
    a = p.parse_args(argv)
    out = Path(a.outdir)
    if a.netem:
        return measure_netem(out, a, " ".join(["python", "scripts/hierarchical_hosts.py", *(argv or sys.argv[1:])]))
    if a.table:
        print(table(out, a.layouts.split(","), a.links.split(",")))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    loads = []
    for name in a.layouts.split(","):
        hosts = LAYOUTS[name]
        jobs = [(f"costmodel-{name}", ["-m", "hpcbench.bench.costmodel", "--links", a.links, "--alphas", "5e-5",
                                       "--sizes-mb", a.sizes_mb, "--algorithms", ALGS, "--link-scope",
                                       "between_hosts", "--dilation", "4", "--reps", "5",
                                       "--output", str(out / f"costmodel-{name}.h5")])]
        for rate in a.links.split(","):
            jobs.append((f"collectives-{name}-{rate}",
                         ["-m", "hpcbench.bench.collectives", "-a", "mpi,ring,binary_tree_star,hierarchical",
                          "-b", "256K", "-e", "4M", "-f", "4", "--link", rate, "--link-alpha", "5e-5",
                          "--link-scope", "between_hosts", "--rounds", "3",
                          "--output", str(out / f"collectives-{name}-{rate}.h5")]))
        for tag, args in jobs:
            before = os.getloadavg()
            t0 = time.time()
            proc = launch.run_mpi(sum(hosts), args, timeout=900, hosts=hosts)
            (out / f"{tag}.txt").write_text(proc.stdout + proc.stderr)
            loads.append({"job": tag, "hosts": list(hosts), "rc": proc.returncode, "load_before": before,
                          "load_after": os.getloadavg(), "wall_s": time.time() - t0,
                          "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0))})
            print(json.dumps(loads[-1]), flush=True)
    (out / "loads.json").write_text(json.dumps({"cores": os.cpu_count(), "jobs": loads}, indent=1))
    return 0


def table(out: Path, layouts, links) -> str:
    """Markdown rows: per layout, link and size, each algorithm's busbw (GB/s) and measured/predicted time of
    the costmodel job, and the collectives job's busbw of MPI (unmodelled) and of the three algorithms."""
    from hpcbench.collectives.linkmodel import parse_rate
    from hpcbench.results import read_table

    algs = ALGS.split(",")
    head = ("| hosts | link | size | " + " | ".join(f"{a} busbw GB/s (meas./pred. ms)" for a in algs)
            + " | sweep busbw GB/s: mpi (not modelled) / " + " / ".join(algs) + " |")
    lines = [head, "|" + "---|" * (4 + len(algs)) ]
    for name in layouts:
        cm = read_table(out / f"costmodel-{name}.h5", "results")
        for rate in links:
            bps = parse_rate(rate)
            sweep = read_table(out / f"collectives-{name}-{rate}.h5", "results")
            for size in sorted(set(int(x) for x in cm["size"])):
                cells = []
                for alg in algs:
                    i = [k for k in range(len(cm["size"])) if cm["size"][k] == size and cm["algorithm"][k] == alg
                         and cm["link"][k] == bps][0]
                    cells.append(f"{cm['busbw'][i] / 1e9:.3f} ({cm['measured'][i] * 1e3:.1f}/"
                                 f"{cm['predicted'][i] * 1e3:.1f})")
                near = min(set(int(x) for x in sweep["size"]), key=lambda b: abs(b - size))
                bw = {str(sweep["impl"][k]): sweep["busbw"][k] for k in range(len(sweep["size"]))
                      if sweep["size"][k] == near}
                sw = " / ".join(f"{bw.get(x, float('nan')):.3f}" for x in ["mpi", *algs])
                lines.append(f"| {name} | {rate} | {size / 1e6:g} MB | " + " | ".join(cells)
                             + f" | {sw} ({near >> 10} KiB) |")
    return "\n".join(lines)


NETEM_ALGS = ("mpi", "ring", "binary_tree_star", "hierarchical")


def _sampled_load(stop: threading.Event, samples: list) -> None:
    while not stop.wait(2.0):
        samples.append(os.getloadavg()[0])


def measure_netem(out: Path, a, command: str) -> int:
    """``--netem``: the sweep over each shaped link at 2x2 emulated hosts, the JSON extract and its table."""
    from hpcbench.reproduce.machine import describe_machine
    from hpcbench.results import read_attrs, read_table
    from hpcbench.runtime.emulated_hosts import host_names
    from hpcbench.runtime.emulated_net import EmulatedNetwork, parse_link

    hosts = (2, 2)
    links = [x.strip() for x in a.netem_links.split(",") if x.strip()]
    try:                                                                  # bad input: before any job
        specs = {x: parse_link("" if x == "none" else f"rate={x}") for x in links}
        lo, hi = a.netem_sizes.split(":")
        if not links or a.repeats < 1:
            raise ValueError("--netem-links: give at least one link, and --repeats >= 1")
    except ValueError as exc:
        print(f"hierarchical_hosts: --netem: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    jobs, shaper = [], {}
    for rep in range(a.repeats):
        for name in links if rep % 2 == 0 else links[::-1]:
            h5 = out / f"netem-{name}-r{rep}.h5"
            args = ["-m", "hpcbench.bench.collectives", "-a", ",".join(NETEM_ALGS), "-b", lo, "-e", hi, "-f", "4",
                    "--rounds", "3", "--output", str(h5)]
            samples, stop = [os.getloadavg()[0]], threading.Event()
            sampler = threading.Thread(target=_sampled_load, args=(stop, samples), daemon=True)
            t0 = time.time()
            with EmulatedNetwork(host_names(len(hosts)), specs[name]) as net:
                shaper[name] = net.shaper
                before = net.counters()
                sampler.start()
                try:
                    proc = launch.run_mpi(sum(hosts), args, timeout=900, hosts=hosts, env=net.env())
                finally:
                    stop.set()
                    sampler.join()
                after = net.counters()
            h5.with_suffix(".txt").write_text(proc.stdout + proc.stderr)
            jobs.append({"link": name, "repeat": rep, "rc": proc.returncode, "file": h5.name,
                         "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "wall_s": time.time() - t0,
                         "load_1min": [min(samples), max(samples), statistics.fmean(samples)],
                         "link_bytes_sent": {h: after[h]["tx_bytes"] - before[h]["tx_bytes"] for h in after}})
            print(json.dumps(jobs[-1]), flush=True)
            if proc.returncode != 0:
                print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
                return 1
    rows = _netem_rows(out, jobs, specs, hosts, a.alpha, read_table)
    commits = sorted({str(read_attrs(out / j["file"]).get("git_commit", "")) for j in jobs})
    loads = [x for j in jobs for x in j["load_1min"][:2]]
    machine = describe_machine()
    extract = {
        "name": "hierarchical-netem",
        "provenance": {
            "commit": commits[0] if len(commits) == 1 else commits, "host": platform.node(), "cpu": machine["cpu"],
            "cores": machine["logical_cores"],
            "load": f"1-minute load average {min(loads):.1f}-{max(loads):.1f}, sampled every 2 s during the jobs",
            "command": command, "date": f"{jobs[0]['start']} to {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
            "timing": True, "versions": {k: machine["versions"].get(k, "") for k in ("numpy", "torch", "mpi4py")},
            "mpi_library": machine["mpi_library"], "hosts": "2x2 emulated hosts, network namespaces on one machine",
            "links": {n: {"spec": specs[n].describe(), "shaper": shaper[n]} for n in links},
            "model": f"predict_allreduce_hosts, intra-host link free, inter-host alpha {a.alpha:g} s and "
                     f"beta 8/rate s/B",
        },
        "jobs": jobs,
        "rows": rows,
    }
    path = out / "hierarchical-netem.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(extract, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    print(netem_table(extract))
    print(f"# {path}")
    return 0


def _netem_rows(out: Path, jobs: list, specs: dict, hosts, alpha: float, read_table) -> list:
    """Per link, size and algorithm: the medians over the repeats, and the prediction where the link has a rate."""
    from hpcbench.collectives.cost import link_beta
    from hpcbench.collectives.linkcost import HostLinks, predict_allreduce_hosts

    readings: dict = {}
    for job in jobs:
        t = read_table(out / job["file"], "results")
        for k in range(len(t["size"])):
            key = (job["link"], int(t["size"][k]), str(t["impl"][k]))
            readings.setdefault(key, []).append((float(t["busbw"][k]), float(t["time"][k]) * 1e-6,
                                                 float(t["p50"][k]) * 1e-6, int(t["wrong"][k])))
    rows = []
    for (link, size, alg), vals in sorted(readings.items(), key=lambda kv: (list(specs).index(kv[0][0]),) + kv[0][1:]):
        row = {"link": link, "size": size, "algorithm": alg, "repeats": len(vals),
               "busbw_GBps": statistics.median(v[0] for v in vals), "time_s": statistics.median(v[1] for v in vals),
               "p50_s": statistics.median(v[2] for v in vals), "wrong": max(v[3] for v in vals)}
        rate = specs[link].rate_bps
        if rate is not None and alg != "mpi":
            links = HostLinks(hosts, 0.0, 0.0, alpha, link_beta(rate))
            row["predicted_s"] = predict_allreduce_hosts(alg, size, links)
            row["measured_over_predicted"] = row["time_s"] / row["predicted_s"]
            if alg == "hierarchical":
                # the model prices the host's card shared by its shard owners; beside it, the model before
                # that (a link per rank), as the first sweep (docs/measured/hierarchical-netem.json) compared
                from hpcbench.collectives.algorithms.hierarchical import hierarchical_levels_cost
                row["predicted_link_per_rank_s"] = float(hierarchical_levels_cost(
                    size, tuple(hosts), 0.0, 0.0, alpha, link_beta(rate), shared_card=False))
        rows.append(row)
    return rows


def netem_table(extract: dict) -> str:
    """Markdown: per link and size, each algorithm's busbw (GB/s) and, for hpcbench's, measured/predicted."""
    by = {(r["link"], r["size"], r["algorithm"]): r for r in extract["rows"]}
    keys = sorted({(r["link"], r["size"]) for r in extract["rows"]},
                  key=lambda k: (list(extract["provenance"]["links"]).index(k[0]), k[1]))
    head = "| link | size | " + " | ".join(f"{x} busbw GB/s" for x in NETEM_ALGS) + " |"
    lines = [head, "|" + "---|" * (2 + len(NETEM_ALGS))]
    for link, size in keys:
        cells = []
        for alg in NETEM_ALGS:
            r = by.get((link, size, alg))
            ratio = "" if r is None or "predicted_s" not in r else (
                f" ({r['time_s'] * 1e3:.2f}/{r['predicted_s'] * 1e3:.2f} ms, x{r['measured_over_predicted']:.1f}"
                + (f"; link per rank {r['predicted_link_per_rank_s'] * 1e3:.2f} ms"
                   if "predicted_link_per_rank_s" in r else "") + ")")
            cells.append("n/a" if r is None else f"{r['busbw_GBps']:.3f}{ratio}")
        lines.append(f"| {link} | {size >> 10} KiB | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
