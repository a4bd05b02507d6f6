"""Set up and run a federated job: every input is checked before any training or output."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from mpi4py import MPI

__all__ = ["InputError", "Setup", "prepare", "run_job"]


class InputError(ValueError):
    """A bad config, trace, data or output path: the job stops with exit code 2."""


@dataclass
class Setup:
    """Everything a job needs, built identically on every rank."""

    cfg: object
    dataset: object
    model: object
    clock: object
    aggregator: object
    model_bytes: int


def _load_trace(kind: str, tc):
    from hpcbench.fl.traces import TraceError, load_trace

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


def prepare(cfg, comm: MPI.Comm | None = None) -> Setup:
    """Load data, traces and model; build the registry and the virtual clock.

    Collective over ``comm`` when given (rank 0 loads the dataset's inputs
    and broadcasts them).

    Raises
    ------
    InputError
        A trace or data file is missing or malformed, or the config does not fit
        the data (e.g. more participants than registered clients).
    """
    import torch

    from hpcbench.fl.aggregation import AGGREGATORS
    from hpcbench.fl.clock import ClientRegistry, VirtualClock
    from hpcbench.fl.data import build_dataset
    from hpcbench.fl.models import build_model
    from hpcbench.fl.selection import SELECTORS

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
    model = build_model(cfg.model, dataset, cfg.seed)
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    clock = VirtualClock(cfg, registry, device, bandwidth, availability, model_bytes,
                         SELECTORS[cfg.selection](cfg))
    del torch
    return Setup(cfg, dataset, model, clock, AGGREGATORS[cfg.aggregator](cfg), model_bytes)


def _agree(comm: MPI.Comm, error: str | None) -> str | None:
    """First error seen by any rank (collective), so that all ranks stop together.

    Ranks reach this point at different times (64 ranks importing torch on 2
    cores take a minute); the early ones sleep in a barrier first instead of
    spinning in MPI's blocking allgather and slowing the late ones.
    """
    from hpcbench.runtime.wait import Backoff, sleep_barrier

    sleep_barrier(comm, Backoff(first_s=1e-3, max_s=5e-2))
    errors = comm.allgather(error)
    return next((e for e in errors if e), None)


def run_job(cfg, comm: MPI.Comm = MPI.COMM_WORLD) -> int:
    """Run ``cfg`` on ``comm``; returns the process exit status (0 ok, 2 bad input).

    Rank 0 writes the HDF5 file named by ``cfg.output`` only after every
    input has been checked on every rank.
    """
    import torch

    from hpcbench.fl.emulation import Emulation
    from hpcbench.results import ResultsFile
    from hpcbench.runtime import provenance

    torch.set_num_threads(1)
    error = None
    setup = None
    try:
        setup = prepare(cfg, comm)
    except InputError as exc:
        error = str(exc)
    error = _agree(comm, error)
    if error:
        if comm.rank == 0:
            print(f"hpcbench fl: error: {error}", file=sys.stderr)
        return 2
    start = provenance.utc_now()
    hostnames = provenance.gather_hostnames(comm)
    results = None
    if comm.rank == 0:
        path = cfg.output_path(start)
        try:
            attrs = provenance.collect(comm, hostnames, cfg.seed, start)
            attrs.update(num_parameters=sum(p.numel() for p in setup.model.parameters()),
                         model_bytes=setup.model_bytes, registered_clients=setup.dataset.num_clients,
                         client_metadata_bytes=setup.dataset.metadata_nbytes()
                         + setup.clock.registry.nbytes(),
                         job_name=cfg.job_name, target_accuracy=cfg.target_accuracy,
                         time_to_accuracy_s=math.nan, rounds_to_accuracy=-1)
            results = ResultsFile(path, "fl", cfg.model_dump(), attrs)
        except OSError as exc:
            error = f"output: cannot create {str(path)!r}: {exc.strerror or exc}"
    error = _agree(comm, error)
    if error:
        if comm.rank == 0:
            print(f"hpcbench fl: error: {error}", file=sys.stderr)
        return 2
    progress = None
    if comm.rank == 0 and cfg.progress:
        from tqdm import tqdm
        progress = tqdm(total=cfg.rounds, desc=cfg.job_name, unit="round", file=sys.stderr)
    emu = Emulation(cfg, comm, setup.dataset, setup.model, setup.clock, setup.aggregator)
    try:
        summary = emu.run(results, progress)
    except BaseException as exc:
        if results is not None:
            results.close("failed", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        if progress is not None:
            progress.close()
    if comm.rank == 0:
        results.write_array("model/final_parameters", summary.final_parameters, "1",
                            "global model parameters after the last round (flat, float32)")
        results.set_attrs(final_test_accuracy=summary.final_accuracy, rounds_completed=summary.rounds,
                          wall_s=summary.wall_s)
        results.close("completed")
        tta = ("not reached" if summary.rounds_to_accuracy < 0 else
               f"{summary.time_to_accuracy_s:.1f} s virtual (round {summary.rounds_to_accuracy})")
        print(f"{cfg.job_name}: {summary.rounds} rounds, final test accuracy {summary.final_accuracy:.4f}, "
              f"time-to-accuracy {cfg.target_accuracy:.2f}: {tta}, wall {summary.wall_s:.1f} s\n"
              f"results: {results.path}")
    return 0
