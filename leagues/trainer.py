"""GRPO training of one learner: TRL's GRPOTrainer driven by the multi-turn ``rollout_func``.

One optimizer step = one rollout batch of ``episodes_per_step`` episodes
(``per_device_train_batch_size * gradient_accumulation_steps``): ``episodes_per_step /
num_generations`` scenarios, each played ``num_generations`` times (a GRPO group; see
:mod:`leagues.rollout`). The loss defaults to CISPO with the paper's settings
(:class:`leagues.train_config.TrainConfig` explains the mapping of its clip pair onto TRL). The
learner is a LoRA adapter (PEFT) on a local base model; a generation continues its parent's
adapter.

Generation (:mod:`leagues.generators`): without vLLM by the project's decoding loop on the model
being trained, inside TRL's ``unwrap_model_for_generation`` with the model in eval mode, each
learner stream's KV kept between its turns; with ``use_vllm`` through TRL's vLLM integration
(colocate: an engine in the training process, on a GPU or a CPU, :mod:`leagues.colocate`; server:
a ``trl vllm-serve`` process on another GPU), whose weights TRL syncs with the adapter being
trained before every step. With vLLM the sampler's logprobs differ from the trainer's; for CISPO
the per-token ratio p_trainer / p_sampler is clipped to the paper's pair [0.8, 6.0]
(``vllm_importance_sampling_clip_min`` and ``_max``; see :func:`grpo_config`).

Resumable: the trainer checkpoints every ``save_steps`` steps into ``output_dir``; a new call
with the same job resumes from the newest complete checkpoint (adapter, optimizer, scheduler, RNG
and data position), and rollout seeds depend only on (job seed, step), so a resumed step plays
the same scenarios against the same opponents.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import random
import shutil
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agents.backends.hf_attention import register as register_attention
from agents.backends.hf_backend import load_tokenizer, resolve_device_dtype
from arena.config import MarketConfig
from arena.scenarios import Scenario
from leagues.colocate import (
    check_sampler_model,
    engine_overrides,
    engine_settings,
    release_engine,
    sync_by_reload,
)
from leagues.generators import HFGenerator, VLLMGenerator, eval_mode
from leagues.group_rewards import learner_reward
from leagues.rollout import GroupRow, Policy, rollout_batch
from leagues.streams import ChatFormat
from leagues.train_config import TrainConfig, league_grpo_config

MIB = 2**20

StepHook = Callable[[int, dict[str, float]], None]
"""Called after every optimizer step with (global step, TRL's logs for that step)."""


@dataclass(frozen=True)
class TrainJob:
    """Everything one training run (one generation of one learner) needs."""

    base_model: Path
    """The base model folder (a local causal LM with a chat template)."""
    parent_adapter: Path | None
    """LoRA adapter to continue; None starts a fresh adapter."""
    rows: tuple[GroupRow, ...]
    """``steps * scenarios_per_step`` dataset rows, in step order."""
    market: MarketConfig
    train: TrainConfig
    steps: int
    output_dir: Path
    """Trainer checkpoints (what a resume restarts from)."""
    adapter_dir: Path
    """Where the trained adapter is saved at the end."""
    seed: int
    learner_name: str = "hf:learner"
    """The learner's agent spec in the rollouts' episode records (never stored)."""
    log_dir: Path | None = None
    """Where the ``train.report_to`` loggers write (None: ``output_dir/logs``)."""
    run_name: str = "learner"
    """The run's name in those loggers (the league names it after the generation)."""
    spares: tuple[Scenario, ...] = ()
    """Fresh training scenarios for dynamic sampling (``train.dynamic_sampling``): step ``s``
    replays its flat groups on its own slice of them, so a resumed step replays the same."""

    def __post_init__(self) -> None:
        needed = self.steps * self.train.scenarios_per_step
        if len(self.rows) != needed:
            raise ValueError(
                f"a job of {self.steps} steps x {self.train.scenarios_per_step} scenarios needs "
                f"{needed} rows, got {len(self.rows)}"
            )
        spares = needed * self.train.dynamic_sampling
        if len(self.spares) != spares:
            raise ValueError(
                f"dynamic_sampling = {self.train.dynamic_sampling} over {needed} groups needs "
                f"{spares} spare scenarios, got {len(self.spares)} "
                "(leagues.plan.spare_scenarios makes them)"
            )
        if len({row.key for row in self.rows}) != len(self.rows):
            raise ValueError("dataset row keys must be unique (TRL passes only the key)")


def check_model_folder(path: str | Path) -> Path:
    """``path`` as a local causal-LM folder, or a clear error."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"learner model folder {folder} does not exist")
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder} is not a transformers model folder (no config.json)")
    return folder


def load_chat_tokenizer(path: str | Path) -> Any:
    """The model's tokenizer, left-padded, refusing one without a chat template."""

    folder = check_model_folder(path)
    try:
        tokenizer = load_tokenizer(folder)
    except ValueError as exc:
        if "chat_template" in str(exc):
            raise ValueError(
                f"the tokenizer in {folder} has no chat template; a learner needs one to lay out "
                "its turns (use an instruct/chat model, or add a chat_template to its "
                "tokenizer_config.json)"
            ) from None
        raise
    ChatFormat(tokenizer, str(folder))
    return tokenizer


def resolve_device(train: TrainConfig) -> tuple[str, str]:
    """(device, dtype name) with "auto" made concrete, as the hf back-end resolves them."""

    return resolve_device_dtype(train.device, train.dtype, "league.learner.train.device")


def grpo_config(job: TrainJob, device: str, dtype: str) -> Any:
    """TRL's GRPOConfig for the job: the table's GRPOConfig fields (``train.grpo``, by TRL's
    names) and the ones the league sets (:data:`leagues.train_config.LEAGUE_SETS`).

    With vLLM and CISPO, TRL's importance-sampling correction multiplies each token's loss by
    ``clamp(p_old / p_sampler, vllm_importance_sampling_clip_min, ..._clip_max)`` (the project's
    ``token_truncate`` over [0.8, 6.0]), where ``p_old`` is the trainer's recomputed probability;
    TRL's CISPO weight ``min(p_theta / p_old, epsilon_high)`` is 1 at the one optimizer step per
    batch. Together: the paper's (Tinker's) CISPO,
    ``-sg(clamp(p_theta / p_sampler, 0.8, 6.0)) * A * log p_theta``.
    """
    return league_grpo_config(
        job.train,
        output_dir=str(job.output_dir),
        max_steps=job.steps,
        seed=job.seed,
        shuffle_dataset=False,
        logging_steps=1,
        save_strategy="steps",
        save_total_limit=2,
        report_to=list(job.train.report_to) or "none",
        run_name=job.run_name,
        project=job.run_name.partition("/")[0],
        disable_tqdm=True,
        use_cpu=device == "cpu",
        bf16=dtype == "bfloat16",
        fp16=dtype == "float16",
    )


REPORTER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}
"""The package each ``report_to`` logger needs (an extra of the same name)."""


def check_reporters(report_to: Sequence[str]) -> None:
    """Every logger's package is installed, or a clear error before any work."""
    missing = [
        name for name in report_to if importlib.util.find_spec(REPORTER_PACKAGES[name]) is None
    ]
    if missing:
        raise ValueError(
            f"league.learner.train.report_to = {list(report_to)}: the package(s) "
            f"{', '.join(REPORTER_PACKAGES[m] for m in missing)} are not installed; pip install "
            f"'bargain-arena[{','.join(missing)}]' (or drop them from report_to)"
        )


@contextlib.contextmanager
def logging_to(job: TrainJob) -> Iterator[Path]:
    """The environment TRL's logging callbacks read, for the job's loggers, restored after:
    TensorBoard event files in the log folder, wandb offline (``wandb sync`` uploads later if
    wanted), trackio's local database in the log folder. Nothing goes over the network."""
    folder = job.log_dir or job.output_dir / "logs"
    settings = {}
    if "tensorboard" in job.train.report_to:
        settings["TENSORBOARD_LOGGING_DIR"] = str(folder)
    if "wandb" in job.train.report_to:
        project = job.run_name.partition("/")[0]
        settings.update(WANDB_MODE="offline", WANDB_DIR=str(folder), WANDB_SILENT="true",
                        WANDB_PROJECT=project)  # fmt: skip
    if "trackio" in job.train.report_to:
        settings["TRACKIO_DIR"] = str(folder / "trackio")
    if settings:
        folder.mkdir(parents=True, exist_ok=True)
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        yield folder
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def load_policy_model(job: TrainJob, device: str, dtype: str) -> tuple[Any, Any]:
    """(model, peft_config): the parent adapter on the base, trainable; or the base with a new
    LoRA config for the trainer to attach."""
    import torch
    from peft import LoraConfig, PeftModel
    from transformers import AutoModelForCausalLM

    # On CPU, the loss's padded streams and a prefill segment after a stream's cached tokens run
    # as unmasked flash attention (agents.backends.hf_attention); decoding steps as masked SDPA.
    attention = {"attn_implementation": register_attention()} if device == "cpu" else {}
    base = AutoModelForCausalLM.from_pretrained(
        str(job.base_model), dtype=getattr(torch, dtype), **attention
    )
    if job.parent_adapter is not None:
        return PeftModel.from_pretrained(base, str(job.parent_adapter), is_trainable=True), None
    return base, LoraConfig(**job.train.lora.peft_kwargs(), task_type="CAUSAL_LM")


def step_seed(seed: int, step: int) -> int:
    """The rollout seed of optimizer step ``step``: fixed by the job, so resumes replay it."""
    return int(np.random.SeedSequence([seed, step]).generate_state(1)[0]) & 0x7FFFFFFF


def make_rollout_func(job: TrainJob, tokenizer: Any) -> Callable[[list[str], Any], dict]:
    """TRL's ``rollout_func``: plays the episodes of the entries it is handed (module docs)."""
    from trl.models.utils import unwrap_model_for_generation

    lookup = {row.key: row for row in job.rows}
    chat = ChatFormat(tokenizer, str(job.base_model))
    train = job.train

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, list]:
        unknown = [p for p in prompts if p not in lookup]
        if unknown:
            raise KeyError(f"rollout_func got prompts that are no dataset row: {unknown[:3]}")
        rows = [lookup[p] for p in prompts]
        step = trainer.state.global_step
        seed = step_seed(job.seed, step)
        rounds = train.dynamic_sampling
        per_step = train.scenarios_per_step * rounds
        start = (step % job.steps) * per_step
        spares = job.spares[start : start + per_step]
        limit = train.max_episode_tokens or model_context(trainer.model)
        if train.use_vllm:
            generate = VLLMGenerator(trainer, tokenizer)
            policy = Policy(job.learner_name, chat, generate, train.max_completion_length, limit)
            return rollout_batch(rows, job.market, policy, seed, spares, rounds)
        generation = unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator)
        with generation as model, eval_mode(model):
            generate = HFGenerator(
                model,
                tokenizer,
                train.temperature,
                train.top_p,
                train.max_completion_length,
                train.decode_batch_size or max(1, len(rows)),
                kv_cache_bytes=train.rollout_kv_cache_mib * MIB,
            )
            policy = Policy(job.learner_name, chat, generate, train.max_completion_length, limit)
            return rollout_batch(rows, job.market, policy, seed, spares, rounds)

    return rollout_func


def model_context(model: Any) -> int:
    """The model's context length (``max_position_embeddings``), or a generous default."""
    config = getattr(model, "config", None)
    return int(getattr(config, "max_position_embeddings", None) or 32768)


def prompt_dataset(keys: Sequence[str]) -> Any:
    """The trainer's dataset: one prompt per GRPO group (the rows' keys), in step order.

    Its fingerprint is given (a digest of the keys), so ``datasets`` does not hash the table
    with dill: on a GPU machine's Python 3.12 with pyarrow 26 and dill 0.4.1 that hashing raised
    a PicklingError on pyarrow's MonthDayNano (docs/performance.md, "GPU").
    """
    from datasets import Dataset
    from datasets.table import InMemoryTable

    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
    return Dataset(InMemoryTable.from_pydict({"prompt": list(keys)}), fingerprint=digest)


def build_trainer(job: TrainJob, on_step: StepHook | None = None) -> Any:
    """A GRPOTrainer for the job, with the step hook attached."""
    from transformers import PrinterCallback, TrainerCallback
    from trl import GRPOTrainer

    device, dtype = resolve_device(job.train)
    tokenizer = load_chat_tokenizer(job.base_model)
    train = job.train
    cpu = device == "cpu"
    if train.use_vllm:
        check_sampler_model(job.base_model, cpu)
    model, peft_config = load_policy_model(job, device, dtype)
    dataset = prompt_dataset([row.key for row in job.rows])

    class StepRecorder(TrainerCallback):
        """Hands each step's logs (reward, the Section 4.1 metrics, loss, clip ratio) on."""

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            if on_step is not None and logs and "reward" in logs:
                on_step(int(state.global_step), dict(logs))

    colocated = train.use_vllm and train.vllm_mode == "colocate"
    overrides = engine_overrides(train, dtype, cpu)
    with warnings.catch_warnings(), engine_settings(overrides, cpu) if colocated else nullcontext():
        # rollout_func is what this module is built on; TRL warns that it is experimental.
        warnings.filterwarnings("ignore", message=".*'rollout_func'.*experimental")
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[learner_reward],
            args=grpo_config(job, device, dtype),
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=peft_config,
            rollout_func=make_rollout_func(job, tokenizer),
            callbacks=[StepRecorder()],
        )
    # The step hook reports progress; the default printer would dump every log dict to stdout.
    trainer.remove_callback(PrinterCallback)
    if colocated and cpu:
        sync_by_reload(trainer.vllm_generation)
    return trainer


def last_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete trainer checkpoint (one whose trainer_state.json was written)."""
    if not output_dir.is_dir():
        return None
    done = [
        (int(p.name.split("-")[1]), p)
        for p in output_dir.glob("checkpoint-*")
        if p.name.split("-")[1].isdigit() and (p / "trainer_state.json").is_file()
    ]
    return max(done)[1] if done else None


def checkpoint_step(checkpoint: Path | None) -> int:
    """The global step a checkpoint was saved at (0 for none)."""
    if checkpoint is None:
        return 0
    return int(json.loads((checkpoint / "trainer_state.json").read_text())["global_step"])


def train_learner(job: TrainJob, on_step: StepHook | None = None) -> Path:
    """Train (or resume) the job to ``job.steps`` steps and save the adapter; returns its folder.

    An adapter already saved for this job is returned as is: the job is finished.
    """
    if (job.adapter_dir / "adapter_config.json").is_file():
        return job.adapter_dir
    check_reporters(job.train.report_to)
    resume = last_checkpoint(job.output_dir)
    with logging_to(job), global_rng_kept():
        trainer = build_trainer(job, on_step)
        try:
            trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
            save_atomically(job.adapter_dir, lambda tmp: _save_adapter(trainer, tmp))
        finally:
            release_engine(trainer)
    return job.adapter_dir


@contextlib.contextmanager
def global_rng_kept() -> Iterator[None]:
    """The process's global random generators (``random``, numpy's, torch's) as they were,
    whatever runs inside: TRL's trainer seeds them all from ``GRPOConfig.seed`` (which makes
    a training run reproducible), and the rest of the process must not depend on that."""
    import torch

    python_state, numpy_state = random.getstate(), np.random.get_state()
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda):
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


def _save_adapter(trainer: Any, folder: Path) -> None:
    trainer.model.save_pretrained(str(folder))
    trainer.processing_class.save_pretrained(str(folder))


def save_atomically(target: Path, write: Callable[[Path], None]) -> Path:
    """Write a folder under a temporary name, then rename it: a kill never leaves half a folder
    under ``target``."""
    tmp = target.with_name(target.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    write(tmp)
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return target


def adapter_weights(adapter: Path) -> dict[str, Any]:
    """The tensors of a saved adapter by name (for tests and diagnostics)."""
    from safetensors.torch import load_file

    return load_file(str(adapter / "adapter_model.safetensors"))


def lora_parameters(model: Any) -> dict[str, Any]:
    """Copies of a model's trainable LoRA tensors by name."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
