"""Child processes that die with their parent.

A tournament's worker pool and ``arena serve``'s vLLM server are children of the ``arena``
process. When that process ends normally it stops them (``ProcessPoolExecutor.shutdown``, the
server's process-group stop), but a SIGKILL (the OOM killer, ``kill -9``, a scheduler's
time-out) runs no clean-up code: without this module its children would run on forever,
holding memory and, for a server, a GPU.

On Linux the kernel does it: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` asks for SIGKILL when the
parent dies. Elsewhere a daemon thread in the child watches its parent's PID. Either way a
parent that died before the child could ask is caught at once (the PID check at the start).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
"""``<linux/prctl.h>``: the signal a process gets when its parent thread dies."""
WATCH_INTERVAL_S = 0.5
"""How often the watcher thread (platforms without ``prctl``) checks its parent."""


def die_with_parent(parent_pid: int) -> None:
    """Arrange for this (child) process to end when ``parent_pid`` does.

    Call it first thing in the child: a ``ProcessPoolExecutor`` ``initializer`` (with
    ``initargs=(os.getpid(),)`` from the parent) or a ``Popen`` ``preexec_fn``."""
    if not _kernel_signal():
        threading.Thread(target=_watch, args=(parent_pid,), daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the request was in place
        os._exit(1)


def _kernel_signal() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(WATCH_INTERVAL_S)
    os._exit(1)
