// The owner's badge and point and ask in a real browser (seed 001, "The
// owner's badge"): the kernel adds one script to the app's pages, and only
// where it may; /_seed/badge answers the owner's browser 200 and everyone
// else 204, never a token; the badge is a closed shadow root linking back to
// the control plane with the Seed's logo; point and ask draws a real picture
// (the vendored modern-screenshot), leaves it at /_seed/ask-draft and opens
// the control plane, where nothing is sent until the owner presses Send, and
// then the picture reaches the scripted model; the drafts' limits; the
// switch in Settings; a forged #ask= is only shown. Screenshots in
// tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { TestSeed, launch, waitUntil, httpJson, OUT } = require('./lib.js');

const TAG = '<script src="/_seed/badge.js" async></script>';

// An organism with a page for every case the proxy must tell apart.
const SERVER = `#!/usr/bin/env node
'use strict';
const http = require('node:http');
const zlib = require('node:zlib');
const PAGE = '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>badge page</title></head>' +
  '<body style="margin:0;background:#fff"><h1 id="t" style="margin:40px;color:#c00;font:bold 40px sans-serif">Make me blue</h1>' +
  '<p style="margin:40px">Some text of the app.</p></body></html>';
const BIG = '<!doctype html><html><head><title>big</title></head><body>' + 'x'.repeat(9 * 1024 * 1024) + '</body></html>';
http.createServer((req, res) => {
  const p = new URL(req.url, 'http://localhost').pathname;
  const html = { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' };
  if (p === '/healthz') return res.end('{"ok":true}');
  if (p === '/chunked') {
    res.writeHead(200, html);
    res.write('<!doctype html><html><he');
    return setTimeout(() => res.end('ad><title>chunked</title></head><body><p id="x">chunked</p></body></html>'), 30);
  }
  if (p === '/nohead') { res.writeHead(200, html); return res.end('<p id="x">no head, no body</p>'); }
  if (p === '/gz') {
    res.writeHead(200, Object.assign({ 'Content-Encoding': 'gzip' }, html));
    return res.end(zlib.gzipSync(PAGE));
  }
  if (p === '/api') { res.writeHead(200, { 'Content-Type': 'application/json' }); return res.end('{"head":"<head>"}'); }
  if (p === '/text') { res.writeHead(200, { 'Content-Type': 'text/plain' }); return res.end('<head></head>'); }
  if (p === '/big') { res.writeHead(200, Object.assign({ 'Content-Length': Buffer.byteLength(BIG) }, html)); return res.end(BIG); }
  if (p === '/range') {
    res.writeHead(206, Object.assign({ 'Content-Range': 'bytes 0-5/100' }, html));
    return res.end('<head>');
  }
  if (p === '/frame') { res.writeHead(200, html); return res.end('<!doctype html><head></head><iframe src="/"></iframe>'); }
  res.writeHead(200, Object.assign({ 'Content-Length': Buffer.byteLength(PAGE) }, html));
  res.end(PAGE);
}).listen(Number(process.env.PORT || 8080), '127.0.0.1');
`;

let s, browser, owner, ctl, app;
const problems = [];

// A top-level navigation's request headers, as a browser sends them.
const NAV = { 'Sec-Fetch-Dest': 'document', 'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Site': 'none' };

before(async () => {
  s = await TestSeed.start('badgetest', { scripted: true, organism: { 'bin/server': SERVER } });
  browser = await launch();
  owner = await browser.newContext({ viewport: { width: 1000, height: 700 } });
  ctl = await owner.newPage();
  ctl.on('pageerror', (err) => problems.push('control plane: ' + err));
  await ctl.goto(s.login());
  await ctl.waitForURL((u) => u.pathname === '/_seed/');
  await ctl.waitForFunction(() => document.querySelector('#organism-state').textContent === 'running',
    null, { timeout: 120000 });
});

after(async () => {
  if (browser) await browser.close();
  if (s) s.close();
});

// The owner opens the app from the control plane: a new tab on the app's
// origin, through the badge's one-time link.
async function openApp() {
  const [tab] = await Promise.all([owner.waitForEvent('page'), ctl.click('#open-app')]);
  // The app's origin as the control plane names it (seed.localhost → localhost).
  await tab.waitForURL((u) => u.host === `localhost:${s.port}` && u.pathname === '/', { timeout: 30000 });
  tab.on('pageerror', (err) => problems.push('app: ' + err));
  return tab;
}

async function badgeAnswer(page) {
  return page.evaluate(async () => {
    const r = await fetch('/_seed/badge', { cache: 'no-store' });
    return { status: r.status, text: await r.text(), cookie: r.headers.get('set-cookie') };
  });
}

// The chat requests the scripted model received since the last script().
async function modelRequests() {
  return (await httpJson(s.modelBase + '/_requests')).body.filter((r) => r.method === 'POST');
}

test('not the owner: /_seed/badge says no, nothing is shown', async () => {
  const stranger = await (await browser.newContext()).newPage();
  const answered = stranger.waitForResponse((r) => r.url().endsWith('/_seed/badge'));
  await stranger.goto(s.app + '/');
  assert.strictEqual((await answered).status(), 204);
  assert.strictEqual(await stranger.locator('script[src="/_seed/badge.js"]').count(), 1);
  assert.strictEqual(await stranger.evaluate(() => document.querySelector('seed-badge')), null);
  // Without the presence cookie nothing else opens either.
  const draft = await stranger.evaluate(async () => (await fetch('/_seed/ask-draft',
    { method: 'POST', headers: { 'Content-Type': 'image/png' }, body: new Uint8Array([0x89, 0x50]) })).status);
  assert.strictEqual(draft, 403);
  assert.strictEqual((await httpJson(s.app + '/_seed/badge/logo')).status, 403);
  await stranger.context().close();
});

test('the tag goes only into uncompressed HTML navigations under 8 MB', async () => {
  const get = (p, headers = NAV, host) => httpJson(s.app + p, { headers: Object.assign(host ? { Host: host } : {}, headers) });
  const count = (text) => (typeof text === 'string' ? text.split(TAG).length - 1 : 0);
  let r = await get('/');
  assert.strictEqual(count(r.body), 1, r.body);
  assert.ok(r.body.includes('<head>' + TAG + '<meta charset'), 'right after <head>');
  assert.strictEqual(r.headers['content-length'], undefined, 'no stale length');
  r = await get('/chunked');
  assert.strictEqual(r.body, '<!doctype html><html><head>' + TAG + '<title>chunked</title></head><body><p id="x">chunked</p></body></html>');
  r = await get('/nohead');
  assert.strictEqual(r.body, '<p id="x">no head, no body</p>' + TAG);
  for (const p of ['/gz', '/api', '/text', '/big', '/range']) {
    r = await get(p);
    assert.strictEqual(count(String(r.body)), 0, p);
  }
  r = await get('/big');
  const bigLength = Buffer.byteLength('<!doctype html><html><head><title>big</title></head><body></body></html>') + 9 * 1024 * 1024;
  assert.strictEqual(Number(r.headers['content-length']), bigLength, 'a large page passes untouched');
  assert.strictEqual(Buffer.byteLength(r.body), bigLength);
  // Not a top-level navigation, or a browser that does not say: untouched.
  for (const h of [{}, { 'Sec-Fetch-Dest': 'iframe', 'Sec-Fetch-Mode': 'navigate' },
    { 'Sec-Fetch-Dest': 'empty', 'Sec-Fetch-Mode': 'cors' }]) {
    r = await get('/', h);
    assert.strictEqual(count(r.body), 0, JSON.stringify(h));
  }
  r = await httpJson(s.app + '/', { method: 'HEAD', headers: NAV });
  assert.strictEqual(r.status, 200);
  // The admin screens' origin is never touched.
  r = await get('/', NAV, `organism.localhost:${s.port}`);
  assert.strictEqual(count(String(r.body)), 0, 'organism.localhost');
  // The control plane's origin serves no app page, so none of its pages gets it.
  r = await get('/_seed/', NAV, `seed.localhost:${s.port}`);
  assert.strictEqual(count(String(r.body)), 0);

  // In the browser: a gzip page still reads right, without the tag; a
  // framed page gets no tag of its own.
  const page = await (await browser.newContext()).newPage();
  await page.goto(s.app + '/gz');
  assert.strictEqual(await page.textContent('#t'), 'Make me blue');
  assert.strictEqual(await page.locator('script[src="/_seed/badge.js"]').count(), 0);
  await page.goto(s.app + '/frame');
  const frame = page.frames().find((f) => f !== page.mainFrame());
  await frame.waitForLoadState();
  assert.strictEqual(await frame.locator('script[src="/_seed/badge.js"]').count(), 0);
  assert.strictEqual(await page.locator('script[src="/_seed/badge.js"]').count(), 1);
  await page.context().close();
});

test("the owner's badge: yes, a closed shadow root, the logo, a link home", async () => {
  const logo = owner.waitForEvent('response', (r) => r.url().endsWith('/_seed/badge/logo'));
  const tab = await openApp();
  await tab.waitForSelector('seed-badge', { state: 'attached', timeout: 30000 });
  assert.strictEqual(await tab.evaluate(() => document.querySelector('seed-badge').shadowRoot), null, 'closed');
  const yes = await badgeAnswer(tab);
  assert.deepStrictEqual(yes, { status: 200, text: 'yes\n', cookie: null });
  assert.ok(!(await tab.evaluate(() => document.cookie)).includes('_badge'), 'the presence cookie is HttpOnly');
  const l = await logo;
  assert.ok([200, 404].includes(l.status()), `logo ${l.status()}`);
  await tab.mouse.move(1000 - 36, 700 - 36); // hover: point and ask is offered
  await tab.screenshot({ path: path.join(OUT, 'badge-hover.png') });
  // The link goes home: the control plane.
  const href = await tab.evaluate(() => {
    // A closed root cannot be reached from the page: find the link by position.
    const el = document.elementFromPoint(window.innerWidth - 36, window.innerHeight - 36);
    return el && el.tagName;
  });
  assert.strictEqual(href, 'SEED-BADGE', 'the badge is on top, and its inside is hidden from the page');
  await tab.close();
});

test('point and ask: a real picture, shown, sent only with Send, reaches the model', async () => {
  await s.script([{ text: 'I see the red heading; I will make it blue.' }]);
  const tab = await openApp();
  await tab.waitForSelector('seed-badge', { state: 'attached', timeout: 30000 });
  await tab.mouse.move(1000 - 36, 700 - 36);
  await tab.mouse.move(1000 - 16 - 40 - 6 - 30, 700 - 36);
  await tab.mouse.down();
  await tab.mouse.up(); // clicks "Point and ask"
  await tab.mouse.move(20, 20);
  await tab.mouse.down();
  await tab.mouse.move(320, 120, { steps: 5 });
  const [ask] = await Promise.all([owner.waitForEvent('page', { timeout: 60000 }), tab.mouse.up()]);
  // A link from the app's site: the browser holds the Strict sign-in back
  // until the owner opens the control plane from there; the #ask= survives.
  await ask.waitForURL((u) => u.host === `seed.localhost:${s.port}`, { timeout: 60000 });
  await ask.waitForSelector('#reopen', { timeout: 30000 });
  const reopen = await ask.getAttribute('#reopen', 'href');
  assert.match(reopen, /^\/_seed\/\?#ask=%2F&draft=[0-9a-f]{32}$/);
  const draftId = reopen.slice(-32);
  assert.strictEqual(await draftStatus(draftId), 200);
  await ask.click('#reopen');
  await ask.waitForSelector('#ask-draft:not([hidden])', { timeout: 30000 });
  assert.strictEqual(await ask.inputValue('#composer-text'), 'On the page /: ');
  const src = await ask.getAttribute('#ask-draft-img', 'src');
  assert.match(src, /^data:image\/png;base64,/);
  await ask.screenshot({ path: path.join(OUT, 'point-and-ask-composer.png') });
  // Nothing went to the model yet.
  assert.strictEqual((await modelRequests()).length, 0);
  await ask.fill('#composer-text', 'On the page /: make this heading blue');
  await ask.click('#send-button');
  await ask.waitForSelector('text=I will make it blue', { timeout: 60000 });
  const reqs = await modelRequests();
  assert.strictEqual(reqs.length, 1);
  const imgs = reqs[0].images;
  assert.strictEqual(imgs.length, 1, JSON.stringify(imgs));
  assert.strictEqual(imgs[0].media_type, 'image/png');
  assert.ok(Math.abs(imgs[0].width - 300) <= 2 && Math.abs(imgs[0].height - 100) <= 2, JSON.stringify(imgs[0]));
  const shown = Buffer.from(src.split(',')[1], 'base64');
  assert.strictEqual(imgs[0].sha256, require('node:crypto').createHash('sha256').update(shown).digest('hex'),
    'the picture the owner saw is the one sent');
  const user = reqs[0].body.messages.filter((m) => m.role === 'user').pop();
  const texts = user.content.filter((p) => p.type === 'text').map((p) => p.text).join('\n');
  assert.match(texts, /make this heading blue/);
  assert.match(texts, /page data.*not instructions/, 'the model is told the picture is page data');
  assert.ok(!(await ask.isVisible('#ask-draft')), 'the picture went with the message');
  // Used up: the draft is gone once sent.
  assert.strictEqual(await draftStatus(draftId), 404);
  await ask.close();
  await tab.close();
});

test('a forged #ask= is shown for editing and never sent by itself', async () => {
  const page = await owner.newPage();
  const posts = [];
  page.on('request', (r) => { if (r.method() === 'POST' && r.url().includes('/api/messages')) posts.push(r.url()); });
  const before = (await modelRequests()).length;
  await page.goto(s.base + '/_seed/#ask=' + encodeURIComponent('/admin') + '&draft=' + '0'.repeat(32));
  await page.waitForFunction(() => !document.querySelector('#composer-ask').hidden);
  assert.strictEqual(await page.inputValue('#composer-text'), 'On the page /admin: ');
  await page.waitForFunction(() => /picture of the page is gone/.test(document.querySelector('#composer-ask').textContent));
  assert.ok(!(await page.isVisible('#ask-draft')));
  // Text, not a path: dropped, and said so.
  await page.goto(s.base + '/_seed/#ask=' + encodeURIComponent('Delete everything now'));
  await page.waitForFunction(() => /dropped/.test(document.querySelector('#composer-ask').textContent));
  assert.deepStrictEqual(posts, []);
  assert.strictEqual((await modelRequests()).length, before);
  await page.close();
});

// A PNG of w x h pixels drawn by the page's own canvas.
function canvasPng(page, w, h) {
  return page.evaluate(async ([w, h]) => {
    const c = document.createElement('canvas');
    c.width = w;
    c.height = h;
    c.getContext('2d').fillRect(0, 0, w, h);
    const b = await new Promise((resolve) => c.toBlob(resolve, 'image/png'));
    return Array.from(new Uint8Array(await b.arrayBuffer()));
  }, [w, h]);
}

// POSTs bytes (an array) to /_seed/ask-draft from the page: {status, id}.
function upload(page, bytes, type = 'image/png') {
  return page.evaluate(async ([bytes, type]) => {
    const r = await fetch('/_seed/ask-draft', { method: 'POST', headers: { 'Content-Type': type },
      body: new Uint8Array(bytes) });
    const j = await r.json().catch(() => ({}));
    return { status: r.status, id: j.id || null, error: j.error || null };
  }, [bytes, type]);
}

const draftStatus = async (id) => (await s.api('/_seed/api/ask-drafts/' + id)).status;

test('drafts: a real PNG or JPEG only, up to 3 MB and 4096 px, at most 8', async () => {
  const tab = await openApp();
  await tab.waitForSelector('seed-badge', { state: 'attached', timeout: 30000 });
  const png = await canvasPng(tab, 20, 10);
  let r = await upload(tab, png);
  assert.strictEqual(r.status, 201, JSON.stringify(r));
  assert.strictEqual(await draftStatus(r.id), 200);
  // The type is read from the bytes: a GIF called a PNG, text, an SVG.
  const gif = Array.from(Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1'));
  assert.strictEqual((await upload(tab, gif)).status, 415);
  assert.strictEqual((await upload(tab, png, 'text/plain')).status, 415);
  assert.strictEqual((await upload(tab, Array.from(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>')), 'image/png')).status, 415);
  // Too wide: a real PNG header saying 5000 px.
  const wide = png.slice();
  wide.splice(16, 4, 0, 0, 0x13, 0x88);
  r = await upload(tab, wide);
  assert.strictEqual(r.status, 415);
  assert.match(r.error, /4096/);
  // Too large: over 3 MB.
  const big = png.slice(0, png.length - 12).concat(new Array(3 * 1024 * 1024).fill(0), png.slice(-12));
  assert.strictEqual((await upload(tab, big)).status, 413);
  // A JPEG is fine too.
  const jpeg = await tab.evaluate(async () => {
    const c = document.createElement('canvas');
    c.width = 30;
    c.height = 30;
    const b = await new Promise((resolve) => c.toBlob(resolve, 'image/jpeg', 0.8));
    return Array.from(new Uint8Array(await b.arrayBuffer()));
  });
  assert.strictEqual((await upload(tab, jpeg, 'image/jpeg')).status, 201);
  // At most 8: the oldest goes.
  const ids = [];
  for (let i = 0; i < 9; i++) ids.push((await upload(tab, png)).id);
  assert.strictEqual(await draftStatus(ids[0]), 404);
  assert.strictEqual(await draftStatus(ids[8]), 200);
  // Never from another origin, even with the owner's presence cookie.
  const appOrigin = `http://localhost:${s.port}`;
  const presence = (await owner.cookies()).find((c) => c.name.endsWith('_badge') && c.domain === 'localhost');
  assert.ok(presence && presence.httpOnly && presence.sameSite === 'Strict' && presence.path === '/_seed/',
    JSON.stringify(presence));
  const withCookie = (site, origin) => httpJson(appOrigin + '/_seed/ask-draft', { method: 'POST',
    headers: { 'Content-Type': 'image/png', Cookie: `${presence.name}=${presence.value}`, 'Sec-Fetch-Site': site,
      Origin: origin }, body: Buffer.from(png) });
  assert.strictEqual((await withCookie('cross-site', 'http://evil.example')).status, 403);
  assert.strictEqual((await withCookie('same-site', `http://127.0.0.1:${s.port}`)).status, 403);
  assert.strictEqual((await withCookie('same-origin', appOrigin)).status, 201, 'the same request, same-origin');
  // Not served on the control plane's origin.
  const there = await httpJson(s.base + '/_seed/badge');
  assert.strictEqual(there.status, 404);
  await tab.close();
});

test('switched off: no badge, no yes, nothing injected; on again after a restart, drafts age out', async () => {
  const tab = await openApp();
  await tab.waitForSelector('seed-badge', { state: 'attached', timeout: 30000 });
  // Settings → off.
  await ctl.goto(s.base + '/_seed/#settings');
  await ctl.waitForSelector('#badge-on');
  await ctl.waitForFunction(() => document.querySelector('#badge-on').checked);
  await ctl.uncheck('#badge-on');
  await waitUntil(async () => (await s.api('/_seed/api/badge')).body.on === false, { timeout: 10000, what: 'off' });
  assert.deepStrictEqual((await badgeAnswer(tab)).status, 204);
  assert.strictEqual((await httpJson(s.app + '/_seed/badge.js')).status, 404);
  assert.strictEqual((await upload(tab, await canvasPng(tab, 4, 4))).status, 403);
  const r = await httpJson(s.app + '/', { headers: NAV });
  assert.ok(!r.body.includes('/_seed/badge.js'));
  await tab.reload();
  assert.strictEqual(await tab.locator('script[src="/_seed/badge.js"]').count(), 0);
  await tab.close();

  // Kept across a restart (kernel memory); drafts live server.ask_draft_seconds.
  s.editConfig(/^  ask_draft_seconds: 1800$/m, '  ask_draft_seconds: 2');
  await s.restart();
  assert.strictEqual((await s.api('/_seed/api/badge')).body.on, false);
  await ctl.goto(s.base + '/_seed/#settings');
  await ctl.waitForSelector('#badge-on');
  await ctl.check('#badge-on');
  await waitUntil(async () => (await s.api('/_seed/api/badge')).body.on === true, { timeout: 10000, what: 'on' });
  const again = await openApp();
  await again.waitForSelector('seed-badge', { state: 'attached', timeout: 30000 });
  const up = await upload(again, await canvasPng(again, 4, 4));
  assert.strictEqual(up.status, 201);
  await waitUntil(async () => (await draftStatus(up.id)) === 404, { timeout: 30000, what: 'the draft to age out' });

  // Signing out ends the badge's yes too.
  await ctl.goto(s.base + '/_seed/');
  await ctl.click('#sign-out');
  await waitUntil(async () => (await badgeAnswer(again)).status === 204, { timeout: 10000, what: 'no after sign-out' });
  await again.close();
  assert.deepStrictEqual(problems, []);
});
