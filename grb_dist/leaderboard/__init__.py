"""Leaderboards derived from the scores table: ranking (pure) and rendering."""

from grb_dist.leaderboard.rank import (
    ADAPTIVE_KINDS,
    GRB_KINDS,
    KINDS,
    adaptive_rows,
    adaptive_vs_transfer,
    attack_board,
    board_name,
    defense_board,
    has_adaptive,
    is_adaptive,
    leaderboards,
    parse_name,
    robustness_board,
    scenarios_of,
    to_arrow,
    transfer_board,
    transfer_matrix,
    transfer_rows,
)
from grb_dist.leaderboard.render import FORMATS, render, to_markdown

__all__ = ["ADAPTIVE_KINDS", "FORMATS", "GRB_KINDS", "KINDS", "adaptive_rows", "adaptive_vs_transfer",
           "attack_board", "board_name", "defense_board", "has_adaptive", "is_adaptive", "leaderboards", "parse_name",
           "render", "robustness_board", "scenarios_of", "to_arrow", "to_markdown", "transfer_board",
           "transfer_matrix", "transfer_rows"]
