// The control plane in a real browser: plant a Seed with the real CLI, open
// the one-time link in headless Chromium, and see the signed-in page fill
// itself from the API (which proves the CSP allows our script and the token
// travels in its header). Screenshots go to tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { TestSeed, launch, OUT } = require('./lib.js');

let s, base, link, browser;

before(async () => {
  s = await TestSeed.start('browsertest');
  base = s.base;
  link = s.firstLink; // printed by seed new
  browser = await launch();
});

after(async () => {
  if (browser) await browser.close();
  if (s) s.close();
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
  assert.strictEqual(await page.getAttribute('meta[name="seed-name"]', 'content'), 'browsertest');
  // The header shows the identity's name (knowledge/self.yaml), fetched with the token.
  await page.waitForFunction(() => document.querySelector('#seed-name').textContent === 'Seed');
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
  const fresh = s.login();
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
