// The owner's own commits on main, in the control plane: a commit that does
// not build shows as a banner saying what failed and how to revert, while the
// live generation keeps serving; a good one becomes a generation marked as
// the owner's. Screenshots in tests/browser/out/ (owner-change,
// generations-owner).
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const { TestSeed, launch, shots, waitUntil, httpJson } = require('./lib.js');

let s, browser, page;
const problems = [];

before(async () => {
  s = await TestSeed.start('ownertest');
  browser = await launch();
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('pageerror', (err) => problems.push('page error: ' + err));
});

after(async () => {
  if (browser) await browser.close();
  if (s) s.close();
});

async function appAnswers() {
  return (await httpJson(s.app + '/')).status === 200;
}

test('a commit that does not build: the banner says why and how to revert; generation 1 serves', async () => {
  const mine = s.ownerCommit({ 'organism/bin/server': (t) => t + '\nthis is not javascript (\n' }, 'Break the build');
  await s.restart();
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/');
  const banner = page.locator('#owner-change', { hasText: 'was not applied: the build failed' });
  await banner.waitFor({ timeout: 600000 });
  const text = await banner.textContent();
  assert.ok(text.startsWith(`Your commit ${mine.slice(0, 7)} 'Break the build' was not applied`), text);
  assert.match(text, /Generation 1 keeps serving\./);
  assert.ok(text.includes(`git -C ${s.dir} reset --hard seed/gen-1`), text);
  assert.ok(await appAnswers(), 'generation 1 does not answer at /');
  await shots(page, 'owner-change');
});

test('reverted, then a good commit: a generation marked as the owner\'s, no banner', async () => {
  s.ownerGit('reset', '-q', '--hard', 'seed/gen-1');
  const mine = s.ownerCommit({ 'knowledge/owner-note.md': '# A note\n\nWritten by the owner.\n' }, 'Add a note');
  await s.restart();
  await page.goto(s.base + '/_seed/#generations');
  const row = page.locator('#generation-list li[data-generation="2"]');
  await waitUntil(async () => {
    await page.click('a[data-view="generations"]');
    return (await row.locator('.badge.owner').count()) === 1;
  }, { timeout: 600000, what: 'generation 2, the owner\'s' });
  assert.match(await row.textContent(), /owner: Add a note/);
  assert.strictEqual(await row.locator('.badge.owner').getAttribute('title'), 'your own commit ' + mine.slice(0, 10));
  assert.strictEqual(await page.locator('#generation-list li.current').getAttribute('data-generation'), '2');
  await page.waitForFunction(() => document.querySelector('#owner-change').hidden, null, { timeout: 60000 });
  await shots(page, 'generations-owner');
  assert.deepStrictEqual(problems, []);
});
