"""Steered decoding: a seller's ``[DEAL]`` is written at the standing bid it takes.

A ``[DEAL] $M`` accepts the target buyer's standing bid, and the protocol requires ``M`` to be
that bid exactly (Section 3.2; ``arena.rules.Violation.DEAL_MISMATCH``). The number carries no
decision: the decision is to close, and with whom. A small model that decides well can still
fail to copy six digits off its board, and every such slip is a -1 that teaches nothing about
bargaining. With the agent option ``steer=deal`` the decoder writes the price for it: once the
reply's text so far ends in ``Action: [DEAL]`` (or a prefix of the bid's text after it), the
rest of the bid and the end of the turn are *forced* tokens, fed to the model as if sampled.

What stays the model's: every other token, the choice to close, the buyer it targets, and the
cost floor (a bid below cost is forced like any other, and the rules still score it -1:
sell-below-cost is the seller's to learn, never masked). A target without a standing bid is
not steered either (the DEAL is a violation).

Training keeps sampler and trainer consistent: forced tokens are not the policy's choices, so a
learner stream marks them as environment tokens (``env_mask`` 0): no loss, no logprob in the
ratio; the tokens the model did sample come from its unconstrained distribution, which is what
the trainer recomputes. Evaluation of a checkpoint trained with ``steer=deal`` uses the same
option, so the policy rated is the policy trained.

With ``steer=legal`` the seller's target is kept legal as well (Section 3.1: only active
channels may be addressed; Section 3.2 (ii)). The board says which channels are active; a small
model that holds its list price to one buyer keeps addressing it after its cap. When the reply
so far has just opened its ``Target:`` line and the model draws a digit naming a channel that is
not active (or a second digit), the draw is repeated from the same distribution with those
digits removed and the token is marked forced, like the ``[DEAL]`` price: no loss on it. A legal
target the model draws itself is its own sample, trained as usual, so the learner still learns
whom to address among the buyers it may address. Only one-digit tokens are guarded (the tiny
model's and Qwen's tokenizers split digits), in markets of at most nine buyers.

With ``steer=protocol`` the reply's skeleton is written as well, for a seller and for a buyer:
each line's field label, in the protocol's order (``Thought:``, ``Target:``, ``Talk:``,
``Action:``; a buyer has no Target), is forced at the start of its line; the turn cannot end
before its Action line (its end-of-turn tokens are banned until then) and ends after it. A
seller's Target line is ``Target: <digit>`` and nothing else: the space and the line's end are
forced, and the digit is drawn among the active channels' (another token drawn, the draw is
repeated among those digits and marked forced; an active digit the model draws itself is its
own sample): which buyer stays the model's choice, only the text around it is written. The
Action line opens ``Action: [``, its tag is drawn among the side's (``SELL``, ``DEAL``,
``QUIT`` for a seller; ``BUY``, ``DEAL``, ``QUIT`` for a buyer), then ``]`` and, for a priced
move, `` $`` are written; ``[QUIT]`` ends the turn. The move and its price stay the model's, but
for a buyer's ``[DEAL]``, which accepts the seller's standing offer and must name it exactly
(``arena.rules.BuyerError.DEAL_PRICE_MISMATCH``): the offer is written, as a seller's DEAL is
written at its target's bid, and the budget stays the buyer's (a DEAL above it is -1). Under the
first-offer regulator (Section 3.3) a buyer's opening Action has no choice left in it (a
``[BUY]`` at exactly the regulated price, ``BuyerError.UNREGULATED_OPENING`` otherwise): the
whole line is written, so a buyer trained where openings are free (``bilateral``) does not fail
every opening of a regulated market. A label
carries no decision; a small model that drops one (``Talk: [BUY] $10``, no Action line) commits
a format violation that teaches nothing about bargaining. Everything after a label stays the
model's: its thought, its words, its move and its price, and the budget (a buyer's bid above its
budget is scored -1, like a seller's below cost).

With ``steer=ladder`` a buyer's bids are held to its budget ladder (the agent option
``ladder=N``, :func:`arena.money.budget_ladder`): everything of ``protocol``, and the price of a
``[BUY]`` is drawn among the ladder's rungs and the budget itself, the prices the scripted
buyers bid on (``agents.scripted.buyers.on_ladder``). Digit by digit, the next character is held
to those that continue some rung (a draw outside them is drawn again among them and marked
forced, like a target digit); the turn ends once a rung is written. Which rung, and whether to
bid, accept or quit, stay the model's: the ladder makes the share of its budget it bids a
choice among ten rather than arithmetic the tiny model cannot do, and a group's episodes then
differ by that choice. A seller under ``ladder`` is steered as under ``protocol``; a price is
held only where the tokenizer writes digits and the decimal point as tokens of their own.

With ``steer=share`` a buyer's move is one token: after its regulated opening, its Thought line is
written ``Thought: Offer `` and the model draws one digit, ``1`` to ``9`` for a bid at that many
tenths of its budget (the rungs of its ladder, ``ladder=N``: the top ``N`` tenths) or ``0`` for no
bid (never at a free opening, which must bid); the line ends ``0% of my budget.`` (or ``% of my
budget.``). The Talk line is the model's. A digit of ``1`` to ``9`` writes the whole Action line,
``[BUY]`` at that rung; ``0`` leaves the tag to the model among ``DEAL`` (when an offer stands) and
``QUIT``. Under ``ladder`` the share is spread over the price's digits, each drawn among the rungs
it could still become, and which rung a digit selects depends on the budget's magnitude; here it is
one categorical choice the advantage moves directly, as ``deal`` makes a seller's decision the
choice to close rather than six copied digits. The Thought is the buyer's own (the seller sees Talk
and Action only). With ``share_cue`` (an agent option) the Thought opens with a cue read from the
seller's standing offer, ``They hold list. `` or ``They came down. `` (:func:`share_cue`), before
``Offer ``: the digit is drawn right after the words that tell an anchor at list from a
concession, so its context differs between sellers that differ there.

An exploring start (the learner's ``exploring_starts``, :mod:`leagues.branch`) holds one reply of
a ``ladder`` or ``share`` buyer to a given move, ``Steer.explore``: its action tag and each digit
of its rung (``ladder``), or its share digit and, after a ``0``, the ``DEAL`` tag (``share``), are
drawn among that move's characters only, like a target digit, but such a draw is the policy's,
not a forced token: trained, with its log-probability under the model's whole distribution, so
the update moves the probability of the move the group's rewards scored.

Only single-product markets are steered (a multi-product DEAL also names its product). The hf
back-end and the league's hf sampler steer; the vllm and openai back-ends refuse the option.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from agents.prompts import offer_at_list
from arena.money import budget_ladder, format_price, ladder_bids
from arena.protocol import BUYER_KINDS, SELLER_KINDS, Kind
from arena.rules import is_active
from arena.views import BuyerView, SellerView

STEERS: tuple[str, ...] = ("none", "deal", "legal", "protocol", "ladder", "share")
"""Values of the agent option ``steer``: none (plain sampling), deal (the ``[DEAL]`` price),
legal (the price and a target among the active channels), protocol (legal, and every line's
field label; a buyer's labels too), ladder (protocol, and a buyer's bids on its budget
ladder; needs ``ladder=N``) or share (protocol, and a buyer's move one digit of its Thought: the
share of its budget it offers, the price written from it; needs ``ladder=N``); module
docstring."""
STRUCTURED = ("protocol", "ladder", "share")
LADDERED = ("ladder", "share")
"""The steers that read the buyer's ladder (``ladder=N``)."""
"""The steers that write every line's field label."""

SELLER_FIELDS = ("Thought", "Target", "Talk", "Action")
BUYER_FIELDS = ("Thought", "Talk", "Action")

_TARGET = re.compile(r"(?im)^[^\S\n]*\W{0,2}target\W{0,2}[^\S\n]*:[^\d\n]{0,12}([0-9]{1,3})")
_DEAL_TAIL = re.compile(r"(?is)\baction\W{0,2}[^\S\n]*:[^\S\n]*\[deal\]([^\n]*)$")
_TARGET_OPEN = re.compile(r"(?i)^[^\S\n]*\W{0,2}target\W{0,2}[^\S\n]*:[^\d\n]{0,12}(\d?)$")


@dataclass(frozen=True)
class Steer:
    """What a reply is steered to at this turn: each target's standing bid (a seller's), the
    targets it may address, the field labels of its lines."""

    bids: tuple[tuple[int, str], ...]
    """(target number as the seller writes it, 1-based; the bid as the protocol renders it); a
    buyer's steer holds its one channel's standing offer as number 1 (a buyer has no Target)."""
    active: tuple[int, ...] | None = None
    """Target numbers (1-based) of the active channels under ``steer=legal``; None: the target
    is the model's alone."""
    fields: tuple[str, ...] | None = None
    """The labels of the reply's lines, in order, forced at each line's start under
    ``steer=protocol``; None: the model writes them."""
    opening: str | None = None
    """A buyer's regulated opening bid as the protocol renders it (Section 3.3's first-offer
    regulator): its whole Action line is written, ``[BUY]`` at that price; None: no regulator."""
    prices: tuple[str, ...] = ()
    """Under ``steer=ladder``, the prices a buyer's ``[BUY]`` may name, as written after its
    ``$`` (its ladder's rungs and its budget); empty: the price is the model's alone."""
    shares: tuple[tuple[str, str], ...] = ()
    """Under ``steer=share``, (digit, price as written after ``$``) of each rung a buyer may
    offer: ``7`` bids 70% of its budget; empty: no share is drawn (the regulated opening, or
    another steer)."""
    must_bid: bool = False
    """A free opening under ``steer=share``: an opening must bid, so no ``0`` is drawn."""
    cue: str = ""
    """Under ``steer=share`` with ``share_cue``, the words the Thought opens with before
    ``Offer `` (:func:`share_cue`); empty: none."""
    budget: str = ""
    """Under ``steer=ladder`` or ``share`` (not at a regulated opening), the buyer's budget as
    written after ``$``: what a move must stay below to pay (:func:`explore_moves`)."""
    explore: str = ""
    """An exploring start (:func:`explore_moves`): the move this reply is held to, a price of
    ``prices`` for a ``[BUY]`` (``steer=ladder``), a share digit of ``shares``
    (``steer=share``) or ``DEAL``; its tag, digits or share digit are drawn held to it but count
    as the policy's (trained, with their true log-probabilities); empty: none."""

    def forced(self, reply: str) -> tuple[str, bool] | None:
        """(text to write next, whether the turn ends after it) for ``reply`` (the text so
        far): the rest of a ``[DEAL]`` price, else the next line's label at a line's start, or
        the end of the turn once every line is written; None: the model samples."""
        price = self.forced_text(reply)
        if price is not None:
            return price, True
        line = reply.rsplit("\n", 1)[-1]
        if self.shares:
            if line == "Thought:":
                return f" {self.cue}{SHARE_OPEN}", False
            digit = re.fullmatch(rf"Thought: {re.escape(self.cue)}{SHARE_OPEN}([0-9])", line)
            if digit:
                return share_tail(digit.group(1)) + "\n", False
            rung = dict(self.shares).get(self.share(reply) or "")
            if line == "Action:" and rung is not None:
                return f" [BUY] ${rung}", True
        if self.bid_written(line) in self.prices:  # a rung written in full ends the turn
            return "", True
        if self.fields is not None and self.active:  # the Target line: " <digit>\n"
            if line == "Target:":
                return " ", False
            if re.fullmatch(r"Target: [0-9]", line):
                return "\n", False
        if self.fields is not None and line.startswith("Action:"):  # " [<KIND>]", a price's " $"
            if line == "Action:" and self.opening is not None:  # the regulator's bid, no choice
                return f" [BUY] {self.opening}", True
            if line == "Action:":
                return " [", False
            word = line[len("Action: [") :]
            if line.startswith("Action: [") and word in self.kinds():
                return "]", word == "QUIT"  # [QUIT] ends the turn
            if re.fullmatch(r"Action: \[(SELL|BUY)\]", line):
                return " $", False
        if self.fields is None or (reply and not reply.endswith("\n")):
            return None
        written = reply.count("\n")
        if written < len(self.fields):
            return f"{self.fields[written]}:", False
        return "", True

    def unfinished(self, reply: str) -> bool:
        """Whether ``reply`` still lacks some of its lines under ``steer=protocol`` (the turn
        may not end yet: its end-of-turn tokens are banned)."""
        return self.fields is not None and reply.count("\n") < len(self.fields) - 1

    def banned_digits(self, reply: str) -> frozenset[str]:
        """Digits the next token may not be when ``reply`` (the text so far) has just opened
        its Target line: those naming an inactive channel, or any digit after the first."""
        if self.active is None:
            return frozenset()
        opened = _TARGET_OPEN.search(reply.rsplit("\n", 1)[-1])
        if opened is None:
            return frozenset()
        if opened.group(1):
            return frozenset("0123456789")
        return frozenset("0123456789") - {str(number) for number in self.active}

    def kinds(self) -> tuple[str, ...]:
        """The action tags this side may write (a seller's when its lines have a Target)."""
        side = SELLER_KINDS if self.fields is None or "Target" in self.fields else BUYER_KINDS
        return tuple(sorted(kind.value for kind in side))

    def choices(self, reply: str) -> frozenset[str]:
        """Under ``steer=protocol``, the texts the next token must be one of when ``reply`` has
        just written ``Target: `` (the active channels' digits) or ``Action: [`` (this side's
        action tags); empty: no restriction."""
        if self.fields is None:
            return frozenset()
        line = reply.rsplit("\n", 1)[-1]
        if line == "Target: " and self.active:
            return frozenset(str(number) for number in self.active)
        if line == f"Thought: {self.cue}{SHARE_OPEN}" and self.shares:
            if self.explore:  # the held digit; a DEAL is a 0, then the tag
                return frozenset({"0" if self.explore == "DEAL" else self.explore})
            return frozenset({*(() if self.must_bid else ("0",)), *dict(self.shares)})
        if line == "Action: [" and self.explore:
            return frozenset({"DEAL" if self.explore == "DEAL" else "BUY"})
        if line == "Action: [" and self.shares:  # share 0: no bid; a DEAL needs an offer
            return frozenset({"QUIT", *(("DEAL",) if self.bids else ())})
        if line == "Action: [":
            return frozenset(self.kinds())
        written = self.bid_written(line)
        prices = (self.explore,) if self.explore else self.prices
        if written is not None and self.prices:
            return frozenset(
                p[len(written)] for p in prices if p.startswith(written) and p != written
            )
        return frozenset()

    def exploring(self, reply: str) -> bool:
        """Whether the draw after ``reply`` is one of an exploring start's held choices (its
        action tag, a digit of its price or its share digit): the policy's, trained, not a
        forced token."""
        if not self.explore:
            return False
        line = reply.rsplit("\n", 1)[-1]
        if self.shares:
            return line in (f"Thought: {self.cue}{SHARE_OPEN}", "Action: [")
        return line == "Action: [" or self.bid_written(line) is not None

    @staticmethod
    def share(reply: str) -> str | None:
        """The share digit a ``steer=share`` reply drew in its Thought line; None before it."""
        drawn = re.match(rf"Thought: [^\n]*?{SHARE_OPEN}([0-9])", reply)
        return drawn.group(1) if drawn else None

    @staticmethod
    def bid_written(line: str) -> str | None:
        """The price a buyer's ``[BUY]`` line has written so far after its ``$``; None when
        ``line`` is not such a line."""
        head = "Action: [BUY] $"
        return line[len(head) :] if line.startswith(head) else None

    def standing(self, reply: str) -> str | None:
        """The standing price a ``[DEAL]`` in ``reply`` takes: its Target's bid for a seller,
        the channel's offer for a buyer (no Target line); None: nothing stands there."""
        if self.fields is not None and "Target" not in self.fields:
            return dict(self.bids).get(1)
        targets = _TARGET.findall(reply)
        return dict(self.bids).get(int(targets[-1])) if targets else None

    def forced_text(self, reply: str) -> str | None:
        """The rest of the reply's ``[DEAL]`` price when ``reply`` (the text so far) has just
        written ``[DEAL]`` or a prefix of `` $<bid>`` after it; None otherwise."""
        tail = _DEAL_TAIL.search(reply)
        if tail is None:
            return None
        bid = self.standing(reply)
        if bid is None:
            return None
        price = f" {bid}"
        written = tail.group(1)
        if not price.startswith(written) or written == price:
            return None
        return price[len(written) :]


def steer_for(view: Any, steer: str = "deal", ladder: int = 0, cue: bool = False) -> Steer | None:
    """The steer at this view under option ``steer``: a seller's gets the standing bid of every
    buyer, for ``legal``, ``protocol`` and ``ladder`` the active channels, for the last two its
    field labels; a buyer's, its field labels under ``protocol`` and ``ladder``, under
    ``ladder`` its bids on the ``ladder`` rungs of its budget, under ``share`` with ``cue`` its
    Thought's cue (:func:`share_cue`) (None for ``none``, a
    multi-product market, a buyer under another steer, or a ``deal`` steer on a board without
    bids)."""
    if steer == "none" or len(view.products) != 1:
        return None
    if isinstance(view, BuyerView):
        if steer not in STRUCTURED:
            return None
        check_steer(steer, ladder)
        offer = () if view.offer is None else ((1, format_price(view.offer)),)
        regulated = view.regulated_opening if view.opening else None
        opening = None if regulated is None else format_price(regulated)
        prices = ladder_prices(view.valuations[0], ladder) if steer == "ladder" else ()
        shares = (
            share_prices(view.valuations[0], ladder) if steer == "share" and not opening else ()
        )
        budget = format_price(view.valuations[0])[1:] if steer in LADDERED and not opening else ""
        return Steer(
            offer, fields=BUYER_FIELDS, opening=opening, prices=prices, shares=shares,
            must_bid=bool(shares) and view.opening, cue=share_cue(view) if cue and shares else "",
            budget=budget,
        )  # fmt: skip
    if not isinstance(view, SellerView):
        return None
    bids = tuple(
        (index + 1, format_price(channel.bid))
        for index, channel in enumerate(view.channels)
        if channel.bid is not None
    )
    active = None
    if steer in ("legal", *STRUCTURED) and len(view.channels) <= 9:
        active = tuple(i + 1 for i, c in enumerate(view.channels) if is_active(c.status))
    fields = SELLER_FIELDS if steer in STRUCTURED else None
    return Steer(bids, active, fields) if bids or active or fields else None


def explore_moves(steer: Steer | None) -> tuple[str, ...]:
    """The moves an exploring start may hold a buyer's reply to (``learner.exploring_starts``):
    the legal moves that can pay, a ``[BUY]`` on each rung below its budget (a deal at the budget
    pays nothing), named by its price under ``steer=ladder`` and by its share digit under
    ``steer=share``, and ``DEAL`` when the standing offer is below the budget; none at a
    regulated opening (no choice there) or for another steer."""
    if steer is None or not steer.budget or steer.opening is not None:
        return ()
    budget = _amount(steer.budget)
    offer = dict(steer.bids).get(1)
    takes = ("DEAL",) if offer is not None and _amount(offer) < budget else ()
    if steer.shares:
        return (*(digit for digit, price in steer.shares if _amount(price) < budget), *takes)
    return (*(price for price in steer.prices if _amount(price) < budget), *takes)


def _amount(price: str) -> float:
    """A price as the protocol renders it (``$1,234.56``, or without its ``$``), as a number."""
    return float(price.removeprefix("$").replace(",", ""))


def ladder_prices(budget: float, rungs: int) -> tuple[str, ...]:
    """The bids ``steer=ladder`` holds a buyer to (:func:`arena.money.ladder_bids`), as written
    after ``$``."""
    return tuple(dict.fromkeys(format_price(p)[1:] for p in ladder_bids(budget, rungs)))


SHARE_OPEN = "Offer "
"""What a ``steer=share`` buyer's Thought starts with; the share digit follows it."""


def share_tail(digit: str) -> str:
    """The rest of a ``steer=share`` Thought after its digit: ``0% of my budget.`` (``% of my
    budget.`` after ``0``, no bid)."""
    return ("%" if digit == "0" else "0%") + " of my budget."


def share_thought(digit: str, cue: str = "") -> str:
    """The whole Thought a ``steer=share`` buyer writes for ``digit`` after ``cue`` (``Offer 70%
    of my budget.``): the warm start (:func:`agents.finetune.share_thought`) fits this text."""
    return f"{cue}{SHARE_OPEN}{digit}{share_tail(digit)}"


def share_cue(view: BuyerView) -> str:
    """The words a ``share_cue`` buyer's Thought opens with: ``They hold list. `` when the
    seller's standing offer is the list price, ``They came down. `` below it, "" before an
    offer; the binary of ``list_hint`` (:func:`agents.prompts.list_line`), written where the
    share digit is drawn."""
    if len(view.products) > 1:
        raise ValueError("share_cue is written for single-product markets; leave it off")
    held = offer_at_list(view)
    if held is None:
        return ""
    return "They hold list. " if held else "They came down. "


def share_digit(price: float, budget: float, rungs: int) -> str:
    """The share digit of a bid at ``price``: its nearest tenth of ``budget``, held to the
    ladder's ``rungs`` (``9`` for a budget of 0, where every bid is the whole budget)."""
    tenths = round(10 * price / budget) if budget > 0 else 9
    return str(min(9, max(10 - rungs, tenths)))


def share_prices(budget: float, rungs: int) -> tuple[tuple[str, str], ...]:
    """(digit, price as written after ``$``) of the rungs ``steer=share`` offers: ``9`` for 90%
    of the budget down to the ladder's ``rungs`` tenths (:func:`arena.money.budget_ladder`)."""
    offers = budget_ladder(budget, rungs)
    return tuple((str(9 - k), format_price(p)[1:]) for k, p in enumerate(offers))


class Guidance(NamedTuple):
    """What the decoding loop does with a row's next draw."""

    forced: list[int]
    """Tokens to write next, one a step, instead of sampling (empty: sample)."""
    banned: frozenset[int]
    """Tokens the next draw may not be: drawn anyway, the draw is repeated without them."""
    allowed: frozenset[int] = frozenset()
    """Tokens the next draw must be one of (empty: any): another token drawn, the draw is
    repeated among these."""
    explored: bool = False
    """The draw held to ``allowed`` is an exploring start's (:attr:`Steer.explore`): the
    token counts as the policy's, with its log-probability, not as a forced one."""


NO_GUIDANCE = Guidance([], frozenset())

TokenSteer = Callable[[int, list[int]], Guidance]
"""(row, the row's tokens so far) -> its guidance for the next draw."""


def token_steer(
    tokenizer: Any,
    steers: list[Steer | None],
    end_token: int,
    stop_ids: frozenset[int] = frozenset(),
) -> TokenSteer | None:
    """The decoding loop's steer for a batch of rows (None when no row is steered): the forced
    rest of a ``[DEAL]`` price, tokenized, then ``end_token`` to close the turn; a line's label;
    the digit tokens a target may not take; and ``stop_ids`` while lines are missing."""
    if all(steer is None for steer in steers):
        return None
    single = {}  # the digits and action tags that are one token each: what a draw may be held to
    for text in (*"0123456789.,", *Kind.__members__):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) == 1:
            single[text] = ids[0]

    def guide(row: int, ids: list[int]) -> Guidance:
        steer = steers[row]
        if steer is None:
            return NO_GUIDANCE
        reply = tokenizer.decode(ids, skip_special_tokens=True)
        forced = steer.forced(reply)
        if forced is not None:
            text, ends = forced
            tokens = tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
            return Guidance([*tokens, end_token] if ends else tokens, frozenset())
        choices = steer.choices(reply)  # held only where each choice is a token of its own
        allowed = frozenset(single[c] for c in choices) if choices <= single.keys() else None
        explored = steer.exploring(reply)
        if explored and not allowed:
            raise ValueError(
                f"an exploring start holds each of {sorted(choices)} to a token of its own, "
                "which this tokenizer does not write; set learner.exploring_starts = 'none'"
            )
        if allowed:
            return Guidance([], frozenset(), allowed, explored)
        banned = frozenset(single[d] for d in steer.banned_digits(reply) if d in single)
        if steer.unfinished(reply):
            banned |= stop_ids
        return Guidance([], banned) if banned else NO_GUIDANCE

    return guide


def check_steer(value: str, ladder: int = 0) -> str:
    """``value`` as a steer option beside a ``ladder`` of that many rungs, or an error naming
    the choices (or the missing ladder)."""
    if value not in STEERS:
        raise ValueError(f"steer={value!r} is unknown; choose one of {', '.join(STEERS)}")
    if value in LADDERED and not ladder:
        raise ValueError(f"steer={value} holds a buyer's bids to its ladder: set ladder=N too")
    return value
