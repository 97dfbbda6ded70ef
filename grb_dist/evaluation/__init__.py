"""Evaluation: the GRB metrics (pure functions) and model x graph -> accuracy."""

from grb_dist.evaluation.evaluate import difficulty_accuracy, evaluate, predict, predict_tensors
from grb_dist.evaluation.metrics import (
    accuracy, attack_scores, average, defense_scores, rank_weights, top_k_mean, weighted,
)

__all__ = ["accuracy", "attack_scores", "average", "defense_scores", "difficulty_accuracy", "evaluate", "predict",
           "predict_tensors",
           "rank_weights", "top_k_mean", "weighted"]
