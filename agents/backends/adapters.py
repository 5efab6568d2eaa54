"""PEFT LoRA adapters served over a shared base model: naming, checks, and the agent's view.

A league's population is many adapters over one base model. An agent spec names its adapter with
``lora=<folder>`` (``vllm:<base>?lora=ckpt/gen3``, ``hf:<base>?lora=ckpt/gen3``); the adapter is
not a back-end setting but travels with every request (``ChatRequest.adapter``), so all adapters of
one base share one back-end, one model load and one batch. ``agents.backends.get_backend`` hands
each such agent an ``AdapterView``: the shared back-end (same ``key``, so the rollout engine batches
it with its siblings) plus the adapter its agent's requests carry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agents.backends.base import BackendStats, ChatRequest, Completion

ADAPTER_KEY = "lora"
"""The spec parameter naming an agent's PEFT adapter folder."""


def resolve_adapter(path: str | Path) -> str:
    """The adapter folder as an absolute path, checked to hold a PEFT LoRA adapter.

    Absolute, so that ``lora=ckpt/a`` and ``lora=/abs/ckpt/a`` name the same adapter.
    """
    folder = Path(path).expanduser().resolve()
    config_file = folder / "adapter_config.json"
    if not config_file.is_file():
        raise ValueError(
            f"lora={path}: no adapter_config.json in {folder}; give a folder written by PEFT's "
            "save_pretrained"
        )
    peft_type = json.loads(config_file.read_text()).get("peft_type", "LORA")
    if str(peft_type).upper() != "LORA":
        raise ValueError(f"lora={path}: peft_type is {peft_type!r}; only LoRA adapters are served")
    return str(folder)


def adapter_rank(path: str | Path) -> int:
    """The adapter's rank ``r`` from its PEFT adapter_config.json."""
    config_file = Path(path) / "adapter_config.json"
    if not config_file.is_file():
        raise ValueError(f"lora={path}: no adapter_config.json there; give a PEFT adapter folder")
    rank = json.loads(config_file.read_text()).get("r")
    if not isinstance(rank, int) or rank < 1:
        raise ValueError(f"lora={path}: adapter_config.json has no positive integer 'r'")
    return rank


def adapter_id(path: str | Path) -> tuple[str, int]:
    """(name, positive int32 id) of an adapter folder, stable across processes and runs.

    vLLM identifies adapters by the int id, so the same folder must always get the same id and
    different folders different ids (Python's hash() is salted per process; sha256 is not).
    """
    resolved = str(Path(path).expanduser().resolve())
    digest = hashlib.sha256(resolved.encode()).hexdigest()
    number = int(digest[:8], 16) % (2**31 - 1) + 1
    return f"{Path(resolved).name}-{digest[:8]}", number


def split_adapter(params: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """(params without ``lora``, the resolved adapter folder or None)."""
    rest = {k: v for k, v in params.items() if k != ADAPTER_KEY}
    raw = params.get(ADAPTER_KEY)
    if raw is None or raw == "":
        return rest, None
    return rest, resolve_adapter(raw)


class AdapterView:
    """One agent's handle on a shared back-end: the same engine, seen through one adapter.

    ``key``, ``stats`` and ``generate`` are the shared back-end's: requests carry their own
    adapter (``ChatRequest.adapter``, which the agent fills from ``adapter``), so a batch that mixes
    adapters is answered correctly whichever view sends it. ``close`` does nothing: the shared
    back-end belongs to the cache (``agents.backends.close_backends``).
    """

    def __init__(self, backend: Any, adapter: str) -> None:
        self.backend = backend
        self.adapter = adapter
        self.key: str = backend.key

    @property
    def stats(self) -> BackendStats:
        return self.backend.stats

    def __repr__(self) -> str:
        return f"AdapterView(key={self.key!r}, adapter={self.adapter!r})"

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        return self.backend.generate(requests)

    def close(self) -> None:
        return None
