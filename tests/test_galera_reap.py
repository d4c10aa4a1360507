"""A test run killed before it stopped its Galera cluster leaves three mariadbd running; the
next run stops them (tests/galera_cluster.reap_orphans) without touching a live run's cluster
or one a person started. The nodes here are stand-in processes: what is checked is which
clusters are stopped, through the real scripts/cluster.sh."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .galera_cluster import CLUSTER_PREFIX, OWNER_FILE, _owner_line, reap_orphans


def _cluster(tmp: Path, name: str, owner: str | None) -> tuple[Path, list[subprocess.Popen]]:
    """A cluster directory as cluster.sh leaves it (node<N>/node.pid), its nodes stand-ins."""
    directory = tmp / (CLUSTER_PREFIX + name)
    nodes = []
    for n in (1, 2, 3):
        node = subprocess.Popen(["sleep", "300"])
        (directory / f"node{n}").mkdir(parents=True)
        (directory / f"node{n}" / "node.pid").write_text(str(node.pid))
        nodes.append(node)
    if owner is not None:
        (directory / OWNER_FILE).write_text(owner)
    return directory, nodes


def _gone_owner() -> str:
    """The owner line of a process that has ended."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return f"{ended.pid} 1"


def test_only_the_clusters_of_ended_runs_are_stopped(tmp_path):
    orphan, orphan_nodes = _cluster(tmp_path, "orphan", _gone_owner())
    live, live_nodes = _cluster(tmp_path, "live", _owner_line())
    # The pid of a live process with another start time: the owner's pid was reused.
    reused, reused_nodes = _cluster(tmp_path, "reused", f"{os.getpid()} 1")
    personal, personal_nodes = _cluster(tmp_path, "personal", None)
    (tmp_path / (CLUSTER_PREFIX + "3311.lock")).write_text("")  # a port claim, a file
    try:
        assert sorted(reap_orphans(tmp_path)) == sorted([orphan, reused])
        for node in orphan_nodes + reused_nodes:
            assert node.wait(timeout=30) is not None
        assert not orphan.exists() and not reused.exists()
        for node in live_nodes + personal_nodes:
            assert node.poll() is None
        assert live.exists() and personal.exists()
        assert reap_orphans(tmp_path) == []
    finally:
        for node in orphan_nodes + live_nodes + reused_nodes + personal_nodes:
            node.kill()
            node.wait()
