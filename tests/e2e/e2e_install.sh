#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_install.sh — issue 16: `meson install --destdir` installs exactly the
# binaries, the man pages, the bash completion, the systemd unit and its
# sysusers file, and every static file of the page; the pages render with
# `man -l` and `groff -man -Tutf8 -ww` without a warning and name every
# subcommand and every flag that `--help` prints (help_flags.py); the
# completion offers exactly those subcommands and flags, the formats --help
# lists, and the tier and server names of a simulated database (the
# simulator's truth); `systemd-analyze verify` accepts the unit.
set -uo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}" "${TB_BUILDDIR:?}"
work=$(mktemp -d "$TB_BUILDDIR/e2e-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
flags="$TB_SRCDIR/tests/e2e/lib/help_flags.py"
for p in meson man groff bash systemd-analyze python3; do
  command -v "$p" >/dev/null || fail "$p not installed (scripts/deps.sh)"
done

# ---- meson install --destdir: the exact list of files ----------------------
dest="$work/dest"
meson install -C "$TB_BUILDDIR" --destdir "$dest" --no-rebuild >"$work/install.log" 2>&1 ||
  { tail -20 "$work/install.log"; fail "meson install --destdir"; }
bin=$(find "$dest" -path '*/bin/tbneck' -type f | head -1)
[ -n "$bin" ] || fail "no bin/tbneck under the destdir"
prefix=${bin%/bin/tbneck}
(cd "$prefix" && find . \( -type f -o -type l \) | sed 's#^\./##' | sort) >"$work/got.txt"
{
  printf '%s\n' bin/tbneck bin/tbneck-sim share/man/man1/tbneck.1 share/man/man1/tbneck-sim.1 \
    share/bash-completion/completions/tbneck share/bash-completion/completions/tbneck-sim \
    lib/systemd/system/tbneck-capture@.service lib/sysusers.d/tbneck.conf
  (cd "$TB_SRCDIR/web/static" && find . -type f | sed 's#^\./#share/tbneck/static/#')
} | sort >"$work/want.txt"
diff "$work/want.txt" "$work/got.txt" >"$work/files.diff" ||
  { cat "$work/files.diff"; fail "installed files differ from the list (< wanted, > installed)"; }
ok "meson install --destdir: $(wc -l <"$work/got.txt") files, exactly the list"
[ "$(readlink "$prefix/share/bash-completion/completions/tbneck-sim")" = tbneck ] ||
  fail "completions/tbneck-sim is not a link to tbneck"
"$bin" --version | grep -qx "tbneck [0-9.]*" || fail "the installed tbneck does not run"
"$prefix/bin/tbneck-sim" --help >/dev/null || fail "the installed tbneck-sim does not run"
cmp -s "$TB_SRCDIR/man/tbneck.1" "$prefix/share/man/man1/tbneck.1" || fail "tbneck.1 differs"
ok "installed binaries run; completion link; pages as in man/"

# ---- man pages: render without warnings, name every subcommand and flag ---
render() { # PAGE -> text on stdout; any warning fails
  local page=$1 w
  for w in 60 80 200; do
    MANWIDTH=$w MANPAGER=cat man -l "$page" >"$work/page.txt" 2>"$work/man.err"
    [ -s "$work/page.txt" ] && [ ! -s "$work/man.err" ] ||
      { cat "$work/man.err"; fail "man -l $(basename "$page") at width $w: warnings or no output"; }
  done
  LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>"$work/groff.err"
  [ ! -s "$work/groff.err" ] || { cat "$work/groff.err"; fail "groff -ww $(basename "$page")"; }
  # Width 200 (the last rendering): no line is broken inside a flag.
  sed 's/\x08.//g' "$work/page.txt" | python3 -c '
import sys
t = sys.stdin.read()
for c in "\u2010\u2011\u2212":
    t = t.replace(c, "-")
sys.stdout.write(t)'
}
render "$prefix/share/man/man1/tbneck.1" >"$work/tbneck.txt"
render "$prefix/share/man/man1/tbneck-sim.1" >"$work/sim.txt"
# in_page FILE WORD: WORD as a whole word (no letter, digit or '-' around it).
in_page() { grep -qP -- "(?<![A-Za-z0-9-])\Q$2\E(?![A-Za-z0-9-])" "$1"; }
cmds=$("$TBNECK" --help | sed -n 's/^  tbneck \([a-z]\+\).*/\1/p')
[ "$(echo "$cmds" | wc -l)" -ge 7 ] || fail "tbneck --help lists too few commands: $cmds"
checked=0
for c in $cmds; do
  in_page "$work/tbneck.txt" "tbneck $c" || fail "tbneck.1 does not name 'tbneck $c'"
  "$TBNECK" "$c" --help | python3 "$flags" >"$work/flags-$c"
  while read -r f; do
    in_page "$work/tbneck.txt" "$f" || fail "tbneck.1 lacks '$f' of 'tbneck $c --help'"
    checked=$((checked + 1))
  done <"$work/flags-$c"
done
"$TBNECK" --help | python3 "$flags" >"$work/flags-top"
"$TBNECK_SIM" --help | python3 "$flags" >"$work/flags-sim"
while read -r f; do in_page "$work/tbneck.txt" "$f" || fail "tbneck.1 lacks '$f' of tbneck --help"
  checked=$((checked + 1)); done <"$work/flags-top"
while read -r f; do in_page "$work/sim.txt" "$f" || fail "tbneck-sim.1 lacks '$f' of its --help"
  checked=$((checked + 1)); done <"$work/flags-sim"
[ "$checked" -ge 80 ] || fail "only $checked flags read from --help: the reader is broken"
ok "man -l and groff -ww: no warning; $(echo $cmds | wc -w) subcommands and $checked flags of --help in the pages"

# ---- bash completion --------------------------------------------------------
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/q" --duration 1s -q ||
  fail "simulator"
"$TBNECK" capture -r "$work/q.pcap" --db "$work/q.db" -q || fail "capture"
python3 - "$work/q.requests.csv" >"$work/truth-names" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(" ".join(sorted({r["tier"] for r in rows})))
print(" ".join(sorted({r["server"] for r in rows})))
PY
comp_script="$prefix/share/bash-completion/completions/tbneck"
# comp WORD...: the completions of the last word, sorted, one a line.
comp() {
  PATH="$prefix/bin:$PATH" bash --norc --noprofile -c '
    [ -f /usr/share/bash-completion/bash_completion ] && . /usr/share/bash-completion/bash_completion
    . "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    f=$(complete -p "$1" | sed "s/.*-F \([^ ]*\).*/\1/")
    "$f" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"' comp "$comp_script" "$@" | sed '/^$/d' | sort -u
}
same() { # WHAT GOT_FILE WANT_FILE
  diff "$3" "$2" >"$work/c.diff" || { cat "$work/c.diff"; fail "completion of $1 (< want, > got)"; }
}
{ echo "$cmds"; echo --help; echo --version; } | sort -u >"$work/want"
comp tbneck "" >"$work/got"; same "tbneck ''" "$work/got" "$work/want"
[ "$(comp tbneck rep)" = report ] || fail "tbneck rep -> $(comp tbneck rep)"
# The flags of each command, and of each kind of export and events, = --help's.
# Less what the help texts name in prose (the JVM's options, diagnose's
# file suffix, the capture option the tiers text mentions); plus --help,
# which every command takes.
for f in "$work"/flags-*; do
  { grep -vxE -- '-Xlog|-XX|-graph' "$f"; echo --help; } | sort -u >"$f.c" && mv "$f.c" "$f"
done
sed -i '/^--tiers$/d' "$work/flags-tiers"
for c in $cmds; do
  case $c in
    export) kinds="requests windows connections" ;;
    events) kinds="import list report" ;;
    *) kinds="" ;;
  esac
  if [ -z "$kinds" ]; then
    comp tbneck "$c" - >"$work/got"
  else
    for k in $kinds; do comp tbneck "$c" "$k" -; done | sort -u >"$work/got"
  fi
  same "tbneck $c -" "$work/got" "$work/flags-$c"
done
comp tbneck-sim - >"$work/got"; same "tbneck-sim -" "$work/got" "$work/flags-sim"
# --format: the values --help lists for each command.
for c in report diagnose; do
  "$TBNECK" "$c" --help | grep -o -- '--format [a-z|]*' | head -1 | cut -d' ' -f2 | tr '|' '\n' |
    sort >"$work/want"
  comp tbneck "$c" --format "" >"$work/got"; same "tbneck $c --format" "$work/got" "$work/want"
done
# Names from the database: the simulator's tiers and servers.
read -r tiers <"$work/truth-names"
servers=$(sed -n 2p "$work/truth-names")
echo "$tiers" | tr ' ' '\n' >"$work/want"
comp tbneck report --db "$work/q.db" --tier "" >"$work/got"
same "report --tier (the simulator's tiers)" "$work/got" "$work/want"
echo "$servers" | tr ' ' '\n' | sort >"$work/want"
comp tbneck report --db "$work/q.db" --server "" >"$work/got"
same "report --server (the simulator's servers)" "$work/got" "$work/want"
python3 - "$work/q.requests.csv" >"$work/want" <<'PY'
import csv, sys
print("\n".join(sorted({r["server"] for r in csv.DictReader(open(sys.argv[1]))
                         if r["tier"] == "http-8080"})))
PY
comp tbneck report --db "$work/q.db" --tier http-8080 --server "" >"$work/got"
same "report --tier http-8080 --server (its servers in the truth)" "$work/got" "$work/want"
comp tbneck capture -i "" | grep -qx lo || fail "capture -i does not offer lo"
comp tbneck report --from now | grep -qx now-5m || fail "--from does not offer now-5m"
ok "completion: subcommands, every command's flags = --help's, --format values, tiers ($tiers) and servers (of a tier) from the database, interfaces"

# ---- systemd unit -----------------------------------------------------------
unit="$prefix/lib/systemd/system/tbneck-capture@.service"
grep -q "^ExecStart=${prefix#$dest}/bin/tbneck capture -i %I -Z tbneck " "$unit" ||
  fail "the unit does not run the installed tbneck with -Z: $(grep ExecStart= "$unit")"
for opt in NoNewPrivileges=yes ProtectSystem=strict CapabilityBoundingSet= PrivateTmp=yes \
  RestrictAddressFamilies= SystemCallFilter=@system-service; do
  grep -q "^$opt" "$unit" || fail "unit lacks $opt"
done
# verify checks that ExecStart's program exists and the Documentation page is
# found: point both at the destdir.
mkdir -p "$work/units"
sed "s#ExecStart=${prefix#$dest}/bin/#ExecStart=$prefix/bin/#" "$unit" \
  >"$work/units/tbneck-capture@.service"
MANPATH="$prefix/share/man" systemd-analyze verify "$work/units/tbneck-capture@eth0.service" \
  >"$work/verify.out" 2>&1 || { cat "$work/verify.out"; fail "systemd-analyze verify"; }
[ ! -s "$work/verify.out" ] || { cat "$work/verify.out"; fail "systemd-analyze verify warned"; }
exposure=$(systemd-analyze security --offline=true "$work/units/tbneck-capture@eth0.service" \
  2>/dev/null | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 4.0 else 1)" "${exposure:-99}" ||
  fail "systemd-analyze security: exposure ${exposure:-?}, want <= 4.0"
ok "systemd-analyze verify passes; exposure $exposure (security --offline)"
echo PASS
