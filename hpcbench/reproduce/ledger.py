"""Every command ``hpcbench reproduce`` ran: its exit status and wall time, and what may be skipped.

``OUT/ledger.jsonl`` gets one JSON line per run, skip and drawing, appended
as they happen (a killed session keeps what it did). A run is skipped when
its results file exists with ``status = completed``, the last ledger line
for that file has the same recipe (:meth:`hpcbench.reproduce.plan.Run.recipe`),
the same code identity (:mod:`hpcbench.reproduce.identity`) and exit status
0, and the file still holds the config that line recorded (it was not
replaced by another run since). A file made by other code is kept only when
asked (``reuse``), and then says which code made it.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, NamedTuple

from hpcbench.reproduce.identity import differences
from hpcbench.runtime.errors import InputError

__all__ = ["Ledger", "Freshness", "config_digest"]


class Freshness(NamedTuple):
    """Whether a results file may be kept, why, and the other code that made it.

    Attributes
    ----------
    done : bool
        Keep the file (do not run again).
    why : str
        ``completed with the same config`` or the reason to run again (or to keep it anyway).
    other_code : dict or None
        The code identity the ledger recorded for the file when it differs
        from this session's and ``reuse`` kept the file; None otherwise.
    """

    done: bool
    why: str
    other_code: dict | None = None


def config_digest(path) -> str:
    """SHA-256 of a results file's stored config (``config_json``), or ``""`` if unreadable."""
    from hpcbench.results.reader import open_file

    try:
        with open_file(path) as h5:
            text = h5.attrs.get("config_json", "")
    except (OSError, InputError):
        return ""
    if isinstance(text, bytes):
        text = text.decode()
    return hashlib.sha256(str(text).encode()).hexdigest()


def _file_code(path) -> dict:
    """The code identity a results file itself records (its ``git_commit`` attribute), for a ledger line without one."""
    from hpcbench.results.reader import open_file

    try:
        with open_file(path) as h5:
            commit = h5.attrs.get("git_commit", "")
    except OSError:
        return {}
    commit = commit.decode() if isinstance(commit, bytes) else str(commit)
    return {"commit": commit.removesuffix("-dirty"), "dirty": commit.endswith("-dirty"), "package_diff_sha256": ""}


class Ledger:
    """The append-only record of one output folder (``OUT/ledger.jsonl``).

    Parameters
    ----------
    path : pathlib.Path
        The JSON-lines file (created with its folder on the first record).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.session: list[dict[str, Any]] = []
        self._last: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue                     # a line cut by a killed session
                if entry.get("kind") == "run" and entry.get("output"):
                    self._last[entry["output"]] = entry

    def record(self, **entry: Any) -> dict[str, Any]:
        """Append one entry (``kind``: run, skip, draw) stamped with the time; returns it."""
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **entry}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, default=str) + "\n")
        self.session.append(entry)
        if entry.get("kind") == "run" and entry.get("output"):
            self._last[entry["output"]] = entry
        return entry

    def last_run(self, output: Path) -> dict[str, Any] | None:
        """The last ``run`` entry that wrote ``output`` (its command, exit status, wall time), or None."""
        return self._last.get(str(output))

    def up_to_date(self, output: Path, recipe: str, code: dict | None = None, reuse: bool = False) -> Freshness:
        """Whether ``output`` was made by ``recipe`` and ``code`` and completed; and why not.

        Parameters
        ----------
        output : pathlib.Path
            The results file.
        recipe : str
            :meth:`hpcbench.reproduce.plan.Run.recipe` of the run now.
        code : dict, optional
            :func:`hpcbench.reproduce.identity.code_identity` now (None: not compared).
        reuse : bool
            Keep a file made by the same recipe but other code.

        Returns
        -------
        Freshness
        """
        from hpcbench.results.status import run_status

        output = Path(output)
        if not output.is_file():
            return Freshness(False, "no results file")
        try:
            status = run_status(output)
        except OSError as exc:
            return Freshness(False, f"unreadable results file ({exc})")
        if not status.completed:
            return Freshness(False, f"results file {status.state}")
        last = self._last.get(str(output))
        if last is None:
            return Freshness(False, "no ledger entry for the file")
        if last.get("recipe") != recipe:
            return Freshness(False, "the manifest's settings changed")
        if last.get("rc") != 0:
            return Freshness(False, f"last run exited {last.get('rc')}")
        if last.get("config_sha256") != config_digest(output):
            return Freshness(False, "the file holds another config than the ledger recorded")
        changed = differences(last.get("code"), code) if code is not None else []
        if changed and not reuse:
            return Freshness(False, "made by other code: " + ", ".join(changed))
        if changed:
            return Freshness(True, "kept (--reuse) though made by other code: " + ", ".join(changed),
                             last.get("code") or _file_code(output))
        return Freshness(True, "completed with the same config")
