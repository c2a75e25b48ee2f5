// The control plane in a real browser: plant a Seed with the real CLI, open
// the one-time link in headless Chromium, and see the signed-in page fill
// itself from the API (which proves the CSP allows our script and the token
// travels in its header). Screenshots go to tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const path = require('node:path');
const { TestSeed, launch, waitUntil, OUT } = require('./lib.js');

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
  // "Signed in" moves on to /_seed/ by itself (a refresh, not a redirect).
  await page.waitForURL((u) => u.pathname === '/_seed/');
  assert.strictEqual(await page.getAttribute('meta[name="seed-name"]', 'content'), 'browsertest');
  // The header shows the identity's name (knowledge/self.yaml: the Seed's
  // name when planted), fetched with the token.
  await page.waitForFunction(() => document.querySelector('#seed-name').textContent === 'browsertest');
  // app.js fetched the status with the token: the organism's state appears.
  await page.waitForFunction(() => document.querySelector('#organism-state').textContent === 'running',
    null, { timeout: 120000 });
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name.startsWith('seed_'));
  assert.ok(session, 'no session cookie');
  assert.strictEqual(session.httpOnly, true);
  assert.strictEqual(session.sameSite, 'Strict');
  assert.strictEqual(session.domain, 'seed.localhost'); // host-only, on the control plane's own origin
  assert.strictEqual(session.path, '/_seed');
  // The page's own script cannot read the cookie.
  assert.strictEqual(await page.evaluate(() => document.cookie), '');
  await page.screenshot({ path: path.join(OUT, 'control-plane.png'), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: path.join(OUT, 'control-plane-phone.png'), fullPage: true });
  assert.deepStrictEqual(errors, []); // the favicon too: no 404 on any load
  await context.close();
});

test('the organism is served at /', async () => {
  const page = await browser.newPage();
  const failed = [];
  page.on('response', (r) => { if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`); });
  const res = await page.goto(s.app + '/');
  assert.strictEqual(res.status(), 200);
  assert.match(await page.textContent('body'), /I don't have a purpose yet/);
  // The Seed's logo is drawn as an image (an emoji is a box where no emoji
  // font is installed), and it is the favicon: nothing answers 404.
  await page.waitForFunction(() => {
    const img = document.querySelector('img.seed');
    return img && img.complete && img.naturalWidth > 0;
  });
  const icon = await page.evaluate(async () => (await fetch(document.querySelector('link[rel=icon]').href)).status);
  assert.strictEqual(icon, 200);
  assert.deepStrictEqual(failed, []);
  // The control plane's origin never serves it: / there is the control plane.
  await page.goto(base + '/');
  assert.strictEqual(new URL(page.url()).pathname, '/_seed/');
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
  await signedIn.waitForURL((u) => u.pathname === '/_seed/');
  // Now the browser holds the owner's cookie. A script on the organism's
  // origin tries the API: it is not served there at all.
  const organism = await context.newPage();
  await organism.goto(s.app + '/');
  // (421 Misdirected Request, which Chromium reports as a failed fetch.)
  const status = await organism.evaluate(async () => {
    try {
      return (await fetch('/_seed/api/status')).status;
    } catch (e) {
      return 'failed';
    }
  });
  assert.ok(status === 421 || status === 'failed', String(status));
  // And it cannot fetch the page that carries the token.
  const pageStatus = await organism.evaluate(async () => {
    try {
      return (await fetch('/_seed/')).status;
    } catch (e) {
      return 'failed';
    }
  });
  assert.notStrictEqual(pageStatus, 200);
  await context.close();
});

// What another local account could run: a listener on another port of
// loopback, for each name the browser resolves there.
async function captureServer() {
  const seen = [];
  const srv = http.createServer((req, res) => {
    seen.push({ host: req.headers.host, url: req.url, cookie: req.headers.cookie || '' });
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end('<p>captured</p>');
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const srv6 = http.createServer(srv.listeners('request')[0]);
  await new Promise((resolve) => srv6.listen(srv.address().port, '::1', resolve)).catch(() => {});
  return { seen, port: srv.address().port, close: () => { srv.close(); srv6.close(); } };
}

test('the session cookie reaches no other port, whatever the organism does', async () => {
  const context = await browser.newContext();
  const signedIn = await context.newPage();
  await signedIn.goto(s.login());
  await signedIn.waitForURL((u) => u.pathname === '/_seed/');
  await signedIn.waitForFunction(() => document.querySelector('#organism-state').textContent !== '',
    null, { timeout: 60000 });
  const cookie = (await context.cookies()).find((c) => c.name.startsWith('seed_'));
  assert.ok(cookie, 'not signed in');
  const cap = await captureServer();
  try {
    const targets = ['127.0.0.1', 'localhost', 'seed.localhost'].map((h) => `http://${h}:${cap.port}/_seed/x-${h}`);
    const organism = await context.newPage();
    await organism.goto(s.app + '/');
    // Subresources: images and credentialed fetches.
    await organism.evaluate(async (urls) => {
      for (const u of urls) {
        const img = new Image();
        img.src = u + '.png';
        document.body.append(img);
        await fetch(u + '/fetch', { mode: 'no-cors', credentials: 'include' }).catch(() => {});
      }
    }, targets);
    // Top-level navigations started by the organism's script.
    for (const u of targets) {
      await organism.goto(s.app + '/');
      await Promise.all([organism.waitForURL(u + '/nav'), organism.evaluate((to) => { location.href = to; }, u + '/nav')]);
    }
    await waitUntil(() => cap.seen.filter((r) => r.url.endsWith('/nav')).length >= targets.length,
      { timeout: 30000, what: 'the navigations' });
    const leaked = cap.seen.filter((r) => r.cookie.includes(cookie.name));
    assert.deepStrictEqual(leaked, [], 'the session cookie reached another port');
    // The organism's requests to the real control plane carry no cookie
    // either (another site: SameSite=Strict), so they see the private page.
    await organism.goto(s.app + '/');
    const nav = await Promise.all([organism.waitForURL(`${base}/_seed/`),
      organism.evaluate((to) => { location.href = to; }, `${base}/_seed/`)]);
    assert.ok(nav);
    assert.match(await organism.textContent('body'), /This Seed is private/);
    assert.strictEqual(await organism.locator('meta[name="seed-token"]').count(), 0);
    // The owner's own click on the page's link is a navigation of that
    // origin: signed in.
    await Promise.all([organism.waitForNavigation(), organism.click('a[href="/_seed/"]')]);
    await organism.locator('meta[name="seed-token"]').waitFor({ state: 'attached' });
  } finally {
    cap.close();
    await context.close();
  }
});

test('a cookie bomb on the organism\'s origins leaves the control plane alone', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/');
  const jar = async () => (await context.cookies()).map((c) => `${c.domain}${c.path}:${c.name}`);
  for (const origin of [s.app, s.app.replace('127.0.0.1', 'localhost')]) {
    const organism = await context.newPage();
    await organism.goto(origin + '/');
    await organism.evaluate(() => {
      const big = 'x'.repeat(4000);
      for (let i = 0; i < 40; i++) {
        document.cookie = `bomb${i}=${big}; path=/_seed`;
        document.cookie = `dom${i}=${big}; domain=localhost; path=/`;
      }
      for (let i = 0; i < 200; i++) document.cookie = `many${i}=1; path=/`;
    });
    await organism.close();
  }
  // Not one of them lives on seed.localhost: the session cookie is still there.
  const cookies = await jar();
  assert.deepStrictEqual(cookies.filter((c) => c.startsWith('seed.localhost') && !/:seed_/.test(c)), []);
  assert.ok(cookies.some((c) => /^seed\.localhost\/_seed:seed_/.test(c)), cookies.slice(0, 5).join(' '));
  const res = await page.goto(s.base + '/_seed/');
  assert.strictEqual(res.status(), 200);
  assert.ok(await page.getAttribute('meta[name="seed-token"]', 'content'));
  const fresh = await context.newPage();
  const r2 = await fresh.goto(s.login());
  assert.strictEqual(r2.status(), 200);
  await context.close();
});
