#!/usr/bin/env bash
# deps.sh — installs the Debian packages tbneck builds, tests and demos with.
# Idempotent: does nothing when everything is already installed.
set -euo pipefail
pkgs=(meson ninja-build pkg-config gcc libc6-dev libpcap-dev libuv1-dev libsqlite3-dev zlib1g-dev
      libcmocka-dev libhttp-parser-dev libcurl4-openssl-dev gnuplot-nox sqlite3 tcpdump tshark tcpreplay iproute2
      curl wrk clang libclang-rt-14-dev mariadb-server mariadb-client percona-toolkit sysbench
      nginx python3 procps psmisc chromium fonts-dejavu-core fonts-liberation graphviz
      postgresql postgresql-contrib redis-server redis-tools memcached prometheus
      faketime bash-completion man-db groff-base systemd
      clickhouse-server clickhouse-client)
# The real-stack scripts (scripts/stack/) need these too; the tests run them.
stack_pkgs=(tomcat10 libmariadb-java default-jdk-headless)
# Protocol end-to-end tests: Apache httpd (mod_proxy_ajp) in front of Tomcat,
# php-fpm behind nginx, openssl for a TLS upstream's certificate.
stack_pkgs+=(apache2 php-fpm openssl)
case "${1:-}" in
  --demo) pkgs=(meson ninja-build pkg-config gcc libc6-dev libpcap-dev libuv1-dev libsqlite3-dev zlib1g-dev libcurl4-openssl-dev
                libhttp-parser-dev gnuplot-nox sqlite3 libcmocka-dev fonts-dejavu-core) ;;
  --stack) pkgs+=("${stack_pkgs[@]}") ;;
  ""|--all) pkgs+=("${stack_pkgs[@]}") ;;
  *) echo "usage: deps.sh [--demo|--stack|--all]" >&2; exit 2 ;;
esac
# Node.js (with npm) drives the headless-browser test; Debian's nodejs is used
# only when no node is installed already (a nodesource build ships its own npm
# and conflicts with Debian's npm package).
if [ "${1:-}" != "--demo" ] && ! command -v npm >/dev/null 2>&1; then
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  pkgs+=(npm)
fi
if [ -n "${TB_EXTRA_PKGS:-}" ]; then read -r -a extra <<<"$TB_EXTRA_PKGS"; pkgs+=("${extra[@]}"); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
echo "wireshark-common wireshark-common/install-setuid boolean false" | $sudo debconf-set-selections || true
$sudo apt-get -o DPkg::Lock::Timeout=900 update -q >/dev/null
# Services must not start on install (tests start private instances).
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod +x /usr/sbin/policy-rc.d
  trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
fi
$sudo apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
