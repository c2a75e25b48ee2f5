// The Roadmap screen in headless Chromium against a real Seed whose model is
// the scripted server: an evolution whose plan declares a goal in stages
// (one stage's text is hostile HTML) goes live; the screen shows the
// kernel's knowledge/roadmap.md through md.js (stage 1 ticked, the HTML as
// text, nothing run) and what is next; its Continue button starts the next
// stage's evolution and opens it, and is disabled while that stage runs.
// Screenshots in tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const { TestSeed, httpJson, launch, shots, waitUntil } = require('./lib.js');

const HOSTILE = 'Show <img src=x onerror="window.__pwned=1"> a list';
let s, browser, context, page;
const problems = []; // uncaught page errors and CSP violations

async function evolutionState(id) {
  const r = await s.api('/_seed/api/evolutions/' + id);
  return r.body.state;
}

before(async () => {
  s = await TestSeed.start('roadmaptest', { scripted: true });
  browser = await launch();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('pageerror', (err) => problems.push('page error: ' + err));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content.Security.Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
  });
  await s.script([
    { tool_calls: [{ name: 'submit_plan', arguments: {
      title: 'A list, step by step', scope: 'list', summary: 'Stage 1: a note.', steps: ['write a note'],
      goal: 'Become a list app', stages: ['Write a note', HOSTILE] } }] },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'organism/NOTE.txt', content: 'stage 1\n' } }] },
    { tool_calls: [{ name: 'finish', arguments: { summary: 'A note.' } }] },
    { tool_calls: [{ name: 'submit_reflection', arguments: { notes: 'Stage 1.' } }] },
    { text: 'Done.' },
    // stage 2: held at its plan, so the screen can be seen while it runs
    { text: 'Planning.', hold: 'stage2' },
  ]);
  const r = await s.api('/_seed/api/evolutions', { method: 'POST', body: JSON.stringify({ intent: 'Become a list app' }) });
  assert.strictEqual(r.status, 202, JSON.stringify(r.body));
  await waitUntil(async () => (await evolutionState(r.body.id)) === 'complete', { timeout: 600000, what: 'stage 1' });
});

after(async () => {
  if (browser) await browser.close();
  if (s) s.close();
});

test('the roadmap shows as Markdown text, stage 1 ticked, and what is next', async () => {
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/');
  await page.click('a[data-view="roadmap"]');
  await page.waitForFunction(() => document.querySelector('#roadmap-doc li'));
  const items = await page.locator('#roadmap-doc li').allTextContents();
  assert.deepStrictEqual(items, ['[x] Stage 1: Write a note', '[ ] Stage 2: ' + HOSTILE]);
  assert.strictEqual(await page.locator('#roadmap-doc img').count(), 0);
  assert.match(await page.textContent('#roadmap-doc'), /Goal: Become a list app/);
  assert.match(await page.textContent('#roadmap-status'), /Next: stage 2/);
  assert.ok(await page.isEnabled('#roadmap-continue'));
  assert.strictEqual(await page.evaluate(() => window.__pwned), undefined);
  await shots(page, 'roadmap');
});

test('Continue starts the next stage, opens it, and is disabled while it runs', async () => {
  await page.click('#roadmap-continue');
  await page.waitForURL((u) => u.hash.startsWith('#evolution/evo_'));
  const id = decodeURIComponent(new URL(page.url()).hash.slice('#evolution/'.length));
  const e = (await s.api('/_seed/api/evolutions/' + id)).body;
  assert.strictEqual(e.roadmap_stage, 1);
  assert.match(e.intent, /This evolution does stage 2/);
  await page.click('a[data-view="roadmap"]');
  await page.waitForFunction(() => /under way/.test(document.querySelector('#roadmap-status').textContent));
  assert.ok(await page.isDisabled('#roadmap-continue'));
  await shots(page, 'roadmap-running');
  await s.api('/_seed/api/evolutions/' + id + '/cancel', { method: 'POST', body: '{}' });
  await httpJson(s.modelBase + '/_release', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'stage2' }),
  });
  await waitUntil(async () => ['cancelled', 'failed'].includes(await evolutionState(id)), { what: 'stage 2 to end' });
  assert.deepStrictEqual(problems, []);
});
