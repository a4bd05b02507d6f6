"""FedScale trace pickles (``client_device_capacity``, ``client_behave_trace``).

The pickles are read with a restricted unpickler that refuses every global
(class or function reference), so no code from the file is ever run: only
builtin containers and scalars (dict, list, tuple, set, str, bytes, int,
float, bool, None), which need no global lookup, can be loaded. Bounded, too:
pickle's memo lets a few bytes reference one list many times over, so the
loaded object may stand for billions of values (4.4 GB from 268 bytes when
walked); it is refused unless its expanded size
(:func:`hpcbench.runtime.bounded.expanded_size`) is within
:data:`EXPANSION_PER_BYTE` values per byte of the file.
"""

from __future__ import annotations

import io
import pathlib
import pickle
from typing import Any

import numpy as np

from hpcbench.runtime.bounded import ExpansionError, expanded_size, short_repr

from . import _io
from .availability import AvailabilityTrace
from .bandwidth import BandwidthTrace
from .device import DeviceTrace
from .errors import TraceError

__all__ = ["load_fedscale_capacity", "load_fedscale_behavior", "safe_load_pickle", "EXPANSION_PER_BYTE"]

#: values a pickle may expand to per byte of the file (plus 10,000): without shared references each
#: value costs at least one opcode byte, so only memo references can exceed it
EXPANSION_PER_BYTE = 10



class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler whose ``find_class`` refuses every global."""

    def __init__(self, file, path) -> None:
        super().__init__(file)
        self._path = path

    def find_class(self, module: str, name: str) -> Any:  # noqa: D401
        raise TraceError(
            self._path,
            f"refusing to load global {module}.{name}: FedScale trace pickles may "
            "only hold builtin containers and numbers (no code is executed)",
        )

    def persistent_load(self, pid: Any) -> Any:
        raise TraceError(self._path, "refusing persistent id in pickle")


def safe_load_pickle(path: _io.PathLike) -> Any:
    """Unpickle a file holding only builtin containers and scalars.

    Parameters
    ----------
    path : str or os.PathLike
        Pickle file (optionally gzipped, ``*.gz``).

    Returns
    -------
    object
        The unpickled dict/list/str/number structure.

    Raises
    ------
    TraceError
        Missing file, a pickle referencing any global (class, function,
        e.g. ``os.system`` via ``__reduce__``; nothing is executed), a
        corrupt pickle, or one whose shared references expand beyond
        :data:`EXPANSION_PER_BYTE` values per byte (or that contains itself).
    """
    p = pathlib.Path(path)
    raw = _io.read_bytes(p)
    try:
        data = _RestrictedUnpickler(io.BytesIO(raw), p).load()
    except TraceError:
        raise
    except Exception as exc:  # corrupt data: UnpicklingError, EOFError, RecursionError, ...
        raise TraceError(p, f"malformed pickle: {type(exc).__name__}: {short_repr(str(exc), 200)}") from None
    try:
        expanded_size(data, EXPANSION_PER_BYTE * len(raw) + 10_000, "the pickle")
    except ExpansionError as exc:
        raise TraceError(p, str(exc)) from None
    return data


def _client_items(p, data) -> list[tuple[str, Any]]:
    _io.expect(p, "top level", data, dict, "a dict {client_id: record}")
    if not data:
        raise TraceError(p, "empty trace: no client")
    return list(data.items())


def load_fedscale_capacity(path: _io.PathLike) -> tuple[DeviceTrace, BandwidthTrace]:
    """Load a FedScale ``client_device_capacity`` pickle.

    Parameters
    ----------
    path : str or os.PathLike
        Pickle of ``{client_id: {"computation": ms per sample,
        "communication": kbit/s}}``.

    Returns
    -------
    device : DeviceTrace
        ``latency_ms`` = computation in ms per sample (``unit="sample"``),
        ``std_ms`` = 0, ``model`` = client id as str.
    bandwidth : BandwidthTrace
        One sample (``communication``, kbit/s) per client, network type ``""``.
        Row ``i`` of both traces is the same client. Clients with zero
        computation or communication are excluded (counted in ``n_excluded``).

    Raises
    ------
    TraceError
        Missing file, unsafe or corrupt pickle, missing key, wrong type,
        negative or non-finite value, or no client left.
    """
    p = pathlib.Path(path)
    items = _client_items(p, safe_load_pickle(p))
    ids: list[str] = []
    comp: list[float] = []
    comm: list[float] = []
    n_zero = 0
    for cid, rec in items:
        where = f"client {cid!r}"
        c = _io.number(p, f"{where}: key 'computation'", _io.get(p, where, rec, "computation"))
        b = _io.number(p, f"{where}: key 'communication'", _io.get(p, where, rec, "communication"))
        if c == 0.0 or b == 0.0:
            n_zero += 1
            continue
        ids.append(str(cid))
        comp.append(c)
        comm.append(b)
    if not ids:
        raise TraceError(p, f"empty trace after filtering: {len(items)} clients, all with zero capacity")
    n = len(ids)
    model = np.asarray(ids, dtype=str)
    device = DeviceTrace(model=model, latency_ms=np.asarray(comp, dtype=np.float64),
                         std_ms=np.zeros(n), unit="sample", source=str(p), n_excluded=n_zero)
    bandwidth = BandwidthTrace(offsets=np.arange(n + 1, dtype=np.int64),
                               kbps=np.asarray(comm, dtype=np.float64),
                               network_type=np.full(n, "", dtype=str), model=model,
                               source=str(p), n_excluded=n_zero)
    return device, bandwidth


def load_fedscale_behavior(path: _io.PathLike) -> AvailabilityTrace:
    """Load a FedScale ``client_behave_trace`` pickle as availability intervals.

    Parameters
    ----------
    path : str or os.PathLike
        Pickle of ``{client_id: {"active": [s, ...], "inactive": [s, ...],
        "finish_time": s, ...}}``.

    Returns
    -------
    AvailabilityTrace
        Intervals ``[active[i], inactive[i]]``; an unmatched last ``active``
        runs to ``finish_time``, which is the trace duration (wrap period).
        Intervals are clipped to ``[0, finish_time]``. Clients with
        ``finish_time`` 0 are excluded (counted in ``n_excluded``).

    Raises
    ------
    TraceError
        Missing file, unsafe or corrupt pickle, missing key, wrong type,
        negative or non-finite time, more ``inactive`` than ``active``
        entries, an ``inactive`` before its ``active``, or no client left.
    """
    p = pathlib.Path(path)
    items = _client_items(p, safe_load_pickle(p))
    ids: list[str] = []
    intervals: list[np.ndarray] = []
    durations: list[float] = []
    n_zero = 0
    for cid, rec in items:
        where = f"client {cid!r}"
        fin = _io.number(p, f"{where}: key 'finish_time'", _io.get(p, where, rec, "finish_time"))
        act = _io.get(p, where, rec, "active")
        ina = _io.get(p, where, rec, "inactive")
        act = _io.float_array(p, f"{where}: key 'active'", list(act) if isinstance(act, tuple) else act,
                              "a list of times")
        ina = _io.float_array(p, f"{where}: key 'inactive'", list(ina) if isinstance(ina, tuple) else ina,
                              "a list of times")
        if act.ndim != 1 or ina.ndim != 1:
            raise TraceError(p, f"{where}: keys 'active'/'inactive' must be flat lists of times")
        if fin == 0.0:
            n_zero += 1
            continue
        if len(ina) > len(act) or len(act) > len(ina) + 1:
            raise TraceError(p, f"{where}: {len(act)} 'active' vs {len(ina)} 'inactive' entries")
        ends = np.r_[ina, [fin] * (len(act) - len(ina))]
        if np.any(ends < act):
            j = int(np.flatnonzero(ends < act)[0])
            raise TraceError(p, f"{where}: key 'inactive'[{j}] {ends[j]!r} before 'active'[{j}] {act[j]!r}")
        ids.append(str(cid))
        intervals.append(np.stack([act, ends], axis=1))
        durations.append(fin)
    if not ids:
        raise TraceError(p, f"empty trace after filtering: {len(items)} clients, all with finish_time 0")
    return AvailabilityTrace.from_intervals(intervals, np.asarray(durations), ids,
                                            source=str(p), n_excluded=n_zero)
