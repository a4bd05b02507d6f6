"""Gradient compressors (GRACE layering: compressor / memory / communicator).

Names: none, fp16, bf16, topk, randomk, threshold, thresholdv, blockthreshold,
dgc, qsgd, terngrad, signsgd, efsignsgd, powersgd. ``ratio`` is the
fraction of elements *kept* everywhere. See docs/compression.md.

The names below are imported on first use (PEP 562), so importing a
submodule that needs no torch (``hpcbench.compress.config``, a config
section naming a compressor) does not import the compressors.
"""

import importlib

#: public name -> submodule defining it
_EXPORTS = {
    **dict.fromkeys(("Compressor", "Context", "payload_nbytes"), "base"),
    **dict.fromkeys(("ErrorFeedback", "Memory", "NoMemory"), "memory"),
    **dict.fromkeys(("REGISTRY", "create", "names", "register", "compressor_class", "build"), "registry"),
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hpcbench.compress' has no attribute {name!r}")
    return getattr(importlib.import_module(f"hpcbench.compress.{_EXPORTS[name]}"), name)
