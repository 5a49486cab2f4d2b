# SPDX-License-Identifier: MIT
# clickhouse.sh — sourced by tests and benches: private clickhouse-server
# instances (Debian's clickhouse-server) on random 127.0.0.1 ports, each with
# its own configuration and data in a folder of $work, never the system
# service; stopped by the caller's EXIT trap through the pids it records in
# `pids`. Needs: $work and an array `pids`.

# ch_test_setup: what the e2e tests share: the programs checked, $work, `pids`
# and the EXIT trap that stops the instances (TB_KEEP=1 keeps $work).
ch_test_setup() {
    local p
    for p in clickhouse-server curl python3; do
        command -v "$p" >/dev/null || { echo "FAIL: $p not installed (scripts/deps.sh)"; exit 1; }
    done
    work=$(mktemp -d)
    pids=()
    trap ch_test_cleanup EXIT
}
ch_test_cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${TB_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}

ch_freeport() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# ch_start NAME [REMOTE_SERVERS_XML]: starts instance NAME; sets ch_http[NAME]
# and ch_tcp[NAME] (its HTTP and native ports) unless they are set already. The optional XML goes inside
# <remote_servers> (clusters). Returns 1 if it did not answer within 30 s.
declare -A ch_http ch_tcp
ch_start() {
    local name=$1 remote=${2:-} dir="$work/ch-$1"
    # Ports set beforehand (a cluster's configuration names its shards' ports).
    ch_http[$name]=${ch_http[$name]:-$(ch_freeport)}
    ch_tcp[$name]=${ch_tcp[$name]:-$(ch_freeport)}
    mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas"
    cat >"$dir/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$dir/server.log</log><errorlog>$dir/error.log</errorlog>
    <size>10M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>${ch_http[$name]}</http_port>
  <tcp_port>${ch_tcp[$name]}</tcp_port>
  <interserver_http_port>$(ch_freeport)</interserver_http_port>
  <path>$dir/data/</path>
  <tmp_path>$dir/tmp/</tmp_path>
  <user_files_path>$dir/user_files/</user_files_path>
  <format_schema_path>$dir/format_schemas/</format_schema_path>
  <users_config>$dir/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <max_concurrent_queries>32</max_concurrent_queries>
  <remote_servers>$remote</remote_servers>
</yandex>
XML
    cat >"$dir/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
  </interval></default></quotas>
</yandex>
XML
    clickhouse-server --config-file="$dir/config.xml" >"$dir/stdout" 2>&1 &
    pids+=($!)
    for _ in $(seq 150); do
        [ "$(curl -s "http://127.0.0.1:${ch_http[$name]}/ping" 2>/dev/null)" = "Ok." ] && return 0
        sleep 0.2
    done
    echo "clickhouse $name did not start:"; tail -20 "$dir/error.log" "$dir/stdout" 2>/dev/null
    return 1
}

# ch_query NAME SQL: runs SQL on instance NAME over HTTP; prints the result.
ch_query() {
    curl -sS --fail-with-body "http://127.0.0.1:${ch_http[$1]}/" --data-binary "$2"
}

# ch_cluster_start: two instances a and b, each configured with cluster tb2
# = shard a + shard b; sets `url` to clickhouse://A,B/tbc?cluster=tb2 and
# `ch_cluster` to the <remote_servers> XML (`ch_start b "$ch_cluster"`
# restarts shard b).
ch_cluster_start() {
    local s
    ch_cluster="<tb2>"
    for s in a b; do ch_http[$s]=$(ch_freeport); ch_tcp[$s]=$(ch_freeport); done
    for s in a b; do
        ch_cluster+="<shard><replica><host>127.0.0.1</host><port>${ch_tcp[$s]}</port></replica></shard>"
    done
    ch_cluster+="</tb2>"
    ch_start a "$ch_cluster" || { echo "FAIL: shard a did not start"; return 1; }
    ch_start b "$ch_cluster" || { echo "FAIL: shard b did not start"; return 1; }
    url="clickhouse://127.0.0.1:${ch_http[a]},127.0.0.1:${ch_http[b]}/tbc?cluster=tb2"
}

# ch_check_shards N [DB]: where the rows of database DB (default tbc) are,
# read on each shard's own MergeTree tables (not through tbneck): both
# shards hold some, every server's requests and connections live on one
# shard only, and the shards' request rows add up to N (so none is there
# twice). Prints the split; returns 1 on a failure.
ch_check_shards() {
    local s db=${2:-tbc}
    for s in a b; do
        ch_query "$s" "SELECT server, count() FROM $db.requests_local GROUP BY server ORDER BY server
            FORMAT TabSeparated" >"$work/req.$s.tsv" || return 1
        ch_query "$s" "SELECT server_addr, count() FROM $db.connections_local WHERE server_addr != ''
            GROUP BY server_addr ORDER BY server_addr FORMAT TabSeparated" >"$work/conn.$s.tsv" || return 1
    done
    python3 - "$work" "$1" <<'PY'
import sys
work, n = sys.argv[1], int(sys.argv[2])
def load(kind, s):
    return dict((l.split("\t")[0], int(l.split("\t")[1])) for l in open("%s/%s.%s.tsv" % (work, kind, s)) if l.strip())
for kind in ("req", "conn"):
    a, b = load(kind, "a"), load(kind, "b")
    assert a and b, "%s: a shard holds nothing (%s / %s)" % (kind, a, b)
    both = set(a) & set(b)
    assert not both, "%s: servers on both shards: %s" % (kind, both)
    if kind == "req":
        assert sum(a.values()) + sum(b.values()) == n, (sum(a.values()), sum(b.values()), n)
        print("shards: a holds %s, b holds %s (%d requests in all, each server on one shard)"
              % (sorted(a.items()), sorted(b.items()), n))
PY
}

# ch_same_analyses DB URL: `report` of quick.conf's three tiers (text; JSON
# for mysql) and `diagnose` (text, JSON) read from the store URL are byte
# for byte those of the SQLite file DB. Returns 1 (and shows the first
# differences) if one differs.
ch_same_analyses() {
    local db=$1 store=$2 args
    for args in "report --tier http" "report --tier http-8080" "report --tier mysql --format json" \
        "diagnose" "diagnose --format json"; do
        # shellcheck disable=SC2086
        "$TBNECK" $args --db "$db" >"$work/an1.txt" 2>&1
        # shellcheck disable=SC2086
        "$TBNECK" $args --store "$store" >"$work/an2.txt" 2>&1
        cmp -s "$work/an1.txt" "$work/an2.txt" ||
            { echo "FAIL: $args differs"; diff "$work/an1.txt" "$work/an2.txt" | head; return 1; }
    done
}

# ch_same_requests SQLITE.csv MERGED.csv: the two `export requests` hold the
# same rows apart from conn (a sensor's own numbering); prints the count.
ch_same_requests() {
    python3 - "$1" "$2" <<'PY'
import csv, sys
a = list(csv.reader(open(sys.argv[1])))
b = list(csv.reader(open(sys.argv[2])))
c = a[0].index("conn")
strip = lambda rows: sorted(tuple(r[:c] + r[c + 1:]) for r in rows[1:])
if a[0] != b[0] or strip(a) != strip(b):
    sa, sb = set(strip(a)), set(strip(b))
    print("FAIL: merged requests differ from the single sensor's: %d rows against %d, %d only in "
          "SQLite, %d only merged" % (len(a) - 1, len(b) - 1, len(sa - sb), len(sb - sa)))
    sys.exit(1)
print("%d requests, equal to the single SQLite sensor's" % (len(a) - 1))
PY
}

# ch_veth PREFIX: a veth pair for a live sensor beside the test's ClickHouse:
# the replay end $va in a network namespace $ns of its own, the capture end
# $vb here (where ClickHouse's loopback is); no address on either, IPv6 off
# on both so that neither end sends anything of its own. ch_veth_cleanup
# removes them. Returns 1 (with a line) on a failure.
ch_veth() {
    ns="$1$$"
    va="$1$$a"
    vb="$1$$b"
    ip netns add "$ns" || { echo "FAIL: ip netns add"; return 1; }
    ip link add "$va" type veth peer name "$vb" || { echo "FAIL: veth pair"; return 1; }
    ip link set "$va" netns "$ns" || { echo "FAIL: veth into the namespace"; return 1; }
    sysctl -qw "net.ipv6.conf.$vb.disable_ipv6=1" 2>/dev/null
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$va.disable_ipv6=1" 2>/dev/null
    ip link set "$vb" mtu 65535 up && ip -n "$ns" link set "$va" mtu 65535 up ||
        { echo "FAIL: links up"; return 1; }
}
ch_veth_cleanup() {
    [ -n "${vb:-}" ] && ip link del "$vb" 2>/dev/null
    [ -n "${ns:-}" ] && ip netns del "$ns" 2>/dev/null
    return 0
}
