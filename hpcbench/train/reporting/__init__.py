"""The reporting of a run: rank 0's step recorder and printed lines, the HDF5 tables, per-rank telemetry, and the
``whatif`` command that re-prices a run's file."""
