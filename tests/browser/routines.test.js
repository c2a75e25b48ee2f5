// The Routines screen in headless Chromium against a real Seed whose model
// is the scripted server: a routine the chat created with the owner's
// approval is listed with its schedule; Run now makes a run whose report
// comes to the chat as the routine's (not the owner's), listed under Runs;
// Pause and Resume; Delete asks first, then the routine is gone.
// Screenshots in tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const { TestSeed, launch, shots, waitUntil } = require('./lib.js');

let s, browser, context, page;
const problems = []; // uncaught page errors and CSP violations

const PROMPT = 'How did orders go yesterday?\nCompare with the day before; <b>not</b> HTML.';

before(async () => {
  s = await TestSeed.start('routinestest', { scripted: true });
  browser = await launch();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('pageerror', (err) => problems.push('page error: ' + err));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content.Security.Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
  });
});

after(async () => {
  if (browser) await browser.close();
  if (s) s.close();
});

const row = () => page.locator('#routine-list li.routine[data-kind="routines"]');

test('the chat asks; the approval card shows the routine in full; approved, it exists', async () => {
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/');
  await s.script([
    { tool_calls: [{ name: 'create_routine', arguments: { name: 'orders', prompt: PROMPT, schedule: '0 7 * * *', tz: 'Europe/Lisbon' } }] },
    { text: 'Created the routine.' },
  ]);
  const sent = s.api('/_seed/api/messages', { method: 'POST', body: JSON.stringify({ text: 'Every morning, orders.' }) });
  const card = page.locator('article.approval .routine-request');
  await card.waitFor();
  assert.strictEqual(await card.locator('pre').textContent(), PROMPT); // every character, as text
  assert.match(await card.textContent(), /orders[\s\S]*0 7 \* \* \*[\s\S]*Europe\/Lisbon/);
  assert.strictEqual((await s.api('/_seed/api/routines')).body.routines.length, 0);
  await shots(page, 'routines-approval');
  await page.locator('article.approval:has(.routine-request) button', { hasText: 'Approve' }).click();
  assert.strictEqual((await sent).status, 200);
  assert.strictEqual((await s.api('/_seed/api/routines')).body.routines.length, 1);
});

test('the routine is listed with its schedule', async () => {
  await page.click('a[data-view="routines"]');
  await row().first().waitFor();
  assert.strictEqual(await row().count(), 1);
  const text = await row().textContent();
  assert.match(text, /orders/);
  assert.match(text, /0 7 \* \* \*/);
  assert.match(text, /Europe\/Lisbon/);
  assert.match(text, /not run yet/);
  assert.strictEqual(await page.textContent('#routines-count'), '1 of 20');
  assert.ok(await page.isVisible('#jobs-empty'));
  await shots(page, 'routines');
});

test('Run now: the report comes to the chat as the routine\'s, and is under Runs', async () => {
  await s.script([{ text: 'Twelve orders yesterday, two more than the day before.' }]);
  await row().locator('button', { hasText: 'Run now' }).click();
  await waitUntil(async () => /reported/.test(await row().locator('.row-sub').textContent()), { what: 'the run' });
  await row().locator('button', { hasText: 'Runs' }).click();
  const run = row().locator('.runs li.run');
  await run.first().waitFor();
  assert.strictEqual(await run.first().getAttribute('data-outcome'), 'reported');
  assert.match(await run.first().textContent(), /Twelve orders yesterday/);
  await shots(page, 'routines-runs');
  await page.click('a[data-view="chat"]');
  const report = page.locator('li.message.from-routine');
  await report.waitFor();
  assert.strictEqual(await report.locator('.who').textContent(), 'Routine');
  assert.match(await report.textContent(), /Routine “orders” reports:[\s\S]*Twelve orders yesterday/);
  await shots(page, 'routines-chat-report');
});

test('Pause and Resume', async () => {
  await page.click('a[data-view="routines"]');
  await row().first().waitFor();
  await row().locator('button', { hasText: 'Pause' }).click();
  await row().locator('.badge[data-state="paused"]').waitFor();
  assert.strictEqual((await s.api('/_seed/api/routines')).body.routines[0].paused, true);
  await row().locator('button', { hasText: 'Resume' }).click();
  await row().locator('.badge[data-state="paused"]').waitFor({ state: 'detached' });
  assert.strictEqual((await s.api('/_seed/api/routines')).body.routines[0].paused, false);
});

test('Delete asks first, then the routine is gone', async () => {
  await row().locator('button', { hasText: 'Delete' }).click();
  await page.locator('#confirm[open]').waitFor();
  assert.match(await page.textContent('#confirm-title'), /orders/);
  await page.click('#confirm-cancel');
  assert.strictEqual((await s.api('/_seed/api/routines')).body.routines.length, 1);
  await row().locator('button', { hasText: 'Delete' }).click();
  await page.locator('#confirm[open]').waitFor();
  await page.click('#confirm-ok');
  await page.locator('#routines-empty').waitFor();
  assert.strictEqual(await row().count(), 0);
  assert.strictEqual((await s.api('/_seed/api/routines')).body.routines.length, 0);
});

test('no page errors and no CSP violations', () => {
  assert.deepStrictEqual(problems, []);
});
