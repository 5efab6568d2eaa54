"""The ``arena`` command line, the top layer: arena <- agents <- tournaments <- leagues <- CLI.

It parses arguments and calls the library functions the tests also call; ``arena_cli.app`` holds
the main commands, ``python -m arena_cli`` runs them like the installed ``arena`` script. The
modules imported below add their commands to the same app when the package is loaded.
"""

from __future__ import annotations

from arena_cli import episodes, replay
from arena_cli.app import app, main

__all__ = ["app", "episodes", "main", "replay"]
