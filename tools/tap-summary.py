#!/usr/bin/env python3
"""Totals every TAP subtest of a meson test run.

usage: tap-summary.py [--fail WHAT]... BUILD/meson-logs/testlog.json...

Prints one line per failed test, then "N passed, N failed, N skipped" over the
TAP results of every test of every log given (scripts/test gives the plain
build's and the sanitizer build's; a test that printed no TAP result counts as
one result of its own status). Each --fail WHAT counts one failure more (a
build that did not build). Exits 1 if anything failed.
"""
import json
import re
import sys

OK = re.compile(r'^ok\b(.*)$')
NOT_OK = re.compile(r'^not ok\b(.*)$')


def count(entry):
    passed = failed = skipped = 0
    for line in (entry.get('stdout') or '').splitlines():
        line = line.strip()
        m = NOT_OK.match(line)
        if m:
            if re.search(r'#\s*(TODO|SKIP)', m.group(1), re.I):
                skipped += 1  # cmocka's skip() prints 'not ok N # SKIP'
            else:
                failed += 1
            continue
        m = OK.match(line)
        if m:
            if re.search(r'#\s*SKIP', m.group(1), re.I):
                skipped += 1
            else:
                passed += 1
    result = entry.get('result')
    if passed + failed + skipped == 0:
        if result in ('OK', 'EXPECTEDFAIL'):
            passed = 1
        elif result == 'SKIP':
            skipped = 1
        else:
            failed = 1
    elif result not in ('OK', 'EXPECTEDFAIL', 'SKIP') and failed == 0:
        failed = 1  # crashed or timed out after its last TAP line
    return passed, failed, skipped


def main():
    args = sys.argv[1:]
    totals = [0, 0, 0]
    logs = []
    while args:
        if args[0] == '--fail' and len(args) > 1:
            print(f"FAILED: {args[1]}")
            totals[1] += 1
            args = args[2:]
        else:
            logs.append(args.pop(0))
    if not logs:
        sys.exit(__doc__)
    for path in logs:
        # The build directory names the run: build-test/meson-logs/testlog.json
        where = path.split('/meson-logs/')[0].rstrip('/').split('/')[-1]
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                entry = json.loads(line)
                p, fl, s = count(entry)
                totals[0] += p
                totals[1] += fl
                totals[2] += s
                if fl:
                    print(f"FAILED: {entry.get('name')} ({entry.get('result')}) in {where}")
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    sys.exit(1 if totals[1] else 0)


if __name__ == '__main__':
    main()
