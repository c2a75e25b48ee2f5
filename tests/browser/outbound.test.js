// Outbound access in a real browser: Settings lists what the proxy refused
// (here the live organism's Node fetch to a host nobody granted), grants
// from its form (a bad host is refused, naming the field), shows a secret
// that was not passed at start, revokes with a confirmation; and the chat's
// request_outbound_access becomes an approval card showing the request in
// full, whose approval is the grant. Screenshots in tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { TestSeed, launch, waitUntil, httpJson, OUT } = require('./lib.js');

// A live organism that tries a host nobody granted when asked.
const SERVER = `#!/usr/bin/env node
'use strict';
const http = require('node:http');
http.createServer(async (req, res) => {
  if (req.url === '/healthz') { res.end('ok'); return; }
  if (req.url === '/try') {
    let out;
    try { out = 'status ' + (await fetch('https://blocked.example.net/', {signal: AbortSignal.timeout(15000)})).status; }
    catch (e) { out = 'refused: ' + String(e.cause ? e.cause.message || e.cause : e.message); }
    res.end(out);
    return;
  }
  res.end('outbound browser test');
}).listen(Number(process.env.PORT || 8080), '127.0.0.1');
`;

let s, browser, context, page;
const problems = [];

before(async () => {
  s = await TestSeed.start('outboundui', { scripted: true, organism: { 'bin/server': SERVER } });
  browser = await launch();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('pageerror', (err) => problems.push('page error: ' + err));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content.Security.Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
  });
  page.on('dialog', (d) => d.dismiss());
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/');
});

after(async () => {
  if (browser) await browser.close();
  if (s) s.close();
});

async function settings() {
  await page.goto(s.base + '/_seed/#settings');
  await page.waitForSelector('#outbound-grants li');
}

test('Settings lists the connection the proxy refused', async () => {
  await waitUntil(async () => (await httpJson(s.app + '/healthz')).status === 200, { timeout: 180000, what: 'the organism' });
  const r = await httpJson(s.app + '/try');
  assert.match(String(r.body), /refused|403|not/i);
  await settings();
  assert.match(await page.textContent('#outbound-grants'), /Nothing is granted/);
  await waitUntil(async () => {
    await page.reload();
    await page.waitForSelector('#outbound-refused li');
    return /blocked\.example\.net/.test(await page.textContent('#outbound-refused'));
  }, { timeout: 30000, what: 'the refusal in Settings' });
  const row = page.locator('#outbound-refused li', { hasText: 'blocked.example.net' }).first();
  assert.match(await row.textContent(), /from live/);
  await page.locator('#outbound').screenshot({ path: path.join(OUT, 'outbound-refused.png') });
});

test('the grant form grants, names a bad field, and revoke asks first', async () => {
  await settings();
  await page.fill('#grant-hosts', '10.0.0.1');
  await page.click('#grant-submit');
  await page.waitForSelector('#outbound-error:not([hidden])');
  assert.match(await page.textContent('#outbound-error'), /hosts\[0\]/);

  await page.fill('#grant-hosts', 'API.example.net\n*.cdn.example.org');
  await page.selectOption('#grant-for', 'organism');
  await page.fill('#grant-secrets', 'WEATHER_KEY');
  await page.fill('#grant-reason', 'forecasts');
  await page.click('#grant-submit');
  const row = page.locator('#outbound-grants li[data-grant]').first();
  await row.waitFor();
  const text = await row.textContent();
  assert.match(text, /api\.example\.net, \*\.cdn\.example\.org/);
  assert.match(text, /for the live app/);
  assert.match(text, /granted by you in Settings/);
  assert.match(text, /WEATHER_KEY not available \(pass it with -e WEATHER_KEY at start\)/);
  assert.match(text, /why: forecasts/);
  const d = (await s.api('/_seed/api/outbound')).body;
  assert.deepStrictEqual(d.grants.map((g) => g.hosts), [['api.example.net', '*.cdn.example.org']]);
  await page.locator('#outbound').screenshot({ path: path.join(OUT, 'outbound-granted.png') });

  // Revoke: a confirmation first; cancelling keeps it.
  await row.locator('button', { hasText: 'Revoke' }).click();
  await page.waitForSelector('#confirm[open]');
  await page.click('#confirm-cancel');
  assert.strictEqual((await s.api('/_seed/api/outbound')).body.grants.length, 1);
  await row.locator('button', { hasText: 'Revoke' }).click();
  await page.waitForSelector('#confirm[open]');
  await page.click('#confirm-ok');
  await page.waitForFunction(() => !document.querySelector('#outbound-grants li[data-grant]'));
  assert.strictEqual((await s.api('/_seed/api/outbound')).body.grants.length, 0);
  assert.strictEqual(await page.isHidden('#outbound-revoked-box'), false);
});

test('the chat asks with an approval card that shows the whole request', async () => {
  await s.script([
    { tool_calls: [{ name: 'request_outbound_access', arguments: {
      hosts: ['api.weather.example.net'], for: 'organism', secrets: ['WEATHER_KEY'], reason: 'the forecast page' } }] },
    { text: 'I asked for access to the weather API.' },
  ]);
  await page.goto(s.base + '/_seed/#chat');
  await page.fill('#composer-text', 'Show the weather');
  await page.click('#composer button[type="submit"]');
  const card = page.locator('article.approval').first();
  await card.waitFor({ timeout: 60000 });
  const text = await card.textContent();
  assert.match(text, /api\.weather\.example\.net/);
  assert.match(text, /the live app/);
  assert.match(text, /WEATHER_KEY/);
  assert.match(text, /the forecast page/);
  assert.match(text, /Asked in the chat/);
  assert.match(text, /sent anywhere the app may reach/);
  await card.screenshot({ path: path.join(OUT, 'outbound-approval.png') });
  await card.locator('button', { hasText: 'Approve' }).click();
  await page.waitForFunction(() => /I asked for access/.test(document.querySelector('#messages').textContent),
    null, { timeout: 60000 });
  const grants = (await s.api('/_seed/api/outbound')).body.grants;
  assert.strictEqual(grants.length, 1);
  assert.deepStrictEqual(grants[0].hosts, ['api.weather.example.net']);
  assert.match(grants[0].by, /^apr_[0-9a-f]{16}$/);
  // The chat and Settings are one page: the list shown before may still be
  // there until Settings has loaded again, so wait for the new row.
  await settings();
  await page.waitForFunction(() => /approved request apr_/.test(document.querySelector('#outbound-grants').textContent),
    null, { timeout: 30000 });
  assert.deepStrictEqual(problems, []);
});
