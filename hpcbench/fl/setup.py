"""Build a federated job's parts from its config: data, traces, model, codecs, selector, virtual clock.

Free of MPI at import (the communicator is an argument), so analysis scripts
can redraw a run's clock from its stored config without starting MPI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hpcbench.runtime.errors import InputError

if TYPE_CHECKING:
    from mpi4py import MPI

    from hpcbench.fl.clock import VirtualClock
    from hpcbench.fl.config import FLConfig
    from hpcbench.fl.contracts import Aggregator, FederatedDataset, FLModel, Selector

__all__ = ["Setup", "prepare", "uses_torch"]


@dataclass
class Setup:
    """Everything a job needs, built identically on every rank."""

    cfg: FLConfig
    dataset: FederatedDataset
    model: FLModel
    """the model clients train: the torch model, or its numpy twin on a rank that does not use torch (:func:`uses_torch`)"""
    clock: VirtualClock
    selector: Selector
    aggregator: Aggregator
    model_bytes: int
    num_parameters: int
    uplink: object = None
    downlink: object = None
    server_model: object = None
    """the model rank 0 starts from and evaluates: the numpy twin whenever a torch-free engine could train the job
    (whatever engine trains it), else ``model``"""
    device: object = None
    """this rank's :class:`hpcbench.runtime.device.Device` (``device:``): where ``model`` trains clients"""
    server_engine: object = None
    """the :class:`hpcbench.fl.engines.ClientEngine` class whose model kind ``server_model`` is
    (:func:`hpcbench.fl.engines.server_engine`): its initial parameters, test set and evaluation"""


def _load_trace(kind: str, tc):
    from hpcbench.traces import TraceError, load_trace

    path = None if tc.path == "bundled" else tc.path
    options = {"column": tc.column} if tc.format == "flhetbench-device" else {}
    try:
        trace = load_trace(tc.format, path, **options)
    except (TraceError, ValueError, OSError) as exc:
        raise InputError(f"traces.{kind}: {exc}") from None
    if tc.format == "fedscale-capacity":
        if kind not in ("device", "bandwidth"):
            raise InputError(f"traces.{kind}.format: 'fedscale-capacity' gives device and bandwidth "
                             f"traces, not {kind}")
        trace = trace[0] if kind == "device" else trace[1]
    needed = {"device": "sample_latency_s", "bandwidth": "sample_kbps", "availability": "is_available"}[kind]
    if not hasattr(trace, needed):
        raise InputError(f"traces.{kind}.format: {tc.format!r} is not a {kind} trace format")
    return trace


def uses_torch(cfg, comm: MPI.Comm | None = None) -> bool:
    """Whether this rank of ``comm`` needs torch for job ``cfg``.

    A rank that trains clients with an engine that ``needs_torch``
    (``sequential``, ``batched``) does, and so does every rank of a job no
    torch-free engine could train (:func:`hpcbench.fl.engines.server_engine`:
    compression codecs, FLOPs counting, FedBuff's loop, a model without a
    numpy twin). Rank 0 of a multi-rank job trains no client: for any other
    job it aggregates and evaluates with the numpy twin and never imports
    torch (about 180 MB of resident memory), whatever the engine.
    """
    from hpcbench.fl.engines import ENGINES

    if not ENGINES[cfg.engine].needs_torch:
        return False
    if _server_engine(cfg).needs_torch:
        return True
    return comm is None or comm.size == 1 or comm.rank != 0


def _server_engine(cfg):
    """The engine whose model kind rank 0 starts from and evaluates (:func:`hpcbench.fl.engines.server_engine`)."""
    from hpcbench.fl.engines import server_engine

    return server_engine(cfg.engine_job(), cfg.engine)


def prepare(cfg, comm: MPI.Comm | None = None) -> Setup:
    """Load data, traces and model; build the registry and the virtual clock.

    Collective over ``comm`` when given (rank 0 loads the dataset's inputs
    and broadcasts them). On a rank that does not use torch
    (:func:`uses_torch`) the model is the numpy twin
    (:func:`hpcbench.fl.models.build_numpy_model`) and nothing here imports
    torch. Rank 0 starts from and evaluates ``server_model``: the numpy twin
    whenever the job allows the numpy engine, so that its evaluation is the
    same computation at any world size; under a torch engine the twin holds
    the torch model's initial parameters (sent by rank 1 when rank 0 has no
    torch).

    Raises
    ------
    InputError
        A trace or data file is missing or malformed, or the config does not fit
        the data (e.g. more participants than registered clients).
    """
    from hpcbench.fl.aggregation import AGGREGATORS
    from hpcbench.fl.clock import ClientRegistry, VirtualClock, expected_durations
    from hpcbench.fl.data import build_dataset
    from hpcbench.fl.models import build_model, build_numpy_model
    from hpcbench.fl.selection import SELECTORS
    from hpcbench.fl.config import clock_settings

    torch_here = uses_torch(cfg, comm)
    where = _client_device(cfg, comm, torch_here)   # first: a missing GPU is an input error before any loading
    try:
        dataset = build_dataset(cfg.dataset, cfg.seed, comm)
    except (ValueError, OSError) as exc:
        raise InputError(f"dataset: {exc}") from None
    if cfg.participants > dataset.num_clients:
        raise InputError(f"participants: {cfg.participants} exceeds the {dataset.num_clients} registered "
                         f"clients of dataset {cfg.dataset.name!r}")
    device = _load_trace("device", cfg.traces.device)
    bandwidth = _load_trace("bandwidth", cfg.traces.bandwidth)
    availability = _load_trace("availability", cfg.traces.availability)
    registry = ClientRegistry(dataset.num_clients, dataset.client_sizes(), len(device), len(bandwidth),
                              len(availability), cfg.seed)
    if torch_here:
        model = build_model(cfg.model, dataset, cfg.seed)
        num_parameters = sum(p.numel() for p in model.parameters())
        model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        uplink, downlink = _codecs(cfg, model)
    else:  # no compression, no FLOPs charging: a torch-free engine trains the job
        model = build_numpy_model(cfg.model, dataset, cfg.seed)
        num_parameters, model_bytes = model.num_parameters, 4 * model.num_parameters  # float32
        uplink = downlink = None
    _check_round_memory(cfg, num_parameters, comm)
    from hpcbench.fl.engines import ENGINES

    server_engine = _server_engine(cfg)
    server_model = model
    if ENGINES[cfg.engine].needs_torch and not server_engine.needs_torch:
        server_model = _numpy_server_model(cfg, model, dataset, comm)
    down_bytes = model_bytes if downlink is None else downlink.wire_bytes
    up_bytes = model_bytes if uplink is None else uplink.wire_bytes
    work = cfg.local_steps * cfg.batch_size
    compute_scale = _compute_scale(cfg, model, dataset)
    selector = SELECTORS[cfg.selection.name](
        cfg.selection, cfg.seed, dataset.client_sizes(),
        expected_durations(registry, device, bandwidth, down_bytes, work, compute_scale, up_bytes),
        work)
    clock = VirtualClock(clock_settings(cfg), registry, device, bandwidth, availability, model_bytes, selector, compute_scale)
    clock.down_bytes, clock.up_bytes = down_bytes, up_bytes
    if where.is_cuda:   # last: the codecs, the FLOPs count and rank 1's initial vector read the CPU model
        model = model.to(where.torch)
    return Setup(cfg, dataset, model, clock, selector, AGGREGATORS[cfg.aggregator.name](cfg.aggregator),
                 model_bytes, num_parameters, uplink, downlink, server_model, where, server_engine)


def _check_round_memory(cfg, num_parameters: int, comm) -> None:
    """Exit 2 on every rank when a round's updates cannot fit on the aggregator (:func:`round_updates_error`).

    Rank 0 (the aggregator) reads its node's available memory and shares it, so every rank decides alike.
    """
    from hpcbench.fl.limits import round_updates_error
    from hpcbench.runtime.memory import available_bytes

    free = available_bytes() if comm is None or comm.rank == 0 else None
    if comm is not None and comm.size > 1:
        free = comm.bcast(free, root=0)
    error = round_updates_error(cfg, num_parameters, free, comm.size if comm is not None else 1)
    if error is not None:
        raise InputError(error)


def _client_device(cfg, comm, torch_here: bool):
    """This rank's device for training clients (collective over ``comm``; :func:`select_device`).

    Only a rank that trains clients with a torch engine takes a GPU: rank 0 of a multi-rank job
    aggregates and evaluates on the CPU. Without ``comm`` (one process that never starts MPI, e.g. an
    analysis script redrawing a job's clock) the device is picked alone.

    Raises
    ------
    InputError
        ``device: cuda`` and no GPU visible to some executor rank (on every rank).
    """
    from hpcbench.runtime.device import select_device

    from hpcbench.fl.engines import ENGINES

    trains = torch_here and ENGINES[cfg.engine].needs_torch and (comm is None or comm.size == 1 or comm.rank != 0)
    return select_device(comm, cfg.device, "device", needed=trains)


def _numpy_server_model(cfg, model, dataset, comm):
    """The numpy twin rank 0 starts from and evaluates under a torch engine, with the torch model's initial parameters.

    Collective over ``comm`` when it has several ranks: rank 0 holds no
    torch (its ``model`` is already the twin), so rank 1 sends it the
    initial vector of its torch model (torch's initialisation seeded with
    ``seed``, the same on every rank). At one rank the twin copies the
    rank's own torch model.
    """
    from hpcbench.fl.models import build_numpy_model, flat_parameters

    if comm is None or comm.size == 1:
        twin = build_numpy_model(cfg.model, dataset, cfg.seed)
        twin.initial = flat_parameters(model).numpy().copy()
        return twin
    from hpcbench.runtime.wait import Backoff, sleep_bcast

    flat = flat_parameters(model).numpy() if comm.rank == 1 else None
    flat = sleep_bcast(comm, flat, root=1, backoff=Backoff(first_s=1e-3, max_s=5e-2))
    if comm.rank == 0:
        model.initial = np.array(flat, dtype=np.float32)
    return model


def _compute_scale(cfg, model, dataset) -> float:
    """The virtual clock's factor on the per-sample latency.

    ``traces.compute_scale``, times under ``traces.compute_cost: flops`` the
    model's cost ratio to the device trace's reference model
    (:func:`hpcbench.fl.compute_cost.compute_cost_ratio`, on up to 8 test
    examples; the same on every rank).
    """
    if cfg.traces.compute_cost == "trace":
        return cfg.traces.compute_scale
    from hpcbench.fl.compute_cost import compute_cost_ratio

    x = dataset.test_set()[0][:8]
    try:
        return cfg.traces.compute_scale * compute_cost_ratio(model, x, cfg.traces.device.column)
    except ValueError as exc:
        raise InputError(f"traces.compute_cost: {exc}") from None


def _codecs(cfg, model):
    """Uplink and downlink codecs (see :mod:`hpcbench.fl.uplink`), None for an uncompressed direction.

    The caller has the virtual clock charge their ``wire_bytes``. A direction
    named ``none`` gets no codec: ``UpdateCodec`` with ``none`` is the
    identity, bit for bit (tested), but costs about 0.25 ms per client update
    on rank 0, a fifth of a 1,300-participant round.
    """
    from hpcbench.fl.uplink import UpdateCodec, model_tensors

    tensors = model_tensors(model)
    return tuple(UpdateCodec(section, tensors, cfg.seed) if section.enabled else None
                 for section in (cfg.uplink_compression, cfg.downlink_compression))
