"""The league's empirical meta-game: who is in each population, and how they fared.

The statistics come from the store's ``payoffs`` table (:mod:`tournaments.schema`): per seller
and buyer lineup, sums over the evaluation episodes, kept as the episodes are stored, so a
generation reads a few rows instead of decoding every record. A learner-side agent ``agent``
meets opponent ``opponent`` when the opponent fills every opposing seat (a seller against a lineup
of that buyer; a buyer lineup of that agent against that seller), as in evaluation tournaments.

* win rate: the agent's mean cross-role score, the seller's share of the realised gains from
  trade (:func:`arena.metrics.episode_cross_score`) seen from the agent's side;
* mean reward: the seller's reward, or the buyer side's mean reward.

:func:`opponent_mixture` turns them into a :class:`leagues.sampling.MetaGame` and asks the
league's meta-solver (:data:`leagues.sampling.META_SOLVERS`) for the opponent mixture.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from agents.specs import is_scripted
from leagues.config import LeagueConfig
from leagues.sampling import META_SOLVERS, MetaGame, with_exploration
from leagues.state import finished, generations, league_tournaments
from tournaments.store import PayoffSums, Store


@dataclass(frozen=True)
class Member:
    """A league agent: a spec in a role, and where it came from."""

    spec: str
    role: str
    label: str
    generation: int
    """0 for the initial population and the base model."""


def other(role: str) -> str:
    return "buyer" if role == "seller" else "seller"


def checkpoints(store: Store, league: str, role: str) -> list[Member]:
    """The league's registered checkpoints playing ``role``, oldest first."""
    return [
        Member(plan.checkpoint[role], role, plan.label, g)
        for g, stage, plan in generations(store, league)
        if g > 0 and role in plan.checkpoint and finished(stage, "registered")
    ]


def population(store: Store, config: LeagueConfig, role: str) -> list[Member]:
    """The ``role`` side's population: its initial specs, then the league's checkpoints."""
    initial = config.sellers if role == "seller" else config.buyers
    members = [Member(spec, role, spec, 0) for spec in initial]
    if config.learner.side != "self-play":
        members += checkpoints(store, config.name, role)
    return members


class PayoffTable:
    """Per (seller, buyer lineup): the stored payoff sums of the league's evaluation episodes."""

    def __init__(self, cells: Mapping[tuple[str, tuple[str, ...]], PayoffSums]) -> None:
        self.cells = dict(cells)

    @classmethod
    def of_league(cls, store: Store, league: str) -> PayoffTable:
        ids = [tid for tid, _, _ in league_tournaments(store, league)]
        return cls(store.payoffs(ids))

    def meeting(self, role: str, agent: str, opponent: str) -> PayoffSums | None:
        """The summed payoffs of ``agent`` in ``role`` against ``opponent`` in every opposing
        seat; None when they never met."""
        seller, buyer = (agent, opponent) if role == "seller" else (opponent, agent)
        found = [
            cell
            for (s, lineup), cell in self.cells.items()
            if s == seller and lineup and all(b == buyer for b in lineup)
        ]
        if not found:
            return None
        return PayoffSums(*(sum(values) for values in zip(*found, strict=True)))

    def win_rate(self, role: str, agent: str, opponent: str) -> float:
        """``agent``'s share of the gains from trade against ``opponent`` (NaN: never met)."""
        cell = self.meeting(role, agent, opponent)
        if cell is None or cell.episodes == 0:
            return math.nan
        seller_share = cell.seller_score / cell.episodes
        return seller_share if role == "seller" else 1.0 - seller_share

    def mean_reward(self, role: str, agent: str, opponent: str) -> float:
        """``agent``'s mean reward against ``opponent`` (buyer side: the mean over its slots)."""
        cell = self.meeting(role, agent, opponent)
        if cell is None or cell.episodes == 0:
            return math.nan
        total = cell.seller_reward if role == "seller" else cell.buyer_reward
        return total / cell.episodes

    def learner_payoffs(
        self, role: str, agents: Sequence[str], opponents: Sequence[str]
    ) -> np.ndarray:
        """Mean rewards of the learner side's agents (rows) against the opponents (columns); rows
        of agents that have not met every opponent are left out (the Nash solver needs every
        cell)."""
        rows = [[self.mean_reward(role, a, o) for o in opponents] for a in agents]
        complete = [row for row in rows if not any(math.isnan(x) for x in row)]
        return np.array(complete).reshape(len(complete), len(opponents))

    def meta_game(
        self, role: str, learner: str, own: Sequence[str], opponents: Sequence[str]
    ) -> MetaGame:
        """What the meta-solvers read: ``learner``'s win rates against ``opponents`` and the
        payoffs of the learner side's agents ``own`` (the learner included)."""
        rates = np.array([self.win_rate(role, learner, o) for o in opponents], dtype=float)
        agents = list(dict.fromkeys([*own, learner]))
        return MetaGame(rates, self.learner_payoffs(role, agents, opponents))


def opponent_mixture(
    store: Store, config: LeagueConfig, side: str, learner: str
) -> tuple[list[Member], list[float]]:
    """The other side's population and the meta-strategy to draw training opponents from: the
    side's meta-solver over the members it draws from (``opponents_from``; the others get weight
    0), with the side's exploration share spread evenly over those members."""
    opponents = population(store, config, other(side))
    drawn = training_pool(opponents, config.learner.opponents_from_for(side))
    own = [m.spec for m in population(store, config, side)]
    game = PayoffTable.of_league(store, config.name).meta_game(
        side, learner, own, [m.spec for m in drawn]
    )
    weights = META_SOLVERS[config.learner.opponents_for(side)](game)
    weights = with_exploration(weights, config.learner.opponents_explore_for(side))
    by_spec = {m.spec: float(w) for m, w in zip(drawn, weights, strict=True)}
    return opponents, [by_spec.get(m.spec, 0.0) for m in opponents]


def training_pool(opponents: Sequence[Member], pool: str) -> list[Member]:
    """The members training opponents are drawn from: all, the model agents only (every member
    that is not scripted) or the scripted ones only, falling back to all while there is none."""
    if pool == "all":
        return list(opponents)
    scripted = pool == "scripted"
    chosen = [m for m in opponents if is_scripted(m.spec) == scripted]
    return chosen or list(opponents)
