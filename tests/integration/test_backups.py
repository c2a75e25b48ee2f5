#!/usr/bin/env python3
"""End to end: the owner's backups of the live data (issue 18) against a
real Seed (real PostgreSQL, bwrap, git, the live organism, the scheduler).

- a daily backup is taken by the scheduler when there is none (its run is
  kept in kernel memory), a manual one by `seed backup` and the API; both
  are listed with kind, size, generation and time (`seed backups`, GET).
- `seed restore --yes ID` brings the data back as it was, saves today's
  data first, re-grants the reader role, and the app serves again; without
  --yes and without a terminal it refuses and nothing changes.
- a restore that fails (a damaged dump: its start intact, its end cut off)
  puts the saved data back: the data is unchanged and the app serves; a
  file that is no dump at all is refused before anything is touched.
- bad input: a malformed id is a 400, an unknown one a 404, a backup while
  a restore runs a 409; the download is streamed as an attachment, behind
  the token, byte for byte the file.

Environment: SEED_BIN (the seed CLI).
"""
import os
import subprocess
import threading

import taplib
from seedlib import SEED, ScriptedSeed, api, kernel_psql, request, seed, token, wait_until
from taplib import test


def setup():
    return ScriptedSeed('seed-backups-', 'backups')


def teardown(c):
    if c is not None:
        c.close()


def sql(c, statement):
    """One statement on the live data as the app's own role."""
    return as_role(c, 'organism', statement)


def as_role(c, role, statement):
    """psql prints SET's tag first: the answer is the last line."""
    return kernel_psql(c, f'SET ROLE {role}; {statement}', db='organism').splitlines()[-1]


def notes(c):
    return sql(c, 'SELECT string_agg(body, \',\' ORDER BY id) FROM notes')


def backups(c):
    r = api(c, '/_seed/api/backups')
    assert r.status == 200, (r.status, r.text)
    return r.json()


def backup_path(c, bid):
    return os.path.join(c.dir, '.seed', 'backups', bid + '.dump')


def app_serves(c):
    return request(c.app + '/healthz').status == 200


def restore_on_a_terminal(c, bid, answer):
    """`seed restore ID` with a terminal on stdin that answers `answer`;
    (exit code, what it printed)."""
    main, sub = os.openpty()
    try:
        os.write(main, answer.encode() + b'\n')
        p = subprocess.run([SEED, 'restore', '--dir', c.dir, bid], stdin=sub, capture_output=True, text=True,
                           timeout=600)
    finally:
        os.close(sub)
        os.close(main)
    return p.returncode, p.stdout + p.stderr


def restore(c, bid, timeout=300):
    h = {'Authorization': 'Bearer ' + token(c), 'Content-Type': 'application/json'}
    return request(c.base + f'/_seed/api/backups/{bid}/restore', 'POST', headers=h, body='{}', timeout=timeout)


@test
def the_scheduler_takes_a_daily_backup_when_there_is_none(c):
    daily = wait_until(lambda: [b for b in backups(c)['backups'] if b['kind'] == 'daily'], timeout=120,
                       what='the first daily backup')
    assert daily[0]['generation'] >= 1 and daily[0]['size'] > 0, daily
    row = kernel_psql(c, "SELECT runs, last_result, failures FROM schedule_jobs WHERE name = 'backup-daily'")
    runs, result, failures = row.split('|')
    assert int(runs) >= 1 and result == '0' and failures == '0', row
    jobs = {j['name']: j for j in api(c, '/_seed/api/status').json()['jobs']}
    daily_job = jobs['backup-daily']
    assert daily_job['runs'] >= 1 and daily_job['failures'] == 0 and not daily_job['running'], jobs
    assert daily_job['next_due'] >= daily[0]['time'] // 1000 + 23 * 3600 - 60, (daily_job, daily[0])
    kinds = {k['kind']: k['keep'] for k in backups(c)['kinds']}
    assert kinds == {'before-apply': 10, 'daily': 7, 'manual': 10, 'before-restore': 5}, kinds


@test
def a_manual_backup_is_taken_and_listed(c):
    sql(c, "CREATE TABLE notes (id int PRIMARY KEY, body text); INSERT INTO notes VALUES (1, 'one'), (2, 'two')")
    out = seed('backup', '--dir', c.dir).stdout
    assert out.startswith('Backed up the live data as manual-'), out
    bid = out.split(' as ')[1].strip().rstrip('.')
    listed = {b['id']: b for b in backups(c)['backups']}
    assert bid in listed and listed[bid]['kind'] == 'manual', listed
    assert listed[bid]['size'] == os.path.getsize(backup_path(c, bid)), listed[bid]
    assert abs(listed[bid]['time'] / 1000 - os.path.getmtime(backup_path(c, bid))) < 2, listed[bid]
    table = seed('backups', '--dir', c.dir).stdout
    assert bid in table and 'manual' in table and 'daily' in table, table
    r = api(c, '/_seed/api/backups', 'POST', {})
    assert r.status == 201 and r.json()['id'].startswith('manual-'), (r.status, r.text)
    c.good = bid


@test
def restore_brings_the_data_back_and_the_app_serves(c):
    sql(c, "INSERT INTO notes VALUES (3, 'three'); UPDATE notes SET body = 'changed' WHERE id = 1")
    got = notes(c)
    assert got == 'changed,two,three', got
    # Without a terminal and without --yes: refused, nothing changes.
    p = seed('restore', '--dir', c.dir, c.good, check=False)
    assert p.returncode == 2 and '--yes' in p.stderr, (p.returncode, p.stderr)
    assert notes(c) == 'changed,two,three'
    # On a terminal it asks, naming the backup; anything but yes changes nothing.
    rc, out = restore_on_a_terminal(c, c.good, 'no')
    assert rc == 2 and f'with backup {c.good}' in out and 'ALL of the live data' in out, (rc, out)
    assert 'not restored' in out, out
    assert notes(c) == 'changed,two,three'
    before = {b['id'] for b in backups(c)['backups'] if b['kind'] == 'before-restore'}
    out = seed('restore', '--yes', '--dir', c.dir, c.good, timeout=600).stdout
    assert out.startswith(f'Restored {c.good}'), out
    assert notes(c) == 'one,two'
    saved = [b for b in backups(c)['backups'] if b['kind'] == 'before-restore' and b['id'] not in before]
    assert len(saved) == 1 and saved[0]['id'] in out, (saved, out)
    # The reader role reads the restored data (its grants were made again).
    assert as_role(c, 'reader', 'SELECT count(*) FROM notes') == '2'
    assert app_serves(c)
    # Today's data was saved: restoring it brings back what was there.
    r = restore(c, saved[0]['id'])
    assert r.status == 200 and r.json()['restored'] == saved[0]['id'], (r.status, r.text)
    got = notes(c)
    assert got == 'changed,two,three', (got, saved, backups(c))
    assert app_serves(c)


@test
def a_failed_restore_puts_the_saved_data_back(c):
    r = api(c, '/_seed/api/backups', 'POST', {})
    assert r.status == 201, r.text
    damaged = r.json()['id']
    path = backup_path(c, damaged)
    size = os.path.getsize(path)
    with open(path, 'r+b') as f:  # its start (a dump's header) intact, its end cut off
        f.truncate(size // 2)
    sql(c, "INSERT INTO notes VALUES (4, 'four')")
    want = notes(c)
    r = restore(c, damaged)
    assert r.status == 500, (r.status, r.text)
    err = r.json()['error']
    assert 'could not be restored' in err and 'back as it was' in err, err
    assert notes(c) == want
    assert as_role(c, 'reader', 'SELECT count(*) FROM notes') == '4'
    wait_until(lambda: app_serves(c), timeout=60, what='the app on the saved data')
    # No dump at all: refused before anything is touched (no data saved).
    with open(path, 'wb') as f:
        f.write(b'not a dump at all\n')
    count = len(backups(c)['backups'])
    r = restore(c, damaged)
    assert r.status == 422 and 'not a PostgreSQL dump' in r.json()['error'], (r.status, r.text)
    assert len(backups(c)['backups']) == count
    assert notes(c) == want


@test
def bad_ids_and_unknown_backups_are_refused(c):
    for bad in ('Manual-1-ab', 'manual-0-ab', 'manual-1-zz', 'weekly-1-ab', 'manual-1-ab.dump', 'x' * 80):
        for path, method in ((f'/_seed/api/backups/{bad}/restore', 'POST'),
                             (f'/_seed/api/backups/{bad}/download', 'GET')):
            r = api(c, path, method, {} if method == 'POST' else None)
            assert r.status == 400 and 'not a backup id' in r.json()['error'], (bad, path, r.status, r.text)
    for path, method in (('/_seed/api/backups/manual-9-abcdef/restore', 'POST'),
                         ('/_seed/api/backups/manual-9-abcdef/download', 'GET')):
        r = api(c, path, method, {} if method == 'POST' else None)
        assert r.status == 404, (path, r.status, r.text)
    r = api(c, '/_seed/api/backups', 'POST', '[1]')
    assert r.status == 400, (r.status, r.text)
    p = seed('restore', '--yes', '--dir', c.dir, '../etc', check=False)
    assert p.returncode == 2 and 'not a backup id' in p.stderr, p.stderr
    p = seed('restore', '--yes', '--dir', c.dir, 'manual-9-abcdef', check=False)
    assert p.returncode == 1 and 'no backup manual-9-abcdef' in p.stderr, p.stderr


@test
def a_backup_while_a_restore_runs_is_refused(c):
    bid = c.good
    out = []
    t = threading.Thread(target=lambda: out.append(restore(c, bid)), daemon=True)
    t.start()
    # While it runs (the app stops and starts again), the live data is busy.
    wait_until(lambda: backups(c)['busy'] or out, timeout=120, what='the restore to start')
    assert not out, 'the restore ended before it could be seen running'
    r = api(c, '/_seed/api/backups', 'POST', {})
    assert r.status == 409 and 'being changed' in r.json()['error'], (r.status, r.text)
    r = api(c, f'/_seed/api/backups/{bid}/restore', 'POST', {})
    assert r.status == 409, (r.status, r.text)
    t.join(timeout=300)
    assert out and out[0].status == 200, out and (out[0].status, out[0].text)
    assert not backups(c)['busy']
    assert notes(c) == 'one,two'


@test
def a_download_is_the_file_as_an_attachment_behind_the_token(c):
    bid = c.good
    r = api(c, f'/_seed/api/backups/{bid}/download')
    assert r.status == 200, (r.status, r.text)
    assert r.header('Content-Disposition') == f'attachment; filename="{bid}.dump"', r.headers
    assert r.header('Content-Type') == 'application/octet-stream', r.headers
    assert r.header('Cache-Control') == 'no-store', r.headers
    with open(backup_path(c, bid), 'rb') as f:
        assert r.body == f.read()
    assert r.body.startswith(b'PGDMP')
    assert request(c.base + f'/_seed/api/backups/{bid}/download').status == 401
    r = request(c.base + f'/_seed/api/backups/{bid}/download', headers={'Authorization': 'Bearer ' + '0' * 64})
    assert r.status == 401


if __name__ == '__main__':
    taplib.run(setup, teardown)
