"""Micro-benchmark runners: programs users launch, built on the core packages.

``hpcbench.bench.collectives`` (custom collective algorithms beside MPI, gloo
and Horovod, and ``--overlap``), ``hpcbench.bench.compress`` (compressed
allreduce on modelled links, and the ``--convergence`` check) and
``hpcbench.bench.fl_scaling`` (throughput and scaling of the federated
emulation), ``hpcbench.bench.costmodel`` (allreduce over the link model
against the alpha-beta model). Each is a :class:`hpcbench.lifecycle.Job`. Core packages
(``collectives``, ``compress``, ``runtime``, ``results``, ``traces``) never
import from here.
"""
