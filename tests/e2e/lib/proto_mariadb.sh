# SPDX-License-Identifier: MIT
# proto_mariadb.sh — sourced by the MariaDB e2e tests: a private mariadbd in a
# temporary data folder on a random 127.0.0.1 port (TLS off, no grant checks),
# stopped by the caller's EXIT trap through the pid it records in `pids`.
# Needs: $work (the test's temporary folder) and an array `pids`.

proto_freeport() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# proto_mariadb_start: sets $dbport and $dbsock; returns 1 if it would not start.
proto_mariadb_start() {
    dbport=$(proto_freeport)
    dbsock="$work/mysqld.sock"
    mkdir -p "$work/data"
    mariadb-install-db --no-defaults --datadir="$work/data" --user=root --skip-test-db \
        --auth-root-authentication-method=normal >"$work/install.log" 2>&1 || {
        cat "$work/install.log"; return 1; }
    mariadbd --no-defaults --datadir="$work/data" --user=root --port="$dbport" \
        --bind-address=127.0.0.1 --socket="$dbsock" --pid-file="$work/mysqld.pid" \
        --skip-grant-tables --skip-ssl --skip-name-resolve --innodb-buffer-pool-size=32M \
        --innodb-log-file-size=16M --max-connections=64 --log-error="$work/mysqld.err" &
    pids+=($!)
    for _ in $(seq 150); do
        mariadb --no-defaults -h 127.0.0.1 -P "$dbport" --protocol=tcp -u root --skip-ssl \
            -e 'select 1' >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    cat "$work/mysqld.err"
    return 1
}

# proto_sql "statements": runs them over TCP (so they can be captured).
proto_sql() {
    mariadb --no-defaults -h 127.0.0.1 -P "$dbport" --protocol=tcp -u root --skip-ssl "$@"
}
