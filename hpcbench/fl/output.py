"""The federated job's HDF5 tables (schema in docs/results-schema.md)."""

from __future__ import annotations

from hpcbench.results import Column

__all__ = ["ROUND_COLUMNS", "CLIENT_COLUMNS", "RANK_COLUMNS", "STATUS_AGGREGATED", "STATUS_STRAGGLER"]

STATUS_AGGREGATED = "aggregated"
STATUS_STRAGGLER = "straggler"

ROUND_COLUMNS = [
    Column("round", "int32", "1", "round number, from 1"),
    Column("virtual_time_s", "float64", "s", "virtual clock at the end of the round"),
    Column("round_duration_s", "float64", "s", "virtual duration of the round"),
    Column("wall_time_s", "float64", "s", "wall-clock time since the job started, at the end of the round"),
    Column("round_wall_s", "float64", "s", "wall-clock duration of the round"),
    Column("test_accuracy", "float64", "1", "accuracy of the global model on the test set (NaN: not evaluated)"),
    Column("test_loss", "float64", "nat", "mean cross-entropy on the test set (NaN: not evaluated)"),
    Column("train_loss", "float64", "nat", "example-weighted mean local training loss of aggregated clients"),
    Column("online", "int64", "1", "registered clients online at the round's start"),
    Column("selected", "int32", "1", "clients selected (participants x overcommitment, capped by online)"),
    Column("participants", "int32", "1", "clients whose updates were aggregated"),
    Column("stragglers", "int32", "1", "selected clients dropped for finishing after the participants-th"),
    Column("learning_rate", "float64", "1", "client learning rate of the round (after decay)"),
]

CLIENT_COLUMNS = [
    Column("round", "int32", "1", "round number"),
    Column("client_id", "int64", "1", "registered client id"),
    Column("executor_rank", "int32", "1", "MPI rank that trained the client (-1: straggler, not trained)"),
    Column("status", "str", "1", "'aggregated' or 'straggler'"),
    Column("compute_s", "float64", "s", "virtual compute time from the device-latency trace"),
    Column("communication_s", "float64", "s", "virtual download plus upload time from the bandwidth trace"),
    Column("completion_s", "float64", "s", "compute_s + communication_s, from the round's start"),
    Column("num_examples", "int64", "1", "local dataset size (FedAvg weight)"),
    Column("train_loss", "float64", "nat", "mean local training loss (NaN for stragglers)"),
    Column("train_wall_s", "float64", "s", "wall-clock seconds the executor spent training this client"),
    Column("train_cpu_s", "float64", "s", "process CPU seconds the executor spent training this client"),
    Column("utility", "float64", "1", "statistical utility |B| sqrt(mean squared per-example loss) measured "
                                      "in local training and fed back to the selector (NaN: not trained)"),
]

RANK_COLUMNS = [
    Column("rank", "int32", "1", "MPI rank"),
    Column("hostname", "str", "1", "host the rank ran on"),
    Column("role", "str", "1", "'aggregator', 'executor' or 'aggregator+executor'"),
    Column("peak_rss_bytes", "int64", "B", "peak resident set size of the rank's process"),
    Column("clients_trained", "int64", "1", "clients this rank trained over the run"),
    Column("train_wall_s", "float64", "s", "wall-clock seconds this rank spent training clients"),
]
