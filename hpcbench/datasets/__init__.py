"""Readers of the data sets hpcbench bundles or finds installed, one per data set, shared by every runner.

- :mod:`hpcbench.datasets.digits`: scikit-learn's copy of the UCI 8x8 handwritten digits;
- :mod:`hpcbench.datasets.shakespeare`: the bundled tiny-shakespeare text and its character codes.

A reader returns the whole data set as arrays or text; how a runner splits it (FL clients, data-parallel
workers, a held-out part) stays with the runner.
"""
