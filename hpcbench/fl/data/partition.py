"""Split a labelled dataset across registered clients (pure numpy, no torch).

Every function returns the split in CSR form: ``offsets`` (int64, shape
``(num_clients + 1,)``) and ``indices`` (int32, shape ``(offsets[-1],)``);
client ``c`` holds samples ``indices[offsets[c]:offsets[c + 1]]``. This keeps a
million registered clients at a few tens of MB, with no per-client objects.
"""

from __future__ import annotations

import numpy as np

__all__ = ["iid_partition", "dirichlet_partition", "quantity_partition", "natural_partition", "sampled_partition",
           "csr_from_lists"]


def csr_from_lists(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(offsets, indices)`` from one index array per client."""
    sizes = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    indices = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
    return offsets, indices


def iid_partition(num_samples: int, num_clients: int, rng: np.random.Generator):
    """Disjoint IID split: a random permutation cut into near-equal shares.

    Raises
    ------
    ValueError
        If there are fewer samples than clients (a client would be empty).
    """
    if num_clients > num_samples:
        raise ValueError(f"num_clients ({num_clients}) exceeds the {num_samples} training samples; "
                         f"set samples_per_client to register more clients than samples")
    perm = rng.permutation(num_samples)
    return csr_from_lists(np.array_split(perm, num_clients))


def dirichlet_partition(labels: np.ndarray, num_clients: int, alpha: float,
                        rng: np.random.Generator, min_size: int = 1, max_tries: int = 1000):
    """Disjoint label-skew split (Yurochkin et al. 2019; NIID-Bench, Li et al. 2022; Flower's DirichletPartitioner).

    For each class ``k``, proportions ``p ~ Dir(alpha * 1_N)`` over the ``N``
    clients split that class's samples. Draws are repeated until every client
    holds at least ``min_size`` samples. With many clients and a small
    ``alpha`` most shares are near zero and some client is always left empty
    (10 classes of 6,000 and 1,000 clients: ``alpha`` 0.1 fails, 0.3 works);
    :func:`sampled_partition` (each client's class mix ``~ Dir(alpha)``, Hsu,
    Qi and Brown 2019) takes any ``alpha``.

    Parameters
    ----------
    labels : ndarray of shape (n_samples,), int
    num_clients : int
    alpha : float
        Concentration; small values give strong skew, large ones approach IID.
    rng : numpy.random.Generator
    min_size : int, default 1

    Raises
    ------
    ValueError
        If no draw in ``max_tries`` gives every client ``min_size`` samples.
    """
    labels = np.asarray(labels)
    if num_clients * min_size > len(labels):
        raise ValueError(f"num_clients ({num_clients}) x min_size ({min_size}) exceeds the "
                         f"{len(labels)} training samples; set samples_per_client instead")
    classes = np.unique(labels)
    by_class = [np.flatnonzero(labels == k) for k in classes]
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        for idx in by_class:
            idx = rng.permutation(idx)
            p = rng.dirichlet(np.full(num_clients, alpha))
            cuts = (np.cumsum(p)[:-1] * len(idx)).astype(np.int64)
            for c, share in enumerate(np.split(idx, cuts)):
                parts[c].append(share)
        merged = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(m) for m in merged) >= min_size:
            return csr_from_lists(merged)
    raise ValueError(f"dirichlet partition with alpha={alpha} left a client with fewer than {min_size} "
                     f"samples in {max_tries} draws; raise alpha, lower num_clients, or set samples_per_client "
                     f"(each client then draws its class mix ~ Dir(alpha) and that many samples)")


def quantity_partition(num_samples: int, num_clients: int, power: float, rng: np.random.Generator):
    """Disjoint quantity-skew split: client sizes follow a power law, labels are IID.

    LEAF's datasets have power-law numbers of samples per device (Caldas et
    al. 2018, section 3); this draws that skew on any dataset. Client ``c``
    gets weight ``w_c = 1 + Pareto(power)`` (density ``power / w^(power+1)``
    for ``w >= 1``: smaller ``power``, heavier tail), one sample, and a
    multinomial share ``w_c / sum(w)`` of the other ``num_samples -
    num_clients``; the samples are a random permutation cut at those sizes.

    Parameters
    ----------
    num_samples, num_clients : int
    power : float
        Pareto shape, > 0.
    rng : numpy.random.Generator

    Raises
    ------
    ValueError
        Fewer samples than clients.
    """
    if num_clients > num_samples:
        raise ValueError(f"num_clients ({num_clients}) exceeds the {num_samples} training samples")
    weights = 1.0 + rng.pareto(power, size=num_clients)
    sizes = 1 + rng.multinomial(num_samples - num_clients, weights / weights.sum())
    perm = rng.permutation(num_samples)
    return csr_from_lists(np.split(perm, np.cumsum(sizes)[:-1]))


def natural_partition(clients: np.ndarray):
    """The split a dataset comes with: sample ``i`` belongs to client ``clients[i]``.

    Parameters
    ----------
    clients : ndarray of shape (n_samples,), int
        Client numbers 0..C-1, each used at least once.

    Returns
    -------
    offsets, indices : CSR as the module docstring (within a client, samples in file order)

    Raises
    ------
    ValueError
        A client number in 0..max is unused (an empty client).
    """
    clients = np.asarray(clients, dtype=np.int64)
    sizes = np.bincount(clients)
    if clients.size == 0 or (sizes == 0).any():
        raise ValueError("natural partition: every client number from 0 to the largest must hold a sample")
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets, np.argsort(clients, kind="stable").astype(np.int32)


def sampled_partition(labels: np.ndarray, num_clients: int, samples_per_client: int,
                      alpha: float | None, rng: np.random.Generator, chunk: int = 65536):
    """Each client draws its own samples; clients may share samples.

    Client ``c`` draws a label distribution ``q_c ~ Dir(alpha * 1_K)``
    (uniform over classes when ``alpha`` is None, i.e. IID), then
    ``samples_per_client`` labels from ``q_c`` and, for each, a sample of that
    class uniformly. Any number of clients can be registered this way. The
    label skew of Hsu, Qi and Brown 2019 (also Reddi et al. 2021 and pfl's
    Dirichlet partition, which draw without replacement across clients, where
    here clients may share a sample).

    Returns
    -------
    offsets : ndarray of shape (num_clients + 1,), int64
    indices : ndarray of shape (num_clients * samples_per_client,), int32
    """
    labels = np.asarray(labels)
    classes, inverse = np.unique(labels, return_inverse=True)
    order = np.argsort(inverse, kind="stable").astype(np.int32)
    counts = np.bincount(inverse, minlength=len(classes))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    k = len(classes)
    indices = np.empty(num_clients * samples_per_client, dtype=np.int32)
    chunk = max(1, min(chunk, (1 << 22) // samples_per_client))  # bounds the (m, s, k) temporaries
    for lo in range(0, num_clients, chunk):
        hi = min(lo + chunk, num_clients)
        m = hi - lo
        if alpha is None:
            cls = rng.integers(0, k, size=(m, samples_per_client))
        else:
            q = rng.dirichlet(np.full(k, alpha), size=m)
            cdf = np.cumsum(q, axis=1)
            cdf[:, -1] = 1.0
            u = rng.random((m, samples_per_client))
            cls = np.minimum((u[:, :, None] > cdf[:, None, :]).sum(axis=2), k - 1)
        within = (rng.random((m, samples_per_client)) * counts[cls]).astype(np.int64)
        indices[lo * samples_per_client:hi * samples_per_client] = order[starts[cls] + within].reshape(-1)
    offsets = np.arange(num_clients + 1, dtype=np.int64) * samples_per_client
    return offsets, indices
