#!/usr/bin/env python3
"""Totals every TAP subtest of a meson test run.

usage: tap-summary.py [--fail WHAT]... BUILD/meson-logs/testlog.json...

Prints, for each failed test, its failed TAP lines with the diagnostics after
them ('#' lines, or node:test's YAML block) (or, when it printed none, the end of its output), bounded, so the tail of
a CI log says what failed; then "N passed, N failed, N skipped" over the
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


def why(entry, limit=30):
    """The failed TAP lines of a test with the '#' lines after each, or the
    end of its output: at most limit lines."""
    lines = (entry.get('stdout') or '').splitlines()
    out = []
    for i, line in enumerate(lines):
        m = NOT_OK.match(line.strip())
        if not m or re.search(r'#\s*(TODO|SKIP)', m.group(1), re.I):
            continue
        out.append(line.strip())
        notes, in_yaml = [], False
        for after in lines[i + 1:]:
            text = after.strip()
            if in_yaml:  # node:test's diagnostics: a YAML block, '---' to '...'
                if text == '...':
                    break
                if not text.startswith(('duration_ms:', 'type:')):
                    notes.append(after.rstrip())
            elif text == '---':
                in_yaml = True
            elif not text.startswith('#'):
                break
            else:
                notes.append(after.rstrip())
        # A traceback's last lines say the most; an error's first lines do.
        out.extend(notes[:12] if in_yaml else notes[-12:])
    if not out:
        out = (lines + (entry.get('stderr') or '').splitlines())[-15:]
    if len(out) > limit:
        out = out[:limit - 1] + [f'... ({len(out) - limit + 1} more lines)']
    return [line[:300] for line in out]


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
                    for line in why(entry):
                        print(f"  {line}")
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    sys.exit(1 if totals[1] else 0)


if __name__ == '__main__':
    main()
