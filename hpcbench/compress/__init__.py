"""Gradient compressors (GRACE layering: compressor / memory / communicator).

Names: none, fp16, bf16, topk, randomk, threshold, thresholdv, blockthreshold,
dgc, qsgd, terngrad, signsgd, efsignsgd, powersgd. ``compress_ratio`` is the
fraction of elements *kept* everywhere. See docs/compression.md.
"""

from hpcbench.compress.base import Compressor, Context, payload_nbytes
from hpcbench.compress.memory import ErrorFeedback, Memory, NoMemory
from hpcbench.compress.registry import REGISTRY, build, compressor_class, create, names, register

__all__ = ["Compressor", "Context", "payload_nbytes", "ErrorFeedback", "Memory", "NoMemory",
           "REGISTRY", "create", "names", "register", "compressor_class", "build"]
