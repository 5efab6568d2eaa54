"""Fixtures of the league tests: the tiny model's tokenizer, and text policies that read the
learner's token stream and answer with valid protocol messages (real agents in the learner's
seat, so multi-turn episodes happen without a trained model)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from leagues.generators import Context, Generate, Sample

PRICE = r"\$([0-9]+(?:\.[0-9]+)?)"


def _last(pattern: str, text: str) -> str | None:
    found = re.findall(pattern, text)
    return found[-1] if found else None


def seller_reply(text: str, rng: np.random.Generator) -> str:
    """A valid seller move read off the rendered conversation: [SELL] at a random price between
    cost and list to a random active buyer."""
    list_price = float(re.findall(r"List price: " + PRICE, text)[0])
    cost = float(_last(r"below your cost " + PRICE, text))
    active = [int(b) for b in _last(r"Active buyers you may target: ([0-9, ]+)\.", text).split(",")]
    target = int(rng.choice(active))
    price = round(float(rng.uniform(cost, list_price)), 2)
    talk = f"I can do ${price:.2f}."
    return f"Thought: Probe.\nTarget: {target}\nTalk: {talk}\nAction: [SELL] ${price:.2f}"


def buyer_reply(text: str, rng: np.random.Generator) -> str:
    """A valid buyer move: accept an affordable [SELL] half the time, else bid below budget."""
    budget = float(re.findall(r"Your private budget for this product is " + PRICE, text)[0])
    required = _last(r"Your opening offer must be exactly " + PRICE, text)
    offer = _last(r"Seller action: \[SELL\] " + PRICE, text)
    if offer is not None and float(offer) <= budget and rng.random() < 0.5:
        return "Thought: Fine.\nTalk: Deal.\nAction: [DEAL]"
    price = float(required) if required and offer is None else budget * rng.uniform(0.3, 0.9)
    return f"Thought: Bid.\nTalk: How about ${price:.2f}?\nAction: [BUY] ${price:.2f}"


@pytest.fixture()
def text_policy() -> Callable[[Any], Generate]:
    """``make(tokenizer)``: a generator that answers every stream with a valid move of the
    stream's role (read off its system prompt) and the end-of-turn token, logprob 0 each; the
    call's rows draw in turn from one generator seeded by the call, and a context with a
    ``share`` from its own, seeded by it (as the real samplers do)."""

    def make(tokenizer: Any) -> Generate:
        def generate(contexts: list[Context], seed: int) -> list[Sample]:
            rows = np.random.default_rng(seed)
            out = []
            for stream in contexts:
                shared = stream.share is not None
                rng = np.random.default_rng(stream.share) if shared else rows
                context = tokenizer.decode(stream.ids)
                reply = seller_reply if "You are the seller" in context else buyer_reply
                text = reply(context, rng)
                ids = tokenizer(text, add_special_tokens=False)["input_ids"]
                ids = [*ids, tokenizer.eos_token_id]
                out.append(Sample(ids, [0.0] * len(ids)))
            return out

        return generate

    return make


class Quitter:
    """A seller that ends every episode at once: a short, number-free valid move (reward 0)."""

    spec = "test:quitter"

    def reset(self, context: Any) -> None:
        return None

    def act(self, view: Any) -> str:
        return "Thought: Not today.\nTarget: 1\nTalk: Thank you, goodbye.\nAction: [QUIT]"


class Lowballer:
    """A buyer that always bids one dollar: valid under any budget, never accepted (reward 0)."""

    spec = "test:lowballer"

    def reset(self, context: Any) -> None:
        return None

    def act(self, view: Any) -> str:
        return "Thought: Cheap.\nTalk: One dollar.\nAction: [BUY] $1.00"


NO_SYSTEM_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.fixture(scope="session")
def warm_models(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny model fitted (about 40 s in all) to quit as a seller, and to lowball as a buyer.

    A random model breaks the format on every turn, so every reward is -1 and GRPO has no
    advantage to learn from; these write a valid move (reward 0) most of the time, and sampled
    at temperature 1 not always, so groups hold different rewards. Their chat template leaves
    out the system message (any template is allowed): prompts of ~500 tokens instead of ~1,700
    let a short fit teach the two-layer model its reply.
    """
    from agents import make_agent
    from agents.driver import Match
    from agents.engine import play_matches
    from agents.finetune import FitConfig, fit_on_transcripts
    from arena.catalog import load_catalog
    from arena.config import get_preset
    from arena.scenarios import make_scenarios

    base = tmp_path_factory.mktemp("warm") / "no-system"
    shutil.copytree(tiny_model_dir, base)
    (base / "chat_template.jinja").write_text(NO_SYSTEM_TEMPLATE)
    catalog = load_catalog()
    markets = {
        "seller": get_preset("in-distribution"),
        "buyer": get_preset("bilateral", {"total_turns": 2}),
    }
    models = {}
    for role, market in markets.items():
        records = []
        for scenario in make_scenarios(market, catalog, 99, 64):
            if role == "seller":
                seller = Quitter()
                buyers = [make_agent("scripted:time", "buyer") for _ in range(3)]
            else:
                seller, buyers = make_agent("scripted:prober", "seller"), [Lowballer()]
            records.append(play_matches(market, [Match(scenario, seller, tuple(buyers))])[0][0])
        out = base.parent / role
        fit = FitConfig(steps=120, learning_rate=3e-3)
        fit_on_transcripts(base, records, out, fit, config=market, roles=(role,))
        models[role] = out
    return models


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Iterator[None]:
    """Tiny models run many small ops: on a shared 2-core machine one thread is far faster
    (threads of small ops stall each other), so league tests run single-threaded."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path) -> Any:
    from leagues.trainer import load_chat_tokenizer

    return load_chat_tokenizer(tiny_model_dir)
