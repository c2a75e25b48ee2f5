// The preview before apply in a real browser: an evolution's candidate waits
// in a preview; the control plane shows the preview bar; "Open the preview"
// opens the app in a new tab where the owner's browser sees the candidate,
// while another browser keeps seeing the live app; "Leave preview" returns
// that tab to the live app; Apply makes it live for everyone. Screenshots in
// tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { TestSeed, launch, waitUntil, OUT } = require('./lib.js');

// The candidate's page title (the starter's own test checks its body).
const MARKER = 'The candidate ' + Math.random().toString(16).slice(2, 10);
const STARTER = '<title>A new Seed</title>';

let s, browser, owner, page, other;
const problems = [];

before(async () => {
  s = await TestSeed.start('previewui', { scripted: true });
  const r = await s.api('/_seed/api/evolution-settings', { method: 'POST', body: JSON.stringify({ preview: true }) });
  assert.strictEqual(r.status, 200);
  browser = await launch();
  owner = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await owner.newPage();
  page.on('pageerror', (err) => problems.push('page error: ' + err));
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/');
  other = await (await browser.newContext()).newPage();
});

after(async () => {
  if (browser) await browser.close();
  if (s) s.close();
});

test('the preview bar, the candidate for the owner only, apply', async () => {
  const starter = fs.readFileSync(path.join(__dirname, '..', '..', 'organism', 'bin', 'server'), 'utf8');
  assert.ok(starter.includes(STARTER));
  await s.script([
    { tool_calls: [{ name: 'submit_plan', arguments: { title: 'Greet', scope: 'greeting', summary: 'A greeting.',
      steps: ['edit organism/bin/server'] } }] },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'organism/bin/server', content: starter.replace(STARTER, '<title>' + MARKER + '</title>') } }] },
    { tool_calls: [{ name: 'finish', arguments: { summary: 'Greets.' } }] },
    { tool_calls: [{ name: 'submit_reflection', arguments: { notes: 'Nothing.' } }] },
  ]);
  const r = await s.api('/_seed/api/evolutions', { method: 'POST', body: JSON.stringify({ intent: 'Greet visitors' }) });
  assert.strictEqual(r.status, 202, JSON.stringify(r.body));
  const bar = page.locator('#preview-bar');
  await bar.waitFor({ state: 'visible', timeout: 600000 });
  assert.match(await bar.textContent(), /copy of your live data/);
  await bar.screenshot({ path: path.join(OUT, 'preview-bar.png') });

  // The owner's new tab: the candidate.
  const [tab] = await Promise.all([owner.waitForEvent('page'), page.click('#preview-open')]);
  await tab.waitForLoadState();
  await waitUntil(async () => (await tab.title()) === MARKER, { timeout: 30000, what: 'the candidate' });
  await tab.screenshot({ path: path.join(OUT, 'preview-candidate.png') });
  const appOrigin = new URL(tab.url()).origin;
  // Another browser: the live app.
  await other.goto(appOrigin + '/');
  assert.strictEqual(await other.title(), 'A new Seed');
  // Leave preview: that tab sees the live app again.
  await tab.goto(appOrigin + '/_seed/preview/leave');
  assert.strictEqual(await tab.title(), 'A new Seed');

  // Apply: live for everyone.
  await page.click('#preview-apply');
  await bar.waitFor({ state: 'hidden', timeout: 30000 });
  await waitUntil(async () => {
    await other.goto(appOrigin + '/');
    return (await other.title()) === MARKER;
  }, { timeout: 300000, what: 'the candidate live' });
  assert.deepStrictEqual(problems, []);
});
