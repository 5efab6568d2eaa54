"""Prompts of the LLM agents: the template files in ``agents/prompts/`` and how they are filled.

The words live in the ``.txt`` files, one per prompt or fragment, so they can be read and edited
as prose; this module only picks the files and fills their ``{placeholders}``:

- ``seller_system.txt`` / ``seller_system_multi.txt``: the seller's system prompt (paper Section
  11.2), with N, K, T, the product card, the private cost floor and the output format with one
  example. The ``_multi`` variant (M > 1 products) adds the Product field; the single-product one
  never mentions it.
- ``buyer_system.txt`` / ``buyer_system_multi.txt``: a buyer's system prompt (Section 11.1) with
  its private budget, K, the output format and, under the first-offer regulator (Section 3.3), its
  required opening price (``buyer_opening_regulated.txt``, else ``buyer_opening_free.txt``).
- ``product_card.txt``: one product's public card (codename, title, list price, description).
- ``persona_<name>.txt``: persona fragments selected by ``persona=<name>`` in an agent spec.
- ``narration.txt``: the note that asks a narrating LLM for words around a decided move.
- ``*_compact.txt``: the compact style (``prompt=compact`` in an agent spec): the same protocol
  and rules in a few hundred characters, with the compact per-turn board of
  :func:`arena.observations.compact_seller_text`, for small models that pay for every token (the
  tiny model reads the full seller prompt as ~900 tokens, the compact one as ~300).
  Single-product markets only.

Information partition (Section 3.1): a system prompt is built from the agent's own *view* only
(``SellerView`` or ``BuyerView``), never from the scenario, so a buyer's prompt cannot contain the
seller's cost or another buyer's values. The per-turn user message is the observation text of
:mod:`arena.observations`, which obeys the same partition.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib import resources

from arena.catalog import Product
from arena.game import BuyerView, SellerView
from arena.money import budget_ladder, cents, floor_cents, format_price
from arena.observations import (
    buyer_text,
    compact_buyer_text,
    compact_seller_text,
    seller_text,
)

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_BLANK_RUNS = re.compile(r"\n{3,}")


def _folder():  # -> importlib.resources.abc.Traversable
    return resources.files("agents") / "prompts"


def template_names() -> tuple[str, ...]:
    """Names (file stems) of every template shipped in ``agents/prompts/``."""
    return tuple(sorted(p.name[:-4] for p in _folder().iterdir() if p.name.endswith(".txt")))


@functools.cache
def template(name: str) -> str:
    """The text of template ``name`` (``agents/prompts/<name>.txt``), outer whitespace removed."""
    path = _folder() / f"{name}.txt"
    if not path.is_file():
        raise ValueError(f"no prompt template {name!r}; known: {', '.join(template_names())}")
    return path.read_text(encoding="utf-8").strip()


def fill(text: str, values: Mapping[str, object]) -> str:
    """Replace every ``{name}`` in ``text``; a placeholder without a value is an error.

    Runs of blank lines left by empty fragments (no persona, say) collapse to one blank line.
    """

    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"prompt placeholder {{{key}}} has no value; given: {sorted(values)}")
        return str(values[key])

    return _BLANK_RUNS.sub("\n\n", _PLACEHOLDER.sub(value, text))


def render(name: str, **values: object) -> str:
    """Template ``name`` filled with ``values``."""
    return fill(template(name), values)


def personas() -> tuple[str, ...]:
    """Persona names available to ``persona=<name>`` (from the ``persona_*.txt`` files)."""
    return tuple(n.removeprefix("persona_") for n in template_names() if n.startswith("persona_"))


def persona_text(name: str) -> str:
    """The persona fragment for ``name``; the empty name means no persona."""
    if not name:
        return ""
    if name not in personas():
        raise ValueError(f"unknown persona {name!r}; choose one of {', '.join(personas())}")
    return template(f"persona_{name}")


def product_card(product: Product, label: str) -> str:
    """A product's public card: nothing private (the cost is never part of it)."""
    features = "; ".join(line.strip() for line in product.features.splitlines() if line.strip())
    return render(
        "product_card",
        label=label,
        codename=product.id,
        title=product.title,
        list_price=format_price(product.list_price),
        description=product.description or "none",
        features=features or "none",
    )


def _cards(products: tuple[Product, ...]) -> str:
    if len(products) == 1:
        return product_card(products[0], "Product")
    return "\n\n".join(product_card(p, f"Product {i + 1}") for i, p in enumerate(products))


def seller_system_prompt(view: SellerView, total_turns: int, persona: str = "") -> str:
    """The seller's system prompt (Section 11.2) from its first view and the market's T."""
    products = view.products
    values: dict[str, object] = {
        "num_buyers": len(view.channels),
        "total_turns": total_turns,
        "per_buyer_cap": view.per_buyer_cap,
        "products": _cards(products),
        "example_price": format_price(products[0].list_price),
        "persona": persona_text(persona),
    }
    if len(products) == 1:
        values["cost"] = format_price(products[0].cost)
        return render("seller_system", **values)
    values["num_products"] = len(products)
    values["costs"] = "\n".join(
        f"- Product {i + 1}: cost {format_price(p.cost)}, stock {view.stock[i]}"
        for i, p in enumerate(products)
    )
    return render("seller_system_multi", **values)


def buyer_system_prompt(view: BuyerView, persona: str = "") -> str:
    """Buyer ``view.buyer``'s system prompt (Section 11.1), built from its own view only."""
    products = view.products
    multi = len(products) > 1
    opening = view.opening_product
    if view.regulated_opening is not None:
        where = f" on product {opening + 1}" if multi else ""
        opening_rule = render(
            "buyer_opening_regulated",
            opening_price=format_price(view.regulated_opening),
            opening_product=where,
        )
    else:
        opening_rule = render("buyer_opening_free")
    example = floor_cents(0.5 * min(view.valuations[opening], products[opening].list_price))
    values: dict[str, object] = {
        "products": _cards(products),
        "per_buyer_cap": view.max_rounds,
        "opening": opening_rule,
        "example_price": format_price(example),
        "persona": persona_text(persona),
    }
    if not multi:
        values["budget"] = format_price(view.valuations[0])
        return render("buyer_system", **values)
    values["num_products"] = len(products)
    values["example_product"] = opening + 1
    values["budget"] = "\n".join(
        f"- Product {i + 1}: {format_price(v)}" for i, v in enumerate(view.valuations)
    )
    return render("buyer_system_multi", **values)


PROMPT_STYLES = ("full", "compact")
"""``full``: the paper's prompts (Section 11); ``compact``: the same protocol in few tokens."""


def check_style(style: str, num_products: int) -> None:
    """A clear error for an unknown style, or the compact style with several products."""
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt={style!r} is unknown; choose one of {', '.join(PROMPT_STYLES)}")
    if style == "compact" and num_products > 1:
        raise ValueError(
            f"prompt=compact is written for single-product markets; use prompt=full with "
            f"{num_products} products"
        )


def compact_seller_system_prompt(view: SellerView, total_turns: int, persona: str = "") -> str:
    """The seller's compact system prompt: product, cost floor, message budgets, format."""
    product = view.products[0]
    return render(
        "seller_system_compact",
        num_buyers=len(view.channels),
        title=product.title,
        list_price=format_price(product.list_price),
        cost=format_price(product.cost),
        total_turns=total_turns,
        per_buyer_cap=view.per_buyer_cap,
        persona=persona_text(persona),
    )


def compact_buyer_system_prompt(view: BuyerView, persona: str = "") -> str:
    """A buyer's compact system prompt, from its own view only."""
    product = view.products[0]
    if view.regulated_opening is not None:
        opening = render(
            "buyer_opening_regulated_compact", opening_price=format_price(view.regulated_opening)
        )
    else:
        opening = render("buyer_opening_free_compact")
    return render(
        "buyer_system_compact",
        title=product.title,
        list_price=format_price(product.list_price),
        budget=format_price(view.valuations[0]),
        opening=opening,
        per_buyer_cap=view.max_rounds,
        persona=persona_text(persona),
    )


def ladder_line(view: BuyerView, rungs: int) -> str:
    """A buyer's budget ladder (agent option ``ladder``): offers at 90%, 80%, ... of its budget.

    The shares are computed for it (:func:`arena.money.budget_ladder`) from its own budget only:
    a small model copies prices digit by digit but cannot multiply, and with the ladder in its
    prompt the share it bids is a choice it can learn rather than arithmetic it cannot do.
    """
    if len(view.products) > 1:
        raise ValueError("ladder is written for single-product markets; use ladder=0")
    offers = budget_ladder(view.valuations[0], rungs)
    shares = ", ".join(f"{90 - 10 * k}% {format_price(p)}" for k, p in enumerate(offers))
    return f"Offers under your budget: {shares}."


def system_prompt(
    view: SellerView | BuyerView,
    total_turns: int,
    persona: str = "",
    style: str = "full",
    ladder: int = 0,
) -> str:
    """The system prompt of whoever ``view`` belongs to, in prompt style ``style``; a buyer's
    ends with its budget ladder when ``ladder`` is set (a seller's has none)."""
    check_style(style, len(view.products))
    if isinstance(view, SellerView):
        if style == "compact":
            return compact_seller_system_prompt(view, total_turns, persona)
        return seller_system_prompt(view, total_turns, persona)
    if style == "compact":
        text = compact_buyer_system_prompt(view, persona)
    else:
        text = buyer_system_prompt(view, persona)
    return f"{text}\n{ladder_line(view, ladder)}" if ladder else text


def offer_line(view: BuyerView) -> str:
    """Whether the buyer's budget covers the seller's standing offer (agent option
    ``budget_hint``): the comparison of two prices a small model cannot make digit by digit,
    which decides whether a ``[DEAL]`` is allowed (Section 3.2); "" before an offer."""
    if len(view.products) > 1:
        raise ValueError("budget_hint is written for single-product markets; leave it off")
    offer = view.offers.get(0)
    if offer is None:
        return ""
    if cents(offer) <= cents(view.valuations[0]):
        return "Your budget covers this offer."
    return "This offer is above your budget."


def list_line(view: BuyerView) -> str:
    """How far the seller's standing offer lies below list price, in whole percent (agent
    option ``list_hint``): the other comparison a small model cannot make digit by digit, which
    tells an anchor at list from a concession; "" before an offer."""
    if len(view.products) > 1:
        raise ValueError("list_hint is written for single-product markets; leave it off")
    offer = view.offers.get(0)
    if offer is None:
        return ""
    if offer_at_list(view):
        return "This offer is the list price."
    return f"This offer is {round(100 * (1 - offer / view.products[0].list_price))}% below list."


def offer_at_list(view: BuyerView) -> bool | None:
    """Whether the seller's standing offer is the list price (to the cent; None before an
    offer): what ``list_hint`` and the share steer's cue both tell the buyer."""
    offer = view.offers.get(0)
    return None if offer is None else cents(offer) >= cents(view.products[0].list_price)


def last_line(view: BuyerView) -> str:
    """Whether the seller's next message on this channel is its last, or that was, in words
    (agent option ``round_hint``): the count "2 of 3" is digits a small model cannot compare,
    and it decides which bid the seller may still take (Section 3.1's cap K); "" before that."""
    left = view.max_rounds - view.seller_messages
    if view.opening or left > 1:
        return ""
    if left == 1:
        return "The seller's next message to you is its last."
    return "That was the seller's last message to you."


def observation(
    view: SellerView | BuyerView,
    style: str = "full",
    budget_hint: bool = False,
    list_hint: bool = False,
    round_hint: bool = False,
) -> str:
    """The per-turn user message: the seller's board or the buyer's own channel; with
    ``budget_hint``, a buyer is also told whether its budget covers the seller's offer, with
    ``list_hint`` how far the offer is below list, with ``round_hint`` when the seller's next
    message to it is its last."""
    if isinstance(view, SellerView):
        return compact_seller_text(view) if style == "compact" else seller_text(view)
    text = compact_buyer_text(view) if style == "compact" else buyer_text(view)
    hints = [
        offer_line(view) if budget_hint else "",
        list_line(view) if list_hint else "",
        last_line(view) if round_hint else "",
    ]
    return "\n".join([text, *(line for line in hints if line)])


def narration_note(decision: str) -> str:
    """The note appended to a narrating agent's observation: the move is fixed, write words."""
    return render("narration", decision=decision)
