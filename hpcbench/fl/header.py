"""What a federated job is about to run, and how to change it: printed once by rank 0 at the start."""

from __future__ import annotations

__all__ = ["describe"]


from hpcbench.fl.engines import ENGINES


def _trace(tc) -> str:
    return tc.format if tc.format == "none" else f"{tc.format} ({tc.path})"


def _engine(cfg) -> str:
    """The client-training line: the engine that runs (its ``description``), and whether ``client_training: auto``
    chose it."""
    engine = ENGINES[cfg.engine]
    line = f"  client training: {cfg.engine} ({engine.description})"
    if cfg.engine_chosen:
        line += (", chosen by client_training auto: the job needs torch" if engine.needs_torch else
                 ", chosen by client_training auto; --client_training sequential runs torch, with the bits of "
                 "earlier versions")
    if cfg.client_updates == "summed":
        line += "; client updates summed on each executor (bits depend on the executor split)"
    return line


def describe(cfg, output_path: str, world_size: int, source: str) -> str:
    """A few lines naming the job's dataset, clients, strategies, engine, traces and output, and how to change them.

    Parameters
    ----------
    cfg : hpcbench.fl.config.FLConfig
        The validated job config.
    output_path : str
        The HDF5 file being written.
    world_size : int
        MPI ranks (rank 0 aggregates, the others execute clients).
    source : str
        Where the config came from (``defaults``, a YAML file, a FedScale file).

    Returns
    -------
    str
        Text ending without a newline.
    """
    d, t = cfg.dataset, cfg.traces
    split = d.partition + (f" alpha={d.alpha}" if d.partition == "dirichlet" else "")
    if d.name == "digits" and d.samples_per_client is not None:
        split += f", {d.samples_per_client} samples per client"
    clients = ("one client per speaking role" if d.partition == "natural"
               else f"{d.num_clients} registered clients")
    executors = "rank 1 trains clients" if world_size == 2 else f"ranks 1-{world_size - 1} train clients"
    ranks = (f"{world_size} ranks (rank 0 aggregates, {executors})" if world_size > 1
             else "1 rank (aggregating and executing clients)")
    return "\n".join([
        f"hpcbench fl: job {cfg.job_name!r} from {source}, {ranks}",
        f"  dataset {d.name} ({split}), {clients}, model {cfg.model.name}",
        f"  {cfg.rounds} rounds x {cfg.participants} participants (overcommitment {cfg.overcommitment}), "
        f"{cfg.local_steps} local steps of batch {cfg.batch_size}, learning rate {cfg.learning_rate}"
        + (f" x {cfg.decay_factor} every {cfg.decay_round} rounds" if cfg.decay_factor != 1 else ""),
        f"  selector {cfg.selection.name}, aggregator {cfg.aggregator.name}, target accuracy "
        f"{cfg.target_accuracy} (evaluated every {cfg.eval_interval} rounds)",
        _engine(cfg),
        f"  traces: device {_trace(t.device)}, bandwidth {_trace(t.bandwidth)}, "
        f"availability {_trace(t.availability)}",
        f"  output {output_path}",
        "  change it with --KEY VALUE (--rounds 20 --selection oort --aggregator fedyogi), a YAML job file "
        "(jobs/configs/*.yaml) or --fedscale-conf conf.yml; every key, its default and meaning: --help",
    ])
