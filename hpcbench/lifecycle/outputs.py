"""The output stage of the lifecycle: every file of a run planned, checked, locked, and the results file opened.

Rank 0 only. :func:`check_outputs_early` checks the rules once the config is
known (before :meth:`Job.prepare`: a refusal costs no data loading);
:func:`open_results` checks them again, locks every output for the run
(:func:`hpcbench.runtime.outputs.claim_outputs`) and creates the results file
(or reopens the one a resumed run continues); :func:`release_outputs` drops
the locks when the run ends.
"""

from __future__ import annotations

import argparse
import os
import uuid
from pathlib import Path
from typing import Mapping

from hpcbench.lifecycle.job import OWN_DESTS, Job
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.output_names import format_output_path
from hpcbench.runtime.outputs import Output

__all__ = ["check_outputs_early", "open_results", "release_outputs", "check_tensorboard"]


def input_files(job: Job, args: argparse.Namespace | None) -> dict[str, str]:
    """The run's input files by key: :meth:`Job.inputs` and every flag or config value that names an existing file."""
    found: dict[str, str] = dict(job.inputs())

    def visit(key: str, value) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                visit(f"{key}.{k}" if key else str(k), v)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                visit(f"{key}[{i}]", v)
        elif isinstance(value, (str, os.PathLike)) and 0 < len(os.fspath(value)) < 4096:
            try:
                if Path(value).is_file():
                    found.setdefault(key, os.fspath(value))
            except (OSError, ValueError):
                pass

    if args is not None:
        visit("", {k.removeprefix("key:"): v for k, v in vars(args).items() if k not in OWN_DESTS})
    try:
        visit("", job.config_record())
    except Exception:  # noqa: BLE001 - a config without a record has no more inputs
        pass
    return found


def declared_outputs(job: Job, results: Output, tensorboard: str | None) -> list[Output]:
    """The results file, the job's own outputs and the lifecycle's (``--tensorboard``'s run folder)."""
    outputs = [results, *job.outputs(results.p)]
    if tensorboard:
        from hpcbench.results.tensorboard import run_logdir

        outputs.append(Output("--tensorboard", run_logdir(tensorboard, results.p), folder=True))
    return outputs


def inputs_besides(outputs: list[Output], inputs: dict[str, str]) -> dict[str, str]:
    """Inputs but the values of the outputs' own keys (``output: o.h5`` names the output) and what a run continues."""
    from hpcbench.runtime.paths import same_file

    keys = {o.key.lstrip("-") for o in outputs}
    return {k: v for k, v in inputs.items()
            if k.rsplit(".", 1)[-1] not in keys and not any(o.may_exist and same_file(o.p, v) for o in outputs)}


def planned_outputs(job: Job, start: str, tensorboard: str | None) -> list[Output]:
    """Every output of the run, the results file first (``[]`` for a job without one)."""
    existing = job.append_output()
    if existing is not None:
        results = Output("output", existing, may_exist=True)
    else:
        spec = job.output()
        if spec is None:
            return []
        template, fields = spec
        stamp = start.replace(":", "").replace("-", "").replace("+0000", "Z")
        results = Output("output", format_output_path(template, {**fields, "start": stamp}))
    return declared_outputs(job, results, tensorboard)


def check_outputs_early(job: Job, args) -> str | None:
    """The output rules checked once the config is known, before :meth:`Job.prepare` (rank 0): a refusal costs
    no data loading. They are checked again, and the outputs locked, when the run opens them."""
    from hpcbench.runtime import provenance
    from hpcbench.runtime.outputs import check_outputs, refuse_in_use

    try:
        outputs = planned_outputs(job, provenance.utc_now(), args.tensorboard)
        check_outputs(outputs, args.overwrite, inputs_besides(outputs, input_files(job, args)))
        refuse_in_use(outputs)
    except InputError as exc:
        return str(exc)
    return None


def open_results(job: Job, overwrite: bool, start: str, attrs: dict, args=None, tensorboard: str | None = None):
    """Check, lock and open every output of the run (rank 0): nothing is created before all pass."""
    from hpcbench.results import ResultsFile
    from hpcbench.runtime.outputs import check_outputs, claim_outputs

    run_id = uuid.uuid4().hex
    outputs = planned_outputs(job, start, tensorboard)
    if not outputs:
        return None
    results = outputs[0]
    existing = job.append_output()
    check_outputs(outputs, overwrite, inputs_besides(outputs, input_files(job, args)))
    claimed = claim_outputs(outputs, run_id)
    try:
        if existing is not None:
            try:
                opened = ResultsFile.reopen(existing, job.kind, job.config_record(),
                                            {"resumed_at": start, "fault_injection": attrs.get("fault_injection", "")},
                                            lock=claimed["output"])
            except (OSError, ValueError) as exc:
                raise InputError(f"output: cannot append to {str(existing)!r}: {exc}") from None
        else:
            path = results.p
            try:
                opened = ResultsFile(path, job.kind, job.config_record(), {**attrs, "run_id": run_id},
                                     overwrite=overwrite, lock=claimed["output"])
            except FileExistsError:
                raise InputError(f"output: {str(path)!r} exists; pass --overwrite to replace it") from None
            except OSError as exc:
                raise InputError(f"output: cannot create {str(path)!r}: {exc.strerror or exc}") from None
    except BaseException:
        claimed.undo()
        raise
    job._claimed = claimed
    return opened


def release_outputs(job: Job) -> None:
    """Release the locks of every output of the run (removing the lock files)."""
    claimed = getattr(job, "_claimed", None)
    if claimed is not None:
        claimed.release()


def check_tensorboard() -> None:
    """``--tensorboard DIR``: the package is installed (its folder is checked with the other outputs)."""
    from hpcbench.results.tensorboard import require_tensorboard

    require_tensorboard()
