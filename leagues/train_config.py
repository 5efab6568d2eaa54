"""A learner's training settings: TRL's ``GRPOConfig`` by TRL's own names, and the league's own.

    [league.learner.train]              # TrainConfig
    num_generations = 4                 # any trl.GRPOConfig field, by TRL's name: passed through
    per_device_train_batch_size = 4     # 4 x 4 = 16 episodes (4 scenarios) per optimizer step
    gradient_accumulation_steps = 4
    max_completion_length = 64
    learning_rate = 5e-4
    device = "cpu"                      # the league's own settings: the fields of TrainConfig

    [league.learner.train.lora]         # LoraSettings: peft.LoraConfig's names
    r = 16

A key of ``[league.learner.train]`` that is no field of :class:`TrainConfig` is a field of
``trl.GRPOConfig``, handed to it as written (:data:`GRPO_DEFAULTS` holds the project's recipe
where it differs from TRL's defaults, or pins them). At config load TRL builds the GRPOConfig the
league will train with (:func:`league_grpo_config`), so a key it does not know, or a value its own
checks refuse, is an error naming the key. The fields the league sets itself
(:data:`LEAGUE_SETS`: output folder, steps, seed, logging, checkpoints, data order, precision)
are refused with the reason. :func:`migrate_settings` maps the settings of a league stored with
the names used before (``group_size``, ``batch_size``, ...; :data:`RENAMED`) onto these.
"""

from __future__ import annotations

import difflib
import math
import typing
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from agents.backends.base import DTYPES
from arena.settings import SettingsError, convert, from_mapping
from arena.settings import about as _help

LOSS_TYPES = ("cispo", "grpo", "dapo", "dr_grpo", "bnpo", "luspo", "sapo", "vespo")
"""TRL 1.16's losses (TRL itself refuses another only at the first training step)."""
DEVICES = ("auto", "cpu", "cuda")
REPORTERS = ("tensorboard", "wandb", "trackio")
"""Experiment trackers TRL's trainer can log to without a network (``TrainConfig.report_to``)."""
WHERE = "league.learner.train"

GRPO_DEFAULTS: dict[str, Any] = {
    "loss_type": "cispo",  # paper (TRL: dapo)
    "learning_rate": 3e-5,  # Table 5 (TRL: 1e-6)
    "beta": 0.0,  # Table 5: no KL
    "num_generations": 8,  # Table 5: group size 8
    "per_device_train_batch_size": 8,  # 8 x 8 = 64 episodes per step (Table 5's batch size)
    "gradient_accumulation_steps": 8,  # (TRL: 1)
    "epsilon": 0.2,
    "epsilon_high": 6.0,  # the paper's CISPO cap (TRL: unset, which caps CISPO at epsilon)
    "scale_rewards": "group",
    "temperature": 1.0,  # Table 6: seller temperature in training
    "top_p": 1.0,
    "max_completion_length": 256,  # one learner turn, also in evaluation (TRL: 512)
    "max_grad_norm": 1.0,
    "weight_decay": 0.0,
    "lr_scheduler_type": "constant",  # within a generation (TRL: linear)
    "save_steps": 1,  # a checkpoint every step: what a resume restarts from (TRL: 500)
    "gradient_checkpointing": False,
    "use_vllm": False,
    "vllm_mode": "colocate",
    "vllm_gpu_memory_utilization": 0.3,
    "vllm_importance_sampling_mode": "token_truncate",  # with use_vllm (TRL: sequence_mask)
    "vllm_importance_sampling_clip_min": 0.8,  # the paper's CISPO pair [0.8, 6.0] (TRL: none)
    "vllm_importance_sampling_clip_max": 6.0,  # (TRL: 3.0)
}
"""The project's GRPOConfig values (paper Table 5 and the CISPO clip pair, docs/training.md):
where TRL's default differs it is named; the rest pin TRL's default, so the stored settings of a
league record them. A ``[league.learner.train]`` key of the same name replaces the value."""

_STEPS = "one rollout batch per optimizer step: the league hands TRL each step's scenarios"
LEAGUE_SETS: dict[str, str] = {
    "output_dir": "trainer checkpoints go to the league folder (league.folder)",
    "max_steps": "league.learner.steps_per_generation sets the steps of a generation",
    "num_train_epochs": "league.learner.steps_per_generation sets the steps of a generation",
    "seed": "league.seed seeds every generation's training",
    "data_seed": "league.seed seeds every generation's training",
    "shuffle_dataset": "the rows are in step order, so a resumed step replays its scenarios",
    "steps_per_generation": _STEPS,
    "generation_batch_size": _STEPS,
    "num_iterations": _STEPS,
    "logging_steps": "the league records every step's metrics (training_steps)",
    "logging_strategy": "the league records every step's metrics (training_steps)",
    "logging_dir": "the loggers write under <league folder>/logs (report_to)",
    "run_name": "the league names each run after its generation",
    "project": "the league names each run after its generation",
    "save_strategy": "a checkpoint every save_steps steps is what a resume restarts from",
    "save_total_limit": "the league keeps the last two checkpoints (a resume needs one)",
    "disable_tqdm": "the league reports progress itself",
    "use_cpu": "set device (cpu, cuda or auto) instead",
    "bf16": "set dtype (auto, float32, bfloat16, float16) instead",
    "fp16": "set dtype (auto, float32, bfloat16, float16) instead",
    "push_to_hub": "nothing leaves the machine",
}
"""GRPOConfig fields the league sets itself, with the reason a table may not."""


@dataclass(frozen=True)
class LoraSettings:
    """The LoRA adapter, by ``peft.LoraConfig``'s names (``[league.learner.train.lora]``)."""

    r: int = field(default=16, metadata=_help("LoRA rank."))
    lora_alpha: int = field(default=32, metadata=_help("LoRA scaling alpha."))
    lora_dropout: float = field(default=0.0, metadata=_help("LoRA dropout."))
    target_modules: tuple[str, ...] = field(
        default=("all-linear",),
        metadata=_help('Modules to adapt, e.g. ["q_proj", "v_proj"]; "all-linear": every linear.'),
    )

    def __post_init__(self) -> None:
        for name in ("r", "lora_alpha"):
            _integer(f"{WHERE}.lora", name, getattr(self, name), 1)
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"{WHERE}.lora.lora_dropout must lie in [0, 1)")
        if not self.target_modules:
            raise ValueError(f'{WHERE}.lora.target_modules must name modules, or "all-linear"')

    def peft_kwargs(self) -> dict[str, Any]:
        """``peft.LoraConfig`` arguments (PEFT reads ``"all-linear"`` as a word, not a list)."""
        targets = list(self.target_modules)
        return {
            "r": self.r,
            "lora_alpha": self.lora_alpha,
            "lora_dropout": self.lora_dropout,
            "target_modules": "all-linear" if targets == ["all-linear"] else targets,
        }


@dataclass(frozen=True)
class TrainConfig:
    """A learner's training: ``trl.GRPOConfig`` fields by TRL's names (``grpo``), and the
    league's own settings of sampling, memory and logging.

    The paper trains with CISPO and clip thresholds (0.8, 6.0) on Tinker, whose CISPO clamps the
    importance ratio pi_theta / pi_sampler to [0.8, 6.0]. TRL's CISPO caps the ratio from above
    at ``epsilon_high`` (an absolute ratio), so its default here is the paper's 6.0 (TRL would cap
    at ``epsilon`` = 0.2 and scale every gradient by 0.2). Without vLLM the samples come from the
    model being trained, one optimizer step per batch, so the ratio is exactly 1; with vLLM TRL's
    importance-sampling correction clamps p_trainer / p_sampler to
    [``vllm_importance_sampling_clip_min``, ``vllm_importance_sampling_clip_max``] = [0.8, 6.0].
    """

    PASS_THROUGH: ClassVar[str] = "grpo"

    device: str = field(default="auto", metadata=_help("cpu, cuda, or auto (cuda if present)."))
    dtype: str = field(
        default="auto", metadata=_help("auto (float32 on cpu, bfloat16 on cuda) or a dtype name.")
    )
    vllm_dtype: str = field(
        default="auto",
        metadata=_help(
            "colocate: the sampler's dtype; auto: the trainer's (float32 on CPU). A lower one "
            "than the trainer's (bfloat16) makes a larger sampler/trainer mismatch."
        ),
    )
    max_episode_tokens: int = field(
        default=0,
        metadata=_help(
            "Longest token stream of one episode; 0: the model's context. A longer episode ends "
            "as an error and carries no gradient."
        ),
    )
    rollout_kv_cache_mib: int = field(
        default=1024,
        metadata=_help(
            "hf sampler: MiB of learner streams' KV kept between turns within a rollout, so a "
            "turn prefills only its new tokens (exact); 0: every turn prefills its whole stream."
        ),
    )
    decode_batch_size: int = field(
        default=0,
        metadata=_help(
            "hf sampler: learner turns decoded together in one batch; 0: every turn of the "
            "rollout round at once (fewest decoding steps)."
        ),
    )
    dynamic_sampling: int = field(
        default=0,
        metadata=_help(
            "DAPO's dynamic sampling: up to this many times a step, each GRPO group whose "
            "rewards are all equal (it trains nothing) is replayed on a fresh training scenario; "
            "logged as resampled_groups, with the groups still flat as zero_advantage_groups. "
            "0: off (every step trains on its own scenarios only)."
        ),
    )
    report_to: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "TRL's report_to, local loggers only: tensorboard, wandb (offline), trackio (local); "
            "files under <league folder>/logs/, nothing sent over the network."
        ),
    )
    lora: LoraSettings = field(
        default_factory=LoraSettings, metadata=_help("[league.learner.train.lora]")
    )
    grpo: Mapping[str, Any] = field(
        default_factory=lambda: dict(GRPO_DEFAULTS),
        metadata=_help("trl.GRPOConfig fields by TRL's names: GRPO_DEFAULTS, then the table's."),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "grpo", {**GRPO_DEFAULTS, **self.grpo})
        if self.device not in DEVICES:
            raise ValueError(f"{WHERE}.device must be one of {', '.join(DEVICES)}")
        for name in ("dtype", "vllm_dtype"):
            if getattr(self, name) not in DTYPES:
                raise ValueError(f"{WHERE}.{name} must be one of {', '.join(DTYPES)}")
        for name in (
            "max_episode_tokens",
            "rollout_kv_cache_mib",
            "decode_batch_size",
            "dynamic_sampling",
        ):
            _integer(WHERE, name, getattr(self, name), 0)
        for name in self.report_to:
            if name not in REPORTERS:
                raise ValueError(
                    f"{WHERE}.report_to: unknown logger {name!r}; use any of "
                    f'{", ".join(REPORTERS)}, e.g. report_to = ["tensorboard"]'
                )
        if len(set(self.report_to)) != len(self.report_to):
            raise ValueError(f"{WHERE}.report_to names a logger twice: {list(self.report_to)}")
        check_grpo(self)
        if self.grpo["loss_type"] not in LOSS_TYPES:
            raise ValueError(f"{WHERE}.loss_type must be one of {', '.join(LOSS_TYPES)}")
        if self.use_vllm and self.vllm_mode == "server" and self.device == "cpu":
            raise ValueError(
                f"{WHERE}: vllm_mode = 'server' syncs weights over NCCL, which needs a GPU; on CPU "
                "use vllm_mode = 'colocate'"
            )

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> TrainConfig:
        """From a ``[league.learner.train]`` table: GRPOConfig fields and the league's own side
        by side, as in the TOML file."""
        return from_mapping(TrainConfig, data, WHERE)

    @property
    def episodes_per_step(self) -> int:
        """Episodes (GRPO completions) per optimizer step: TRL's effective batch on one device,
        ``per_device_train_batch_size * gradient_accumulation_steps``."""
        return self.grpo["per_device_train_batch_size"] * self.grpo["gradient_accumulation_steps"]

    @property
    def scenarios_per_step(self) -> int:
        """GRPO groups (scenarios, each played ``num_generations`` times) per optimizer step."""
        return self.episodes_per_step // self.num_generations

    @property
    def num_generations(self) -> int:
        return int(self.grpo["num_generations"])

    @property
    def max_completion_length(self) -> int:
        """The token limit of one learner turn, in training and evaluation."""
        return int(self.grpo["max_completion_length"])

    @property
    def temperature(self) -> float:
        return float(self.grpo["temperature"])

    @property
    def top_p(self) -> float:
        return float(self.grpo["top_p"])

    @property
    def use_vllm(self) -> bool:
        return bool(self.grpo["use_vllm"])

    @property
    def vllm_mode(self) -> str:
        return str(self.grpo["vllm_mode"])


def league_grpo_config(train: TrainConfig, **league: Any) -> Any:
    """``trl.GRPOConfig`` from the table's fields (``train.grpo``) and the ones the league sets
    (``league``, the keys of :data:`LEAGUE_SETS` and ``report_to``): the one place both meet."""
    from trl import GRPOConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TRL's notes on settings (the league checks its own)
        return GRPOConfig(**train.grpo, **league)


def check_grpo(train: TrainConfig) -> None:
    """The pass-through fields as TRL reads them: each a ``GRPOConfig`` field the league does not
    set, of its type, and together a GRPOConfig that TRL's own checks accept."""
    try:
        from trl import GRPOConfig
    except ImportError:
        raise ValueError(
            f"{WHERE}: TRL checks these GRPOConfig settings and trains them; pip install -e "
            "'.[train]'"
        ) from None
    kinds = typing.get_type_hints(GRPOConfig)
    own = [f.name for f in fields(TrainConfig) if f.name != TrainConfig.PASS_THROUGH]
    for key, value in train.grpo.items():
        if key in LEAGUE_SETS:
            reason = LEAGUE_SETS[key]
            raise ValueError(f"{WHERE}.{key}: the league sets this GRPOConfig field: {reason}")
        if key not in kinds:
            near = difflib.get_close_matches(key, [*kinds, *own], n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            if key in RENAMED:
                hint = f"; before TRL's names it was ours, now {RENAMED[key]} (docs/training.md)"
            raise SettingsError(
                f"{WHERE}: unknown key {key!r}: neither a trl.GRPOConfig field nor a league "
                f"setting ({', '.join(own)}){hint}"
            )
        _check_type(key, value, kinds[key])
    try:
        league_grpo_config(train, **_PROBE)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise SettingsError(f"{WHERE}: trl.GRPOConfig refuses these settings: {exc}") from None


_PROBE = {"output_dir": "league-check", "max_steps": 1, "use_cpu": True, "report_to": "none",
          "shuffle_dataset": False, "disable_tqdm": True}  # fmt: skip
"""The league's own GRPOConfig values while the table is checked (the run sets the real ones)."""


def _check_type(key: str, value: Any, kind: Any) -> None:
    """A value for a GRPOConfig field of a plain type (bool, int, float, str) is of that type;
    fields of other types are left to TRL."""
    if kind is bool or kind is str:
        convert(value, kind, f"{WHERE}.{key}")
    elif kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise SettingsError(f"{WHERE}.{key}: expected an integer, got {value!r}")
    elif kind is float and (
        isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
    ):
        raise SettingsError(f"{WHERE}.{key}: expected a number, got {value!r}")


def _integer(where: str, name: str, value: Any, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(f"{where}.{name} must be an integer >= {least}, got {value!r}")


RENAMED: dict[str, str] = {
    "group_size": "num_generations",
    "micro_batch_size": "per_device_train_batch_size",
    "batch_size": "gradient_accumulation_steps = batch_size / micro_batch_size",
    "max_new_tokens": "max_completion_length",
    "lr_scheduler": "lr_scheduler_type",
    "sampler_ratio_min": "vllm_importance_sampling_clip_min",
    "lora_r": "lora.r",
    "lora_alpha": "lora.lora_alpha",
    "lora_dropout": "lora.lora_dropout",
    "lora_target_modules": "lora.target_modules",
}
"""``[league.learner.train]`` keys before TRL's names, and what they became."""


def migrate_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Stored league settings (JSON) with ``learner.train`` in the old names mapped onto the new
    ones, so that a league stored before compares with its TOML in the new names; settings in the
    new names come back as they are. The mapping gives TRL what the old names gave it: the vLLM
    importance-sampling bounds were [sampler_ratio_min, epsilon_high] for cispo and TRL's
    defaults otherwise, and an empty server URL or a zero model length meant TRL's None."""
    learner = settings.get("learner", {})
    old = dict(learner.get("train", {}))
    if not set(old) & {"group_size", "batch_size", "micro_batch_size", "max_new_tokens"}:
        return dict(settings)
    micro, batch = old.pop("micro_batch_size", 8), old.pop("batch_size", 64)
    lora = {RENAMED[k].partition(".")[2]: old.pop(k) for k in list(old) if k.startswith("lora_")}
    if isinstance(lora.get("target_modules"), str):
        lora["target_modules"] = [t.strip() for t in lora["target_modules"].split(",")]
    clip_min = old.pop("sampler_ratio_min", 0.8)
    if old.get("vllm_server_base_url") == "":
        del old["vllm_server_base_url"]
    if old.get("vllm_max_model_length") == 0:
        del old["vllm_max_model_length"]
    train = {RENAMED.get(k, k): v for k, v in old.items()}
    train.update(per_device_train_batch_size=micro, gradient_accumulation_steps=batch // micro)
    if train.get("use_vllm"):
        cispo = train.get("loss_type", "cispo") == "cispo"
        train.update(
            vllm_importance_sampling_mode="token_truncate" if cispo else "sequence_mask",
            vllm_importance_sampling_clip_min=clip_min if cispo else None,
            vllm_importance_sampling_clip_max=train.get("epsilon_high", 6.0) if cispo else 3.0,
        )
    if lora:
        train["lora"] = lora
    return {**settings, "learner": {**learner, "train": train}}
