"""A real multi-node Ray cluster on this machine, for the tests of the ray executor.

``two_node_cluster()`` starts a head node with no CPUs (only the driver lives there, so every
actor and task runs on a worker node) and two worker nodes of one CPU each, all on this machine,
connects this process to it and stops everything on the way out. Node deaths are detected
within about a second (the health checks are shortened), so a test can kill a node mid-round.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

HEALTH = {"health_check_period_ms": 200, "health_check_failure_threshold": 3}


@contextmanager
def two_node_cluster() -> Iterator[Any]:
    """The ``ray.cluster_utils.Cluster`` (head + two one-CPU worker nodes), connected."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": False,
            "_system_config": HEALTH,
        },
    )
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def actor_nodes(class_name: str) -> list[str]:
    """Node ids of the live actors of ``class_name`` (from the GCS: no dashboard needed)."""
    from ray._private import state

    return [
        a["Address"]["NodeID"]
        for a in state.actors().values()
        if a["ActorClassName"].endswith(class_name) and a["State"] == "ALIVE"
    ]


def kill_node(cluster: Any, node_ids: list[str]) -> None:
    """Kill one worker node of ``cluster`` among ``node_ids`` at once (its raylet and worker
    processes), like a machine that loses power. Never the node this driver is connected to:
    on one machine Ray may attach the driver to a worker node's raylet rather than the head's,
    and removing that node would break the driver, not test a lost worker."""
    import ray

    driver = ray.get_runtime_context().get_node_id()
    node = next(
        (n for n in cluster.worker_nodes if n.node_id in node_ids and n.node_id != driver), None
    )
    assert node is not None, f"no worker node among {node_ids} that the driver is not on"
    cluster.remove_node(node, allow_graceful=False)
