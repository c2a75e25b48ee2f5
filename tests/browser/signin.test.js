// The control plane in a real browser: plant a Seed with the real CLI, open
// the one-time link in headless Chromium, and see the signed-in page fill
// itself from the API (which proves the CSP allows our script and the token
// travels in its header). Screenshots go to tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const SEED = process.env.SEED_BIN || path.join(__dirname, '../../build/cmd/seed/seed');
const OUT = path.join(__dirname, 'out');
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let tmp, seedDir, base, link, browser;

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

function seed(...args) {
  return execFileSync(SEED, args, { cwd: tmp, encoding: 'utf8', timeout: 600000,
    stdio: ['ignore', 'pipe', 'pipe'] });
}

before(async () => {
  fs.mkdirSync(OUT, { recursive: true });
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'seed-browser-'));
  fs.chmodSync(tmp, 0o755); // the unprivileged account must reach it when we are root
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const out = seed('new', 'browsertest', '--addr', `127.0.0.1:${port}`);
  seedDir = path.join(tmp, 'browsertest');
  const m = out.match(/(http:\/\/\S+\/_seed\/login\?t=[0-9a-f]+)/);
  assert.ok(m, `no sign-in link in: ${out}`);
  link = m[1];
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: FLAGS });
});

after(async () => {
  if (browser) await browser.close();
  if (seedDir) {
    try { seed('stop', '--dir', seedDir); } catch (e) { /* already stopped */ }
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test('without a session the control plane is private', async () => {
  const page = await browser.newPage();
  const res = await page.goto(base + '/_seed/');
  assert.strictEqual(res.status(), 401);
  assert.match(await page.textContent('body'), /private/i);
  await page.screenshot({ path: path.join(OUT, 'private.png') });
  await page.close();
});

test('the sign-in link opens the signed-in control plane', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('console', (msg) => { if (msg.type() === 'error') errors.push(msg.text()); });
  page.on('pageerror', (err) => errors.push(String(err)));
  await page.goto(link);
  assert.strictEqual(new URL(page.url()).pathname, '/_seed/');
  assert.strictEqual(await page.textContent('#seed-name'), 'browsertest');
  // app.js fetched the status with the token: the organism's state appears.
  await page.waitForFunction(() => document.querySelector('#organism-state').textContent === 'running',
    null, { timeout: 120000 });
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name.startsWith('seed_'));
  assert.ok(session, 'no session cookie');
  assert.strictEqual(session.httpOnly, true);
  assert.strictEqual(session.sameSite, 'Lax');
  assert.strictEqual(session.path, '/_seed');
  // The page's own script cannot read the cookie.
  assert.strictEqual(await page.evaluate(() => document.cookie), '');
  await page.screenshot({ path: path.join(OUT, 'control-plane.png'), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: path.join(OUT, 'control-plane-phone.png'), fullPage: true });
  assert.deepStrictEqual(errors.filter((e) => !/favicon/.test(e)), []);
  await context.close();
});

test('the organism is served at /', async () => {
  const page = await browser.newPage();
  const res = await page.goto(base + '/');
  assert.strictEqual(res.status(), 200);
  assert.match(await page.textContent('body'), /I don't have a purpose yet/);
  await page.screenshot({ path: path.join(OUT, 'organism.png') });
  await page.close();
});

test('an organism page cannot read the control plane API', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(link.replace(/t=[0-9a-f]+/, 't=' + '0'.repeat(64))); // no valid link: still no session
  const signedIn = await context.newPage();
  const fresh = seed('login', '--print', '--dir', seedDir).trim();
  await signedIn.goto(fresh);
  // Now the browser holds the owner's cookie. A script on the organism's
  // origin (same origin!) tries the API with the cookie alone.
  const organism = await context.newPage();
  await organism.goto(base + '/');
  const status = await organism.evaluate(async () => (await fetch('/_seed/api/status')).status);
  assert.strictEqual(status, 401);
  // And it cannot fetch the page that carries the token.
  const pageStatus = await organism.evaluate(async () => (await fetch('/_seed/')).status);
  assert.notStrictEqual(pageStatus, 200);
  await context.close();
});
