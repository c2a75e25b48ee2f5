"""Helpers for driving a real Seed through its CLI and HTTP (stdlib only)."""
import glob
import http.client
import json
import os
import re
import socket
import subprocess
import threading
import time
import urllib.parse

SEED = os.environ.get('SEED_BIN', 'seed')

NAV = {'Sec-Fetch-Dest': 'document', 'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Site': 'none',
       'Sec-Fetch-User': '?1'}


def ctl_origin(port):
    """The control plane's own origin (server.control_host's default)."""
    return f'http://seed.localhost:{port}'


def app_origin(port):
    """The organism's origin: everything but the control plane's host."""
    return f'http://127.0.0.1:{port}'


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def seed(*args, cwd=None, env=None, timeout=600, check=True):
    """Runs the seed CLI; returns CompletedProcess (text)."""
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run([SEED, *args], cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        raise AssertionError(f"seed {' '.join(args)} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def link_from(output):
    m = re.search(r'(http://[^\s]+/_seed/login\?t=[0-9a-f]+)', output)
    assert m, f"no sign-in link in output:\n{output}"
    return m.group(1)


class Slowloris:
    """addrs x per_addr connections to port from 127.0.0.<first>.., each
    trickling a byte of a request head (Host: host) every second and
    reconnecting whenever it is closed. A context manager: runs in a thread."""

    def __init__(self, port, host, addrs, per_addr, first=100):
        self.port, self.host, self.stop, self.opened, self.rounds = port, host, threading.Event(), 0, 0
        self.srcs = [f'127.0.0.{first + i // per_addr}' for i in range(addrs * per_addr)]
        self.socks = [None] * len(self.srcs)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def connect(self, i):
        try:
            s = socket.create_connection(('127.0.0.1', self.port), timeout=30, source_address=(self.srcs[i], 0))
            s.setblocking(False)
            s.send(f'GET /_seed/healthz HTTP/1.1\r\nHost: {self.host}\r\nX-Slow: '.encode())
        except OSError:
            return None
        self.opened += 1
        return s

    def run(self):
        while not self.stop.is_set():
            end = time.monotonic() + 1
            for i, s in enumerate(self.socks):
                if s is not None and closed_by_server(s):
                    s.close()
                    s = None
                if s is None:
                    self.socks[i] = self.connect(i)
                    continue
                try:
                    s.send(b'a')
                except OSError:
                    s.close()
                    self.socks[i] = None
            self.rounds += 1
            self.stop.wait(max(0, end - time.monotonic()))
        for s in self.socks:
            if s is not None:
                s.close()

    def started(self, timeout=60):
        """Waits until every connection opened once and two rounds passed."""
        wait_until(lambda: self.opened >= len(self.srcs) and self.rounds >= 2, timeout=timeout, interval=0.05,
                   what='the slow connections open')
        return self

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # list of (name, value)
        self.body = body

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def json(self):
        return json.loads(self.body)

    @property
    def text(self):
        return self.body.decode('utf-8', 'replace')


def request(url, method='GET', headers=None, body=None, timeout=30):
    """One HTTP request. *.localhost names go to 127.0.0.1, as browsers
    resolve them, with the name in Host."""
    u = urllib.parse.urlsplit(url)
    host = '127.0.0.1' if (u.hostname or '').endswith('.localhost') else u.hostname
    conn = http.client.HTTPConnection(host, u.port, timeout=timeout)
    path = u.path + ('?' + u.query if u.query else '')
    h = dict(headers or {})
    if not any(k.lower() == 'host' for k in h):
        h['Host'] = u.netloc
    try:
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return Response(r.status, r.getheaders(), r.read())
    finally:
        conn.close()


def closed_by_server(s):
    """Whether the server closed socket s (end of stream or reset), without waiting."""
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b''
    except BlockingIOError:
        return False
    except OSError:
        return True


def kernel_pid(c):
    """The running kernel's pid, from the Seed's .seed/kernel.json (c.dir)."""
    return int(json.load(open(os.path.join(c.dir, '.seed', 'kernel.json')))['pid'])


def process_age(pid):
    """Seconds since the process started (from /proc)."""
    with open(f'/proc/{pid}/stat') as f:
        start_ticks = int(f.read().rsplit(')', 1)[1].split()[19])
    with open('/proc/uptime') as f:
        uptime = float(f.read().split()[0])
    return uptime - start_ticks / os.sysconf('SC_CLK_TCK')


def alive(pid):
    """Whether pid is a live process (not gone, not a zombie)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


def wait_until(fn, timeout=120, interval=0.2, what='condition'):
    """Polls fn() until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - polling: remember and retry
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last error: {last!r})")


class Browser:
    """A cookie-keeping client that sends what a browser sends."""

    def __init__(self, base):
        self.base = base.rstrip('/')
        self.cookies = {}
        self.token = None

    def cookie_header(self):
        return '; '.join(f'{k}={v}' for k, v in self.cookies.items())

    def get(self, path, headers=None, **kw):
        h = dict(headers or {})
        if self.cookies:
            h['Cookie'] = self.cookie_header()
        return request(self.base + path, headers=h, **kw)

    def sign_in(self, link):
        r = request(link, headers=dict(NAV))
        for sc in r.all('Set-Cookie'):
            name, _, rest = sc.partition('=')
            self.cookies[name] = rest.split(';', 1)[0]
        return r

    def load_page(self):
        r = self.get('/_seed/', headers=dict(NAV))
        m = re.search(rb'<meta name="seed-token" content="([0-9a-f]+)"', r.body)
        self.token = m.group(1).decode() if m else None
        return r

    def api(self, path, method='GET', body=None):
        h = {'X-Seed-Token': self.token or '', 'Sec-Fetch-Site': 'same-origin', 'Sec-Fetch-Mode': 'cors',
             'Sec-Fetch-Dest': 'empty'}
        if body is not None:
            h['Content-Type'] = 'application/json'
            h['Origin'] = self.base
            body = json.dumps(body)
        if self.cookies:
            h['Cookie'] = self.cookie_header()
        return request(self.base + path, method=method, headers=h, body=body)


# ---- a Seed whose model is the scripted model server ----

MODEL_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fakes', 'model_server.py')
EVO_ID = re.compile(r'^evo_[0-9a-f]{16}$')


class ModelServer:
    """tests/fakes/model_server.py on a free port, logging into tmp."""

    def __init__(self, tmp):
        import sys
        port_file = os.path.join(tmp, 'model-port')
        self.log = open(os.path.join(tmp, 'model-server.log'), 'w')
        self.proc = subprocess.Popen([sys.executable, MODEL_SERVER, '--port', '0', '--port-file', port_file],
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.port = int(wait_until(
            lambda: open(port_file).read().strip() if os.path.exists(port_file) else None,
            timeout=30, what='the model server port'))
        self.base = f'http://127.0.0.1:{self.port}'
        self.model_base = self.base  # what script() takes
        wait_until(lambda: request(self.base + '/_health').status == 200, timeout=30, what='the model server')

    def yaml(self, api_key_env=''):
        """seed.yaml's model section pointing at it (provider openai-compatible)."""
        return (f'model:\n  provider: openai-compatible\n  name: scripted\n'
                f'  base_url: {self.base}/v1\n  api_key_env: "{api_key_env}"\n  max_tokens: 16000\n')

    def point(self, seed_yaml, api_key_env=''):
        """Rewrites the model section of the seed.yaml at path seed_yaml."""
        text = open(seed_yaml).read()
        new, n = re.subn(r'(?m)^model:\n(?:[ \t]+.*\n)+', self.yaml(api_key_env), text)
        assert n == 1, text
        with open(seed_yaml, 'w') as f:
            f.write(new)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class ScriptedSeed:
    """A planted, running Seed (real CLI, kernel, PostgreSQL, bwrap, git) whose
    model is tests/fakes/model_server.py through provider openai-compatible.
    key_env: its model.api_key_env ("" = the server needs no key; a variable
    not passed starts the Seed without a model key). run_output: what
    `seed run` printed."""

    def __init__(self, prefix, name, run_args=(), before_run=None, key_env='', preview=False, parent=None):
        """run_args: more arguments for `seed run` (e.g. -e NAME=VALUE);
        before_run(dir): called after planting, before the first start;
        preview: keep the preview before apply on (the owner's default),
        which stops every evolution at ready until it is decided; off, an
        evolution runs to its end as the tests expect; parent: the folder
        to make the Seed's temporary folder in (default: the system's)."""
        import tempfile
        self.tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
        os.chmod(self.tmp, 0o755)  # the unprivileged account must reach it when we are root
        self.model = None
        self.dir = None
        self.model = ModelServer(self.tmp)
        self.model_port = self.model.port
        self.model_base = self.model.base
        self.port = free_port()
        self.dir = os.path.join(self.tmp, name)
        seed('new', name, '--no-run', '--addr', f'127.0.0.1:{self.port}', cwd=self.tmp, timeout=900)
        self._point_at_model_server(key_env)
        if before_run:
            before_run(self.dir)
        self.run_output = seed('run', '--detach', '--addr', f'127.0.0.1:{self.port}', *run_args, cwd=self.dir,
                               timeout=900).stdout
        self.base = ctl_origin(self.port)
        self.app = app_origin(self.port)
        wait_until(lambda: request(self.base + '/_seed/healthz').status == 200, timeout=120, what='the kernel')
        if not preview:
            r = api(self, '/_seed/api/evolution-settings', 'POST', {'preview': False})
            assert r.status == 200, r.text

    def _point_at_model_server(self, key_env=''):
        self.model.point(os.path.join(self.dir, 'seed.yaml'), key_env)

    def restart(self, *args):
        """Stops the Seed and runs it again (args: e.g. -e NAME=VALUE); returns
        what `seed run` printed."""
        seed('stop', '--dir', self.dir, timeout=120)
        out = seed('run', '--detach', '--addr', f'127.0.0.1:{self.port}', *args, cwd=self.dir, timeout=900).stdout
        wait_until(lambda: request(self.base + '/_seed/healthz').status == 200, timeout=120, what='the kernel')
        return out

    def close(self):
        import shutil
        if self.dir:
            seed('stop', '--dir', self.dir, check=False, timeout=120)
        if self.model:
            self.model.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def script(c, steps):
    """Loads a script of steps into the model server (see its top comment)."""
    r = request(c.model_base + '/_script', method='POST', body=json.dumps(steps),
                headers={'Content-Type': 'application/json'})
    assert r.status == 200, r.text


def token(c):
    return open(os.path.join(c.dir, '.seed', 'control-token')).read().strip()


def api(c, path, method='GET', body=None, headers=None):
    """Calls the kernel's API with the CLI token."""
    h = {'Authorization': 'Bearer ' + token(c)}
    if body is not None:
        h['Content-Type'] = 'application/json'
        body = body if isinstance(body, (str, bytes)) else json.dumps(body)
    h.update(headers or {})
    return request(c.base + path, method=method, headers=h, body=body, timeout=60)


def evolution(c, evo_id):
    r = api(c, f'/_seed/api/evolutions/{evo_id}')
    assert r.status == 200, r.text
    return r.json()


def submit(c, intent):
    r = api(c, '/_seed/api/evolutions', 'POST', {'intent': intent})
    assert r.status == 202, (r.status, r.text)
    evo_id = r.json()['id']
    assert EVO_ID.match(evo_id), evo_id
    return evo_id


# ---- where a secret must never be ----

def git_objects(seed_dir):
    """Every loose git object of the Seed, decompressed (packs are compressed
    per object: every_file reads them as they are)."""
    import zlib
    for p in glob.glob(os.path.join(seed_dir, '.git/objects/??/*')):
        with open(p, 'rb') as f:
            yield p, zlib.decompress(f.read())


def every_file(root):
    """(path, bytes) of every regular file beneath root (links are not followed)."""
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            try:
                with open(p, 'rb') as fh:
                    yield p, fh.read()
            except OSError:
                pass


def canary_hits(seed_dir, canaries):
    """Every place a canary (bytes) is found: the Seed's folder (.seed, logs
    and git included), every git object, every database (pg_dumpall over the
    private socket, as the superuser), and the command line and environment
    of every process on the machine. Returns the list of places."""
    hits = []
    for where, data in list(every_file(seed_dir)) + list(git_objects(seed_dir)):
        hits += [where for k in canaries if k in data]
    pw = open(os.path.join(seed_dir, '.seed/secrets/postgres-password')).read().strip()
    dump = subprocess.run(['pg_dumpall', '-h', os.path.join(seed_dir, '.seed/run'), '-U', 'postgres'],
                          capture_output=True, env={**os.environ, 'PGPASSWORD': pw}, timeout=120)
    assert dump.returncode == 0, dump.stderr
    assert b'kernel_migrations' in dump.stdout
    hits += ['pg_dumpall' for k in canaries if k in dump.stdout]
    for p in glob.glob('/proc/[0-9]*'):
        for f in ('cmdline', 'environ'):
            try:
                data = open(f'{p}/{f}', 'rb').read()
            except OSError:
                continue
            hits += [f'{p}/{f}' for k in canaries if k in data]
    return hits


# ---- an external PostgreSQL (hosting: database.url / SEED_DATABASE_URL) ----

class ExternalPostgres:
    """A PostgreSQL server of the test's own, standing in for a hosting
    platform's: run as the unprivileged 'seed' account when we are root,
    listening on TCP (listen: addresses) with TLS required for every TCP
    connection (hostssl; a self-signed certificate), the superuser reachable
    on a Unix socket only, and a role 'hoster' with CREATEROLE and CREATEDB
    (password self.password), as a platform gives a Seed. hba_nets: the
    networks TCP clients may come from."""

    def __init__(self, listen='127.0.0.1', hba_nets=('127.0.0.1/32',)):
        import tempfile
        import pwd
        self.tmp = tempfile.mkdtemp(prefix='seed-extpg-')
        os.chmod(self.tmp, 0o755)
        self.port = free_port()
        self.password = 'hoster-' + os.urandom(8).hex()
        self.user = None
        if os.geteuid() == 0:
            subprocess.run(['useradd', '--system', '--no-create-home', '--shell', '/usr/sbin/nologin', 'seed'],
                           capture_output=True)
            self.user = 'seed'
            pw = pwd.getpwnam('seed')
            os.chown(self.tmp, pw.pw_uid, pw.pw_gid)
        bindirs = sorted(glob.glob('/usr/lib/postgresql/*/bin/initdb'), key=lambda p: int(p.split('/')[4]))
        assert bindirs, 'PostgreSQL is not installed'
        self.bindir = os.path.dirname(bindirs[-1])
        data = os.path.join(self.tmp, 'data')
        self._run(f'{self.bindir}/initdb', '-D', data, '-U', 'postgres', '--auth-local=trust',
                  '--auth-host=scram-sha-256', '-E', 'UTF8', '--no-instructions')
        self._run('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f'{data}/server.key',
                  '-out', f'{data}/server.crt', '-subj', '/CN=localhost', '-days', '2')
        os.chmod(f'{data}/server.key', 0o600)
        with open(f'{data}/pg_hba.conf', 'w') as f:
            f.write('local all all trust\n')
            for net in hba_nets:
                f.write(f'hostssl all all {net} scram-sha-256\n')
        self._run(f'{self.bindir}/pg_ctl', '-D', data, '-w', '-t', '60', '-l', f'{self.tmp}/server.log', '-o',
                  f'-c listen_addresses={listen} -c port={self.port} -c unix_socket_directories={self.tmp} '
                  '-c ssl=on', 'start')
        self.started = True
        self.query(f"CREATE ROLE hoster LOGIN CREATEROLE CREATEDB PASSWORD '{self.password}'")

    def _run(self, *argv):
        if self.user:
            argv = ('runuser', '-u', self.user, '--', *argv)
        p = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd='/')
        assert p.returncode == 0, f"{' '.join(argv)}: {p.stdout}{p.stderr}"
        return p.stdout

    def url(self, host='127.0.0.1', password=True):
        pw = ':' + self.password if password else ''
        return f'postgresql://hoster{pw}@{host}:{self.port}/postgres?sslmode=require'

    def query(self, sql, db='postgres'):
        """One statement as the server's superuser; its output (psql -At)."""
        return self._run(f'{self.bindir}/psql', '-h', self.tmp, '-p', str(self.port), '-U', 'postgres', '-d', db,
                         '-qAt', '-v', 'ON_ERROR_STOP=1', '-c', sql).strip()

    def close(self):
        import shutil
        if getattr(self, 'started', False):
            try:
                self._run(f'{self.bindir}/pg_ctl', '-D', os.path.join(self.tmp, 'data'), '-m', 'fast', '-w', 'stop')
            except AssertionError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---- faults: a kernel killed where a test wants it, and what must survive ----

def kernel_psql(c, sql, db='seed_kernel'):
    """One statement as the Seed's PostgreSQL superuser over its private
    socket; its output (psql -At)."""
    pw = open(os.path.join(c.dir, '.seed/secrets/postgres-password')).read().strip()
    p = subprocess.run(['psql', '-h', os.path.join(c.dir, '.seed/run'), '-U', 'postgres', '-d', db,
                        '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', sql],
                       capture_output=True, text=True, env={**os.environ, 'PGPASSWORD': pw}, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


# Kernel memory that only ever grows: every row of these must outlive any
# fault (rows of evolutions and approvals change state, so their ids count).
MEMORY_ROWS = {
    'evolutions': 'id', 'evolution_events': 'md5(t::text)', 'messages': 'md5(t::text)',
    'approvals': 'id', 'model_usage': 'md5(t::text)', 'kernel_settings': 'key',
}


def kernel_memory(c):
    """{table: set of row keys} of the kernel's memory (MEMORY_ROWS)."""
    out = {}
    for table, key in MEMORY_ROWS.items():
        rows = kernel_psql(c, f'SELECT {key} FROM {table} t')
        out[table] = set(rows.splitlines()) if rows else set()
    return out


def memory_lost(before, after):
    """The rows of before that after lacks, per table ({} = nothing lost)."""
    return {t: sorted(before[t] - after.get(t, set()))[:5] for t in before if before[t] - after.get(t, set())}


def parent_pid(pid):
    with open(f'/proc/{pid}/stat') as f:
        return int(f.read().rsplit(')', 1)[1].split()[1])


class KillAt:
    """SIGKILLs the running kernel at a chosen instruction: gdb attaches,
    breaks at function `at` (optionally only when `cond` holds at its entry,
    e.g. '$rdx == 2' for its third argument), lets the call finish when
    `finish` (so what it wrote is written), then kills the kernel. Nothing of
    this is in the kernel: a deterministic hold from outside, for the states
    no model step or sandbox can hold. A context manager: the kernel runs on
    until the breakpoint is hit; wait() returns once it is dead."""

    def __init__(self, c, at, cond=None, finish=False):
        import shutil
        import tempfile
        if not shutil.which('gdb'):
            import taplib
            raise taplib.Skip('gdb is not installed (scripts/bootstrap --tests installs it)')
        self.pid = kernel_pid(c)
        self.supervisor = parent_pid(self.pid)
        self.dir = tempfile.mkdtemp(prefix='killat-')
        self.log, hit, go = (os.path.join(self.dir, n) for n in ('log', 'hit', 'go'))
        brk = f'break *{at}' + (f' if {cond}' if cond else '')
        # Stopped there, gdb says so (hit) and waits for go before the kill.
        cmds = ['set pagination off', 'set confirm off',
                'handle SIGPIPE SIGCHLD SIGUSR1 SIGUSR2 SIGALRM SIGTERM SIGHUP SIGINT SIGURG nostop noprint pass',
                brk, 'continue'] + (['finish'] if finish else []) + [
                f'shell touch {hit}', f'shell while [ ! -e {go} ]; do sleep 0.05; done', 'kill']
        argv = ['gdb', '-nx', '-batch', '-p', str(self.pid)]
        for x in cmds:
            argv += ['-ex', x]
        self.hit_file, self.go_file = hit, go
        self.out = open(self.log, 'w')
        self.gdb = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        # attached and continued once gdb said where the breakpoint is
        wait_until(lambda: 'Breakpoint 1 at' in open(self.log).read() or self.gdb.poll() is not None,
                   timeout=60, interval=0.1, what='gdb to attach')
        assert self.gdb.poll() is None, open(self.log).read()

    def __enter__(self):
        return self

    def hit(self, timeout=600):
        """Waits until the kernel stopped at the breakpoint (it stays stopped)."""
        try:
            wait_until(lambda: os.path.exists(self.hit_file) or self.gdb.poll() is not None, timeout=timeout,
                       interval=0.1, what='the breakpoint')
        except AssertionError:
            raise AssertionError(f'the kernel never reached the breakpoint:\n{open(self.log).read()[-2000:]}')
        assert os.path.exists(self.hit_file), open(self.log).read()[-2000:]
        return self

    def kill(self):
        """SIGKILLs the stopped kernel; returns once it is dead."""
        open(self.go_file, 'w').close()
        self.gdb.wait(timeout=60)
        wait_until(lambda: not alive(self.pid), timeout=30, what='the kernel to die')
        return self

    def __exit__(self, *exc):
        import shutil
        if self.gdb.poll() is None:
            open(self.go_file, 'w').close()  # whatever happened, the kernel is not left stopped
            try:
                self.gdb.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.gdb.kill()
                self.gdb.wait()
        self.out.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def revive(c, dead_pid, supervisor_pid, timeout=300):
    """After the kernel dead_pid was killed: its supervisor restarts it (a
    kernel that ran a minute), falls back to the last good one, or gives up
    (a kernel that died sooner); then the Seed is started again with `seed
    run`, as its owner would. Returns the new kernel's pid once it answers."""
    def kernel_up():
        try:
            p = kernel_pid(c)
        except (OSError, ValueError, KeyError):
            return None
        if p == dead_pid or not alive(p):
            return None
        return p if request(c.base + '/_seed/healthz', timeout=5).status == 200 else None

    def settled():
        return kernel_up() or (not alive(supervisor_pid) and 'gone')
    v = wait_until(settled, timeout=timeout, interval=0.3, what='the supervisor to restart or give up')
    if v != 'gone':
        return v
    seed('run', '--detach', '--addr', f'127.0.0.1:{c.port}', cwd=c.dir, timeout=900)
    return wait_until(kernel_up, timeout=timeout, interval=0.3, what='the kernel after seed run')


def kill_kernel(c):
    """SIGKILLs the kernel now; returns (its pid, its supervisor's pid)."""
    import signal
    pid = kernel_pid(c)
    sup = parent_pid(pid)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), timeout=30, what='the kernel to die')
    return pid, sup


def release(c, name):
    """Lets the model requests held on name (a step's "hold") be answered."""
    r = request(c.model_base + '/_release', method='POST', body=json.dumps({'name': name}),
                headers={'Content-Type': 'application/json'})
    assert r.status == 200, r.text


def holding(c, name):
    """Whether a model request is held on name right now."""
    return name in request(c.model_base + '/_state').json().get('holding', [])


# ---- an organism a test can break ----

# The starter organism with switches a test throws: a file organism/FAULT-crashloop
# (the test writes it into the Seed's folder, which the live sandbox sees)
# makes every start print 48 MiB (lines of 128 bytes) and exit; GET /fault/hang blocks its event
# loop for good; GET /fault/spew prints 24 MiB; GET /fault/mute swaps its server for one that accepts and
# never reads.
CRASHLOOP = """
// stdout may be a non-blocking pipe: a write can be partial, or EAGAIN
function writeAll(buf) {
  for (let off = 0; off < buf.length;) {
    try { off += require('node:fs').writeSync(1, buf, off); } catch (e) { if (e.code !== 'EAGAIN') throw e; }
  }
}
if (require('node:fs').existsSync(require('node:path').join(__dirname, '..', 'FAULT-crashloop'))) {
  const mb = Buffer.alloc(1 << 20, 'x');
  for (let i = 127; i < mb.length; i += 128) mb[i] = 10;
  for (let left = 48; left > 0; left--) writeAll(mb);
  process.exit(1);
}
"""
SWITCHES = """
routes['/fault/hang'] = { type: 'text/plain', body: () => { setTimeout(() => { for (;;); }, 50); return 'hanging'; } };
routes['/fault/spew'] = { type: 'text/plain', body: () => {
  const mb = Buffer.alloc(1 << 20, 'y');
  for (let i = 127; i < mb.length; i += 128) mb[i] = 10;
  setTimeout(() => { for (let left = 24; left > 0; left--) writeAll(mb); }, 10);
  return 'spewing';
} };
routes['/fault/mute'] = { type: 'text/plain', body: () => {
  setTimeout(() => server.close(() => require('node:net').createServer({ pauseOnConnect: true }, () => {})
    .listen(port, '127.0.0.1')), 50);
  return 'muted';
} };
"""


def organism_with_fault_switches(d):
    """before_run for ScriptedSeed: the switches above, committed on main
    (the owner's commit, verified at the first start: generation 2)."""
    p = os.path.join(d, 'organism', 'bin', 'server')
    src = open(p).read()
    src = src.replace("'use strict';\n", "'use strict';\n" + CRASHLOOP, 1) + SWITCHES
    open(p, 'w').write(src)
    subprocess.run(['git', '-c', f'safe.directory={d}', '-C', d, 'commit', '-qm', 'organism: fault switches',
                    'organism/bin/server'],  # only it: seed.yaml (the model server's address) is a kernel file
                   check=True, env={**os.environ, 'GIT_AUTHOR_NAME': 't', 'GIT_AUTHOR_EMAIL': 't@t',
                                    'GIT_COMMITTER_NAME': 't', 'GIT_COMMITTER_EMAIL': 't@t'})
    st = os.stat(d)  # what we wrote into .git belongs to the Seed's account, as the rest
    subprocess.run(['chown', '-R', f'{st.st_uid}:{st.st_gid}', os.path.join(d, '.git')], check=True)
