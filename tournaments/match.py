"""Kept for callers of the former match runner: episodes are played by :mod:`agents.driver`
(one episode) and :mod:`agents.engine` (many); use those. ``play_episode`` is re-exported for the
environment tests and benchmark that still import it from here."""

from __future__ import annotations

from agents.driver import play_episode

__all__ = ["play_episode"]
