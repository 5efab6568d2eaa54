"""``python -m arena_cli``: the ``arena`` command without the installed script."""

from __future__ import annotations

from arena_cli.app import main

main()
