#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# stack.sh — functions that build, start and tear down the nginx → Tomcat → MariaDB
# demo stack, each tier at its own address; sourced by run.sh and the e2e test.
#
# Two layouts:
#   netns     (default) three network namespaces on a bridge the script creates:
#             tb-web 10.77.0.2 (nginx :80), tb-app 10.77.0.3 (Tomcat :8080),
#             tb-db 10.77.0.4 (MariaDB :3306); the bridge tbbr0 is 10.77.0.1 and
#             the load generator runs in the root namespace. Capture on tbbr0.
#   loopback  127.0.0.2 / .3 / .4 on lo, for machines without namespaces. Capture on lo.
#
# Every process started here is recorded in STACK_PIDS and every namespace, link
# and directory in the stack_down bookkeeping, so one trap cleans up after a failure.

STACK_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STACK_NET=${STACK_NET:-10.77.0}
STACK_BRIDGE=${STACK_BRIDGE:-tbbr0}
# Namespaces are tb-web, tb-app, tb-db with the default bridge, else named after
# the bridge (and so are the veth ends), so that two stacks on their own
# bridges and nets (STACK_BRIDGE, STACK_NET) can run side by side.
if [ "$STACK_BRIDGE" = tbbr0 ]; then STACK_NS=${STACK_NS:-tb}; else STACK_NS=${STACK_NS:-$STACK_BRIDGE}; fi
STACK_ADMIN_PORT=${STACK_ADMIN_PORT:-8089}
STACK_PIDS=()
STACK_NETNS=()
STACK_LINKS=()
STACK_DIR=""

# JVM and webapp knobs: a small Serial-GC heap and a cache churned by every request
# make the old generation fill about once a second, and each full collection stops
# the world for tens of milliseconds (docs/stack.md explains the numbers).
STACK_HEAP=${STACK_HEAP:-"-Xms80m -Xmx80m -Xmn16m"}
STACK_CACHE_ENTRIES=${STACK_CACHE_ENTRIES:-6000}
STACK_NODES_PER_ENTRY=${STACK_NODES_PER_ENTRY:-200}
STACK_ENTRIES_PER_REQUEST=${STACK_ENTRIES_PER_REQUEST:-4}
STACK_GARBAGE_PER_REQUEST=${STACK_GARBAGE_PER_REQUEST:-500}
# Render loop iterations per work unit (list 1, story 2, search 3 units).
STACK_CPU_WORK=${STACK_CPU_WORK:-0}
# Database wait of the story page (microseconds of SLEEP in its first query).
STACK_DB_DELAY_US=${STACK_DB_DELAY_US:-9000}
# Tomcat's request threads: its capacity, hence its congestion point.
STACK_TOMCAT_THREADS=${STACK_TOMCAT_THREADS:-12}
# The connector's acceptCount (Tomcat's default 100): connections the kernel
# queues for it while every thread is busy, so requests wait rather than fail.
STACK_TOMCAT_ACCEPT=${STACK_TOMCAT_ACCEPT:-100}
# Induced causes (run.sh --cause): the webapp's JDBC pool ceiling (0 = unbounded),
# MD5 rounds the database computes per story query instead of its SLEEP (0 =
# none), and the database's CPU as a percentage of one core (0 = no cap; a
# cgroup's CFS quota, cgroup v2 cpu.max or v1 cpu.cfs_quota_us).
STACK_JDBC_POOL=${STACK_JDBC_POOL:-0}
# Connections the webapp's pool keeps open, idle or not (0 = only those in use).
STACK_JDBC_MIN_IDLE=${STACK_JDBC_MIN_IDLE:-0}
STACK_DB_CPU_LOOPS=${STACK_DB_CPU_LOOPS:-0}
STACK_DB_CPU=${STACK_DB_CPU:-0}
STACK_CGROUPS=()

stack_log() { echo "stack: $*" >&2; }
stack_die() { echo "stack: error: $*" >&2; return 1; }

# stack_layout netns|loopback — sets the addresses and the capture interface.
stack_layout() {
    STACK_MODE=$1
    case "$STACK_MODE" in
    netns)
        WEB_ADDR=$STACK_NET.2 APP_ADDR=$STACK_NET.3 DB_ADDR=$STACK_NET.4
        CAP_IFACE=$STACK_BRIDGE ;;
    loopback)
        WEB_ADDR=127.0.0.2 APP_ADDR=127.0.0.3 DB_ADDR=127.0.0.4
        CAP_IFACE=lo ;;
    *) stack_die "unknown layout '$1'" ;;
    esac
    # Only the three tiers' traffic; the loopback-only admin connector is left out.
    CAP_FILTER="tcp and (host $WEB_ADDR or host $APP_ADDR or host $DB_ADDR) and not port $STACK_ADMIN_PORT"
}

# Can this machine give every tier its own namespace?
stack_netns_ok() {
    local probe=tbprobe$$
    ip netns add "$probe" 2>/dev/null || return 1
    ip netns del "$probe"
    ip link add "$probe" type bridge 2>/dev/null || return 1
    ip link del "$probe"
}

# in_tier web|app|db CMD... — runs CMD in the tier's namespace (or here, on loopback).
in_tier() {
    local t=$1; shift
    if [ "$STACK_MODE" = netns ]; then ip netns exec "$STACK_NS-$t" "$@"; else "$@"; fi
}

# tier_prefix web|app|db — sets TIER_PREFIX to the command words that run something in
# the tier's namespace. Daemons are started as "${TIER_PREFIX[@]}" CMD & rather than
# through in_tier: a backgrounded function is a subshell, and $! would then be the
# subshell's pid, not the daemon's (ip netns exec execs, so here it is the daemon's).
tier_prefix() {
    TIER_PREFIX=()
    if [ "$STACK_MODE" = netns ]; then TIER_PREFIX=(ip netns exec "$STACK_NS-$1"); fi
}

stack_net_up() {
    if [ "$STACK_MODE" = loopback ]; then
        # 127.0.0.0/8 is routed to lo already on Linux; nothing to create.
        return 0
    fi
    local t
    for t in web app db; do
        ip netns list | grep -qw "$STACK_NS-$t" && stack_die "namespace $STACK_NS-$t exists (another stack running? 'ip netns del $STACK_NS-$t')"
    done
    ip link show "$STACK_BRIDGE" >/dev/null 2>&1 && stack_die "link $STACK_BRIDGE exists (another stack running?)"
    ip link add "$STACK_BRIDGE" type bridge
    STACK_LINKS+=("$STACK_BRIDGE")
    ip addr add "$STACK_NET.1/24" dev "$STACK_BRIDGE"
    ip link set "$STACK_BRIDGE" up
    # A bridge passes frames between its ports without showing them to a packet
    # socket on the bridge device unless the device is promiscuous.
    ip link set "$STACK_BRIDGE" promisc on
    local i=2
    for t in web app db; do
        local veth=${STACK_BRIDGE:0:12}v${t:0:1}
        ip netns add "$STACK_NS-$t"
        STACK_NETNS+=("$STACK_NS-$t")
        ip link add "$veth" type veth peer name eth0 netns "$STACK_NS-$t"
        STACK_LINKS+=("$veth")
        ip link set "$veth" master "$STACK_BRIDGE" up
        ip netns exec "$STACK_NS-$t" ip addr add "$STACK_NET.$i/24" dev eth0
        ip netns exec "$STACK_NS-$t" ip link set eth0 up
        ip netns exec "$STACK_NS-$t" ip link set lo up
        i=$((i + 1))
    done
}

# stack_wait SECONDS WHAT CMD... — polls CMD every 0.2 s until it succeeds.
stack_wait() {
    local secs=$1 what=$2; shift 2
    local end=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || { stack_die "$what did not come up within ${secs}s"; return 1; }
        sleep 0.2
    done
}

stack_db_up() {
    local d=$STACK_DIR/db
    mkdir -p "$d"
    chown mysql:mysql "$d"
    mariadb-install-db --no-defaults --datadir="$d/data" --user=mysql --skip-test-db \
        >"$d/install.log" 2>&1 || { tail -20 "$d/install.log" >&2; stack_die "mariadb-install-db failed"; return 1; }
    tier_prefix db
    "${PRIO_PREFIX[@]}" "${TIER_PREFIX[@]}" mariadbd --no-defaults --datadir="$d/data" --user=mysql \
        --bind-address="$DB_ADDR" --port=3306 --socket="$d/mysqld.sock" --pid-file="$d/mysqld.pid" \
        --skip-name-resolve --skip-log-bin --innodb-buffer-pool-size=64M \
        --max-connections=200 --log-error="$d/error.log" </dev/null >/dev/null 2>&1 &
    STACK_PIDS+=($!)
    STACK_DB_PID=$!
    stack_wait 60 "mariadbd" mariadb --no-defaults -S "$d/mysqld.sock" -uroot -e 'SELECT 1' \
        || { tail -20 "$d/error.log" >&2; return 1; }
    mariadb --no-defaults -S "$d/mysqld.sock" -uroot <"$STACK_HERE/schema.sql"
    if [ "$STACK_DB_CPU" -gt 0 ]; then
        stack_cpu_cap "${STACK_PIDS[-1]}" "$STACK_DB_CPU" || return 1
    fi
    stack_log "MariaDB up at $DB_ADDR:3306"
}

# Fills a template's @VARS@ from the environment of the caller.
stack_fill() {
    sed -e "s|@DIR@|$2|g" -e "s|@WEB_ADDR@|$WEB_ADDR|g" -e "s|@APP_ADDR@|$APP_ADDR|g" \
        -e "s|@DB_ADDR@|$DB_ADDR|g" -e "s|@ADMIN_PORT@|$STACK_ADMIN_PORT|g" \
        -e "s|@JDBC_URL@|$STACK_JDBC_URL|g" \
        -e "s|@CACHE_ENTRIES@|$STACK_CACHE_ENTRIES|g" \
        -e "s|@NODES_PER_ENTRY@|$STACK_NODES_PER_ENTRY|g" \
        -e "s|@ENTRIES_PER_REQUEST@|$STACK_ENTRIES_PER_REQUEST|g" \
        -e "s|@GARBAGE_PER_REQUEST@|$STACK_GARBAGE_PER_REQUEST|g" \
        -e "s|@CPU_WORK@|$STACK_CPU_WORK|g" -e "s|@DB_DELAY_US@|$STACK_DB_DELAY_US|g" \
        -e "s|@TOMCAT_THREADS@|$STACK_TOMCAT_THREADS|g" \
        -e "s|@TOMCAT_ACCEPT@|$STACK_TOMCAT_ACCEPT|g" \
        -e "s|@JDBC_POOL@|$STACK_JDBC_POOL|g" -e "s|@JDBC_MIN_IDLE@|$STACK_JDBC_MIN_IDLE|g" \
        -e "s|@DB_CPU_LOOPS@|$STACK_DB_CPU_LOOPS|g" "$1"
}

# stack_cpu_cap PID PERCENT — confines PID (all its threads, and those it starts
# later) to PERCENT of one core with a CFS bandwidth quota over the kernel's
# default period of 100 ms (what systemd's CPUQuota=, docker --cpus and a
# Kubernetes CPU limit set): once the process has used PERCENT ms of CPU in a
# period it is stopped until the next one begins (STACK_DB_CPU_PERIOD_US).
# The group also gets the largest CPU weight, so that on a machine busy with
# other work the quota, not the neighbours, is what holds the database back.
stack_cpu_cap() {
    local pid=$1 pct=$2 period=${STACK_DB_CPU_PERIOD_US:-100000} quota cg
    quota=$(( period * pct / 100 ))
    if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
        cg=/sys/fs/cgroup/tbstack-db$$
        grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control \
            || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control \
            || { stack_die "cannot enable the cpu controller in /sys/fs/cgroup"; return 1; }
        mkdir "$cg" || { stack_die "cannot create $cg"; return 1; }
        STACK_CGROUPS+=("$cg")
        echo "$quota $period" >"$cg/cpu.max"
        echo 10000 >"$cg/cpu.weight"
    elif [ -w /sys/fs/cgroup/cpu/cgroup.procs ] || [ -d /sys/fs/cgroup/cpu ]; then
        cg=/sys/fs/cgroup/cpu/tbstack-db$$
        mkdir "$cg" || { stack_die "cannot create $cg"; return 1; }
        STACK_CGROUPS+=("$cg")
        echo "$period" >"$cg/cpu.cfs_period_us"
        echo "$quota" >"$cg/cpu.cfs_quota_us"
        echo 262144 >"$cg/cpu.shares"
    else
        stack_die "no cgroup cpu controller (v2 cpu.max or v1 cpu) to cap the database's CPU"
        return 1
    fi
    echo "$pid" >"$cg/cgroup.procs" || { stack_die "cannot move $pid into $cg"; return 1; }
    stack_log "database CPU capped at ${pct}% of one core ($cg: ${quota} us every ${period} us)"
}

STACK_CATALINA_HOME=/usr/share/tomcat10
STACK_SERVLET_JAR=/usr/share/java/tomcat10-servlet-api.jar
STACK_JDBC_JAR=/usr/share/java/mariadb-java-client.jar

stack_app_up() {
    local b=$STACK_DIR/tomcat
    local app=$b/webapps/app
    mkdir -p "$b"/{conf,logs,temp,work} "$app/WEB-INF/classes" "$app/WEB-INF/lib"
    [ -f "$STACK_SERVLET_JAR" ] || { stack_die "$STACK_SERVLET_JAR missing (apt-get install libtomcat10-java)"; return 1; }
    [ -f "$STACK_JDBC_JAR" ] || { stack_die "$STACK_JDBC_JAR missing (apt-get install libmariadb-java)"; return 1; }
    javac --release 17 -Xlint:all -Werror -cp "$STACK_SERVLET_JAR" -d "$app/WEB-INF/classes" \
        "$STACK_HERE"/webapp/src/tbstack/*.java
    cp "$STACK_JDBC_JAR" "$app/WEB-INF/lib/"
    STACK_JDBC_URL="jdbc:mariadb://$DB_ADDR:3306/stack"
    # On loopback the driver would connect from 127.0.0.1; bind it to the tier's address
    # so that the tap sees Tomcat (not an unknown host) as the database's client.
    [ "$STACK_MODE" = loopback ] && STACK_JDBC_URL="$STACK_JDBC_URL?localSocketAddress=$APP_ADDR"
    stack_fill "$STACK_HERE/webapp/WEB-INF/web.xml.in" "$b" >"$app/WEB-INF/web.xml"
    stack_fill "$STACK_HERE/server.xml.in" "$b" >"$b/conf/server.xml"
    cp "$STACK_CATALINA_HOME/etc/web.xml" "$STACK_CATALINA_HOME/etc/logging.properties" "$b/conf/"
    cp "$STACK_CATALINA_HOME/etc/catalina.properties" "$b/conf/"
    # No jar needs scanning (the webapp's descriptor is metadata-complete): starts faster.
    printf '\ntomcat.util.scan.StandardJarScanFilter.jarsToSkip=*\n' >>"$b/conf/catalina.properties"
    chown -R tomcat:tomcat "$b"
    STACK_GC_LOG=$b/logs/gc.log
    # Serial GC stops every application thread for each collection, like the
    # paper's JDK 1.5 Tomcat; the unified log gives each pause's wall-clock end
    # (utctime) and duration. STACK_GC_LOG_TAGS=gc,safepoint also logs every
    # other stop of the JVM (tbneck events import reads only the [gc] lines).
    local -a jvm
    read -r -a jvm <<<"$STACK_HEAP"
    jvm+=(-XX:+UseSerialGC -XX:-UsePerfData
          "-Xlog:${STACK_GC_LOG_TAGS:-gc}:file=$STACK_GC_LOG:utctime,uptime,level,tags"
          -Djava.security.egd=file:/dev/./urandom -Djava.awt.headless=true
          --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED
          --add-opens=java.base/java.util=ALL-UNNAMED
          --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
          --add-opens=java.rmi/sun.rmi.transport=ALL-UNNAMED
          -Djava.util.logging.manager=org.apache.juli.ClassLoaderLogManager
          "-Djava.util.logging.config.file=$b/conf/logging.properties"
          "-Dcatalina.home=$STACK_CATALINA_HOME" "-Dcatalina.base=$b" "-Djava.io.tmpdir=$b/temp"
          -cp "$STACK_CATALINA_HOME/bin/bootstrap.jar:$STACK_CATALINA_HOME/bin/tomcat-juli.jar"
          org.apache.catalina.startup.Bootstrap start)
    # ip netns exec and setpriv exec, so the recorded pid is the JVM's own.
    tier_prefix app
    "${PRIO_PREFIX[@]}" "${TIER_PREFIX[@]}" setpriv --reuid=tomcat --regid=tomcat --init-groups \
        java "${jvm[@]}" </dev/null >"$b/logs/stdout.log" 2>&1 &
    STACK_PIDS+=($!)
    STACK_APP_PID=$!
    stack_wait 90 "Tomcat" in_tier app curl -sf "http://127.0.0.1:$STACK_ADMIN_PORT/app/stats" \
        || { tail -30 "$b/logs/stdout.log" >&2; return 1; }
    stack_log "Tomcat up at $APP_ADDR:8080 (GC log $STACK_GC_LOG)"
}

stack_web_up() {
    local n=$STACK_DIR/nginx
    mkdir -p "$n/tmp"
    stack_fill "$STACK_HERE/nginx.conf.in" "$n" >"$n/nginx.conf"
    # Loopback layout: make nginx connect from its own tier address.
    if [ "$STACK_MODE" = loopback ]; then
        sed -i "s|proxy_pass http://tomcat;|proxy_pass http://tomcat;\n            proxy_bind $WEB_ADDR;|" "$n/nginx.conf"
    fi
    chown -R www-data "$n/tmp"
    STACK_ACCESS_LOG=$n/access.log
    tier_prefix web
    "${PRIO_PREFIX[@]}" "${TIER_PREFIX[@]}" nginx -e "$n/error.log" -p "$n" -c "$n/nginx.conf" </dev/null >/dev/null 2>&1 &
    STACK_PIDS+=($!)
    STACK_WEB_PID=$!
    stack_wait 30 "nginx" bash -c "exec 3<>/dev/tcp/$WEB_ADDR/80" || { cat "$n/error.log" >&2; return 1; }
    stack_log "nginx up at $WEB_ADDR:80"
}

# stack_up DIR — everything, in dependency order. DIR receives logs and data.
# STACK_PRIORITY=1: every process of the stack (and what run.sh starts through
# PRIO_PREFIX: the load and the capture) runs in a cgroup of the largest CPU
# weight, so that on a machine busy with other work the cause under test, not
# the neighbours, holds the stack back. PRIO_PREFIX is the command words that
# start a command inside it (empty without STACK_PRIORITY).
PRIO_PREFIX=()
stack_prio_up() {
    [ "${STACK_PRIORITY:-0}" = 1 ] || return 0
    local cg
    if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
        cg=/sys/fs/cgroup/tbstack-prio$$
        grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control \
            || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control \
            || { stack_die "cannot enable the cpu controller in /sys/fs/cgroup"; return 1; }
        mkdir "$cg" || { stack_die "cannot create $cg"; return 1; }
        STACK_CGROUPS+=("$cg")
        echo 10000 >"$cg/cpu.weight"
    elif [ -d /sys/fs/cgroup/cpu ]; then
        cg=/sys/fs/cgroup/cpu/tbstack-prio$$
        mkdir "$cg" || { stack_die "cannot create $cg"; return 1; }
        STACK_CGROUPS+=("$cg")
        echo 262144 >"$cg/cpu.shares"
    else
        stack_log "no cgroup cpu controller: STACK_PRIORITY ignored"
        return 0
    fi
    # bash moves itself into the group, then becomes the command (exec), so
    # that $! stays the command's pid. It goes before `ip netns exec`, which
    # mounts the namespace's own /sys, without the cgroup hierarchy.
    # shellcheck disable=SC2016
    PRIO_PREFIX=(bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg")
    stack_log "stack processes at the largest CPU weight ($cg)"
}

stack_up() {
    STACK_DIR=$1
    mkdir -p "$STACK_DIR"
    # mysqld and Tomcat run as their own users and must reach their directories.
    chmod 755 "$STACK_DIR"
    stack_prio_up
    stack_net_up
    stack_db_up
    stack_app_up
    stack_web_up
}

# stack_stats — prints the webapp's counters ("requests N", "queries N") through
# the loopback-only admin connector, which the capture does not see.
stack_stats() {
    in_tier app curl -sf "http://127.0.0.1:$STACK_ADMIN_PORT/app/stats${1:+?$1}"
}

# stack_db_questions — MariaDB's own count of client statements (status "Questions"),
# read over the Unix socket so that the capture does not see it. The reading itself
# counts as one.
stack_db_questions() {
    mariadb --no-defaults -S "$STACK_DIR/db/mysqld.sock" -uroot -N -e "SHOW GLOBAL STATUS LIKE 'Questions'" \
        | awk '{ print $2 }'
}

# stack_cpu_ticks web|app|db — CPU time (user + system, in clock ticks of
# getconf CLK_TCK, all threads) used so far by the tier's server process and its
# children (nginx's workers), from /proc/PID/stat: a witness of how busy each
# tier was that does not come from the wire.
stack_cpu_ticks() {
    local pid p sum=0 f
    case "$1" in
    web) pid=$STACK_WEB_PID ;; app) pid=$STACK_APP_PID ;; db) pid=$STACK_DB_PID ;;
    *) stack_die "unknown tier '$1'"; return 1 ;;
    esac
    for p in "$pid" $(pgrep -P "$pid" 2>/dev/null); do
        # Fields after the command name (which may hold spaces): utime is the 14th
        # field of the line, stime the 15th.
        f=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) || continue
        set -- $f
        sum=$((sum + ${12} + ${13}))
    done
    echo "$sum"
}

# stack_load URL SECONDS CONNECTIONS THINK_MS — wrk with the Lua mix; connections go
# idle at the end and wrk exits a few seconds later, so no request is cut off.
stack_load() {
    local url=$1 secs=$2 conns=$3 think=$4
    local stop_at=$(( $(date +%s) + secs ))
    STOP_AT=$stop_at THINK_MS=$think "${PRIO_PREFIX[@]}" timeout $((secs + 30)) \
        wrk -t 2 -c "$conns" -d "$((secs + 4))s" --timeout 10s -s "$STACK_HERE/load.lua" "$url" &
    STACK_PIDS+=($!)
    wait $!
}

# stack_down — stops every process started above and removes what was created.
# Safe to call twice and after a partial start.
stack_down() {
    local p
    for p in "${STACK_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${STACK_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    done
    STACK_PIDS=()
    local ns
    for ns in "${STACK_NETNS[@]}"; do
        # Anything still alive in our own namespaces was started by us.
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    STACK_NETNS=()
    local l
    for l in "${STACK_LINKS[@]}"; do ip link del "$l" 2>/dev/null || true; done
    STACK_LINKS=()
    local cg
    for cg in "${STACK_CGROUPS[@]}"; do rmdir "$cg" 2>/dev/null || true; done
    STACK_CGROUPS=()
}
