#!/usr/bin/env python3
"""Runs a cmocka test binary and passes its TAP output through, fixing one line.

usage: cmocka-tap.py BINARY [ARGS...]

cmocka 1.1.5 (Debian 12) reports a test that called skip() as
'not ok N # SKIP name', which TAP readers (meson among them) count as a
failure; TAP's skip is 'ok N # SKIP reason'. Everything else is passed
through unchanged, as it comes, and the binary's exit code is kept.
"""
import os
import re
import subprocess
import sys

SKIP = re.compile(r'^not ok (\d+)(?: -)? # SKIP\b ?(.*)$')


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    env = dict(os.environ, CMOCKA_MESSAGE_OUTPUT='TAP')
    p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, env=env, text=True, errors='replace')
    for line in p.stdout:
        m = SKIP.match(line.rstrip('\n'))
        if m:
            line = f'ok {m.group(1)} # SKIP {m.group(2)}\n'
        sys.stdout.write(line)
        sys.stdout.flush()
    code = p.wait()
    sys.exit(code if code >= 0 else 128 - code)  # killed by a signal: 128 + its number


if __name__ == '__main__':
    main()
