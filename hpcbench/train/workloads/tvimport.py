"""Import torchvision's model zoo beside the CPU build of torch.

The torchvision 0.28.0 wheel pinned for torch 2.13.0 ships a ``_C.so`` linked
against ``libc10_cuda``; beside the CPU build of torch that library cannot be
loaded, torchvision then skips its C++ operators, and ``import torchvision``
fails in ``torchvision/_meta_registrations.py`` with ``RuntimeError: operator
torchvision::nms does not exist``: two fake-tensor registrations
(``torchvision::nms`` and ``torchvision::qnms``) are not guarded by the check
that the operator was loaded. The classification models need none of the
custom operators, so :func:`import_torchvision` declares the two schemas
(without kernels) and imports again, only when exactly that failure happens.
"""

from __future__ import annotations

import sys

__all__ = ["import_torchvision"]

#: the ``torch.library.Library`` holding the two schemas; kept alive for the process (a freed
#: library deregisters its definitions)
_FRAGMENT = None
_MISSING = "operator torchvision::nms does not exist"


def import_torchvision():
    """``import torchvision``, working around the missing ``nms``/``qnms`` schemas.

    Returns
    -------
    module
        The ``torchvision`` package.

    Raises
    ------
    ImportError
        torchvision is not installed.
    RuntimeError
        Any failure other than the missing ``torchvision::nms`` schema (re-raised
        unchanged), or the second import failing as well.

    Notes
    -----
    The schemas are those of torchvision's own ``csrc/ops/nms.cpp``
    (``nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor``) and
    the quantized ``qnms``; calling either afterwards raises (no kernel), which
    no classification model does.
    """
    global _FRAGMENT
    try:
        import torchvision
        return torchvision
    except RuntimeError as exc:
        if _MISSING not in str(exc):
            raise
    import torch

    for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[mod]   # the half-imported package; the next import starts over
    if _FRAGMENT is None:
        lib = torch.library.Library("torchvision", "FRAGMENT")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _FRAGMENT = lib
    import torchvision
    return torchvision
