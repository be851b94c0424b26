#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on a loopback port for the distributed-tuning tests and
# prints its URL on stdout (the only stdout line). Installs the server from the system's packages
# when it is missing (Debian/Ubuntu). Usage:
#   export TILESEARCH_TEST_POSTGRES=$(.ci/postgres.sh start [DIR] [PORT])
#   .ci/postgres.sh stop [DIR]      (stops it and removes DIR)
set -euo pipefail

cmd=${1:-start}
dir=${2:-${TMPDIR:-/tmp}/tilesearch-pg}
port=${3:-55432}

bindir() {
    if command -v pg_ctl >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v pg_ctl)")"; return; fi
    { ls -d /usr/lib/postgresql/*/bin 2>/dev/null || true; } | sort -V | tail -1
}

as_owner() {  # initdb and postgres refuse to run as root
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [ "$cmd" = stop ]; then
    bin=$(bindir)
    [ -n "$bin" ] && [ -f "$dir/data/PG_VERSION" ] && as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >&2 || true
    # the server's files (64 MB) go with it; only a folder that holds a server's data is removed
    if [ -f "$dir/data/PG_VERSION" ]; then rm -rf "$dir"; fi
    exit 0
fi

bin=$(bindir)
if [ -z "$bin" ]; then
    echo "postgres.sh: installing postgresql from the system's packages" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2
    bin=$(bindir)
fi

if [ "$(id -u)" = 0 ]; then
    mkdir -p "$dir" && chown postgres: "$dir"
else
    mkdir -p "$dir"
fi
if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir/data" -U tilesearch --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
fi
as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1 || as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200 -c fsync=off" start >&2 \
    || { cat "$dir/server.log" >&2; exit 1; }
"$bin/createdb" -h 127.0.0.1 -p "$port" -U tilesearch tilesearch_test 2>/dev/null || true
echo "postgresql://tilesearch@127.0.0.1:$port/tilesearch_test"
