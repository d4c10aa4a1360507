"""A real OpenAI-compatible server for the tests marked ``real_llm``: llama.cpp (through
llama-cpp-python's server) with SmolLM2-135M-Instruct, started once per test run by
``scripts/local-llm.sh`` on a free port with a pid file of its own, and stopped after.

The script installs the server into a venv of its own when it is missing (pip's wheel cache
keeps the llama.cpp build). A server that cannot start fails the tests that need it; it never
skips them. Every test marked ``real_llm`` runs in one process (tests/conftest.py's groups),
so a run starts one server.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "local-llm.sh"
INSTALL_TIMEOUT_S = 3600  # the first build of llama.cpp, on a slow machine
# The tests' window: small, so a span past it is a few thousand tokens, and the 400 that
# teaches it is met before the model reads anything (it reads ~15 tokens a second on a
# loaded 2-core machine).
N_CTX = 2048


@dataclass
class LocalLLM:
    base_url: str
    model: str
    window: int
    started_in: float  # seconds `local-llm.sh up` took (install included)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(tmp_path_factory, n_ctx: int) -> Iterator[LocalLLM]:
    """A server of window ``n_ctx`` on a free port, stopped on leaving."""
    env = dict(
        os.environ,
        CTXTOOL_LLM_DIR=str(tmp_path_factory.mktemp("local-llm")),
        CTXTOOL_LLM_PORT=str(_free_port()),
        CTXTOOL_LLM_CTX=str(n_ctx),
    )
    started = time.monotonic()
    server_dir = Path(env["CTXTOOL_LLM_DIR"])
    up = subprocess.run(
        [str(SCRIPT), "up"], env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
    )
    if up.returncode != 0:
        pytest.fail(f"scripts/local-llm.sh up failed ({up.returncode}): {up.stderr[-2000:]}")
    exported = dict(
        line.removeprefix("export ").split("=", 1)
        for line in up.stdout.splitlines()
        if line.startswith("export ")
    )
    SERVERS.append(server_dir)
    try:
        yield LocalLLM(
            exported["OPENAI_BASE_URL"],
            exported["CTXTOOL_SUMMARY_MODEL"],
            n_ctx,
            time.monotonic() - started,
        )
    finally:
        SERVERS.remove(server_dir)
        subprocess.run([str(SCRIPT), "down"], env=env, capture_output=True, timeout=60)


# The directories (pid file, log) of the servers running now: what a failed test's report
# says of them (tests/conftest.py), so a request that could not reach the model tells
# whether the server had died and what its log said last.
SERVERS: list[Path] = []

# llama.cpp's lines that say nothing of a failure: timings, tensors, the model's metadata.
_NOISE = ("llama_perf", "llama_graph", "llama_model_loader", "print_info", "load_tensors", "llama_")


def _running(pid: int) -> bool:
    """Whether the process runs: not gone, and no zombie (a server whose shell exited is
    the init process's child, which may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def servers_state() -> str:
    """Each running server's process (alive, or gone) and the last lines of its log."""
    said = []
    for server_dir in SERVERS:
        pid_file, log = server_dir / "server.pid", server_dir / "server.log"
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            said.append(f"{server_dir}: no pid file")
            continue
        state = "alive" if _running(pid) else "GONE (the server process died)"
        try:
            lines = log.read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        tail = [line for line in lines if not line.startswith(_NOISE)][-25:]
        said.append(f"server pid {pid} ({server_dir}): {state}; its log ends:")
        said.extend("    " + line[:300] for line in tail)
    return "\n".join(said)


@pytest.fixture(scope="session")
def real_llm(tmp_path_factory) -> Iterator[LocalLLM]:
    """The running server (n_ctx 2,048): its base URL and model name."""
    with serving(tmp_path_factory, N_CTX) as llm:
        yield llm
