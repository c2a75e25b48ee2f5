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
import shutil
import signal
import subprocess
import sys
import tempfile

import taplib
from seedlib import free_port, request, seed, wait_until
from taplib import Skip, test

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_SERVER = os.path.join(HERE, '..', 'fakes', 'model_server.py')
GREETING = "I don't have a purpose yet"
ENDED = ('complete', 'failed', 'cancelled', 'rolled_back')
GOOD_AFTER_S = 60  # seed run's supervisor gives up on a kernel that dies sooner than this


class Ctx:
    pass


def start_model_server(c):
    port_file = os.path.join(c.tmp, 'model-port')
    c.model_log = open(os.path.join(c.tmp, 'model-server.log'), 'w')
    c.model = subprocess.Popen([sys.executable, MODEL_SERVER, '--port', '0', '--port-file', port_file],
                               stdout=c.model_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    c.model_port = int(wait_until(lambda: open(port_file).read().strip() if os.path.exists(port_file) else None,
                                  timeout=30, what='the model server port'))
    c.model_base = f'http://127.0.0.1:{c.model_port}'
    wait_until(lambda: request(c.model_base + '/_health').status == 200, timeout=30, what='the model server')


def script(c, steps):
    r = request(c.model_base + '/_script', method='POST', body=json.dumps(steps),
                headers={'Content-Type': 'application/json'})
    assert r.status == 200, r.text


def model_state(c):
    return request(c.model_base + '/_state').json()


def setup():
    c = Ctx()
    c.tmp = tempfile.mkdtemp(prefix='seed-crash-')
    os.chmod(c.tmp, 0o755)  # the unprivileged account must reach it when we are root
    start_model_server(c)
    c.port = free_port()
    c.dir = os.path.join(c.tmp, 'crash')
    seed('new', 'crash', '--no-run', '--addr', f'127.0.0.1:{c.port}', cwd=c.tmp, timeout=900)
    path = os.path.join(c.dir, 'seed.yaml')
    text = open(path).read()
    model = (f'model:\n  provider: openai-compatible\n  name: scripted\n'
             f'  base_url: http://127.0.0.1:{c.model_port}/v1\n  api_key_env: ""\n  max_tokens: 16000\n')
    text, n = re.subn(r'(?m)^model:\n(?:[ \t]+.*\n)+', model, text)
    assert n == 1, text
    with open(path, 'w') as f:
        f.write(text)
    seed('run', '--detach', '--addr', f'127.0.0.1:{c.port}', cwd=c.dir, timeout=900)
    c.base = f'http://127.0.0.1:{c.port}'
    wait_until(lambda: request(c.base + '/_seed/healthz').status == 200, timeout=120, what='the kernel')
    return c


def teardown(c):
    if c is None:
        return
    if getattr(c, 'dir', None):
        seed('stop', '--dir', c.dir, check=False, timeout=120)
    if getattr(c, 'model', None):
        c.model.terminate()
        try:
            c.model.wait(timeout=10)
        except subprocess.TimeoutExpired:
            c.model.kill()
        c.model_log.close()
    shutil.rmtree(c.tmp, ignore_errors=True)


def token(c):
    return open(os.path.join(c.dir, '.seed', 'control-token')).read().strip()


def api(c, path, method='GET', body=None):
    h = {'Authorization': 'Bearer ' + token(c)}
    if body is not None:
        h['Content-Type'] = 'application/json'
        body = json.dumps(body)
    return request(c.base + path, method=method, headers=h, body=body, timeout=60)


def evolution(c, evo_id):
    r = api(c, f'/_seed/api/evolutions/{evo_id}')
    assert r.status == 200, r.text
    return r.json()


def submit(c, intent):
    r = api(c, '/_seed/api/evolutions', 'POST', {'intent': intent})
    if r.status in (501, 503):
        raise Skip(f'the orchestrator is not available (HTTP {r.status}: {r.text.strip()})')
    assert r.status == 202, (r.status, r.text)
    return r.json()['id']


def kernel_pid(c):
    return int(json.load(open(os.path.join(c.dir, '.seed', 'kernel.json')))['pid'])


def process_age(pid):
    """Seconds since the process started (from /proc)."""
    with open(f'/proc/{pid}/stat') as f:
        start_ticks = int(f.read().rsplit(')', 1)[1].split()[19])
    with open('/proc/uptime') as f:
        uptime = float(f.read().split()[0])
    return uptime - start_ticks / os.sysconf('SC_CLK_TCK')


def alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


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
    r = wait_until(lambda: (lambda x: x if x.status == 200 else None)(request(c.base + '/')), timeout=120,
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
