"""A person in a seat: ``human`` or ``human:<name>`` plays through the same text an LLM agent
reads and writes.

:class:`HumanAgent` is an immediate responder: at its first turn it shows the seat's system
prompt (:func:`agents.prompts.system_prompt`, built from the seat's own view: its own private
value, nothing hidden from it), at every turn the observation text (:func:`agents.prompts
.observation`), then reads one move in the protocol's lines (Thought / Target / Talk / Action,
Product with several products) ended by an empty line. The move goes to the market as typed, so
the rules treat it as any agent's: a seller's malformed or rule-breaking move ends the episode
as a violation, a buyer's is re-sampled, and the next observation says why it was rejected.

Moves are read from any text stream, so piped input plays a scripted session. When the input
ends before the episode, the person quits ([QUIT], :attr:`HumanAgent.input_ended`): a session
always ends with an outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from agents.base import EpisodeContext, View
from agents.prompts import observation, system_prompt
from arena.game import SellerView
from arena.protocol import BuyerMessage, Kind, SellerMessage, render_buyer, render_seller

HUMAN = "human"


def is_human(spec: str) -> bool:
    """Whether ``spec`` names a person (``human`` or ``human:<name>``)."""
    text = spec.strip()
    return text == HUMAN or text.startswith(HUMAN + ":")


def human_spec(spec: str, default_name: str) -> str:
    """The stored agent name of a person: ``human:<name>``, ``default_name`` for bare
    ``human``. A name is one word of letters, digits, ``-``, ``_`` or ``.``."""
    name = spec.strip().partition(":")[2] or default_name
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise ValueError(f"{spec!r}: a person is human:<name>, the name one word of letters, "
                         "digits, '-', '_' or '.'")  # fmt: skip
    return f"{HUMAN}:{name}"


class InputEnded(ValueError):
    """The input ended before the episode did."""


class MoveReader:
    """Reads moves from a text stream: lines up to an empty line (leading empty lines are
    skipped); the stream's end also ends a move that has lines."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.moves = 0

    def __call__(self) -> str:
        lines: list[str] = []
        while True:
            line = self.stream.readline()
            if not line:
                break
            text = line.rstrip("\r\n")
            if text.strip():
                lines.append(text)
            elif lines:
                break
        if not lines:
            raise InputEnded(f"the input ended after {self.moves} move(s)")
        self.moves += 1
        return "\n".join(lines)


class HumanAgent:
    """A person's seat: shows what an LLM agent in the seat would read, returns what they type."""

    def __init__(self, spec: str, read_move: Callable[[], str], show: Callable[[str], None]):
        self.spec = spec
        self.read_move = read_move
        self.show = show
        self.context: EpisodeContext | None = None
        self._briefed = False
        self.input_ended = False
        """The input ended before the episode: the person quit."""

    def reset(self, context: EpisodeContext) -> None:
        self.context = context
        self._briefed = False
        self.input_ended = False

    def act(self, view: View) -> str:
        if self.context is None:
            raise RuntimeError(f"{self.spec!r}: call reset(context) before act()")
        if not self._briefed:
            self.show(system_prompt(view, self.context.config.total_turns))
            self._briefed = True
        self.show(observation(view))
        if not self.input_ended:
            try:
                return self.read_move()
            except InputEnded:
                self.input_ended = True
        return quit_move(view)


def quit_move(view: View) -> str:
    """The [QUIT] of a person whose input ended (the seller addresses its first active buyer)."""
    talk = "(the input ended)"
    if isinstance(view, SellerView):
        target = view.active[0] if view.active else 0
        return render_seller(SellerMessage(talk, target, talk, Kind.QUIT))
    return render_buyer(BuyerMessage(talk, talk, Kind.QUIT))
