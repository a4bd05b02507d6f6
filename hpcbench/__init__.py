"""hpcbench: an MPI benchmark suite for distributed-ML systems.

Subpackages
-----------
fl
    Federated learning emulated at scale (FedScale/Oort design on MPI ranks).
collectives
    The communication core: custom and asynchronous collectives.
results
    HDF5 result files with provenance, shared by every benchmark.
runtime
    MPI helpers: sleeping waits, provenance, rank-0 printing.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
