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
