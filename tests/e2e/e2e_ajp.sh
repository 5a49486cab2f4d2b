#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_ajp.sh — AJP13 parser against a real Apache httpd (mod_proxy_ajp) →
# Tomcat 10 (AJP connector) pair on loopback: random ports, private configs
# and folders, a tiny servlet (tests/e2e/lib/ajp/TbAjp.java). Apache pings
# each connection before a request (ping=, CPing/CPong: no request of the
# application). curl sends GETs, a 404, a PATCH (a method AJP carries by name
# in an attribute), a slow page, a large answer (many Send Body Chunks), a
# 300 KB POST (Get Body Chunk rounds) and a bounded wrk run; tcpdump records
# the AJP side.
# Oracles: Tomcat's access log (method, path, status of every request it
# served) and Apache's; tshark's ajp13 dissector for the times: every record
# tbneck reports must start at a frame carrying a Forward Request and end at
# the frame carrying the End Response that follows it on the connection.
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
. "$TB_SRCDIR/tests/e2e/lib/e2e_common.sh"
need apache2 java javac tcpdump tshark curl wrk python3 setpriv
home=/usr/share/tomcat10
api=/usr/share/java/tomcat10-servlet-api.jar
mods=/usr/lib/apache2/modules
[ -f "$api" ] && [ -f "$mods/mod_proxy_ajp.so" ] || { echo "FAIL: tomcat10 / apache2 missing"; exit 1; }

web=$(freeport)
ajp=$(freeport)

# Tomcat: one AJP connector on loopback, the servlet as the "app" context.
tb=$work/tomcat
app=$tb/webapps/app
mkdir -p "$tb"/{conf,logs,temp,work} "$app/WEB-INF/classes"
javac --release 17 -cp "$api" -d "$app/WEB-INF/classes" "$TB_SRCDIR/tests/e2e/lib/ajp/TbAjp.java"
cat >"$app/WEB-INF/web.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<web-app xmlns="https://jakarta.ee/xml/ns/jakartaee" version="6.0" metadata-complete="true">
  <servlet><servlet-name>t</servlet-name><servlet-class>tbajp.TbAjp</servlet-class>
    <load-on-startup>1</load-on-startup></servlet>
  <servlet-mapping><servlet-name>t</servlet-name><url-pattern>/*</url-pattern></servlet-mapping>
</web-app>
EOF
cat >"$tb/conf/server.xml" <<EOF
<Server port="-1" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector protocol="AJP/1.3" address="127.0.0.1" port="$ajp" secretRequired="false"
               maxThreads="8"/>
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false">
        <Valve className="org.apache.catalina.valves.AccessLogValve" directory="logs"
               prefix="access" suffix=".log" rotatable="false" buffered="false"
               pattern="%m %U %s"/>
      </Host>
    </Engine>
  </Service>
</Server>
EOF
cp "$home/etc/web.xml" "$home/etc/logging.properties" "$home/etc/catalina.properties" "$tb/conf/"
printf '\ntomcat.util.scan.StandardJarScanFilter.jarsToSkip=*\n' >>"$tb/conf/catalina.properties"
chown -R tomcat:tomcat "$tb"
setpriv --reuid=tomcat --regid=tomcat --init-groups java -Xmx96m -XX:+UseSerialGC \
    -XX:TieredStopAtLevel=1 -Djava.security.egd=file:/dev/./urandom \
    -Djava.util.logging.manager=org.apache.juli.ClassLoaderLogManager \
    "-Djava.util.logging.config.file=$tb/conf/logging.properties" \
    "-Dcatalina.home=$home" "-Dcatalina.base=$tb" "-Djava.io.tmpdir=$tb/temp" \
    -cp "$home/bin/bootstrap.jar:$home/bin/tomcat-juli.jar" org.apache.catalina.startup.Bootstrap start \
    </dev/null >"$tb/logs/stdout.log" 2>&1 &
pids+=($!)

# Apache httpd: mod_proxy_ajp in front, its own access log.
mkdir -p "$work/httpd"
cat >"$work/httpd/httpd.conf" <<EOF
ServerRoot $work/httpd
DefaultRuntimeDir $work/httpd
PidFile $work/httpd/httpd.pid
ServerName localhost
Listen 127.0.0.1:$web
LoadModule mpm_event_module $mods/mod_mpm_event.so
# One child process: mod_proxy's connection pool is per process, so the
# pooled AJP connections the warm-up opened are the ones the captured
# requests reuse (with the default three children the captured requests
# could all land in a child that never served the warm-up: e2e_ajp then
# saw no connection picked up mid-stream, once in CI on a loaded host).
ServerLimit 1
StartServers 1
ThreadsPerChild 25
MaxRequestWorkers 25
MinSpareThreads 1
MaxSpareThreads 25
LoadModule authz_core_module $mods/mod_authz_core.so
LoadModule proxy_module $mods/mod_proxy.so
LoadModule proxy_ajp_module $mods/mod_proxy_ajp.so
User www-data
Group www-data
ErrorLog $work/httpd/error.log
LogFormat "%m %U %>s" ajp
CustomLog $work/httpd/access.log ajp
ProxyPass /app/ ajp://127.0.0.1:$ajp/app/ ping=3
EOF
apache2 -f "$work/httpd/httpd.conf" -DFOREGROUND >"$work/httpd/stdout.log" 2>&1 &
pids+=($!)
u="http://127.0.0.1:$web/app"
for _ in $(seq 300); do
    curl -sf "$u/items/1" >/dev/null 2>&1 && break
    sleep 0.2
done
curl -sf "$u/items/1" >/dev/null ||
    { tail -20 "$tb/logs/stdout.log" "$work/httpd/error.log"; echo "FAIL: Apache/Tomcat did not come up"; exit 1; }
# What was served before the capture does not count: a last request marks
# the end of the warm-up; once both logs show it (a server may write its line
# after the client has its answer), they are emptied.
curl -sf "$u/marker" >/dev/null
for _ in $(seq 100); do
    grep -q marker "$tb/logs/access.log" && grep -q marker "$work/httpd/access.log" && break
    sleep 0.1
done
: >"$tb/logs/access.log"
: >"$work/httpd/access.log"

tap_start "tcp port $ajp"

curl -s -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null \
    "$u/items/17?x=1" "$u/items/42" "$u/missing/page" "$u/big" "$u/items/5"
curl -s -o /dev/null "$u/slow"
curl -s -o /dev/null -X PATCH --data 'field=1' "$u/items/3"
head -c 300000 /dev/urandom | curl -s -o /dev/null -H 'Expect:' --data-binary @- "$u/upload"
wrk_bounded 400 4 "$u/items/9?q=2"
tap_stop

tbneck_requests
tshark -r "$work/cap.pcap" -d "tcp.port==$ajp,ajp13" -T fields -E separator=/t -E aggregator=, \
    -e frame.time_epoch -e tcp.srcport -e tcp.dstport -e ajp13.code \
    >"$work/frames.tsv" 2>/dev/null
python3 - "$work" "$ajp" "$tb/logs/access.log" <<'EOF'
import collections, csv, sys
from decimal import Decimal
work, port, tlog = sys.argv[1], sys.argv[2], sys.argv[3]
rows = list(csv.DictReader(open(work + "/requests.csv")))
fail = []

def fold(path):
    # tbneck's class rule for paths, written again here: numeric segments → {id}.
    return "/".join("{id}" if s.isdigit() else s for s in path.split("/"))

want = collections.Counter()
for line in open(tlog):
    m, path, status = line.split()
    want[(m + " " + fold(path), int(status))] += 1
apache = sum(1 for line in open(work + "/httpd/access.log") if line.split()[2] != "499")
got = collections.Counter((r["class"], int(r["status"])) for r in rows)
print("Tomcat access log %d, Apache %d, tbneck %d" % (sum(want.values()), apache, len(rows)))
if sum(want.values()) != len(rows) or apache != len(rows):
    fail.append("counts differ")
if want != got:
    fail.append("(class, status) differ:\n  Tomcat %s\n  tbneck %s" % (sorted(want.items()), sorted(got.items())))
if ("PATCH /app/items/{id}", 200) not in got:
    fail.append("no PATCH request")
if any(r["tier"] != "ajp-" + port for r in rows):
    fail.append("tiers %s" % set(r["tier"] for r in rows))
# Apache's pooled connections opened by the warm-up request are picked up
# mid-stream (flag 4); nothing else may be flagged.
if any(int(r["flags"]) & ~4 for r in rows):
    fail.append("flagged records: %s" % [r for r in rows if int(r["flags"]) & ~4][:3])
mid = sum(1 for r in rows if int(r["flags"]) & 4)
print("picked up mid-stream: %d" % mid)
if mid == 0:
    fail.append("no pooled connection was picked up mid-stream")

# tshark: per connection (client port), Forward Request frames (code 2 from
# the client) paired with the End Response frame (code 5) that follows.
ns = lambda t: int(Decimal(t) * 1000000000)
conv = collections.defaultdict(list)
cpings = 0
for line in open(work + "/frames.tsv"):
    f = line.rstrip("\n").split("\t")
    if len(f) < 4 or not f[3]:
        continue
    t, sp, dp, codes = ns(f[0]), f[1], f[2], f[3].split(",")
    client = dp == port
    cport = sp if client else dp
    for c in codes:
        if client and c == "10":
            cpings += 1
        if client and c == "2":
            conv[cport].append([t, None])
        elif not client and c == "5":
            open_ = [x for x in conv[cport] if x[1] is None]
            if open_:
                open_[0][1] = t
want_t = sorted((int(p), a, d) for p, xs in conv.items() for a, d in xs if d is not None)
got_t = sorted((int(r["client"].rsplit(":", 1)[1]), int(r["arrival_ns"]), int(r["departure_ns"]))
               for r in rows)
print("tshark: %d exchanges, %d CPings" % (len(want_t), cpings))
if want_t != got_t:
    miss = sorted(set(want_t) - set(got_t))[:5]
    extra = sorted(set(got_t) - set(want_t))[:5]
    fail.append("times differ from tshark: missing %s, extra %s" % (miss, extra))
if cpings == 0:
    fail.append("no CPing seen: the probe exclusion was not exercised")
probes = [l for l in open(work + "/capture.out") if "health probes" in l]
print(probes[0].strip() if probes else "no probe count")
if not probes or int(probes[0].split()[2]) != cpings:
    fail.append("tbneck's probe count is not tshark's %d CPings" % cpings)
slow = [r for r in rows if r["class"] == "GET /app/slow"]
if len(slow) != 1 or int(slow[0]["departure_ns"]) - int(slow[0]["arrival_ns"]) < 200_000_000:
    fail.append("slow page %s" % slow)
for f in fail:
    print("FAIL:", f)
sys.exit(1 if fail else 0)
EOF
echo "PASS"
