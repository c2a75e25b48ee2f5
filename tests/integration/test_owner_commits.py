#!/usr/bin/env python3
"""End to end: the owner's own commits on main (issue 11). A Seed is a git
repository that is the owner's: a commit they make on main on top of the live
generation is verified by the kernel like an evolution at the next start and
becomes a generation of its own; one that does not build leaves the live
generation serving while `seed status`, the status API and the control plane
say why and how to revert. Real CLI, kernel, PostgreSQL, bwrap and git (the
owner's commits are made with the git CLI, as the Seed's account when we are
root); the model is the scripted model server. Prints TAP.

Environment: SEED_BIN (the seed CLI).
"""
import os
import re
import subprocess

import taplib
from seedlib import ScriptedSeed, api, evolution, kernel_pid, request, script, seed, submit, wait_until
from taplib import Skip, test

FINAL = ('complete', 'failed', 'cancelled', 'rolled_back')


def setup():
    return ScriptedSeed('seed-owner-', 'owner')


def teardown(c):
    if c is not None:
        c.close()


def git(c, *args):
    """git in the Seed's folder as the owner: as the Seed's account when we
    are root (what `sudo -u seed git -C <dir> …` does)."""
    cmd = ['git', '-C', c.dir, '-c', 'user.name=Owner', '-c', 'user.email=owner@example.org', *args]
    if os.geteuid() == 0:
        cmd = ['runuser', '-u', 'seed', '--', *cmd]
    env = dict(os.environ, HOME=c.tmp, GIT_CONFIG_NOSYSTEM='1')
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"git {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout.strip()


def edit(c, rel, fn):
    """Rewrites a file of the Seed as its account would (keeps owner and mode)."""
    path = os.path.join(c.dir, rel)
    with open(path) as f:
        text = f.read()
    with open(path, 'w') as f:
        f.write(fn(text))


def restart(c, addr=True):
    """seed stop, then seed run --detach (with the Seed's own port, or as seed.yaml says)."""
    seed('stop', '--dir', c.dir, timeout=120)
    p = seed('run', '--detach', *(['--addr', f'127.0.0.1:{c.port}'] if addr else []), cwd=c.dir, timeout=900)
    wait_until(lambda: request(c.base + '/_seed/healthz').status == 200, timeout=180, what='the kernel')
    return p


def status(c):
    r = api(c, '/_seed/api/status')
    assert r.status == 200, r.text
    return r.json()


def owner_jobs(c):
    r = api(c, '/_seed/api/evolutions')
    assert r.status == 200, r.text
    return [e for e in r.json()['evolutions'] if e['kind'] == 'owner']


def ended_owner_job(c, known):
    """The newest owner job not in known, once it ended."""
    new = [e for e in owner_jobs(c) if e['id'] not in known]
    return new[0] if new and new[0]['state'] in FINAL else None


def generations(c):
    r = api(c, '/_seed/api/generations')
    assert r.status == 200, r.text
    return r.json()


def app_answers(c):
    r = request(c.app + '/')
    return r if r.status == 200 else None


def happy_script(marker):
    return [
        {'tool_calls': [{'name': 'submit_plan', 'arguments': {
            'title': 'Leave a note', 'scope': 'note', 'summary': 'Write a note into the organism.',
            'steps': ['write organism/NOTE.txt']}}]},
        {'tool_calls': [{'name': 'write_file', 'arguments': {'path': 'organism/NOTE.txt', 'content': marker + '\n'}}]},
        {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Wrote organism/NOTE.txt.'}}]},
        {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing new learned.'}}]},
        {'text': 'Done.'},
    ]


def wait_evolution(c, evo_id, timeout=600):
    return wait_until(lambda: (lambda e: e if e['state'] in FINAL else None)(evolution(c, evo_id)),
                      timeout=timeout, what=f'evolution {evo_id} to end')


@test
def owner_commit_becomes_a_generation(c):
    # The owner picks a model the way a git user would: edit seed.yaml, commit.
    edit(c, 'seed.yaml', lambda t: t + '# the owner chose this model\n')
    git(c, 'add', 'seed.yaml')
    git(c, 'commit', '-q', '-m', 'Pick a model')
    mine = git(c, 'rev-parse', 'HEAD')
    known = {e['id'] for e in owner_jobs(c)}
    restart(c)
    pid = kernel_pid(c)
    # Verified like an evolution, then recorded; seed.yaml is the kernel's,
    # so the kernel restarts into it (exit 75) once it is live.
    job = wait_until(lambda: ended_owner_job(c, known), timeout=900, what='the owner job to end')
    assert job['state'] == 'complete', job
    assert job['intent'] == 'owner: Pick a model', job
    e = evolution(c, job['id'])
    checks = [ev['data']['name'] for ev in e['events'] if ev['kind'] == 'check']
    assert checks[:6] == ['config', 'build', 'migrate', 'test', 'migrate', 'launch'], checks
    assert e['to_generation'] == 2 and e['from_generation'] == 1, e
    wait_until(lambda: kernel_pid(c) != pid and request(c.base + '/_seed/healthz').status == 200, timeout=600,
               what='the kernel to restart into its changed source')

    g = generations(c)
    assert g['current'] == 2, g
    top = g['generations'][0]
    assert top['number'] == 2 and top['owner'] is True and top['owner_commit'] == mine, top
    assert top['summary'] == 'owner: Pick a model', top
    assert g['generations'][1]['owner'] is False
    p = seed('generations', '--dir', c.dir)
    assert re.search(r'^\* 2 .*owner: Pick a model  \[yours: ' + mine[:10] + r'\]$', p.stdout, re.M), p.stdout
    # In git: the owner's commit stays; the generation is a child with its tree and trailers.
    gen = git(c, 'rev-parse', 'seed/gen-2^{commit}')
    assert git(c, 'rev-parse', 'HEAD') == gen
    assert git(c, 'rev-parse', 'seed/gen-2^') == mine
    assert git(c, 'rev-parse', 'seed/gen-2^{tree}') == git(c, 'rev-parse', mine + '^{tree}')
    trailers = git(c, 'log', '-1', '--format=%(trailers:only,unfold)', gen)
    assert f"Evolution: {job['id']}" in trailers and 'Generation: 1 -> 2' in trailers, trailers
    assert f'Owner-Commit: {mine}' in trailers, trailers
    assert 'owner_change' not in status(c)
    assert wait_until(lambda: app_answers(c), timeout=180, what='the app')
    c.owner_ok = True

    # The next evolution succeeds on top of the owner's generation.
    script(c, happy_script('on-top-' + os.urandom(4).hex()))
    evo = submit(c, 'Leave a note')
    e = wait_evolution(c, evo)
    assert e['state'] == 'complete', e
    assert e['from_generation'] == 2 and e['to_generation'] == 3, e
    assert generations(c)['current'] == 3


@test
def broken_commit_keeps_the_live_generation_serving(c):
    if not getattr(c, 'owner_ok', False):
        raise Skip('the first owner commit did not become a generation')
    live = generations(c)['current']
    marker = 'owner-broke-it-' + os.urandom(4).hex()
    edit(c, 'organism/bin/server', lambda t: t + f'\nthis is not javascript ( // {marker}\n')
    git(c, 'commit', '-q', '-am', 'Break the build')
    mine = git(c, 'rev-parse', 'HEAD')
    known = {e['id'] for e in owner_jobs(c)}
    restart(c)
    # The live generation serves from its export while the commit is verified.
    assert wait_until(lambda: app_answers(c), timeout=300, what='the app of the live generation')
    job = wait_until(lambda: ended_owner_job(c, known), timeout=900, what='the owner job to end')
    assert job['state'] == 'failed', job
    assert 'the build failed' in job['error'] and marker in job['error'], job['error']

    st = status(c)
    oc = st.get('owner_change')
    assert oc and oc['state'] == 'failed' and oc['commit'] == mine and oc['subject'] == 'Break the build', st
    assert oc['generation'] == live and st['generation'] == live, st
    assert oc['error'].startswith('the build failed:\n'), oc
    revert = f'git -C {c.dir} reset --hard seed/gen-{live}'
    assert revert in oc['fix'], oc['fix']
    if os.geteuid() == 0:
        assert 'sudo -u seed ' + revert in oc['fix'], oc['fix']
    assert oc['text'].startswith(f"Your commit {mine[:7]} 'Break the build' was not applied: the build failed:"), oc
    assert f'Generation {live} keeps serving.' in oc['text'] and oc['text'].endswith(oc['fix']), oc['text']
    out = seed('status', '--dir', c.dir).stdout
    assert oc['text'] in out, out
    assert app_answers(c), 'the live generation stopped answering'
    assert st['organism']['state'] == 'running', st

    # An evolution now fails at once, saying the same, without verifying again.
    evo = submit(c, 'Anything')
    e = wait_evolution(c, evo, timeout=120)
    assert e['state'] == 'failed' and 'was not applied: the build failed' in e['error'], e
    assert [x['id'] for x in owner_jobs(c) if x['id'] not in known] == [job['id']]

    # Revert as told; the next start is clean and the app still answers.
    git(c, 'reset', '-q', '--hard', f'seed/gen-{live}')
    assert 'owner_change' not in status(c)
    known = {e['id'] for e in owner_jobs(c)}
    restart(c)
    st = status(c)
    assert 'owner_change' not in st and st['generation'] == live, st
    assert wait_until(lambda: app_answers(c), timeout=300, what='the app after the revert')
    assert [e for e in owner_jobs(c) if e['id'] not in known] == []
    assert 'Your commit' not in seed('status', '--dir', c.dir).stdout


@test
def broken_seed_yaml_does_not_keep_the_seed_from_starting(c):
    if not getattr(c, 'owner_ok', False):
        raise Skip('the first owner commit did not become a generation')
    live = generations(c)['current']
    edit(c, 'seed.yaml', lambda t: t + 'modle: {name: typo}\n')
    git(c, 'commit', '-q', '-am', 'Pick a model, badly')
    known = {e['id'] for e in owner_jobs(c)}
    # Without --addr, seed run reads seed.yaml too: the live generation's serves.
    p = restart(c, addr=False)
    assert 'modle' in p.stderr, p.stderr
    job = wait_until(lambda: ended_owner_job(c, known), timeout=600, what='the owner job to end')
    assert job['state'] == 'failed', job
    oc = status(c).get('owner_change')
    assert oc and oc['state'] == 'failed', oc
    assert oc['error'].startswith('seed.yaml does not load: ') and 'modle' in oc['error'], oc
    assert f'Generation {live} keeps serving.' in oc['text'], oc
    assert wait_until(lambda: app_answers(c), timeout=300, what='the app of the live generation')
    git(c, 'reset', '-q', '--hard', f'seed/gen-{live}')
    restart(c)
    assert 'owner_change' not in status(c)


@test
def diverged_main_is_explained(c):
    live = generations(c)['current']
    if live < 2:
        raise Skip('needs two generations')
    # History rewritten under the Seed: main no longer contains the live generation.
    git(c, 'reset', '-q', '--hard', f'seed/gen-{live - 1}')
    try:
        oc = status(c).get('owner_change')
        assert oc and oc['state'] == 'diverged', oc
        assert f'does not contain the live generation {live}' in oc['text'], oc
        assert f'reset --hard seed/gen-{live}' in oc['fix'], oc
        evo = submit(c, 'Anything')
        e = wait_evolution(c, evo, timeout=120)
        assert e['state'] == 'failed' and 'does not contain the live generation' in e['error'], e
    finally:
        git(c, 'reset', '-q', '--hard', f'seed/gen-{live}')
    assert 'owner_change' not in status(c)


if __name__ == '__main__':
    taplib.run(setup, teardown)
