"""Counterfactual replays: a recorded episode's first turns exactly as they were, then other agents.

**Turns.** Turn ``k`` is the seller's ``k``-th message (``SellerView.turn``, ``Event.turn``); turn 0
is the buyers' openings. Replaying an episode *through turn k* applies the recorded messages that
come before the seller's ``k+1``-th one: the openings, the seller's first ``k`` messages and every
buyer reply to them (rejected buyer attempts included). From turn ``k+1`` on, the seats named in
``takeovers`` are played by other agents.

**The other seats** keep their original agents, in the state those reached in the original
episode: each *shadows* the prefix (:class:`Shadow`). It is shown every one of its views and the
market gets its recorded reply. An immediate agent (scripted) acts on the view and its own answer
is compared with the record: scripted agents are deterministic, so a difference means the stored
episode came from another version of the agent (counted in :attr:`Shadow.mismatches`). A batched
agent (an LLM) takes the recorded reply as its own (``follow``), so its chat history and its
sampling seeds are the ones it had.

**A seat taken over** is replayed plainly (:class:`agents.driver.Replay`) and then handed to its
new agent with :meth:`agents.driver.Episode.swap`: the new agent starts at turn ``k+1`` and reads
the past from its views, like a player who takes over a game in progress.

The replay checks that the market reproduced the recorded prefix exactly (same seats, addressees,
texts, parsed actions, prices, validity and reasons); a difference (another market config or
environment version) is an error naming the first turn that differs. Replayed turns cost no
tokens: the counterfactual's token counts are those of its new turns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agents import make_agent
from agents.base import Agent, BatchedAgent, Batcher, EpisodeContext, Reply, View
from agents.driver import Episode, Player, Replay, Responder, Transcript
from arena.config import MarketConfig
from arena.records import EpisodeRecord, TurnRecord
from arena.seats import SELLER, seat_role, seats, slot_seat

COMPARED = ("agent", "to", "text", "kind", "price", "product", "valid", "reason")
"""The fields of a turn a replayed prefix must reproduce (tokens are not spent again)."""


def prefix_length(turns: Sequence[TurnRecord], from_turn: int) -> int:
    """How many recorded messages come before the seller's ``from_turn + 1``-th: the prefix
    replayed through turn ``from_turn``. An episode whose seller never sent that message has no
    turn to take over: a ValueError says how many seller turns it has."""
    if isinstance(from_turn, bool) or not isinstance(from_turn, int) or from_turn < 0:
        raise ValueError(f"from_turn must be an integer >= 0 (0: after the openings); got "
                         f"{from_turn!r}")  # fmt: skip
    if not turns:
        raise ValueError(
            "the episode was stored without its messages (keep_turns = false); only an episode "
            "with its transcript can be replayed"
        )
    seller_turns = 0
    for position, turn in enumerate(turns):
        if turn.agent == SELLER:
            if seller_turns == from_turn:
                return position
            seller_turns += 1
    raise ValueError(
        f"the episode has {seller_turns} seller turn(s), so nothing is left to play after turn "
        f"{from_turn}; use a from_turn below {seller_turns}"
    )


def check_prefix(played: Sequence[TurnRecord], recorded: Sequence[TurnRecord]) -> None:
    """The replayed turns equal the recorded ones on every compared field."""
    for position, (mine, theirs) in enumerate(zip(played, recorded, strict=False)):
        for name in COMPARED:
            if getattr(mine, name) != getattr(theirs, name):
                raise ValueError(
                    f"the replay differs from the record at message {position} ({theirs.agent}) "
                    f"in {name}: {getattr(mine, name)!r} instead of {getattr(theirs, name)!r}; "
                    "was the episode played under another market config or environment version?"
                )
    if len(played) != len(recorded):
        raise ValueError(
            f"the replay applied {len(played)} messages where the record has {len(recorded)} "
            "before the takeover; another market config?"
        )


class Shadow:
    """An immediate agent that follows a recorded prefix: it acts on each view, the market gets
    the recorded message; past the prefix it plays for itself."""

    def __init__(self, agent: Agent, transcript: Transcript, until: int) -> None:
        self.agent, self.transcript, self.until = agent, transcript, until
        self.spec = agent.spec
        self.seat = ""
        self.mismatches = 0
        """Prefix turns where the agent's own answer differs from the recorded one."""

    def reset(self, context: EpisodeContext) -> None:
        self.agent.reset(context)
        self.seat = context.role

    def act(self, view: View) -> str:
        own = self.agent.act(view)
        if self.transcript.position >= self.until:
            return own
        recorded = self.transcript.next(self.seat).text
        self.mismatches += own != recorded
        return recorded


class BatchedShadow:
    """A batched agent (an LLM) that takes the recorded prefix as its own turns (``follow``),
    then asks its batcher like any batched responder."""

    def __init__(self, agent: BatchedAgent, transcript: Transcript, until: int) -> None:
        if not callable(getattr(agent, "follow", None)):
            raise TypeError(f"{agent.spec!r} cannot follow a recorded turn (no follow method)")
        self.agent, self.transcript, self.until = agent, transcript, until
        self.spec = agent.spec
        self.seat = ""
        self.mismatches = 0

    @property
    def batcher(self) -> Batcher:
        return self.agent.batcher

    def reset(self, context: EpisodeContext) -> None:
        self.agent.reset(context)
        self.seat = context.role

    def request(self, view: View) -> object:
        if self.transcript.position >= self.until:
            return self.agent.request(view)
        text = self.transcript.next(self.seat).text
        self.agent.follow(view, text)  # type: ignore[attr-defined]
        return Reply(text)

    def reply(self, answer: object) -> Reply:
        return self.agent.reply(answer)


def shadow(agent: Responder, transcript: Transcript, until: int) -> Shadow | BatchedShadow:
    """The shadow of ``agent``: batched for a batched agent, immediate otherwise."""
    if hasattr(agent, "batcher"):
        return BatchedShadow(agent, transcript, until)  # type: ignore[arg-type]
    return Shadow(agent, transcript, until)  # type: ignore[arg-type]


def _build(player: Player, seat: str) -> Responder:
    return make_agent(player, seat_role(seat)) if isinstance(player, str) else player


def start_counterfactual(
    config: MarketConfig,
    record: EpisodeRecord,
    from_turn: int,
    takeovers: Mapping[str, Player],
) -> Episode:
    """An episode that has replayed ``record`` through turn ``from_turn`` (checked against the
    record) and whose ``takeovers`` seats (seat -> spec or responder) now belong to their new
    players; advance it (:func:`agents.engine.drive_episodes`) to play the rest."""
    names = seats(config.num_buyers)
    unknown = sorted(set(takeovers) - set(names))
    if unknown:
        raise ValueError(f"no seat {', '.join(unknown)} in a market of {config.num_buyers} "
                         f"buyers; seats are {', '.join(names)}")  # fmt: skip
    if not takeovers:
        raise ValueError("name at least one seat to hand to another agent")
    if record.preset != config.name:
        raise ValueError(f"the episode was played on preset {record.preset!r}, the market "
                         f"config given is {config.name!r}")  # fmt: skip
    turns = record.result.turns
    until = prefix_length(turns, from_turn)
    transcript = Transcript(turns, f"episode on scenario {record.scenario.index}")
    originals = (record.seller, *record.buyers)
    responders: list[Responder] = []
    for slot, spec in enumerate(originals):
        seat = slot_seat(slot)
        if seat in takeovers:
            responders.append(Replay(transcript, spec))
            continue
        try:
            agent = make_agent(spec, seat_role(seat))
        except ValueError as exc:
            raise ValueError(
                f"{seat} keeps its original agent {spec!r}, which cannot be rebuilt ({exc}); "
                "hand the seat to an agent too"
            ) from None
        responders.append(shadow(agent, transcript, until))
    episode = Episode(config, record.scenario, responders, keep_turns=True)
    if episode.advance(stop_at=until) is not None:
        raise RuntimeError("a replayed prefix waited for a back-end")
    check_prefix(episode.market.turns, turns[:until])
    for seat, player in takeovers.items():
        episode.swap(seat, _build(player, seat))
    return episode


def mismatches(episode: Episode) -> int:
    """Prefix turns where a shadowing agent would have said something else (see the module
    docstring); 0 when the kept agents reproduce the record."""
    return sum(getattr(r, "mismatches", 0) for r in episode.responders)
