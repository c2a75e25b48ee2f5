#!/usr/bin/env python3
"""The README's "Using a Seed" block, run as written: every line verbatim, in
one shell session (a `cd` carries over), after the quickstart's install, and
each command's effect checked. Prints TAP.

What stands in for the quickstart: `meson install` of this build into a
temporary --destdir, whose bin/ is put first on PATH (so `seed` is the
installed command and `seed new` plants from the installed source). The
installed source's seed.yaml (what `seed new` copies) gets a free port and,
as its model, the scripted model server (tests/fakes/model_server.py) with
OPENROUTER_API_KEY as its key variable: the block itself is not edited, and
its `seed evolve` really evolves. The block is written for root (`cd
/srv/seeds`): the shell runs in a mount namespace of its own where /srv is an
empty tmpfs, so the machine's /srv is never touched.

Environment: SEED_BUILD_ROOT (a configured build dir).
"""
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time

import taplib
from seedlib import Browser, ModelServer, free_port, link_from, request, script, wait_until
from taplib import Skip, test

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'README.md')
KEY = 'sk-readme-' + secrets.token_hex(8)
LINE_TIMEOUT = 900


def readme_block(heading='## Using a Seed'):
    """The first ```sh block after the heading: its lines, in order."""
    text = open(README).read()
    at = text.index(heading + '\n')
    m = re.search(r'^```sh\n(.*?)^```', text[at:], re.S | re.M)
    assert m, f'no sh block under {heading!r}'
    return [ln for ln in m.group(1).splitlines() if ln.strip() and not ln.lstrip().startswith('#')]


def evolution_script(intent):
    return [
        {'match': intent, 'tool_calls': [{'name': 'submit_plan', 'arguments': {
            'title': 'Add a guestbook', 'scope': 'guestbook', 'summary': 'A guestbook page for visitors.',
            'steps': ['write organism/guestbook.txt']}}]},
        {'tool_calls': [{'name': 'write_file', 'arguments': {'path': 'organism/guestbook.txt',
                                                               'content': 'Sign here.\n'}}]},
        {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Wrote organism/guestbook.txt.'}}]},
        {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing new learned.'}}]},
        {'text': 'Done.'},
    ]


class Session:
    """One sh, in a mount namespace of its own with an empty /srv, fed the
    block's lines one at a time; each line's output goes to a file."""

    def __init__(self, tmp, env):
        self.tmp, self.n = tmp, 0
        self.proc = subprocess.Popen(
            ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c',
             'mount -t tmpfs -o mode=0755 tmpfs /srv && mkdir -m 0755 /srv/seeds && exec sh'],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            cwd=tmp)

    def run(self, line, timeout=LINE_TIMEOUT):
        """Runs line verbatim; returns (exit code, its output)."""
        self.n += 1
        out = os.path.join(self.tmp, f'line-{self.n}.out')
        self.proc.stdin.write(f'{{\n{line}\n}} >{out} 2>&1 </dev/null\necho "__rc__ {self.n} $?"\n')
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.proc.stdout.readline()
            if not got:
                raise AssertionError(f'the shell ended during: {line}')
            m = re.match(rf'__rc__ {self.n} (\d+)$', got.strip())
            if m:
                return int(m.group(1)), open(out).read()
        raise AssertionError(f'timed out: {line}')

    def path(self, p):
        """A path as the session's mount namespace sees it."""
        return f'/proc/{self.proc.pid}/root{p}'

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Ctx:
    pass


def setup():
    c = Ctx()
    c.tmp = None
    if os.geteuid() != 0:
        c.skip = 'the block is written for root (cd /srv/seeds); run the suite as root'
        return c
    c.skip = None
    c.tmp = tempfile.mkdtemp(prefix='seed-readme-')
    os.chmod(c.tmp, 0o755)  # the Seed's account reads the installed source
    c.lines = readme_block()
    c.results = {}
    c.session = c.model = c.supervisor = None
    # The quickstart's install, into a temporary destdir.
    dest = os.path.join(c.tmp, 'dest')
    p = subprocess.run(['meson', 'install', '-C', os.environ['SEED_BUILD_ROOT'], '--no-rebuild', '--quiet',
                        '--destdir', dest], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    bins = [d for d, _, files in os.walk(dest) if 'seed' in files and d.endswith('/bin')]
    assert bins, 'no installed bin/seed'
    c.bin = bins[0]
    template = os.path.join(os.path.dirname(c.bin), 'share/seed/source/seed.yaml')
    c.port = free_port()
    c.model = ModelServer(c.tmp)
    c.model.point(template, api_key_env='OPENROUTER_API_KEY')
    text = open(template).read()
    text, n = re.subn(r'(?m)^  addr: .*$', f'  addr: 127.0.0.1:{c.port}', text)
    assert n == 1, text
    with open(template, 'w') as f:
        f.write(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith('SEED_')}
    # On the host, as every suite but the container one (tests/integration/test_container.py).
    env.update(PATH=c.bin + ':' + os.environ.get('PATH', '/usr/bin:/bin'), OPENROUTER_API_KEY=KEY,
               SEED_CONTAINER_ENGINE='none')
    c.session = Session(c.tmp, env)
    c.base = f'http://seed.localhost:{c.port}'
    c.seed_dir = '/srv/seeds/tasks'
    return c


def teardown(c):
    if c is None or c.tmp is None:
        return
    if c.session and c.session.proc.poll() is None:
        try:
            c.session.run(f'seed stop --dir {c.seed_dir}', timeout=120)
        except AssertionError:
            pass
        c.session.close()
    if c.supervisor:  # the shell is gone; its namespace lives on in the Seed's processes
        try:
            os.kill(c.supervisor, signal.SIGTERM)
            wait_until(lambda: not os.path.exists(f'/proc/{c.supervisor}'), timeout=60, what='the supervisor')
        except (OSError, AssertionError):
            pass
    if c.model:
        c.model.close()
    shutil.rmtree(c.tmp, ignore_errors=True)


def need(c):
    if c.skip:
        raise Skip(c.skip)


def kernel_json(c):
    return json.load(open(c.session.path(c.seed_dir + '/.seed/kernel.json')))


def probe(c, cmd):
    """A command of the test's own in the block's session (not a README line)."""
    return c.session.run(cmd, timeout=120)


def generation_of(out):
    m = re.search(r'Result: complete: generation (\d+) is live\.', out)
    assert m, out
    return int(m.group(1))


# ---- the checks: one per kind of line ----------------------------------------

def check_cd(c, line, rc, out):
    assert rc == 0, out
    want = '/srv/seeds' if line.split()[1] == '/srv/seeds' else c.seed_dir
    assert probe(c, 'pwd')[1].strip() == want


def check_new(c, line, rc, out):
    assert rc == 0, out
    assert "Planted Seed 'tasks' in /srv/seeds/tasks (generation 1)." in out, out
    assert f'the control plane at {c.base}/_seed/' in out, out
    b = Browser(c.base)
    assert b.sign_in(link_from(out)).status == 200
    # The block's `seed evolve` follows the evolution to its end: without the
    # preview, which would wait for the owner to try it in a browser.
    b.load_page()
    assert b.api('/_seed/api/evolution-settings', 'POST', {'preview': False}).status == 200
    c.supervisor = int(open(c.session.path(c.seed_dir + '/.seed/supervisor.pid')).read())
    c.generation = 1


def check_status(c, line, rc, out):
    assert rc == 0, out
    assert 'Running:     yes' in out, out
    assert f'Generation:  {c.generation}' in out, out
    assert f'Control:     {c.base}/_seed/' in out, out


def check_login(c, line, rc, out):
    assert rc == 0, out
    assert out.strip() == link_from(out), out  # --print: the link alone
    assert Browser(c.base).sign_in(out.strip()).status == 200


def check_restart(c, line, rc, out):
    before = c.kernel_pid
    assert rc == 0, out
    assert 'Restarting the Seed' in out and 'OPENROUTER_API_KEY' in out, out
    assert KEY not in out
    assert kernel_json(c)['pid'] != before
    assert Browser(c.base).sign_in(link_from(out)).status == 200


def check_evolve(c, line, rc, out):
    assert rc == 0, out
    assert 'plan: Add a guestbook' in out, out
    c.generation = generation_of(out)
    assert c.generation == 2, out
    reqs = request(c.model.base + '/_requests').json()
    assert reqs, 'the model was never asked'
    assert os.path.exists(c.session.path(c.seed_dir + '/organism/guestbook.txt'))


def check_generations(c, line, rc, out):
    assert rc == 0, out
    assert re.search(rf'^\* {c.generation} ', out, re.M), out
    for g in range(1, c.generation):
        assert re.search(rf'^  {g} ', out, re.M), out


def check_rollback(c, line, rc, out):
    to = int(line.split()[2])
    assert rc == 0, out
    assert f'Rollback to generation {to} queued' in out, out
    new = generation_of(out)
    assert new == c.generation + 1, (new, c.generation)
    c.generation = new
    # generation `to`'s files: the guestbook came with generation 2
    assert os.path.exists(c.session.path(c.seed_dir + '/organism/guestbook.txt')) == (to >= 2)


def check_backup(c, line, rc, out):
    assert rc == 0, out
    m = re.search(r'Backed up the live data as (manual-\d+-[0-9a-f]+)\.', out)
    assert m, out
    c.backup = m.group(1)


def check_backups(c, line, rc, out):
    assert rc == 0, out
    rows = {ln.split()[0]: ln.split()[1] for ln in out.splitlines()[1:] if ln.strip()}
    assert rows.get(c.backup) == 'manual', out
    assert 'before-apply' in rows.values(), out  # the evolution's and the rollbacks' own
    assert 'daily' in rows.values(), out         # the scheduler's, at start


def check_git_log(c, line, rc, out):
    assert rc == 0, out
    commits = out.strip().splitlines()
    assert len(commits) == c.generation, out  # one commit per generation
    assert commits[-1].endswith('Initial seed'), out
    assert any('evolve(guestbook): Add a guestbook' in x for x in commits), out


def check_stop(c, line, rc, out):
    assert rc == 0, out
    assert 'Stopped.' in out, out
    assert probe(c, 'seed status')[0] == 3
    wait_until(lambda: not os.path.exists(f'/proc/{c.supervisor}'), timeout=30, what='the supervisor to end')


def check_run(c, line, rc, out):
    assert rc == 0, out
    assert Browser(c.base).sign_in(link_from(out)).status == 200
    rc2, status = probe(c, 'seed status')
    assert rc2 == 0 and f'Generation:  {c.generation}' in status, status
    c.supervisor = int(open(c.session.path(c.seed_dir + '/.seed/supervisor.pid')).read())


def check_doctor(c, line, rc, out):
    rows = {m.group(2): m.group(1) for m in re.finditer(r'^(ok|FAIL|warn|info) +([^:]+):', out, re.M)}
    for name in ('bubblewrap', 'user namespaces', 'seccomp', 'PostgreSQL', 'sandbox network', 'container engine',
                 'Seed folder', 'seed.yaml'):
        assert name in rows, (name, out)
    assert rows['Seed folder'] == 'ok' and rows['seed.yaml'] == 'ok', out
    # The Seed just ran its sandboxes: what it needs is here.
    for name in ('bubblewrap', 'user namespaces', 'seccomp', 'PostgreSQL'):
        assert rows[name] == 'ok', (name, out)
    assert rc == (1 if 'FAIL' in rows.values() else 0), (rc, out)
    assert "Checking as the account 'seed'" in out, out


CHECKS = [
    (r'^cd /srv/seeds\b', check_cd),
    (r'^seed new tasks\b', check_new),
    (r'^cd tasks\b', check_cd),
    (r'^seed status\b', check_status),
    (r'^seed login --print\b', check_login),
    (r'^seed restart\b', check_restart),
    (r'^seed evolve\b', check_evolve),
    (r'^seed generations\b', check_generations),
    (r'^seed rollback \d+\b', check_rollback),
    (r'^seed backup\b(?!s)', check_backup),
    (r'^seed backups\b', check_backups),
    (r'^git .*\blog\b', check_git_log),
    (r'^seed stop\b', check_stop),
    (r'^seed run --detach\b', check_run),
    (r'^seed doctor\b', check_doctor),
]


@test
def the_block_is_found_and_every_line_has_a_check(c):
    need(c)
    assert len(c.lines) >= 10, c.lines
    assert not any('build/' in ln for ln in c.lines), 'the block must use the installed seed'
    for ln in c.lines:
        assert any(re.search(p, ln) for p, _ in CHECKS), f'no check for README line: {ln}'


@test
def every_line_of_the_block_works_as_written(c):
    need(c)
    for i, line in enumerate(c.lines, 1):
        if line.startswith('seed evolve'):
            intent = re.search(r'"([^"]+)"', line).group(1)
            script(c.model, evolution_script(intent))
        if line.startswith('seed restart') and os.path.exists(c.session.path(c.seed_dir + '/.seed/kernel.json')):
            c.kernel_pid = kernel_json(c)['pid']
        rc, out = c.session.run(line)
        print(f'# {i}: {line.split("#")[0].strip()} -> exit {rc}', flush=True)
        check = next(fn for p, fn in CHECKS if re.search(p, line))
        try:
            check(c, line, rc, out)
        except AssertionError:
            print(f'# output of line {i}:', flush=True)
            for o in out.splitlines()[-40:]:
                print(f'#   {o}', flush=True)
            raise


@test
def the_history_lines_for_root_work(c):
    need(c)
    # "The Seed's history" block names the quickstart's demo: here it reads tasks.
    lines = history_lines(c)
    for line in lines:
        rc, out = c.session.run(line, timeout=120)
        assert rc == 0, (line, out)
        assert 'Initial seed' in out and 'dubious ownership' not in out, (line, out)
    rc, out = c.session.run(f'git -C {c.seed_dir} log --oneline', timeout=120)
    assert rc != 0 and 'dubious ownership' in out, out  # why the README says so


def history_lines(c):
    text = open(README).read()
    at = text.index("**The Seed's history**")
    m = re.search(r'^```sh\n(.*?)^```', text[at:], re.S | re.M)
    assert m, 'no sh block after "The Seed\'s history"'
    lines = [ln.split(' # ')[0].strip().replace('/srv/seeds/demo', c.seed_dir)
             for ln in m.group(1).splitlines() if ln.strip()]
    assert len(lines) == 2 and lines[0].startswith('runuser -u seed') and 'safe.directory' in lines[1], lines
    return lines


if __name__ == '__main__':
    taplib.run(setup, teardown)
