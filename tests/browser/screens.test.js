// The organism's admin screens in a real browser (seed 001 §"Control
// plane", "Admin screens on their own origin"): an organism declares them in
// organism/control/extensions.json; the control plane lists them and frames
// each from organism.localhost:<port><path>, never its own origin, in a
// sandbox without popups or top navigation. A screen that tries
// window.open and window.top navigation stays in its frame; organism pages
// on the main origin, and the control plane itself, cannot be framed, so a
// screen cannot navigate its frame back to them; the control plane's origin
// never serves the organism. Screenshots in tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { TestSeed, launch, shots, waitUntil, httpJson, OUT } = require('./lib.js');

// The organism: an admin screen whose script tries to leave its frame (on
// load, and again from a click, which is a user activation), a probe page
// that reports to the server whenever it actually renders, and a counter of
// every request the escapes would make if they worked.
const SERVER = `#!/usr/bin/env node
'use strict';
const http = require('node:http');
const hits = {};
const ESCAPE = 'const out = document.getElementById("out");' +
  'function note(k, v) { out.textContent += k + "=" + v + ";"; }' +
  'function escape(tag) {' +
  '  try { const w = window.open("http://127.0.0.1:" + location.port + "/landed?popup-" + tag, "_blank");' +
  '    note("open-" + tag, w ? "opened" : "blocked"); } catch (e) { note("open-" + tag, "threw"); }' +
  '  try { window.top.location.href = "http://127.0.0.1:" + location.port + "/landed?top-" + tag;' +
  '    note("top-" + tag, "asked"); } catch (e) { note("top-" + tag, "threw"); }' +
  '}' +
  'document.getElementById("origin").textContent = location.origin;' +
  'escape("load");' +
  'document.getElementById("again").addEventListener("click", () => escape("click"));';
const ADMIN = '<!doctype html><meta charset="utf-8"><title>Orders</title><h1>Orders admin</h1>' +
  '<p id="origin"></p><p id="out"></p><button id="again">Try again</button><script src="/admin/escape.js"></script>';
const PROBE = '<!doctype html><meta charset="utf-8"><title>probe</title><p id="probe">probe page</p>' +
  '<script src="/probe.js"></script>';
// A page that frames the URL in its query, and says when the frame loaded.
const FRAMER = '<!doctype html><meta charset="utf-8"><title>framer</title><script src="/framer.js"></script>';
http.createServer((req, res) => {
  const u = new URL(req.url, 'http://localhost');
  const p = u.pathname;
  hits[p + u.search] = (hits[p + u.search] || 0) + 1;
  if (p === '/healthz') return res.end('{"ok":true}');
  if (p === '/hits') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    return res.end(JSON.stringify(hits));
  }
  if (p === '/admin/escape.js') {
    res.writeHead(200, { 'Content-Type': 'text/javascript' });
    return res.end(ESCAPE);
  }
  if (p === '/framer.js') {
    res.writeHead(200, { 'Content-Type': 'text/javascript' });
    return res.end('const f = document.createElement("iframe"); f.id = "f";' +
      'f.onload = () => { document.title = "loaded"; };' +
      'f.src = new URLSearchParams(location.search).get("src");' +
      'document.addEventListener("DOMContentLoaded", () => document.body.append(f));');
  }
  if (p === '/probe.js') {
    res.writeHead(200, { 'Content-Type': 'text/javascript' });
    return res.end('fetch("/rendered?" + encodeURIComponent(location.host) + "&framed=" + (window.top !== window));');
  }
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
  if (p === '/admin/orders') return res.end(ADMIN);
  if (p === '/probe') return res.end(PROBE);
  if (p === '/framer') return res.end(FRAMER);
  res.end('<!doctype html><meta charset="utf-8"><title>the app</title><p id="app">the app itself</p>');
}).listen(Number(process.env.PORT || 8080), '127.0.0.1');
`;

const EXTENSIONS = JSON.stringify({
  screens: [
    { id: 'orders', title: 'Orders', path: '/admin/orders' },
    { id: 'probe', title: 'Probe', path: '/probe' },
    { id: 'away', title: 'Away', path: '//evil.example/x' },
    { id: 'seed', title: 'Control plane', path: '/_seed/' },
  ],
});
const SANDBOX = 'allow-scripts allow-forms allow-same-origin';

let s, browser, ctlBase, admin;

before(async () => {
  s = await TestSeed.start('screenstest', {
    organism: { 'bin/server': SERVER, 'control/extensions.json': EXTENSIONS },
  });
  ctlBase = s.base + '/_seed/';
  admin = `http://organism.localhost:${s.port}`;
  browser = await launch();
});

after(async () => {
  if (browser) await browser.close();
  if (s) s.close();
});

async function signedIn(context) {
  const page = await context.newPage();
  await page.goto(s.login());
  await page.waitForURL(ctlBase);
  return page;
}

async function hits() {
  const r = await httpJson(s.app + '/hits');
  assert.strictEqual(r.status, 200);
  return r.body;
}

function hitsOf(all, prefix) {
  return Object.entries(all).filter(([k]) => k.startsWith(prefix)).reduce((n, [, v]) => n + v, 0);
}

// The frame of the screen on show, once its document came from url.
async function screenFrame(page, url) {
  return waitUntil(() => page.frames().find((f) => f.url() === url), { timeout: 30000, what: `a frame of ${url}` });
}

test('the declared screens are listed and framed from organism.localhost, the refused ones said', async () => {
  const context = await browser.newContext();
  const page = await signedIn(context);
  await page.goto('about:blank');
  const [res] = await Promise.all([
    page.waitForResponse((r) => r.url() === ctlBase),
    page.goto(ctlBase + '#screens'),
  ]);
  // The page may frame the admin origin on this port, and nothing else.
  assert.match(res.headers()['content-security-policy'], new RegExp(`; frame-src ${admin}$`));
  await page.locator('#nav-screens').waitFor({ state: 'visible' });
  const tabs = page.locator('#screen-tabs [role="tab"]');
  await waitUntil(async () => (await tabs.count()) === 2, { what: 'two screen tabs' });
  assert.deepStrictEqual(await tabs.allTextContents(), ['Orders', 'Probe']);
  const errors = await page.locator('#screens-errors li').allTextContents();
  assert.strictEqual(errors.length, 2, errors.join('\n'));
  assert.match(errors[0], /screens\[2\] \("away"\): path starts with '\/\/'/);
  assert.match(errors[1], /screens\[3\] \("seed"\): path is the control plane's/);

  const frame = page.locator('#screen-frame');
  assert.strictEqual(await frame.getAttribute('src'), admin + '/admin/orders');
  assert.strictEqual(await frame.getAttribute('sandbox'), SANDBOX);
  const f = await screenFrame(page, admin + '/admin/orders');
  await waitUntil(async () => (await f.locator('#origin').textContent()) === admin, { what: 'the screen to run' });
  await shots(page, 'screens', { fullPage: false }); // desktop and phone: nothing sticks out sideways

  await tabs.nth(1).click();
  await page.waitForFunction(() => new URL(location.href).hash === '#screens/probe');
  assert.strictEqual(await frame.getAttribute('src'), admin + '/probe');
  await waitUntil(async () => hitsOf(await hits(), `/rendered?organism.localhost%3A${s.port}&framed=true`) >= 1,
    { what: 'the probe screen to render framed' });
  await context.close();
});

// Holds the browser's requests whose URL starts with prefix until the
// returned release() is called; asked resolves once one was made.
async function hold(page, prefix) {
  let release;
  const held = new Promise((r) => { release = r; });
  await page.route((url) => url.href.startsWith(prefix), async (route) => { await held; await route.continue(); });
  return { release, asked: page.waitForRequest((r) => r.url().startsWith(prefix)) };
}

test('before a list comes, its view claims nothing: the screens, the evolutions, the chat', async () => {
  const context = await browser.newContext();
  const page = await signedIn(context);
  await page.goto('about:blank');
  const screens = await hold(page, ctlBase + 'api/extensions');
  await page.goto(ctlBase + '#screens');
  await screens.asked;
  await page.locator('#view-screens').waitFor({ state: 'visible' });
  // Not "The app declares no admin screens": that is not known yet.
  assert.strictEqual(await page.locator('#screens-notice').isVisible(), false);
  assert.strictEqual(await page.locator('#screen-tabs [role="tab"]').count(), 0);
  screens.release();
  await waitUntil(async () => (await page.locator('#screen-tabs [role="tab"]').count()) === 2, { what: 'two screen tabs' });
  assert.strictEqual(await page.locator('#screens-notice').isVisible(), false);

  // The same for the evolutions: "No evolutions yet" only once the server said so.
  await page.goto('about:blank');
  const evolutions = await hold(page, ctlBase + 'api/evolutions');
  await page.goto(ctlBase + '#evolutions');
  await evolutions.asked;
  await page.locator('#view-evolutions').waitFor({ state: 'visible' });
  assert.strictEqual(await page.locator('#evolution-list li').count(), 0);
  evolutions.release();
  await page.locator('#evolution-list li.empty', { hasText: 'No evolutions yet' }).waitFor();

  // And the chat: "I don't have a purpose yet" only once its (empty) history came.
  await page.goto('about:blank');
  const history = await hold(page, ctlBase + 'api/messages?');
  await page.goto(ctlBase + '#chat');
  await history.asked;
  await page.locator('#view-chat').waitFor({ state: 'visible' });
  assert.strictEqual(await page.locator('#messages li').count(), 0);
  history.release();
  await page.locator('#messages li.empty', { hasText: "I don't have a purpose yet" }).waitFor();
  await context.close();
});

test('a screen cannot open windows or navigate the control plane, on load or on a click', async () => {
  const context = await browser.newContext();
  const popups = [];
  context.on('page', (p) => popups.push(p));
  const page = await signedIn(context);
  popups.length = 0;
  await page.goto(ctlBase + '#screens/orders');
  const f = await screenFrame(page, admin + '/admin/orders');
  const out = f.locator('#out');
  await waitUntil(async () => /top-load=/.test(await out.textContent()), { what: 'the escape on load' });
  await f.locator('#again').click(); // a user activation inside the frame
  await waitUntil(async () => /top-click=/.test(await out.textContent()), { what: 'the escape on a click' });
  const text = await out.textContent();
  console.log(`# the screen saw: ${text}`);
  // window.open's null alone proves little (a popup opened without an
  // opener also gives null): no window may have opened, nothing reached the app.
  assert.match(text, /open-load=blocked;/);
  assert.match(text, /open-click=blocked;/);
  // Top navigation throws or is refused; either way the control plane stays.
  assert.strictEqual(page.url(), ctlBase + '#screens/orders');
  assert.strictEqual(await page.locator('#screens-title').isVisible(), true);
  assert.strictEqual(popups.length, 0, 'a window opened');
  assert.strictEqual(hitsOf(await hits(), '/landed'), 0, 'an escape reached the app');
  await context.close();
});

// The frame of page other than its main one, once it settled on url.
async function childAt(page, url, what) {
  return waitUntil(() => page.frames().find((x) => x !== page.mainFrame() && x.url() === url), { timeout: 30000, what });
}

async function probeCount(frame) {
  return frame.locator('#probe').count().catch(() => 0);
}

test('a screen cannot navigate its frame to the main origin or to the control plane', async () => {
  const context = await browser.newContext();
  const page = await signedIn(context);
  for (const target of [`${s.app}/probe`, ctlBase]) {
    await page.goto('about:blank');
    await page.goto(ctlBase + '#screens/orders');
    const f = await screenFrame(page, admin + '/admin/orders');
    await f.evaluate((url) => { location.href = url; }, target);
    const g = await childAt(page, 'chrome-error://chromewebdata/', `the frame refused ${target}`);
    assert.strictEqual(await probeCount(g), 0);
  }
  assert.strictEqual(hitsOf(await hits(), `/rendered?127.0.0.1`), 0, 'the main origin rendered in a frame');
  await page.screenshot({ path: path.join(OUT, 'screens-refused-frame.png') });
  await context.close();
});

test('the main origin and the control plane refuse every frame; the admin origin all but the control plane', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  // What a frame that is let in looks like, from the framer: the probe renders.
  await page.goto(`${admin}/probe`);
  assert.strictEqual(await page.locator('#probe').count(), 1);
  const cases = [
    [s.app, `${s.app}/probe`],        // the main origin, even by itself
    [s.app, `${admin}/probe`],        // the admin origin, by the main one
    [admin, `${admin}/probe`],        // the admin origin, by itself
    [admin, `${s.app}/probe`],
    [s.app, ctlBase],                 // the control plane
  ];
  const said = [];
  page.on('console', (m) => said.push(m.text()));
  for (const [framer, src] of cases) {
    said.length = 0;
    await page.goto(`${framer}/framer?src=${encodeURIComponent(src)}`);
    await page.waitForFunction(() => document.title === 'loaded');
    // Chromium says which policy refused the frame (a cross-site frame's
    // error page has no URL Playwright can show; a same-site one is
    // chrome-error://).
    const origin = new URL(src).origin;
    const why = await waitUntil(() => said.find((t) => t.startsWith(`Framing '${origin}/' violates`)),
      { timeout: 30000, what: `the refusal of ${src} framed by ${framer}` });
    const want = origin === admin ? `"frame-ancestors http://seed.localhost:${s.port}"` : `"frame-ancestors 'none'"`;
    assert.ok(why.includes(want), why);
    const f = page.frames().find((x) => x !== page.mainFrame());
    assert.ok(['', 'chrome-error://chromewebdata/'].includes(f.url()), `${framer} framed ${src}: ${f.url()}`);
    assert.strictEqual(await probeCount(f), 0, `${framer} framed ${src}`);
  }
  assert.strictEqual(hitsOf(await hits(), '/rendered?127.0.0.1%3A' + s.port + '&framed=true'), 0);
  await context.close();
});

test('the main origin refuses every frame; the control plane origin never serves the organism', async () => {
  const r = await httpJson(s.app + '/probe');
  assert.strictEqual(r.status, 200);
  assert.strictEqual(r.headers['content-security-policy'], "frame-ancestors 'none'");
  const a = await httpJson(admin + '/probe');
  assert.strictEqual(a.headers['content-security-policy'], `frame-ancestors http://seed.localhost:${s.port}`);

  const context = await browser.newContext();
  const page = await context.newPage();
  for (const p of ['/admin/orders', '/probe', '/healthz']) {
    const res = await page.goto(s.base + p);
    assert.strictEqual(res.status(), 404, p);
    assert.match(await page.textContent('body'), /not served on this origin/);
  }
  const res = await page.goto(admin + '/_seed/');
  assert.strictEqual(res.status(), 421);
  await context.close();
  assert.strictEqual(hitsOf(await hits(), `/rendered?seed.localhost`), 0);
});
