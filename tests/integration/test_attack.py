#!/usr/bin/env python3
"""End to end: the control plane's attack matrix against a real, planted and
running Seed (real CLI, kernel, PostgreSQL, bwrap, git) started with an owner
password and 127.0.0.1 as its trusted proxy. Every case asserts the exact
status and that nothing changed (no session made, sessions alive or gone as
they should be, sign-in links used or not). Prints one TAP line per case.

Clients: the kernel listens on 127.0.0.1, and every address of 127.0.0.0/8
reaches it, so a case that needs its own client connects from its own
source address (127.0.0.x). 127.0.0.1 is the trusted proxy: its
X-Forwarded-For names the client (IPv6 clients are grouped by /48).

The overall limit (1000 failures in 15 minutes) locks password sign-in for
the rest of the run, so that case comes last.

Connections: one client may hold 16 at once without a signed-in request (the
trusted proxy is not capped per client), 112 may in all; past that the oldest
are closed. A request head must be complete within 10 seconds (in all, not
idle).

Environment: SEED_BIN (the seed CLI).
"""
import glob
import hashlib
import http.client
import json
import os
import re
import select
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse

import taplib
from seedlib import Slowloris, closed_by_server, ctl_origin, free_port, link_from, seed, wait_until
from taplib import test

PASSWORD = 'attack-matrix pässword ' + os.urandom(6).hex()
NAV = {'Sec-Fetch-Dest': 'document', 'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Site': 'none',
       'Sec-Fetch-User': '?1'}
FETCH = {'Sec-Fetch-Dest': 'empty', 'Sec-Fetch-Mode': 'cors', 'Sec-Fetch-Site': 'same-origin'}


class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body
        self.text = body.decode('utf-8', 'replace')

    def header(self, name):
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def cookies(self):
        return [v for k, v in self.headers if k.lower() == 'set-cookie']


class Ctx:
    pass


def req(c, method, path, headers=None, body=None, src='127.0.0.1', host=None):
    """One request from source address src; host overrides the Host header."""
    conn = http.client.HTTPConnection('127.0.0.1', c.port, timeout=60, source_address=(src, 0))
    h = {'Host': host or f'seed.localhost:{c.port}'}  # the control plane's own origin
    h.update(headers or {})
    try:
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return Resp(r.status, r.getheaders(), r.read())
    finally:
        conn.close()


def cli(c, method, path, body=None, headers=None):
    token = open(os.path.join(c.dir, '.seed', 'control-token')).read().strip()
    h = {'Authorization': 'Bearer ' + token}
    if body is not None:
        h['Content-Type'] = 'application/json'
        body = json.dumps(body)
    h.update(headers or {})
    return req(c, method, path, h, body)


def sessions(c):
    r = cli(c, 'GET', '/_seed/api/owner/sessions')
    assert r.status == 200, r.text
    return json.loads(r.body)['sessions']


def session_ids(c):
    return sorted(s['id'] for s in sessions(c))


def psql(c, sql):
    pw = open(os.path.join(c.dir, '.seed/secrets/postgres-password')).read().strip()
    p = subprocess.run(['psql', '-h', os.path.join(c.dir, '.seed/run'), '-U', 'postgres', '-d', 'seed_kernel',
                        '-AtX', '-v', 'ON_ERROR_STOP=1', '-c', sql],
                       capture_output=True, text=True, env={**os.environ, 'PGPASSWORD': pw}, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def new_link(c):
    """A fresh one-time link through the CLI's API; returns (path, token)."""
    r = cli(c, 'POST', '/_seed/api/login-links', {})
    assert r.status == 201, (r.status, r.text)
    url = json.loads(r.body)['url']
    u = urllib.parse.urlsplit(url)
    return u.path + '?' + u.query, urllib.parse.parse_qs(u.query)['t'][0]


def link_used(c, token):
    """'t' used, 'f' unused, '' no such row."""
    h = hashlib.sha256(token.encode()).hexdigest()
    return psql(c, f"SELECT used_at IS NOT NULL FROM signin_links WHERE hash = '{h}'")


def live_links(c):
    return int(psql(c, 'SELECT count(*) FROM signin_links WHERE used_at IS NULL AND '
                       'expires_at > (extract(epoch FROM now()) * 1000)::bigint'))


class Browser:
    """A signed-in browser: its cookie and the API token from its page."""

    def __init__(self, c, cookie):
        self.c, self.cookie = c, cookie
        self.token = None

    def cookie_header(self):
        return f'{self.c.cookie_name}={self.cookie}'

    def page(self, headers=None, **kw):
        h = dict(NAV) if headers is None else dict(headers)
        h['Cookie'] = self.cookie_header()
        return req(self.c, 'GET', '/_seed/', h, **kw)

    def load(self):
        r = self.page()
        assert r.status == 200, r.status
        m = re.search(r'<meta name="seed-token" content="([0-9a-f]{64})"', r.text)
        assert m, r.text[:300]
        self.token = m.group(1)
        return self

    def api(self, path, method='GET', body=None, token=None, extra=None, **kw):
        h = dict(FETCH)
        h['Cookie'] = self.cookie_header()
        t = self.token if token is None else token
        if t:
            h['X-Seed-Token'] = t
        if body is not None:
            h['Content-Type'] = 'application/json'
            h['Origin'] = ctl_origin(self.c.port)
            body = json.dumps(body)
        h.update(extra or {})
        return req(self.c, method, path, h, body, **kw)


def cookie_from(c, r):
    for sc in r.cookies():
        name, _, rest = sc.partition('=')
        if name == c.cookie_name:
            return rest.split(';', 1)[0]
    return None


def sign_in_with_link(c, src='127.0.0.1'):
    path, _ = new_link(c)
    r = req(c, 'GET', path, NAV, src=src)
    assert r.status == 200, r.status
    return Browser(c, cookie_from(c, r)).load()


def form_headers(c, extra=None):
    h = {'Sec-Fetch-Dest': 'document', 'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Site': 'same-origin',
         'Sec-Fetch-User': '?1', 'Origin': ctl_origin(c.port),
         'Content-Type': 'application/x-www-form-urlencoded'}
    h.update(extra or {})
    return h


def form(user, password):
    return urllib.parse.urlencode({'user': user, 'password': password})


GOOD = form('owner', PASSWORD)
BAD = form('owner', 'not the password at all')


def post_login(c, body, src, extra=None, headers=None):
    return req(c, 'POST', '/_seed/login', headers if headers is not None else form_headers(c, extra), body,
               src=src)


def assert_refused(r, status, c, before):
    """The exact status, no cookie set, and the live sessions unchanged."""
    assert r.status == status, (r.status, status, r.text[:300])
    assert cookie_from(c, r) is None, r.cookies()
    assert session_ids(c) == before, 'the sessions changed'


# ---- setup ------------------------------------------------------------------

def setup():
    c = Ctx()
    c.tmp = tempfile.mkdtemp(prefix='seed-attack-')
    os.chmod(c.tmp, 0o755)  # the unprivileged account must reach it when we are root
    c.port = free_port()
    c.name = 'attack'
    c.dir = os.path.join(c.tmp, c.name)
    out = seed('new', c.name, '--addr', f'127.0.0.1:{c.port}', '-e', f'SEED_OWNER_PASSWORD={PASSWORD}',
               '-e', 'SEED_TRUSTED_PROXIES=127.0.0.1', cwd=c.tmp, timeout=900)
    link = link_from(out.stdout)
    u = urllib.parse.urlsplit(link)
    r = req(c, 'GET', u.path + '?' + u.query, NAV)
    assert r.status == 200, r.status
    c.cookie_name = r.cookies()[0].split('=', 1)[0]
    c.owner = Browser(c, cookie_from(c, r)).load()
    return c


def teardown(c):
    if c is None:
        return
    seed('stop', '--dir', c.dir, check=False, timeout=120)
    shutil.rmtree(c.tmp, ignore_errors=True)


# ---- other sites --------------------------------------------------------------

@test
def forged_host_gets_no_page(c):
    before = session_ids(c)
    r = c.owner.page(host='evil.com')
    assert_refused(r, 421, c, before)
    assert c.owner.token not in r.text


@test
def dns_rebinding_host_reaches_no_api(c):
    # evil.com resolving to 127.0.0.1: the browser sends Host: evil.com:PORT.
    before = session_ids(c)
    r = c.owner.api('/_seed/api/status', host=f'evil.com:{c.port}')
    assert_refused(r, 421, c, before)
    r = req(c, 'GET', '/', host=f'evil.com:{c.port}')
    assert r.status == 421, r.status


@test
def lookalike_hosts_are_refused(c):
    before = session_ids(c)
    for host in ('localhost.evil.com', '127.0.0.1.nip.io', f'127.0.0.2:{c.port}', '[::2]', 'localhost:0'):
        r = req(c, 'GET', '/_seed/healthz', host=host)
        assert r.status == 421, (host, r.status)
    path, token = new_link(c)
    r = req(c, 'GET', path, NAV, host='evil.com')
    assert_refused(r, 421, c, before)
    assert link_used(c, token) == 'f'


@test
def seed_is_not_served_on_the_organism_origin(c):
    before = session_ids(c)
    r = c.owner.page(host=f'organism.localhost:{c.port}')
    assert_refused(r, 421, c, before)
    assert c.owner.token not in r.text
    path, token = new_link(c)
    r = req(c, 'GET', path, NAV, host=f'organism.localhost:{c.port}')
    assert_refused(r, 421, c, before)
    assert link_used(c, token) == 'f'


# ---- the control plane's own origin -------------------------------------------

APP_HOSTS = ('127.0.0.1', 'localhost', 'app.localhost', '[::1]')


@test
def the_app_origin_never_answers_for_the_control_plane(c):
    # The owner's cookie, the API token and even the CLI token are useless
    # on the app's origin: the API answers only on seed.localhost.
    before = session_ids(c)
    for name in APP_HOSTS:
        host = f'{name}:{c.port}'
        r = c.owner.api('/_seed/api/status', host=host)
        assert_refused(r, 421, c, before)
        assert 'seed.localhost' in json.loads(r.body)['error'], r.text
        r = cli(c, 'GET', '/_seed/api/status', headers={'Host': host})
        assert_refused(r, 421, c, before)
        r = c.owner.api('/_seed/api/owner/logout', method='POST', body={}, host=host)
        assert_refused(r, 421, c, before)
        r = c.owner.page(host=host)  # a navigation is sent to the control plane's origin
        assert_refused(r, 308, c, before)
        assert r.header('Location') == f'//seed.localhost:{c.port}/_seed/', r.header('Location')
        assert c.owner.token not in r.text
    assert req(c, 'GET', '/_seed/healthz', host=f'127.0.0.1:{c.port}').status == 200
    assert c.owner.api('/_seed/api/status').status == 200


@test
def a_sign_in_link_on_the_app_origin_moves_unused(c):
    before = session_ids(c)
    path, token = new_link(c)
    assert path.startswith('/_seed/login?t=')
    r = req(c, 'GET', path, NAV, host=f'localhost:{c.port}')
    assert_refused(r, 308, c, before)
    assert r.header('Location') == f'//seed.localhost:{c.port}{path}'
    assert link_used(c, token) == 'f'
    r = req(c, 'GET', path, NAV)  # where it was sent: signed in
    assert r.status == 200 and cookie_from(c, r)
    assert link_used(c, token) == 't'


@test
def the_password_form_answers_only_on_its_own_origin(c):
    before = session_ids(c)
    h = dict(form_headers(c), Origin=f'http://127.0.0.1:{c.port}')
    r = req(c, 'POST', '/_seed/login', h, GOOD, src='127.0.0.90', host=f'127.0.0.1:{c.port}')
    assert_refused(r, 421, c, before)
    r = req(c, 'GET', '/_seed/', NAV, src='127.0.0.90')
    assert r.status == 401
    assert 'autocomplete="current-password"' in r.text  # its own origin: the browser may save it
    assert 'autocomplete="off"' not in r.text


@test
def the_control_plane_origin_serves_no_app(c):
    r = req(c, 'GET', '/', NAV)
    assert r.status == 308 and r.header('Location') == '/_seed/', (r.status, r.header('Location'))
    for path in ('/healthz', '/probe', '/x/y'):
        r = req(c, 'GET', path, NAV)
        assert r.status == 404, (path, r.status)
        assert 'not served on this origin' in r.text
    r = req(c, 'POST', '/api/things', {'Content-Type': 'application/json'}, '{}')
    assert r.status == 404
    r = req(c, 'GET', '/favicon.ico')  # the control plane's own icon, not a 404
    assert r.status == 200 and r.header('Content-Type') == 'image/svg+xml', (r.status, r.header('Content-Type'))
    assert req(c, 'GET', '/healthz', host=f'127.0.0.1:{c.port}').status == 200  # the app, on its own origin


@test
def the_session_cookie_is_strict_and_host_only(c):
    path, _ = new_link(c)
    r = req(c, 'GET', path, NAV, src='127.0.0.91')
    assert r.status == 200, r.status
    assert b'<meta http-equiv="refresh" content="0;url=/_seed/">' in r.body
    sc = [x for x in r.cookies() if x.startswith(c.cookie_name + '=')][0]
    attrs = [a.strip().lower() for a in sc.split(';')[1:]]
    assert 'samesite=strict' in attrs and 'httponly' in attrs and 'path=/_seed' in attrs, sc
    assert not any(a.startswith('domain') for a in attrs), sc


@test
def foreign_cookies_are_expired_and_a_cookie_bomb_does_not_stop_a_link(c):
    # 40 cookies of 4000 bytes (160 KB of Cookie header): what a page on a
    # shared origin can plant. The link still signs in, and every one of
    # them is expired with the answers to page loads (16 at a time).
    bomb = '; '.join(f'bomb{i}=' + 'x' * 4000 for i in range(40))
    path, token = new_link(c)
    r = req(c, 'GET', path, dict(NAV, Cookie=bomb), src='127.0.0.92')
    assert r.status == 200, r.status
    assert link_used(c, token) == 't'
    expired = {x.split('=', 1)[0] for x in r.cookies() if 'Max-Age=0' in x}
    assert {f'bomb{i}' for i in range(16)} <= expired, sorted(expired)[:5]  # 16 an answer
    assert 'bomb0=; Path=/_seed; Max-Age=0' in r.cookies(), r.cookies()[:3]
    assert 'bomb0=; Path=/; Max-Age=0' in r.cookies(), r.cookies()[:3]
    r = c.owner.page(headers=dict(NAV, Cookie=bomb + '; ' + c.owner.cookie_header()))
    assert r.status == 200 and c.owner.token in r.text
    assert c.owner.api('/_seed/api/status', extra={'Cookie': bomb + '; ' + c.owner.cookie_header()}).status == 200


# ---- the API token ----------------------------------------------------------

@test
def cookie_only_api_call_is_refused(c):
    before = session_ids(c)
    r = c.owner.api('/_seed/api/status', token='')
    assert_refused(r, 401, c, before)
    assert c.owner.api('/_seed/api/status').status == 200  # the same browser with its token


@test
def wrong_token_is_refused(c):
    before = session_ids(c)
    wrong = ('0' if c.owner.token[0] != '0' else '1') + c.owner.token[1:]
    assert_refused(c.owner.api('/_seed/api/status', token=wrong), 401, c, before)


@test
def token_without_cookie_is_refused(c):
    before = session_ids(c)
    h = dict(FETCH, **{'X-Seed-Token': c.owner.token})
    assert_refused(req(c, 'GET', '/_seed/api/status', h), 401, c, before)


@test
def token_of_another_session_is_refused(c):
    other = sign_in_with_link(c)
    before = session_ids(c)
    r = c.owner.api('/_seed/api/status', token=other.token)
    assert_refused(r, 401, c, before)
    assert other.token != c.owner.token


@test
def token_in_a_query_string_is_refused(c):
    before = session_ids(c)
    for q in (f'token={c.owner.token}', f'x-seed-token={c.owner.token}', f'api_token={c.owner.token}'):
        r = c.owner.api('/_seed/api/status?' + q, token='')
        assert_refused(r, 400, c, before)
        r = c.owner.api('/_seed/api/status?' + q)  # even alongside the header
        assert_refused(r, 400, c, before)


@test
def forged_cookie_gets_the_private_page(c):
    before = session_ids(c)
    forged = Browser(c, 'ab' * 32)
    r = forged.page()
    assert_refused(r, 401, c, before)
    assert 'This Seed is private' in r.text
    assert forged.api('/_seed/api/status', token='0' * 64).status == 401


@test
def organism_page_calling_the_api_gets_401(c):
    # An organism script's fetch('/_seed/api/...'): the browser sends the
    # cookie (same origin) but the script has no token.
    before = session_ids(c)
    h = dict(FETCH, Cookie=c.owner.cookie_header(), Referer=ctl_origin(c.port) + '/')
    assert_refused(req(c, 'GET', '/_seed/api/status', h), 401, c, before)
    h.update({'Content-Type': 'application/json', 'Origin': ctl_origin(c.port)})
    r = req(c, 'POST', '/_seed/api/owner/logout', h, '{}')
    assert_refused(r, 401, c, before)
    assert c.owner.api('/_seed/api/status').status == 200  # still signed in


# ---- state-changing calls -------------------------------------------------------

@test
def cross_origin_post_is_refused(c):
    before = session_ids(c)
    r = c.owner.api('/_seed/api/owner/logout', 'POST', {},
                    extra={'Origin': 'http://evil.com', 'Sec-Fetch-Site': 'cross-site'})
    assert_refused(r, 403, c, before)
    r = c.owner.api('/_seed/api/owner/logout', 'POST', {}, extra={'Origin': 'http://evil.com'})
    assert_refused(r, 403, c, before)
    assert c.owner.api('/_seed/api/status').status == 200


@test
def form_encoded_post_to_an_api_is_refused(c):
    before = session_ids(c)
    h = dict(FETCH, Cookie=c.owner.cookie_header(), **{'X-Seed-Token': c.owner.token,
                                                      'Content-Type': 'application/x-www-form-urlencoded',
                                                      'Origin': ctl_origin(c.port)})
    r = req(c, 'POST', '/_seed/api/owner/logout', h, 'a=1')
    assert_refused(r, 415, c, before)
    h['Content-Type'] = 'text/plain'
    assert_refused(req(c, 'POST', '/_seed/api/owner/logout', h, '{}'), 415, c, before)
    assert c.owner.api('/_seed/api/status').status == 200


@test
def browser_post_without_fetch_metadata_is_refused(c):
    before = session_ids(c)
    h = {'Cookie': c.owner.cookie_header(), 'X-Seed-Token': c.owner.token, 'Content-Type': 'application/json',
         'Origin': ctl_origin(c.port)}
    assert_refused(req(c, 'POST', '/_seed/api/owner/logout', h, '{}'), 403, c, before)
    assert c.owner.api('/_seed/api/status').status == 200


# ---- navigations only -------------------------------------------------------------

@test
def fetch_of_the_page_gets_no_token(c):
    before = session_ids(c)
    r = c.owner.page(headers=FETCH)
    assert_refused(r, 403, c, before)
    assert c.owner.token not in r.text


@test
def page_in_a_frame_gets_no_token(c):
    before = session_ids(c)
    r = c.owner.page(headers={'Sec-Fetch-Dest': 'iframe', 'Sec-Fetch-Mode': 'navigate',
                              'Sec-Fetch-Site': 'same-origin'})
    assert_refused(r, 403, c, before)
    assert c.owner.token not in r.text


@test
def page_without_fetch_metadata_is_refused(c):
    before = session_ids(c)
    r = c.owner.page(headers={})
    assert_refused(r, 400, c, before)
    assert 'too old' in r.text
    assert c.owner.token not in r.text


@test
def link_without_fetch_metadata_stays_unused(c):
    before = session_ids(c)
    path, token = new_link(c)
    assert_refused(req(c, 'GET', path, {}), 400, c, before)
    assert link_used(c, token) == 'f'
    r = req(c, 'GET', path, NAV)  # a real navigation still signs in
    assert r.status == 200
    assert link_used(c, token) == 't'


@test
def link_fetched_by_a_script_stays_unused(c):
    before = session_ids(c)
    path, token = new_link(c)
    assert_refused(req(c, 'GET', path, FETCH), 403, c, before)
    assert_refused(req(c, 'GET', path, {'Sec-Fetch-Dest': 'iframe', 'Sec-Fetch-Mode': 'navigate',
                                        'Sec-Fetch-Site': 'cross-site'}), 403, c, before)
    assert link_used(c, token) == 'f'


@test
def service_worker_registration_is_refused(c):
    before = session_ids(c)
    h = {'Service-Worker': 'script', 'Sec-Fetch-Dest': 'serviceworker', 'Sec-Fetch-Mode': 'same-origin',
         'Sec-Fetch-Site': 'same-origin', 'Cookie': c.owner.cookie_header()}
    for path in ('/sw.js', '/', '/_seed/', '/_seed/app.js'):
        r = req(c, 'GET', path, h)
        assert_refused(r, 403, c, before)
        assert c.owner.token not in r.text


# ---- the organism's admin screens (organism.localhost) -------------------------

ADMIN_HOST = 'organism.localhost'


def csps(r):
    return [v for k, v in r.headers if k.lower() == 'content-security-policy']


def extensions_file(c):
    return os.path.join(c.dir, 'organism', 'control', 'extensions.json')


def write_extensions(c, text):
    """organism/control/extensions.json in the live folder, readable by the Seed's account."""
    p = extensions_file(c)
    os.makedirs(os.path.dirname(p), mode=0o755, exist_ok=True)
    if os.path.lexists(p):
        os.unlink(p)
    with open(p, 'w') as f:
        f.write(text)
    os.chmod(p, 0o644)


def remove_extensions(c):
    shutil.rmtree(os.path.dirname(extensions_file(c)), ignore_errors=True)


@test
def nothing_under_seed_answers_on_the_admin_origin(c):
    before = session_ids(c)
    for name in (f'{ADMIN_HOST}:{c.port}', ADMIN_HOST, f'x.{ADMIN_HOST}:{c.port}', f'ORGANISM.localhost:{c.port}'):
        for path in ('/_seed/api/status', '/_seed/api/extensions'):
            r = c.owner.api(path, host=name)
            assert_refused(r, 421, c, before)
            assert c.owner.token not in r.text
            r = cli(c, 'GET', path, headers={'Host': name})
            assert_refused(r, 421, c, before)
        r = c.owner.api('/_seed/api/owner/logout', method='POST', body={}, host=name)
        assert_refused(r, 421, c, before)
        for path in ('/_seed', '/_seed/', '/_seed/app.js', '/_seed/logo', '/_seed/healthz', '/_seed/x/../api'):
            r = c.owner.page(host=name) if path == '/_seed/' else req(c, 'GET', path, NAV, host=name)
            assert r.status in (400, 421), (name, path, r.status)
            assert c.owner.token not in r.text
    assert c.owner.api('/_seed/api/status').status == 200


@test
def only_the_control_plane_may_frame_the_admin_origin(c):
    r = req(c, 'GET', '/', NAV, host=f'{ADMIN_HOST}:{c.port}')
    assert r.status == 200, r.status
    assert csps(r) == [f'frame-ancestors http://seed.localhost:{c.port}'], csps(r)
    assert r.header('Cross-Origin-Opener-Policy') == 'unsafe-none'
    # The kernel's own answers there too (here: a refused service worker),
    # so a screen whose app is down says so inside its frame.
    r = req(c, 'GET', '/sw.js', {'Service-Worker': 'script'}, host=f'{ADMIN_HOST}:{c.port}')
    assert r.status == 403 and len(csps(r)) == 1, (r.status, csps(r))
    assert f'frame-ancestors http://seed.localhost:{c.port};' in csps(r)[0] and "default-src 'none'" in csps(r)[0]
    r = req(c, 'GET', '/sw.js', {'Service-Worker': 'script'}, host=f'127.0.0.1:{c.port}')
    assert r.status == 403 and "frame-ancestors 'none'" in csps(r)[0], csps(r)
    r = req(c, 'GET', '/', NAV, host=ADMIN_HOST)  # reached without a port (a forward on port 80)
    assert csps(r) == ['frame-ancestors http://seed.localhost'], csps(r)
    # Every other name of the app refuses every frame, as before.
    for name in ('127.0.0.1', 'localhost', 'app.localhost', '[::1]', f'x.{ADMIN_HOST}', 'organism2.localhost'):
        r = req(c, 'GET', '/', NAV, host=f'{name}:{c.port}')
        assert r.status == 200, (name, r.status)
        assert csps(r) == ["frame-ancestors 'none'"], (name, csps(r))


@test
def the_page_frames_only_the_admin_origin(c):
    r = c.owner.page()
    assert r.status == 200
    admin = f'http://{ADMIN_HOST}:{c.port}'
    assert len(csps(r)) == 1, csps(r)
    csp = csps(r)[0]
    assert csp.endswith(f'; frame-src {admin}'), csp
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert r.header('X-Frame-Options') == 'DENY'
    assert f'<meta name="seed-admin-origin" content="{admin}">' in r.text
    # Nothing else under /_seed frames anything.
    for resp in (c.owner.api('/_seed/api/status'), req(c, 'GET', '/_seed/healthz')):
        assert all('frame-src' not in v for v in csps(resp)), csps(resp)


@test
def the_admin_screens_list_needs_the_owner(c):
    write_extensions(c, json.dumps({'screens': [
        {'id': 'orders', 'title': 'Orders', 'path': '/admin/orders'},
        {'id': 'away', 'title': 'Away', 'path': 'https://evil.example/'},
        {'id': 'back', 'title': 'Back', 'path': '/_seed/api/status'},
        {'id': 'up', 'title': 'Up', 'path': '/%2e%2e/etc/passwd'},
        {'id': 'crlf', 'title': 'CRLF', 'path': '/a\r\nSet-Cookie: x=1'},
    ]}))
    try:
        before = session_ids(c)
        path = '/_seed/api/extensions'
        assert_refused(req(c, 'GET', path, FETCH), 401, c, before)
        assert_refused(c.owner.api(path, token=''), 401, c, before)  # the cookie alone
        assert_refused(c.owner.api(path, token='0' * 64), 401, c, before)
        assert_refused(req(c, 'GET', path, {'Authorization': 'Bearer wrong'}), 401, c, before)
        r = c.owner.api(path + '?token=' + c.owner.token)
        assert_refused(r, 400, c, before)
        for name in APP_HOSTS:
            assert_refused(c.owner.api(path, host=f'{name}:{c.port}'), 421, c, before)
        r = c.owner.api(path, method='POST', body={})
        assert r.status == 405, r.status
        r = c.owner.api(path)
        assert r.status == 200, (r.status, r.text)
        d = json.loads(r.body)
        assert d['file'] == 'organism/control/extensions.json'
        assert d['screens'] == [{'id': 'orders', 'title': 'Orders', 'path': '/admin/orders'}], d
        assert len(d['errors']) == 4, d['errors']
        for i, e in enumerate(d['errors']):
            assert e.startswith(f'screens[{i + 1}]'), e
        assert 'evil.example' not in r.text and 'Set-Cookie' not in r.text
        assert cli(c, 'GET', path).status == 200
        st = json.loads(cli(c, 'GET', '/_seed/api/status').body)
        assert st['admin_screens'].startswith('1 shown; 4 problems in organism/control/extensions.json: screens[1]'), st

        # Bad files: each one error, nothing lost, nothing of the host read.
        for text, why in (('{"screens": [', 'not JSON'), ('[]', 'must be an object'),
                          (' ' * (64 * 1024 + 1), 'larger than 64 KiB')):
            write_extensions(c, text)
            d = json.loads(c.owner.api(path).body)
            assert d['screens'] == [] and len(d['errors']) == 1 and why in d['errors'][0], d
        os.unlink(extensions_file(c))
        os.symlink('/etc/passwd', extensions_file(c))
        r = c.owner.api(path)
        d = json.loads(r.body)
        assert r.status == 200 and d['screens'] == [], d
        assert 'symbolic link' in d['errors'][0] and 'root:' not in r.text, d
        remove_extensions(c)
        d = json.loads(c.owner.api(path).body)
        assert d == {'file': 'organism/control/extensions.json', 'screens': [], 'errors': []}, d
        assert 'admin_screens' not in json.loads(cli(c, 'GET', '/_seed/api/status').body)
    finally:
        remove_extensions(c)


# ---- sign-in links ------------------------------------------------------------

@test
def link_reuse_is_refused(c):
    path, token = new_link(c)
    r = req(c, 'GET', path, NAV, src='127.0.0.60')
    assert r.status == 200
    before = session_ids(c)
    r = req(c, 'GET', path, NAV, src='127.0.0.60')
    assert_refused(r, 403, c, before)
    assert 'no longer valid' in r.text
    assert link_used(c, token) == 't'


@test
def expired_link_is_refused(c):
    path, token = new_link(c)
    h = hashlib.sha256(token.encode()).hexdigest()
    psql(c, f"UPDATE signin_links SET expires_at = (extract(epoch FROM now()) * 1000)::bigint - 1000 "
            f"WHERE hash = '{h}'")
    before = session_ids(c)
    assert_refused(req(c, 'GET', path, NAV, src='127.0.0.61'), 403, c, before)
    assert link_used(c, token) == 'f'  # refused, not consumed


@test
def login_links_need_the_cli_token(c):
    before, links = session_ids(c), live_links(c)
    r = c.owner.api('/_seed/api/login-links', 'POST', {})  # a browser session with its token
    assert_refused(r, 401, c, before)
    r = req(c, 'POST', '/_seed/api/login-links', {'Authorization': 'Bearer ' + '0' * 64,
                                                   'Content-Type': 'application/json'}, '{}')
    assert_refused(r, 401, c, before)
    assert live_links(c) == links
    r = cli(c, 'POST', '/_seed/api/login-links', {})
    assert r.status == 201, r.text
    assert json.loads(r.body)['url'].startswith(ctl_origin(c.port) + '/_seed/login?t=')
    assert live_links(c) == links + 1


# ---- sessions -----------------------------------------------------------------

@test
def revoked_session_is_refused(c):
    b = sign_in_with_link(c)
    ids_before = set(session_ids(c))
    r = b.api('/_seed/api/owner/sessions')
    sid = next(s['id'] for s in json.loads(r.body)['sessions'] if s['current'])
    r = c.owner.api(f'/_seed/api/owner/sessions/{sid}/revoke', 'POST', {})
    assert r.status == 200, r.text
    assert set(session_ids(c)) == ids_before - {sid}
    before = session_ids(c)
    assert_refused(b.page(), 401, c, before)
    assert_refused(b.api('/_seed/api/status'), 401, c, before)
    assert c.owner.api('/_seed/api/status').status == 200


@test
def sign_out_invalidates_cookie_and_token(c):
    b = sign_in_with_link(c)
    r = b.api('/_seed/api/owner/logout', 'POST', {})
    assert r.status == 200, r.text
    assert any('Max-Age=0' in v for v in r.cookies())
    before = session_ids(c)
    r = b.page()
    assert_refused(r, 401, c, before)
    assert b.token not in r.text
    assert_refused(b.api('/_seed/api/status'), 401, c, before)
    assert_refused(b.api('/_seed/api/owner/logout', 'POST', {}), 401, c, before)
    assert c.owner.api('/_seed/api/status').status == 200


# ---- password sign-in -----------------------------------------------------------

@test
def sign_in_form_only_for_navigations(c):
    before = session_ids(c)
    r = req(c, 'GET', '/_seed/', NAV, src='127.0.0.70')
    assert_refused(r, 401, c, before)
    assert '<form class="sign-in" method="post" action="/_seed/login"' in r.text
    assert '<script' not in r.text
    assert r.header('Referrer-Policy') == 'same-origin'
    assert r.header('Cross-Origin-Opener-Policy') == 'same-origin'
    r = req(c, 'GET', '/_seed/', FETCH, src='127.0.0.70')
    assert_refused(r, 403, c, before)
    assert '<form' not in r.text


@test
def password_sign_in_gives_a_session(c):
    before = session_ids(c)
    r = post_login(c, GOOD, '127.0.0.71')
    assert r.status == 303, (r.status, r.text[:300])
    assert r.header('Location') == '/_seed/'
    cookie = cookie_from(c, r)
    assert cookie and re.fullmatch(r'[0-9a-f]{64}', cookie)
    assert len(session_ids(c)) == len(before) + 1
    b = Browser(c, cookie).load()
    assert b.api('/_seed/api/status').status == 200


@test
def wrong_password_or_user_is_refused(c):
    before = session_ids(c)
    r = post_login(c, BAD, '127.0.0.72')
    assert_refused(r, 401, c, before)
    assert 'Wrong username or password.' in r.text
    assert_refused(post_login(c, form('admin', PASSWORD), '127.0.0.72'), 401, c, before)
    assert_refused(post_login(c, form('owner', PASSWORD + ' '), '127.0.0.72'), 401, c, before)


@test
def sixth_wrong_password_is_not_checked(c):
    before = session_ids(c)
    for _ in range(5):
        assert_refused(post_login(c, BAD, '127.0.0.73'), 401, c, before)
    r = post_login(c, BAD, '127.0.0.73')
    assert_refused(r, 429, c, before)
    assert 'Too many failed sign-ins' in r.text


@test
def correct_password_while_limited_is_not_checked(c):
    before = session_ids(c)
    wrong = post_login(c, BAD, '127.0.0.73')
    right = post_login(c, GOOD, '127.0.0.73')
    assert_refused(right, 429, c, before)
    assert right.body == wrong.body  # the same answer either way
    assert post_login(c, GOOD, '127.0.0.74').status == 303  # another client is not limited


@test
def limited_client_can_still_use_a_link(c):
    path, token = new_link(c)
    r = req(c, 'GET', path, NAV, src='127.0.0.73')
    assert r.status == 200, r.status
    assert link_used(c, token) == 't'


@test
def same_ipv6_48_shares_the_limit(c):
    before = session_ids(c)
    for i in range(5):
        r = post_login(c, BAD, '127.0.0.1', {'X-Forwarded-For': f'2001:db8:aa:{i + 1}::{i + 1}'})
        assert_refused(r, 401, c, before)
    r = post_login(c, GOOD, '127.0.0.1', {'X-Forwarded-For': '2001:db8:aa:ffff::7'})
    assert_refused(r, 429, c, before)
    r = post_login(c, GOOD, '127.0.0.1', {'X-Forwarded-For': '2001:db8:ab::1'})
    assert r.status == 303, r.status


@test
def spoofed_forwarded_for_from_an_untrusted_peer_is_ignored(c):
    before = session_ids(c)
    for i in range(5):
        r = post_login(c, BAD, '127.0.0.75', {'X-Forwarded-For': f'198.51.100.{i}'})
        assert_refused(r, 401, c, before)
    r = post_login(c, GOOD, '127.0.0.75', {'X-Forwarded-For': '203.0.113.200'})
    assert_refused(r, 429, c, before)


@test
def forwarded_for_cannot_be_prepended_through_the_proxy(c):
    # Behind the trusted proxy, a client's own X-Forwarded-For entries are to
    # the left of what the proxy appends: the right-most untrusted one counts.
    before = session_ids(c)
    for i in range(5):
        r = post_login(c, BAD, '127.0.0.1', {'X-Forwarded-For': f'198.51.100.{i}, 192.0.2.33'})
        assert_refused(r, 401, c, before)
    r = post_login(c, GOOD, '127.0.0.1', {'X-Forwarded-For': '198.51.100.99, 192.0.2.33'})
    assert_refused(r, 429, c, before)


@test
def bad_links_count_as_failed_sign_ins(c):
    before = session_ids(c)
    for _ in range(5):
        r = req(c, 'GET', '/_seed/login?t=' + os.urandom(32).hex(), NAV, src='127.0.0.76')
        assert_refused(r, 403, c, before)
    assert_refused(post_login(c, GOOD, '127.0.0.76'), 429, c, before)


@test
def sign_in_form_post_must_be_a_same_origin_navigation(c):
    before = session_ids(c)
    port = c.port
    cases = [
        ({'Sec-Fetch-Site': 'cross-site', 'Origin': 'http://evil.com'}, 403),
        ({'Sec-Fetch-Site': 'same-site'}, 403),
        ({'Origin': 'http://evil.com'}, 403),
        ({'Origin': 'null'}, 403),
        ({'Sec-Fetch-Dest': 'iframe'}, 403),
        ({'Sec-Fetch-Mode': 'cors', 'Sec-Fetch-Dest': 'empty'}, 403),
        ({'Content-Type': 'application/json'}, 415),
        ({'Content-Type': 'text/plain'}, 415),
    ]
    for extra, status in cases:
        r = post_login(c, GOOD, '127.0.0.77', extra)
        assert r.status == status, (extra, r.status)
        assert_refused(r, status, c, before)
    r = post_login(c, GOOD, '127.0.0.77', headers={'Content-Type': 'application/x-www-form-urlencoded',
                                                    'Origin': ctl_origin(port)})
    assert_refused(r, 400, c, before)  # no Fetch Metadata: a browser too old
    # None of those was a password check: the client is not limited.
    assert post_login(c, GOOD, '127.0.0.77').status == 303


@test
def the_password_is_nowhere(c):
    needle = PASSWORD.encode()
    hits = []
    for p in glob.glob(os.path.join(c.dir, '.seed/logs/*')):
        if os.path.isfile(p) and needle in open(p, 'rb').read():
            hits.append(p)
    pw = open(os.path.join(c.dir, '.seed/secrets/postgres-password')).read().strip()
    dump = subprocess.run(['pg_dumpall', '-h', os.path.join(c.dir, '.seed/run'), '-U', 'postgres'],
                          capture_output=True, env={**os.environ, 'PGPASSWORD': pw}, timeout=120)
    assert dump.returncode == 0, dump.stderr
    if needle in dump.stdout:
        hits.append('pg_dumpall')
    for p in glob.glob('/proc/[0-9]*'):
        for f in ('cmdline', 'environ'):
            try:
                if needle in open(f'{p}/{f}', 'rb').read():
                    hits.append(f'{p}/{f}')
            except OSError:
                pass
    assert not hits, hits
    log = open(os.path.join(c.dir, '.seed/logs/kernel.log')).read()
    assert 'password sign-in is on' in log
    assert 'made 5 failed sign-ins' in log


# ---- the logo -------------------------------------------------------------------------

IMG = {'Sec-Fetch-Dest': 'image', 'Sec-Fetch-Mode': 'no-cors', 'Sec-Fetch-Site': 'same-origin'}


def logo(c, cookie=True, host=None):
    h = dict(IMG)
    if cookie:
        h['Cookie'] = c.owner.cookie_header()
    return req(c, 'GET', '/_seed/logo', h, host=host)


@test
def logo_is_sandboxed_and_private(c):
    # The planted Seed's own knowledge/logo.svg, as the owner's <img> gets it.
    r = logo(c)
    assert r.status == 200, r.status
    assert r.header('Content-Type') == 'image/svg+xml'
    assert r.body == open(os.path.join(c.dir, 'knowledge/logo.svg'), 'rb').read()
    csp = [v for k, v in r.headers if k.lower() == 'content-security-policy']
    assert len(csp) == 1 and csp[0].startswith('sandbox;'), csp
    assert "default-src 'none'" in csp[0] and 'script' not in csp[0], csp
    assert r.header('X-Content-Type-Options') == 'nosniff'
    assert r.header('Content-Disposition') == 'inline'
    assert r.header('Cache-Control') == 'no-cache'
    # Nobody else gets it, nor does the organism's origin.
    r = logo(c, cookie=False)
    assert r.status == 401 and b'<svg' not in r.body, r.status
    r = logo(c, host=f'organism.localhost:{c.port}')
    assert r.status == 421, r.status


@test
def symlinked_logo_serves_no_host_file(c):
    # Sandboxed code can commit knowledge/logo.svg as a link: the checkout
    # then points at a host file. It is refused, and logo.png does not stand in.
    svg = os.path.join(c.dir, 'knowledge/logo.svg')
    png = os.path.join(c.dir, 'knowledge/logo.png')
    saved = svg + '.saved'
    os.rename(svg, saved)
    try:
        with open(png, 'wb') as f:
            f.write(b'\x89PNG\r\n\x1a\n' + b'\0' * 16)
        for target in ('/etc/passwd', os.path.join(c.dir, '.seed/control-token'), 'logo.svg.saved'):
            os.symlink(target, svg)
            try:
                r = logo(c)
                assert r.status == 404, (target, r.status)
                assert b'root:' not in r.body and b'PNG' not in r.body and b'<svg' not in r.body, target
            finally:
                os.unlink(svg)
        # A PNG that is not one is refused too.
        with open(png, 'wb') as f:
            f.write(b'<html><script>alert(document.cookie)</script></html>')
        r = logo(c)
        assert r.status == 404 and b'<script' not in r.body, r.status
    finally:
        if os.path.lexists(svg):
            os.unlink(svg)
        if os.path.exists(png):
            os.unlink(png)
        os.rename(saved, svg)
    assert logo(c).status == 200
    log = open(os.path.join(c.dir, '.seed/logs/kernel.log')).read()
    assert 'knowledge/logo.svg is a symlink or leads outside the Seed folder' in log
    assert 'knowledge/logo.png is not a PNG' in log


# ---- connections ----------------------------------------------------------------------

CONN_CAP = 16
HEAD_TIMEOUT_S = 10


def ctl_host(c):
    """The control plane's Host header value."""
    return f'seed.localhost:{c.port}'


def connect_from(c, src):
    """A non-blocking connection from source address src (so peeking never waits)."""
    s = socket.create_connection(('127.0.0.1', c.port), timeout=30, source_address=(src, 0))
    s.setblocking(False)
    return s


def refused(c, src):
    """A request from src is closed unanswered."""
    try:
        r = req(c, 'GET', '/_seed/healthz', src=src)
    except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
        return True
    raise AssertionError(f'a client over its connection cap got {r.status}')


@test
def idle_connections_from_one_client_are_capped(c):
    # A client opens 40 connections and never sends a byte (each would hold a
    # server thread): the newest 16 are kept, the oldest closed as new ones come.
    attacker = '127.0.0.90'
    socks = []
    t0 = time.monotonic()
    try:
        for _ in range(40):
            socks.append(connect_from(c, attacker))
        n = len(socks) - CONN_CAP
        wait_until(lambda: sum(map(closed_by_server, socks)) >= n, timeout=5, interval=0.01,
                   what=f'{n} connections closed')
        closed = [i for i, s in enumerate(socks) if closed_by_server(s)]
        assert closed == list(range(n)), f'closed: {closed}'

        # A request that comes at once is answered, even that client's; so
        # are other clients, the owner and the CLI (through the trusted
        # proxy's address).
        assert req(c, 'GET', '/_seed/healthz', src=attacker).status == 200
        assert req(c, 'GET', '/_seed/healthz', src='127.0.0.91').status == 200
        assert c.owner.page(src='127.0.0.92').status == 200
        assert c.owner.api('/_seed/api/status', src='127.0.0.92').status == 200
        assert cli(c, 'GET', '/_seed/api/status').status == 200
        # The idle ones are dropped once the head timeout passes, not before.
        wait_until(lambda: all(map(closed_by_server, socks)), timeout=40, interval=0.1,
                   what='the idle connections closed')
        took = time.monotonic() - t0
        assert took >= HEAD_TIMEOUT_S - 1, f'idle connections closed after {took:.1f} s'
    finally:
        for s in socks:
            s.close()
    assert req(c, 'GET', '/_seed/healthz', src=attacker).status == 200
    log = open(os.path.join(c.dir, '.seed/logs/kernel.log')).read()
    assert log.count(f'client {attacker} holds 16 connections without a signed-in request') == 1, \
        'not logged exactly once'


@test
def half_a_request_head_does_not_hold_a_connection(c):
    # Slowloris: a head that never ends is dropped after the head timeout.
    s = connect_from(c, '127.0.0.93')
    try:
        t0 = time.monotonic()
        s.sendall(f'GET /_seed/healthz HTTP/1.1\r\nHost: {ctl_host(c)}\r\nX-Slow: 1\r\n'.encode())
        wait_until(lambda: closed_by_server(s), timeout=40, interval=0.1, what='the connection closed')
        took = time.monotonic() - t0
        assert took >= HEAD_TIMEOUT_S - 1, f'closed after {took:.1f} s'
    finally:
        s.close()


@test
def a_head_trickled_byte_by_byte_is_cut_at_its_deadline(c):
    # A byte every half second never lets the connection go idle: the head
    # deadline is total, from the connection's start.
    s = connect_from(c, '127.0.0.94')
    try:
        t0 = time.monotonic()
        s.sendall(f'GET /_seed/healthz HTTP/1.1\r\nHost: {ctl_host(c)}\r\nX-Slow: '.encode())
        while not closed_by_server(s) and time.monotonic() - t0 < 20:
            try:
                s.send(b'a')
            except OSError:
                break
            select.select([s], [], [], 0.5)
        took = time.monotonic() - t0
        assert closed_by_server(s), f'a head trickled for {took:.1f} s was never cut'
        # Not before the deadline; the upper bound only says it was cut, with room for a loaded machine.
        assert HEAD_TIMEOUT_S - 0.5 <= took <= HEAD_TIMEOUT_S + 15, f'cut after {took:.1f} s'
    finally:
        s.close()


@test
def slowloris_from_many_addresses_leaves_the_owner_answered(c):
    # 20 loopback addresses x 15 slow heads (more than all connections): each
    # of the owner's calls, signed-in browser and CLI, is still answered.
    calls = 28
    answered = []
    with Slowloris(c.port, ctl_host(c), 20, 15) as loris:
        loris.started()
        t0 = time.monotonic()
        for i in range(calls):  # one every 0.4 s: through the 10 s wave of cut heads too
            if time.monotonic() - t0 > 40:
                break
            loris.stop.wait(max(0, t0 + 0.4 * i - time.monotonic()))
            try:
                r = c.owner.api('/_seed/api/status', src='127.0.0.95') if i % 2 else cli(c, 'GET', '/_seed/api/status')
                answered.append(r.status == 200)
            except (OSError, http.client.HTTPException):
                answered.append(False)
        opened = loris.opened
    print(f'# slowloris: {sum(answered)} of {calls} owner calls answered in {time.monotonic() - t0:.1f} s; '
          f'{opened} slow connections opened', flush=True)
    assert sum(answered) == calls, f'{sum(answered)} of {calls} answered'
    assert opened >= 300


# ---- a hostile page's floods and speculative loads ---------------------------------



def bad_link():
    return '/_seed/login?t=' + os.urandom(32).hex()


@test
def prefetched_sign_in_links_are_not_checked(c):
    # Speculation rules on an organism page prefetch or prerender links: a
    # bad one does not count as a failure, a good one is not used up.
    before = session_ids(c)
    src = '127.0.0.100'
    for purpose in ['prefetch', 'prefetch;prerender'] * 10:
        r = req(c, 'GET', bad_link(), {**NAV, 'Sec-Purpose': purpose}, src=src)
        assert_refused(r, 503, c, before)
    path, token = new_link(c)
    assert_refused(req(c, 'GET', path, {**NAV, 'Sec-Purpose': 'prefetch;prerender'}, src=src), 503, c, before)
    assert link_used(c, token) == 'f'
    assert_refused(post_login(c, GOOD, src, {'Sec-Purpose': 'prefetch'}), 503, c, before)
    assert req(c, 'GET', path, NAV, src=src).status == 200  # "Signed in"
    assert post_login(c, GOOD, src).status == 303


@test
def a_limited_address_does_not_lock_out_the_others(c):
    before = session_ids(c)
    for i in range(1010):
        r = req(c, 'GET', bad_link(), NAV, src='127.0.0.101')
        assert r.status == 403, (i, r.status)
    assert_refused(post_login(c, GOOD, '127.0.0.101'), 429, c, before)
    assert post_login(c, GOOD, '127.0.0.102').status == 303


@test
def chunked_api_body_over_1_mib_gets_413(c):
    links = live_links(c)
    token = open(os.path.join(c.dir, '.seed', 'control-token')).read().strip()
    s = socket.create_connection(('127.0.0.1', c.port), timeout=30)
    try:
        s.sendall((f'POST /_seed/api/login-links HTTP/1.1\r\nHost: {ctl_host(c)}\r\n'
                   f'Authorization: Bearer {token}\r\nContent-Type: application/json\r\n'
                   'Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n').encode())
        chunk = b'10000\r\n' + b' ' * 65536 + b'\r\n'
        for _ in range(24):  # 1.5 MiB
            s.sendall(chunk)
        s.sendall(b'0\r\n\r\n')
        data = b''
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    finally:
        s.close()
    assert data.startswith(b'HTTP/1.1 413'), data[:300]
    assert live_links(c) == links


def log_count(c, name, needle):
    try:
        return open(os.path.join(c.dir, '.seed/logs', name), errors='replace').read().count(needle)
    except FileNotFoundError:
        return 0


@test
def a_flood_of_refused_requests_is_logged_at_a_bounded_rate(c):
    kernel_log = os.path.join(c.dir, '.seed/logs/kernel.log')
    size = os.path.getsize(kernel_log)
    src = '127.0.0.103'
    for _ in range(500):
        assert req(c, 'GET', '/_seed/api/status', {'Authorization': 'Bearer wrong'}, src=src).status == 401
        assert req(c, 'GET', '/_seed/', NAV, src=src, host='evil.example').status == 421
        assert req(c, 'GET', bad_link(), NAV, src=src).status == 403
    needle = f'wrong bearer token (client {src})'
    assert log_count(c, 'kernel.log', needle) == 1
    # supervisor.log (the kernel's stderr, rotated too) gets the same one line.
    wait_until(lambda: log_count(c, 'supervisor.log', needle) >= 1, timeout=10, interval=0.1,
               what='the line in supervisor.log')
    assert log_count(c, 'supervisor.log', needle) == 1
    assert log_count(c, 'kernel.log', f'used, expired or unknown (client {src})') == 1
    grown = os.path.getsize(kernel_log) - size
    assert grown < 8192, f'kernel.log grew {grown} bytes for 1500 refused requests'


# ---- the owner's badge and point and ask (seed 001, "The owner's badge") ---------

BADGE_TAG = '<script src="/_seed/badge.js" async></script>'


def app_host(c):
    return f'localhost:{c.port}'


def png_bytes(w, h, pad=0):
    import struct
    import zlib
    def chunk(t, d):
        return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    raw = b''.join(b'\x00' + b'\x00\x00\x00\xff' * w for _ in range(h))
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 6, 0, 0, 0)) +
            chunk(b'IDAT', zlib.compress(raw)) + (chunk(b'tEXt', b'x' * pad) if pad else b'') + chunk(b'IEND', b''))


def badge_ticket(c, b, to='/'):
    r = b.api('/_seed/api/badge/ticket', method='POST', body={'to': to})
    assert r.status == 200, (r.status, r.text)
    return json.loads(r.body)


def badge_cookie_name(c):
    return c.cookie_name + '_badge'


def enter_badge(c, b, to='/'):
    """The hop: a ticket from the control plane, opened on the app's origin."""
    url = urllib.parse.urlsplit(badge_ticket(c, b, to)['url'])
    assert url.netloc == app_host(c), url.netloc
    r = req(c, 'GET', url.path + '?' + url.query, NAV, host=app_host(c))
    assert r.status == 303, (r.status, r.text)
    sc = [v for v in r.cookies() if v.startswith(badge_cookie_name(c) + '=')]
    assert len(sc) == 1, r.cookies()
    return sc[0], url


def badge(c, cookie=None, host=None, headers=None):
    h = dict(FETCH)
    if cookie:
        h['Cookie'] = cookie
    h.update(headers or {})
    return req(c, 'GET', '/_seed/badge', h, host=host or app_host(c))


@test
def the_badge_hop_gives_a_presence_cookie_once_and_it_opens_nothing_else(c):
    before = session_ids(c)
    # The control plane's own cookie never makes the app's origin say yes.
    r = badge(c, c.owner.cookie_header())
    assert_refused(r, 204, c, before)
    assert r.body == b''
    sc, url = enter_badge(c, c.owner)
    value = sc.split(';', 1)[0].split('=', 1)[1]
    attrs = [a.strip().lower() for a in sc.split(';')[1:]]
    assert {'path=/_seed/', 'httponly', 'samesite=strict'} <= set(attrs), sc
    assert not any(a.startswith('domain=') for a in attrs), sc
    assert value != c.owner.cookie and re.fullmatch(r'[0-9a-f]{64}', value), 'a value of its own'
    presence = f'{badge_cookie_name(c)}={value}'
    r = badge(c, presence)
    assert r.status == 200 and r.text == 'yes\n', (r.status, r.text)
    assert c.owner.token not in r.text and value not in r.text and not r.cookies()
    # One use.
    r = req(c, 'GET', url.path + '?' + url.query, NAV, host=app_host(c))
    assert r.status == 303 and not r.cookies(), (r.status, r.cookies())
    # A forged value says no.
    assert badge(c, f'{badge_cookie_name(c)}={"0" * 64}').status == 204
    # It opens no page, no API call, on either origin.
    for host in (app_host(c), ctl_host(c)):
        r = req(c, 'GET', '/_seed/api/status', dict(FETCH, Cookie=presence), host=host)
        assert r.status in (401, 421), (host, r.status)
        r = req(c, 'GET', '/_seed/', dict(NAV, Cookie=presence), host=host)
        assert r.status in (308, 401), (host, r.status)
        assert 'seed-token' not in r.text
    r = req(c, 'GET', '/_seed/logo', dict(FETCH, Cookie=presence))
    assert r.status == 401, r.status
    assert session_ids(c) == before


@test
def a_badge_hop_keeps_a_path_with_query_characters(c):
    # '&', '=', '+' and '%' are path characters: the hop's query carries them encoded.
    to = '/a+b&c=d%20e;f'
    url = urllib.parse.urlsplit(badge_ticket(c, c.owner, to)['url'])
    r = req(c, 'GET', url.path + '?' + url.query, NAV, host=app_host(c))
    assert r.status == 303 and r.header('Location') == to, (r.status, r.header('Location'), url.query)


@test
def badge_tickets_need_a_signed_in_browser_and_a_path(c):
    before = session_ids(c)
    r = cli(c, 'POST', '/_seed/api/badge/ticket', {})
    assert_refused(r, 400, c, before)  # the CLI has no browser to give a badge to
    r = req(c, 'POST', '/_seed/api/badge/ticket', dict(FETCH, Cookie=c.owner.cookie_header(),
            **{'Content-Type': 'application/json', 'Origin': ctl_origin(c.port)}), '{}')
    assert_refused(r, 401, c, before)  # no token
    r = c.owner.api('/_seed/api/badge/ticket', method='POST', body={}, host=app_host(c))
    assert_refused(r, 421, c, before)
    for bad in ('//evil.com/', '/\\evil.com', 'https://evil.com/', '/_seed/api/status', '/a b', '/' + 'a' * 200):
        r = c.owner.api('/_seed/api/badge/ticket', method='POST', body={'to': bad})
        assert r.status == 400, (bad, r.status)
    # A ticket with a bad "to", a bad ticket, the control plane's origin: no cookie.
    url = urllib.parse.urlsplit(badge_ticket(c, c.owner)['url'])
    t = urllib.parse.parse_qs(url.query)['t'][0]
    for q, host, status in ((f't={t}&to=//evil.com', app_host(c), 400), ('t=' + 'f' * 64, app_host(c), 303),
                            ('t=xyz', app_host(c), 400), (f't={t}', ctl_host(c), 404),
                            (f't={t}', f'organism.localhost:{c.port}', 421)):
        r = req(c, 'GET', '/_seed/badge/enter?' + q, NAV, host=host)
        assert r.status == status and not r.cookies(), (q, host, r.status, r.cookies())
    assert session_ids(c) == before


@test
def ask_drafts_only_from_the_owners_browser_same_origin_real_pictures(c):
    sc, _ = enter_badge(c, c.owner)
    presence = sc.split(';', 1)[0]
    same = {'Sec-Fetch-Dest': 'empty', 'Sec-Fetch-Mode': 'cors', 'Sec-Fetch-Site': 'same-origin',
            'Origin': f'http://{app_host(c)}', 'Cookie': presence, 'Content-Type': 'image/png'}
    png = png_bytes(8, 8)

    def post(headers, body=png, host=None):
        return req(c, 'POST', '/_seed/ask-draft', headers, body, host=host or app_host(c))
    r = post(dict(same, Cookie=c.owner.cookie_header()))
    assert r.status == 403, r.status  # the control plane's cookie is not the owner's presence here
    r = post(dict(same, **{'Sec-Fetch-Site': 'cross-site', 'Origin': 'http://evil.example'}))
    assert r.status == 403, r.status
    r = post(dict(same, **{'Sec-Fetch-Site': 'same-site', 'Origin': f'http://127.0.0.1:{c.port}'}))
    assert r.status == 403, r.status
    for ct in ('application/json', 'image/svg+xml', 'image/gif', 'text/plain'):
        assert post(dict(same, **{'Content-Type': ct})).status == 415, ct
    assert post(same, b'GIF89a' + png).status == 415
    r = post(same, png_bytes(4097, 1))
    assert r.status == 415 and '4096' in json.loads(r.body)['error'], r.text
    # Over 3 MB: refused from the head (the answer comes before the body).
    sock = socket.create_connection(('127.0.0.1', c.port), timeout=30)
    try:
        head = ''.join(f'{k}: {v}\r\n' for k, v in same.items())
        sock.sendall((f'POST /_seed/ask-draft HTTP/1.1\r\nHost: {app_host(c)}\r\n{head}'
                      f'Content-Length: {3 * 1024 * 1024 + 1}\r\nConnection: close\r\n\r\n').encode())
        answer = sock.recv(65536)
    finally:
        sock.close()
    assert answer.startswith(b'HTTP/1.1 413'), answer[:200]
    r = post(same)
    assert r.status == 201, (r.status, r.text)
    draft = json.loads(r.body)['id']
    assert re.fullmatch(r'[0-9a-f]{32}', draft)
    # Seen only through the control plane's API, sandboxed; never on the app's origin.
    r = c.owner.api(f'/_seed/api/ask-drafts/{draft}')
    assert r.status == 200 and r.body == png and r.header('Content-Type') == 'image/png', r.status
    assert (r.header('Content-Security-Policy') or '').startswith('sandbox'), r.header('Content-Security-Policy')
    r = req(c, 'GET', f'/_seed/api/ask-drafts/{draft}', dict(FETCH, Cookie=presence), host=app_host(c))
    assert r.status == 421, r.status
    assert req(c, 'GET', f'/_seed/api/ask-drafts/{draft}', dict(FETCH, Cookie=presence)).status == 401
    for bad in ('../../etc/passwd', '0' * 32, 'Z' * 32):
        assert c.owner.api('/_seed/api/ask-drafts/' + urllib.parse.quote(bad, safe='')).status in (400, 404), bad
    # The admin screens' origin serves none of it.
    for method, path in (('GET', '/_seed/badge'), ('GET', '/_seed/badge.js'), ('POST', '/_seed/ask-draft'),
                         ('GET', '/_seed/badge/modern-screenshot.js')):
        r = req(c, method, path, dict(same), png if method == 'POST' else None, host=f'organism.localhost:{c.port}')
        assert r.status == 421, (path, r.status)
    # The picture library only for the owner's browser.
    assert req(c, 'GET', '/_seed/badge/modern-screenshot.js', FETCH, host=app_host(c)).status == 403
    r = req(c, 'GET', '/_seed/badge/modern-screenshot.js', dict(FETCH, Cookie=presence), host=app_host(c))
    assert r.status == 200 and hashlib.sha256(r.body).hexdigest() == \
        'bb36665889124a0b6e15f16045265737449c3bdcf2712cdb08af3cfa01563e2b', 'the pinned copy'
    # A message naming a draft that is not there sends nothing.
    r = c.owner.api('/_seed/api/messages', method='POST', body={'text': 'hi', 'draft': '0' * 32})
    assert r.status in (409, 410, 503), (r.status, r.text)
    r = c.owner.api('/_seed/api/messages', method='POST', body={'text': 'hi', 'draft': 'nope'})
    assert r.status in (400, 409, 503), (r.status, r.text)


@test
def the_badge_tag_goes_only_into_navigations_of_the_apps_pages(c):
    r = req(c, 'GET', '/', NAV, host=app_host(c))
    assert r.status == 200 and r.text.count(BADGE_TAG) == 1, r.text[:300]
    assert r.header('Content-Length') is None
    for headers, host in ((FETCH, app_host(c)), ({}, app_host(c)),
                          (dict(NAV, **{'Sec-Fetch-Dest': 'iframe'}), app_host(c)),
                          (NAV, f'organism.localhost:{c.port}')):
        r = req(c, 'GET', '/', headers, host=host)
        assert BADGE_TAG not in r.text, (headers, host)
    r = req(c, 'GET', '/', dict(NAV, **{'Accept-Encoding': 'gzip'}), host=app_host(c))
    assert r.header('Content-Encoding') is not None or r.text.count(BADGE_TAG) == 1


@test
def the_badge_switch_and_sign_out(c):
    before = session_ids(c)
    b = sign_in_with_link(c, src='127.0.0.61')
    sc, _ = enter_badge(c, b)
    presence = sc.split(';', 1)[0]
    assert badge(c, presence).status == 200
    r = b.api('/_seed/api/badge', method='POST', body={'on': 'no'})
    assert r.status == 400, r.status
    r = b.api('/_seed/api/badge', method='POST', body={'on': False})
    assert r.status == 200 and json.loads(r.body) == {'on': False}, r.text
    try:
        assert badge(c, presence).status == 204
        assert req(c, 'GET', '/_seed/badge.js', FETCH, host=app_host(c)).status == 404
        assert BADGE_TAG not in req(c, 'GET', '/', NAV, host=app_host(c)).text
        t = badge_ticket(c, b)
        assert '/_seed/badge/enter' not in t['url'] and t['badge'] is False, t
    finally:
        r = b.api('/_seed/api/badge', method='POST', body={'on': True})
        assert r.status == 200, r.status
    assert badge(c, presence).status == 200
    # Signed out: its presence cookie says no.
    assert b.api('/_seed/api/owner/logout', method='POST', body={}).status == 200
    assert badge(c, presence).status == 204
    assert session_ids(c) == before


@test
def without_a_preview_grant_the_preview_bar_learns_nothing_and_is_not_added(c):
    # No preview runs here (browser-preview runs one): the bar's question
    # answers 204 to every browser and to a forged preview cookie, no page
    # gets the bar's tag, and neither is served off the app's origin.
    forged = f'{c.cookie_name}_preview={"0" * 64}'
    for headers in (FETCH, dict(FETCH, Cookie=forged)):
        r = req(c, 'GET', '/_seed/preview/state', headers, host=app_host(c))
        assert r.status == 204 and r.body == b'' and r.header('Cache-Control') == 'no-store', r.status
    r = req(c, 'GET', '/', dict(NAV, Cookie=forged), host=app_host(c))
    assert r.status == 200 and '/_seed/preview/bar.js' not in r.text, r.text[:300]
    r = req(c, 'GET', '/_seed/preview/bar.js', FETCH, host=app_host(c))
    assert r.status == 200 and b'attachShadow' in r.body and b'closed' in r.body, r.status
    for path in ('/_seed/preview/state', '/_seed/preview/bar.js'):
        assert req(c, 'GET', path, FETCH).status == 404, path
        assert req(c, 'GET', path, FETCH, host=f'organism.localhost:{c.port}').status == 421, path
    # A page load of /_seed on the app's origin (the bar's links go there)
    # leaves the app's cookies at "/" and the kernel's own ones alone: only
    # what was planted under /_seed is expired there.
    badge_cookie = f'{c.cookie_name}_badge={"1" * 64}'
    r = req(c, 'GET', '/_seed/', dict(NAV, Cookie=f'app=1; {forged}; {badge_cookie}'), host=app_host(c))
    assert r.status == 308, r.status
    expired = [x for x in r.cookies() if 'Max-Age=0' in x]
    assert 'app=; Path=/_seed; Max-Age=0' in expired, expired
    assert not [x for x in expired if 'Path=/;' in x or x.startswith(c.cookie_name)], expired


# ---- last: the overall limit locks password sign-in for everyone --------------------

@test
def overall_limit_keeps_links_and_sessions_working(c):
    before = session_ids(c)
    failures = 0
    n = 0
    while True:  # 4 failures per client (none limited itself) until everyone is
        xff = {'X-Forwarded-For': f'10.{n // 4 // 250}.{n // 4 % 250}.1'}
        r = post_login(c, BAD, '127.0.0.1', xff)
        n += 1
        if r.status == 429:
            break
        assert r.status == 401, r.status
        if n % 100 == 0:
            assert_refused(r, 401, c, before)
        failures += 1
        assert n <= 1100, 'the overall limit never came'
    # Earlier cases failed some too; 1000 in all within 15 minutes.
    assert 950 <= failures <= 1000, failures
    r = post_login(c, GOOD, '127.0.0.80')
    assert_refused(r, 429, c, before)
    assert 'seed login' in r.text
    r = post_login(c, GOOD, '127.0.0.1', {'X-Forwarded-For': '2001:db8:ff::1'})
    assert_refused(r, 429, c, before)
    # Links and signed-in browsers still work.
    b = sign_in_with_link(c, src='127.0.0.81')
    assert b.api('/_seed/api/status').status == 200
    assert c.owner.page().status == 200
    assert c.owner.api('/_seed/api/status').status == 200
    log = open(os.path.join(c.dir, '.seed/logs/kernel.log')).read()
    assert '1000 failed sign-ins within 15 minutes' in log


if __name__ == '__main__':
    taplib.run(setup, teardown)
