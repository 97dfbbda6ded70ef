"""grb-dist: the Graph Robustness Benchmark as a Ray-distributed sweeper."""

__version__ = "0.1.0"
