"""Data-parallel training runner (``python -m hpcbench.train``): KungFu's benchmark on hpcbench's collectives."""
