// The owner's first hour, in headless Chromium, against a real Seed started
// without a model key (its scripted model's api_key_env names a variable
// that is not passed): `seed run` says so in one line; the control plane
// shows the no-model banner, and Evolve and Send say why they cannot work;
// a key lent in the banner reaches the scripted model; Settings → Mind lists
// the models that take tools and probes a choice before keeping it; the
// settings read as words; after a restart the lent key is gone (the banner
// is back) and the choice stays. Screenshots in tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const crypto = require('node:crypto');
const { TestSeed, launch, shots, waitUntil } = require('./lib.js');

const KEY_ENV = 'BROWSER_TEST_MODEL_KEY';
const KEY = 'sk-lent-browser-' + crypto.randomBytes(12).toString('hex');
const KEY_SHA = crypto.createHash('sha256').update(KEY).digest('hex');
const NO_KEY = `No model key: the Seed cannot think yet. Start it with -e ${KEY_ENV} (or lend a key in Settings).`;

let s, browser, context, page;
const problems = []; // uncaught page errors and CSP violations

async function requests() {
  const r = await fetch(s.modelBase + '/_requests');
  return r.json();
}

before(async () => {
  s = await TestSeed.start('mindtest', { scripted: true, keyEnv: KEY_ENV });
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

test('seed run says in one line that the Seed cannot think yet, naming the variable', () => {
  const lines = s.startOutput.split('\n').filter((l) => /model key/i.test(l));
  assert.deepStrictEqual(lines, [NO_KEY], s.startOutput);
});

test('the no-model banner; Evolve and Send say why instead of failing', async () => {
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/');
  // The header shows the Seed's name and the model it would think with.
  await page.waitForFunction(() => document.querySelector('#seed-name').textContent === 'mindtest');
  await page.waitForFunction(() => document.querySelector('#mind-state').dataset.ready === 'no');
  assert.strictEqual(await page.textContent('#mind-model'), 'scripted');
  const banner = page.locator('#no-mind');
  await banner.waitFor();
  assert.match(await banner.textContent(), new RegExp(`-e ${KEY_ENV}`));
  assert.match(await banner.textContent(), /until the Seed restarts/);
  assert.strictEqual(await page.getAttribute('#lend-key', 'type'), 'password');
  assert.strictEqual(await page.inputValue('#lend-provider'), 'openai-compatible');
  assert.ok(await page.isDisabled('#evolve-button'));
  assert.ok(await page.isDisabled('#send-button'));
  assert.match(await page.textContent('#composer-why'), new RegExp(KEY_ENV));
  // The API refuses too, and creates nothing.
  const evo = await s.api('/_seed/api/evolutions', { method: 'POST', body: JSON.stringify({ intent: 'Anything' }) });
  assert.strictEqual(evo.status, 409);
  assert.strictEqual(evo.body.error, NO_KEY);
  const msg = await s.api('/_seed/api/messages', { method: 'POST', body: JSON.stringify({ text: 'hi' }) });
  assert.strictEqual(msg.status, 409);
  assert.deepStrictEqual((await s.api('/_seed/api/evolutions')).body.evolutions, []);
  assert.deepStrictEqual(await requests(), []); // nothing reached the model
  await shots(page, 'mind-no-key');
});

test('lend a key: the banner goes, and an evolution reaches the scripted model with it', async () => {
  await page.fill('#lend-key', KEY);
  await page.click('#lend-button');
  await page.locator('#no-mind').waitFor({ state: 'hidden' });
  await page.waitForFunction(() => document.querySelector('#mind-state').dataset.ready === 'yes');
  assert.strictEqual(await page.inputValue('#lend-key'), ''); // not left in the page
  assert.ok(!(await page.content()).includes(KEY));
  assert.ok(!(await page.isDisabled('#evolve-button')));
  assert.strictEqual(await page.isVisible('#composer-why'), false);
  // An evolution: planned, then the provider refuses the next call, so it
  // fails; its card shows the failure (not "Queued.") on a red bar.
  await s.script([
    { tool_calls: [{ name: 'submit_plan', arguments: { title: 'Say hello', scope: 'hello', summary: 'Greet.', steps: ['greet'] } }] },
    { http_error: 400, body: { error: { message: 'scripted refusal', code: 400 } } },
  ]);
  await page.fill('#composer-text', 'Say hello');
  await page.click('#evolve-button');
  const card = page.locator('.live-evo[data-state="failed"]');
  await card.waitFor({ timeout: 180000 });
  await page.waitForFunction(() => /scripted refusal/.test(document.querySelector('.live-evo[data-state="failed"] .last-step').textContent),
    null, { timeout: 30000 });
  assert.doesNotMatch(await card.locator('.last-step').textContent(), /Queued/);
  assert.strictEqual(await card.locator('.progress').getAttribute('data-state'), 'failed');
  const reqs = (await requests()).filter((r) => r.method === 'POST');
  assert.ok(reqs.length >= 2, JSON.stringify(reqs.map((r) => r.path)));
  for (const r of reqs) assert.strictEqual(r.auth.authorization.sha256, KEY_SHA);
  await shots(page, 'mind-lent');
});

test('choose a model: the tool-capable list, and a probe before it is kept', async () => {
  await page.click('a[data-view="settings"]');
  const cardEl = page.locator('#mind-card');
  await cardEl.locator('dd', { hasText: 'lent in the control plane, until the Seed restarts' }).waitFor();
  await page.waitForFunction(() => document.querySelectorAll('#mind-models option').length === 2, null, { timeout: 30000 });
  const ids = await page.$$eval('#mind-models option', (os) => os.map((o) => o.value));
  assert.deepStrictEqual(ids, ['scripted', 'scripted-large']); // not the one without tools
  assert.match(await page.textContent('#mind-models-note'), /2 models of openai-compatible that can use tools/);
  const list = (await requests()).filter((r) => r.method === 'GET');
  assert.strictEqual(list.length, 1);
  assert.strictEqual(list[0].auth.authorization.sha256, KEY_SHA);
  // A model without tools fails its check, verbatim, and is not kept.
  await s.script([]);
  await page.fill('#mind-model-input', 'scripted-no-tools');
  await page.click('#mind-choose');
  await page.locator('#mind-error', { hasText: 'No endpoints found that support tool use' }).waitFor({ timeout: 60000 });
  assert.strictEqual(await page.textContent('#mind-model'), 'scripted');
  // One that answers the probe is kept, and the header says so.
  await s.script([{ text: 'ready', match: 'connection check' }]);
  await page.fill('#mind-model-input', 'scripted-large');
  await page.click('#mind-choose');
  await page.locator('#mind-notice', { hasText: 'Now thinking with scripted-large' }).waitFor({ timeout: 60000 });
  await page.waitForFunction(() => document.querySelector('#mind-model').textContent === 'scripted-large');
  assert.strictEqual(await page.isVisible('#mind-error'), false);
  const probe = (await requests()).find((r) => r.method === 'POST');
  assert.strictEqual(probe.body.model, 'scripted-large');
  assert.strictEqual(probe.body.tools.length, 1);
  assert.strictEqual(probe.auth.authorization.sha256, KEY_SHA);
  await shots(page, 'settings-mind');
});

test('the settings read as words', async () => {
  await page.locator('#status-facts dt', { hasText: 'Organism' }).waitFor();
  const status = await page.$$eval('#status-facts dt', (dts) => Object.fromEntries(dts.map((dt) => [dt.textContent,
    dt.nextElementSibling.textContent])));
  assert.strictEqual(status.Organism, 'Running');
  assert.match(status.Kernel, /^pid \d+, up \d+ (s|min)/);
  assert.match(status.Address, /^http:\/\/127\.0\.0\.1:\d+\/$/);
  assert.match(status.Mind, /^scripted-large via openai-compatible$/);
  await page.locator('#settings-config dt', { hasText: 'Key variable' }).waitFor();
  const text = await page.textContent('#view-settings');
  for (const raw of [/Uptime seconds/i, /Api key env/i, /\bUrl\b/, /state running/, /\btrue\b|\bfalse\b/]) {
    assert.doesNotMatch(text, raw);
  }
  assert.match(text, /External database\s*no/);
  assert.match(text, /Dangerous actions\s*asked first/);
  assert.ok(!text.includes(KEY));
  await shots(page, 'settings-readable');
});

test('after a restart the lent key is gone, the banner is back, and the choice stays', async () => {
  const out = await s.restart();
  assert.ok(out.includes(NO_KEY), out);
  await page.reload();
  await page.locator('#no-mind').waitFor({ timeout: 60000 });
  await page.waitForFunction(() => document.querySelector('#mind-state').dataset.ready === 'no');
  assert.strictEqual(await page.textContent('#mind-model'), 'scripted-large');
  const mind = await s.api('/_seed/api/mind');
  assert.strictEqual(mind.body.key_source, 'none');
  assert.strictEqual(mind.body.model, 'scripted-large');
  assert.strictEqual(mind.body.chosen, true);
  assert.ok(!JSON.stringify(mind.body).includes(KEY));
  assert.ok(await page.isDisabled('#evolve-button'));
  await shots(page, 'mind-after-restart');
  assert.deepStrictEqual(problems, []);
});
