"""Collective benchmark (OSU / nccl-tests style): custom algorithms beside MPI, gloo, Horovod.

Run ``mpiexec -n N python -m hpcbench.bench.collectives [options]`` (or
``hpcbench collectives``, or the forwarding ``python -m hpcbench.collectives.bench``).
For every message size of the sweep and every implementation it prints one row::

    size(B) count type redop impl time(us) p50(us) p99(us) algbw(GB/s) busbw(GB/s) vs_mpi #wrong

``time`` is the mean over iterations of the per-iteration time, which is the
maximum over ranks (ranks are lined up by :mod:`hpcbench.runtime.timing`
before each iteration). ``algbw = size / time``; ``busbw`` as nccl-tests:
allreduce ``algbw * 2(n-1)/n``, reduce_scatter and allgather ``algbw *
(n-1)/n``, bcast ``algbw``. ``size`` is the full buffer (allreduce, bcast),
the input of reduce_scatter, the output of allgather. ``vs_mpi`` is time /
MPI's time. ``#wrong`` counts elements differing from a reference computed
locally (every rank can generate every rank's input), summed over ranks.

``--overlap`` instead measures how much of ``iallreduce`` traffic hides behind
torch matmuls (see :mod:`hpcbench.bench.collectives.overlap`).

Files: :mod:`~.job` (flags, the lifecycle hooks, the sweep), :mod:`~.reference`
(inputs and the reference result), :mod:`~.backends` (one class per
implementation, in a registry), :mod:`~.report` (sizes, table columns, rows),
:mod:`~.overlap`.
"""
