#!/usr/bin/env python3
"""The container driver (kernel/container): a Seed started by `seed run` in
its hardened podman (or docker) container, with the native supervisor inside
and bubblewrap nested in it, driven from outside through the published port
and the mounted folder. The scripted model server (tests/fakes) runs on the
host, on the container network's gateway. Also: seccomp.json is Docker's
default profile plus exactly six rules, and bwrap works under it where it
does not under Docker's. Prints TAP; skips (with the reason) when no engine
works here.

Environment: SEED_BIN (the seed CLI), SEED_CONTAINER_ENGINE (podman|docker).
"""
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile

import taplib
from seedlib import (MODEL_SERVER, Browser, api, canary_hits, ctl_origin, evolution, free_port, link_from, request,
                     script, seed, submit, wait_until)
from taplib import Skip, test

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, '..', '..'))
# Docker's default profile, moby/moby profiles/seccomp/default.json at this commit.
DOCKER_COMMIT = '00f3d189e420d485e42d15fe494f96d272284e0e'
DOCKER_DEFAULT = os.path.join(SRC, 'tests', 'data', f'docker-seccomp-default-{DOCKER_COMMIT}.json')
ADDED = {'clone', 'unshare', 'setns', 'mount', 'umount2', 'pivot_root'}
ENGINE = os.environ.get('SEED_CONTAINER_ENGINE') or 'podman'
CANARY_ARG = 'canary-ctr-arg-' + os.urandom(12).hex()
CANARY_FILE = 'canary-ctr-file-' + os.urandom(12).hex()
CANARY_LATE = 'canary-ctr-late-' + os.urandom(12).hex()


def engine(*args, check=True, timeout=300):
    p = subprocess.run([ENGINE, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert p.returncode == 0, f'{ENGINE} {" ".join(args)}: {p.stdout}{p.stderr}'
    return p


def why_no_engine():
    if os.geteuid() != 0:
        return 'the container suite runs as root (a rootful engine: its cgroup limits hold on cgroup v1)'
    if not shutil.which(ENGINE):
        return f'{ENGINE} is not installed'
    p = subprocess.run([ENGINE, 'info'], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return f"'{ENGINE} info' failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}"
    return None


class Ctx:
    pass


def gateway():
    """The default network's gateway: the host as the container sees it."""
    p = engine('network', 'inspect', 'podman' if ENGINE == 'podman' else 'bridge')
    net = json.loads(p.stdout)[0]
    subnets = net.get('subnets') or [c for c in net.get('IPAM', {}).get('Config', [])]
    gw = subnets[0].get('gateway') or subnets[0].get('Gateway')
    assert re.match(r'^\d+\.\d+\.\d+\.\d+$', gw), net
    return gw


def point_at_model(seed_yaml, base):
    text = open(seed_yaml).read()
    new, n = re.subn(r'(?m)^model:\n(?:[ \t]+.*\n)+',
                     f'model:\n  provider: openai-compatible\n  name: scripted\n  base_url: {base}/v1\n'
                     f'  api_key_env: ""\n  max_tokens: 16000\n', text)
    assert n == 1, text
    with open(seed_yaml, 'w') as f:
        f.write(new)


def setup():
    c = Ctx()
    c.tmp = tempfile.mkdtemp(prefix='seed-ctr-')
    os.chmod(c.tmp, 0o755)  # the Seed's account must reach it
    c.model = None
    c.dir = os.path.join(c.tmp, 'ctr')
    c.port = free_port()
    c.uid = pwd.getpwnam('seed').pw_uid
    c.gid = pwd.getpwnam('seed').pw_gid
    seed('new', 'ctr', '--no-run', '--addr', f'127.0.0.1:{c.port}', cwd=c.tmp, timeout=900)
    c.gw = gateway()
    c.model_port = free_port()
    c.model_base = f'http://{c.gw}:{c.model_port}'
    point_at_model(os.path.join(c.dir, 'seed.yaml'), c.model_base)
    c.envfile = os.path.join(c.tmp, 'secrets.env')  # outside the Seed's folder
    with open(c.envfile, 'w') as f:
        f.write(f'CANARY_FILE={CANARY_FILE}\n')
    c.run = seed('run', '--detach', '-e', f'CANARY_ARG={CANARY_ARG}', '--env-file', c.envfile, cwd=c.dir,
                 timeout=3600)
    c.base = ctl_origin(c.port)
    c.name = json.load(open(os.path.join(c.dir, '.seed/container/container.json')))['name']
    # The model server on the gateway (the bridge exists while a container runs).
    c.model_log = open(os.path.join(c.tmp, 'model-server.log'), 'w')
    c.model = subprocess.Popen([sys.executable, MODEL_SERVER, '--host', c.gw, '--port', str(c.model_port)],
                               stdout=c.model_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    wait_until(lambda: request(c.model_base + '/_health').status == 200, timeout=30, what='the model server')
    # Evolutions here run to their end: no preview waiting for an owner.
    r = api(c, '/_seed/api/evolution-settings', 'POST', {'preview': False})
    assert r.status == 200, r.text
    return c


def teardown(c):
    if c is None:
        return
    seed('stop', '--dir', c.dir, check=False, timeout=300)
    if c.model:
        c.model.terminate()
        c.model.wait(timeout=10)
        c.model_log.close()
    shutil.rmtree(c.tmp, ignore_errors=True)


def container_pids(c):
    """Every process of the container, from its cgroup (on the host)."""
    pid = engine('inspect', '--format', '{{.State.Pid}}', c.name).stdout.strip()
    procs = os.path.join(cgroup_dir(pid, 'pids'), 'cgroup.procs')
    pids = {int(p) for p in open(procs).read().split()}
    assert pids, pid
    return pids


def cmdline(pid):
    try:
        return open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\0')
    except OSError:
        return [b'']


def kernel_pid(c):
    ks = [p for p in container_pids(c) if cmdline(p)[0].endswith(b'/seed-kernel')]
    assert len(ks) == 1, [cmdline(p) for p in container_pids(c)]
    return ks[0]


def status_fields(pid):
    return dict(line.split(':\t', 1) for line in open(f'/proc/{pid}/status').read().splitlines() if ':\t' in line)


def cgroup_dir(pid, controller):
    """The directory of pid's cgroup for controller: v1 (or hybrid), or v2."""
    unified = os.path.exists('/sys/fs/cgroup/cgroup.controllers')
    for line in open(f'/proc/{pid}/cgroup'):
        _, ctl, rel = line.rstrip('\n').split(':', 2)
        if not unified and controller in ctl.split(','):
            return f'/sys/fs/cgroup/{ctl}{rel}'
        if unified and ctl == '':
            return f'/sys/fs/cgroup{rel}'
    raise AssertionError(f'no {controller} cgroup for {pid}')


# ---- seccomp.json ----------------------------------------------------------

@test
def seccomp_json_is_dockers_default_plus_six_unconditional_rules(c):
    ours = json.load(open(os.path.join(SRC, 'seccomp.json')))
    docker = json.load(open(DOCKER_DEFAULT))
    assert {k: v for k, v in ours.items() if k != 'syscalls'} == {k: v for k, v in docker.items() if k != 'syscalls'}
    assert ours['syscalls'][:-1] == docker['syscalls'], 'a rule of Docker\'s default was changed'
    added = ours['syscalls'][-1]
    assert added == {'names': added['names'], 'action': 'SCMP_ACT_ALLOW'}, added  # no args, includes, excludes
    assert set(added['names']) == ADDED and len(added['names']) == len(ADDED), added
    # And the planted Seed carries exactly that file.
    assert open(os.path.join(c.dir, 'seccomp.json')).read() == open(os.path.join(SRC, 'seccomp.json')).read()


def bwrap_in_container(c, profile):
    image = json.load(open(os.path.join(c.dir, '.seed/container/container.json')))['image']
    unmask = '--security-opt=unmask=/proc/*' if ENGINE == 'podman' else '--security-opt=systempaths=unconfined'
    return engine('run', '--rm', '--pull=never', '--network=none', '--cap-drop=ALL',
                  '--security-opt=no-new-privileges', '--read-only', unmask, f'--security-opt=seccomp={profile}',
                  f'--user={c.uid}:{c.gid}', '--ulimit=nofile=1024:1024', '--ulimit=nproc=1024:1024', image,
                  'bwrap', '--unshare-all', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin',
                  '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc',
                  '--dev', '/dev', '--tmpfs', '/tmp', '--', '/bin/sh', '-c', 'echo nested-ok', check=False)


@test
def bwrap_nests_under_seccomp_json_and_not_under_dockers_default(c):
    ours = bwrap_in_container(c, os.path.join(c.dir, 'seccomp.json'))
    assert ours.returncode == 0 and 'nested-ok' in ours.stdout, ours.stdout + ours.stderr
    docker = bwrap_in_container(c, DOCKER_DEFAULT)
    assert docker.returncode != 0 and 'nested-ok' not in docker.stdout, docker.stdout + docker.stderr


# ---- the Seed in its container ----------------------------------------------

@test
def the_image_is_cached_by_the_dockerfiles_hash(c):
    want = 'localhost/seed:' + hashlib.sha256(open(os.path.join(c.dir, 'Dockerfile'), 'rb').read()).hexdigest()[:16]
    state = json.load(open(os.path.join(c.dir, '.seed/container/container.json')))
    assert state['image'] == want, state
    assert engine('image', 'inspect', want, check=False).returncode == 0
    info = engine('inspect', '--format', '{{.ImageName}}' if ENGINE == 'podman' else '{{.Config.Image}}', c.name)
    assert info.stdout.strip() == want, info.stdout


@test
def status_shows_the_container_driver(c):
    p = seed('status', '--dir', c.dir)
    assert re.search(rf'^Driver: +container \({ENGINE}, {re.escape(c.name)}; .*: in force\)$', p.stdout, re.M), p.stdout
    assert 'in its container' in c.run.stdout, c.run.stdout


@test
def the_kernel_has_no_capability_no_new_privileges_and_seccomp(c):
    st = status_fields(kernel_pid(c))
    assert int(st['CapEff'], 16) == 0 and int(st['CapPrm'], 16) == 0, st
    assert st['NoNewPrivs'].strip() == '1', st
    assert st['Seccomp'].strip() == '2', st
    # kernel/ctl refuses connections from inside the container when this is set
    assert b'SEED_IN_CONTAINER=1' in open(f'/proc/{kernel_pid(c)}/environ', 'rb').read().split(b'\0')
    # Every process in the container is the Seed's account: never uid 0.
    for p in container_pids(c):
        try:
            uids = status_fields(p)['Uid'].split()
        except OSError:
            continue
        assert all(int(u) == c.uid for u in uids), (p, cmdline(p), uids)


@test
def nested_sandboxes_add_their_own_filter(c):
    # The live organism runs under bwrap with the kernel's seccomp filter,
    # inside the container's: two filters.
    def organism():
        for p in container_pids(c):
            if cmdline(p)[0].endswith(b'bwrap'):
                continue
            try:
                st = status_fields(p)
            except OSError:
                continue
            if int(st.get('Seccomp_filters', '0')) >= 2:
                return p
        return None
    p = wait_until(organism, timeout=120, what='a sandboxed process with its own filter')
    assert status_fields(p)['NoNewPrivs'].strip() == '1'


@test
def the_root_is_read_only_and_tmp_is_capped(c):
    k = kernel_pid(c)
    mounts = open(f'/proc/{k}/mountinfo').read().splitlines()
    root = next(m for m in mounts if m.split()[4] == '/')
    assert 'ro' in root.split()[5].split(','), root
    tmp = next(m for m in mounts if m.split()[4] == '/tmp')
    assert 'tmpfs' in tmp and 'size=' in tmp, tmp
    p = engine('exec', c.name, 'sh', '-c', 'touch /usr/x', check=False)
    assert p.returncode != 0 and 'Read-only' in p.stderr, p.stdout + p.stderr


@test
def the_limits_are_in_force_in_the_cgroup(c):
    k = kernel_pid(c)
    mem = cgroup_dir(k, 'memory')
    pids = cgroup_dir(k, 'pids')
    if os.path.exists(mem + '/memory.limit_in_bytes'):
        assert int(open(mem + '/memory.limit_in_bytes').read()) == 8 << 30
        assert int(open(pids + '/pids.max').read()) == 4096
        cpu = cgroup_dir(k, 'cpu')
        quota = int(open(cpu + '/cpu.cfs_quota_us').read())
        period = int(open(cpu + '/cpu.cfs_period_us').read())
    else:
        assert int(open(mem + '/memory.max').read()) == 8 << 30
        assert int(open(pids + '/pids.max').read()) == 4096
        quota, period = map(int, open(cgroup_dir(k, 'cpu') + '/cpu.max').read().split())
    assert quota == period * max(1, os.cpu_count() // 2), (quota, period)  # SEED_CPUS' default
    state = json.load(open(os.path.join(c.dir, '.seed/container/container.json')))
    assert all(v['in_force'] for v in state['limits'].values()), state


@test
def the_port_is_published_on_loopback_only(c):
    p = engine('port', c.name)
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    assert lines and all(l.endswith(f'127.0.0.1:{c.port}') for l in lines), p.stdout
    assert request(f'http://127.0.0.1:{c.port}/_seed/healthz').status == 200


@test
def no_secret_in_argv_inspect_files_or_databases(c):
    dump = engine('inspect', c.name).stdout
    for k in (CANARY_ARG, CANARY_FILE):
        assert k not in dump, 'a secret is in the engine\'s inspect output'
    hits = canary_hits(c.dir, [k.encode() for k in (CANARY_ARG, CANARY_FILE)])
    assert not hits, f'canary secret found in: {hits}'
    # It did reach the kernel (not dropped on the way): the FIFO is consumed.
    assert not os.path.exists(os.path.join(c.dir, '.seed/container/secrets.fifo'))


@test
def sign_in_with_a_link(c):
    b = Browser(c.base)
    assert b.sign_in(link_from(c.run.stdout)).status == 200
    p = seed('login', '--print', '--dir', c.dir)
    assert Browser(c.base).sign_in(link_from(p.stdout)).status == 200


HAPPY = [
    {'tool_calls': [{'name': 'submit_plan', 'arguments': {
        'title': 'Leave a note', 'scope': 'note', 'summary': 'Write a note into the organism.',
        'steps': ['write organism/NOTE.txt']}}]},
    {'tool_calls': [{'name': 'write_file', 'arguments': {'path': 'organism/NOTE.txt', 'content': 'MARK\n'}}]},
    {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Wrote organism/NOTE.txt.'}}]},
    {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing new learned.'}}]},
    {'text': 'Done.'},
]


@test
def a_scripted_evolution_runs_end_to_end_inside(c):
    marker = 'ctr-note-' + os.urandom(6).hex()
    script(c, json.loads(json.dumps(HAPPY).replace('MARK', marker)))
    p = seed('evolve', 'Leave a note', '--dir', c.dir, timeout=1200, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'Result: complete' in p.stdout, p.stdout
    assert open(os.path.join(c.dir, 'organism', 'NOTE.txt')).read() == marker + '\n'
    g = seed('generations', '--dir', c.dir)
    assert re.search(r'^\* 2 ', g.stdout, re.M), g.stdout


@test
def the_seeds_files_belong_to_its_owner(c):
    for d, dirs, files in os.walk(c.dir):
        for n in dirs + files:
            st = os.lstat(os.path.join(d, n))
            assert st.st_uid == c.uid, (os.path.join(d, n), st.st_uid)


@test
def rollback_works_against_the_containerised_seed(c):
    script(c, [{'text': 'unused'}])
    p = seed('rollback', '1', '--dir', c.dir, check=False, timeout=1200)
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'Result: complete' in p.stdout, p.stdout
    assert api(c, '/_seed/api/generations').json()['current'] == 3
    assert not os.path.exists(os.path.join(c.dir, 'organism', 'NOTE.txt'))


@test
def a_connection_from_inside_the_container_is_refused(c):
    code = ('import urllib.request, sys\n'
            'try:\n'
            f'    r = urllib.request.urlopen("http://127.0.0.1:{c.port}/_seed/healthz", timeout=10)\n'
            '    print("status", r.status)\n'
            'except Exception as e:\n'
            '    print("refused", e)\n')
    p = engine('exec', '--user', f'{c.uid}', c.name, 'python3', '-c', code)
    assert 'status 200' not in p.stdout, p.stdout
    assert request(f'http://127.0.0.1:{c.port}/_seed/healthz').status == 200  # the owner still arrives


@test
def an_approved_kernel_change_restarts_the_kernel_in_its_container(c):
    mark = '0.1.0+' + os.urandom(4).hex()
    script(c, [
        {'tool_calls': [{'name': 'submit_plan', 'arguments': {
            'title': 'New version string', 'scope': 'kernel', 'summary': 'Report a new kernel version.',
            'steps': ['edit kernel/app/app.c']}}]},
        {'tool_calls': [{'name': 'edit_file', 'arguments': {
            'path': 'kernel/app/app.c', 'old_text': '"version", "0.1.0");', 'new_text': f'"version", "{mark}");'}}]},
        {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Changed the version string.'}}]},
        {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Kernel changes need approval.'}}]},
        {'text': 'Done.'},
    ])
    before = api(c, '/_seed/api/status').json()
    evo_id = submit(c, 'Report a new version')

    def pending():
        aprs = api(c, '/_seed/api/approvals').json()['approvals']
        return next((a for a in aprs if a['kind'] == 'tool' and a['evolution_id'] == evo_id), None)
    a = wait_until(pending, timeout=300, what='the approval of the kernel edit')
    assert api(c, f'/_seed/api/approvals/{a["id"]}', 'POST', {'approved': True}).status == 200

    def restarted():
        st = api(c, '/_seed/api/status').json()
        return st if st['kernel']['version'] == mark else None
    st = wait_until(restarted, timeout=1200, interval=1, what='the kernel to restart into its new source (exit 75)')
    assert st['kernel']['pid'] != before['kernel']['pid'], st
    assert evolution(c, evo_id)['state'] == 'complete'
    log = open(os.path.join(c.dir, '.seed/logs/supervisor.log')).read()
    assert 'asked to be rebuilt and restarted' in log, log[-2000:]
    assert os.path.isdir(os.path.join(c.dir, '.seed/kernel-build-container'))
    assert engine('container', 'inspect', '--format', '{{.State.Running}}', c.name).stdout.strip() == 'true'


@test
def restart_with_a_secret_keeps_the_container_and_hides_the_secret(c):
    p = seed('restart', '--dir', c.dir, '-e', f'CANARY_LATE={CANARY_LATE}', timeout=900)
    assert 'From another machine' not in p.stdout, p.stdout  # published on 127.0.0.1 only
    wait_until(lambda: request(c.base + '/_seed/healthz').status == 200, timeout=300, what='the kernel')
    assert CANARY_LATE not in engine('inspect', c.name).stdout
    assert not canary_hits(c.dir, [CANARY_LATE.encode()])


@test
def a_second_run_does_not_build_or_start_twice(c):
    p = seed('run', '--detach', cwd=c.dir, timeout=300)
    assert 'already running' in p.stdout, p.stdout + p.stderr
    assert 'building the image' not in p.stderr, p.stderr


@test
def stop_is_graceful_and_removes_the_container(c):
    p = seed('stop', '--dir', c.dir, timeout=300)
    assert 'Stopped' in p.stdout, p.stdout + p.stderr
    assert engine('container', 'inspect', c.name, check=False).returncode != 0
    st = seed('status', '--dir', c.dir, check=False)
    assert st.returncode == 3, st.stdout
    log = open(os.path.join(c.dir, '.seed/logs/supervisor.log')).read()
    assert re.search(r'kernel info: stopped\s*$', log.strip().splitlines()[-1]) or 'kernel info: stopped' in log, \
        log[-2000:]


@test
def a_foreground_run_stops_its_container_on_ctrl_c(c):
    import signal
    p = subprocess.Popen([os.environ.get('SEED_BIN', 'seed'), 'run'], cwd=c.dir, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in p.stdout:
            seen.append(line)
            if 'Press Ctrl-C' in line:
                break
        assert engine('container', 'inspect', '--format', '{{.State.Running}}', c.name).stdout.strip() == 'true'
        p.send_signal(signal.SIGINT)
        rest = p.communicate(timeout=120)[0]
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, ''.join(seen) + rest
    assert engine('container', 'inspect', c.name, check=False).returncode != 0, 'the container outlived seed run'
    assert 'kernel info: stopped' in open(os.path.join(c.dir, '.seed/logs/supervisor.log')).read()[-4000:]


if __name__ == '__main__':
    why = why_no_engine()
    if why:
        print(f'1..0 # SKIP {why}')
        sys.exit(0)
    taplib.run(setup, teardown)
