"""Networks shared by the runners, and the check of a user's model factory (core: torch, no runner).

- :mod:`.leaf_cnn`: LEAF's FEMNIST CNN for any ``(C, H, W)`` image set (the FL ``cnn`` and the training
  runner's ``leaf_cnn``);
- :mod:`.user`: a ``package.module:callable`` model factory called and its module checked (docs/byo.md).

A runner wraps these with what it needs (the FL runner's loss and ``build``); nothing here reads a config
object or imports a runner.
"""
