"""Helpers for driving a real Seed through its CLI and HTTP (stdlib only)."""
import http.client
import json
import os
import re
import socket
import subprocess
import time
import urllib.parse

SEED = os.environ.get('SEED_BIN', 'seed')

NAV = {'Sec-Fetch-Dest': 'document', 'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Site': 'none',
       'Sec-Fetch-User': '?1'}


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
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    path = u.path + ('?' + u.query if u.query else '')
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return Response(r.status, r.getheaders(), r.read())
    finally:
        conn.close()


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
