"""The federated job's HDF5 tables (schema in docs/results-schema.md)."""

from __future__ import annotations

from hpcbench.fl.contracts import STATUS_DROPPED, STATUS_STRAGGLER
from hpcbench.results import Column

__all__ = ["ROUND_COLUMNS", "CLIENT_COLUMNS", "RANK_COLUMNS", "STATUS_AGGREGATED", "STATUS_STRAGGLER",
           "STATUS_DROPPED", "STATUS_STALE", "UPDATE_COLUMNS", "TASK_COLUMNS"]

#: table statuses; a dropout and a straggler are named as in the selector's feedback
#: (:mod:`hpcbench.fl.contracts`), where an aggregated client is ``completed`` and a stale one a straggler
STATUS_AGGREGATED = "aggregated"
STATUS_STALE = "stale"

#: per-client columns the synchronous ``clients`` and the async ``tasks`` tables share
_WIRE_AND_UTILITY = [
    Column("downlink_bytes", "int64", "B", "bytes of the model sent to the client (compressed size)"),
    Column("uplink_bytes", "int64", "B", "bytes of the client's update on the wire (0: not sent)"),
    Column("utility", "float64", "1", "statistical utility |B| sqrt(mean squared per-example loss) measured "
                                      "in local training and fed back to the selector (NaN: not trained)"),
]

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
    Column("dropouts", "int32", "1", "selected clients offline at their finish time (update discarded)"),
    Column("learning_rate", "float64", "1", "client learning rate of the round (after decay)"),
]

CLIENT_COLUMNS = [
    Column("round", "int32", "1", "round number"),
    Column("client_id", "int64", "1", "registered client id"),
    Column("executor_rank", "int32", "1", "MPI rank that trained the client (-1: straggler or dropout, not trained)"),
    Column("status", "str", "1", "'aggregated', 'straggler' or 'dropped'"),
    Column("compute_s", "float64", "s", "virtual compute time from the device-latency trace"),
    Column("communication_s", "float64", "s", "virtual download plus upload time from the bandwidth trace"),
    Column("completion_s", "float64", "s", "compute_s + communication_s, from the round's start"),
    Column("num_examples", "int64", "1", "local dataset size (FedAvg weight)"),
    Column("train_loss", "float64", "nat", "mean local training loss (NaN for stragglers)"),
    Column("train_wall_s", "float64", "s", "wall-clock seconds the executor spent training this client"),
    Column("train_cpu_s", "float64", "s", "process CPU seconds the executor spent training this client"),
    *_WIRE_AND_UTILITY,
]

#: async mode (FedBuff): one row per applied server update, read like ``rounds`` by analysis/plot_tta.py
UPDATE_COLUMNS = [
    Column("round", "int32", "1", "model version produced by this server update, from 1"),
    Column("virtual_time_s", "float64", "s", "virtual clock when the update was applied"),
    Column("wall_time_s", "float64", "s", "wall-clock time since the job started, at the update"),
    Column("test_accuracy", "float64", "1", "accuracy of the new model on the test set (NaN: not evaluated)"),
    Column("test_loss", "float64", "nat", "mean cross-entropy on the test set (NaN: not evaluated)"),
    Column("train_loss", "float64", "nat", "mean local training loss of the buffered updates"),
    Column("buffered", "int32", "1", "client updates in this server update (FedBuff's K)"),
    Column("mean_staleness", "float64", "1", "mean staleness (versions) of the buffered updates"),
    Column("max_staleness", "int32", "1", "largest staleness among the buffered updates"),
    Column("stale_dropped", "int32", "1", "updates dropped as too stale since the previous server update"),
    Column("dropouts", "int32", "1", "clients that dropped out since the previous server update"),
    Column("learning_rate", "float64", "1", "client learning rate of tasks starting from the new version"),
    Column("in_flight", "int32", "1", "clients training when the update was applied"),
    Column("versions_kept", "int32", "1", "model versions held for in-flight clients, current included"),
]

#: async mode: one row per finished client task (aggregated, stale or dropout)
TASK_COLUMNS = [
    Column("task", "int64", "1", "task number, in start order, from 1"),
    Column("client_id", "int64", "1", "registered client id"),
    Column("status", "str", "1", "'aggregated', 'stale' or 'dropped'"),
    Column("start_version", "int32", "1", "model version the client started from"),
    Column("staleness", "int32", "1", "versions applied between its start and its finish"),
    Column("applied_in", "int32", "1", "server update (version) that included it (-1: none)"),
    Column("start_s", "float64", "s", "virtual time the client started"),
    Column("finish_s", "float64", "s", "virtual time the client finished (or dropped out)"),
    Column("compute_s", "float64", "s", "virtual compute time from the device-latency trace"),
    Column("communication_s", "float64", "s", "virtual download plus upload time"),
    Column("executor_rank", "int32", "1", "MPI rank that trained it (-1: not trained)"),
    Column("train_loss", "float64", "nat", "mean local training loss (NaN: not trained)"),
    *_WIRE_AND_UTILITY,
]

RANK_COLUMNS = [
    Column("rank", "int32", "1", "MPI rank"),
    Column("hostname", "str", "1", "host the rank ran on"),
    Column("role", "str", "1", "'aggregator', 'executor' or 'aggregator+executor'"),
    Column("peak_rss_bytes", "int64", "B", "peak resident set size of the rank's process"),
    Column("clients_trained", "int64", "1", "clients this rank trained over the run"),
    Column("train_wall_s", "float64", "s", "wall-clock seconds this rank spent training clients"),
]
