"""The project's one input-error type: bad input ends a job with exit status 2."""

from __future__ import annotations

__all__ = ["InputError", "EXIT_OK", "EXIT_FAILURE", "EXIT_INPUT"]

#: Exit statuses of every hpcbench runner.
EXIT_OK, EXIT_FAILURE, EXIT_INPUT = 0, 1, 2


class InputError(ValueError):
    """Bad user input (config, flag, trace, data, output path).

    Every runner ends with exit status 2 on it, after one message, and writes
    no result file. Subclasses name where the input came from
    (:class:`hpcbench.runtime.config.ConfigError`, trace and data errors).
    """
