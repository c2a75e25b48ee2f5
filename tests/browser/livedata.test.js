// The chat on the live data in a real browser: a change_data request becomes
// an approval card showing the whole statement (every character of a long,
// multi-line one, never cut), its size and what it runs as; denying it keeps
// the live data as it was, and the chat says so. A call_api POST's card shows
// method, path, headers and body in full. Screenshots in tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { TestSeed, launch, OUT } = require('./lib.js');

let s, browser, page;
const problems = [];

before(async () => {
  s = await TestSeed.start('liveui', { scripted: true });
  browser = await launch();
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('pageerror', (err) => problems.push('page error: ' + err));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content.Security.Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
  });
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/');
});

after(async () => {
  if (browser) await browser.close();
  if (s) s.close();
});

async function send(text) {
  await page.goto(s.base + '/_seed/#chat');
  await page.fill('#composer-text', text);
  await page.click('#composer button[type="submit"]');
}

// A long statement: 120 lines, about 9 KB, the last one unique.
const values = Array.from({ length: 120 }, (_, i) => `  (${i + 1}, 'note number ${i + 1} <b>not markup</b> | kept')`);
const SQL = 'INSERT INTO notes (id, body) VALUES\n' + values.join(',\n') + '\nON CONFLICT (id) DO NOTHING -- the end';

test('a change_data request is an approval card with the whole statement', async () => {
  await s.script([
    { tool_calls: [{ name: 'change_data', arguments: { sql: SQL } }] },
    { text: 'The owner said no: nothing was added.', match: 'denied by the owner' },
  ]);
  await send('Add the 120 notes');
  const card = page.locator('article.approval:not(.decided)').first();
  await card.waitFor({ timeout: 60000 });
  const text = await card.textContent();
  assert.match(text, /Approve a dangerous action\?/);
  assert.match(text, /Asked in the chat/);
  assert.match(text, /change the live data with change_data/);
  assert.match(text, /as the app's own role/);
  assert.match(text, new RegExp(Buffer.byteLength(SQL) + ' bytes'));
  // Every character, as it runs (markup shown as text, not rendered).
  assert.strictEqual(await card.locator('pre').first().textContent(), SQL);
  assert.strictEqual(await card.locator('b').count(), 0);
  // Readable: the statement wraps inside the card, nothing overflows it.
  const box = await card.boundingBox();
  const pre = await card.locator('pre').first().boundingBox();
  assert.ok(pre.x + pre.width <= box.x + box.width + 1, 'the statement overflows the card');
  await card.screenshot({ path: path.join(OUT, 'livedata-change-approval.png') });
  await card.locator('button', { hasText: 'Deny' }).click();
  await page.waitForFunction(() => /nothing was added/.test(document.querySelector('#messages').textContent),
    null, { timeout: 60000 });
  const approvals = (await s.api('/_seed/api/approvals')).body.approvals;
  assert.deepStrictEqual(approvals.filter((a) => a.tool === 'change_data'), []);
});

test('a call_api POST shows method, path, headers and body in full', async () => {
  const body = JSON.stringify({ title: 'line one\nline two', pad: 'z'.repeat(6000) });
  await s.script([
    { tool_calls: [{ name: 'call_api', arguments: { method: 'POST', path: '/api/notes?x=1', headers: { 'X-Trace': 'abc' }, body } }] },
    { text: 'Not sent.', match: 'denied by the owner' },
  ]);
  await send('Post a note');
  const card = page.locator('article.approval:not(.decided)').first();
  await card.waitFor({ timeout: 60000 });
  const text = await card.textContent();
  assert.match(text, /send a request to the live app with call_api/);
  assert.match(text, /POST \/api\/notes\?x=1/);
  assert.match(text, /X-Trace: abc/);
  const pres = await card.locator('pre').allTextContents();
  assert.ok(pres.includes(body), 'the body is not shown in full');
  await card.screenshot({ path: path.join(OUT, 'livedata-call-api-approval.png') });
  await card.locator('button', { hasText: 'Deny' }).click();
  await page.waitForFunction(() => /Not sent\./.test(document.querySelector('#messages').textContent),
    null, { timeout: 60000 });
  assert.deepStrictEqual(problems, []);
});
