#!/usr/bin/env python3
"""tools/tap-summary.py, which prints CI's last line: its totals over TAP
results of every kind the suites print (cmocka, node:test, taplib), and the
reasons it shows for a failed test. Prints TAP.
"""
import json
import os
import subprocess
import sys
import tempfile

import taplib
from taplib import test

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tools', 'tap-summary.py')


def summary(*entries, extra=()):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, 'build-x', 'meson-logs', 'testlog.json')
        os.makedirs(os.path.dirname(path))
        with open(path, 'w') as f:
            for e in entries:
                f.write(json.dumps(e) + '\n')
        p = subprocess.run([sys.executable, TOOL, *extra, path], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout.splitlines()


@test
def totals_count_every_kind_of_result(_):
    rc, out = summary(
        {'name': 'a', 'result': 'OK', 'stdout': 'ok 1 - x\nok 2 - y # SKIP no tun\nnot ok 3 - z # SKIP cmocka\n'},
        {'name': 'b', 'result': 'OK', 'stdout': 'no tap here'},
        {'name': 'c', 'result': 'SKIP', 'stdout': ''})
    assert rc == 0, (rc, out)
    assert out[-1] == '2 passed, 0 failed, 3 skipped', out[-1]  # b: one result of its own
    rc, out = summary({'name': 'd', 'result': 'TIMEOUT', 'stdout': 'ok 1 - x\n'}, extra=['--fail', 'build'])
    assert rc == 1
    assert out[-1] == '1 passed, 2 failed, 0 skipped', out  # the timeout after its last line, and the build
    assert 'FAILED: build' in out and 'FAILED: d (TIMEOUT) in build-x' in out, out


@test
def a_failed_test_shows_its_hash_diagnostics(_):
    rc, out = summary({'name': 'py', 'result': 'FAIL', 'stdout':
                       'ok 1 - a\nnot ok 2 - b\n# Traceback\n# AssertionError: the reason\nok 3 - c\n'})
    assert rc == 1
    assert out[:3] == ['FAILED: py (FAIL) in build-x', '  not ok 2 - b', '  # Traceback'], out
    assert '  # AssertionError: the reason' in out and not any('ok 3' in line for line in out), out


@test
def a_failed_node_test_shows_its_yaml_diagnostics(_):
    stdout = ("TAP version 13\nnot ok 1 - the card\n  ---\n  duration_ms: 5.1\n  error: |-\n"
              "    The input did not match /approved/\n  code: 'ERR_ASSERTION'\n  ...\n1..1\n")
    rc, out = summary({'name': 'browser-x', 'result': 'ERROR', 'stdout': stdout})
    assert rc == 1
    assert '  not ok 1 - the card' in out, out
    assert any('did not match /approved/' in line for line in out), out
    assert not any('duration_ms' in line or '1..1' in line for line in out), out


@test
def a_failure_without_tap_lines_shows_the_end_of_its_output(_):
    rc, out = summary({'name': 'crash', 'result': 'ERROR', 'stdout': 'starting\n',
                       'stderr': '\n'.join(f'line {i}' for i in range(40)) + '\nAddressSanitizer: heap-use-after-free\n'})
    assert rc == 1
    assert '  AddressSanitizer: heap-use-after-free' in out and '  line 0' not in out, out
    assert out[-1] == '0 passed, 1 failed, 0 skipped'


if __name__ == '__main__':
    taplib.run()
