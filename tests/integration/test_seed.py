#!/usr/bin/env python3
"""End to end: plant a Seed with the real CLI, run it (real PostgreSQL, real
bwrap, real git), sign in over HTTP, stop it, run it again, and prove that a
canary secret appears nowhere it must not. Prints TAP.

Environment: SEED_BIN (the seed CLI).
"""
import glob
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import tempfile
import urllib.parse

import taplib
from seedlib import Browser, NAV, app_origin, canary_hits, ctl_origin, free_port, link_from, request, seed, wait_until
from taplib import test

CANARY_ARG = 'canary-arg-' + secrets.token_hex(12)
CANARY_ENV = 'canary-env-' + secrets.token_hex(12)
CANARY_FILE = 'canary-file-' + secrets.token_hex(12)
CANARY_LATE = 'canary-late-' + secrets.token_hex(12)
OWNER_PASSWORD = 'restart-pw-' + secrets.token_hex(12)


class Ctx:
    pass


def setup():
    c = Ctx()
    c.tmp = tempfile.mkdtemp(prefix='seed-it-')
    os.chmod(c.tmp, 0o755)  # the unprivileged account must reach it when we are root
    c.port = free_port()
    c.name = 'itest'
    c.dir = os.path.join(c.tmp, c.name)
    envfile = os.path.join(c.tmp, 'secrets.env')
    with open(envfile, 'w') as f:
        f.write(f'# a comment\nSEED_CANARY_FILE="{CANARY_FILE}"\n')
    c.new = seed('new', c.name, '--addr', f'127.0.0.1:{c.port}', '-e', f'SEED_CANARY_ARG={CANARY_ARG}',
                 '-e', 'SEED_CANARY_ENV', '--env-file', envfile, cwd=c.tmp, env={'SEED_CANARY_ENV': CANARY_ENV},
                 timeout=900)
    os.unlink(envfile)
    c.envfile = os.path.realpath(envfile)
    c.base = ctl_origin(c.port)
    c.app = app_origin(c.port)
    c.browser = Browser(c.base)
    return c


def teardown(c):
    if c is None:
        return
    seed('stop', '--dir', c.dir, check=False, timeout=120)
    shutil.rmtree(c.tmp, ignore_errors=True)


@test
def planted_as_generation_1(c):
    assert os.path.isdir(os.path.join(c.dir, '.git'))
    for d in ('kernel', 'cmd', 'control', 'organism', 'knowledge', 'skills', 'tests'):
        assert os.path.isdir(os.path.join(c.dir, d)), d
    log = subprocess.run(['git', '-C', c.dir, 'log', '--format=%s%n%D'], capture_output=True, text=True,
                         env={**os.environ, 'GIT_CONFIG_PARAMETERS': "'safe.directory=*'"})
    assert 'Initial seed' in log.stdout, log.stdout + log.stderr
    assert 'tag: seed/gen-1' in log.stdout, log.stdout
    assert 'name: itest' in open(os.path.join(c.dir, 'seed.yaml')).read()
    ignored = open(os.path.join(c.dir, '.gitignore')).read()
    assert '/.seed/' in ignored


@test
def the_env_files_path_is_hidden_from_every_sandbox(c):
    # The env file's path (never its content) goes to the kernel, which hides
    # it in every sandbox it builds (the owner's config).
    kpid = wait_until(lambda: json.load(open(os.path.join(c.dir, '.seed/kernel.json')))['pid'], timeout=120,
                      what='the kernel state file')
    cmd = open(f'/proc/{kpid}/cmdline', 'rb').read().split(b'\0')
    assert c.envfile.encode() in cmd and cmd[cmd.index(c.envfile.encode()) - 1] == b'--hide', cmd


@test
def new_printed_a_sign_in_link(c):
    c.link = link_from(c.new.stdout)
    assert c.link.startswith(c.base + '/_seed/login?t=')
    token = c.link.rsplit('=', 1)[1]
    assert len(token) >= 32  # >= 128 random bits, hex


@test
def new_says_in_one_line_that_the_seed_cannot_think_yet(c):
    # Planted with seed.yaml's provider (openrouter) and no key for it.
    lines = [line for line in c.new.stdout.splitlines() if 'model key' in line.lower()]
    assert lines == ['No model key: the Seed cannot think yet. Start it with -e OPENROUTER_API_KEY (or lend a key '
                     'in Settings).'], c.new.stdout


@test
def healthz_answers_without_auth(c):
    r = request(c.base + '/_seed/healthz')
    assert r.status == 200, r.status
    assert r.json().get('ok') is True


@test
def seed_pages_are_private_without_a_session(c):
    r = request(c.base + '/_seed/', headers=dict(NAV))
    assert r.status == 401, r.status
    assert 'private' in r.text.lower()
    r = request(c.base + '/_seed/api/status')
    assert r.status == 401, r.status


@test
def sign_in_with_the_link_sets_the_session_cookie(c):
    r = c.browser.sign_in(c.link)
    assert r.status == 200, r.status  # "Signed in", moving on to /_seed/ by a refresh of its own
    assert b'<meta http-equiv="refresh" content="0;url=/_seed/">' in r.body, r.body
    sc = r.header('Set-Cookie')
    assert sc, 'no cookie'
    parts = [p.strip() for p in sc.split(';')]
    attrs = {p.split('=', 1)[0].lower(): (p.split('=', 1)[1] if '=' in p else True) for p in parts[1:]}
    assert attrs.get('httponly') is True, sc
    assert str(attrs.get('samesite')).lower() == 'strict', sc
    assert 'domain' not in attrs, sc  # host-only: seed.localhost alone
    assert attrs.get('path') == '/_seed', sc
    assert attrs.get('max-age') == str(30 * 24 * 3600), sc
    assert parts[0].startswith('seed_'), sc


@test
def a_link_works_once(c):
    r = request(c.link, headers=dict(NAV))
    assert r.status == 403, r.status
    assert not r.all('Set-Cookie')


@test
def the_page_carries_the_api_token(c):
    r = c.browser.load_page()
    assert r.status == 200, r.status
    assert c.browser.token and len(c.browser.token) == 64, r.text[:500]
    assert r.header('Cross-Origin-Opener-Policy') == 'same-origin'
    assert "frame-ancestors 'none'" in (r.header('Content-Security-Policy') or '')
    assert 'unsafe-inline' not in (r.header('Content-Security-Policy') or '')
    assert '<script>' not in r.text  # no inline script


@test
def status_api_needs_the_token(c):
    r = wait_until(lambda: (lambda x: x if x.status == 200 and x.json()['organism']['state'] == 'running' else None)(
        c.browser.api('/_seed/api/status')), timeout=180, what='organism running')
    st = r.json()
    assert st['name'] == 'itest', st
    assert st['generation'] == 1, st
    token = c.browser.token
    c.browser.token = None
    try:
        assert c.browser.api('/_seed/api/status').status == 401  # cookie only
    finally:
        c.browser.token = token
    r = request(c.base + '/_seed/api/status', headers={'X-Seed-Token': token})  # token only
    assert r.status == 401, r.status


@test
def root_shows_the_organism(c):
    r = wait_until(lambda: (lambda x: x if x.status == 200 else None)(request(c.app + '/')), timeout=120,
                   what='organism page')
    assert "I don't have a purpose yet" in r.text, r.text[:300]
    assert r.header('Cross-Origin-Opener-Policy') == 'unsafe-none'
    assert any("frame-ancestors 'none'" in v for v in r.all('Content-Security-Policy'))
    assert request(c.app + '/healthz').status == 200


def listening_tcp_inodes():
    inodes = set()
    for f in ('/proc/net/tcp', '/proc/net/tcp6'):
        with open(f) as fh:
            next(fh)
            for line in fh:
                cols = line.split()
                if cols[3] == '0A':  # LISTEN
                    inodes.add(cols[9])
    return inodes


def postgres_children(master):
    """This Seed's PostgreSQL processes besides its postmaster (not another
    Seed's, which may listen wherever it likes)."""
    pids = []
    for p in glob.glob('/proc/[0-9]*'):
        try:
            st = open(p + '/status').read()
        except OSError:
            continue
        if re.search(r'^PPid:\s*%s$' % master, st, re.M):
            pids.append(p)
    return pids


@test
def postgres_has_no_tcp_listener(c):
    pidfile = os.path.join(c.dir, '.seed/postgres/postmaster.pid')
    master = open(pidfile).read().split()[0]
    socks = set()
    for p in [f'/proc/{master}'] + postgres_children(master):
        for fd in glob.glob(p + '/fd/*'):
            try:
                t = os.readlink(fd)
            except OSError:
                continue
            m = re.match(r'socket:\[(\d+)\]', t)
            if m:
                socks.add(m.group(1))
    assert socks, 'postmaster has no sockets at all?'
    assert not (socks & listening_tcp_inodes()), 'PostgreSQL listens on TCP'
    assert os.path.exists(os.path.join(c.dir, '.seed/run/.s.PGSQL.5432'))


@test
def private_files_have_private_modes(c):
    def mode(p):
        return stat.S_IMODE(os.stat(os.path.join(c.dir, p)).st_mode)
    assert mode('.seed/secrets') == 0o700, oct(mode('.seed/secrets'))
    assert mode('.seed/run') == 0o700
    assert mode('.seed/control-token') == 0o600
    for f in os.listdir(os.path.join(c.dir, '.seed/secrets')):
        assert mode('.seed/secrets/' + f) == 0o600, f
    st = os.stat(c.dir)
    if os.geteuid() == 0:
        assert st.st_uid != 0, 'the Seed folder must belong to the unprivileged account'


@test
def nothing_runs_as_root(c):
    if os.geteuid() != 0:
        raise taplib.Skip('not running as root')
    supervisor = int(open(os.path.join(c.dir, '.seed/supervisor.pid')).read())
    seen = 0
    for p in glob.glob('/proc/[0-9]*'):
        try:
            st = os.stat(p)
            environ_cwd = os.readlink(p + '/cwd')
        except OSError:
            continue
        if environ_cwd.startswith(c.dir):
            seen += 1
            assert st.st_uid != 0, f'{p} ({open(p + "/cmdline", "rb").read()!r}) runs as root'
    assert seen >= 2, 'expected the kernel and its children to run in the Seed folder'
    assert os.stat(f'/proc/{supervisor}').st_uid != 0


@test
def cli_status_reports_the_seed(c):
    p = seed('status', '--dir', c.dir)
    assert 'Running:     yes' in p.stdout, p.stdout
    assert 'Generation:  1' in p.stdout, p.stdout
    assert 'running' in p.stdout.split('Organism:')[1], p.stdout
    assert 'Model:       anthropic/claude-sonnet-4.5 via openrouter (key: none)' in p.stdout, p.stdout
    assert 'Warning:     No model key: the Seed cannot think yet. Start it with -e OPENROUTER_API_KEY' in p.stdout


@test
def cli_login_prints_a_fresh_link(c):
    p = seed('login', '--print', '--dir', c.dir)
    link = link_from(p.stdout)
    assert link != c.link
    b = Browser(c.base)
    assert b.sign_in(link).status == 200


@test
def running_twice_does_not_start_twice(c):
    p = seed('run', '--dir', c.dir, '--detach')
    assert 'already running' in p.stdout, p.stdout


def password_sign_in(c, user, password):
    """POSTs the sign-in form the way a browser does; 303 means signed in."""
    body = urllib.parse.urlencode({'user': user, 'password': password})
    h = dict(NAV, **{'Sec-Fetch-Site': 'same-origin', 'Origin': c.base,
                     'Content-Type': 'application/x-www-form-urlencoded'})
    return request(c.base + '/_seed/login', method='POST', headers=h, body=body).status


def kernel_pid(c):
    return json.load(open(os.path.join(c.dir, '.seed/kernel.json')))['pid']


@test
def secrets_given_to_a_running_seed_are_not_applied_silently(c):
    p = seed('run', '--dir', c.dir, '--detach', '-e', f'SEED_CANARY_LATE={CANARY_LATE}', check=False)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert 'already running' in p.stdout, p.stdout
    assert 'SEED_CANARY_LATE' in p.stderr and 'NOT applied' in p.stderr, p.stderr
    assert 'seed restart -e SEED_CANARY_LATE' in p.stderr, p.stderr
    assert CANARY_LATE not in p.stdout + p.stderr


@test
def restart_adds_secrets_and_keeps_the_others(c):
    assert password_sign_in(c, 'alice', OWNER_PASSWORD) != 303  # started without a password
    pid = kernel_pid(c)
    p = seed('restart', '--dir', c.dir, '-e', 'SEED_OWNER_USER=alice', timeout=300)
    assert 'Restarting the Seed' in p.stdout and 'SEED_OWNER_USER' in p.stdout, p.stdout
    assert 'the control plane at ' + c.base in p.stdout, p.stdout
    assert Browser(c.base).sign_in(link_from(p.stdout)).status == 200
    second = kernel_pid(c)
    assert second != pid
    # A second restart adds the password; the user given before is kept.
    p = seed('restart', '--dir', c.dir, '-e', 'SEED_OWNER_PASSWORD', '-e', f'SEED_CANARY_LATE={CANARY_LATE}',
             env={'SEED_OWNER_PASSWORD': OWNER_PASSWORD}, timeout=300)
    assert kernel_pid(c) not in (pid, second)
    assert OWNER_PASSWORD not in p.stdout + p.stderr and CANARY_LATE not in p.stdout + p.stderr
    assert password_sign_in(c, 'alice', OWNER_PASSWORD) == 303
    assert password_sign_in(c, 'owner', OWNER_PASSWORD) != 303
    # the signed-in browser from before is still signed in
    assert c.browser.load_page().status == 200


@test
def restart_of_a_stopped_seed_says_so(c):
    # (the Seed runs; a copy of its folder without a supervisor does not)
    other = os.path.join(c.tmp, 'not-running')
    os.makedirs(os.path.join(other, 'kernel'), exist_ok=True)
    shutil.copy(os.path.join(c.dir, 'seed.yaml'), other)
    os.chmod(other, 0o755)
    p = seed('restart', '--dir', other, '-e', 'X=1', check=False)
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    assert 'not running' in p.stderr and "seed run" in p.stderr, p.stderr


@test
def stop_then_run_keeps_generation_data_and_session(c):
    p = seed('stop', '--dir', c.dir, timeout=120)
    assert 'Stopped' in p.stdout, p.stdout
    assert seed('status', '--dir', c.dir, check=False).returncode == 3
    assert not postgres_running(c), 'PostgreSQL still running after stop'
    p = seed('run', '--dir', c.dir, '--detach', '-e', f'SEED_CANARY_ARG={CANARY_ARG}', timeout=600)
    link_from(p.stdout)
    r = wait_until(lambda: (lambda x: x if x.status == 200 else None)(c.browser.api('/_seed/api/status')),
                   timeout=120, what='status after restart')
    assert r.json()['generation'] == 1
    # the old session cookie is still valid, and its page gives the same token
    old = c.browser.token
    assert c.browser.load_page().status == 200
    assert c.browser.token == old
    assert not os.path.exists(os.path.join(c.dir, '.seed/postgres/.reinit'))


def restart_with_source_patch(c, path, old, new):
    """Stops the Seed, patches its own kernel source, runs it again; returns
    the `seed run` output and restores the source (stopping it again)."""
    full = os.path.join(c.dir, path)
    original = open(full).read()
    assert old in original, f'{old!r} not in {path}'
    seed('stop', '--dir', c.dir, timeout=120)
    with open(full, 'w') as f:
        f.write(original.replace(old, new, 1))
    try:
        p = seed('run', '--dir', c.dir, '--detach', check=False, timeout=900)
        out = p.stdout + p.stderr
        assert p.returncode == 0, out
        link_from(p.stdout)
        assert request(c.base + '/_seed/healthz').status == 200
        return out
    finally:
        seed('stop', '--dir', c.dir, timeout=120)
        with open(full, 'w') as f:
            f.write(original)


@test
def a_kernel_that_ran_a_minute_is_kept_as_the_last_good_one(c):
    good = os.path.join(c.dir, '.seed/kernel-good/seed-kernel')
    wait_until(lambda: os.path.exists(good), timeout=150, interval=1, what='kernel-good')
    assert os.access(good, os.X_OK)


@test
def a_kernel_that_does_not_build_falls_back_to_the_last_good_one(c):
    out = restart_with_source_patch(c, 'kernel/app/app.c', '#include "app/app.h"',
                                    '#include "app/app.h"\n#error broken on purpose by the test')
    assert 'using the last good kernel' in out, out
    log = open(os.path.join(c.dir, '.seed/logs/kernel-build.log')).read()
    assert 'broken on purpose' in log


@test
def a_kernel_that_dies_at_start_falls_back_to_the_last_good_one(c):
    restart_with_source_patch(c, 'kernel/app/app.c', 'int app_run(const struct app_options *o) {',
                              'int app_run(const struct app_options *o) {\n        if (o) return APP_EXIT_FAILURE;')
    log = open(os.path.join(c.dir, '.seed/logs/supervisor.log')).read()
    assert 'falling back to the last good kernel' in log, log


@test
def exit_75_rebuilds_and_restarts_the_kernel(c):
    marker = os.path.join(c.dir, '.seed/restart-once')
    open(marker, 'w').close()
    os.chmod(marker, 0o666)
    restart_with_source_patch(c, 'kernel/app/app.c', 'int app_run(const struct app_options *o) {',
                              'int app_run(const struct app_options *o) {\n'
                              '        if (unlink(".seed/restart-once") == 0) return APP_EXIT_RESTART;')
    assert not os.path.exists(marker), 'the patched kernel never ran'
    log = open(os.path.join(c.dir, '.seed/logs/supervisor.log')).read()
    assert 'asked to be rebuilt and restarted' in log, log


@test
def it_runs_again_on_its_restored_source(c):
    p = seed('run', '--dir', c.dir, '--detach', '-e', f'SEED_CANARY_ARG={CANARY_ARG}', timeout=900)
    assert 'last good' not in p.stdout + p.stderr
    r = wait_until(lambda: (lambda x: x if x.status == 200 else None)(c.browser.api('/_seed/api/status')),
                   timeout=120, what='status after restart')
    assert r.json()['generation'] == 1


def postgres_running(c):
    pidfile = os.path.join(c.dir, '.seed/postgres/postmaster.pid')
    if not os.path.exists(pidfile):
        return False
    pid = open(pidfile).read().split()[0]
    return os.path.exists(f'/proc/{pid}')


@test
def canary_secrets_appear_nowhere(c):
    canaries = [CANARY_ARG.encode(), CANARY_ENV.encode(), CANARY_FILE.encode(), CANARY_LATE.encode(),
                OWNER_PASSWORD.encode()]
    # the kernel did receive them (it logs their names, never values)
    klog = open(os.path.join(c.dir, '.seed/logs/kernel.log')).read()
    assert 'SEED_CANARY_ARG' in klog, 'the kernel never received the secrets'
    hits = canary_hits(c.dir, canaries)
    assert not hits, f'canary secret found in: {hits}'


if __name__ == '__main__':
    taplib.run(setup, teardown)
