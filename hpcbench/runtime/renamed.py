"""Names that changed, kept in one place: old config keys refused by name, old result columns read as today's.

The kept fraction of a sparsifying compressor is ``ratio`` everywhere
(docs/architecture.md, "Names"); it was ``compress_ratio`` in compressor
constructors, telemetry records, decisions and several results tables.

- A config that still gives an old key is refused (exit 2) with a message
  naming the old key and the new one (:func:`retired_key`): a compressor
  section's ``options`` entry for the kept fraction, and the training
  config's former job-wide compressor keys.
- A results file written before the rename is read under today's column
  names (:func:`column_name`, used by :mod:`hpcbench.results.reader`), so
  analysis scripts, ``hpcbench results`` and ``hpcbench reproduce`` read
  old and new files alike.

This is the only module of ``hpcbench/`` that may spell a retired name
(``tests/test_names.py`` checks).
"""

from __future__ import annotations

__all__ = ["RENAMED_COLUMNS", "RENAMED_OPTIONS", "MOVED_TRAIN_KEYS", "column_name", "retired_key"]

#: results-table columns written by older runs under another name: old -> today's
RENAMED_COLUMNS: dict[str, str] = {"compress_ratio": "ratio"}

#: a compressor section's ``options`` key that is now the section's own key: old option -> section key
RENAMED_OPTIONS: dict[str, str] = {"compress_ratio": "ratio"}

#: job-wide keys of the training config that a ``sync`` entry's compressor section holds now: old -> its form
MOVED_TRAIN_KEYS: dict[str, str] = {
    "compressor": "sync: [..., {name: compressed, compressor: {name: NAME}}]",
    "compress_ratio": "sync: [..., {name: compressed, compressor: {name: NAME, ratio: VALUE}}]"}


def column_name(stored: str) -> str:
    """Today's name of a column stored as ``stored`` (itself when it was never renamed)."""
    return RENAMED_COLUMNS.get(stored, stored)


def retired_key(old: str, new: str) -> str:
    """The message refusing config key ``old``, renamed ``new`` (an :class:`InputError`'s text: exit 2)."""
    return f"{old}: a retired key; write {new} instead"
