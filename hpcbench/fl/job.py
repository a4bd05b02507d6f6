"""Set up and run a federated job: every input is checked before any training or output."""

from __future__ import annotations

import hashlib
import math
import sys

import numpy as np

from hpcbench.fl.declaration import FL
from hpcbench.fl.setup import Setup, prepare
from hpcbench.lifecycle import Job
from hpcbench.runtime.errors import InputError

__all__ = ["InputError", "Setup", "prepare", "FLJob", "build_rounds"]


def _file_keys(path) -> dict:
    """The dotted keys a YAML job file sets (empty without a file; its own errors come later, from load_config)."""
    if path is None:
        return {}
    from hpcbench.runtime.config import ConfigError, read_yaml_mapping

    try:
        tree = read_yaml_mapping(path)
    except ConfigError:
        return {}
    out: dict = {}

    def walk(node, prefix):
        for key, value in node.items():
            out[prefix + str(key)] = value
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")

    walk(tree, "")
    return out


class FLJob(Job):
    """``python -m hpcbench.fl``: the federated emulation under the shared lifecycle.

    Rank 0 aggregates, the other ranks execute emulated clients; rank 0
    writes the HDF5 file named by ``cfg.output`` only after every input has
    been checked on every rank (see :mod:`hpcbench.lifecycle`).
    """

    prog = "hpcbench fl"
    kind = FL.kind
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

        tree, source, overrides = None, args.config or "defaults", config_overrides(args)
        self.fedscale = None
        if args.fedscale_conf is not None:
            from hpcbench.fl.fedscale_conf import read_fedscale_conf

            in_file = _file_keys(args.config)
            self.fedscale = job = read_fedscale_conf(args.fedscale_conf, {**in_file, **overrides},
                                                     {k: f"{args.config}'s {k}" for k in in_file if k not in overrides})
            tree, source = job.tree, f"FedScale file {args.fedscale_conf}" + (
                f" and {args.config}" if args.config else "")
        try:
            self.cfg = load_config(FLConfig, args.config, overrides, tree)
        except ConfigError as exc:
            if tree is None:
                raise
            raise ConfigError(f"{exc}\n(FedScale file {args.fedscale_conf}: its job_conf keys set the keys "
                              f"above as docs/fl.md lists, e.g. num_participants -> participants)") from None
        self.source = source
        self._check_trace_files()
        from hpcbench.runtime.output_names import format_output_path

        format_output_path(self.cfg.checkpoint, {"output": "x.h5", "job_name": self.cfg.job_name}, "checkpoint")
        self.resume_path = None
        self.resume = None if args.resume is None else self._load_resume(args.resume)

    def _check_trace_files(self) -> None:
        """Each trace file named is a regular file within the trace bound, before anything is loaded.

        Raises
        ------
        InputError
            ``traces.KIND.path`` names a device, a FIFO, a directory, a missing
            or an oversized file (docs/architecture.md, "Data-safety guarantees").
        """
        from hpcbench.runtime.bounded import check_input_file

        traces = self.cfg.traces
        for kind in ("device", "bandwidth", "availability"):
            section = getattr(traces, kind)
            path = getattr(section, "path", None)
            if path is not None and path != "bundled" and section.format != "none":
                check_input_file(path, f"traces.{kind}.path", "trace", "trace file")

    def _load_resume(self, path: str) -> dict:
        """The checkpoint to continue (every rank reads and verifies it), checked against this run's config.

        Raises
        ------
        InputError
            Missing, corrupt (digest) or incomplete (schema) file, a config
            that differs in keys other than
            :data:`hpcbench.fl.checkpoint.RESUMABLE_KEYS` (named), or fewer
            ``rounds`` than the checkpoint has done.
        """
        from hpcbench.runtime.bounded import check_input_file

        check_input_file(path, "--resume", "checkpoint", "checkpoint")   # before torch is imported to read it
        from hpcbench.fl.checkpoint import RESUMABLE_KEYS, config_differences, load_checkpoint

        state = load_checkpoint(path)
        try:
            differ = config_differences(state["config"], self.cfg.record())
        except (ValueError, TypeError, RecursionError) as exc:
            raise InputError(f"--resume: {path!r} holds an unreadable config ({type(exc).__name__})") from None
        step, output = int(state["step"]), str(state["output"])
        if differ:
            raise InputError(f"--resume: the config differs from the checkpoint's in {', '.join(differ)}; only "
                             f"{', '.join(RESUMABLE_KEYS)} may change on resume")
        if state["mode"] != self.cfg.mode:
            raise InputError(f"--resume: {path!r} is a {state['mode']} checkpoint; this job's mode is {self.cfg.mode!r}")
        if self.cfg.rounds < step:
            raise InputError(f"rounds: {self.cfg.rounds} is less than the {step} the checkpoint {path!r} has done")
        self.resume_path = path
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
        self.fedscale_notes = []
        if self.fedscale is not None:
            from hpcbench.fl.fedscale_conf import client_size_notes

            self.fedscale_notes = self.fedscale.notes + client_size_notes(self.fedscale.filters,
                                                                           self.setup.dataset.client_sizes())
            if self.comm.rank == 0:  # after every rank's checks: nothing is printed for a job that exits 2
                if self.fedscale.ignored:
                    print(f"hpcbench fl: FedScale keys ignored (deployment only, no effect here, or overridden): "
                          f"{', '.join(self.fedscale.ignored)}", flush=True)
                for note in self.fedscale_notes:
                    print(f"hpcbench fl: FedScale meaning: {note}", flush=True)
        if self.resume is not None and self.comm.rank == 0:
            from hpcbench.fl.resume import verify_resume

            verify_resume(self.resume, self.setup, self.resume_path)

    def outputs(self, results):
        if not self.cfg.checkpoint_interval:
            return ()
        from hpcbench.runtime.output_names import format_output_path
        from hpcbench.runtime.outputs import Output
        from hpcbench.runtime.paths import same_file

        path = format_output_path(self.cfg.checkpoint, {"output": str(results), "job_name": self.cfg.job_name},
                                  "checkpoint")
        resumed = self.resume is not None and same_file(path, self.resume_path)
        return (Output("checkpoint", path, may_exist=resumed),)

    def fault_steps(self) -> int:
        return self.cfg.rounds

    def memory_need(self):
        from hpcbench.fl.limits import memory_need

        return memory_need(self.cfg)

    def output(self):
        return self.cfg.output, {"job_name": self.cfg.job_name}

    def config_record(self):
        return self.cfg.record()

    def provenance(self) -> dict:
        from hpcbench.datasets.callables import user_callables

        setup, cfg = self.setup, self.cfg
        return dict(num_parameters=setup.num_parameters,
                    model_bytes=setup.model_bytes, registered_clients=setup.dataset.num_clients,
                    client_metadata_bytes=setup.dataset.metadata_nbytes() + setup.clock.registry.nbytes(),
                    job_name=cfg.job_name, target_accuracy=cfg.target_accuracy,
                    selection=cfg.selection.name, aggregator=cfg.aggregator.name,
                    time_to_accuracy_s=math.nan, rounds_to_accuracy=-1, mode=cfg.mode,
                    uplink_wire_bytes=setup.clock.up_bytes, downlink_wire_bytes=setup.clock.down_bytes,
                    fedscale_notes="\n".join(self.fedscale_notes),
                    user_callables=user_callables(cfg.dataset.name, cfg.model.name))

    def run(self, results) -> int:
        cfg, setup, comm = self.cfg, self.setup, self.comm
        if comm.rank == 0:
            from hpcbench.fl.header import describe

            print(describe(cfg, str(results.path), comm.size, self.source), flush=True)
        progress = None
        if comm.rank == 0 and cfg.progress:
            from hpcbench.runtime.progress import progress_bar
            progress = progress_bar(cfg.rounds, cfg.job_name, "round", sys.stderr,
                                    initial=self.resume["step"] if self.resume else 0)
        checkpoint_path = None
        if comm.rank == 0 and cfg.checkpoint_interval:
            checkpoint_path = self.output_path("checkpoint")
        driver = build_rounds(cfg, setup, comm, checkpoint_path, self.resume)
        from hpcbench.fl.rounds.recorder import RoundRecorder

        try:
            summary = driver.run(RoundRecorder(results if comm.rank == 0 else None, progress))
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
            print(f"{cfg.job_name}: {summary.rounds} {driver.step_unit}, final test accuracy "
                  f"{summary.final_accuracy:.4f}, time-to-accuracy {cfg.target_accuracy:.2f}: {tta}, "
                  f"wall {summary.wall_s:.1f} s\nresults: {results.path}")
        return 0


def build_rounds(cfg, setup: Setup, comm, checkpoint_path=None, resume: dict | None = None):
    """The round driver of job ``cfg`` on ``comm``, built from its parts (collective: the executor pool's placement).

    The only place that reads the config for the run: the parts get typed
    settings (:class:`hpcbench.fl.settings.FLSettings`) and the objects
    :func:`prepare` built.

    Parameters
    ----------
    cfg : hpcbench.fl.config.FLConfig
    setup : Setup
        From :func:`prepare` on this rank.
    comm : mpi4py.MPI.Comm
    checkpoint_path : str or pathlib.Path, optional
        Where rank 0 writes checkpoints every ``checkpoint_interval`` steps (None: nowhere).
    resume : dict, optional
        The loaded checkpoint to continue (rank 0 uses it whole; the others read its ``step``).

    Returns
    -------
    object
        The ``ROUND_DRIVERS[cfg.mode]`` driver; ``run(recorder)`` runs the job.
    """
    from hpcbench.fl.config import fl_settings
    from hpcbench.fl.engines import ENGINES
    from hpcbench.fl.executors.pool import ExecutorPool
    from hpcbench.fl.rounds import ROUND_DRIVERS
    from hpcbench.fl.rounds.codecs import LinkCodecs
    from hpcbench.fl.rounds.parts import RoundParts

    settings = fl_settings(cfg)
    driver = ROUND_DRIVERS[settings.rounds.mode].load()
    pool = ExecutorPool(comm, settings.rounds.executor_concurrency, setup.num_parameters, driver.capacity(settings),
                        settings.rounds.summed_weighting)
    engine = ENGINES[settings.engine](setup.model, setup.dataset, settings.local, setup.aggregator)
    codecs = LinkCodecs(setup.uplink, setup.downlink, setup.clock)
    evaluator = checkpointer = None
    if comm.rank == 0:
        import json

        from hpcbench.fl.rounds.checkpointer import Checkpointer
        from hpcbench.fl.rounds.evaluator import Evaluator

        evaluator = Evaluator(settings.rounds, setup.server_engine, setup.server_model, setup.dataset)
        checkpointer = Checkpointer(checkpoint_path, settings.rounds.checkpoint_interval,
                                    json.dumps(cfg.record(), sort_keys=True, default=str), settings.rounds.mode,
                                    setup.aggregator, setup.clock, codecs)
    return driver(RoundParts(settings, pool, engine, setup.clock, setup.aggregator, setup.dataset.client_sizes(),
                             codecs, evaluator, checkpointer, resume if comm.rank == 0 else None,
                             0 if resume is None else int(resume["step"])))
