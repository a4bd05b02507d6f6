"""Set up and run a federated job: every input is checked before any training or output."""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from mpi4py import MPI

from hpcbench.runtime.errors import InputError
from hpcbench.runtime.lifecycle import Job

if TYPE_CHECKING:
    from hpcbench.fl.clock import VirtualClock
    from hpcbench.fl.config import FLConfig
    from hpcbench.fl.contracts import Aggregator, FederatedDataset, FLModel, Selector

__all__ = ["InputError", "Setup", "prepare", "FLJob"]


@dataclass
class Setup:
    """Everything a job needs, built identically on every rank."""

    cfg: FLConfig
    dataset: FederatedDataset
    model: FLModel
    clock: VirtualClock
    selector: Selector
    aggregator: Aggregator
    model_bytes: int
    uplink: object = None
    downlink: object = None


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
    from hpcbench.fl.clock import ClientRegistry, VirtualClock, expected_durations
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
    uplink, downlink = _codecs(cfg, model)
    down_bytes = model_bytes if downlink is None else downlink.wire_bytes
    up_bytes = model_bytes if uplink is None else uplink.wire_bytes
    work = cfg.local_steps * cfg.batch_size
    compute_scale = _compute_scale(cfg, model, dataset)
    selector = SELECTORS[cfg.selection.name](
        cfg.selection, cfg.seed, dataset.client_sizes(),
        expected_durations(registry, device, bandwidth, down_bytes, work, compute_scale, up_bytes),
        work)
    clock = VirtualClock(cfg, registry, device, bandwidth, availability, model_bytes, selector, compute_scale)
    clock.down_bytes, clock.up_bytes = down_bytes, up_bytes
    del torch
    return Setup(cfg, dataset, model, clock, selector, AGGREGATORS[cfg.aggregator.name](cfg.aggregator),
                 model_bytes, uplink, downlink)


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


class FLJob(Job):
    """``python -m hpcbench.fl``: the federated emulation under the shared lifecycle.

    Rank 0 aggregates, the other ranks execute emulated clients; rank 0
    writes the HDF5 file named by ``cfg.output`` only after every input has
    been checked on every rank (see :mod:`hpcbench.runtime.lifecycle`).
    """

    prog = "hpcbench fl"
    kind = "fl"
    description = ("Emulate federated learning on MPI ranks (FedScale design) and write HDF5 results.\n"
                   "Rank 0 aggregates; ranks 1..P-1 execute emulated clients.")
    epilog = ("Every config key can be overridden: --rounds 20 --dataset.alpha 0.1 "
              "--traces.availability.format none; strategies: --selection oort --aggregator fedyogi "
              "--aggregator.eta 0.01")

    def add_arguments(self, parser) -> None:
        from hpcbench.fl.config import FLConfig
        from hpcbench.runtime.config import add_config_arguments

        parser.add_argument("--fedscale-conf", metavar="CONF.yml", default=None,
                            help="FedScale job file: its job_conf keys set the config (docs/fl.md); the YAML "
                                 "job file and --KEY VALUE flags override them")
        parser.add_argument("--resume", metavar="CKPT", default=None,
                            help="continue the run that wrote checkpoint CKPT (same config; rounds, progress, "
                                 "checkpoint keys and executor_concurrency may change) and append to its "
                                 "results file")
        add_config_arguments(parser, FLConfig)

    def configure(self, args) -> None:
        from hpcbench.fl.config import FLConfig
        from hpcbench.runtime.config import ConfigError, config_overrides, load_config

        tree, source = None, args.config or "defaults"
        if args.fedscale_conf is not None:
            from hpcbench.fl.fedscale_conf import read_fedscale_conf

            job = read_fedscale_conf(args.fedscale_conf)
            tree, source = job.tree, f"FedScale file {args.fedscale_conf}" + (
                f" and {args.config}" if args.config else "")
            if job.ignored and self.comm.rank == 0:
                print(f"hpcbench fl: FedScale keys ignored (deployment only, or no effect here): "
                      f"{', '.join(job.ignored)}", flush=True)
        try:
            self.cfg = load_config(FLConfig, args.config, config_overrides(args), tree)
        except ConfigError as exc:
            if tree is None:
                raise
            raise ConfigError(f"{exc}\n(FedScale file {args.fedscale_conf}: its job_conf keys set the keys "
                              f"above as docs/fl.md lists, e.g. num_participants -> participants)") from None
        self.source = source
        from hpcbench.runtime.lifecycle import format_output_path

        format_output_path(self.cfg.checkpoint, {"output": "x.h5", "job_name": self.cfg.job_name}, "checkpoint")
        self.resume = None if args.resume is None else self._load_resume(args.resume)

    def _load_resume(self, path: str) -> dict:
        """The checkpoint to continue (every rank reads it), checked against this run's config.

        Raises
        ------
        InputError
            Missing or corrupt file, a config that differs in keys other than
            :data:`hpcbench.fl.checkpoint.RESUMABLE_KEYS` (named), or fewer
            ``rounds`` than the checkpoint has done.
        """
        from hpcbench.fl.checkpoint import RESUMABLE_KEYS, config_differences, load_checkpoint

        state = load_checkpoint(path)
        try:
            differ = config_differences(state["config"], self.cfg.model_dump())
            step, output = int(state["step"]), str(state["output"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"--resume: {path!r} is an incomplete checkpoint ({type(exc).__name__}: {exc})") \
                from None
        if differ:
            raise InputError(f"--resume: the config differs from the checkpoint's in {', '.join(differ)}; only "
                             f"{', '.join(RESUMABLE_KEYS)} may change on resume")
        if self.cfg.rounds < step:
            raise InputError(f"rounds: {self.cfg.rounds} is less than the {step} the checkpoint {path!r} has done")
        if not output:
            raise InputError(f"--resume: checkpoint {path!r} names no results file to append to")
        if self.comm.rank != 0:  # executors need only the position
            state = {"step": step, "output": output}
        return state

    def append_output(self):
        return None if self.resume is None else self.resume["output"]

    def prepare(self) -> None:
        import torch

        from hpcbench.runtime.heap import fix_mmap_threshold

        torch.set_num_threads(1)
        fix_mmap_threshold()  # each round's update buffers go back to the system when freed
        self.setup = prepare(self.cfg, self.comm)

    def output(self):
        return self.cfg.output, {"job_name": self.cfg.job_name}

    def config_record(self):
        return self.cfg.model_dump()

    def provenance(self) -> dict:
        setup, cfg = self.setup, self.cfg
        return dict(num_parameters=sum(p.numel() for p in setup.model.parameters()),
                    model_bytes=setup.model_bytes, registered_clients=setup.dataset.num_clients,
                    client_metadata_bytes=setup.dataset.metadata_nbytes() + setup.clock.registry.nbytes(),
                    job_name=cfg.job_name, target_accuracy=cfg.target_accuracy,
                    selection=cfg.selection.name, aggregator=cfg.aggregator.name,
                    time_to_accuracy_s=math.nan, rounds_to_accuracy=-1, mode=cfg.mode,
                    uplink_wire_bytes=setup.clock.up_bytes, downlink_wire_bytes=setup.clock.down_bytes)

    def run(self, results) -> int:
        from hpcbench.fl.asynchronous_loop import AsyncEmulation
        from hpcbench.fl.emulation import Emulation

        cfg, setup, comm = self.cfg, self.setup, self.comm
        if comm.rank == 0:
            from hpcbench.fl.header import describe

            print(describe(cfg, str(results.path), comm.size, self.source), flush=True)
        progress = None
        if comm.rank == 0 and cfg.progress:
            from tqdm import tqdm
            progress = tqdm(total=cfg.rounds, initial=self.resume["step"] if self.resume else 0,
                            desc=cfg.job_name, unit="round", file=sys.stderr)
        emu = (AsyncEmulation if cfg.mode == "async" else Emulation)(
            cfg, comm, setup.dataset, setup.model, setup.clock, setup.aggregator)
        emu.uplink, emu.downlink = setup.uplink, setup.downlink
        if self.resume is not None:
            emu.resume, emu.resume_step = (self.resume if comm.rank == 0 else None), int(self.resume["step"])
        if comm.rank == 0 and cfg.checkpoint_interval:
            from hpcbench.runtime.lifecycle import format_output_path

            emu.checkpoint_path = format_output_path(cfg.checkpoint, {"output": str(results.path),
                                                                      "job_name": cfg.job_name}, "checkpoint")
        try:
            summary = emu.run(results, progress)
        finally:
            if progress is not None:
                progress.close()
        if comm.rank == 0:
            results.write_array("model/final_parameters", summary.final_parameters, "1",
                                "global model parameters after the last round (flat, float32)")
            results.set_attrs(final_test_accuracy=summary.final_accuracy, rounds_completed=summary.rounds,
                              wall_s=summary.wall_s, final_parameters_sha256=hashlib.sha256(
                                  np.ascontiguousarray(summary.final_parameters, np.float32).tobytes()).hexdigest())
            tta = ("not reached" if summary.rounds_to_accuracy < 0 else
                   f"{summary.time_to_accuracy_s:.1f} s virtual (round {summary.rounds_to_accuracy})")
            unit = "server updates" if cfg.mode == "async" else "rounds"
            print(f"{cfg.job_name}: {summary.rounds} {unit}, final test accuracy "
                  f"{summary.final_accuracy:.4f}, time-to-accuracy {cfg.target_accuracy:.2f}: {tta}, "
                  f"wall {summary.wall_s:.1f} s\nresults: {results.path}")
        return 0
