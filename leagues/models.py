"""The league's base model: a local folder, or the project's tiny model, optionally warmed up.

``model = "tiny"`` (or a relative path that does not exist) builds the project's tiny chat model
into the league folder, sized and copy-pretrained by ``[league.learner.tiny]``
(:mod:`leagues.tiny`), so an example league runs on a fresh clone with nothing downloaded.

A warm start (``[league.learner] warm_start = "scripted:<name>[,scripted:<other>...]"``) fits the
base on transcripts of those scripted agents, in equal shares, with
:func:`agents.finetune.fit_on_transcripts` before generation 1, so that GRPO starts from a model
that writes the protocol: a random model violates the format on every turn, every reward is -1,
and a group with equal rewards has no advantage to learn from. The transcripts are played in the
training market (``train_market``: e.g. jittered prices, so that the model learns to read prices
rather than memorise the catalogue's), and fitted in the learner's prompt style, with the
scripted words or short ones (``warm_start_talk``). A mix of policies leaves room above the
warm-started model for RL to find.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from agents.engine import play_vs_pool
from agents.finetune import FitConfig, fit_on_transcripts
from agents.llm import LLMAgentConfig
from arena.catalog import load_catalog, split_catalog
from arena.records import EpisodeRecord
from arena.scenarios import make_scenarios
from leagues.config import TINY, LeagueConfig
from leagues.tiny import build_league_tiny_model
from leagues.trainer import check_model_folder, load_chat_tokenizer, save_atomically

Log = Callable[[str], None]
VLLM_MIN_HEAD_SIZE = 32


def resolve_model_path(config: LeagueConfig, folder: Path) -> tuple[Path, bool]:
    """(model folder, whether it is the tiny model to build there when absent)."""
    model = config.learner.model
    if model == TINY:
        return folder / "tiny-model", True
    path = Path(model).expanduser()
    if path.is_absolute():
        return path, False
    return folder / path, True


def prepare_base_model(config: LeagueConfig, folder: Path, log: Log) -> Path:
    """The folder of the model generation 1 starts from: checked, built or warmed up."""
    path, buildable = resolve_model_path(config, folder)
    if not (path / "config.json").is_file():
        if not buildable:
            raise FileNotFoundError(
                f"league.learner.model: no model folder at {path}; give a local transformers "
                "model folder, or 'tiny' to build the project's tiny test model"
            )
        tiny = config.learner.tiny
        if config.learner.train.use_vllm and tiny.hidden // tiny.heads < VLLM_MIN_HEAD_SIZE:
            # vLLM's CPU attention kernels need a head size of at least 32.
            tiny = dataclasses.replace(tiny, heads=max(1, tiny.hidden // VLLM_MIN_HEAD_SIZE))
            log(f"use_vllm: the tiny model gets {tiny.heads} heads (head size >= 32 for vLLM)")
        log(f"building the project's tiny model at {path}")
        save_atomically(path, lambda tmp: build_league_tiny_model(tmp, tiny, config.seed, log))
    check_model_folder(path)
    load_chat_tokenizer(path)
    if not config.learner.warm_start:
        return path
    return warm_start(config, path, folder / "warm-start", log)


def warm_start_records(config: LeagueConfig) -> list[EpisodeRecord]:
    """Scripted episodes of the warm-start agents (equal shares) against the other side's
    initial population, in the training market on the training split (scenario seeds apart
    from training and evaluation)."""
    learner = config.learner
    market = config.train_market_config()
    catalog = split_catalog(load_catalog(config.catalog), config.train_split)
    scenarios = make_scenarios(market, catalog, config.seed + 7_919, learner.warm_start_episodes)
    agents = learner.warm_start_specs
    records = []
    for k, agent in enumerate(agents):
        share = scenarios[k :: len(agents)]
        if learner.warm_start_role == "seller":
            records += play_vs_pool(market, share, agent, list(config.buyers))[0]
            continue
        for j, seller in enumerate(config.sellers):
            records += play_vs_pool(market, share[j :: len(config.sellers)], seller, [agent])[0]
    return records


def warm_start(config: LeagueConfig, base: Path, out: Path, log: Log) -> Path:
    """Fit ``base`` on the warm-start agents' transcripts into ``out`` (once; reused after)."""
    if (out / "config.json").is_file():
        return out

    learner = config.learner
    records = warm_start_records(config)
    log(
        f"warm start: fitting {base.name} on {len(records)} episodes of {learner.warm_start} "
        f"({learner.warm_start_steps} steps)"
    )
    fit = FitConfig(
        steps=learner.warm_start_steps,
        learning_rate=learner.warm_start_lr,
        warmup_steps=min(20, learner.warm_start_steps // 10),
        seed=config.seed,
    )

    def write(folder: Path) -> None:
        fit_on_transcripts(
            base,
            records,
            folder,
            fit,
            config=config.train_market_config(),
            roles=learner.warm_start_roles,
            agent=LLMAgentConfig(prompt=learner.prompt),
            talk=learner.warm_start_talk,
            log=log,
        )

    return save_atomically(out, write)
