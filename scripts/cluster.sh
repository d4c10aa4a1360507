#!/usr/bin/env bash
# A 3-node multi-primary MariaDB Galera cluster on loopback, for trying ctxtool (and its tests)
# against what a distributed store does: certification conflicts at COMMIT, ids in steps of
# three per node, a lock that holds on one node only.
#
#   scripts/cluster.sh up       start the nodes (the first one bootstraps), wait until all three
#                               are Synced, print their URLs
#   scripts/cluster.sh down     stop the nodes and remove their data directories
#   scripts/cluster.sh status   each node's URL, process and wsrep state
#   scripts/cluster.sh kill N   kill -9 node N (1-3), as a crash would
#   scripts/cluster.sh start N  start node N again; it rejoins (IST or rsync SST) and is waited for
#
# CTXTOOL_GALERA_DIR  where the nodes' data directories, logs and sockets go (/tmp/ctxtool-galera)
# CTXTOOL_GALERA_PORT the first node's client port (3311): the nodes listen on it and the two
#                     above it; group communication on +1000, IST on +1100, SST on +1200.
# Needs mariadbd, mariadb-install-db, galera-4 (/usr/lib/galera/libgalera_smm.so) and rsync.
set -euo pipefail

DIR=${CTXTOOL_GALERA_DIR:-/tmp/ctxtool-galera}
PORT=${CTXTOOL_GALERA_PORT:-3311}
PROVIDER=${CTXTOOL_GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}
NODES=(1 2 3)
WAIT_S=${CTXTOOL_GALERA_WAIT_S:-90}
# rsync's daemon, which receives a joiner's state transfer, drops root for "nobody" and then
# cannot write the data directory: as root, the nodes run as mysql (Debian's server account).
if [ "$(id -u)" = 0 ]; then RUN_AS=${CTXTOOL_GALERA_USER:-mysql}; else RUN_AS=$(id -un); fi

tool() {
    command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || {
        echo "cluster.sh: $1 is not installed (apt-get install mariadb-server galera-4 rsync)" >&2
        exit 1
    }
}

client_port() { echo $((PORT + $1 - 1)); }
gcomm_port() { echo $((PORT + 1000 + $1 - 1)); }
node_dir() { echo "$DIR/node$1"; }
url() { echo "mysql+pymysql://root@127.0.0.1:$(client_port "$1")/"; }

cluster_address() {
    local addresses=() n
    for n in "${NODES[@]}"; do addresses+=("127.0.0.1:$(gcomm_port "$n")"); done
    local IFS=,
    echo "gcomm://${addresses[*]}"
}

pid_of() {
    local file
    file="$(node_dir "$1")/node.pid"
    [ -s "$file" ] && alive "$(cat "$file")" && cat "$file"
}

# Running, not a zombie: a node killed here waits for whoever adopted it to reap it.
alive() {
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${state#Z}" = "$state" ]
}

# The node's wsrep_local_state_comment (Synced, Joining, Donor/Desynced ...), or nothing.
state_of() {
    "$(tool mariadb)" --no-defaults -uroot -h127.0.0.1 -P"$(client_port "$1")" \
        --connect-timeout=2 -N -B \
        -e "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2
}

start_node() {
    local n=$1 bootstrap=${2:-} dir port
    dir=$(node_dir "$n")
    port=$(client_port "$n")
    if [ -n "$(pid_of "$n" || true)" ]; then
        echo "node $n is already running" >&2
        return 0
    fi
    if port_taken "$port" || port_taken "$(gcomm_port "$n")"; then
        echo "cluster.sh: port $port or $(gcomm_port "$n") is taken by another process" \
            "(set CTXTOOL_GALERA_PORT to move the cluster)" >&2
        exit 1
    fi
    mkdir -p "$dir/data"
    chown -R "$RUN_AS" "$dir"
    if [ "$n" = 1 ] && [ ! -d "$dir/data/mysql" ]; then
        # Only the first node is initialised: the others receive its data by SST.
        "$(tool mariadb-install-db)" --no-defaults --datadir="$dir/data" --user="$RUN_AS" \
            --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 \
            || { cat "$dir/install.log" >&2; exit 1; }
    fi
    local extra=()
    if [ -n "$bootstrap" ]; then
        extra+=(--wsrep-new-cluster)
    fi
    # setsid: the node outlives this script's session; `down` stops it by its pid file.
    setsid "$(tool mariadbd)" --no-defaults \
        --datadir="$dir/data" --socket="$dir/mariadbd.sock" --pid-file="$dir/mariadbd.pid" \
        --log-error="$dir/error.log" --user="$RUN_AS" \
        --port="$port" --bind-address=127.0.0.1 \
        --innodb-buffer-pool-size=64M --innodb-log-file-size=16M --performance-schema=OFF \
        --max-connections=300 --skip-name-resolve \
        --sql-mode=ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION \
        --binlog-format=ROW --default-storage-engine=InnoDB --innodb-autoinc-lock-mode=2 \
        --wsrep-on=ON --wsrep-provider="$PROVIDER" --wsrep-cluster-name=ctxtool \
        --wsrep-cluster-address="$(cluster_address)" \
        --wsrep-node-name="node$n" --wsrep-node-address="127.0.0.1:$(gcomm_port "$n")" \
        --wsrep-node-incoming-address="127.0.0.1:$port" \
        --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$(gcomm_port "$n");ist.recv_addr=127.0.0.1:$((PORT + 1100 + n - 1));gcache.size=64M" \
        --wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:$((PORT + 1200 + n - 1))" \
        "${extra[@]}" </dev/null >>"$dir/stdout.log" 2>&1 &
    echo $! >"$dir/node.pid"
}

port_taken() {
    ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}

wait_synced() {
    local n=$1 deadline=$((SECONDS + WAIT_S))
    until [ "$(state_of "$n")" = "Synced" ]; do
        if [ -z "$(pid_of "$n" || true)" ] || [ $SECONDS -ge $deadline ]; then
            echo "cluster.sh: node $n stopped, or is not Synced after ${WAIT_S}s; its log:" >&2
            tail -n 30 "$(node_dir "$n")/error.log" >&2 || true
            exit 1
        fi
        sleep 0.2
    done
}

stop_node() {
    local n=$1 pid
    pid=$(pid_of "$n" || true)
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 300); do
        alive "$pid" || return 0
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
}

check_node() {
    case "${1:-}" in
    1 | 2 | 3) ;;
    *)
        echo "cluster.sh: give a node number, 1 to 3" >&2
        exit 2
        ;;
    esac
}

case "${1:-}" in
up)
    [ -r "$PROVIDER" ] || {
        echo "cluster.sh: no Galera provider at $PROVIDER (apt-get install galera-4)" >&2
        exit 1
    }
    tool rsync >/dev/null
    mkdir -p "$DIR"
    chmod 755 "$DIR"
    echo "node 1: bootstrapping the cluster ..." >&2
    start_node 1 bootstrap
    wait_synced 1
    # One joiner at a time: a donor serves one state transfer at once.
    for n in 2 3; do
        echo "node $n: joining (state transfer by rsync) ..." >&2
        start_node "$n"
        wait_synced "$n"
    done
    echo "all 3 nodes Synced" >&2
    for n in "${NODES[@]}"; do url "$n"; done
    ;;
down)
    # The joiners first, so the last node standing is the one that bootstrapped.
    for n in 3 2 1; do stop_node "$n"; done
    rm -rf "$DIR"
    ;;
status)
    for n in "${NODES[@]}"; do
        pid=$(pid_of "$n" || true)
        echo "node $n  $(url "$n")  pid ${pid:--}  ${pid:+$(state_of "$n" || true)}"
    done
    ;;
kill)
    check_node "${2:-}"
    pid=$(pid_of "$2" || true)
    [ -n "$pid" ] && kill -9 "$pid"
    while [ -n "$pid" ] && alive "$pid"; do sleep 0.05; done
    ;;
start)
    check_node "${2:-}"
    echo "node $2: rejoining ..." >&2
    start_node "$2"
    wait_synced "$2"
    ;;
*)
    echo "usage: scripts/cluster.sh up|down|status|kill N|start N" >&2
    exit 2
    ;;
esac
