"""agents.lifetime: a child that asked to die with its parent does, even after a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.processes import running

REPO_ROOT = Path(__file__).resolve().parents[2]

# A parent that starts two children (a process pool worker and a Popen child), prints their
# PIDs and then sleeps: the test SIGKILLs it and watches the children.
PARENT = """
import os, subprocess, sys, time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from agents.lifetime import die_with_parent

pool = ProcessPoolExecutor(1, initializer=die_with_parent, initargs=(os.getpid(),))
worker = pool.submit(os.getpid).result()
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)"],
    start_new_session=True,
    preexec_fn=partial(die_with_parent, os.getpid()),
)
print(worker, child.pid, flush=True)
time.sleep(600)
"""


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(running(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if running(p)]


def test_children_die_when_their_parent_is_sigkilled() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(running(p) for p in pids)
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        parent.stdout.close()
    left = wait_gone(pids, 10)
    for pid in left:  # never leave them behind, whatever the assertion says
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"children outlived their SIGKILLed parent: {left}"
