"""A process spawned by ``tests/mpi/test_workerset.py``: joins the parents' set and sends back the sum of its state."""

import numpy as np

from hpcbench.runtime.spawnpool import join_parents

parent, merged, header, state = join_parents(lambda: None)
assert header == {"hello": 1}
merged.bcast(int(np.sum(state, dtype=np.int64)), root=merged.rank)
merged.Free()
parent.Disconnect()
