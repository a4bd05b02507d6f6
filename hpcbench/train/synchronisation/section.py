"""The ``sync`` config section: one synchroniser entry, a section ``{name: NAME, ...}`` or its name.

Read by the job's config (its ``sync`` list) and by whatever builds a synchroniser from a section while the run
goes on (a policy's switch of synchroniser, a worker that joins an elastic run), so that neither imports the other.
"""

from __future__ import annotations

from pydantic import TypeAdapter

from hpcbench.runtime.config import strategy_section
from hpcbench.sync import SYNCHRONISERS

__all__ = ["SyncEntry", "SyncSection"]


def _sync_shorthand(text: str) -> dict:
    """``"ring:priority"`` -> ``{name: ring, schedule: priority}``; ``"ring"`` -> ``{name: ring}``."""
    name, colon, schedule = text.partition(":")
    return {"name": name, "schedule": schedule} if colon else {"name": name}


#: one ``sync`` entry: a synchroniser's section, or its name (``NAME:SCHEDULE`` sets its schedule)
SyncEntry, _RING = strategy_section(SYNCHRONISERS, "sync", "ring", shorthand=_sync_shorthand)
#: validates one ``sync`` entry (a policy's decision to switch synchroniser names one)
SyncSection = TypeAdapter(SyncEntry)
