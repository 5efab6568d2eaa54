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

A side may instead start from a trained checkpoint (``[league.learner.start]``: another league's
``hf:<model>?lora=<adapter>``): its lineage trains on that model, continuing that adapter, and
when every side has one nothing is built here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agents.engine import play_vs_pool
from agents.finetune import FitConfig, fit_on_transcripts
from agents.llm import LLMAgentConfig
from arena import settings
from arena.catalog import load_catalog, split_catalog
from arena.records import EpisodeRecord
from arena.scenarios import make_scenarios
from leagues.config import LeagueConfig
from leagues.learner_config import BUYER_AIDS, TINY, start_checkpoint
from leagues.numerics import check_numerics, record_numerics
from leagues.tiny import build_league_tiny_model
from leagues.trainer import check_model_folder, load_chat_tokenizer, save_atomically

Log = Callable[[str], None]
VLLM_MIN_HEAD_SIZE = 32
BASE_VERSION = 2
"""Bump when the code that builds a base changes what it builds: old shared bases are not
reused then. 2 (2026-12-02): copy pretraining and the warm start attend by flash spans."""


def base_seed(config: LeagueConfig) -> int:
    """The seed of the base model: ``learner.base_seed``, else the league's."""
    return config.seed if config.learner.base_seed == -1 else config.learner.base_seed


def base_settings(config: LeagueConfig) -> dict[str, Any]:
    """Everything that shapes the base model (a built tiny model, its copy pretraining, the
    warm start): leagues that agree on these (seeds of one recipe, reruns) share one base."""
    learner = config.learner
    warm = {k: getattr(learner, k) for k in ("warm_start", "warm_start_talk",
            "warm_start_episodes", "warm_start_steps", "warm_start_lr", "prompt")}  # fmt: skip
    if learner.warm_start_buyers:  # only when set: earlier bases keep their names
        warm["warm_start_buyers"] = learner.warm_start_buyers
    for aid in BUYER_AIDS:  # only when set: earlier bases keep their names
        if getattr(learner, aid):
            warm[aid] = getattr(learner, aid)
    return settings.to_json({
        "version": BASE_VERSION, "seed": base_seed(config), "model": learner.model,
        "tiny": learner.tiny, "use_vllm": learner.train.use_vllm, "warm": warm,
        "market": config.train_market_config(), "catalog": config.catalog,
        "train_split": config.train_split, "sellers": config.sellers, "buyers": config.buyers,
    })  # fmt: skip


def tiny_settings(config: LeagueConfig) -> dict[str, Any]:
    """Everything that shapes the built tiny model (its tokenizer, weights, copy pretraining):
    leagues that differ only after it (the warm start, the side, the market) share it."""
    learner = config.learner
    return settings.to_json({"version": BASE_VERSION, "seed": base_seed(config),
                             "tiny": learner.tiny, "use_vllm": learner.train.use_vllm})  # fmt: skip


def _digest(value: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def base_folder(config: LeagueConfig, folder: Path) -> Path:
    """Where a league's built base (tiny model, warm start) lives: ``bases/<hash of
    base_settings>`` beside the league folder, shared by every league there with the same
    base; a league stored before bases were shared keeps its own (``<folder>/tiny-model``,
    ``<folder>/warm-start``)."""
    if any((folder / name / "config.json").is_file() for name in ("tiny-model", "warm-start")):
        return folder
    return folder.parent / "bases" / _digest(base_settings(config))


def tiny_model_folder(config: LeagueConfig, folder: Path) -> Path:
    """Where a league's built tiny model lives: ``bases/tiny-<hash of tiny_settings>`` beside
    the league folder, shared by every league with the same tiny settings and base seed (a
    seller and a buyer league of one recipe pay for the copy pretraining once); a tiny model
    stored by earlier versions inside the base folder stays where it is."""
    earlier = base_folder(config, folder) / "tiny-model"
    if (earlier / "config.json").is_file():
        return earlier
    return folder.parent / "bases" / f"tiny-{_digest(tiny_settings(config))}"


def resolve_model_path(config: LeagueConfig, folder: Path) -> tuple[Path, bool]:
    """(model folder, whether it is the tiny model to build there when absent)."""
    model = config.learner.model
    if model == TINY:
        return tiny_model_folder(config, folder), True
    path = Path(model).expanduser()
    if path.is_absolute():
        return path, False
    return folder / path, True


def check_starts(config: LeagueConfig) -> dict[str, Path]:
    """The model folder of each ``learner.start`` checkpoint, each model and adapter checked
    before any work, with an error naming the key."""
    models = {}
    for side, spec in config.learner.start.items():
        where = f"league.learner.start.{side}"
        model, adapter = start_checkpoint(spec, where)
        try:
            models[side] = check_model_folder(Path(model).resolve())  # as LeagueRun.start
        except (FileNotFoundError, ValueError) as exc:
            raise FileNotFoundError(f"{where}: {exc}") from None
        if adapter is not None and not (Path(adapter) / "adapter_config.json").is_file():
            raise FileNotFoundError(
                f"{where}: no LoRA adapter at {adapter} (no adapter_config.json); name a "
                "checkpoint's adapter folder, e.g. runs/<league>/gen-003-<side>/adapter"
            )
    return models


def prepare_base_model(config: LeagueConfig, folder: Path, log: Log) -> Path:
    """The folder of the model generation 1 starts from: checked, built or warmed up; when every
    side starts from a ``learner.start`` checkpoint, the first side's model (nothing built)."""
    starts = check_starts(config)
    for model in dict.fromkeys(starts.values()):
        check_numerics(model, log)  # another league's base, perhaps built on another machine
    if set(config.learner.roles) <= set(starts):
        return starts[config.learner.roles[0]]
    path, buildable = resolve_model_path(config, folder)
    if not buildable and not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"league.learner.model: no model folder at {path}; give a local transformers "
            "model folder, or 'tiny' to build the project's tiny test model"
        )
    if buildable:
        with building(path, log):
            _build_tiny(config, path, log)
    check_model_folder(path)
    load_chat_tokenizer(path)
    if not config.learner.warm_start:
        return path
    out = base_folder(config, folder) / "warm-start"
    with building(out, log):
        return warm_start(config, path, out, log)


@contextlib.contextmanager
def building(path: Path, log: Log) -> Iterator[None]:
    """Hold ``<path>.lock`` while this process checks for and builds the shared folder
    ``path``: seeds of one recipe started side by side share one base, and without the lock
    each would build it over the others' half-written files. The second waits for the first
    (the kernel drops a killed holder's lock) and then finds the folder built."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another run that builds {path}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _build_tiny(config: LeagueConfig, path: Path, log: Log) -> None:
    """Build the project's tiny model at ``path`` (the tiny spec, or a relative model folder
    that does not exist), unless it is there."""
    if (path / "config.json").is_file():
        check_numerics(path, log)
        return
    tiny = config.learner.tiny
    if config.learner.train.use_vllm and tiny.hidden // tiny.heads < VLLM_MIN_HEAD_SIZE:
        # vLLM's CPU attention kernels need a head size of at least 32.
        tiny = dataclasses.replace(tiny, heads=max(1, tiny.hidden // VLLM_MIN_HEAD_SIZE))
        log(f"use_vllm: the tiny model gets {tiny.heads} heads (head size >= 32 for vLLM)")
    log(f"building the project's tiny model at {path}")
    seed = base_seed(config)

    def write(folder: Path) -> None:
        build_league_tiny_model(folder, tiny, seed, log)
        record_numerics(folder)

    save_atomically(path, write)


def warm_start_records(config: LeagueConfig) -> list[EpisodeRecord]:
    """Scripted episodes of the warm-start agents (equal shares) against the other side's
    initial population (a seller warm start's ``warm_start_buyers`` when set), in the training
    market on the training split (scenario seeds apart from training and evaluation)."""
    learner = config.learner
    market = config.train_market_config()
    catalog = split_catalog(load_catalog(config.catalog), config.train_split)
    scenarios = make_scenarios(
        market, catalog, base_seed(config) + 7_919, learner.warm_start_episodes
    )
    agents = learner.warm_start_specs
    records = []
    for k, agent in enumerate(agents):
        share = scenarios[k :: len(agents)]
        if learner.warm_start_role == "seller":
            buyers = learner.warm_start_buyers or config.buyers
            records += play_vs_pool(market, share, agent, list(buyers))[0]
            continue
        for j, seller in enumerate(config.sellers):
            records += play_vs_pool(market, share[j :: len(config.sellers)], seller, [agent])[0]
    return records


def warm_start(config: LeagueConfig, base: Path, out: Path, log: Log) -> Path:
    """Fit ``base`` on the warm-start agents' transcripts into ``out`` (once; reused after)."""
    if (out / "config.json").is_file():
        check_numerics(out, log)
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
        seed=base_seed(config),
    )

    def write(folder: Path) -> None:
        fit_on_transcripts(
            base,
            records,
            folder,
            fit,
            config=config.train_market_config(),
            roles=learner.warm_start_roles,
            agent=LLMAgentConfig(  # the learner's agent: its prompt, steer and aids
                prompt=learner.prompt,
                steer=learner.steer,
                **{aid: getattr(learner, aid) for aid in BUYER_AIDS},
            ),
            talk=learner.warm_start_talk,
            log=log,
        )
        record_numerics(folder)

    return save_atomically(out, write)
