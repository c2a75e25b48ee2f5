#!/usr/bin/env python3
"""`meson install` ships a working CLI: the installed `seed new` plants a Seed
from the installed copy of the source tree. Prints TAP.

Environment: SEED_BUILD_ROOT (a configured build dir).
"""
import os
import shutil
import subprocess
import tempfile

import taplib
from taplib import test


class Ctx:
    pass


def setup():
    c = Ctx()
    c.tmp = tempfile.mkdtemp(prefix='seed-install-')
    os.chmod(c.tmp, 0o755)
    c.dest = os.path.join(c.tmp, 'dest')
    p = subprocess.run(['meson', 'install', '-C', os.environ['SEED_BUILD_ROOT'], '--no-rebuild', '--quiet',
                        '--destdir', c.dest], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    found = [os.path.join(d, 'seed') for d, _, files in os.walk(c.dest)
             if 'seed' in files and d.endswith('/bin')]
    assert found, 'no installed bin/seed'
    c.seed = found[0]
    c.prefix = os.path.dirname(os.path.dirname(c.seed))
    return c


def teardown(c):
    if c:
        shutil.rmtree(c.tmp, ignore_errors=True)


@test
def installs_the_binaries_and_the_source(c):
    assert os.access(c.seed, os.X_OK)
    src = os.path.join(c.prefix, 'share/seed/source')
    for f in ('meson.build', 'seed.yaml', 'README.md', 'SECURITY.md', 'kernel/app/app.c', 'organism/bin/server',
              'control/index.html'):
        assert os.path.exists(os.path.join(src, f)), f
    assert not os.path.exists(os.path.join(src, 'tests/browser/node_modules'))
    kernels = [d for d, _, files in os.walk(c.prefix) if 'seed-kernel' in files]
    assert kernels, 'no installed seed-kernel'


@test
def installed_cli_plants_from_the_installed_source(c):
    work = os.path.join(c.tmp, 'work')
    os.mkdir(work)
    os.chmod(work, 0o755)
    p = subprocess.run([c.seed, 'new', 'fromdist', '--no-run'], cwd=work, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    d = os.path.join(work, 'fromdist')
    assert os.path.exists(os.path.join(d, 'kernel/app/app.c'))
    assert os.path.exists(os.path.join(d, 'SECURITY.md'))  # the README's Security section links it
    assert 'name: fromdist' in open(os.path.join(d, 'seed.yaml')).read()
    assert os.path.isdir(os.path.join(d, '.git'))
    assert 'Start it with' in p.stdout
    # Secrets never go into the Seed's folder, where sandboxes and git see them.
    env = os.path.join(d, '.env')
    with open(env, 'w') as f:
        f.write('KEY=value\n')
    p = subprocess.run([c.seed, 'run', '--dir', d, '--env-file', env], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "inside the Seed's folder" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(d, '.seed/kernel-build'))


@test
def cli_help_and_errors(c):
    for args in (['--help'], ['new', '--help'], ['run', '--help'], ['stop', '--help'], ['status', '--help'],
                 ['login', '--help'], ['restart', '--help'], ['doctor', '--help']):
        p = subprocess.run([c.seed, *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, (args, p.stderr)
        assert 'Usage: seed' in p.stdout, (args, p.stdout)
    p = subprocess.run([c.seed, 'bogus'], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and 'unknown command' in p.stderr
    p = subprocess.run([c.seed, 'new', 'Bad_Name', '--no-run'], cwd=c.tmp, capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2 and 'not a valid Seed name' in p.stderr, p.stderr
    p = subprocess.run([c.seed, 'status'], cwd='/', capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and 'not inside a Seed' in p.stderr, p.stderr
    p = subprocess.run([c.seed, 'new', 'x', '-e', '1BAD=v', '--no-run'], cwd=c.tmp, capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2 and 'not a valid variable name' in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(c.tmp, 'x'))


if __name__ == '__main__':
    taplib.run(setup, teardown)
