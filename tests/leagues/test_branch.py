"""leagues.branch: where a group's episodes part, and the exploring start each makes there."""

from __future__ import annotations

import dataclasses

from agents.steering import BUYER_FIELDS, Steer, explore_moves
from leagues.branch import Branch, exploring_move

LADDER = Steer(((1, "$48.00"),), fields=BUYER_FIELDS, prices=("50.00", "45.00", "40.00", "35.00"),
               budget="50.00")  # fmt: skip
MOVES = explore_moves(LADDER)


def test_a_group_as_large_as_the_moves_tries_each_once_and_groups_order_them_differently():
    assert MOVES == ("45.00", "40.00", "35.00", "DEAL")
    for group in range(20):
        assert sorted(exploring_move(MOVES, group, k) for k in range(4)) == sorted(MOVES)
        assert exploring_move(MOVES, group, 6) == exploring_move(MOVES, group, 2)  # cycled
    firsts = {exploring_move(MOVES, group, 0) for group in range(20)}
    assert firsts == set(MOVES)  # the first episodes of 20 groups try every move
    assert len({tuple(exploring_move(MOVES, g, k) for k in range(3)) for g in range(20)}) > 5


def test_an_episode_explores_once_at_its_first_reply_with_moves_to_explore():
    branch = Branch(group=7, shared=0, episode=2)
    opening = dataclasses.replace(LADDER, bids=(), opening="$20.00")
    assert branch.explore(opening) == opening  # a regulated opening has no move to explore
    assert branch.explore(None) is None
    held = branch.explore(LADDER)
    assert held == dataclasses.replace(LADDER, explore=exploring_move(MOVES, 7, 2))
    assert branch.explore(LADDER) == LADDER  # later replies are the policy's own
    unexploring = Branch(group=7, shared=0)
    assert unexploring.explore(LADDER) == LADDER  # a group without exploring starts
