"""The ``arena`` command line, the top layer: arena <- agents <- tournaments <- leagues <- CLI.

It parses arguments and calls the library functions the tests also call; ``arena_cli.app`` names
the commands, which live in one module per group. ``python -m arena_cli`` runs them like the
installed ``arena`` script.
"""

from __future__ import annotations

from arena_cli.app import app, main

__all__ = ["app", "main"]
