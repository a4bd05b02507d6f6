"""The Chrome trace writer: a valid traceEvents file, lanes for overlapping spans, the validator's checks."""

from __future__ import annotations

import json

import pytest

from hpcbench.results.chrome_trace import (TraceRecorder, chrome_trace, trace_path_beside, validate,
                                           write_chrome_trace)


def test_written_trace_is_valid_and_complete(tmp_path):
    ranks = []
    for rank in range(2):
        r = TraceRecorder(rank, origin_s=10.0)
        r.span("compute", "F 0", 10.0, 10.5, micro_batch=0)
        r.span("communication", "send activation 0", 10.5, 11.5)
        r.span("communication", "send activation 1", 10.6, 11.0)      # in flight with the first: a 2nd lane
        r.span("compression", "topk", 10.5, 10.52)
        r.span("optimizer", "step", 11.5, 11.6)
        r.counter("bandwidth", 11.0, estimate_bps=1e8)
        ranks.append((rank, r.events))
    path = write_chrome_trace(tmp_path / "run.trace.json", ranks, {"runner": "test"})
    trace = json.loads(path.read_text())
    validate(trace)
    evs = trace["traceEvents"]
    spans = [e for e in evs if e["ph"] == "X"]
    assert len(spans) == 10 and {e["pid"] for e in spans} == {0, 1}
    first = next(e for e in spans if e["name"] == "F 0" and e["pid"] == 1)
    assert first["ts"] == 0.0 and first["dur"] == 500000.0 and first["cat"] == "compute"
    threads = {(e["pid"], e["args"]["name"]) for e in evs if e["name"] == "thread_name"}
    assert {(0, t) for t in ("compute", "communication", "communication 2", "compression", "optimizer")} <= threads
    names = {e["args"]["name"] for e in evs if e["name"] == "process_name"}
    assert names == {"rank 0", "rank 1"}
    assert any(e["ph"] == "C" and e["args"] == {"estimate_bps": 1e8} for e in evs)
    assert trace["otherData"] == {"runner": "test"}


def test_recorder_and_validator_refuse_bad_events():
    r = TraceRecorder(0)
    with pytest.raises(ValueError, match="unknown track"):
        r.span("disk", "x", 0, 1)
    with pytest.raises(ValueError, match="ends before"):
        r.span("compute", "x", 1, 0)
    with pytest.raises(ValueError, match="traceEvents"):
        validate({"events": []})
    good = chrome_trace([(0, [("X", "compute", "a", 0.0, 1.0, {})])])
    validate(good)
    bad = json.loads(json.dumps(good))
    bad["traceEvents"].append({"name": "b", "ph": "X", "ts": 500000.0, "dur": 1e6, "pid": 0, "tid": 0})
    with pytest.raises(ValueError, match="overlaps"):
        validate(bad)
    del bad["traceEvents"][-1]["ts"]
    with pytest.raises(ValueError, match="'ts'"):
        validate(bad)
    unnamed = {"traceEvents": [{"name": "a", "ph": "X", "ts": 0, "dur": 1, "pid": 0, "tid": 7}]}
    with pytest.raises(ValueError, match="thread_name"):
        validate(unnamed)
    assert trace_path_beside("results/run-1.h5").as_posix() == "results/run-1.trace.json"
