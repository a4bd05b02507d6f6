"""The communication core: custom and asynchronous collectives over mpi4py point-to-point."""
