"""Federated learning emulated at scale on MPI ranks (FedScale design): ``python -m hpcbench.fl``."""
