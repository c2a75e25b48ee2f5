// The control plane end to end in headless Chromium, against a real Seed
// whose model is the scripted model server: sign in with a link, chat, start
// an evolution and watch its progress live, approve its write to a protected
// path on the approval card, see generation 2 at /, read what it learned in
// the knowledge and skills viewers, look at logs and settings, roll back
// (with confirmation) and sign out. Every screen is kept as a screenshot in
// tests/browser/out/, at desktop and at phone width.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { TestSeed, launch, shots, waitUntil, httpJson, OUT } = require('./lib.js');

const MARKER = 'Generation two greets you ' + Math.random().toString(16).slice(2, 10);
const NOTE = 'A protected root file.\nWritten only with the owner\'s approval.\n';
const HOSTILE = '# Greeting\n\nThe page now says *hello*. See [the site](https://example.com/docs).\n\n' +
  '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>\n\n' +
  '[click me](javascript:window.__pwned=3)\n\n- one\n- two\n\n```\ncode <b>here</b>\n```\n';

const PASSWORD = 'correct horse ' + Math.random().toString(16).slice(2, 10);

let s, browser, context, page, token;
const problems = []; // uncaught page errors and CSP violations

function evolutionScript(server) {
  return [
    { tool_calls: [{ name: 'submit_plan', arguments: {
      title: 'Greet from generation two', scope: 'greeting',
      summary: 'Add a greeting to the page and leave a note at the root.',
      steps: ['edit organism/bin/server', 'write NOTES.md (needs approval)'], risks: ['none'] } }] },
    // A pause, so the progress of a running evolution can be seen.
    { tool_calls: [{ name: 'write_file', arguments: { path: 'organism/bin/server', content: server } }], delay_ms: 2500 },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'NOTES.md', content: NOTE } }] },
    { tool_calls: [{ name: 'finish', arguments: { summary: 'The page greets; NOTES.md written.' } }] },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'knowledge/greeting.md', content: HOSTILE } }] },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'skills/greeting/SKILL.md', content:
      '---\nname: Greeting\ndescription: How the page greets visitors\n---\n# Greeting\n\n1. Edit `organism/bin/server`.\n2. Run the tests.\n' } }] },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'knowledge/self.yaml', content:
      'slug: uitest\nname: Fern\ntagline: I greet people.\naccent: "#8a3ffc"\npurpose: Greet visitors.\n' } }] },
    { tool_calls: [{ name: 'submit_reflection', arguments: { notes: 'Learned how the page greets.' } }] },
    { text: 'Done.' },
  ];
}

async function organismText() {
  const res = await httpJson(s.app + '/');
  return res.status === 200 ? String(res.body) : '';
}

before(async () => {
  s = await TestSeed.start('uitest', { scripted: true, secrets: { SEED_OWNER_PASSWORD: PASSWORD } });
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

test('sign in with a one-time link', async () => {
  await page.goto(s.login());
  await page.waitForURL((u) => u.pathname === '/_seed/'); // "Signed in" moves on by itself
  token = await page.getAttribute('meta[name="seed-token"]', 'content');
  assert.match(token, /^[0-9a-f]{64}$/);
  // The identity (knowledge/self.yaml, named after the Seed when planted)
  // themes the page; the logo is an <img>.
  await page.waitForFunction(() => document.querySelector('#seed-name').textContent === 'uitest');
  await page.waitForFunction(() => {
    const img = document.querySelector('#logo');
    return !img.hidden && img.complete && img.naturalWidth > 0 && new URL(img.src).pathname === '/_seed/logo';
  });
  await page.waitForFunction(() => document.querySelector('#live').dataset.state === 'live');
  await page.waitForFunction(() => document.querySelector('#organism-state').textContent === 'running',
    null, { timeout: 120000 });
  assert.strictEqual(await page.textContent('#generation'), '1');
  assert.match(await page.textContent('#messages'), /What should I become\?/);
  await shots(page, 'chat-empty');
});

test('send a message and read the reply', async () => {
  await s.script([{ text: 'Hello! I am **new** here. What should I become?' }]);
  await page.fill('#composer-text', 'Hi Seed, who are you?');
  await page.click('#send-button');
  const reply = page.locator('.message.from-seed', { hasText: 'What should I become?' });
  await reply.waitFor({ timeout: 60000 });
  assert.strictEqual(await reply.locator('strong').textContent(), 'new'); // Markdown, rendered safely
  assert.strictEqual(await page.locator('.message.from-owner', { hasText: 'Hi Seed, who are you?' }).count(), 1);
  await shots(page, 'chat');
});

test('an evolution shows its progress live and stops at an approval card', async () => {
  const server = fs.readFileSync(path.join(s.dir, 'organism/bin/server'), 'utf8')
    .replace('<p>This is a new Seed.', `<p id="gen2">${MARKER}</p>\n  <p>This is a new Seed.`);
  assert.ok(server.includes(MARKER), 'the starter page changed: update this test');
  await s.script(evolutionScript(server));
  await page.fill('#composer-text', 'Greet visitors from generation two');
  await page.click('#evolve-button');
  // Progress while work runs: the live card follows the phases.
  const live = page.locator('.live-evo');
  await live.first().waitFor();
  await page.locator('.live-evo[data-state="mutating"]').waitFor({ timeout: 120000 });
  assert.match(await live.first().textContent(), /Greet from generation two/);
  await shots(page, 'evolution-progress');
  // The write outside the evolvable folders waits for the owner, shown in full.
  const card = page.locator('.approval', { hasText: 'NOTES.md' });
  await card.waitFor({ timeout: 120000 });
  assert.match(await card.locator('h2').textContent(), /dangerous/);
  assert.strictEqual(await card.locator('pre.value-text').textContent(), NOTE); // multi-line values keep every line
  assert.match(await card.textContent(), /write_file/);
  const shown = await card.locator('.request').innerText();
  for (const line of NOTE.trim().split('\n')) assert.ok(shown.includes(line), `the request is not shown in full: ${shown}`);
  await page.locator('.live-evo[data-state="needs_input"]').waitFor();
  await shots(page, 'approval');
});

test('approve it: the evolution completes and generation 2 is live at /', async () => {
  const card = page.locator('.approval', { hasText: 'NOTES.md' });
  await card.getByRole('button', { name: 'Approve' }).click();
  await card.locator('.decision', { hasText: 'Approved' }).waitFor();
  // The protected file makes the kernel restart into its new source: the
  // event stream drops and comes back, and the page catches up.
  await page.locator('.live-evo[data-state="complete"]').waitFor({ timeout: 300000 });
  await waitUntil(async () => (await organismText()).includes(MARKER), { timeout: 180000, what: 'generation 2 at /' });
  await waitUntil(async () => (await s.api('/_seed/api/status')).body.generation === 2, { timeout: 120000, what: 'status' });
  await page.waitForFunction(() => document.querySelector('#generation').textContent === '2', null, { timeout: 60000 });
  // The new self.yaml themes the page: name and accent.
  await page.waitForFunction(() => document.querySelector('#seed-name').textContent === 'Fern', null, { timeout: 60000 });
  const accent = await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue('--accent').trim());
  assert.strictEqual(accent, '#8a3ffc');
  await page.locator('.live-evo', { hasText: 'generation 2 is live' }).waitFor({ timeout: 30000 });
  await shots(page, 'evolution-complete');
  const organism = await context.newPage();
  await organism.goto(s.app + '/');
  assert.strictEqual(await organism.textContent('#gen2'), MARKER);
  await shots(organism, 'organism-generation-2');
  await organism.close();
});

test('the evolution detail shows plan, phases, checks, events and diff', async () => {
  await page.locator('.live-evo[data-state="complete"] a', { hasText: 'Details' }).first().click();
  await page.locator('#view-evolution .stepper').waitFor();
  const detail = page.locator('#evolution-detail');
  await detail.locator('.diff').waitFor({ timeout: 30000 });
  const text = await detail.textContent();
  for (const want of ['Plan', 'Add a greeting to the page', 'write NOTES.md (needs approval)', 'Phases', 'Checks', 'Events', 'Change']) {
    assert.ok(text.includes(want), `${want} missing from the detail`);
  }
  assert.ok(await detail.locator('.checks li.ok').count() >= 2, 'no passed checks');
  assert.strictEqual(await detail.locator('.checks li.bad').count(), 0);
  const diff = await detail.locator('.diff').textContent();
  assert.ok(diff.includes(MARKER) && diff.includes('NOTES.md') && diff.includes('organism/bin/server'), diff.slice(0, 500));
  assert.ok(await detail.locator('.diff .d-add').count() > 0);
  assert.ok(await detail.locator('.events li').count() > 10);
  await detail.locator('.events li[data-kind="approval"] summary').first().click();
  // app.js fills .ev-data on the toggle event: wait for the content, not the click.
  await detail.locator('.events li[data-kind="approval"] .ev-data', { hasText: 'NOTES.md' }).first().waitFor();
  assert.match(await page.textContent('.badge'), /complete/);
  await shots(page, 'evolution-detail');
  await page.click('a[data-view="evolutions"]');
  await page.locator('#evolution-list .row', { hasText: 'Greet from generation two' }).waitFor();
  await shots(page, 'evolutions');
});

test('knowledge and skills are shown as safe Markdown', async () => {
  await page.goto(s.base + '/_seed/#knowledge/greeting.md');
  const doc = page.locator('#knowledge-doc');
  await doc.locator('.md h3', { hasText: 'Greeting' }).waitFor();
  const text = await doc.textContent();
  assert.ok(text.includes('<img src=x onerror="window.__pwned=1">'), 'raw HTML is not shown as text');
  assert.ok(text.includes('<script>window.__pwned=2</script>'));
  assert.strictEqual(await doc.locator('img, script, iframe').count(), 0);
  assert.strictEqual(await doc.locator('a[href^="javascript"]').count(), 0);
  assert.strictEqual(await doc.locator('a', { hasText: 'click me' }).count(), 0);
  assert.strictEqual(await doc.locator('a', { hasText: 'the site' }).getAttribute('href'), 'https://example.com/docs');
  assert.strictEqual(await doc.locator('pre code').textContent(), 'code <b>here</b>');
  assert.strictEqual(await page.evaluate(() => window.__pwned), undefined);
  await page.locator('#knowledge-files a', { hasText: 'self.yaml' }).waitFor();
  await shots(page, 'knowledge');
  await page.click('#knowledge-files a:text-is("self.yaml")');
  await doc.locator('pre.source', { hasText: 'accent: "#8a3ffc"' }).waitFor();

  await page.click('a[data-view="skills"]');
  await page.locator('#skill-list a', { hasText: 'Greeting' }).click();
  const skill = page.locator('#skill-doc');
  await skill.locator('.md ol li code', { hasText: 'organism/bin/server' }).waitFor();
  assert.match(await skill.textContent(), /How the page greets visitors/);
  assert.doesNotMatch(await skill.locator('.md').textContent(), /description:/); // front matter is not the body
  await shots(page, 'skills');
});

test('logs and settings (sessions, usage, configuration without secrets)', async () => {
  await page.click('a[data-view="logs"]');
  await page.waitForFunction(() => !/^Loading/.test(document.querySelector('#log-lines').textContent));
  assert.match(await page.textContent('#log-lines'), /evolution|listening|kernel/i);
  await page.click('button[data-log="organism"]');
  await page.waitForFunction(() => !/^Loading/.test(document.querySelector('#log-lines').textContent));
  await shots(page, 'logs');

  await page.click('a[data-view="settings"]');
  await page.locator('#session-list .row', { hasText: 'This browser' }).waitFor();
  await page.locator('#settings-config dd', { hasText: 'openai-compatible' }).waitFor();
  await page.locator('#usage table td', { hasText: 'scripted' }).first().waitFor();
  await page.locator('#identity-facts dd', { hasText: 'Greet visitors.' }).waitFor();
  const settings = await page.textContent('#view-settings');
  assert.doesNotMatch(settings, /postgres(ql)?:\/\//i);
  assert.match(settings, /External database\s*no/);
  assert.match(settings, /seed\.localhost/);
  assert.match(settings, /its own origin/); // which layout is in force
  await shots(page, 'settings');
});

test('roll back to generation 1, after confirming', async () => {
  await page.click('a[data-view="generations"]');
  const row1 = page.locator('#generation-list li[data-generation="1"]');
  await row1.waitFor();
  assert.strictEqual(await page.locator('#generation-list li.current').getAttribute('data-generation'), '2');
  // Cancel first: nothing happens.
  await row1.getByRole('button', { name: 'Roll back to 1' }).click();
  await page.locator('#confirm[open]').waitFor();
  await shots(page, 'rollback-confirm', { fullPage: false });
  await page.click('#confirm-cancel');
  await page.locator('#confirm[open]').waitFor({ state: 'detached' }).catch(() => {});
  assert.strictEqual(await page.locator('#confirm[open]').count(), 0);
  assert.strictEqual(await page.locator('#generations-notice').isVisible(), false);
  // Then confirm.
  await s.script([{ text: 'unused' }]);
  await row1.getByRole('button', { name: 'Roll back to 1' }).click();
  await page.click('#confirm-ok');
  await page.locator('#generations-notice', { hasText: 'Rolling back to generation 1' }).waitFor();
  await waitUntil(async () => {
    const text = await organismText();
    return text.includes("I don't have a purpose yet") && !text.includes(MARKER);
  }, { timeout: 240000, what: 'generation 1 at / again' });
  await page.locator('#generation-list li.current[data-generation="3"]').waitFor({ timeout: 120000 });
  await page.waitForFunction(() => document.querySelector('#seed-name').textContent === 'uitest', null, { timeout: 60000 });
  await shots(page, 'generations');
});

test('sign out', async () => {
  const cookie = (await context.cookies()).find((c) => c.name.startsWith('seed_'));
  assert.ok(cookie, 'no session cookie');
  await page.click('a[data-view="settings"]');
  await page.click('#sign-out');
  await page.waitForFunction(() => /private/i.test(document.body.textContent), null, { timeout: 30000 });
  await shots(page, 'signed-out');
  // The old cookie and API token are dead too.
  const r = await httpJson(s.base + '/_seed/api/status', {
    headers: { 'X-Seed-Token': token, Cookie: `${cookie.name}=${cookie.value}` },
  });
  assert.strictEqual(r.status, 401);
  assert.deepStrictEqual(problems, []);
});

test('sign in with a password', async () => {
  // After sign-out the page offers the form (a same-origin navigation, no script).
  await page.goto(s.base + '/_seed/');
  await page.locator('form.sign-in').waitFor();
  await page.fill('#user', 'owner');
  await page.fill('#password', 'not the password');
  await Promise.all([page.waitForNavigation(), page.click('form.sign-in button[type=submit]')]);
  await page.locator('.alert', { hasText: 'Wrong username or password' }).waitFor();
  assert.strictEqual((await context.cookies()).filter((c) => c.name.startsWith('seed_')).length, 0);
  await shots(page, 'password-wrong');
  await page.fill('#user', 'owner');
  await page.fill('#password', PASSWORD);
  await Promise.all([page.waitForNavigation(), page.click('form.sign-in button[type=submit]')]);
  await page.locator('#view-chat').waitFor();
  assert.ok(new URL(page.url()).pathname.startsWith('/_seed/'), page.url());
  const cookie = (await context.cookies()).find((c) => c.name.startsWith('seed_'));
  assert.ok(cookie && cookie.httpOnly, 'a session cookie, HttpOnly');
  // The page works: its API calls carry the token from the page.
  await page.click('a[data-view="settings"]');
  await page.locator('#status-facts dt').first().waitFor();
  await shots(page, 'password-signed-in');
  assert.deepStrictEqual(problems, []);
});

test('an evolution waiting for the model says so, then goes on', async () => {
  // The provider is down for longer than a call's retry budget (the
  // kernel's own timing: up to 15 s of retries, then a retry every 30 s).
  await s.script([
    { tool_calls: [{ name: 'submit_plan', arguments: {
      title: 'Note through an outage', scope: 'outage', summary: 'Write a note.', steps: ['write it'] } }] },
    { outage: { ms: 20000 } },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'organism/OUTAGE.txt', content: 'survived\n' } }] },
    { tool_calls: [{ name: 'finish', arguments: { summary: 'Wrote the note.' } }] },
    { tool_calls: [{ name: 'submit_reflection', arguments: { notes: 'Nothing new.' } }] },
  ]);
  await page.click('a[data-view="chat"]');
  await page.fill('#composer-text', 'Leave a note through an outage');
  await page.click('#evolve-button');
  const note = page.locator('.live-evo .model-waiting');
  await note.waitFor({ timeout: 120000 });
  assert.match(await note.textContent(),
    /^Waiting for the model: openai-compatible: HTTP 503: .+, retrying at .+\. It keeps its work and gives up at .+\.$/);
  await shots(page, 'model-waiting');
  await page.locator('.live-evo[data-state="complete"]', { hasText: 'Note through an outage' }).waitFor({ timeout: 300000 });
  assert.strictEqual(await page.locator('.live-evo .model-waiting').count(), 0);
  assert.deepStrictEqual(problems, []);
});

test('screenshots are kept', () => {
  for (const name of ['chat-empty', 'chat', 'evolution-progress', 'approval', 'evolution-complete', 'organism-generation-2',
    'evolution-detail', 'evolutions', 'knowledge', 'skills', 'logs', 'settings', 'rollback-confirm', 'generations', 'signed-out',
    'password-wrong', 'password-signed-in', 'model-waiting']) {
    for (const f of [name + '.png', name + '-phone.png']) assert.ok(fs.statSync(path.join(OUT, f)).size > 1000, f);
  }
});
