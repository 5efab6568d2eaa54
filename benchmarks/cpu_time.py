"""CPU time for the benchmark scripts (imported by them: ``python benchmarks/<script>.py`` puts
this folder on the import path)."""

from __future__ import annotations

import resource


def cpu_seconds() -> float:
    """User + system CPU of this process and of its reaped children (a process pool's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
