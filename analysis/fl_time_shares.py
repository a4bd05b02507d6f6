"""Where a federated round's virtual time goes, and what compression saves: compute, download, upload.

Usage::

    python analysis/fl_time_shares.py results/fl/topk-*.h5 results/fl/none-*.h5

For each hpcbench federated result file (synchronous mode) it rebuilds the
job's traces and model from the config stored in the file and redraws every
round's client times exactly as the virtual clock drew them (the same seeded
generator, :meth:`hpcbench.fl.clock.VirtualClock.client_times`), which splits
the recorded ``communication_s`` into download and upload; the redrawn sums
are checked against the recorded ``compute_s`` and ``communication_s``.

Per file it prints: rounds and virtual seconds to the target; the mean round
duration; the shares of compute, download and upload in the completion time
of the client that ended each round (the ``participants``-th finisher),
averaged over rounds; wire bytes per aggregated client each way; and the
mean number of rounds between two aggregations of the same client (how stale
an error-feedback residual is when it is finally sent). Runs whose configs
differ only in ``seed`` and ``output`` are then grouped, with the mean time
to target over the seeds and its ratio to the group with no compression in
either direction (> 1: slower than uncompressed). Runs in one process,
without ``mpiexec``: ``--help`` never imports MPI; analysing a file builds
the job's set-up (:func:`hpcbench.fl.job.prepare`), whose import initialises
MPI as a singleton process.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hpcbench.results import read_attrs, read_table  # noqa: E402


_DIRECTIONS = ("uplink_compression", "downlink_compression")


def _group_key(config: dict) -> str:
    """The config without the keys that differ between seeds of one job (JSON, sorted keys).

    A direction compressed by ``none`` keeps only its name: its other keys
    (ratio, error feedback) have no effect.
    """
    rest = {k: v for k, v in config.items() if k not in ("seed", "output", "progress", "job_name")}
    for d in _DIRECTIONS:  # files of versions before compression was recorded have neither key
        if (rest.get(d) or {"name": "none"})["name"] == "none":
            rest[d] = {"name": "none"}
    return json.dumps(rest, sort_keys=True)


def _label(config: dict) -> str:
    up, down = (config.get(d) or {"name": "none"} for d in _DIRECTIONS)
    parts = [f"up {up['name']}" + (f" {up['ratio']:g}" if up.get("ratio") else "")
             + (" EF" if up["name"] != "none" and up.get("error_feedback") else ""),
             f"down {down['name']}", f"compute {config['traces'].get('compute_cost', 'trace')}",
             f"bw {config['traces']['bandwidth']['format']}", f"avail {config['traces']['availability']['format']}"]
    return ", ".join(parts)


def analyse(path: Path) -> dict:
    """Time shares, bytes and residual staleness of one run (see the module docstring).

    Parameters
    ----------
    path : pathlib.Path
        An hpcbench federated result file (``.h5``) of a synchronous run.

    Returns
    -------
    dict
        ``path`` (pathlib.Path) and ``config`` (dict) of the run; ``seed``
        (int); ``rta`` (int, rounds to the target accuracy, -1 if not
        recorded); ``tta_s`` (float, virtual seconds to the target, NaN if not
        recorded); ``mean_round_s`` (float, mean round duration, virtual
        seconds); ``compute``, ``download``, ``upload`` (float, shares in
        [0, 1] of the round-ending client's completion time, averaged over
        rounds, NaN if no round aggregated a client); ``down_bytes``,
        ``up_bytes`` (int, wire bytes per aggregated client each way);
        ``model_bytes`` (int); ``compute_scale`` (float, the clock's compute
        multiplier); ``gap_rounds`` (float, mean rounds between two
        aggregations of one client, NaN if no client was aggregated twice).

    Raises
    ------
    ValueError
        A missing file, not a synchronous federated result file, or the redrawn times differ
        from the recorded ones (the file was written by another version of
        the clock).
    OSError, KeyError
        The file cannot be read or lacks a table or attribute.
    """
    from hpcbench.fl.config import FLConfig
    from hpcbench.fl.setup import prepare

    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    attrs = read_attrs(path)
    if attrs.get("kind") != "fl":
        raise ValueError(f"{path}: kind {attrs.get('kind')!r}, expected 'fl'")
    config = attrs["config"]
    if config.get("mode", "sync") != "sync":
        raise ValueError(f"{path}: mode {config['mode']!r}; only synchronous rounds are analysed")
    cfg = FLConfig.model_validate(config, strict=False)
    setup = prepare(cfg)
    clock, reg = setup.clock, setup.clock.registry
    clients = read_table(path, "clients")
    rounds = read_table(path, "rounds")
    shares = []
    for r in rounds["round"]:
        rows = np.flatnonzero(clients["round"] == r)
        ids = clients["client_id"][rows].astype(np.int64)
        rng = np.random.default_rng([cfg.seed, int(r), 0xC10C])
        latency = np.asarray(clock.device.sample_latency_s(reg.device_row[ids], rng), dtype=np.float64)
        compute = cfg.local_steps * cfg.batch_size * latency * clock.compute_scale
        brow = reg.bandwidth_row[ids]
        down = clock.down_bytes * 8 / 1000 / np.asarray(clock.bandwidth.sample_kbps(brow, rng, direction="down"))
        up = clock.up_bytes * 8 / 1000 / np.asarray(clock.bandwidth.sample_kbps(brow, rng, direction="up"))
        if not (np.allclose(compute, clients["compute_s"][rows], rtol=1e-9, atol=0)
                and np.allclose(down + up, clients["communication_s"][rows], rtol=1e-9, atol=0)):
            raise ValueError(f"{path}: round {r}: redrawn client times differ from the recorded ones")
        agg = clients["status"][rows] == "aggregated"
        if agg.any():
            last = np.flatnonzero(agg)[np.argmax((compute + down + up)[agg])]
            total = compute[last] + down[last] + up[last]
            shares.append((compute[last] / total, down[last] / total, up[last] / total))
    agg_all = clients["status"] == "aggregated"
    gaps = []
    for cid in np.unique(clients["client_id"][agg_all]):
        seen = np.sort(clients["round"][agg_all & (clients["client_id"] == cid)])
        gaps += np.diff(seen).tolist()
    share = np.mean(shares, axis=0) if shares else np.full(3, math.nan)
    return {"path": path, "config": config, "seed": config["seed"], "rta": int(attrs.get("rounds_to_accuracy", -1)),
            "tta_s": float(attrs.get("time_to_accuracy_s", math.nan)),
            "mean_round_s": float(np.mean(rounds["round_duration_s"])),
            "compute": share[0], "download": share[1], "upload": share[2],
            "down_bytes": int(clock.down_bytes), "up_bytes": int(clock.up_bytes),
            "model_bytes": int(setup.model_bytes), "compute_scale": clock.compute_scale,
            "gap_rounds": float(np.mean(gaps)) if gaps else math.nan}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="hpcbench fl result files (.h5)")
    args = parser.parse_args(argv)
    try:
        runs = [analyse(p) for p in args.files]
    except (OSError, KeyError, ValueError) as exc:
        print(f"fl_time_shares: error: {exc}", file=sys.stderr)
        return 2
    print("file  seed  rounds-to-target  time-to-target(s)  mean-round(s)  compute/down/up share of the "
          "round-ending client  bytes down/up per client  rounds between a client's aggregations")
    for r in runs:
        print(f"{r['path'].name}  {r['seed']}  {r['rta']}  {r['tta_s']:.4g}  {r['mean_round_s']:.4g}  "
              f"{r['compute']:.3g}/{r['download']:.3g}/{r['upload']:.3g}  {r['down_bytes']}/{r['up_bytes']}  "
              f"{r['gap_rounds']:.2f}")
    groups: dict[str, list[dict]] = {}
    for r in runs:
        groups.setdefault(_group_key(r["config"]), []).append(r)
    summary = []
    for runs_ in groups.values():
        reached = [r["tta_s"] for r in runs_ if r["rta"] > 0]
        summary.append({"label": _label(runs_[0]["config"]), "config": runs_[0]["config"],
                        "seeds": sorted(r["seed"] for r in runs_), "reached": len(reached),
                        "mean_tta_s": float(np.mean(reached)) if len(reached) == len(runs_) else math.nan,
                        "mean_rta": float(np.mean([r["rta"] for r in runs_])) if len(reached) == len(runs_)
                        else math.nan, "compute_scale": runs_[0]["compute_scale"]})
    for s in summary:
        # the uncompressed group of the same job: the same config with both directions "none"
        key = _group_key({**s["config"], **{d: {"name": "none"} for d in _DIRECTIONS}})
        base = next((t for t in summary if _group_key(t["config"]) == key), None)
        s["ratio"] = s["mean_tta_s"] / base["mean_tta_s"] if base and base["mean_tta_s"] > 0 else math.nan
    print("\njob (seeds)  reached  mean rounds  mean time-to-target(s)  vs uncompressed (>1: slower)  "
          "compute scale")
    for s in summary:
        print(f"{s['label']} (seeds {','.join(map(str, s['seeds']))})  {s['reached']}/{len(s['seeds'])}  "
              f"{s['mean_rta']:.1f}  {s['mean_tta_s']:.4g}  {s['ratio']:.2f}x  {s['compute_scale']:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
