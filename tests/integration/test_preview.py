#!/usr/bin/env python3
"""End to end: the preview before apply (issue 15) on a real Seed (real
PostgreSQL, bwrap, git) whose model is the scripted model server, with the
preview on (the owner's default). Prints TAP.

The organism (committed by the owner first) answers / with its generation's
name and the notes in its database (through psql and $DATABASE_URL), and
/write adds a note.

- The candidate runs on a copy of the live data: the owner's browser, which
  entered the preview with a one-time ticket, sees the candidate and the
  live notes; another browser sees the live generation; a write made in the
  preview never reaches the live data.
- discard ends the evolution and removes the copy and the sandbox; changes
  is a new round of the same evolution, previewed again; apply goes live.
- A kernel killed during a preview leaves no copy and no sandbox after boot.
"""
import json
import os
import shutil
import signal
import subprocess
import urllib.parse

import taplib
from seedlib import (Browser, ScriptedSeed, api, evolution, kernel_pid, link_from, process_age, request, script,
                     submit, wait_until)
from taplib import test

APP_JS = r"""'use strict';
const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const GEN = fs.readFileSync(path.join(__dirname, 'GEN'), 'utf8').trim();
const q = (sql) => execFileSync('psql', [process.env.DATABASE_URL, '-AtX', '-v', 'ON_ERROR_STOP=1', '-c', sql],
  { encoding: 'utf8', timeout: 10000 }).trim();
http.createServer((req, res) => {
  if (req.url === '/healthz') return res.end('ok');
  try {
    if (req.url === '/write') { q("INSERT INTO notes (body) VALUES ('from preview')"); return res.end('written'); }
    res.setHeader('Cache-Control', 'max-age=3600');
    res.end('gen:' + GEN + ' notes:' + q("SELECT coalesce(string_agg(body, ',' ORDER BY id), '') FROM notes"));
  } catch (e) {
    res.statusCode = 500;
    res.end('error: ' + e.message);
  }
}).listen(Number(process.env.PORT || 8080), '127.0.0.1');
"""

MAKEFILE = """.PHONY: build test
build:
\tnode --check app.js
test: build
"""

MIGRATION = 'CREATE TABLE IF NOT EXISTS notes (id serial PRIMARY KEY, body text NOT NULL);\n'


def write_organism(d):
    org = os.path.join(d, 'organism')
    for rel, text in (('app.js', APP_JS), ('Makefile', MAKEFILE), ('GEN', 'live\n'),
                      ('migrations/0001_notes.sql', MIGRATION)):
        os.makedirs(os.path.dirname(os.path.join(org, rel)), exist_ok=True)
        with open(os.path.join(org, rel), 'w') as f:
            f.write(text)
    with open(os.path.join(org, 'bin', 'server'), 'w') as f:
        f.write('#!/bin/sh\nexec node organism/app.js\n')
    os.chmod(os.path.join(org, 'bin', 'server'), 0o755)
    if os.geteuid() == 0:  # the Seed's files are its account's (git checks them out when a generation applies)
        for root, dirs, files in os.walk(org):
            for n in dirs + files:
                shutil.chown(os.path.join(root, n), 'seed', 'seed')


def git(c, *args):
    cmd = ['git', '-C', c.dir, '-c', 'user.name=Owner', '-c', 'user.email=owner@example.org', *args]
    if os.geteuid() == 0:
        cmd = ['runuser', '-u', 'seed', '--', *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, HOME=c.tmp, GIT_CONFIG_NOSYSTEM='1'),
                       timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def psql(c, sql, db='organism'):
    pw = open(os.path.join(c.dir, '.seed/secrets/postgres-password')).read().strip()
    p = subprocess.run(['psql', '-h', os.path.join(c.dir, '.seed/run'), '-U', 'postgres', '-d', db, '-AtX',
                        '-v', 'ON_ERROR_STOP=1', '-c', sql],
                       capture_output=True, text=True, env={**os.environ, 'PGPASSWORD': pw}, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def leftovers(c):
    """Copies of the live data, and preview sandboxes' run dirs and processes."""
    dbs = psql(c, "SELECT count(*) FROM pg_database WHERE datname LIKE 'preview\\_%'", 'postgres')
    roles = psql(c, "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'preview\\_%'", 'postgres')
    pdir = os.path.join(c.dir, '.seed', 'preview')
    dirs = [d for d in (os.listdir(pdir) if os.path.isdir(pdir) else []) if d.endswith('-live')]
    procs = subprocess.run(['pgrep', '-f', '-a', 'preview/evo_[0-9a-f]*-live'], capture_output=True,
                           text=True).stdout.strip()
    return {'databases': int(dbs), 'roles': int(roles), 'dirs': dirs, 'processes': procs}


NOTHING_LEFT = {'databases': 0, 'roles': 0, 'dirs': [], 'processes': ''}


def evolution_script(gen):
    return [
        {'tool_calls': [{'name': 'submit_plan', 'arguments': {
            'title': f'Become {gen}', 'scope': 'gen', 'summary': 'Rename the generation.', 'steps': ['edit GEN']}}]},
        {'tool_calls': [{'name': 'write_file', 'arguments': {'path': 'organism/GEN', 'content': gen + '\n'}}]},
        {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Renamed.'}}]},
        {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing.'}}]},
    ]


def changes_script(gen):
    return [
        {'tool_calls': [{'name': 'write_file', 'arguments': {'path': 'organism/GEN', 'content': gen + '\n'}}],
         'match': 'asks for changes'},
        {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Renamed again.'}}]},
        {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing.'}}]},
    ]


def previews(e, state):
    return [x for x in e.get('events') or [] if x['kind'] == 'note' and (x.get('data') or {}).get('preview') == state]


def wait_preview(c, evo_id, n=1):
    # An evolution that ended ends the wait at once (wait_until retries on
    # an assertion, so one inside the poll would only fail at the timeout).
    def running():
        e = evolution(c, evo_id)
        if e['state'] in ('failed', 'cancelled', 'complete', 'rolled_back'):
            return e
        return e if e['state'] == 'ready' and len(previews(e, 'running')) >= n else None
    e = wait_until(running, timeout=900, interval=1, what='the preview')
    assert e['state'] == 'ready', json.dumps(e)[-3000:]
    return e


def wait_final(c, evo_id):
    return wait_until(lambda: (lambda e: e if e['state'] in ('failed', 'cancelled', 'complete', 'rolled_back')
                                           else None)(evolution(c, evo_id)), timeout=900, interval=1, what='the end')


def app_get(c, path, cookie=None):
    return request(c.app + path, headers={'Cookie': cookie} if cookie else None, timeout=60)


def enter_preview(c):
    """The owner's browser asks for a ticket and opens it on the app's origin:
    returns (the preview cookie pair, the ticket's URL)."""
    r = c.owner.api('/_seed/api/preview/ticket', 'POST', {})
    assert r.status == 200, (r.status, r.text)
    url = r.json()['url']
    u = urllib.parse.urlsplit(url)
    assert u.path == '/_seed/preview/enter', url
    r = request(c.app + u.path + '?' + u.query)
    assert r.status == 303 and r.header('Location') == '/', (r.status, r.text)
    set_cookie = r.header('Set-Cookie')
    assert set_cookie and 'HttpOnly' in set_cookie and 'SameSite=Lax' in set_cookie, set_cookie
    return set_cookie.split(';')[0], u.path + '?' + u.query


def setup():
    c = ScriptedSeed('seed-preview-', 'preview', before_run=write_organism, preview=True)
    git(c, 'add', '-A')
    git(c, 'commit', '-qm', 'The notes app')
    c.owner = Browser(c.base)
    r = request(c.base + '/_seed/api/login-links', 'POST',
                headers={'Authorization': 'Bearer ' + open(os.path.join(c.dir, '.seed', 'control-token')).read().strip(),
                         'Content-Type': 'application/json'}, body='{}')
    assert r.status == 201, (r.status, r.text)
    assert c.owner.sign_in(link_from(r.text)).status == 200
    c.owner.load_page()
    return c


def teardown(c):
    if c is not None:
        c.close()


@test
def the_preview_is_on_by_default(c):
    assert api(c, '/_seed/api/evolution-settings').json() == {'preview': True}


@test
def the_owner_sees_the_candidate_on_a_copy_of_the_live_data(c):
    script(c, evolution_script('candidate'))
    c.evo = submit(c, 'Become the candidate')
    # The owner's commit is verified and applied first (no preview for it);
    # then the live app has its table, which gets the live note. Waited for
    # through the API: until then the running app answers / with 500 (no
    # table yet), and three of those open an incident whose diagnosis would
    # take the scripted model's answers meant for the evolution.
    wait_until(lambda: any(e['kind'] == 'owner' and e['state'] == 'complete'
                           for e in api(c, '/_seed/api/evolutions').json()['evolutions']),
               timeout=900, interval=1, what="the owner's commit live")
    wait_until(lambda: app_get(c, '/').text.startswith('gen:live'), timeout=300, interval=1, what='the notes app')
    psql(c, "INSERT INTO notes (body) VALUES ('live note')")
    e = wait_preview(c, c.evo)
    assert 'copy of the live data' in json.dumps(previews(e, 'running')), previews(e, 'running')
    c.cookie, ticket = enter_preview(c)
    r = app_get(c, '/', c.cookie)
    assert r.status == 200 and r.text == 'gen:candidate notes:live note', (r.status, r.text)
    # The browser keeps no copy of the candidate's pages, and keys the live
    # app's on the cookie that entering the preview changed.
    assert r.header('Cache-Control') == 'no-store' and 'Cookie' in r.header('Vary'), r.headers
    # Everyone else: the live generation.
    r = app_get(c, '/')
    assert r.text == 'gen:live notes:live note'
    assert r.header('Cache-Control') == 'max-age=3600' and 'Cookie' in r.header('Vary'), r.headers
    # A ticket works once.
    assert request(c.app + ticket).status == 410
    # A write in the preview stays in the copy.
    assert app_get(c, '/write', c.cookie).text == 'written'
    assert app_get(c, '/', c.cookie).text == 'gen:candidate notes:live note,from preview'
    assert psql(c, "SELECT string_agg(body, ',' ORDER BY id) FROM notes") == 'live note'
    assert app_get(c, '/').text == 'gen:live notes:live note'
    # The candidate never sees the preview cookie (nor the session's).
    assert leftovers(c)['databases'] == 1


@test
def decide_is_checked(c):
    for body, status in (({'action': 'go'}, 400), ({'action': 'changes'}, 400), ({'action': 'apply', 'x': 1}, 400)):
        r = api(c, f'/_seed/api/evolutions/{c.evo}/decide', 'POST', body)
        assert r.status == status, (body, r.status, r.text)
    r = api(c, '/_seed/api/evolutions/evo_0123456789abcdef/decide', 'POST', {'action': 'apply'})
    assert r.status in (404, 409), (r.status, r.text)


@test
def discard_ends_it_and_removes_the_preview(c):
    r = api(c, f'/_seed/api/evolutions/{c.evo}/decide', 'POST', {'action': 'discard'})
    assert r.status == 200, r.text
    e = wait_final(c, c.evo)
    assert e['state'] == 'cancelled', e['state']
    wait_until(lambda: leftovers(c) == {'databases': 0, 'roles': 0, 'dirs': [], 'processes': ''}, timeout=60,
               what='the preview removed')
    # The cookie leads nowhere special any more: the live generation.
    assert app_get(c, '/', c.cookie).text == 'gen:live notes:live note'
    assert api(c, f'/_seed/api/evolutions/{c.evo}/decide', 'POST', {'action': 'apply'}).status == 409


@test
def changes_go_back_to_the_model_and_apply_goes_live(c):
    script(c, evolution_script('second'))
    live_before = git(c, 'rev-parse', 'main').strip()
    evo = submit(c, 'Become the second')
    wait_preview(c, evo)
    cookie, _ = enter_preview(c)
    assert app_get(c, '/', cookie).text == 'gen:second notes:live note'
    script(c, changes_script('third'))
    r = api(c, f'/_seed/api/evolutions/{evo}/decide', 'POST', {'action': 'changes', 'feedback': 'Call it third.'})
    assert r.status == 200, r.text
    wait_preview(c, evo, n=2)
    cookie, _ = enter_preview(c)  # a new preview: a new ticket
    assert app_get(c, '/', cookie).text == 'gen:third notes:live note'
    assert app_get(c, '/').text == 'gen:live notes:live note'
    r = api(c, f'/_seed/api/evolutions/{evo}/decide', 'POST', {'action': 'apply'})
    assert r.status == 200, r.text
    e = wait_final(c, evo)
    assert e['state'] == 'complete', json.dumps(e)[-2000:]
    wait_until(lambda: app_get(c, '/').text == 'gen:third notes:live note', timeout=120, what='the new generation')
    assert leftovers(c) == {'databases': 0, 'roles': 0, 'dirs': [], 'processes': ''}, leftovers(c)
    # One commit for the generation, as without the second round.
    assert git(c, 'rev-parse', 'main^').strip() == live_before, git(c, 'log', '--oneline', '-4')
    assert git(c, 'log', '-1', '--format=%s', 'main').startswith('evolve(gen): Become second')


@test
def a_killed_kernel_leaves_no_preview_after_boot(c):
    script(c, evolution_script('fourth'))
    evo = submit(c, 'Become the fourth')
    wait_preview(c, evo)
    assert leftovers(c)['databases'] == 1
    old = kernel_pid(c)
    # The supervisor restarts a kernel that crashes after its first minute
    # (one that dies sooner is not trusted: kernel/supervisor/policy.c).
    wait_until(lambda: process_age(old) > 61, timeout=120, interval=1, what='the kernel a minute old')
    os.kill(old, signal.SIGKILL)
    # The supervisor starts a new kernel, which cleans up at boot.
    wait_until(lambda: os.path.exists(os.path.join(c.dir, '.seed', 'kernel.json')) and kernel_pid(c) != old and
               request(c.base + '/_seed/healthz').status == 200, timeout=300, interval=1, what='the kernel again')
    wait_until(lambda: leftovers(c) == NOTHING_LEFT, timeout=120, interval=1,
               what=f'no preview left ({leftovers(c)})')
    assert evolution(c, evo)['state'] == 'failed'
    assert app_get(c, '/').text == 'gen:third notes:live note'


if __name__ == '__main__':
    taplib.run(setup, teardown)
