"""Pipeline-parallel runner: BERT-style stages on MPI ranks with Sky Computing's layer allocators.

``python -m hpcbench.pipeline CONFIG.yaml`` (see :mod:`hpcbench.pipeline.job`).
The allocators and the cost model live in the core package :mod:`hpcbench.allocation`.
"""
