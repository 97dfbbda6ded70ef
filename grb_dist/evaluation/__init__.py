"""Evaluation: the GRB metrics (pure functions) and model x graph -> accuracy."""

from grb_dist.evaluation.evaluate import evaluate, predict
from grb_dist.evaluation.metrics import (
    accuracy, attack_scores, average, defense_scores, rank_weights, top_k_mean, weighted,
)

__all__ = ["accuracy", "attack_scores", "average", "defense_scores", "evaluate", "predict",
           "rank_weights", "top_k_mean", "weighted"]
