"""Where the episodes of a GRPO group part: tree rollouts, and an exploring start at the branch.

Tree rollouts (``learner.shared_replies``): the episodes of a group draw their first ``shared``
learner replies with the group's random numbers, so against deterministic opponents they make the
same moves up to there; the group's advantages then compare only what follows the branch.

Exploring starts (``learner.exploring_starts``; Monte Carlo exploring starts, Sutton and Barto
5.3): at the group's first free bid after the branch (a buyer reply under ``steer=ladder`` or
``share`` that is not a regulated opening) each episode's move is held to one of the moves the
reply could make that can pay, a ``[BUY]`` on each rung of the buyer's ladder below its budget (its
price's digits under ``ladder``, its share digit under ``share``) or a ``DEAL`` at a standing
offer below it (:func:`agents.steering.explore_moves`), episode ``k`` of
the group taking the ``k``-th move of an order drawn from the group's seed. Everything before that
reply is common to the group (the shared replies, the regulated openings and deterministic
opponents), so the group's rewards compare the moves directly, which GRPO cannot do for a move the
policy seldom samples (docs/training.md, "Exploring starts at the bid"). The held tokens stay the
policy's, trained with their log-probabilities (:attr:`agents.steering.Steer.explore`): the update
raises the moves that beat the group's mean whatever their current probability. With
``exploring_starts = "move"`` the held reply is the only one trained: the group's advantages then
score the moves alone (a bandit at the branch's state), not the policy's later replies, whose
share of an episode's reward is luck the held move did not choose.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agents.steering import Steer, explore_moves
from leagues.generators import row_seed


@dataclass
class Branch:
    """One episode's place in its group's tree: which of its learner replies are the group's
    (``group`` is the same for every episode of a GRPO group), and its exploring start."""

    group: int
    """The group's sampling seed material: equal for the episodes of one group in one rollout."""
    shared: int
    """How many of the episode's first learner replies (over all its learner seats, in turn
    order) the group shares."""
    episode: int | None = None
    """The episode's place in its group when the group explores; None: no exploring start."""
    only_move: bool = False
    """``exploring_starts = "move"``: the held reply is the episode's only trained one."""
    replies: int = 0
    """The episode's learner replies requested so far."""
    explored: bool = False
    """Whether the exploring start has been made."""

    def next_share(self) -> int | None:
        """The sampling seed of the episode's next learner reply, None once it has branched."""
        n = self.replies
        self.replies += 1
        if n >= self.shared:
            return None
        return row_seed(self.group, n)

    def explore(self, steer: Steer | None) -> Steer | None:
        """A branched reply's steer: held to the episode's exploring move at the first reply
        that has moves to explore (:func:`agents.steering.explore_moves`), else unchanged."""
        if self.episode is None or self.explored or steer is None:
            return steer
        moves = explore_moves(steer)
        if not moves:
            return steer
        self.explored = True
        return dataclasses.replace(steer, explore=exploring_move(moves, self.group, self.episode))


def exploring_move(moves: Sequence[str], group: int, episode: int) -> str:
    """Episode ``episode``'s move among ``moves``: the moves in an order drawn from the group's
    seed, the ``k``-th episode taking the ``k``-th (cycled), so a group tries as many distinct
    moves as it has episodes (all of them when it has as many) and which ones varies by group."""
    order = np.random.default_rng([group, 31]).permutation(len(moves))
    return moves[int(order[episode % len(moves)])]
