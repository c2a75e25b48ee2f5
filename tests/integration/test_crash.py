#!/usr/bin/env python3
"""End to end: a kernel killed with SIGKILL in the middle of an evolution
(test (g)), and the model usage a completed evolution records, against a real
Seed (real PostgreSQL, bwrap and git) whose model is the scripted model server
(tests/fakes/model_server.py) through provider openai-compatible. Prints TAP.

Environment: SEED_BIN (the seed CLI).
"""
import json
import os
import re
import signal
import subprocess

import taplib
from seedlib import ScriptedSeed, alive, api, evolution, kernel_pid, process_age, request, script, seed, submit, wait_until
from taplib import test

GREETING = "I don't have a purpose yet"
ENDED = ('complete', 'failed', 'cancelled', 'rolled_back')
GOOD_AFTER_S = 60  # seed run's supervisor gives up on a kernel that dies sooner than this


def setup():
    return ScriptedSeed('seed-crash-', 'crash')


def teardown(c):
    if c is not None:
        c.close()


def model_state(c):
    return request(c.model_base + '/_state').json()


def psql(c, sql):
    pw = open(os.path.join(c.dir, '.seed/secrets/postgres-password')).read().strip()
    p = subprocess.run(['psql', '-h', os.path.join(c.dir, '.seed/run'), '-U', 'postgres', '-d', 'seed_kernel',
                        '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', sql],
                       capture_output=True, text=True, env={**os.environ, 'PGPASSWORD': pw}, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@test
def sigkill_mid_evolution_fails_it_and_generation_1_serves(c):
    # The supervisor restarts a crashed kernel only when it ran long enough to
    # count as good (it gives up on one dying within 60 s of its start).
    pid = kernel_pid(c)
    wait_until(lambda: os.path.isdir(os.path.join(c.dir, '.seed', 'kernel-good')) and
               process_age(pid) > GOOD_AFTER_S + 2, timeout=GOOD_AFTER_S + 120, interval=1,
               what='the kernel to count as good')
    script(c, [{'text': 'thinking very slowly', 'delay_ms': 600000}])
    evo_id = submit(c, 'Crash in the middle')
    wait_until(lambda: evolution(c, evo_id)['state'] == 'planning' and model_state(c)['index'] == 1,
               timeout=300, what='the evolution to wait on the model while planning')
    worktree = os.path.join(c.dir, '.seed', 'worktrees', evo_id)
    assert os.path.isdir(worktree), os.listdir(os.path.join(c.dir, '.seed', 'worktrees'))
    assert evolution(c, evo_id)['state'] == 'planning'

    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), timeout=30, what='the kernel to die')

    def restarted():
        try:
            p = kernel_pid(c)
        except (OSError, ValueError, KeyError):
            return None
        if p == pid or not alive(p):
            return None
        return p if request(c.base + '/_seed/healthz', timeout=5).status == 200 else None
    try:
        new_pid = wait_until(restarted, timeout=180, what='the supervisor to restart the kernel')
        print(f'# the supervisor restarted the kernel (pid {pid} -> {new_pid})', flush=True)
    except AssertionError:
        # the supervisor gave up: start the Seed again, as its owner would
        print('# the supervisor did not restart the kernel; starting the Seed again', flush=True)
        seed('run', '--detach', '--addr', f'127.0.0.1:{c.port}', cwd=c.dir, timeout=900)
        new_pid = wait_until(restarted, timeout=180, what='the kernel after seed run')
    assert new_pid != pid

    e = wait_until(lambda: (lambda x: x if x['state'] in ENDED else None)(evolution(c, evo_id)), timeout=60,
                   what='the interrupted evolution to end')
    assert e['state'] == 'failed', e
    assert 'interrupted by a kernel restart' in (e.get('error') or ''), e
    g = api(c, '/_seed/api/generations').json()
    assert g['current'] == 1, g
    r = wait_until(lambda: (lambda x: x if x.status == 200 else None)(request(c.app + '/')), timeout=120,
                   what='the organism page')
    assert GREETING in r.text, r.text[:300]
    wait_until(lambda: not os.path.exists(worktree), timeout=60, what='the worktree to be removed')
    left = [n for n in os.listdir(os.path.join(c.dir, '.seed', 'worktrees')) if n.startswith('evo_')] \
        if os.path.isdir(os.path.join(c.dir, '.seed', 'worktrees')) else []
    assert left == [], left
    wt = subprocess.run(['git', '-C', c.dir, 'worktree', 'list', '--porcelain'], capture_output=True, text=True)
    assert evo_id not in wt.stdout, wt.stdout


@test
def completed_evolution_records_model_usage(c):
    assert psql(c, "SELECT count(*) FROM model_usage WHERE purpose = 'evolution'") == '0'
    marker = 'note-' + os.urandom(6).hex()
    script(c, [
        {'tool_calls': [{'name': 'submit_plan', 'arguments': {
            'title': 'Leave a note', 'scope': 'note', 'summary': 'Write a note into the organism.',
            'steps': ['write organism/NOTE.txt']}}], 'usage': {'input_tokens': 1234, 'output_tokens': 56}},
        {'tool_calls': [{'name': 'write_file', 'arguments': {'path': 'organism/NOTE.txt', 'content': marker}}]},
        {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Wrote organism/NOTE.txt.'}}]},
        {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing new learned.'}}]},
        {'text': 'Done.'},
    ])
    evo_id = submit(c, 'Leave a note')
    e = wait_until(lambda: (lambda x: x if x['state'] in ENDED else None)(evolution(c, evo_id)), timeout=900,
                   what='the evolution to end')
    assert e['state'] == 'complete', e
    assert re.match(r'^evo_[0-9a-f]{16}$', evo_id), evo_id
    rows = psql(c, "SELECT purpose, reference, model, input_tokens, output_tokens FROM model_usage "
                   f"WHERE purpose = 'evolution' AND reference = '{evo_id}' ORDER BY id").splitlines()
    assert rows, 'no model_usage row with purpose evolution for ' + evo_id
    assert rows[0] == f'evolution|{evo_id}|scripted|1234|56', rows
    assert len(rows) >= 3, rows  # plan and mutate requests; the reflection is accounted on its own
    assert psql(c, f"SELECT count(*) FROM model_usage WHERE purpose = 'reflection' AND reference = '{evo_id}'") \
        != '0'


if __name__ == '__main__':
    taplib.run(setup, teardown)
