"""The executor pool (:mod:`~hpcbench.fl.executors.pool`, the only FL code that talks MPI) and the result block it
carries (:mod:`~hpcbench.fl.executors.block`). Importing the package imports neither."""
