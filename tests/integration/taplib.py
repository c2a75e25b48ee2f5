"""A tiny TAP producer for the Python integration tests (stdlib only).

Each test is a function registered with @test; run() prints a TAP plan and
one ok / not ok line per test, with the failure's traceback as comments.
A test raising Skip is reported as '# SKIP reason'.
"""
import os
import sys
import traceback

_tests = []


class Skip(Exception):
    pass


def test(fn):
    _tests.append(fn)
    return fn


def run(setup=None, teardown=None):
    # TAP_ONLY=name,name runs only those tests (while working on them).
    only = [n for n in os.environ.get('TAP_ONLY', '').split(',') if n]
    if only:
        _tests[:] = [fn for fn in _tests if fn.__name__ in only]
    print(f"1..{len(_tests)}", flush=True)
    failed = 0
    ctx = None
    try:
        ctx = setup() if setup else None
    except Exception:
        for i, fn in enumerate(_tests, 1):
            print(f"not ok {i} - {fn.__name__} (setup failed)")
        for line in traceback.format_exc().splitlines():
            print(f"# {line}")
        if teardown:
            teardown(ctx)
        sys.exit(1)
    try:
        for i, fn in enumerate(_tests, 1):
            try:
                fn(ctx)
                print(f"ok {i} - {fn.__name__}", flush=True)
            except Skip as e:
                print(f"ok {i} - {fn.__name__} # SKIP {e}", flush=True)
            except Exception:
                failed += 1
                print(f"not ok {i} - {fn.__name__}", flush=True)
                for line in traceback.format_exc().splitlines():
                    print(f"# {line}", flush=True)
    finally:
        if teardown:
            teardown(ctx)
    sys.exit(1 if failed else 0)
