"""Rank 0's record of a run: its tables in the results file, the progress bar, and the ranks table at the end."""

from __future__ import annotations

__all__ = ["RoundRecorder"]


class RoundRecorder:
    """The results file (or None: nothing is written) and the progress bar (or None) of rank 0.

    Parameters
    ----------
    results : hpcbench.results.ResultsFile or None
    progress : tqdm-like or None
        Updated once per step (:func:`hpcbench.runtime.progress.progress_bar`).
    """

    def __init__(self, results=None, progress=None) -> None:
        self.results = results
        self.progress = progress
        self.tables: dict = {}

    def open(self, name: str, columns, description: str):
        """Open table ``name`` (None without a results file); it joins :attr:`tables` (checkpoints count its rows)."""
        if not self.results:
            return None
        self.tables[name] = table = self.results.table(name, columns, description)
        return table

    def step_done(self, accuracy: float, vtime_s: float) -> None:
        """Advance the progress bar by one step, showing the latest accuracy and the virtual time."""
        if self.progress is not None:
            self.progress.update(1)
            self.progress.set_postfix(acc=f"{accuracy:.3f}", vtime=f"{vtime_s:.0f}s", refresh=False)

    def ranks(self, rows) -> None:
        """Write the ``ranks`` table from :meth:`hpcbench.fl.executors.pool.ExecutorPool.rank_rows`."""
        if not self.results:
            return
        from hpcbench.fl.output import RANK_COLUMNS

        cols = list(zip(*rows))
        self.results.table("ranks", RANK_COLUMNS, "one row per MPI rank, at the end of the run").append(
            {c.name: list(v) for c, v in zip(RANK_COLUMNS, cols)})
