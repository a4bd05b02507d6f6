"""Server optimizers (aggregators); ``AGGREGATORS`` maps the config's ``aggregator.name`` to a class."""

from hpcbench.fl.aggregation.fedadagrad import FedAdagrad
from hpcbench.fl.aggregation.fedadam import FedAdam
from hpcbench.fl.aggregation.fedavg import FedAvg, weighted_average
from hpcbench.fl.aggregation.fedprox import FedProx
from hpcbench.fl.aggregation.fedyogi import FedYogi
from hpcbench.fl.aggregation.qfedavg import QFedAvg
from hpcbench.runtime.registry import Registry

__all__ = ["AGGREGATORS", "FedAvg", "FedProx", "FedYogi", "FedAdam", "FedAdagrad", "QFedAvg",
           "weighted_average"]

#: aggregator name -> :class:`hpcbench.fl.contracts.Aggregator` subclass, built from its own config section
AGGREGATORS = Registry("aggregator", {
    "fedavg": FedAvg,
    "fedprox": FedProx,
    "fedyogi": FedYogi,
    "fedadam": FedAdam,
    "fedadagrad": FedAdagrad,
    "qfedavg": QFedAvg,
})
