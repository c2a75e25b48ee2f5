#!/usr/bin/env python3
"""End to end: a Seed keeps its port and its folder against another local
account (the attacker, 'seedtest-other', run as a real second uid). Real CLI,
kernel, PostgreSQL, bwrap and git. Prints TAP.

  (c) after `seed new`, the other account can neither list nor read the
      Seed's folder (.git, seed.yaml); `seed run` makes an open one private;
  (a) a port taken by the other account on [::1] or on 127.0.0.1 makes
      `seed run` refuse, saying which address and how to choose another,
      with nothing started;
  (b) while the Seed runs, the other account retries bind() on 127.0.0.1
      and [::1] every ~1 ms through a crash restart (kill -9 of the kernel)
      and through a start that exits 75 (rebuild and restart): it never gets
      the port, and the kernel answers /_seed/healthz on both afterwards.

Needs root (to be two accounts); otherwise every test is a skip.
Environment: SEED_BIN (the seed CLI).
"""
import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

import taplib
from seedlib import alive, free_port, kernel_pid, process_age, request, seed, wait_until
from taplib import Skip, test

OTHER = 'seedtest-other'
GOOD_AFTER_S = 60  # the supervisor restarts a crashed kernel only once it ran this long

# The other account's programs (python3 -c). "hold HOST PORT": listen there
# and wait. "race PORT": retry bind() on 127.0.0.1:PORT and [::1]:PORT every
# ~1 ms; print every address it gets, and on SIGTERM how often it tried.
ATTACKER = r'''
import signal, socket, sys, time
def sock(host, port):
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # every trick an attacker has
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    try:
        s.bind((host, port))
        s.listen(8)
        return s
    except OSError:
        s.close()
        return None
if sys.argv[1] == 'hold':
    s = sock(sys.argv[2], int(sys.argv[3]))
    print('READY' if s else 'FAILED', flush=True)
    while s:
        time.sleep(3600)
    sys.exit(0)
port, tries, held = int(sys.argv[2]), 0, []
def done(*_):
    print(f'TRIES {tries}', flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, done)
print('READY', flush=True)
while True:
    for host in ('127.0.0.1', '::1'):
        s = sock(host, port)
        tries += 1
        if s:
            held.append(s)
            print(f'GOT {host}', flush=True)
    time.sleep(0.001)
'''

# Reads the Seed's folder as the other account; prints one verdict per probe.
PROBE = r'''
import os, sys
d = sys.argv[1]
for name, fn in (('list', lambda: os.listdir(d)), ('seed.yaml', lambda: open(os.path.join(d, 'seed.yaml')).read()),
                 ('.git', lambda: os.listdir(os.path.join(d, '.git'))),
                 ('.git/HEAD', lambda: open(os.path.join(d, '.git', 'HEAD')).read())):
    try:
        fn()
        print(name, 'READ')
    except PermissionError:
        print(name, 'DENIED')
'''


class Ctx:
    skip = None
    tmp = None
    dir = None


def ensure_other_account():
    try:
        return pwd.getpwnam(OTHER)
    except KeyError:
        pass
    useradd = '/usr/sbin/useradd' if os.path.exists('/usr/sbin/useradd') else '/sbin/useradd'
    p = subprocess.run([useradd, '--system', '--user-group', '--no-create-home', '--home-dir', '/nonexistent',
                        '--shell', '/usr/sbin/nologin', OTHER], capture_output=True, text=True)
    try:
        return pwd.getpwnam(OTHER)
    except KeyError:
        raise AssertionError(f'useradd {OTHER} failed: {p.stderr}') from None


def can_listen(host, port):
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def dual_free_port():
    """A port free on both 127.0.0.1 and [::1] (just 127.0.0.1 without IPv6)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        if can_listen('127.0.0.1', port) and (not HAVE_V6 or can_listen('::1', port)):
            return port
    raise AssertionError('no port free on both loopback families')


def have_v6():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(('::1', 0))
        return True
    except OSError:
        return False


HAVE_V6 = have_v6()


# The system's Python: the one running the tests may live where the other
# account cannot reach (e.g. under /root).
OTHER_PYTHON = '/usr/bin/python3' if os.access('/usr/bin/python3', os.X_OK) else sys.executable


def as_other(c, *args, **kw):
    """Starts python3 -c args... as the other account (no groups)."""
    return subprocess.Popen([OTHER_PYTHON, '-c', *args], user=c.other.pw_uid, group=c.other.pw_gid,
                            extra_groups=[], cwd='/', stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def hold(c, host):
    """The other account listening on host:c.port, until stopped."""
    p = as_other(c, ATTACKER, 'hold', host, str(c.port))
    line = p.stdout.readline().strip()
    if line != 'READY':
        p.kill()
        p.wait()
        raise AssertionError(f'the other account could not listen on {host}:{c.port}: {line}')
    return p


def stop(p):
    if p and p.poll() is None:
        p.terminate()
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return out or ''


class Race:
    """The other account retrying bind() on both loopback addresses."""

    def __init__(self, c):
        self.p = as_other(c, ATTACKER, 'race', str(c.port))
        assert self.p.stdout.readline().strip() == 'READY'

    def finish(self):
        out = stop(self.p)
        got = [ln for ln in out.splitlines() if ln.startswith('GOT')]
        tries = [int(ln.split()[1]) for ln in out.splitlines() if ln.startswith('TRIES')]
        assert tries and tries[0] > 100, f'the attacker did not really try: {out!r}'
        return got, tries[0]


def processes_in(path):
    """Processes whose command line or working directory is in path."""
    found = []
    for d in os.listdir('/proc'):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            cmd = open(f'/proc/{d}/cmdline', 'rb').read().replace(b'\0', b' ').decode('utf-8', 'replace')
            cwd = os.readlink(f'/proc/{d}/cwd')
        except OSError:
            continue
        if path in cmd or cwd == path or cwd.startswith(path + '/'):
            found.append((int(d), cmd))
    return found


def healthy_on_both(c):
    """/_seed/healthz answers 200 on 127.0.0.1 and (with IPv6) on [::1]."""
    for base in c.bases:
        if request(base + '/_seed/healthz', timeout=5).status != 200:
            return False
    return True


def setup():
    c = Ctx()
    if os.geteuid() != 0:
        c.skip = 'needs root: the attacker is a second local account'
        return c
    c.other = ensure_other_account()
    c.tmp = tempfile.mkdtemp(prefix='seed-port-')
    os.chmod(c.tmp, 0o755)  # the Seed's account must reach it; the other account may too
    c.port = dual_free_port()
    c.addr = f'127.0.0.1:{c.port}'
    c.bases = [f'http://127.0.0.1:{c.port}'] + ([f'http://[::1]:{c.port}'] if HAVE_V6 else [])
    c.name = 'port'
    c.dir = os.path.join(c.tmp, c.name)
    seed('new', c.name, '--no-run', '--addr', c.addr, cwd=c.tmp, timeout=900)
    return c


def teardown(c):
    if c is None or c.tmp is None:
        return
    if c.dir and os.path.isdir(c.dir):
        seed('stop', '--dir', c.dir, check=False, timeout=120)
    shutil.rmtree(c.tmp, ignore_errors=True)


def need(c):
    if c.skip:
        raise Skip(c.skip)


@test
def the_seed_folder_is_private_to_its_account(c):
    need(c)
    mode = stat.S_IMODE(os.stat(c.dir).st_mode)
    assert mode & 0o077 == 0, f'{c.dir} is {mode:04o}: other local users can read it'
    p = as_other(c, PROBE, c.dir)
    out, _ = p.communicate(timeout=60)
    verdicts = dict(ln.split() for ln in out.splitlines() if ln.strip())
    assert verdicts == {'list': 'DENIED', 'seed.yaml': 'DENIED', '.git': 'DENIED', '.git/HEAD': 'DENIED'}, out


@test
def a_port_taken_by_another_account_refuses_to_start(c):
    need(c)
    hosts = (['::1'] if HAVE_V6 else []) + ['127.0.0.1']
    for host in hosts:
        taken = f'[{host}]:{c.port}' if ':' in host else f'{host}:{c.port}'
        holder = hold(c, host)
        try:
            p = seed('run', '--detach', '--addr', c.addr, cwd=c.dir, check=False, timeout=900)
            out = p.stdout + p.stderr
            assert p.returncode != 0, f'seed run started on a port another account holds ({taken}):\n{out}'
            assert taken in out and '--addr HOST:PORT' in out, out
            for f in ('supervisor.pid', 'kernel.json', 'kernel-build', 'postgres'):
                assert not os.path.exists(os.path.join(c.dir, '.seed', f)), f'.seed/{f} exists: something started'
            assert processes_in(c.dir) == [], processes_in(c.dir)
            print(f'# refused with {taken} taken: {p.stderr.strip().splitlines()[-1]}', flush=True)
        finally:
            stop(holder)
            if os.path.exists(os.path.join(c.dir, '.seed', 'supervisor.pid')):
                seed('stop', '--dir', c.dir, check=False, timeout=120)
    if not HAVE_V6:
        raise Skip('no IPv6 loopback here: only 127.0.0.1 was tried')


@test
def seed_run_makes_an_open_folder_private(c):
    need(c)
    os.chmod(c.dir, 0o755)
    p = seed('run', '--detach', '--addr', c.addr, cwd=c.dir, timeout=900)
    mode = stat.S_IMODE(os.stat(c.dir).st_mode)
    assert mode == 0o700, f'{mode:04o}'
    assert 'now 0700' in p.stderr, p.stderr
    wait_until(lambda: healthy_on_both(c), timeout=120, what='the kernel on both loopback addresses')


@test
def a_crash_restart_keeps_the_port(c):
    need(c)
    pid = kernel_pid(c)
    wait_until(lambda: os.path.isdir(os.path.join(c.dir, '.seed', 'kernel-good')) and
               process_age(pid) > GOOD_AFTER_S + 2, timeout=GOOD_AFTER_S + 180, interval=1,
               what='the kernel to count as good (the supervisor restarts only those)')
    race = Race(c)
    new_pid, err = None, None
    try:
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not alive(pid), timeout=30, what='the kernel to die')

        def restarted():
            p = kernel_pid(c)
            return p if p != pid and alive(p) and healthy_on_both(c) else None
        new_pid = wait_until(restarted, timeout=240, what='the supervisor to restart the kernel')
    except AssertionError as e:
        err = e
    finally:
        got, tries = race.finish()
    print(f'# kernel {pid} -> {new_pid}; the other account tried bind() {tries} times', flush=True)
    assert got == [], f'the other account got the port during the restart: {got}'
    if err:
        raise err
    assert healthy_on_both(c)


@test
def an_exit_75_restart_keeps_the_port(c):
    need(c)
    # A kernel that asks to be rebuilt and restarted (exit 75) the first time
    # it starts, once the other account is racing (.seed/race-ready); the
    # race goes on until the restarted kernel serves.
    seed('stop', '--dir', c.dir, timeout=120)
    marker = os.path.join(c.dir, '.seed', 'restart-once')
    ready = os.path.join(c.dir, '.seed', 'race-ready')
    open(marker, 'w').close()
    os.chmod(marker, 0o666)
    app = os.path.join(c.dir, 'kernel', 'app', 'app.c')
    src = open(app).read()
    anchor = 'int app_run(const struct app_options *o) {'
    assert anchor in src
    patch = ('\n        for (int i = 0; i < 12000 && access(".seed/race-ready", F_OK) != 0; i++) usleep(10000);'
             '\n        if (unlink(".seed/restart-once") == 0) return APP_EXIT_RESTART;')
    with open(app, 'w') as f:
        f.write(src.replace(anchor, anchor + patch, 1))
    run = subprocess.Popen([os.environ.get('SEED_BIN', 'seed'), 'run', '--detach', '--addr', c.addr], cwd=c.dir,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    race, err = None, None
    try:
        wait_until(lambda: os.path.exists(os.path.join(c.dir, '.seed', 'supervisor.pid')) or run.poll() is not None,
                   timeout=900, interval=0.05, what='the supervisor')
        race = Race(c)
        open(ready, 'w').close()
        out, _ = run.communicate(timeout=900)
        assert run.returncode == 0, out
        wait_until(lambda: healthy_on_both(c), timeout=120, what='the restarted kernel on both addresses')
    except AssertionError as e:
        err = e
    finally:
        if run.poll() is None:
            run.kill()
        got, tries = race.finish() if race else ([], 0)
    assert got == [], f'the other account got the port: {got}'
    if err:
        raise err
    log = open(os.path.join(c.dir, '.seed', 'logs', 'supervisor.log')).read()
    assert not os.path.exists(marker), 'the patched kernel never ran'
    assert 'asked to be rebuilt and restarted' in log, log[-2000:]
    print(f'# the other account tried bind() {tries} times through the exit-75 restart', flush=True)


@test
def a_seed_restart_keeps_the_port(c):
    need(c)
    # `seed restart` (new secrets for a running Seed) stops the kernel and
    # starts the next one under the same supervisor: the port never frees.
    if not healthy_on_both(c):
        seed('run', '--detach', '--addr', c.addr, cwd=c.dir, timeout=900)
    pid = kernel_pid(c)
    race = Race(c)
    p, err = None, None
    try:
        p = seed('restart', '--dir', c.dir, '-e', 'SEED_RESTART_TEST=on', timeout=300)
        wait_until(lambda: healthy_on_both(c), timeout=120, what='the restarted kernel on both addresses')
    except AssertionError as e:
        err = e
    finally:
        got, tries = race.finish()
    assert got == [], f'the other account got the port during seed restart: {got}'
    if err:
        raise err
    assert kernel_pid(c) != pid, 'the kernel was not restarted'
    assert 'Restarting the Seed' in p.stdout and 'SEED_RESTART_TEST' in p.stdout, p.stdout
    print(f'# the other account tried bind() {tries} times through seed restart', flush=True)


@test
def on_every_address_it_prints_links_that_work_and_how_to_tunnel(c):
    need(c)
    # --addr 0.0.0.0:PORT: the control plane still answers on seed.localhost
    # only; seed run says how to get there from another machine, and a
    # request for the machine's address gets a 421 that says what to do.
    seed('stop', '--dir', c.dir, timeout=120)
    port = free_port()
    p = seed('run', '--detach', '--addr', f'0.0.0.0:{port}', cwd=c.dir, timeout=900)
    try:
        assert f'the control plane at http://seed.localhost:{port}/_seed/' in p.stdout, p.stdout
        assert f"ssh -L {port}:127.0.0.1:{port}" in p.stdout, p.stdout
        assert 'server.allowed_hosts' in p.stdout, p.stdout
        link = re.search(r'(http://\S+/_seed/login\?t=[0-9a-f]+)', p.stdout).group(1)
        assert link.startswith(f'http://seed.localhost:{port}/'), link
        r = request(f'http://127.0.0.1:{port}/_seed/healthz', headers={'Host': f'192.0.2.7:{port}'})
        assert r.status == 421, r.status
        assert f'ssh -L {port}:127.0.0.1:{port}' in r.text and 'allowed_hosts' in r.text, r.text
    finally:
        seed('stop', '--dir', c.dir, timeout=120)
    # On loopback (the default) there is nothing to add.
    p = seed('run', '--detach', '--addr', c.addr, cwd=c.dir, timeout=900)
    assert 'ssh -L' not in p.stdout, p.stdout


if __name__ == '__main__':
    taplib.run(setup, teardown)
