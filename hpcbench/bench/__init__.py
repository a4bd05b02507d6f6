"""Micro-benchmark runners (programs users launch): collectives, overlap, compression, cost model."""
