"""Leaderboards derived from the scores table: ranking (pure) and rendering."""

from grb_dist.leaderboard.rank import attack_board, defense_board, leaderboards, to_arrow
from grb_dist.leaderboard.render import FORMATS, render, to_markdown

__all__ = ["FORMATS", "attack_board", "defense_board", "leaderboards", "render", "to_arrow", "to_markdown"]
