"""The league's base model: a local folder, or the project's tiny test model, optionally warmed up.

``model = "tiny"`` (or a relative path that does not exist) builds
:func:`agents.testing.tiny_model.build_tiny_model` into the league folder, so the example league
runs on a fresh clone with nothing downloaded. Its context is raised from 2048 to
``LONG_CONTEXT`` positions: the tiny byte-level tokenizer spends about 1,200 tokens on the
seller's system prompt and 400-600 on each turn's board, so a seven-turn episode streams some
5,000 tokens. The model uses rotary position embeddings (no learned position table), so a longer
``max_position_embeddings`` changes no weight and no output at positions it already covered.

A warm start (``[league.learner] warm_start = "scripted:<name>"``) fits the base on transcripts of
that scripted agent with :func:`agents.finetune.fit_on_transcripts` before generation 1, so that
GRPO starts from a model that writes the protocol: a random model violates the format on every
turn, every reward is -1, and a group with equal rewards has no advantage to learn from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from agents.engine import play_scenarios
from agents.finetune import fit_on_transcripts
from agents.testing.tiny_model import build_tiny_model
from arena.catalog import load_catalog, split_catalog
from arena.records import EpisodeRecord
from arena.scenarios import make_scenarios
from leagues.config import TINY, LeagueConfig
from leagues.trainer import check_model_folder, load_chat_tokenizer, save_atomically

LONG_CONTEXT = 16384
"""Positions of the league's tiny model (see the module docstring)."""

Log = Callable[[str], None]


def resolve_model_path(config: LeagueConfig, folder: Path) -> tuple[Path, bool]:
    """(model folder, whether it is the tiny model to build there when absent)."""
    model = config.learner.model
    if model == TINY:
        return folder / "tiny-model", True
    path = Path(model).expanduser()
    if path.is_absolute():
        return path, False
    return folder / path, True


def ensure_tiny_model(
    path: Path, seed: int = 0, hidden: int = 64, layers: int = 2, heads: int = 4
) -> Path:
    """Build the tiny chat model at ``path`` (long context) unless a model is already there."""
    if (path / "config.json").is_file():
        return path
    from transformers import AutoConfig

    def write(folder: Path) -> None:
        build_tiny_model(folder, seed=seed, hidden=hidden, layers=layers, heads=heads)
        config = AutoConfig.from_pretrained(str(folder))
        config.max_position_embeddings = LONG_CONTEXT
        config.save_pretrained(str(folder))
        tokenizer_config = folder / "tokenizer_config.json"
        settings = json.loads(tokenizer_config.read_text())
        settings["model_max_length"] = LONG_CONTEXT
        tokenizer_config.write_text(json.dumps(settings, indent=2))

    return save_atomically(path, write)


def prepare_base_model(config: LeagueConfig, folder: Path, log: Log) -> Path:
    """The folder of the model generation 1 starts from: checked, built or warmed up."""
    path, buildable = resolve_model_path(config, folder)
    if not (path / "config.json").is_file():
        if not buildable:
            raise FileNotFoundError(
                f"league.learner.model: no model folder at {path}; give a local transformers "
                "model folder, or 'tiny' to build the project's tiny test model"
            )
        log(f"building the project's tiny test model at {path}")
        ensure_tiny_model(path, config.seed)
    check_model_folder(path)
    load_chat_tokenizer(path)
    if not config.learner.warm_start:
        return path
    return warm_start(config, path, folder / "warm-start", log)


def warm_start_records(config: LeagueConfig) -> list[EpisodeRecord]:
    """Scripted episodes of the warm-start agent against the other side's initial population,
    on the training split (scenario seeds apart from training and evaluation)."""
    learner = config.learner
    market = config.market_config()
    catalog = split_catalog(load_catalog(config.catalog), config.train_split)
    scenarios = make_scenarios(market, catalog, config.seed + 7_919, learner.warm_start_episodes)
    if learner.warm_start_role == "seller":
        return play_scenarios(market, scenarios, learner.warm_start, list(config.buyers))
    records = []
    for k, seller in enumerate(config.sellers):
        share = scenarios[k :: len(config.sellers)]
        records += play_scenarios(market, share, seller, [learner.warm_start])
    return records


def warm_start(config: LeagueConfig, base: Path, out: Path, log: Log) -> Path:
    """Fit ``base`` on the warm-start agent's transcripts into ``out`` (once; reused after)."""
    if (out / "config.json").is_file():
        return out

    learner = config.learner
    records = warm_start_records(config)
    log(
        f"warm start: fitting {base.name} on {len(records)} episodes of {learner.warm_start} "
        f"({learner.warm_start_steps} steps)"
    )

    def write(folder: Path) -> None:
        fit_on_transcripts(
            base,
            records,
            folder,
            steps=learner.warm_start_steps,
            lr=learner.warm_start_lr,
            seed=config.seed,
            config=config.market_config(),
            roles=(learner.warm_start_role,),
        )

    return save_atomically(out, write)
