#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs ctxtool with its test dependencies into
# .venv, Debian's chromium and mariadb-client when they are missing, the llama.cpp server of the
# real-model tests (scripts/local-llm.sh), checks the code (ruff's lint and format, the
# generated command reference, the figures of docs/quality.md, mypy), makes sure MariaDB
# answers on 127.0.0.1:3306 (starting it if needed), and runs pytest against both MariaDB and a
# SQLite file. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
# The package's bytecode, written once: an editable install leaves none, and where the
# environment sets PYTHONDONTWRITEBYTECODE (this machine's does) every `ctxtool` the tests start
# compiled the whole package again, 0.85 s of CPU a start against 0.48 s (compileall writes
# whatever that variable says; the processes then read it).
.venv/bin/python -m compileall -q ctxtool >/dev/null

# The HTML export is checked in a real headless browser (tests/test_export_html.py).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    echo "installing chromium ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq chromium >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
fi

# Rendered INSERTs, and an import's binlog, are replayed through the mariadb client as in a
# point-in-time recovery (tests/test_import_literals.py, tests/test_import_binlog.py, which
# starts a private server with log_bin on: mariadb-install-db and mariadbd).
if ! command -v mariadb >/dev/null 2>&1 || ! command -v mariadb-binlog >/dev/null 2>&1 \
        || ! command -v mariadb-install-db >/dev/null 2>&1; then
    echo "installing mariadb-client and mariadb-server-core ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq mariadb-client mariadb-server-core >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq mariadb-client mariadb-server-core >/dev/null; }
fi

# The tests marked galera start a 3-node Galera cluster of their own (scripts/cluster.sh):
# the galera-4 provider, and rsync for a joining node's state transfer.
if [ ! -r /usr/lib/galera/libgalera_smm.so ] || ! command -v rsync >/dev/null 2>&1; then
    echo "installing galera-4 and rsync ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq galera-4 rsync >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq galera-4 rsync >/dev/null; }
fi

# The tests marked real_llm run the LLM summarizer against a real server: llama.cpp (through
# llama-cpp-python) with SmolLM2-135M-Instruct, in a venv of its own (scripts/local-llm.sh).
# The first install compiles llama.cpp for any AVX2 x86-64 (about ten minutes) into a wheel
# kept under ~/.cache/ctxtool/llm-wheels.
scripts/local-llm.sh install

# The habits that keep the code as it is written: checked before the tests, each failing the
# run on its own (they take seconds; the tests take minutes).
echo "ruff check ..."
.venv/bin/ruff check ctxtool tests scripts
echo "ruff format --check ..."
.venv/bin/ruff format --check ctxtool tests scripts
echo "scripts/docs.py --check ..."
.venv/bin/python scripts/docs.py --check
# docs/quality.md's figures are measured on the shared transcripts (../shared beside the
# checkout, or $CTXTOOL_SHARED_DIR, as for the tests): they must follow the code.
SHARED_DIR=${CTXTOOL_SHARED_DIR:-../shared}
if [ ! -d "$SHARED_DIR/transcripts" ]; then
    echo "error: no shared transcripts at $SHARED_DIR/transcripts (set CTXTOOL_SHARED_DIR)" >&2
    exit 1
fi
echo "scripts/quality_table.py --check ..."
.venv/bin/python scripts/quality_table.py "$SHARED_DIR/transcripts" --check
echo "mypy ..."
.venv/bin/mypy

export CTXTOOL_TEST_MYSQL_URL=${CTXTOOL_TEST_MYSQL_URL:-mysql+pymysql://root@127.0.0.1:3306/}

mysql_up() {
    .venv/bin/python - <<'PY'
import os, sys
import sqlalchemy as sa
try:
    with sa.create_engine(os.environ["CTXTOOL_TEST_MYSQL_URL"]).connect() as c:
        c.exec_driver_sql("SELECT 1")
except Exception as exc:
    print(f"MariaDB not answering yet: {exc.__class__.__name__}", file=sys.stderr)
    sys.exit(1)
PY
}

if ! mysql_up 2>/dev/null; then
    echo "starting MariaDB ..."
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
    for _ in $(seq 1 60); do
        mysql_up 2>/dev/null && break
        sleep 1
    done
    mysql_up
fi

# In 4 processes (pytest-xdist): most tests wait on subprocesses, servers and sleeps, so 4
# beat 2 even on 2 cores. --dist loadgroup with tests/conftest.py's groups keeps all the Galera
# tests (one cluster) and each module of a module-scoped fixture in one process. A later -n
# given to this script wins (-n 0: one process).
exec .venv/bin/python -m pytest -n "${CTXTOOL_TEST_PROCESSES:-4}" --dist loadgroup "$@"
