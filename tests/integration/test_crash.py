#!/usr/bin/env python3
"""End to end: a kernel killed with SIGKILL in the middle of an evolution
(test (g)), and the model usage a completed evolution records, against a real
Seed (real PostgreSQL, bwrap and git) whose model is the scripted model server
(tests/fakes/model_server.py) through provider openai-compatible. Prints TAP.

Environment: SEED_BIN (the seed CLI).
"""
import contextlib
import json
import os
import re
import signal
import subprocess

import taplib
from seedlib import (KillAt, ScriptedSeed, alive, api, evolution, kernel_memory, kernel_pid, kernel_psql, kill_kernel,
                     memory_lost, process_age, request, revive, script, seed, submit, wait_until)
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


# ---- SIGKILL in every evolution state (issue 17) ----
#
# Each case holds one evolution in one state, kills the kernel there with
# SIGKILL and starts the Seed again (the supervisor, or `seed run` when the
# supervisor gave up on a kernel that died young). Holds: a model step that
# waits (planning, mutating, reflecting), a sandboxed build or test that
# sleeps (building, testing), the owner's preview (ready), an approval
# (needs_input), and gdb breaking inside the kernel where nothing else can
# hold it (planned, running, observing, applying, complete).
# Enum values of kernel/evolution/state.h, as evo_set_state's third argument.
STATE_NUM = {s: i for i, s in enumerate(
    ['requested', 'planning', 'planned', 'mutating', 'building', 'testing', 'running', 'observing', 'reflecting',
     'ready', 'applying', 'complete', 'failed', 'needs_input', 'cancelled', 'rolled_back'])}
PLAN = {'tool_calls': [{'name': 'submit_plan', 'arguments': {
    'title': 'Fault', 'scope': 'fault', 'summary': 'A change the kernel is killed in.', 'steps': ['write a file']}}]}
HOLD = {'text': 'thinking very slowly', 'delay_ms': 600000}
MAKEFILE = 'NODE ?= node\n.PHONY: build test\nbuild:\n\t{build}\ntest: build\n\t{test}\n'


def write(path, content):
    return {'tool_calls': [{'name': 'write_file', 'arguments': {'path': path, 'content': content}}]}


FINISH = {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Done.'}}]}
REFLECT = {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing new.'}}]}


def good_steps(marker):
    return [PLAN, write('organism/NOTE.txt', marker), FINISH, REFLECT, {'text': 'Done.'}]


def held(c, evo_id, state, extra=lambda: True, timeout=600):
    return wait_until(lambda: evolution(c, evo_id)['state'] == state and extra(), timeout=timeout, interval=0.2,
                      what=f'{evo_id} to be held in {state}')


def sleeping(tag):
    return subprocess.run(['pgrep', '-f', f'sleep {tag}'], capture_output=True).returncode == 0


def generation(c):
    return wait_until(lambda: api(c, '/_seed/api/generations').json().get('current'), timeout=60,
                      what='the generations')


def git_out(c, *args):
    p = subprocess.run(['git', '-c', f'safe.directory={c.dir}', '-C', c.dir, *args], capture_output=True, text=True)
    return p.stdout.strip()


def preview(c, on):
    r = api(c, '/_seed/api/evolution-settings', 'POST', {'preview': on})
    assert r.status == 200, r.text


def recovered(c, evo_id, before, gen, ended='failed'):
    """What boot recovery must leave after evo_id's kernel was killed."""
    e = wait_until(lambda: (lambda x: x if x['state'] in ENDED else None)(evolution(c, evo_id)), timeout=120,
                   what=f'{evo_id} to end')
    assert e['state'] == ended, e
    if ended == 'failed':
        assert 'interrupted by a kernel restart' in (e.get('error') or ''), e
    assert generation(c) == gen, (generation(c), gen)
    tag = git_out(c, 'rev-parse', f'seed/gen-{gen}^{{commit}}')
    assert git_out(c, 'rev-parse', 'main') == tag, 'main is not the live generation'
    r = wait_until(lambda: (lambda x: x if x.status == 200 else None)(request(c.app + '/')), timeout=120,
                   what='the organism page')
    assert GREETING in r.text, r.text[:300]
    hexid = evo_id[4:]
    wait_until(lambda: not os.path.exists(os.path.join(c.dir, '.seed', 'worktrees', evo_id)), timeout=60,
               what='the worktree to be removed')
    assert git_out(c, 'for-each-ref', f'refs/heads/seed/{evo_id}') == '', 'the branch is left'
    assert evo_id not in git_out(c, 'worktree', 'list', '--porcelain')
    assert kernel_psql(c, f"SELECT count(*) FROM pg_database WHERE datname LIKE 'evo\\_{hexid}%'", 'postgres') == '0'
    assert kernel_psql(c, "SELECT count(*) FROM approvals WHERE state = 'pending'") == '0'
    lost = memory_lost(before, kernel_memory(c))
    assert not lost, lost
    assert not sleeping('600'), 'a sandboxed process of the killed kernel lives on'
    return e


def killed_in(c, state, steps, hold, gdb=None, ended='failed', after=None):
    """Runs an evolution of steps, holds it in state (hold(c, evo_id)), or
    with gdb=(function, condition, finish) breaks there, kills the kernel,
    starts the Seed again and checks what recovery left."""
    gen = generation(c)
    script(c, steps)
    with (KillAt(c, *gdb) if gdb else contextlib.nullcontext()) as k:
        evo_id = submit(c, f'Killed while {state}')
        if k:
            k.hit()
        else:
            hold(c, evo_id)
        assert evolution_state_in_db(c, evo_id) == state, evolution_state_in_db(c, evo_id)
        before = kernel_memory(c)
        if k:
            pid, sup = k.kill().pid, k.supervisor
        else:
            pid, sup = kill_kernel(c)
    script(c, [])
    revive(c, pid, sup)
    e = recovered(c, evo_id, before, gen if ended != 'complete' else gen + 1, ended)
    if after:
        after(c, evo_id, e)
    print(f'# killed in {state}: {evo_id} ended {e["state"]} ({e.get("error") or ""})', flush=True)
    return evo_id


def evolution_state_in_db(c, evo_id):
    return kernel_psql(c, f"SELECT state FROM evolutions WHERE id = '{evo_id}'")


@test
def killed_while_planning_with_one_requested_behind(c):
    chat_before = kernel_psql(c, 'SELECT count(*) FROM messages')
    script(c, [HOLD])
    gen = generation(c)
    first = submit(c, 'Killed while planning')
    held(c, first, 'planning', lambda: model_state(c)['index'] == 1)
    second = submit(c, 'Queued behind it')
    assert evolution(c, second)['state'] == 'requested'
    before = kernel_memory(c)
    pid, sup = kill_kernel(c)
    script(c, good_steps('queued-' + os.urandom(4).hex()))  # the queued one runs after the restart
    revive(c, pid, sup)
    recovered(c, first, before, gen)
    e = wait_until(lambda: (lambda x: x if x['state'] in ENDED else None)(evolution(c, second)), timeout=600,
                   what='the queued evolution to run')
    assert e['state'] == 'complete', e
    assert kernel_psql(c, 'SELECT count(*) FROM messages') == chat_before


@test
def killed_while_planned(c):
    killed_in(c, 'planned', [PLAN, HOLD], None, gdb=('evo_set_state', f'$rdx == {STATE_NUM["planned"]}', True))


@test
def killed_while_mutating(c):
    killed_in(c, 'mutating', [PLAN, HOLD],
              lambda c, i: held(c, i, 'mutating', lambda: model_state(c)['index'] == 2))


@test
def killed_while_building(c):
    mk = MAKEFILE.format(build='sleep 6001', test='true')
    killed_in(c, 'building', [PLAN, write('organism/Makefile', mk), FINISH],
              lambda c, i: held(c, i, 'building', lambda: sleeping('6001')))


@test
def killed_while_testing(c):
    mk = MAKEFILE.format(build='true', test='sleep 6002')
    killed_in(c, 'testing', [PLAN, write('organism/Makefile', mk), FINISH],
              lambda c, i: held(c, i, 'testing', lambda: sleeping('6002')))


@test
def killed_while_running(c):
    killed_in(c, 'running', good_steps('running'), None,
              gdb=('evo_set_state', f'$rdx == {STATE_NUM["running"]}', True))


@test
def killed_while_observing(c):
    killed_in(c, 'observing', good_steps('observing'), None,
              gdb=('evo_set_state', f'$rdx == {STATE_NUM["observing"]}', True))


@test
def killed_while_reflecting(c):
    killed_in(c, 'reflecting', [PLAN, write('organism/NOTE.txt', 'reflecting'), FINISH, HOLD],
              lambda c, i: held(c, i, 'reflecting', lambda: model_state(c)['index'] == 4))


@test
def killed_while_ready_in_the_preview(c):
    preview(c, True)
    try:
        killed_in(c, 'ready', good_steps('ready'), lambda c, i: held(c, i, 'ready'))
    finally:
        preview(c, False)


@test
def killed_while_needs_input(c):
    def approval_waits(c, i):
        held(c, i, 'needs_input', lambda: api(c, '/_seed/api/approvals').json()['approvals'])
    killed_in(c, 'needs_input', [PLAN, write('NOTES.md', 'outside the evolvable folders'), HOLD], approval_waits)
    assert not api(c, '/_seed/api/approvals').json()['approvals']
    assert kernel_psql(c, "SELECT count(*) FROM approvals WHERE state = 'expired'") != '0'


@test
def killed_while_applying_before_main_moves(c):
    killed_in(c, 'applying', good_steps('applying'), None, gdb=('repo_fast_forward_main', None, False))


@test
def killed_while_applying_between_the_fast_forward_and_the_tag(c):
    # main has moved to the new commit, no generation names it yet: recovery
    # must end it consistently (complete with its tag, or rolled back).
    gen = generation(c)
    script(c, good_steps('between'))
    with KillAt(c, 'repo_tag_generation') as k:
        evo_id = submit(c, 'Killed between the fast-forward and the tag')
        k.hit()
        assert evolution_state_in_db(c, evo_id) == 'applying'
        before = kernel_memory(c)
        k.kill()
    head = git_out(c, 'rev-parse', 'main')
    assert head != git_out(c, 'rev-parse', f'seed/gen-{gen}^{{commit}}'), 'main did not move'
    script(c, [])
    revive(c, k.pid, k.supervisor)
    e = wait_until(lambda: (lambda x: x if x['state'] in ENDED else None)(evolution(c, evo_id)), timeout=300,
                   what=f'{evo_id} to end')
    now = generation(c)
    main = git_out(c, 'rev-parse', 'main')
    tags = git_out(c, 'tag', '--points-at', main)
    print(f'# after recovery: {e["state"]} ({e.get("error")}), generation {now}, tags on main: {tags!r}', flush=True)
    assert tags, 'main is a commit that no generation names'
    if e['state'] == 'complete':
        assert now == gen + 1 and main == head and tags == f'seed/gen-{gen + 1}', (now, tags)
    else:
        assert e['state'] in ('failed', 'rolled_back'), e
        assert now == gen and main == git_out(c, 'rev-parse', f'seed/gen-{gen}^{{commit}}'), (now, main)
    recovered(c, evo_id, before, now, e['state'])


@test
def killed_while_applying_after_the_tag(c):
    # main is the new generation, tagged; the organism was not restarted on
    # it yet: recovery completes the apply (the live data's migrations run).
    e_id = killed_in(c, 'applying', good_steps('after-tag'), None, gdb=('evo_owner_live_workspace', None, False),
                     ended='complete')
    assert any('completed when it started again' in json.dumps(x.get('data')) for x in evolution(c, e_id)['events'])


@test
def killed_once_complete_before_its_cleanup(c):
    killed_in(c, 'complete', good_steps('complete'), None,
              gdb=('evo_set_state', f'$rdx == {STATE_NUM["complete"]}', True), ended='complete')


@test
def a_new_evolution_succeeds_after_every_kill(c):
    gen = generation(c)
    script(c, good_steps('after-' + os.urandom(4).hex()))
    evo_id = submit(c, 'After the faults')
    e = wait_until(lambda: (lambda x: x if x['state'] in ENDED else None)(evolution(c, evo_id)), timeout=600,
                   what='the evolution to end')
    assert e['state'] == 'complete', e
    assert generation(c) == gen + 1


if __name__ == '__main__':
    taplib.run(setup, teardown)
