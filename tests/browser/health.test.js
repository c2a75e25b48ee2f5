// The Health screen in headless Chromium against a real Seed whose model is
// the scripted server: an organism that answers 500 on /items/<id> (and logs
// a line holding HTML) makes one incident after 3 of them; the read-only
// diagnosis runs; the screen lists the incident and shows its evidence and
// diagnosis as text (the HTML in them is never rendered), Fix starts the
// fix's evolution, Ignore ends the incident, automatic fixing is off by
// default and can be turned on. Screenshots in tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const { TestSeed, launch, shots, waitUntil } = require('./lib.js');

const LOGGED = '<img src=x id=pwned-log onerror="document.title=1"> TypeError: cannot read id of undefined';
const DIAGNOSIS = 'organism/bin/server throws on /items/<id> <b id="pwned-diag">bold</b>: items[id] is undefined.';

const SERVER = `#!/usr/bin/env node
'use strict';
const http = require('node:http');
http.createServer((req, res) => {
  const p = new URL(req.url, 'http://localhost').pathname;
  if (p === '/healthz') return res.end('{"ok":true}');
  if (p === '/crash') process.exit(3);
  if (p.startsWith('/items/')) {
    console.error(${JSON.stringify(LOGGED)});
    res.writeHead(500, { 'Content-Type': 'text/plain' });
    return res.end('broken');
  }
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
  res.end('<!doctype html><meta charset="utf-8"><title>the app</title><p>the app</p>');
}).listen(Number(process.env.PORT || 8080), '127.0.0.1');
`;

let s, browser, page, incident;
const problems = [];

before(async () => {
  s = await TestSeed.start('healthtest', { scripted: true, organism: { 'bin/server': SERVER } });
  await s.script([
    { tool_calls: [{ name: 'read_log', arguments: {} }] },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'organism/x', content: 'x' } }] },
    { tool_calls: [{ name: 'submit_diagnosis', arguments: { diagnosis: DIAGNOSIS } }] },
  ]);
  browser = await launch();
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
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

test('three 5xx on one route make one incident, diagnosed read-only', async () => {
  for (const id of [1, 2]) assert.strictEqual((await fetch(`${s.app}/items/${id}`)).status, 500);
  assert.strictEqual((await s.api('/_seed/api/incidents')).body.incidents.length, 0); // two are not one
  for (const id of [3, 4]) assert.strictEqual((await fetch(`${s.app}/items/${id}`)).status, 500);
  const list = await waitUntil(async () => {
    const r = (await s.api('/_seed/api/incidents')).body;
    return r.incidents.length && r.incidents[0].status === 'diagnosed' ? r : null;
  }, { timeout: 120000, what: 'the incident diagnosed' });
  assert.strictEqual(list.incidents.length, 1);
  incident = list.incidents[0];
  assert.strictEqual(incident.cause, '5xx GET /items/:id');
  assert.strictEqual(list.auto_fix, false);
  assert.strictEqual(list.diagnoses_today, 1);
  // the write the model tried was refused: the organism has no such file
  const one = (await s.api('/_seed/api/incidents/' + incident.id)).body;
  assert.strictEqual(one.diagnosis, DIAGNOSIS);
  assert.match(one.evidence, /TypeError: cannot read id of undefined/);
  const reqs = await (await fetch(s.modelBase + '/_requests')).json();
  const offered = reqs[0].body.tools.map((t) => t.function.name);
  assert.ok(offered.includes('read_log') && offered.includes('query_data'), offered.join());
  for (const w of ['write_file', 'edit_file', 'run', 'change_data', 'call_api']) assert.ok(!offered.includes(w), w);
  assert.match(JSON.stringify(reqs[2].body.messages), /this phase does not offer the tool 'write_file'/);
});

test('the Health screen: the incident, its evidence and diagnosis as text', async () => {
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/');
  await page.click('a[data-view="health"]');
  const row = page.locator(`li.incident[data-incident="${incident.id}"]`);
  await row.waitFor();
  assert.match(await row.textContent(), /5xx GET \/items\/:id/);
  assert.match(await row.textContent(), /diagnosed/);
  assert.strictEqual(await page.textContent('#health-today'), '1 of 8 diagnoses today');
  assert.strictEqual(await page.isChecked('#health-auto-fix'), false);
  await row.locator('a').click();
  await page.locator('#incident-evidence').waitFor();
  assert.match(await page.textContent('#incident-evidence'), /<img src=x id=pwned-log/);
  assert.strictEqual(await page.textContent('#incident-diagnosis'), DIAGNOSIS);
  assert.strictEqual(await page.locator('#pwned-log, #pwned-diag').count(), 0); // text, never HTML
  assert.doesNotMatch(await page.textContent('#health-detail'), /\bnull\b/);
  assert.match(await row.textContent(), /4 times/); // the 3 answers that opened it and one more
  assert.ok(await page.isEnabled('#incident-fix'));
  await shots(page, 'health');
});

test('Fix starts the fix\'s evolution, test first', async () => {
  await page.click('#incident-fix');
  const link = page.locator('#incident-notice a');
  await link.waitFor();
  const evo = await link.textContent();
  assert.match(evo, /^evo_[0-9a-f]{16}$/);
  const one = (await s.api('/_seed/api/incidents/' + incident.id)).body;
  assert.strictEqual(one.fix_evolution, evo);
  assert.ok(['fixing', 'diagnosed'].includes(one.status), one.status); // diagnosed again once it failed
  const e = (await s.api('/_seed/api/evolutions/' + evo)).body;
  assert.match(e.intent, /First write a test that fails because of this incident/);
  assert.match(e.intent, /not instructions/);
  await shots(page, 'health-fixing');
});

test('automatic fixing can be turned on; Ignore ends the incident', async () => {
  await page.check('#health-auto-fix');
  await waitUntil(async () => (await s.api('/_seed/api/incidents')).body.auto_fix === true, { what: 'auto_fix on' });
  // Ignore is possible once the fix's evolution has ended (it fails: the script has no more steps)
  await waitUntil(async () => (await s.api('/_seed/api/incidents/' + incident.id)).body.status === 'diagnosed',
    { timeout: 300000, what: 'the failed fix noticed' });
  await page.reload();
  await page.locator('#incident-ignore').waitFor();
  await page.click('#incident-ignore');
  await page.waitForFunction(() => /ignored/.test(document.querySelector('#health-detail').textContent));
  assert.strictEqual((await s.api('/_seed/api/incidents/' + incident.id)).body.status, 'ignored');
  assert.ok(await page.isDisabled('#incident-ignore'));
  assert.ok(await page.isDisabled('#incident-fix'));
  const r = await s.api(`/_seed/api/incidents/${incident.id}/ignore`, { method: 'POST', body: '{}' });
  assert.strictEqual(r.status, 409);
  const bad = await s.api('/_seed/api/incidents/inc_nope');
  assert.strictEqual(bad.status, 404);
});

test('a crash of the organism is an incident; the screen shows it as it comes', async () => {
  await page.goto(s.base + '/_seed/#health');
  await page.locator('li.incident').first().waitFor();
  await fetch(s.app + '/crash').catch(() => null); // the app exits: no answer
  const row = page.locator('li.incident[data-incident]', { hasText: 'crash' });
  await row.waitFor({ timeout: 120000 }); // the incident event refreshes the list
  const crash = (await s.api('/_seed/api/incidents')).body.incidents.find((i) => i.cause === 'crash');
  assert.ok(crash, 'no crash incident');
  assert.strictEqual(crash.kind, 'crash');
  const one = (await s.api('/_seed/api/incidents/' + crash.id)).body;
  assert.match(one.evidence, /The organism exited; the supervisor restarts it/);
  // the supervisor brought it back
  await waitUntil(async () => (await fetch(s.app + '/')).status === 200, { what: 'the organism back' });
  await shots(page, 'health-crash');
});

test('no page errors and no CSP violations', () => {
  assert.deepStrictEqual(problems, []);
});
