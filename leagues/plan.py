"""What a league generation plays: its typed plan, its training rows, its evaluation tournaments.

A :class:`GenerationPlan` is written with every finished stage (``league_generations.plan``) and
read back on resume, so a killed league continues with the opponents, parent and checkpoint it
had chosen. Training scenarios come from the training split, a fresh slice per generation;
evaluation tournaments play the held-out split's scenarios, the same ones for every checkpoint,
so ratings across generations are paired.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from arena import settings
from arena.catalog import load_catalog, split_catalog
from arena.scenarios import Scenario, make_scenarios
from leagues.config import LeagueConfig
from leagues.learner_config import BUYER_AIDS, LearnerConfig
from leagues.rollout import LEARNER, GroupRow
from leagues.sampling import sample_indices
from tournaments.config import TournamentConfig


@dataclass(frozen=True)
class GenerationPlan:
    """The decisions of one generation (generation 0, the setup, records ``label`` and
    ``base`` only)."""

    label: str = field(metadata={"help": "The checkpoint's short name, e.g. gen-2-buyer."})
    side: str = field(default="", metadata={"help": "The trained side (setup: none)."})
    parent: str = field(default="", metadata={"help": "Spec of the checkpoint trained from."})
    parent_label: str = field(default="", metadata={"help": "Its label."})
    parent_adapter: str | None = field(
        default=None, metadata={"help": "LoRA adapter continued; None: a fresh adapter."}
    )
    opponents: tuple[str, ...] = field(
        default=(), metadata={"help": "The other side's population, in population order."}
    )
    weights: tuple[float, ...] = field(
        default=(), metadata={"help": "The meta-strategy: training-opponent mixture."}
    )
    adapter: str | None = field(default=None, metadata={"help": "The trained adapter."})
    checkpoint: Mapping[str, str] = field(
        default_factory=dict, metadata={"help": "Role -> spec of the registered checkpoint."}
    )
    base: str = field(default="", metadata={"help": "Setup: the base model's spec."})

    def to_json(self) -> str:
        return json.dumps(settings.to_json(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> GenerationPlan:
        """A stored plan (written by this code or by earlier versions, as plain JSON)."""
        return settings.from_mapping(GenerationPlan, json.loads(text), "league_generations.plan")


def learner_params(learner: LearnerConfig) -> dict[str, str]:
    """The agent parameters every spec of the learner carries, in training and evaluation, so
    that it reads the prompts it is trained on and decodes as it was trained:
    ``prompt=compact`` for the compact style, ``steer=deal`` for steered decoding, ``ladder=N``,
    ``budget_hint=true``, ``list_hint=true`` and ``round_hint=true`` for a buyer's aids
    (defaults stay out of the specs, so existing leagues keep their checkpoints' names)."""
    params = {} if learner.prompt == "full" else {"prompt": learner.prompt}
    if learner.steer != "none":
        params["steer"] = learner.steer
    for aid in BUYER_AIDS:
        if value := getattr(learner, aid):
            params[aid] = "true" if value is True else str(value)
    return params


def learner_name(label: str, learner: LearnerConfig) -> str:
    """The learner's agent name in training rollouts (never stored)."""
    params = "&".join(f"{k}={v}" for k, v in learner_params(learner).items())
    return f"hf:{label}" + (f"?{params}" if params else "")


def model_spec(config: LeagueConfig, model: Path, adapter: Path | None = None) -> str:
    """The agent spec that evaluates a model folder, or a LoRA adapter over it.

    Every checkpoint of a league is ``lora=<adapter>`` over the one base model, so all of them
    share the base model's back-end: one model load however many checkpoints a tournament holds
    (``vllm:`` with ``use_vllm``, else ``hf:``). Leagues stored before adapters were served
    directly name their hf checkpoints by merged copies (``hf:<gen>/merged?...``); those specs
    are read back from the stored plans and keep working.
    """
    learner = config.learner
    tokens = learner.train.max_completion_length
    lora = "" if adapter is None else f"lora={adapter}&"
    style = "".join(f"&{k}={v}" for k, v in learner_params(learner).items())
    if learner.train.use_vllm:
        return f"vllm:{model}?{lora}max_tokens={tokens}{style}"
    # Seeded: every evaluation request samples from the episode's seed and its place in the
    # episode (agents.llm.request_seed), so an evaluation reproduces bit for bit and every
    # checkpoint meets the same random numbers on the same scenario (paired comparisons).
    # Leagues stored before this evaluated with ``seed=none``; their specs are read back from
    # the stored plans (the base's from generation 0) and keep working.
    return f"hf:{model}?{lora}batch_size={learner.eval_batch_size}&max_tokens={tokens}{style}"


def check_splits(config: LeagueConfig) -> None:
    """Fail early, naming the key, when a catalogue split cannot make the market's scenarios
    (e.g. three substitutable products from the 6-product test split of the small catalogue)."""
    market = config.market_config()
    catalog = load_catalog(config.catalog)
    for key in ("train_split", "eval_split"):
        split = getattr(config, key)
        try:
            make_scenarios(market, split_catalog(catalog, split), config.seed, 1)
        except ValueError as exc:
            raise ValueError(
                f'league.{key} = {split!r}: {exc}; choose another split ("all") or catalogue'
            ) from None


def training_scenarios(config: LeagueConfig, generation: int) -> list[Scenario]:
    """The generation's own slice of the training scenario list (no scenario is reused), in the
    training market (``train_market``)."""
    learner, per_step = config.learner, config.learner.train.scenarios_per_step
    if learner.side == "self-play":
        count = learner.steps_per_generation * per_step // 2
        return _train_split_scenarios(config, count, (generation - 1) * count)
    # Every seat its own group: as many scenarios as groups, divided by the seats. Generations
    # keep the stride of the longest side's, so a buyer generation's scenarios never overlap a
    # seller's whatever the steps of each (side_train's steps_per_generation).
    side = learner.side_of(generation)
    count = learner.steps_for(side) * per_step // seats_trained(config, side)
    start = (generation - 1) * learner.most_steps * per_step
    return _train_split_scenarios(config, count, start)


def seats_trained(config: LeagueConfig, side: str) -> int:
    """Learner seats trained per scenario on ``side``: every buyer seat with ``buyer_seats =
    "all"``, else one (self-play counts its two rows apart)."""
    if side == "buyer" and config.learner.buyer_seats == "all":
        return config.market_config().num_buyers
    return 1


def _train_split_scenarios(config: LeagueConfig, count: int, start: int) -> list[Scenario]:
    """Scenarios ``start .. start+count-1`` of the seed's list, in the training market."""
    market = config.train_market_config()
    catalog = split_catalog(load_catalog(config.catalog), config.train_split)
    return make_scenarios(market, catalog, config.seed, count, start=start)


SPARE_START = 1 << 30
"""Index of the first spare scenario in the seed's list: far beyond every generation's own."""


def spare_scenarios(config: LeagueConfig, generation: int) -> list[Scenario]:
    """Fresh training scenarios for dynamic sampling (``train.dynamic_sampling``): a slice per
    generation of a part of the seed's list no generation trains on, one scenario per group
    and round, in step order (:class:`leagues.trainer.TrainJob`)."""
    learner, train = config.learner, config.learner.train
    stride = learner.most_steps * train.scenarios_per_step * train.dynamic_sampling
    steps = learner.steps_for(learner.side_of(generation))
    count = steps * train.scenarios_per_step * train.dynamic_sampling
    if not count:
        return []
    return _train_split_scenarios(config, count, SPARE_START + (generation - 1) * stride)


def training_rows(
    config: LeagueConfig,
    generation: int,
    side: str,
    opponents: Sequence[str],
    weights: Sequence[float],
) -> list[GroupRow]:
    """One dataset row per GRPO group, in step order: each scenario gets one opponent drawn
    from the mixture, who fills every opponent seat; self-play rows pair the seller and the
    first buyer seat of each scenario; a buyer with ``buyer_seats = "all"`` gets a row per buyer
    seat of each scenario (the rows of one scenario share episodes). The ``j``-th scenario's
    groups share as many learner replies as the ``j``-th entry of the side's ``shared_replies``,
    cycled; a buyer's groups make exploring starts when its ``exploring_starts`` is set."""
    scenarios = training_scenarios(config, generation)
    n = config.market_config().num_buyers
    cycle = config.learner.shared_replies_for(side)
    explore = config.learner.side_setting(side, "exploring_starts") if side == "buyer" else "none"
    rows = []
    if side == "self-play":
        for j, sc in enumerate(scenarios):
            seats = (LEARNER,) * n
            for trained in ("seller", "buyer_1"):
                key = f"g{generation}/s{sc.index}/{trained}"
                rows.append(
                    GroupRow(key, sc, LEARNER, seats, trained, shared=cycle[j % len(cycle)])
                )
        return rows
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, generation, 17]))
    draws = sample_indices(rng, np.asarray(weights), len(scenarios))
    for j, (sc, k) in enumerate(zip(scenarios, draws.tolist(), strict=True)):
        opponent, shared = opponents[k], cycle[j % len(cycle)]
        if side == "seller":
            key = f"g{generation}/s{sc.index}"
            rows.append(GroupRow(key, sc, LEARNER, (opponent,) * n, "seller", shared=shared))
        elif seats_trained(config, side) > 1:
            # The learner in every buyer seat, one group per seat, credited by buyer_credit.
            credit = config.learner.buyer_credit
            for i in range(1, n + 1):
                key = f"g{generation}/s{sc.index}/buyer_{i}"
                seats = (LEARNER,) * n
                rows.append(
                    GroupRow(key, sc, opponent, seats, f"buyer_{i}", credit, shared, explore)
                )
        else:
            # The learner takes slot 1; other buyer slots (N > 1) draw from the initial buyers.
            others = [config.buyers[sc.pool_index(i, len(config.buyers))] for i in range(1, n)]
            buyers = (LEARNER, *others)
            key, credit = f"g{generation}/s{sc.index}", config.learner.buyer_credit
            rows.append(GroupRow(key, sc, opponent, buyers, "buyer_1", credit, shared, explore))
    return rows


def eval_tournament(
    config: LeagueConfig, name: str, sellers: Sequence[str], buyers: Sequence[Sequence[str]]
) -> TournamentConfig:
    """A tournament on the league's held-out evaluation scenarios."""
    return TournamentConfig(
        name=name,
        sellers=tuple(sellers),
        buyers=tuple(tuple(b) for b in buyers),
        preset=config.preset,
        market=dict(config.market),
        episodes=config.learner.eval_episodes,
        seed=config.evaluation_seed,
        catalog=config.catalog,
        split=config.eval_split,
    )
