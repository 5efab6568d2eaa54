"""Seats: the agent names of a market, ``seller`` and ``buyer_1`` .. ``buyer_N``.

Buyers are numbered from 1 in names and in the protocol (``Target: 2``) and from 0 in code
(``channels[1]``); these helpers are the one place that converts between the two.
"""

from __future__ import annotations

SELLER = "seller"
BUYER_PREFIX = "buyer_"
ROLES = ("seller", "buyer")
"""The two roles an agent plays (a seat's role: :func:`seat_role`)."""


def buyer_seat(index: int) -> str:
    """The seat name of buyer ``index`` (0-based): ``buyer_seat(0) == "buyer_1"``."""
    return f"{BUYER_PREFIX}{index + 1}"


def buyer_index(seat: str) -> int:
    """The 0-based buyer index of a seat name: ``buyer_index("buyer_1") == 0``."""
    number = seat.removeprefix(BUYER_PREFIX)
    if number == seat or not number.isdigit() or int(number) < 1:
        raise ValueError(f"{seat!r} is not a buyer seat; buyer seats are buyer_1, buyer_2, ...")
    return int(number) - 1


def channel_of(seat: str, num_buyers: int) -> int | None:
    """The 0-based channel of ``seat`` in a market of ``num_buyers`` buyers, or None where no
    buyer holds it: a seller message to ``Target: 0`` or ``Target: 9`` is recorded as sent to
    ``buyer_0`` or ``buyer_9`` (a violation with no channel)."""
    number = seat.removeprefix(BUYER_PREFIX)
    if number == seat or not number.isdigit() or not 1 <= int(number) <= num_buyers:
        return None
    return int(number) - 1


def buyer_seats(num_buyers: int) -> list[str]:
    """``buyer_1`` .. ``buyer_N``."""
    return [buyer_seat(i) for i in range(num_buyers)]


def seats(num_buyers: int) -> list[str]:
    """Every seat of a market with ``num_buyers`` buyers, seller first."""
    return [SELLER, *buyer_seats(num_buyers)]


def seat_slot(seat: str) -> int:
    """The seat's slot: 0 for the seller, ``i`` for ``buyer_i``."""
    return 0 if seat == SELLER else buyer_index(seat) + 1


def slot_seat(slot: int) -> str:
    """The seat of slot ``slot`` (0 the seller, ``i`` buyer ``i``)."""
    return SELLER if slot == 0 else buyer_seat(slot - 1)


def seat_role(seat: str) -> str:
    """``seller`` or ``buyer``: the role a seat is played in."""
    if seat == SELLER:
        return SELLER
    buyer_index(seat)
    return "buyer"
