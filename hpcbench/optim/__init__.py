"""Sparse optimizers on the CPU: apply a sparse gradient in place to the indices it touches.

StellaTrain (Lim et al., SIGCOMM'24) applies the sparsified, aggregated
gradient on the CPU with a sparse optimizer instead of densifying it. Here a
compressed allreduce's ``output="sparse"`` result (a
:class:`~hpcbench.collectives.compressed.sparse_sum.SparseSum`) goes straight
to :meth:`SparseOptimizer.step`, at a cost that grows with the entries, not
with the tensor.

=========  ==================  ==========================================
name       class               rule
=========  ==================  ==========================================
``sgd``    :class:`SparseSGD`  SGD, momentum, dampening, Nesterov, weight decay
``adam``   :class:`SparseAdam` Adam, AMSGrad, weight decay
=========  ==================  ==========================================

Both take ``smart_momentum`` (StellaTrain's lazy decay ``m**k``).
"""

from __future__ import annotations

from hpcbench.optim.adam import SparseAdam
from hpcbench.optim.base import SparseOptimizer, TensorState
from hpcbench.optim.gradient import SparseGradient, coalesce
from hpcbench.optim.sgd import SparseSGD
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.registry import Registry

__all__ = ["OPTIMIZERS", "create", "SparseOptimizer", "SparseSGD", "SparseAdam", "SparseGradient", "coalesce",
           "TensorState"]

#: name -> sparse optimizer class
OPTIMIZERS: Registry[type[SparseOptimizer]] = Registry("sparse optimizer", {
    SparseSGD.name: SparseSGD,
    SparseAdam.name: SparseAdam,
})


def create(name: str, **options) -> SparseOptimizer:
    """The sparse optimizer registered as ``name``, built with ``options`` (``lr``, ``momentum``...).

    Raises
    ------
    InputError
        ``name`` is not registered (the message lists the registered names), or an
        option is unknown or out of range.
    """
    cls = OPTIMIZERS[name]
    try:
        return cls(**options)
    except (TypeError, ValueError) as exc:
        raise InputError(f"sparse optimizer {name!r}: {exc}") from None
