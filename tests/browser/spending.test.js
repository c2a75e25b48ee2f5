// The Spending screen in headless Chromium against a real Seed whose model
// is the scripted server: this month's spend by purpose and by day, calls of
// unknown cost counted apart (the scripted model reports none and has no
// price), a budget set in the form (a bad one is refused with the kernel's
// message and changes nothing), the budget reached pausing autonomous work
// and saying so once in the chat as the kernel, and no budget again.
// Screenshots in tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const { TestSeed, launch, shots, waitUntil } = require('./lib.js');

let s, browser, context, page;
const problems = []; // uncaught page errors and CSP violations

async function say(text, usage) {
  await s.script([{ text: 'noted', usage }]);
  const r = await s.api('/_seed/api/messages', { method: 'POST', body: JSON.stringify({ text }) });
  assert.strictEqual(r.status, 200, JSON.stringify(r.body));
}

before(async () => {
  s = await TestSeed.start('spendtest', { scripted: true });
  browser = await launch();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('pageerror', (err) => problems.push('page error: ' + err));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content.Security.Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
  });
  await say('hello', { input_tokens: 1200, output_tokens: 80, cost: 0.03 });
  await say('and you?', { input_tokens: 300, output_tokens: 20 }); // no cost, no price: unknown
});

after(async () => {
  if (browser) await browser.close();
  if (s) s.close();
});

test('this month by purpose and by day, unknown costs counted apart', async () => {
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/');
  await page.click('a[data-view="spending"]');
  await page.waitForFunction(() => document.querySelector('#spend-total') &&
    document.querySelector('#spend-total').textContent === '$0.03');
  const month = new Date().toISOString().slice(0, 7);
  assert.strictEqual(await page.textContent('#spend-month'), month + ' (UTC)');
  assert.strictEqual(await page.textContent('#spend-budget-shown'), 'none');
  assert.strictEqual(await page.textContent('#spend-unknown'), '1');
  assert.strictEqual(await page.textContent('#spend-calls'), '2');
  const chat = page.locator('#spend-by-purpose tr[data-purpose="chat"] td');
  assert.deepStrictEqual(await chat.allTextContents(), ['Chat', '2', '1,500', '100', '$0.03', '1 call of unknown cost']);
  const today = new Date().toISOString().slice(0, 10);
  const day = page.locator(`#spend-by-day tr[data-day="${today}"] td`);
  assert.strictEqual(await day.nth(2).textContent(), '$0.03');
  assert.strictEqual(await day.nth(4).textContent(), '1 call of unknown cost');
  assert.ok(await page.isHidden('#spend-paused'));
  await shots(page, 'spending');
});

test('a bad budget is refused with the kernel\'s message and changes nothing', async () => {
  for (const bad of ['-5', 'ten dollars', '2000000']) {
    await page.fill('#spend-budget', bad);
    await page.click('#spend-save');
    await page.locator('#spend-error').waitFor();
    assert.match(await page.textContent('#spend-error'), /budget_usd.*1000000/);
    assert.strictEqual((await s.api('/_seed/api/spend')).body.budget_usd, null);
  }
  assert.strictEqual(await page.textContent('#spend-budget-shown'), 'none');
});

test('reaching the budget pauses autonomous work and the chat says so once, as the kernel', async () => {
  await page.fill('#spend-budget', '0.02');
  await page.click('#spend-save');
  await page.waitForFunction(() => document.querySelector('#spend-budget-shown').textContent === '$0.02');
  assert.ok(await page.isHidden('#spend-error'));
  assert.match(await page.textContent('#spend-paused'), /routines, diagnosis and automatic fixes are paused/);
  assert.strictEqual(await page.getAttribute('#spend-meter', 'max'), '0.02');
  await shots(page, 'spending-over-budget');
  // A second save does not say it again.
  await page.click('#spend-save');
  await page.click('a[data-view="chat"]');
  const notice = page.locator('li.message.from-kernel');
  await notice.waitFor();
  assert.strictEqual(await notice.count(), 1);
  assert.strictEqual(await notice.locator('.who').textContent(), 'Kernel');
  assert.match(await notice.locator('.text').textContent(), /^Kernel notice: .*\$0\.02/);
  const api = (await s.api('/_seed/api/messages')).body.messages.filter((m) => m.role === 'kernel');
  assert.strictEqual(api.length, 1);
  await shots(page, 'spending-chat-notice');
});

test('no budget: nothing is paused', async () => {
  await page.click('a[data-view="spending"]');
  await page.waitForFunction(() => !document.querySelector('#spend-paused').hidden);
  await page.click('#spend-clear');
  await page.waitForFunction(() => document.querySelector('#spend-budget-shown').textContent === 'none');
  assert.ok(await page.isHidden('#spend-paused'));
  assert.strictEqual(await page.inputValue('#spend-budget'), '');
  assert.strictEqual((await s.api('/_seed/api/spend')).body.budget_usd, null);
});

test('no page errors and no CSP violations', () => {
  assert.deepStrictEqual(problems, []);
});
