"""Evaluation: the GRB metrics (pure functions) and model x graph -> accuracy.

Import the modules themselves: :mod:`grb_dist.evaluation.metrics` (numpy only; the
leaderboards use it) and :mod:`grb_dist.evaluation.evaluate` (torch). This package imports
neither, so that reading a run's leaderboards does not load torch.
"""
