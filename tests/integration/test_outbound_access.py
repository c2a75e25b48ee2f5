#!/usr/bin/env python3
"""End to end: outbound access (SPEC §8, seed 001 "Outbound access") against
a real Seed (real PostgreSQL, bwrap, git and the kernel's egress proxy)
whose model is the scripted model server. Prints TAP.

- The API: GET outbound, POST outbound/grant and outbound/revoke, their 400s.
- The chat's request_outbound_access: an approval every call, exactly what
  was shown is granted (referring to that approval), a denial grants nothing.
- The live organism (a small Node app written here into organism/) fetches an
  approved host with Node's fetch() through HTTPS_PROXY and is refused an
  unapproved one, which GET outbound lists; revoking refuses it again.
- A granted secret reaches the live organism and no build, test or
  evolution sandbox.

Without internet the approved host must resolve to a public address that
reaches a local TLS stand-in: as root, this script runs itself inside a
private mount and network namespace (unshare), where lo holds a public
address, /etc/hosts (bind-mounted) names the test's hosts, and the stand-in
is an HTTPS server with a self-signed certificate the organism trusts
(NODE_EXTRA_CA_CERTS in its own run script). Not root: those tests are
skipped with the reason.

Environment: SEED_BIN (the seed CLI).
"""
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import http.server

NETNS_MARK = 'SEED_OUTBOUND_TEST_NETNS'
STANDIN_ADDR = '93.184.215.14'          # a public address, held by lo inside the namespace only
APPROVED = 'approved.seedtest.net'
UNAPPROVED = 'unapproved.seedtest.net'
SECRET_NAME = 'OUTBOUND_TEST_TOKEN'
SECRET_VALUE = 'tok-7f3a9c2e51d84b06'
STANDIN_BODY = 'hello from the stand-in'


def reexec_in_namespace():
    """As root and not yet inside: run this script again in a private mount
    and network namespace. Returns the reason when it cannot."""
    if os.environ.get(NETNS_MARK):
        return None
    if os.geteuid() != 0:
        return 'not root: a private network namespace (unshare --net) needs root'
    unshare = shutil.which('unshare')
    if not unshare or not shutil.which('ip'):
        return 'unshare or ip is missing'
    env = dict(os.environ, **{NETNS_MARK: '1'})
    os.execve(unshare, [unshare, '--mount', '--net', '--propagation', 'private', sys.executable,
                        os.path.abspath(__file__)], env)
    return None


NAMESPACE_REASON = reexec_in_namespace()

import taplib  # noqa: E402
from seedlib import ScriptedSeed, api, request, script, wait_until  # noqa: E402
from taplib import Skip, test  # noqa: E402


# ---- the namespace: lo with a public address, hosts, a TLS stand-in -----

class Network:
    def __init__(self, tmp):
        self.ready = False
        if not os.environ.get(NETNS_MARK):
            self.reason = NAMESPACE_REASON or 'not in a private network namespace'
            return
        subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)  # the Seed and the model server need it
        if not shutil.which('openssl'):
            self.reason = 'openssl is missing (scripts/bootstrap --tests installs it)'
            return
        subprocess.run(['ip', 'addr', 'add', f'{STANDIN_ADDR}/32', 'dev', 'lo'], check=True)
        hosts = os.path.join(tmp, 'hosts')
        with open(hosts, 'w') as f:
            # As an owner would write them: the proxy's resolver reads
            # /etc/hosts (and never appends search domains).
            f.write(f'127.0.0.1 localhost\n::1 localhost\n'
                    f'{STANDIN_ADDR} {APPROVED} {UNAPPROVED}\n')
        os.chmod(hosts, 0o644)
        subprocess.run(['mount', '--bind', hosts, '/etc/hosts'], check=True)
        self.ca = os.path.join(tmp, 'ca.pem')
        key = os.path.join(tmp, 'key.pem')
        subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-keyout', key,
                        '-out', self.ca, '-subj', f'/CN={APPROVED}',
                        '-addext', f'subjectAltName=DNS:{APPROVED},DNS:{UNAPPROVED}'],
                       check=True, capture_output=True)
        os.chmod(self.ca, 0o644)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = STANDIN_BODY.encode()
                self.send_response(200)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer((STANDIN_ADDR, 443), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.ca, key)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.ready = True


# ---- the organism: a Node app that fetches through HTTPS_PROXY ----------

APP_JS = r"""'use strict';
const http = require('node:http');
const port = Number(process.env.PORT || 8080);
http.createServer(async (req, res) => {
  const u = new URL(req.url, 'http://x');
  const send = (code, obj) => { res.writeHead(code, {'content-type': 'application/json'}); res.end(JSON.stringify(obj)); };
  if (u.pathname === '/healthz') return send(200, {ok: true});
  if (u.pathname === '/fetch') {
    try {
      const r = await fetch('https://' + u.searchParams.get('host') + '/', {signal: AbortSignal.timeout(20000)});
      return send(200, {ok: true, status: r.status, body: await r.text()});
    } catch (e) {
      return send(200, {ok: false, error: String(e && (e.cause ? e.cause.message || e.cause : e.message))});
    }
  }
  if (u.pathname === '/env') return send(200, {value: process.env[u.searchParams.get('name')] || null});
  send(200, {hello: 'outbound test'});
}).listen(port, '127.0.0.1');
"""

# Build and test print their whole environment: what they were given.
MAKEFILE = """.PHONY: build test
build:
\t@env
\tnode --check app.js
test: build
\t@env
\t@echo tests-ran
"""


def write_organism(ca):
    def before_run(d):
        org = os.path.join(d, 'organism')
        with open(os.path.join(org, 'app.js'), 'w') as f:
            f.write(APP_JS)
        with open(os.path.join(org, 'Makefile'), 'w') as f:
            f.write(MAKEFILE)
        if ca:
            shutil.copy(ca, os.path.join(org, 'ca.pem'))
        server = os.path.join(org, 'bin', 'server')
        with open(server, 'w') as f:
            f.write('#!/bin/sh\n# The organism trusts the test\'s TLS stand-in.\n'
                    'export NODE_EXTRA_CA_CERTS="$PWD/organism/ca.pem"\nexec node organism/app.js\n')
        os.chmod(server, 0o755)
        # Left uncommitted: the live organism is built and run from the
        # Seed's folder as it is (git objects must stay the Seed account's).
    return before_run


class Ctx:
    pass


def setup():
    c = Ctx()
    c.tmp = tempfile.mkdtemp(prefix='seed-outbound-net-')
    os.chmod(c.tmp, 0o755)
    c.net = Network(c.tmp)
    c.seed = ScriptedSeed('seed-outbound-', 'outbound', run_args=('-e', f'{SECRET_NAME}={SECRET_VALUE}'),
                          before_run=write_organism(c.net.ca if c.net.ready else None))
    return c


def teardown(c):
    if c is not None:
        if getattr(c, 'seed', None):
            c.seed.close()
        shutil.rmtree(c.tmp, ignore_errors=True)


def outbound(s):
    r = api(s, '/_seed/api/outbound')
    assert r.status == 200, r.text
    return r.json()


def grant(s, body, status=200):
    r = api(s, '/_seed/api/outbound/grant', 'POST', body)
    assert r.status == status, (r.status, r.text)
    return r.json()


def revoke(s, gid, status=200):
    r = api(s, '/_seed/api/outbound/revoke', 'POST', {'id': gid})
    assert r.status == status, (r.status, r.text)
    return r.json()


def organism_running(s):
    return wait_until(lambda: json.loads(request(s.app + '/healthz').text).get('ok'), timeout=180,
                      what='the live organism')


def app_get(s, path):
    """GET from the live organism. A grant or revocation of a secret restarts
    it a moment after the API answered: while it is restarting the kernel
    answers 503, so that is waited out (with a deadline)."""
    def answered():
        r = request(s.app + path, timeout=60)
        return None if r.status == 503 else r
    r = wait_until(answered, timeout=180, what=f'the live organism answering {path}')
    assert r.status == 200, (r.status, r.text)
    return r.json()


# ---- the API ------------------------------------------------------------

@test
def outbound_lists_grants_refusals_and_registries(c):
    s = c.seed
    d = outbound(s)
    assert d['grants'] == [], d
    for k in ('revoked', 'refused', 'registries', 'registry_notes'):
        assert isinstance(d[k], list), (k, d)
    assert isinstance(d['registries_pending'], bool)
    # The package clients were asked at start; each host says where it came from.
    d = wait_until(lambda: (lambda x: x if not x['registries_pending'] else None)(outbound(s)), timeout=120,
                   what='the registries')
    for r in d['registries']:
        assert r['host'] and r['from'], r
    assert request(s.base + '/_seed/api/outbound').status == 401


@test
def grant_bodies_are_checked_and_named(c):
    s = c.seed
    bad = [
        ({'for': 'organism'}, 'hosts'),
        ({'hosts': ['a.example.com']}, 'for'),
        ({'hosts': ['10.0.0.1'], 'for': 'organism'}, 'hosts[0]'),
        ({'hosts': ['a.example.com', 'localhost'], 'for': 'organism'}, 'hosts[1]'),
        ({'hosts': ['169.254.169.254'], 'for': 'evolutions'}, 'hosts[0]'),
        ({'hosts': ['*'], 'for': 'organism'}, 'hosts[0]'),
        ({'hosts': ['a.example.com'], 'for': 'organism', 'secrets': ['SEED_OWNER_PASSWORD']}, 'secrets[0]'),
        ({'hosts': ['a.example.com'], 'for': 'organism', 'secrets': ['OPENROUTER_API_KEY']}, 'secrets[0]'),
        ({'hosts': ['a.example.com'], 'for': 'organism', 'secrets': ['PATH']}, 'secrets[0]'),
        ({'hosts': ['a.example.com'], 'for': 'organism', 'secrets': ['lower_case']}, 'secrets[0]'),
        ({'hosts': ['a.example.com'], 'for': 'evolutions', 'secrets': ['TOKEN']}, 'secrets'),
        ({'hosts': ['a.example.com'], 'for': 'organism', 'extra': 1}, "unknown field 'extra'"),
        ({'hosts': ['x%d.example.com' % i for i in range(17)], 'for': 'organism'}, 'hosts'),
    ]
    for body, field in bad:
        r = api(s, '/_seed/api/outbound/grant', 'POST', body)
        assert r.status == 400, (body, r.status, r.text)
        assert field in r.json()['error'], (body, r.json())
    r = api(s, '/_seed/api/outbound/grant', 'POST', {'hosts': ['a.example.com'], 'for': 'organism',
                                                      'reason': 'x' * 20000})
    assert r.status == 413, r.status
    for body in ({}, {'id': 'grt_x'}, {'id': 'grt_0123456789abcdef', 'more': 1}):
        assert api(s, '/_seed/api/outbound/revoke', 'POST', body).status == 400, body
    assert api(s, '/_seed/api/outbound/revoke', 'POST', {'id': 'grt_0123456789abcdef'}).status == 404
    assert outbound(s)['grants'] == []


@test
def grant_and_revoke_keep_history(c):
    s = c.seed
    g = grant(s, {'hosts': ['Pkgs.Example.COM.', '*.cdn.example.org'], 'for': 'evolutions', 'reason': 'downloads'})
    d = outbound(s)
    [row] = [x for x in d['grants'] if x['id'] == g['id']]
    assert row['hosts'] == ['pkgs.example.com', '*.cdn.example.org'], row
    assert row['for'] == 'evolutions' and row['by'] == 'owner' and row['reason'] == 'downloads', row
    assert row['secrets'] == [] and row['revoked_at'] is None, row
    revoke(s, g['id'])
    revoke(s, g['id'], 404)
    d = outbound(s)
    assert not [x for x in d['grants'] if x['id'] == g['id']], d
    [old] = [x for x in d['revoked'] if x['id'] == g['id']]
    assert old['revoked_at'], old


# ---- the chat asks, every time ------------------------------------------

def chat_in_thread(s, text, out):
    def run():
        r = api(s, '/_seed/api/messages', 'POST', {'text': text})
        out.append(r)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def pending_outbound_approval(s, seen):
    r = api(s, '/_seed/api/approvals')
    assert r.status == 200, r.text
    for a in r.json()['approvals']:
        if a['tool'] == 'request_outbound_access' and a['id'] not in seen:
            return a
    return None


@test
def the_chat_asks_every_time_and_exactly_that_is_granted(c):
    s = c.seed
    args = {'hosts': ['API.Weather.example.net'], 'for': 'organism', 'secrets': [SECRET_NAME],
            'reason': 'the forecast page'}
    step = {'tool_calls': [{'name': 'request_outbound_access', 'arguments': args}]}
    script(s, [step, {'text': 'Asked.'}, step, {'text': 'Asked again.'}])
    seen = set()
    decided = []
    for approve in (True, False):
        out = []
        t = chat_in_thread(s, 'The app needs the weather API.', out)
        a = wait_until(lambda: pending_outbound_approval(s, seen), timeout=60, what='the approval')
        seen.add(a['id'])
        # The owner sees exactly the request, normalised: what is granted.
        assert a['evolution_id'] is None, a
        assert a['request']['arguments'] == {'hosts': ['api.weather.example.net'], 'for': 'organism',
                                             'secrets': [SECRET_NAME], 'reason': 'the forecast page'}, a
        assert a['level'] == 'dangerous', a
        r = api(s, f"/_seed/api/approvals/{a['id']}", 'POST', {'approved': approve})
        assert r.status == 200, r.text
        t.join(timeout=60)
        assert out and out[0].status == 200, out and (out[0].status, out[0].text)
        decided.append(a['id'])
    assert decided[0] != decided[1]  # never an earlier approval
    grants = [g for g in outbound(s)['grants'] if g['hosts'] == ['api.weather.example.net']]
    assert len(grants) == 1, grants  # the denied second call granted nothing
    g = grants[0]
    assert g['by'] == decided[0] and g['for'] == 'organism', g
    assert g['secrets'] == [{'name': SECRET_NAME, 'available': True}], g
    revoke(s, g['id'])
    # The model was told what happened each time.
    reqs = json.loads(request(s.model_base + '/_requests').text)
    texts = json.dumps(reqs)
    assert 'The owner approved. Granted' in texts, texts[-2000:]
    assert 'denied by the owner' in texts


# ---- the live organism through the proxy --------------------------------

def fetch(s, host):
    return app_get(s, '/fetch?host=' + host)


def refused(s, host):
    return [r for r in outbound(s)['refused'] if r['host'] == host]


@test
def live_organism_reaches_only_approved_hosts(c):
    if not c.net.ready:
        raise Skip(c.net.reason)
    s = c.seed
    organism_running(s)
    # Nothing granted: refused, and the refusal is listed (door "live").
    r = fetch(s, APPROVED)
    assert not r['ok'], r
    rows = wait_until(lambda: refused(s, APPROVED), timeout=30, what='the refusal listed')
    assert rows[0]['door'] == 'live' and rows[0]['port'] == 443 and rows[0]['reason'], rows
    g = grant(s, {'hosts': [APPROVED], 'for': 'organism', 'reason': 'the test stand-in'})
    r = fetch(s, APPROVED)
    assert r['ok'] and r['status'] == 200 and r['body'] == STANDIN_BODY, r
    r = fetch(s, UNAPPROVED)
    assert not r['ok'], r
    rows = wait_until(lambda: refused(s, UNAPPROVED), timeout=30, what='the refusal of the unapproved host')
    assert rows[0]['door'] == 'live', rows
    # Revoking takes effect for new connections at once.
    revoke(s, g['id'])
    r = fetch(s, APPROVED)
    assert not r['ok'], r


# ---- secrets: the live organism only ------------------------------------

def evolution_script():
    return [
        {'tool_calls': [{'name': 'submit_plan', 'arguments': {
            'title': 'Look around', 'scope': 'env', 'summary': 'Print the environment.',
            'steps': ['run env']}}]},
        {'tool_calls': [{'name': 'run', 'arguments': {'command': 'env; echo run-marker'}}]},
        {'tool_calls': [{'name': 'write_file', 'arguments': {'path': 'organism/NOTE.txt', 'content': 'x\n'}}]},
        {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Nothing.'}}]},
        {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing.'}}]},
        {'text': 'Done.'},
    ]


@test
def a_granted_secret_reaches_the_live_organism_only(c):
    s = c.seed
    organism_running(s)
    assert app_get(s, '/env?name=' + SECRET_NAME)['value'] is None  # not granted yet
    g = grant(s, {'hosts': ['api.secret-test.example.net'], 'for': 'organism', 'secrets': [SECRET_NAME]})
    # Granting restarts the live organism with the secret.
    wait_until(lambda: app_get(s, '/env?name=' + SECRET_NAME)['value'] == SECRET_VALUE, timeout=120,
               what='the secret in the live organism')
    # An evolution: its run command, its build and its tests print their
    # whole environment; the secret is in none of them.
    script(s, evolution_script())
    r = api(s, '/_seed/api/evolutions', 'POST', {'intent': 'print the environment'})
    assert r.status == 202, r.text
    evo = r.json()['id']
    e = wait_until(lambda: (lambda x: x if x['state'] in ('complete', 'failed', 'cancelled', 'rolled_back') else None)(
        api(s, f'/_seed/api/evolutions/{evo}').json()), timeout=900, what='the evolution')
    text = json.dumps(e)
    assert 'run-marker' in text, text[-3000:]      # the run's output was recorded
    assert 'tests-ran' in text or e['state'] == 'complete', text[-3000:]
    assert SECRET_VALUE not in text, 'the secret reached an evolution sandbox'
    # The live organism's own build (at start and at apply) printed its
    # environment into the organism log: no secret there either.
    log = open(os.path.join(s.dir, '.seed', 'logs', 'organism.log'), errors='replace').read()
    assert 'PATH=' in log, log[-2000:]
    assert SECRET_VALUE not in log, 'the secret reached a build sandbox'
    # Revoking restarts it without the secret.
    revoke(s, g['id'])
    wait_until(lambda: app_get(s, '/env?name=' + SECRET_NAME)['value'] is None, timeout=120,
               what='the secret gone from the live organism')


if __name__ == '__main__':
    taplib.run(setup, teardown)
