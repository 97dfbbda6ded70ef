"""Leaderboards derived from the scores table: ranking (pure) and rendering."""

from grb_dist.leaderboard.rank import (
    SCENARIOS,
    attack_board,
    board_name,
    defense_board,
    leaderboards,
    parse_name,
    scenarios_of,
    to_arrow,
)
from grb_dist.leaderboard.render import FORMATS, render, to_markdown

__all__ = ["FORMATS", "SCENARIOS", "attack_board", "board_name", "defense_board", "leaderboards", "parse_name",
           "render", "scenarios_of", "to_arrow", "to_markdown"]
