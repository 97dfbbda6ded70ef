"""grb-dist: the Graph Robustness Benchmark as a Ray-distributed sweeper."""

#: The package version (pyproject.toml reads it from here); ``grb-dist --version`` prints it.
__version__ = "0.1.0"
