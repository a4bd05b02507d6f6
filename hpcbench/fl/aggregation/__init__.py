"""Server-side aggregation strategies; a registry maps ``aggregator`` to a class."""

from hpcbench.fl.aggregation.fedavg import FedAvg, weighted_average

__all__ = ["AGGREGATORS", "FedAvg", "weighted_average"]

#: aggregator name -> class constructed with the job's FLConfig
AGGREGATORS = {
    "fedavg": FedAvg,
}
