"""The layering holds: arena <- agents <- tournaments <- leagues <- arena_cli.

Every source module's imports are read with ``ast``, at module level and inside functions: a
module may import its own package and the packages below it, never one above. Imports hidden in
functions are kept for the heavy optional libraries alone (the environment, scripted agents and
tournaments must work without them), never for project modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("arena", "agents", "tournaments", "leagues", "arena_cli")
HEAVY = {
    "torch", "transformers", "trl", "peft", "vllm", "ray", "matplotlib", "openai",
    "datasets", "safetensors", "tokenizers", "accelerate",
}  # fmt: skip
"""Optional extras (pyproject.toml), imported only where they are needed."""


def modules() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


def imports(tree: ast.AST) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) of every import statement."""
    found = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, inner) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append((child.module, child.lineno, inner))
            visit(child, inner)

    visit(tree, False)
    return found


def layer_of(module: str) -> int | None:
    top = module.split(".")[0]
    return LAYERS.index(top) if top in LAYERS else None


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_a_higher_layer_or_hides_a_light_import(path: Path) -> None:
    own = layer_of(path.relative_to(ROOT).parts[0])
    assert own is not None
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for module, line, nested in imports(tree):
        layer = layer_of(module)
        where = f"{path.relative_to(ROOT)}:{line} imports {module}"
        assert layer is None or layer <= own, f"{where}, a higher layer"
        if nested:
            assert layer is None, f"{where} inside a function; import it at the top"
            assert module.split(".")[0] in HEAVY | {"gc"}, (
                f"{where} inside a function; only heavy optional libraries are imported lazily"
            )


def test_the_scan_sees_every_layer_and_catches_a_hidden_upward_import() -> None:
    assert {p.relative_to(ROOT).parts[0] for p in modules()} == set(LAYERS)
    code = "import os\ndef f():\n    from leagues.league import run_league\n"
    assert imports(ast.parse(code)) == [("os", 1, False), ("leagues.league", 3, True)]
