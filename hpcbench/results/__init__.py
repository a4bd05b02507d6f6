"""HDF5 result files shared by every hpcbench benchmark (schema: docs/results-schema.md).

The writer and reader (and h5py under them) are imported on first use of their names, so that a module that
needs only a light part of this package (:mod:`hpcbench.results.kinds`, what each runner declares, imported by
every rank of a job) does not load h5py on every rank.
"""

from __future__ import annotations

import importlib

__all__ = ["Column", "ResultsFile", "Table", "read_attrs", "read_table"]

#: public name -> the module of this package that defines it
_HOME = {"Column": "writer", "ResultsFile": "writer", "Table": "writer", "read_attrs": "reader",
         "read_table": "reader"}


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(importlib.import_module(f"hpcbench.results.{_HOME[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hpcbench.results' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
