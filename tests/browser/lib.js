// Helpers for the browser suite: a real Seed planted and started with the
// seed CLI (real kernel, PostgreSQL, bwrap and git), optionally with the
// scripted model server (tests/fakes/model_server.py) as its model, like
// tests/integration/seedlib.py's ScriptedSeed; headless Chromium; and
// screenshots at desktop and phone width kept in tests/browser/out/.
'use strict';

const assert = require('node:assert');
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const SEED = process.env.SEED_BIN || path.join(__dirname, '../../build/cmd/seed/seed');
const OUT = path.join(__dirname, 'out');
const MODEL_SERVER = path.join(__dirname, '../fakes/model_server.py');
const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

function seed(cwd, ...args) {
  return execFileSync(SEED, args, { cwd, encoding: 'utf8', timeout: 900000, stdio: ['ignore', 'pipe', 'pipe'] });
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Polls fn until it returns a truthy value (or throws past the deadline).
async function waitUntil(fn, { timeout = 120000, interval = 250, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last = null;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(interval); // polling interval, not a wait for an event
  }
  throw new Error(`timed out waiting for ${what}` + (last ? ` (last error: ${last.message})` : ''));
}

// One request from Node (not the browser). *.localhost names go to
// 127.0.0.1 with the name in Host, as browsers resolve them (Node's own
// resolver does not). Resolves {status, body (JSON when it parses)}.
function httpJson(url, init = {}) {
  const u = new URL(url);
  const headers = Object.assign({ Host: u.host }, init.headers || {});
  if (init.body !== undefined) headers['Content-Length'] = Buffer.byteLength(init.body);
  const host = u.hostname.endsWith('.localhost') ? '127.0.0.1' : u.hostname;
  return new Promise((resolve, reject) => {
    const req = http.request({ host, port: u.port, path: u.pathname + u.search, method: init.method || 'GET', headers },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body = text;
          try {
            body = JSON.parse(text);
          } catch (e) {
            // not JSON: the text
          }
          resolve({ status: res.statusCode, body, headers: res.headers });
        });
      });
    req.on('error', reject);
    if (init.body !== undefined) req.write(init.body);
    req.end();
  });
}

// A planted, running Seed. With scripted: true its model is the scripted
// server (provider openai-compatible), loaded with script().
class TestSeed {
  // secrets: {NAME: value} passed at start with -e NAME=VALUE. organism:
  // {path under organism/: content} committed into the planted Seed before
  // its first start (then sign in with login()). sameOrigin: the control
  // plane beside the organism (server.control_host ""), the fallback layout
  // whose layered guards are tested against a hostile organism sharing it.
  // keyEnv: the scripted model's model.api_key_env ("" = it needs no key);
  // a variable not passed in secrets starts the Seed without a model key.
  // The output of `seed new` or `seed run` is kept in s.startOutput.
  static async start(name, { scripted = false, secrets = {}, organism = null, sameOrigin = false, keyEnv = '' } = {}) {
    const s = new TestSeed();
    s.tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'seed-browser-'));
    fs.chmodSync(s.tmp, 0o755); // the unprivileged account must reach it when we are root
    s.dir = path.join(s.tmp, name);
    if (scripted) await s.startModel();
    s.port = await freePort();
    s.app = `http://127.0.0.1:${s.port}`; // the organism's
    s.base = sameOrigin ? s.app : `http://seed.localhost:${s.port}`; // the control plane's
    s.addr = `127.0.0.1:${s.port}`;
    try {
      await s.plantAndRun(name, { scripted, secrets, organism, sameOrigin, keyEnv });
    } catch (e) {
      s.close(); // the model server too: a child left running would keep the test process alive
      throw e;
    }
    return s;
  }

  async plantAndRun(name, { scripted, secrets, organism, sameOrigin, keyEnv }) {
    const s = this;
    const env = Object.entries(secrets).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
    if (scripted || organism || sameOrigin) {
      seed(s.tmp, 'new', name, '--no-run', '--addr', s.addr);
      if (sameOrigin) s.editConfig(/^  control_host: seed\.localhost$/m, '  control_host: ""');
      if (scripted) s.pointAtModel(keyEnv);
      if (organism) s.plantOrganism(organism);
      s.startOutput = seed(s.dir, 'run', '--detach', '--addr', s.addr, ...env);
    } else {
      const out = seed(s.tmp, 'new', name, '--addr', s.addr, ...env);
      const m = out.match(/(http:\/\/\S+\/_seed\/login\?t=[0-9a-f]+)/);
      assert.ok(m, `no sign-in link in: ${out}`);
      s.firstLink = m[1];
      s.startOutput = out;
    }
    s.started = true;
    await waitUntil(async () => (await httpJson(s.app + '/_seed/healthz')).status === 200, { what: 'the kernel' });
    // Evolutions run to their end unless a test turns the preview before
    // apply (the owner's default) back on.
    const r = await s.api('/_seed/api/evolution-settings', { method: 'POST', body: JSON.stringify({ preview: false }) });
    assert.strictEqual(r.status, 200, JSON.stringify(r.body));
  }

  // Stops the Seed and starts it again with these secrets; returns what
  // `seed run` printed.
  async restart(secrets = {}) {
    seed(this.tmp, 'stop', '--dir', this.dir);
    const env = Object.entries(secrets).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
    const out = seed(this.dir, 'run', '--detach', '--addr', this.addr, ...env);
    await waitUntil(async () => (await httpJson(this.app + '/_seed/healthz')).status === 200, { what: 'the kernel' });
    return out;
  }

  async startModel() {
    const portFile = path.join(this.tmp, 'model-port');
    this.modelLog = fs.openSync(path.join(this.tmp, 'model-server.log'), 'w');
    this.model = spawn('python3', [MODEL_SERVER, '--port', '0', '--port-file', portFile],
      { stdio: ['ignore', this.modelLog, this.modelLog] });
    const port = await waitUntil(() => fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8').trim(),
      { timeout: 30000, what: 'the model server port' });
    this.modelBase = `http://127.0.0.1:${port}`;
    await waitUntil(async () => (await fetch(this.modelBase + '/_health')).ok, { timeout: 30000, what: 'the model server' });
  }

  // Writes organism files and commits them, as if an evolution had: the
  // commit is tagged generation 2 (an untagged commit on main would be the
  // owner's, verified before it is served, against the starter's tests).
  plantOrganism(files) {
    for (const [rel, content] of Object.entries(files)) {
      const p = path.join(this.dir, 'organism', rel);
      fs.mkdirSync(path.dirname(p), { recursive: true });
      fs.writeFileSync(p, content, { mode: 0o755 });
    }
    const git = (...args) => execFileSync('git', ['-c', 'safe.directory=*', '-c', 'user.name=Seed test',
      '-c', 'user.email=test@localhost', '-C', this.dir, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    git('add', 'organism');
    git('commit', '-q', '-m', 'test: a planted organism');
    git('tag', 'seed/gen-2');
  }

  // git in the Seed's folder as its owner would run it: as the Seed's
  // account when we are root (sudo -u seed git -C <dir> ...).
  ownerGit(...args) {
    const cmd = ['git', '-C', this.dir, '-c', 'user.name=Owner', '-c', 'user.email=owner@example.org', ...args];
    const [bin, argv] = process.getuid() === 0 ? ['runuser', ['-u', 'seed', '--', ...cmd]] : [cmd[0], cmd.slice(1)];
    return execFileSync(bin, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
      env: Object.assign({}, process.env, { HOME: this.tmp, GIT_CONFIG_NOSYSTEM: '1' }) }).trim();
  }

  // The owner's own commit on main: files (path -> content, or a function
  // of the old content) written as the folder's owner, committed.
  ownerCommit(files, message) {
    const { uid, gid } = fs.statSync(this.dir);
    for (const [rel, content] of Object.entries(files)) {
      const p = path.join(this.dir, rel);
      const old = fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : '';
      fs.writeFileSync(p, typeof content === 'function' ? content(old) : content);
      fs.chownSync(p, uid, gid);
      this.ownerGit('add', rel);
    }
    this.ownerGit('commit', '-q', '-m', message);
    return this.ownerGit('rev-parse', 'HEAD');
  }

  // Replaces what re matches in seed.yaml (which must match).
  editConfig(re, replacement) {
    const p = path.join(this.dir, 'seed.yaml');
    const text = fs.readFileSync(p, 'utf8');
    const next = text.replace(re, replacement);
    assert.notStrictEqual(next, text, `${re} is not in seed.yaml`);
    fs.writeFileSync(p, next);
  }

  pointAtModel(keyEnv = '') {
    const p = path.join(this.dir, 'seed.yaml');
    const text = fs.readFileSync(p, 'utf8');
    const model = 'model:\n  provider: openai-compatible\n  name: scripted\n' +
      `  base_url: ${this.modelBase}/v1\n  api_key_env: "${keyEnv}"\n  max_tokens: 16000\n`;
    const next = text.replace(/^model:\n(?:[ \t]+.*\n)+/m, model);
    assert.notStrictEqual(next, text, 'no model section in seed.yaml');
    fs.writeFileSync(p, next);
  }

  // Loads a script into the model server (see its top comment).
  async script(steps) {
    const r = await httpJson(this.modelBase + '/_script', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(steps),
    });
    assert.strictEqual(r.status, 200, JSON.stringify(r.body));
  }

  async modelState() {
    return (await httpJson(this.modelBase + '/_state')).body;
  }

  // A fresh one-time sign-in link.
  login() {
    return seed(this.tmp, 'login', '--print', '--dir', this.dir).trim();
  }

  // The kernel's API with the CLI token (never a browser's).
  async api(p, init = {}) {
    const tok = fs.readFileSync(path.join(this.dir, '.seed', 'control-token'), 'utf8').trim();
    const headers = Object.assign({ Authorization: 'Bearer ' + tok }, init.headers || {});
    if (init.body !== undefined) headers['Content-Type'] = 'application/json';
    return httpJson(this.base + p, Object.assign({}, init, { headers }));
  }

  close() {
    if (this.started) {
      try {
        seed(this.tmp, 'stop', '--dir', this.dir);
      } catch (e) {
        // already stopped
      }
    }
    if (this.model) this.model.kill('SIGTERM');
    if (this.modelLog) fs.closeSync(this.modelLog);
    if (this.tmp && !process.env.SEED_KEEP_TMP) fs.rmSync(this.tmp, { recursive: true, force: true });
  }
}

async function launch() {
  const { chromium } = require('playwright-core');
  fs.mkdirSync(OUT, { recursive: true });
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_FLAGS });
}

// Screenshots of the page at desktop and phone width (name.png,
// name-phone.png); at phone width nothing may stick out sideways.
async function shots(page, name, { fullPage = true } = {}) {
  await page.mouse.move(0, 0); // no hover effects in the pictures
  await page.setViewportSize(DESKTOP);
  await page.screenshot({ path: path.join(OUT, name + '.png'), fullPage });
  await page.setViewportSize(PHONE);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await page.screenshot({ path: path.join(OUT, name + '-phone.png'), fullPage });
  await page.setViewportSize(DESKTOP);
  assert.ok(overflow <= 1, `${name}: the page is ${overflow}px wider than a phone`);
}

module.exports = { TestSeed, launch, shots, waitUntil, sleep, freePort, httpJson, DESKTOP, PHONE, OUT };
