"""Error type raised by every trace loader (an input error: exit status 2)."""

from __future__ import annotations

import os

from hpcbench.runtime.errors import InputError

__all__ = ["TraceError"]


class TraceError(InputError):
    """A trace file is missing, unreadable or holds invalid content.

    The message always names the file and, where one is to blame, the bad key
    and value, e.g. ``trace file 'x.json': record 3: key 'ResNet Latency':
    negative value -1.0``.

    Parameters
    ----------
    path : str or os.PathLike
        The trace file concerned.
    detail : str
        What is wrong.

    Attributes
    ----------
    path : str
        The trace file concerned.
    detail : str
        What is wrong (message without the file prefix).
    """

    def __init__(self, path: str | os.PathLike[str], detail: str) -> None:
        self.path = os.fspath(path)
        self.detail = detail
        super().__init__(f"trace file {self.path!r}: {detail}")

    def __reduce__(self):  # keep picklable across processes
        return (type(self), (self.path, self.detail))
