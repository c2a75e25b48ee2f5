'use strict';
// live_probe.js — the escape suite's attempts from inside the live organism.
//
// tests/escape/test_escape.py has a real evolution write this file into the
// organism as organism/bin/escape-probe.js (with CONFIG filled in) and wire
// GET /probe of organism/bin/server to run(). Once that generation is live,
// the suite fetches /probe through the kernel's proxy. Every attempt reports
// raw facts (what connected, what could be read or written, what a program
// printed); the suite decides on the host what is a breach, so nothing here
// needs to know a secret to recognise it.
const fs = require('node:fs');
const net = require('node:net');
const dns = require('node:dns');
const { execFile } = require('node:child_process');

const CONFIG = {}; // replaced by the suite: ports, host address, probe names, kernel pid

function short(s, n) {
  s = String(s);
  return s.length > n ? `${s.slice(0, n)}…` : s;
}

function failure(e) {
  return { ok: false, error: (e && (e.code || e.message)) || String(e) };
}

function tcp(host, port, ms = 3000) {
  return new Promise((resolve) => {
    let sock;
    const done = (r) => {
      clearTimeout(timer);
      if (sock) sock.destroy();
      resolve({ host, port, ...r });
    };
    const timer = setTimeout(() => done({ connected: false, error: 'timeout' }), ms);
    try {
      sock = net.connect({ host, port });
    } catch (e) {
      done({ connected: false, error: e.code || e.message });
      return;
    }
    sock.once('connect', () => done({ connected: true }));
    sock.once('error', (e) => done({ connected: false, error: e.code || e.message }));
  });
}

function unixSocket(path, ms = 3000) {
  return new Promise((resolve) => {
    const sock = net.connect({ path });
    const done = (r) => {
      clearTimeout(timer);
      sock.destroy();
      resolve({ path, ...r });
    };
    const timer = setTimeout(() => done({ connected: false, error: 'timeout' }), ms);
    sock.once('connect', () => done({ connected: true }));
    sock.once('error', (e) => done({ connected: false, error: e.code || e.message }));
  });
}

function lookup(name, ms = 3000) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ name, resolved: false, error: 'timeout' }), ms);
    dns.lookup(name, (err, address) => {
      clearTimeout(timer);
      resolve(err ? { name, resolved: false, error: err.code || err.message } : { name, resolved: true, address });
    });
  });
}

function read(path) {
  try {
    return { path, ok: true, content: short(fs.readFileSync(path, 'latin1'), 4000) };
  } catch (e) {
    return { path, ...failure(e) };
  }
}

function list(path) {
  try {
    return { path, ok: true, entries: fs.readdirSync(path).slice(0, 200) };
  } catch (e) {
    return { path, ...failure(e) };
  }
}

function write(path) {
  try {
    fs.writeFileSync(path, 'written by the live organism (escape suite)\n');
    return { path, ok: true };
  } catch (e) {
    return { path, ...failure(e) };
  }
}

function mkdir(path) {
  try {
    fs.mkdirSync(path);
    return { path, ok: true };
  } catch (e) {
    return { path, ...failure(e) };
  }
}

function exec(file, args, env, ms = 20000) {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: ms, env, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      const code = err ? (err.code ?? err.signal ?? 'error') : 0;
      resolve({ file, code, out: short(`${stdout}${stderr}`, 6000) });
    });
  });
}

// Every process this sandbox can see, with its command line and environment.
function processes() {
  const seen = [];
  for (const pid of list('/proc').entries || []) {
    if (!/^\d+$/.test(pid)) continue;
    const cmd = read(`/proc/${pid}/cmdline`);
    const env = read(`/proc/${pid}/environ`);
    seen.push({
      pid,
      cmdline: cmd.ok ? cmd.content.split('\0').join(' ').trim() : `(${cmd.error})`,
      environ: env.ok ? env.content.split('\0').filter(Boolean) : [`(${env.error})`],
    });
  }
  return seen;
}

// DATABASE_URL with another database name (postgresql://role:pw@/db?host=…).
function databaseUrl(db) {
  return (process.env.DATABASE_URL || '').replace(/@\/[^?]*/, `@/${db}`);
}

function psql(conninfo, sqls, password) {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME || '/tmp', PGCONNECT_TIMEOUT: '5' };
  if (password !== undefined) env.PGPASSWORD = password;
  const args = ['-w', '-X', '-At', conninfo];
  for (const s of sqls) args.push('-c', s);
  return exec('/usr/bin/psql', args, env);
}

async function run() {
  const r = {};
  const kernelPid = String(CONFIG.kernelPid || 0);
  const [kernel, model, hostIp, internet, dnsName, dnsLocal] = await Promise.all([
    tcp('127.0.0.1', CONFIG.kernelPort),
    tcp('127.0.0.1', CONFIG.modelPort),
    tcp(CONFIG.hostIp, CONFIG.listenerPort),
    tcp('1.1.1.1', 443),
    lookup('example.com'),
    lookup('localhost'),
  ]);
  r['live-host-loopback'] = { kernel, model };
  r['live-host-network'] = hostIp;
  r['live-internet'] = { tcp: internet, dns: dnsName, localhost: dnsLocal };
  r['live-kernel-sockets'] = await Promise.all([
    unixSocket(`${CONFIG.seedDir}/.seed/organism/http.sock`),
    unixSocket(`${CONFIG.seedDir}/.seed/run/.s.PGSQL.5432`),
  ]);
  r['live-build-cache'] = {
    reads: [read('/cache/escape-cache-marker'), read('/workspace/.seed/cache/escape-cache-marker'),
      read(`${CONFIG.seedDir}/.seed/cache/escape-cache-marker`)],
    lists: [list('/cache'), list('/workspace/.seed'), list('/workspace/.seed/cache')],
    env: { npm_config_cache: process.env.npm_config_cache || null, XDG_CACHE_HOME: process.env.XDG_CACHE_HOME || null },
  };
  r['live-dot-seed'] = {
    reads: [read('/workspace/.seed/control-token'), read('/workspace/.seed/secrets/postgres-password'),
      read('/workspace/.seed/secrets/pg-evolver'), read(`${CONFIG.seedDir}/.seed/control-token`)],
    lists: [list('/workspace/.seed/secrets')],
  };
  r['live-git'] = {
    reads: [read('/workspace/.git/HEAD'), read('/workspace/.git/config')],
    lists: [list('/workspace/.git')],
  };
  r['live-write-workspace'] = [write('/workspace/organism/pwned-by-live'), write('/workspace/knowledge/pwned-by-live'),
    write('/workspace/kernel/pwned-by-live'), write('/workspace/pwned-by-live')];
  r['live-write-root'] = [mkdir('/run/organism-evil'), write('/etc/pwned-by-live'), write('/usr/pwned-by-live'),
    write('/pwned-by-live')];
  r['live-environment'] = { env: { ...process.env } };
  r['live-proc'] = {
    processes: processes(),
    kernel: [read(`/proc/${kernelPid}/environ`), read(`/proc/${kernelPid}/cmdline`)],
  };
  const marker = (what) => `select 'ESC'||'APED:${what}'`;
  const superuser = 'host=/run/postgresql user=postgres dbname=postgres';
  r['live-pg-superuser'] = await Promise.all([
    psql(superuser, [marker('superuser')]),
    psql(superuser, [marker('superuser')], 'postgres'),
    psql('host=/run/postgresql user=evolver dbname=postgres', [marker('evolver')], 'evolver'),
  ]);
  r['live-pg-kernel-db'] = await Promise.all([
    psql(databaseUrl('seed_kernel'), [`${marker('kernel-db')} || count(*) from pg_tables`]),
    psql(databaseUrl('postgres'), [marker('postgres-db')]),
  ]);
  r['live-pg-escalate'] = await psql(databaseUrl('organism'), [
    'ALTER ROLE organism SUPERUSER',
    "CREATE ROLE escape_live SUPERUSER LOGIN PASSWORD 'escape'",
    'GRANT pg_execute_server_program TO organism',
    "COPY (select 1) TO PROGRAM 'true'",
    `${marker('read-file')} || pg_read_file('/etc/hostname')`,
    "ALTER ROLE evolver PASSWORD 'escape'",
  ]);
  const probes = await Promise.all((CONFIG.probes || []).map((name) =>
    exec(`/workspace/organism/probes/bin/${name}`, [kernelPid], { PATH: process.env.PATH })));
  (CONFIG.probes || []).forEach((name, i) => {
    r[`live-${name}`] = probes[i];
  });
  return r;
}

module.exports = { run };
