#!/usr/bin/env python3
"""End to end: hosting (issue 13, seed 001 "Data") — a Seed whose memory and
data live in an external PostgreSQL, and the deploy image on Kubernetes'
terms. Prints TAP.

- Native: a real Seed (CLI, kernel, bwrap, git) started with
  SEED_DATABASE_URL (an --env-file) pointing at a PostgreSQL the test starts
  (TLS only, a role with CREATEROLE and CREATEDB): the kernel's memory is
  there, the live organism (the starter app with the owner's commit that
  makes it write a row at boot, from its real sandbox, which has no network)
  has its database there, no private server is started, and the URL's
  password is nowhere: not in the Seed's files or git, not in any process's
  command line or environment, not in the API's answers. Then an evolution
  (verified on scratch databases there, applied with a backup of the live
  data) and `seed rollback --with-data`, which restores that backup.
- Kubernetes: deploy/kubernetes/seed.yaml run with `podman kube play`
  (runAsNonRoot, ALL capabilities dropped, no privilege escalation, the
  Seed's seccomp.json, read-only root, a volume for /seed, a Secret with the
  keys and SEED_DATABASE_URL): the image is built from the top-level
  Dockerfile and deploy/Dockerfile; the pod plants the Seed, runs it against
  the test's PostgreSQL, and the test checks from outside what the manifest
  promises. Skipped, with the reason, when there is no top-level Dockerfile
  yet or podman cannot run it here.

Environment: SEED_BIN (the seed CLI), SEED_SOURCE_ROOT (this source tree).
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import test, Skip  # noqa: E402
from seedlib import (ExternalPostgres, ScriptedSeed, api, every_file, free_port, git_objects, request,  # noqa: E402
                     seed, wait_until)

SRC = os.environ.get('SEED_SOURCE_ROOT', os.path.abspath(os.path.join(os.path.dirname(__file__), '../..')))

# At its first start the live organism writes a row into its database: from
# its sandbox (no network: only the kernel's relay on /run/postgresql).
BOOT_WRITE = ("if (process.env.DATABASE_URL) require('node:child_process').execFileSync('psql', "
              "[process.env.DATABASE_URL, '-qAt', '-v', 'ON_ERROR_STOP=1', '-c', "
              "'CREATE TABLE IF NOT EXISTS boots (n serial, note text); INSERT INTO boots DEFAULT VALUES'], "
              "{stdio: 'inherit'});\n")


def prefix_of(seed_dir):
    return open(os.path.join(seed_dir, '.seed/secrets/pg-prefix')).read().strip()


def write_at_boot(seed_dir):
    """The owner's commit: the organism writes a row at every start (the
    kernel verifies it at the first start, on scratch databases)."""
    path = os.path.join(seed_dir, 'organism/bin/server')
    text = open(path).read()
    text = text.replace("'use strict';\n", "'use strict';\n" + BOOT_WRITE, 1)
    assert BOOT_WRITE in text
    with open(path, 'w') as f:
        f.write(text)
    git = ['git', '-C', seed_dir, '-c', 'user.name=Owner', '-c', 'user.email=owner@example.com']
    if os.geteuid() == 0:
        git = ['runuser', '-u', 'seed', '--'] + git
    p = subprocess.run(git + ['commit', '-qm', 'Write a row at every start', '--', 'organism/bin/server'],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def setup():
    # Pods reach the host at podman's bridge gateway, which exists only
    # while a pod runs: then the server listens on every address, and
    # accepts TCP from loopback and the bridge's network only.
    bridge = podman_bridge()
    ctx = {'pg': ExternalPostgres(listen='*' if bridge else '127.0.0.1',
                                  hba_nets=('127.0.0.1/32', '10.88.0.0/16') if bridge else ('127.0.0.1/32',))}
    envdir = tempfile.mkdtemp(prefix='seed-hosting-env-')
    os.chmod(envdir, 0o700)
    ctx['envfile'] = os.path.join(envdir, 'secrets.env')
    with open(ctx['envfile'], 'w') as f:
        f.write(f"SEED_DATABASE_URL={ctx['pg'].url()}\n")
    ctx['envdir'] = envdir
    return ctx


def teardown(ctx):
    if not ctx:
        return
    for k in ('seed',):
        if ctx.get(k):
            ctx[k].close()
    kube_down(ctx)
    if ctx.get('kube_dir'):
        shutil.rmtree(ctx['kube_dir'], ignore_errors=True)
    if ctx.get('kube_image'):
        podman('rmi', '-f', ctx['kube_image'], check=False)
    ctx['pg'].close()
    shutil.rmtree(ctx['envdir'], ignore_errors=True)


# ---- native ----

@test
def native_seed_keeps_its_memory_and_data_in_the_external_server(ctx):
    c = ctx['seed'] = ScriptedSeed('seed-hosting-', 'hosted', run_args=('--env-file', ctx['envfile']),
                                   before_run=write_at_boot)
    pg = ctx['pg']
    assert not os.path.exists(os.path.join(c.dir, '.seed/postgres')), 'a private server was initialised'
    pfx = prefix_of(c.dir)
    assert re.fullmatch(r'hosted_[0-9a-f]{10}_', pfx), pfx
    # The kernel's memory: its migrations, and a sign-in link made now.
    seed('login', '--print', '--dir', c.dir)
    assert int(pg.query('SELECT count(*) FROM kernel_migrations', db=pfx + 'kernel')) >= 1
    assert int(pg.query('SELECT count(*) FROM signin_links', db=pfx + 'kernel')) >= 1
    # The live organism, from its sandbox, through the relay.
    wait_until(lambda: api(c, '/_seed/api/status').json()['organism']['state'] == 'running', timeout=180,
               what='the live organism')
    assert api(c, '/_seed/api/status').json()['database'] == 'external'

    wait_until(lambda: pg.query("SELECT count(*) FROM pg_tables WHERE tablename = 'boots'", db=pfx + 'live') == '1',
               timeout=300, what="the organism's boot row")
    assert int(pg.query('SELECT count(*) FROM boots', db=pfx + 'live')) >= 1
    owner = pg.query(f"SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'boots'", db=pfx + 'live')
    assert owner == pfx + 'organism', owner
    log = open(os.path.join(c.dir, '.seed/logs/kernel.log')).read()
    assert 'external PostgreSQL ready' in log, log[-2000:]


@test
def the_database_password_is_nowhere(ctx):
    c = ctx.get('seed')
    if not c:
        raise Skip('the Seed did not start')
    canary = ctx['pg'].password.encode()
    hits = [p for p, data in list(every_file(c.dir)) + list(git_objects(c.dir)) if canary in data]
    for p in os.listdir('/proc'):
        if not p.isdigit():
            continue
        for f in ('cmdline', 'environ'):
            try:
                if canary in open(f'/proc/{p}/{f}', 'rb').read():
                    hits.append(f'/proc/{p}/{f}')
            except OSError:
                pass
    for path in ('/_seed/api/status', '/_seed/api/settings', '/_seed/api/identity',
                 '/_seed/api/logs?name=kernel&lines=2000', '/_seed/api/logs?name=organism&lines=2000'):
        r = api(c, path)
        assert r.status == 200, (path, r.status)
        if canary in r.body:
            hits.append(path)
    st = seed('status', '--dir', c.dir, check=False)
    if canary.decode() in st.stdout + st.stderr:
        hits.append('seed status')
    assert not hits, hits


def happy_script(marker):
    return [
        {'tool_calls': [{'name': 'submit_plan', 'arguments': {
            'title': 'Leave a note', 'scope': 'note', 'summary': 'Write a note into the organism.',
            'steps': ['write organism/NOTE.txt']}}]},
        {'tool_calls': [{'name': 'write_file', 'arguments': {'path': 'organism/NOTE.txt',
                                                               'content': marker + '\n'}}]},
        {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Wrote organism/NOTE.txt.'}}]},
        {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing new learned.'}}]},
        {'text': 'Done.'},
    ]


@test
def evolution_and_rollback_with_data_on_the_external_server(ctx):
    from seedlib import script
    c = ctx.get('seed')
    if not c:
        raise Skip('the Seed did not start')
    pg = ctx['pg']
    pfx = prefix_of(c.dir)
    live = pfx + 'live'
    gen = api(c, '/_seed/api/generations').json()['current']
    pg.query("INSERT INTO boots (note) VALUES ('before-the-evolution')", db=live)
    script(c, happy_script('note-' + os.urandom(4).hex()))
    p = seed('evolve', 'Leave a note', '--dir', c.dir, check=False, timeout=900)
    assert p.returncode == 0 and 'Result: complete' in p.stdout, p.stdout + p.stderr
    backups = os.listdir(os.path.join(c.dir, '.seed/backups'))
    assert any(b.startswith(f'gen-{gen}-') for b in backups), backups
    # Scratch databases were made there, and are dropped once the evolution is done.
    scratch = f"SELECT coalesce(string_agg(datname, ','), '') FROM pg_database WHERE datname LIKE '{pfx}evo%'"
    wait_until(lambda: pg.query(scratch) == '', timeout=120, what=f'the scratch databases to go: {pg.query(scratch)}')
    pg.query("INSERT INTO boots (note) VALUES ('after-the-evolution')", db=live)
    script(c, [{'text': 'unused'}])
    p = seed('rollback', str(gen), '--with-data', '--dir', c.dir, check=False, timeout=900)
    assert p.returncode == 0 and 'Result: complete' in p.stdout, p.stdout + p.stderr
    notes = pg.query('SELECT string_agg(note, \',\' ORDER BY n) FROM boots WHERE note IS NOT NULL', db=live)
    assert notes == 'before-the-evolution', notes
    # The reader still reads the restored data (the chat's query_data).
    reader = pg.query(f"SELECT has_table_privilege('{pfx}reader', 'boots', 'SELECT')::text || "
                      f"has_table_privilege('{pfx}reader', 'boots', 'INSERT')::text", db=live)
    assert reader == 'truefalse', reader


# ---- Kubernetes (podman kube play) ----

def podman_bridge():
    """Whether podman's default bridge (10.88.0.1, the host as pods see it) is usable."""
    if os.geteuid() != 0 or not shutil.which('podman'):
        return False
    p = subprocess.run(['podman', 'network', 'inspect', 'podman'], capture_output=True, text=True)
    return p.returncode == 0 and '10.88.0.1' in p.stdout


PODMAN_ENV = dict(os.environ)


def podman_limits(workdir):
    """podman gives a root container more open files than the host's hard
    limit where the test itself runs in a container without
    CAP_SYS_RESOURCE, and runc then cannot start it (nor with the engine's
    processes limit: measured here, only lower ones start); kube play takes
    no --ulimit, so a containers.conf of the test's says the host's own open
    files and the Seed's default processes limit (SEED_PIDS_LIMIT, 4096)."""
    import resource
    lines = []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY:
        soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
        lines.append(f'"nofile={soft}:{hard}"')
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    nproc = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
    lines.append(f'"nproc={nproc}:{nproc}"')
    # CONTAINERS_CONF replaces the machine's file: start from it.
    base = ''
    if os.path.exists('/etc/containers/containers.conf'):
        base = open('/etc/containers/containers.conf').read()
    elif os.path.exists('/usr/share/containers/containers.conf'):
        base = open('/usr/share/containers/containers.conf').read()
    base = re.sub(r'(?m)^\s*default_ulimits\s*=.*(\n\s+.*)*\n?', '', base)
    setting = f'default_ulimits = [{", ".join(lines)}]\n'
    if re.search(r'(?m)^\[containers\]$', base):
        base = re.sub(r'(?m)^\[containers\]$', '[containers]\n' + setting.rstrip('\n'), base, count=1)
    else:
        base = '[containers]\n' + setting + base
    conf = os.path.join(workdir, 'containers.conf')
    with open(conf, 'w') as f:
        f.write(base)
    PODMAN_ENV['CONTAINERS_CONF'] = conf


def podman(*args, timeout=1800, check=True, stdin=None):
    p = subprocess.run(['podman', *args], capture_output=True, text=True, timeout=timeout, stdin=stdin,
                       env=PODMAN_ENV)
    if check and p.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {p.returncode}\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
    return p


def runtime_image():
    """The Seed's runtime image, built from the top-level Dockerfile (cached
    by its content hash, as `seed` tags it), or Skip with the reason."""
    dockerfile = os.path.join(SRC, 'Dockerfile')
    if not os.path.exists(dockerfile):
        raise Skip('no top-level Dockerfile in this tree yet (the container driver brings it)')
    if not os.path.exists(os.path.join(SRC, 'seccomp.json')):
        raise Skip('no top-level seccomp.json in this tree yet (the container driver brings it)')
    if os.geteuid() != 0:
        raise Skip('not root: the test runs podman as root (runc)')
    if not podman_bridge():
        raise Skip("podman or its default network (10.88.0.1) is not usable here")
    tag = 'localhost/seed:' + hashlib.sha256(open(dockerfile, 'rb').read()).hexdigest()[:16]
    if podman('image', 'exists', tag, check=False).returncode == 0:
        return tag
    base = re.search(r'(?m)^FROM\s+(\S+)', open(dockerfile).read()).group(1)
    if podman('image', 'exists', base, check=False).returncode != 0:
        if not shutil.which('mmdebstrap'):
            raise Skip(f'no {base} image and no mmdebstrap to make one from the Debian mirror')
        sh = f'mmdebstrap --quiet --variant=minbase bookworm - | podman import - {base}'
        p = subprocess.run(['sh', '-c', sh], capture_output=True, text=True, timeout=1200)
        if p.returncode != 0:
            raise Skip(f'cannot make {base} from the Debian mirror: {p.stderr.strip()[-300:]}')
    with open(dockerfile) as f:
        podman('build', '-t', tag, '-', stdin=f)
    return tag


def kube_down(ctx):
    if ctx.get('kube_yaml'):
        podman('kube', 'down', ctx['kube_yaml'], check=False, timeout=180)
        podman('volume', 'rm', '-f', ctx['kube_name'] + '-data', check=False)
        podman('secret', 'rm', ctx['kube_name'] + '-secrets', check=False)


def manifest_for_test(text, name, image, port):
    """deploy/kubernetes/seed.yaml with this test's names (nothing of a
    real Seed's on this machine is touched), image and port, without its
    Secret: podman 4.3's kube play stores a Secret document in a form its
    own envFrom cannot read (it stores the document, and reads a JSON map
    of the data), so the test creates it (kube_secret)."""
    docs = text.split('\n---\n')
    assert docs[0].count('kind: Secret') == 1, docs[0]
    text = '\n---\n'.join(docs[1:])
    text = text.replace('name: seed-secrets', f'name: {name}-secrets')
    text = text.replace('name: seed-data', f'name: {name}-data').replace('claimName: seed-data', f'claimName: {name}-data')
    text = text.replace('app: seed\n', f'app: {name}\n').replace('  name: seed\n  labels:', f'  name: {name}\n  labels:')
    text = text.replace('image: localhost/seed-deploy:latest', f'image: {image}')
    text = text.replace('value: 0.0.0.0:8080', f'value: 0.0.0.0:{port}')
    text = text.replace('- containerPort: 8080\n', f'- containerPort: {port}\n              hostPort: {port}\n'
                                                    '              hostIP: 127.0.0.1\n')
    assert image in text and f'hostPort: {port}' in text and f'{name}-secrets' in text and f'app: {name}' in text
    return text


def kube_secret(name, values, workdir):
    """The Secret of the manifest, as a podman secret: what podman 4.3's
    envFrom reads is a Secret's data alone, in JSON (name: base64)."""
    import base64
    doc = {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}
    path = os.path.join(workdir, 'secret.json')
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 'w') as f:
        json.dump(doc, f)
    podman('secret', 'create', name, path)
    os.unlink(path)


@test
def kubernetes_manifest_runs_with_podman_kube_play(ctx):
    base = runtime_image()
    image = ctx['kube_image'] = 'localhost/seed-deploy:test'
    podman('build', '-t', image, '--build-arg', f'BASE={base}', '-f', os.path.join(SRC, 'deploy/Dockerfile'), SRC)
    port = free_port()
    pg = ctx['pg']
    workdir = tempfile.mkdtemp(prefix='seed-kube-')
    ctx['kube_dir'] = workdir
    # The kubelet's seccomp root, as a node would have it.
    os.makedirs(os.path.join(workdir, 'seccomp'))
    shutil.copy(os.path.join(SRC, 'seccomp.json'), os.path.join(workdir, 'seccomp/seed-seccomp.json'))
    podman_limits(workdir)
    name = ctx['kube_name'] = 'seed-hosting-' + os.urandom(3).hex()
    yaml = os.path.join(workdir, 'seed.yaml')
    with open(yaml, 'w') as f:
        f.write(manifest_for_test(open(os.path.join(SRC, 'deploy/kubernetes/seed.yaml')).read(), name, image,
                                  port))
    ctx['kube_yaml'] = yaml
    kube_secret(name + '-secrets', {'SEED_DATABASE_URL': pg.url(host='10.88.0.1')}, workdir)
    # On podman's default network the host is its gateway, 10.88.0.1 (kube
    # play's own network would be another).
    podman('kube', 'play', '--network', 'podman', '--seccomp-profile-root', os.path.join(workdir, 'seccomp'), yaml,
           timeout=600)
    # The Deployment's pod, and its container (not the pod's infra one).
    ctr = podman('ps', '--format', '{{.Names}}').stdout.split()
    ctr = [n for n in ctr if n.startswith(name + '-') and not n.endswith('-infra')]
    assert ctr, podman('ps', '-a').stdout
    pod_ctr = ctr[0]

    def logs():
        p = podman('logs', pod_ctr, check=False)
        return p.stdout + p.stderr

    # The kernel is built from the Seed's own source inside: minutes.
    wait_until(lambda: request(f'http://127.0.0.1:{port}/_seed/healthz',
                               headers={'Host': f'seed.localhost:{port}'}).status == 200,
               timeout=1500, interval=2, what=f'the Seed in the pod; its log:\n{logs()[-3000:]}')
    # What the manifest promises, seen from outside.
    status = podman('exec', pod_ctr, 'cat', '/proc/1/status').stdout
    assert re.search(r'(?m)^CapEff:\s+0+$', status), status
    assert re.search(r'(?m)^NoNewPrivs:\s+1$', status), status
    assert re.search(r'(?m)^Seccomp:\s+2$', status), status
    assert re.search(r'(?m)^Uid:\s+10001\s', status), status
    ro = podman('exec', pod_ctr, 'sh', '-c', 'touch /usr/x 2>&1 || echo refused', check=False).stdout
    assert 'refused' in ro, ro
    # The Seed was planted in the volume and keeps its memory in the test's server.
    pfx = podman('exec', pod_ctr, 'cat', '/seed/seed/.seed/secrets/pg-prefix').stdout.strip()
    assert re.fullmatch(r'seed_[0-9a-f]{10}_', pfx), pfx
    assert int(pg.query('SELECT count(*) FROM kernel_migrations', db=pfx + 'kernel')) >= 1
    assert podman('exec', pod_ctr, 'test', '-e', '/seed/seed/.seed/postgres', check=False).returncode != 0
    ctx['pod'] = (pod_ctr, port, podman('exec', pod_ctr, 'cat', '/seed/seed/.seed/control-token').stdout.strip())


def podman_version():
    out = podman('version', '--format', '{{.Client.Version}}').stdout.strip()
    return tuple(int(x) for x in re.findall(r'\d+', out)[:2])


@test
def the_organism_runs_in_nested_bubblewrap_in_the_pod(ctx):
    if not ctx.get('pod'):
        raise Skip('the pod did not come up')
    pod_ctr, port, token = ctx['pod']

    def status():
        r = request(f'http://127.0.0.1:{port}/_seed/api/status',
                    headers={'Host': f'seed.localhost:{port}', 'Authorization': 'Bearer ' + token})
        assert r.status == 200, r.status
        return r.json()
    # bubblewrap mounts /proc for each sandbox: procMount: Unmasked, which
    # podman's kube play honours from 4.7 on (podman run's unmask=/proc/*).
    if podman_version() < (4, 7):
        doctor = status().get('doctor', '')
        assert 'proc' in doctor, doctor  # the kernel says why, and keeps serving
        raise Skip(f"podman {'.'.join(map(str, podman_version()))}'s kube play ignores procMount: Unmasked "
                   f"(from 4.7 on it does): the kernel runs, its sandboxes cannot ({doctor[:120]})")
    wait_until(lambda: status()['organism']['state'] == 'running', timeout=300,
               what=f"the organism; log:\n{podman('logs', pod_ctr, check=False).stderr[-3000:]}")


if __name__ == '__main__':
    taplib.run(setup, teardown)
