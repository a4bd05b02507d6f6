"""Tables of typed records: the columns of a dataclass whose fields carry a unit and a description.

A record type (e.g. :class:`hpcbench.telemetry.TelemetryRecord`) declares
each field as ``field(metadata={"unit": "s", "description": "..."})``;
:func:`columns_of` turns it into the :class:`~hpcbench.results.writer.Column`
list of its table and :func:`rows_of` a list of records into the mapping
:meth:`~hpcbench.results.writer.Table.append` takes. One declaration, so the
table, its units and the record cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

import numpy as np

from hpcbench.results.writer import Column

__all__ = ["columns_of", "rows_of"]

_DTYPES = {"int": "int64", "float": "float64", "str": "str", "bool": "bool"}


def _type_name(t: Any) -> str:
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def columns_of(record_type) -> list[Column]:
    """The columns of ``record_type``'s table, in field order.

    Raises
    ------
    TypeError
        ``record_type`` is not a dataclass, or a field's type is not int,
        float, str or bool.
    KeyError
        A field has no ``unit`` in its metadata.
    """
    if not dataclasses.is_dataclass(record_type):
        raise TypeError(f"{record_type!r} is not a dataclass")
    out = []
    for f in dataclasses.fields(record_type):
        name = _type_name(f.type)
        if name not in _DTYPES:
            raise TypeError(f"{record_type.__name__}.{f.name}: type {name} has no column dtype")
        out.append(Column(f.name, _DTYPES[name], f.metadata["unit"], f.metadata.get("description", "")))
    return out


def rows_of(records: Iterable) -> Mapping[str, np.ndarray | list]:
    """Records (one dataclass type) as ``{field: values}``, ready for ``Table.append``."""
    records = list(records)
    if not records:
        return {}
    names = [f.name for f in dataclasses.fields(records[0])]
    return {n: [getattr(r, n) for r in records] for n in names}
