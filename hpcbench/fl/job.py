"""Set up and run a federated job: every input is checked before any training or output."""

from __future__ import annotations

import hashlib
import math
import sys

import numpy as np

from hpcbench.fl.setup import Setup, prepare
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.lifecycle import Job

__all__ = ["InputError", "Setup", "prepare", "FLJob"]


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
        from hpcbench.runtime.heap import fix_mmap_threshold

        from hpcbench.fl.setup import uses_torch

        if uses_torch(self.cfg, self.comm):  # torch only where a torch engine trains (or the job needs it)
            import torch

            torch.set_num_threads(1)
        fix_mmap_threshold()  # each round's update buffers go back to the system when freed
        self.setup = prepare(self.cfg, self.comm)

    def output(self):
        return self.cfg.output, {"job_name": self.cfg.job_name}

    def config_record(self):
        return self.cfg.model_dump()

    def provenance(self) -> dict:
        setup, cfg = self.setup, self.cfg
        return dict(num_parameters=setup.num_parameters,
                    model_bytes=setup.model_bytes, registered_clients=setup.dataset.num_clients,
                    client_metadata_bytes=setup.dataset.metadata_nbytes() + setup.clock.registry.nbytes(),
                    job_name=cfg.job_name, target_accuracy=cfg.target_accuracy,
                    selection=cfg.selection.name, aggregator=cfg.aggregator.name,
                    time_to_accuracy_s=math.nan, rounds_to_accuracy=-1, mode=cfg.mode,
                    uplink_wire_bytes=setup.clock.up_bytes, downlink_wire_bytes=setup.clock.down_bytes)

    def run(self, results) -> int:
        cfg, setup, comm = self.cfg, self.setup, self.comm
        if cfg.mode == "async":  # imported only when used: FedBuff's loop is torch's
            from hpcbench.fl.asynchronous_loop import AsyncEmulation as loop
        else:
            from hpcbench.fl.emulation import Emulation as loop
        if comm.rank == 0:
            from hpcbench.fl.header import describe

            print(describe(cfg, str(results.path), comm.size, self.source), flush=True)
        progress = None
        if comm.rank == 0 and cfg.progress:
            from tqdm import tqdm
            progress = tqdm(total=cfg.rounds, initial=self.resume["step"] if self.resume else 0,
                            desc=cfg.job_name, unit="round", file=sys.stderr)
        emu = loop(cfg, comm, setup.dataset, setup.model, setup.clock, setup.aggregator, setup.server_model)
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
