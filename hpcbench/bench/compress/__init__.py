"""Benchmark of gradient compression: local cost, selection quality, allreduce on modelled links.

Run under MPI, e.g.::

    mpiexec -n 4 python -m hpcbench.bench.compress \\
        --compressors topk,thresholdv --sizes-mb 100 --link 100Mbit,1Gbit,10Gbit

(or ``hpcbench compress``, or the forwarding ``python -m hpcbench.collectives.compress_bench``).
Files: :mod:`~.job` (flags, lifecycle hooks, tables), :mod:`~.measure` (what
one measurement does), :mod:`~.convergence` (the digits training check).
"""
