"""The episode driver: one episode, whose turn it is, who answers, and the record it leaves.

An :class:`Episode` holds a :class:`~arena.game.Market` and one responder per seat (seller, then
``buyer_1`` .. ``buyer_N``, see :mod:`agents.base`). :meth:`Episode.advance` lets immediate
responders answer at once (``act``) until the episode ends or a batched responder has to wait for
its batcher; :meth:`Episode.deliver` applies the batcher's answer through the responder's
``reply``. When the market is done, :meth:`Episode.record` is the one :class:`EpisodeRecord`.

Everything that plays episodes drives them through this class: the batched engine
(:mod:`agents.engine`, which tournaments, ``arena eval``/``arena play``, league evaluation and
scripted play alike use: an all-scripted episode is played to its end the moment it starts),
the GRPO rollouts (a learner responder), and the transcript replay of :mod:`agents.finetune`
(:class:`Replay` responders). A seat's responder can be swapped mid-episode
(:meth:`Episode.swap`): a counterfactual replay plays the recorded turns up to turn ``k`` and
then hands the seat to another agent; a human seat is a batched responder whose batcher waits
for input.

Matches name the players of an episode: a spec string (built and reused by the engine) or a
ready responder object. :func:`buyer_lineup` fills buyer slots from a pool with the scenario's own
draws, so every seller meets the same lineups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from agents.base import Agent, BatchedAgent, EpisodeContext, Reply, View, agent_seed
from arena.config import MarketConfig
from arena.game import Market
from arena.records import EpisodeKey, EpisodeRecord, TurnRecord
from arena.scenarios import Scenario
from arena.seats import seats, slot_seat

Responder = Agent | BatchedAgent
Player = str | Responder
"""A seat's player in a match: an agent spec string, or a ready responder."""


def buyer_lineup(scenario: Scenario, pool: Sequence[str]) -> tuple[str, ...]:
    """The buyer spec of every slot: each slot draws from the pool with the scenario's draws."""
    return tuple(pool[scenario.pool_index(i, len(pool))] for i in range(scenario.num_buyers))


@dataclass(frozen=True)
class Match:
    """One episode to play: who sits in each seat, on which scenario."""

    scenario: Scenario
    seller: Player
    buyers: tuple[Player, ...]

    @property
    def players(self) -> tuple[Player, ...]:
        return (self.seller, *self.buyers)

    def key(self, market: MarketConfig) -> EpisodeKey:
        """The episode's identity in ``market``; every player must be a spec string."""
        if not all(isinstance(p, str) for p in self.players):
            raise TypeError("only a match of agent specs has an episode key")
        return EpisodeKey.of(market, self.seller, self.buyers, self.scenario)  # type: ignore[arg-type]


@lru_cache(maxsize=64)
def _slots(num_buyers: int) -> dict[str, int]:
    return {seat: slot for slot, seat in enumerate(seats(num_buyers))}


class Episode:
    """One episode in flight: its market and the responder of every seat."""

    def __init__(
        self,
        config: MarketConfig,
        scenario: Scenario,
        responders: Sequence[Responder],
        keep_turns: bool = True,
    ) -> None:
        if len(responders) != config.num_buyers + 1:
            raise ValueError(
                f"{len(responders)} responders for a market of {config.num_buyers} buyers; "
                "give the seller and one per buyer"
            )
        self.config = config
        self.scenario = scenario
        self.market = Market(config, scenario, keep_turns=keep_turns)
        self._slot = _slots(config.num_buyers)
        self.responders: list[Responder] = []
        self._batched: list[bool] = []
        for slot, responder in enumerate(responders):
            self.responders.append(responder)
            self._batched.append(hasattr(responder, "batcher"))
            responder.reset(self.context(slot))
        self.waiting: BatchedAgent | None = None
        """The batched responder whose request is out, between ``advance`` and ``deliver``."""

    def context(self, slot: int) -> EpisodeContext:
        """What the responder of ``slot`` is told at the start of the episode."""
        seed = agent_seed(self.scenario, slot)
        return EpisodeContext(slot_seat(slot), slot, self.config, self.scenario, seed)

    @property
    def current(self) -> str:
        """The seat to act ("" once the episode is over)."""
        return self.market.current

    @property
    def done(self) -> bool:
        return self.market.done

    def responder(self, seat: str) -> Responder:
        return self.responders[self._slot[seat]]

    def swap(self, seat: str, responder: Responder) -> None:
        """Hand ``seat`` to ``responder`` from the current position on; it is reset with the
        seat's context (a responder that needs the past reads it from its views)."""
        if self.waiting is not None:
            raise RuntimeError("deliver the pending reply before swapping a responder")
        slot = self._slot[seat]
        self.responders[slot] = responder
        self._batched[slot] = hasattr(responder, "batcher")
        responder.reset(self.context(slot))

    def advance(self, stop_at: int | None = None) -> Any | None:
        """Play immediate turns until the episode ends (None) or a batched responder waits:
        then its request is returned and the responder is :attr:`waiting`. With ``stop_at``,
        also stop (None) once the market has applied that many messages (a counterfactual
        replay plays the recorded turns up to ``k``, then swaps responders)."""
        market = self.market
        while not market.done and (stop_at is None or market.steps < stop_at):
            slot = self._slot[market.current]
            view: View = market.view()
            responder = self.responders[slot]
            if not self._batched[slot]:
                market.step(responder.act(view))  # type: ignore[union-attr]
                continue
            request = responder.request(view)  # type: ignore[union-attr]
            if isinstance(request, Reply):
                self._apply(responder, request)
                continue
            self.waiting = responder  # type: ignore[assignment]
            return request
        return None

    def deliver(self, answer: Any) -> Reply:
        """Hand the batcher's answer to the waiting responder and apply its reply."""
        responder = self.waiting
        if responder is None:
            raise RuntimeError("no responder is waiting: call advance() first")
        self.waiting = None
        reply = responder.reply(answer)
        self._apply(responder, reply)
        return reply

    def _apply(self, responder: Responder, reply: Reply) -> None:
        """Step the market with the reply; a failed one ends the episode as errored."""
        if reply.error is not None:
            self.market.fail(f"{responder.spec} ({self.market.current}): {reply.error}")
        else:
            self.market.step(reply.text, reply.tokens_in, reply.tokens_out)

    def record(self) -> EpisodeRecord:
        """The finished episode as a record: who played each seat, and the result."""
        specs = [r.spec for r in self.responders]
        return EpisodeRecord.create(
            self.config.name,
            self.scenario,
            specs[0],
            tuple(specs[1:]),
            self.market.result(),
            rewards=self.config.rewards,
        )


class Replay:
    """An immediate responder that re-sends recorded messages, in order, from a transcript
    shared by the seats it replays; it refuses a turn the transcript gives to another seat."""

    def __init__(self, transcript: Transcript, spec: str = "replay") -> None:
        self.transcript = transcript
        self.spec = spec
        self.seat = ""

    def reset(self, context: EpisodeContext) -> None:
        self.seat = context.role

    def act(self, view: View) -> str:
        return self.transcript.next(self.seat).text


class Transcript:
    """Recorded turns played back in order (a stored episode's ``result.turns``)."""

    def __init__(self, turns: Sequence[TurnRecord], name: str = "the episode") -> None:
        self.turns = list(turns)
        self.name = name
        self.position = 0

    @classmethod
    def of_texts(cls, seat: str, texts: Sequence[str], name: str = "the episode") -> Transcript:
        """One seat's messages (e.g. a learner's replies) as a transcript of that seat alone."""
        turns = [
            TurnRecord(i, seat, "", text, None, None, None, True) for i, text in enumerate(texts)
        ]
        return cls(turns, name)

    def next(self, seat: str) -> TurnRecord:
        """The next turn, which must be ``seat``'s."""
        if self.position >= len(self.turns):
            raise ValueError(
                f"{self.name}: {seat} is asked for turn {self.position} but the transcript has "
                f"only {len(self.turns)} turns; wrong market config?"
            )
        turn = self.turns[self.position]
        if turn.agent != seat:
            raise ValueError(
                f"{self.name}: turn {turn.index} is by {turn.agent} but the replay expects "
                f"{seat}; wrong market config?"
            )
        self.position += 1
        return turn

    def check_finished(self) -> None:
        """Every recorded turn was replayed (an episode that ended early is another market)."""
        if self.position < len(self.turns):
            turn = self.turns[self.position]
            raise ValueError(
                f"{self.name}: turn {turn.index} is by {turn.agent} but the replay expects "
                "nobody (the episode is over); wrong market config?"
            )
