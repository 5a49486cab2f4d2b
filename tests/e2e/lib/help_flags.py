#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# help_flags.py — the flags a --help text names: every -x / --long-name token
# that starts a word (after a space, '[', '(', '|' or a line start), read from
# standard input, one per line, sorted. The man page and the completion are
# checked against this list, so a flag added to --help and forgotten there
# fails e2e_install.
import re
import sys

text = sys.stdin.read()
flags = set(re.findall(r"(?:^|(?<=[\s\[(|]))(--?[A-Za-z][A-Za-z0-9-]*)", text, re.M))
print("\n".join(sorted(f.rstrip("-") for f in flags)))
