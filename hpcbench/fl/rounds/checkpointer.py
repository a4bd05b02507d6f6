"""Rank 0's checkpoints of a federated run, and the restore a resume starts with (:mod:`hpcbench.fl.checkpoint`)."""

from __future__ import annotations

import time

import numpy as np

from hpcbench.fl.rounds.summary import Summary
from hpcbench.runtime.errors import InputError

__all__ = ["Checkpointer"]

#: what a run writes at its end; a resume removes it and writes it again
_ENDS = ("ranks", "model/final_parameters", "final_parameters_sha256")


class Checkpointer:
    """Writes a checkpoint every ``every`` steps to ``path``, and restores one.

    Parameters
    ----------
    path : str or pathlib.Path or None
        Where checkpoints go (None: none is written; a resume still restores).
    every : int
        Steps between checkpoints (0: none).
    config_json : str
        The job's config as sorted JSON (what a resume compares).
    mode : str
        The round driver's name.
    aggregator : hpcbench.fl.contracts.Aggregator
    clock : hpcbench.fl.clock.VirtualClock
        Its time and its selector (read when a checkpoint is written).
    codecs : hpcbench.fl.rounds.codecs.LinkCodecs
    """

    def __init__(self, path, every: int, config_json: str, mode: str, aggregator, clock, codecs) -> None:
        self.path = path
        self.every = int(every)
        self.config_json = config_json
        self.mode = mode
        self.aggregator = aggregator
        self.clock = clock
        self.codecs = codecs

    def save(self, step: int, results, tables: dict, params: np.ndarray, summary: Summary, t0: float, stop: bool,
             **extra) -> None:
        """Write the checkpoint after ``step`` when one is due.

        ``tables`` maps table names to the open tables (their row counts are
        saved, so a resume truncates what a killed run appended after
        ``step``); ``extra`` holds the mode's own state (FedBuff's planner).
        """
        if self.path is None or not self.every or step % self.every:
            return
        from hpcbench.fl.checkpoint import save_checkpoint

        save_checkpoint(self.path, {
            "config": self.config_json, "mode": self.mode,
            "step": step, "output": str(results.path.resolve()) if results else "",
            "run_id": results.run_id if results else "", "params": params,
            "aggregator": self.aggregator.state_dict(), "selector": self.clock.selector.state_dict(),
            **self.codecs.state_dict(), "clock_now_s": self.clock.now_s, "stop": bool(stop),
            "wall_s": time.perf_counter() - t0,
            "tables": {name: t.rows for name, t in tables.items()} if results else {},
            "summary": {"rounds": summary.rounds, "final_accuracy": summary.final_accuracy,
                        "time_to_accuracy_s": summary.time_to_accuracy_s,
                        "rounds_to_accuracy": summary.rounds_to_accuracy},
            **extra})

    def restore(self, state: dict, step: int, results, tables: dict, summary: Summary) -> tuple[np.ndarray, bool, float]:
        """Load the checkpoint ``state`` (taken after ``step``) into the strategies, codecs, clock, ``summary`` and
        the results file.

        Tables are truncated to the rows they held at the checkpoint and what
        the run writes at its end is removed, so the file continues exactly.
        Returns the global parameters, the stop flag and the wall seconds
        already spent.

        Raises
        ------
        InputError
            The results file does not hold the checkpoint's tables.
        """
        self.aggregator.load_state_dict(state["aggregator"])
        self.clock.selector.load_state_dict(state["selector"])
        self.codecs.load_state_dict(state)
        self.clock.now_s = float(state["clock_now_s"])
        for key, value in state["summary"].items():
            setattr(summary, key, type(getattr(summary, key))(value))
        if results:
            for name, table in tables.items():
                try:
                    table.truncate(int(state["tables"][name]))
                except (KeyError, ValueError) as exc:
                    raise InputError(f"--resume: results file {str(results.path)!r} does not match the "
                                     f"checkpoint ({exc})") from None
            for name in _ENDS + (("wall_to_accuracy_s",) if summary.rounds_to_accuracy < 0 else ()):
                results.remove(name)
            results.set_attrs(time_to_accuracy_s=summary.time_to_accuracy_s,
                              rounds_to_accuracy=summary.rounds_to_accuracy, resumed_from_step=step)
        params = np.array(state["params"], dtype=np.float32)
        return params, bool(state["stop"]), float(state["wall_s"])
