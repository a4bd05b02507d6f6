"""The job lifecycle every runner goes through: parse, agree, open the outputs, run, end.

A layer of its own, between the runners (``fl/``, ``train/``, ``pipeline/``,
``bench/``), which subclass :class:`Job` and start it with :func:`main`, and
core: it is the one place below the runners that opens a runner's results
file (:mod:`hpcbench.results`). Files: :mod:`~.driver` (:func:`run`,
:func:`main`, the failure handling; the stages and exit statuses are
described there), :mod:`~.job` (the :class:`Job` hooks), :mod:`~.parser`
(:class:`RankParser`), :mod:`~.outputs` (every output checked and locked, the
results file opened), :mod:`~.exit` (:func:`exit_process`). The helpers a
runner or core calls during a run stay in core: :func:`hpcbench.runtime.agreement.agree`,
:func:`hpcbench.runtime.faults.fault_point`,
:func:`hpcbench.runtime.output_names.format_output_path`.
"""

from __future__ import annotations

from hpcbench.lifecycle.driver import Terminated, entry, main, run
from hpcbench.lifecycle.exit import exit_process
from hpcbench.lifecycle.job import Job, job_arguments
from hpcbench.lifecycle.parser import RankParser, UsageError

__all__ = ["Job", "RankParser", "UsageError", "Terminated", "main", "run", "exit_process", "job_arguments",
           "entry"]
