"""HDF5 result files shared by every hpcbench benchmark (schema: docs/results-schema.md)."""

from hpcbench.results.writer import Column, ResultsFile, Table
from hpcbench.results.reader import read_attrs, read_table

__all__ = ["Column", "ResultsFile", "Table", "read_attrs", "read_table"]
