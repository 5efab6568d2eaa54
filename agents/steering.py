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

Only single-product markets are steered (a multi-product DEAL also names its product). The hf
back-end and the league's hf sampler steer; the vllm and openai back-ends refuse the option.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arena.money import format_price
from arena.views import SellerView

STEERS: tuple[str, ...] = ("none", "deal")
"""Values of the agent option ``steer``: none (plain sampling) or deal (module docstring)."""

_TARGET = re.compile(r"(?im)^[^\S\n]*\W{0,2}target\W{0,2}[^\S\n]*:[^\d\n]{0,12}([0-9]{1,3})")
_DEAL_TAIL = re.compile(r"(?is)\baction\W{0,2}[^\S\n]*:[^\S\n]*\[deal\]([^\n]*)$")


@dataclass(frozen=True)
class Steer:
    """What a seller's reply is steered to at this turn: each target's standing bid."""

    bids: tuple[tuple[int, str], ...]
    """(target number as the seller writes it, 1-based; the bid as the protocol renders it)."""

    def forced_text(self, reply: str) -> str | None:
        """The rest of the reply's ``[DEAL]`` price when ``reply`` (the text so far) has just
        written ``[DEAL]`` or a prefix of `` $<bid>`` after it; None otherwise."""
        tail = _DEAL_TAIL.search(reply)
        if tail is None:
            return None
        targets = _TARGET.findall(reply)
        if not targets:
            return None
        bid = dict(self.bids).get(int(targets[-1]))
        if bid is None:
            return None
        price = f" {bid}"
        written = tail.group(1)
        if not price.startswith(written) or written == price:
            return None
        return price[len(written) :]


def steer_for(view: Any) -> Steer | None:
    """The seller's steer at this view: the standing bid of every buyer (None for a buyer's
    view, a multi-product market, or a board without bids)."""
    if not isinstance(view, SellerView) or len(view.products) != 1:
        return None
    bids = tuple(
        (index + 1, format_price(channel.bid))
        for index, channel in enumerate(view.channels)
        if channel.bid is not None
    )
    return Steer(bids) if bids else None


TokenSteer = Callable[[int, list[int]], list[int]]
"""(row, the row's tokens so far) -> tokens to force next (empty: sample as usual)."""


def token_steer(tokenizer: Any, steers: list[Steer | None], end_token: int) -> TokenSteer | None:
    """The decoding loop's steer for a batch of rows (None when no row is steered): the forced
    rest of a ``[DEAL]`` price, tokenized, then ``end_token`` to close the turn."""
    if all(steer is None for steer in steers):
        return None

    def forced(row: int, ids: list[int]) -> list[int]:
        steer = steers[row]
        if steer is None:
            return []
        text = steer.forced_text(tokenizer.decode(ids, skip_special_tokens=True))
        if text is None:
            return []
        return [*tokenizer(text, add_special_tokens=False)["input_ids"], end_token]

    return forced


def check_steer(value: str) -> str:
    """``value`` as a steer option, or an error naming the choices."""
    if value not in STEERS:
        raise ValueError(f"steer={value!r} is unknown; choose one of {', '.join(STEERS)}")
    return value
