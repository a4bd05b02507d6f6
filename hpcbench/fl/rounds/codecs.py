"""The compressed links between the server and its clients (rank 0): what clients receive, what the server decodes."""

from __future__ import annotations

import numpy as np

__all__ = ["LinkCodecs"]


class LinkCodecs:
    """The uplink and downlink codecs of a job (:class:`hpcbench.fl.uplink.UpdateCodec`, None: uncompressed).

    Parameters
    ----------
    uplink, downlink : hpcbench.fl.uplink.UpdateCodec or None
    clock : hpcbench.fl.clock.VirtualClock
        Its ``up_bytes`` and ``down_bytes`` are what the clock charged; every payload is checked against them.
    """

    def __init__(self, uplink, downlink, clock) -> None:
        self.uplink = uplink
        self.downlink = downlink
        self.clock = clock

    def broadcast(self, params: np.ndarray) -> np.ndarray:
        """The global model as clients receive it: decoded by the downlink codec, or ``params`` itself."""
        if self.downlink is None:
            return params
        return self.downlink.encode(params)[0]

    def encode_updates(self, client_ids: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        """Replace each row of ``deltas`` by what the server decodes from its client's upload, in place.

        Rows are encoded in the given order (each client's residual is its
        own; the order fixes shared compressor state). Returns the uplink
        bytes of each row (int64, shape (m,)).

        Raises
        ------
        RuntimeError
            If a payload's size differs from the size the virtual clock charged.
        """
        nbytes = np.zeros(len(client_ids), np.int64)
        if self.uplink is None:
            nbytes[:] = self.clock.up_bytes
            return nbytes
        for i, cid in enumerate(client_ids):
            deltas[i], nbytes[i] = self.uplink.encode(deltas[i], int(cid))
        if np.any(nbytes != self.clock.up_bytes):
            raise RuntimeError(f"uplink payloads of {sorted(set(nbytes.tolist()))} bytes, but the virtual "
                               f"clock charged {self.clock.up_bytes}")
        return nbytes

    def state_dict(self) -> dict:
        """Each direction's codec state (None: uncompressed), by ``uplink`` / ``downlink``."""
        return {name: None if c is None else c.state_dict()
                for name, c in (("uplink", self.uplink), ("downlink", self.downlink))}

    def load_state_dict(self, state) -> None:
        """Restore what :meth:`state_dict` saved (``state`` may hold other keys)."""
        for name, codec in (("uplink", self.uplink), ("downlink", self.downlink)):
            if codec is not None:
                codec.load_state_dict(state[name])
