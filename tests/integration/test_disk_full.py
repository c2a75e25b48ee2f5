#!/usr/bin/env python3
"""A full disk under a Seed (issue 17): the Seed lives on a small filesystem
of the test's own (a tmpfs with size=, mounted by root before the Seed's
processes drop to their account), which the test fills at chosen moments:
while the model writes a file (mutate), before the commit, before the
live data's backup, and while the organism's log rotates. Each time: a
clear error, the repository and the live generation intact; once there is
room again, the Seed goes on. Prints TAP.

Environment: SEED_BIN (the seed CLI).
"""
import os
import subprocess
import tempfile

import taplib
from seedlib import (ScriptedSeed, api, evolution, holding, kernel_psql, organism_with_fault_switches, release,
                     request, script, submit, wait_until)
from taplib import test

GREETING = "I don't have a purpose yet"
ENDED = ('complete', 'failed', 'cancelled', 'rolled_back')
PLAN = {'tool_calls': [{'name': 'submit_plan', 'arguments': {
    'title': 'Disk', 'scope': 'disk', 'summary': 'A change made on a full disk.', 'steps': ['a file']}}]}
FINISH = {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Done.'}}]}
REFLECT = {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing new.'}}]}
NOSPACE = 'No space left on device'


def write(path, content, hold=None):
    step = {'tool_calls': [{'name': 'write_file', 'arguments': {'path': path, 'content': content}}]}
    if hold:
        step['hold'] = hold
    return step


class Disk:
    """A tmpfs of size bytes at a fresh folder; fill() takes all of its
    room but `leave` bytes, free() gives it back."""

    def __init__(self, size):
        self.dir = tempfile.mkdtemp(prefix='seed-disk-')
        p = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size},mode=0755', 'tmpfs', self.dir],
                           capture_output=True, text=True)
        if p.returncode != 0:
            os.rmdir(self.dir)
            raise taplib.Skip(f'cannot mount a tmpfs (needs root): {p.stderr.strip()}')
        self.filler = os.path.join(self.dir, 'filler')

    def room(self):
        st = os.statvfs(self.dir)
        return st.f_bavail * st.f_frsize

    def fill(self, leave=0):
        self.free()
        n = self.room() - leave
        if n > 0:
            with open(self.filler, 'wb') as f:
                os.posix_fallocate(f.fileno(), 0, n)
        return self.room()

    def free(self):
        if os.path.exists(self.filler):
            os.unlink(self.filler)

    def close(self):
        self.free()
        subprocess.run(['umount', '-l', self.dir], capture_output=True)
        os.rmdir(self.dir)


class Ctx:
    pass


def setup():
    c = Ctx()
    c.disk = Disk('3G')
    try:
        c.seed = ScriptedSeed('seed-disk-', 'disk', before_run=organism_with_fault_switches, parent=c.disk.dir)
    except BaseException:
        c.disk.close()
        raise
    wait_until(lambda: api(c.seed, '/_seed/api/status').json().get('generation') == 2 and organism_running(c.seed),
               timeout=600, what='the owner commit to be live')
    return c


def teardown(c):
    if c is not None:
        c.disk.free()
        c.seed.close()
        c.disk.close()


def organism_running(s):
    return (api(s, '/_seed/api/status').json().get('organism') or {}).get('state') == 'running'


def generation(s):
    return api(s, '/_seed/api/generations').json()['current']


def git(s, *args):
    return subprocess.run(['git', '-c', f'safe.directory={s.dir}', '-C', s.dir, *args], capture_output=True,
                          text=True)


def intact(s, gen):
    """The repository checks out whole, main is generation gen, the
    organism serves it."""
    fsck = git(s, 'fsck', '--no-dangling')
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert git(s, 'rev-parse', 'main').stdout == git(s, 'rev-parse', f'seed/gen-{gen}^{{commit}}').stdout
    assert api(s, '/_seed/api/generations').json()['current'] == gen
    r = wait_until(lambda: (lambda x: x if x.status == 200 else None)(request(s.app + '/')), timeout=120,
                   what='the organism')
    assert GREETING in r.text


def ended(s, evo_id, timeout=600):
    return wait_until(lambda: (lambda x: x if x['state'] in ENDED else None)(evolution(s, evo_id)),
                      timeout=timeout, what=f'{evo_id} to end')


def tool_results(s):
    """The text of every tool result the kernel sent the model."""
    out = []
    for rq in request(s.model_base + '/_requests').json():
        for m in ((rq.get('body') or {}).get('messages') or []):
            if m.get('role') == 'tool':
                out.append(str(m.get('content')))
    return out


@test
def disk_full_while_mutating_is_a_clear_tool_error(c):
    s = c.seed
    gen = generation(s)
    script(s, [PLAN, write('organism/NOTE.txt', 'x' * 65536, hold='full'), write('organism/NOTE.txt', 'roomy',
                                                                                  hold='room'),
               FINISH, REFLECT, {'text': 'Done.'}])
    evo_id = submit(s, 'Write on a full disk')
    wait_until(lambda: holding(s, 'full'), timeout=300, what='the model to hold before the write')
    c.disk.fill()
    release(s, 'full')
    wait_until(lambda: holding(s, 'room'), timeout=120, what='the write to fail')
    results = tool_results(s)
    print(f'# the write on a full disk: {results[-1][:200]!r}', flush=True)
    assert NOSPACE in results[-1] or 'no space' in results[-1].lower(), results[-1]
    c.disk.free()
    release(s, 'room')
    e = ended(s, evo_id)
    assert e['state'] == 'complete', e
    intact(s, gen + 1)


@test
def disk_full_before_the_commit_fails_it_clearly(c):
    s = c.seed
    gen = generation(s)
    script(s, [PLAN, write('organism/NOTE.txt', 'before the commit ' + os.urandom(8).hex()), FINISH,
               dict(REFLECT, hold='commit'), {'text': 'Done.'}])
    evo_id = submit(s, 'Commit on a full disk')
    wait_until(lambda: holding(s, 'commit'), timeout=600, what='the reflection')
    c.disk.fill()
    release(s, 'commit')
    e = ended(s, evo_id)
    c.disk.free()
    print(f'# the commit on a full disk: {e["state"]}: {e.get("error")}', flush=True)
    assert e['state'] == 'failed' and NOSPACE in (e.get('error') or ''), e
    intact(s, gen)


@test
def disk_full_at_the_backup_fails_the_apply_clearly(c):
    s = c.seed
    gen = generation(s)
    # live data big enough that its dump cannot fit in what is left
    kernel_psql(s, "SET ROLE organism; CREATE TABLE IF NOT EXISTS ballast AS SELECT string_agg(md5(random()::text), '') AS b "
                   "FROM generate_series(1, 40000) GROUP BY (random() * 100)::int", 'organism')
    script(s, [PLAN, write('organism/NOTE.txt', 'before the backup ' + os.urandom(8).hex()), FINISH,
               dict(REFLECT, hold='backup'), {'text': 'Done.'}])
    evo_id = submit(s, 'Back up on a full disk')
    wait_until(lambda: holding(s, 'backup'), timeout=600, what='the reflection')
    c.disk.fill(leave=256 * 1024)
    release(s, 'backup')
    e = ended(s, evo_id)
    c.disk.free()
    print(f'# the backup on a full disk: {e["state"]}: {e.get("error")}', flush=True)
    for line in open(os.path.join(s.dir, '.seed', 'logs', 'kernel.log'), errors='replace'):
        if 'backing up' in line:
            print('# kernel.log: ' + line.strip()[:300], flush=True)
    assert e['state'] == 'failed' and 'back up' in (e.get('error') or '') and NOSPACE in e['error'], e
    left = [n for n in os.listdir(os.path.join(s.dir, '.seed', 'backups')) if evo_id[4:] in n]
    assert not left, left
    intact(s, gen)


@test
def disk_full_for_the_owners_backup_or_restore_is_a_clear_error(c):
    s = c.seed
    gen = generation(s)
    kernel_psql(s, "SET ROLE organism; CREATE TABLE IF NOT EXISTS ballast AS SELECT string_agg(md5(random()::text), '') "
                   "AS b FROM generate_series(1, 40000) GROUP BY (random() * 100)::int", 'organism')
    rows = kernel_psql(s, 'SELECT count(*) FROM ballast', 'organism')
    daily = wait_until(lambda: [b for b in api(s, '/_seed/api/backups').json()['backups'] if b['kind'] == 'daily'],
                       timeout=120, what='the daily backup')[0]
    folder = os.path.join(s.dir, '.seed', 'backups')
    before = sorted(os.listdir(folder))
    c.disk.fill(leave=256 * 1024)
    try:
        r = api(s, '/_seed/api/backups', 'POST', {})
        print(f'# a backup on a full disk: {r.status} {r.text.strip()}', flush=True)
        assert r.status == 507 and 'disk is full' in r.json()['error'], (r.status, r.text)
        # A restore first saves today's data: on a full disk it changes nothing.
        r = api(s, f"/_seed/api/backups/{daily['id']}/restore", 'POST', {})
        print(f'# a restore on a full disk: {r.status} {r.text.strip()}', flush=True)
        assert r.status == 507 and 'disk is full' in r.json()['error'], (r.status, r.text)
    finally:
        c.disk.free()
    assert sorted(os.listdir(folder)) == before  # nothing half-written is left
    assert kernel_psql(s, 'SELECT count(*) FROM ballast', 'organism') == rows
    assert not api(s, '/_seed/api/backups').json()['busy']
    r = api(s, '/_seed/api/backups', 'POST', {})  # with room again, it works
    assert r.status == 201, (r.status, r.text)
    intact(s, gen)


@test
def disk_full_while_the_organism_log_rotates(c):
    s = c.seed
    gen = generation(s)
    logs = os.path.join(s.dir, '.seed', 'logs')
    c.disk.fill()
    try:
        for _ in range(2):  # 48 MiB: past a rotation (10 MiB) on a disk with no room
            assert request(s.app + '/fault/spew', timeout=30).status == 200
        assert request(s.base + '/_seed/healthz', timeout=10).status == 200
        assert api(s, '/_seed/api/status').status == 200
    finally:
        c.disk.free()
    wait_until(lambda: organism_running(s), timeout=120, what='the organism')
    size = sum(os.path.getsize(os.path.join(logs, n)) for n in os.listdir(logs) if n.startswith('organism.log'))
    assert request(s.app + '/fault/spew', timeout=30).status == 200
    wait_until(lambda: sum(os.path.getsize(os.path.join(logs, n)) for n in os.listdir(logs)
                           if n.startswith('organism.log')) != size, timeout=60,
               what='the organism log to be written again once there is room')
    intact(s, gen)


if __name__ == '__main__':
    taplib.run(setup, teardown)
