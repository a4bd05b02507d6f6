"""Where a federated round's virtual time goes, and what compression saves: compute, download, upload.

Usage::

    python analysis/fl_time_shares.py results/fl/topk-*.h5 results/fl/none-*.h5 -o shares.png

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

import json
import math
import sys
from pathlib import Path

import numpy as np
from _style import figure_parser, outputs, pyplot, save_figure

from hpcbench.results import read_attrs, read_table
from hpcbench.runtime.texttable import NA, render


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
    parser = figure_parser(__doc__, "results/fl-time-shares.png", "hpcbench fl result files (.h5)")
    args = parser.parse_args(argv)
    try:
        runs = [analyse(p) for p in args.files]
    except (OSError, KeyError, ValueError) as exc:
        print(f"fl_time_shares: error: {exc}", file=sys.stderr)
        return 2
    never = NA("target not reached")
    table = [(r["path"].name, r["seed"], r["rta"] if r["rta"] > 0 else never, r["tta_s"] if r["rta"] > 0 else never,
              r["mean_round_s"], r["compute"], r["download"], r["upload"], r["down_bytes"], r["up_bytes"],
              r["gap_rounds"] if r["gap_rounds"] == r["gap_rounds"] else NA("no client aggregated twice"))
             for r in runs]
    for line in render(("file", "seed", "rounds to target", "time to target", "mean round", "compute", "download",
                        "upload", "bytes down", "bytes up", "rounds between aggregations"), table,
                       units=("", "", "", "(s)", "(s)", "(share)", "(share)", "(share)", "(B/client)", "(B/client)",
                              "(per client)"),
                       formats=("s", "d", "d", ".4g", ".4g", ".3g", ".3g", ".3g", "d", "d", ".2f")):
        print(line)
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
                        else math.nan, "compute_scale": runs_[0]["compute_scale"],
                        "shares": np.nanmean([[r["compute"], r["download"], r["upload"]] for r in runs_], axis=0)})
    for s in summary:
        # the uncompressed group of the same job: the same config with both directions "none"
        key = _group_key({**s["config"], **{d: {"name": "none"} for d in _DIRECTIONS}})
        base = next((t for t in summary if _group_key(t["config"]) == key), None)
        s["ratio"] = s["mean_tta_s"] / base["mean_tta_s"] if base and base["mean_tta_s"] > 0 else math.nan
    print()
    some = NA("not every seed reached the target")
    rows = [(f"{s['label']} (seeds {','.join(map(str, s['seeds']))})", f"{s['reached']}/{len(s['seeds'])}",
             s["mean_rta"] if s["mean_rta"] == s["mean_rta"] else some,
             s["mean_tta_s"] if s["mean_tta_s"] == s["mean_tta_s"] else some,
             s["ratio"] if s["ratio"] == s["ratio"] else NA("no uncompressed group that reached it"),
             s["compute_scale"]) for s in summary]
    for line in render(("job (seeds)", "reached", "mean rounds", "mean time to target", "vs uncompressed",
                        "compute scale"), rows, units=("", "", "", "(s)", "(x, >1 slower)", ""),
                       formats=("s", "s", ".1f", ".4g", ".2f", ".4g")):
        print(line)
    _plot(summary, outputs(args))
    print(f"figure: {', '.join(map(str, outputs(args)))}")
    return 0


def _plot(summary: list[dict], out) -> None:
    """Stacked shares of compute, download and upload per group, with its mean time to the target."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(summary) + 1.8))
    for i, s in enumerate(summary):
        left = 0.0
        for share, name, colour in zip(s["shares"], ("compute", "download", "upload"), ("C0", "C1", "C2")):
            ax.barh(i, share, left=left, color=colour, label=name if i == 0 else None)
            left += share
        tta = f"{s['mean_tta_s']:.0f} s to target" if s["mean_tta_s"] == s["mean_tta_s"] else "target not reached"
        ax.text(1.01, i, tta, va="center", fontsize=7)
    ax.set_yticks(range(len(summary)), [s["label"] for s in summary], fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the round-ending client's completion time")
    ax.legend(loc="lower right", fontsize=7)
    ax.set_title("Where a federated round's virtual time goes")
    fig.tight_layout()
    save_figure(fig, out)


if __name__ == "__main__":
    sys.exit(main())
