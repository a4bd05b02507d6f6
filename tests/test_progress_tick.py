"""The progress thread's adaptive watch tick (``hpcbench.collectives.progress._Engine``)."""

from __future__ import annotations

import threading

from hpcbench.collectives import progress
from hpcbench.collectives.progress import HANDOFF_MAX_S, HANDOFF_S, _Engine


class _Req:
    """What ``_take_new`` reads of a request: ``_done`` and ``_lock``."""

    def __init__(self, done: bool = False, driven: bool = False) -> None:
        self._done = done
        self._lock = threading.Lock()
        if driven:
            self._lock.acquire()            # a caller in wait() holds it


def test_tick_doubles_while_nothing_needs_the_thread_and_resets_when_something_does():
    eng = _Engine()
    assert eng.tick_s == HANDOFF_S
    eng._new = [_Req(done=True), _Req(driven=True)]       # completed, and driven by its caller
    taken = eng._take_new()
    assert len(taken) == 1 and eng._new == [] and eng.tick_s == 2 * HANDOFF_S
    for _ in range(20):
        eng._new = [_Req(done=True)]
        assert eng._take_new() == []
    assert eng.tick_s == HANDOFF_MAX_S                      # capped
    alone = _Req()                                          # submitted, caller computing
    eng._new = [_Req(done=True), alone]
    assert eng._take_new() == [alone] and eng.tick_s == HANDOFF_S
    eng._new = []
    assert eng._take_new() == [] and eng.tick_s == HANDOFF_S  # no submission: not a tick's finding


def test_idle_ticks_that_find_nothing_grow_the_tick(monkeypatch):
    eng = _Engine()
    waits = []

    def fake_wait(timeout=None):
        waits.append(timeout)
        if len(waits) == 6:
            eng._new.append(_Req())                         # a submission arrives at the 6th tick

    monkeypatch.setattr(eng._cv, "wait", fake_wait)
    monkeypatch.setattr(progress, "WATCH_S", 10.0)
    with eng._cv:
        eng._idle()
    assert waits[:5] == [HANDOFF_S * 2 ** k for k in range(5)]
    assert eng.tick_s == min(HANDOFF_S * 2 ** 5, HANDOFF_MAX_S)
