// The preview before apply in a real browser: an evolution's candidate waits
// in a preview; the control plane shows the preview bar; "Open the preview"
// opens the app in a new tab where the owner's browser sees the candidate
// with the kernel's preview bar on it (a closed shadow root holding no
// token: "Preview of generation N — only you see this", links that open the
// control plane's decision and never act), while another browser keeps
// seeing the live app without it; "Leave preview" returns that tab to the
// live app; Apply, reached from the candidate's bar and pressed on the
// control plane, makes it live for everyone. Screenshots in
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

// The kernel's bar on a page, seen the way the page cannot see it: through
// the DevTools protocol, which pierces closed shadow roots. Returns
// {rootType, text, links: [{text, href, x, y}], attrs: every attribute value}.
async function previewBar(tab) {
  const cdp = await tab.context().newCDPSession(tab);
  try {
    const { root } = await cdp.send('DOM.getDocument', { depth: -1, pierce: true });
    let host = null;
    const find = (n) => {
      if (n.nodeName === 'SEED-PREVIEW-BAR') host = n;
      for (const c of [...(n.children || []), ...(n.shadowRoots || [])]) if (!host) find(c);
    };
    find(root);
    if (!host) return null;
    const textOf = (n) => (n.nodeType === 3 ? n.nodeValue : (n.children || []).map(textOf).join(''));
    const bar = { rootType: (host.shadowRoots || []).map((r) => r.shadowRootType).join(','), text: '', links: [], attrs: [] };
    const walk = async (n) => {
      for (let i = 0; n.attributes && i < n.attributes.length; i += 2) bar.attrs.push(n.attributes[i + 1]);
      if (n.nodeName === 'A') {
        const href = n.attributes[n.attributes.indexOf('href') + 1];
        const { model } = await cdp.send('DOM.getBoxModel', { nodeId: n.nodeId });
        const q = model.content;
        bar.links.push({ text: textOf(n), href, x: (q[0] + q[4]) / 2, y: (q[1] + q[5]) / 2 });
      }
      for (const c of [...(n.children || []), ...(n.shadowRoots || [])]) await walk(c);
    };
    for (const r of host.shadowRoots || []) {
      bar.text += textOf(r);
      await walk(r);
    }
    return bar;
  } finally {
    await cdp.detach();
  }
}

// Follows one of the bar's links in tab (a click where the page shows it):
// the control plane opens, past its private page (the browser holds the
// Strict sign-in back after a link from the app's site), at the decision.
async function followBarLink(tab, bar, text) {
  const link = bar.links.find((l) => l.text === text);
  assert.ok(link, text);
  await Promise.all([tab.waitForURL((u) => u.host.startsWith('seed.localhost'), { timeout: 30000 }),
    tab.mouse.click(link.x, link.y)]);
  await tab.waitForSelector('#reopen', { timeout: 30000 });
  assert.match(await tab.getAttribute('#reopen', 'href'), /^\/_seed\/\?#decide\/evo_[0-9a-f]{16}\/(apply|changes|discard)$/);
  await tab.click('#reopen');
  await tab.waitForSelector('#preview-asked:not([hidden])', { timeout: 30000 });
}

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
  const appOrigin = new URL(tab.url()).origin;

  // The kernel's bar on the candidate: a closed shadow root the page cannot
  // open, saying what this is, with links only.
  await tab.waitForSelector('seed-preview-bar', { state: 'attached', timeout: 30000 });
  await tab.screenshot({ path: path.join(OUT, 'preview-candidate.png') });
  assert.strictEqual(await tab.evaluate(() => document.querySelector('seed-preview-bar').shadowRoot), null, 'closed');
  const evo = (await s.api('/_seed/api/evolutions')).body.evolutions.find((e) => e.state === 'ready');
  assert.ok(evo && evo.to_generation > 1, JSON.stringify(evo));
  let seen = await previewBar(tab);
  assert.strictEqual(seen.rootType, 'closed');
  assert.match(seen.text, new RegExp('Preview of generation ' + evo.to_generation + ' \u2014 only you see this'));
  assert.deepStrictEqual(seen.links.map((l) => [l.text, l.href]), [
    ['Apply', '/_seed/#decide/' + evo.id + '/apply'],
    ['Ask for changes', '/_seed/#decide/' + evo.id + '/changes'],
    ['Discard', '/_seed/#decide/' + evo.id + '/discard'],
    ['Leave preview', '/_seed/preview/leave'],
  ]);
  // No token anywhere the page's scripts reach: not in the bar (its
  // attributes and links), not in the page, not in a readable cookie; what
  // the bar asks the kernel, the page may ask too, and it is no secret.
  const apiToken = await page.getAttribute('meta[name="seed-token"]', 'content');
  const cliToken = fs.readFileSync(path.join(s.dir, '.seed', 'control-token'), 'utf8').trim();
  assert.ok(apiToken.length >= 32 && cliToken.length >= 32);
  const cookies = (await owner.cookies()).map((c) => c.value).filter((v) => v.length >= 16);
  assert.ok(cookies.length >= 2, 'the session and preview cookies');
  const fromPage = await tab.evaluate(async () => {
    const res = await fetch('/_seed/preview/state', { cache: 'no-store' });
    return { html: document.documentElement.outerHTML, cookie: document.cookie, url: location.href,
      state: await res.text(), type: res.headers.get('Content-Type') };
  });
  for (const secret of [apiToken, cliToken, ...cookies]) {
    const where = [fromPage.html, fromPage.cookie, fromPage.url, fromPage.state, ...seen.attrs].join('\n');
    assert.ok(!where.includes(secret), 'a token or cookie value reached the page');
  }
  assert.deepStrictEqual(JSON.parse(fromPage.state), { evolution: evo.id, generation: evo.to_generation });
  for (const a of seen.attrs) assert.ok(!/[0-9a-f]{32}/.test(a), 'no token-like value in the bar: ' + a);

  // Another browser: the live app, without the bar (nor its answer).
  await other.goto(appOrigin + '/');
  assert.strictEqual(await other.title(), 'A new Seed');
  assert.strictEqual(await other.locator('script[src="/_seed/preview/bar.js"]').count(), 0);
  assert.strictEqual(await other.evaluate(async () => (await fetch('/_seed/preview/state')).status), 204);
  assert.strictEqual(await previewBar(other), null);

  // "Ask for changes" on the candidate opens the control plane's decision,
  // where nothing happens until the owner acts: the form is open, the
  // preview still runs.
  const changes = await owner.newPage();
  await changes.goto(appOrigin + '/');
  await changes.waitForSelector('seed-preview-bar', { state: 'attached', timeout: 30000 });
  await followBarLink(changes, await previewBar(changes), 'Ask for changes');
  assert.match(await changes.textContent('#preview-asked'), /You chose "Ask for changes" in the preview/);
  assert.ok(await changes.isVisible('#preview-feedback'));
  assert.strictEqual(await changes.evaluate(() => document.activeElement.id), 'preview-feedback-text');
  assert.strictEqual(new URL(changes.url()).hash, '#evolution/' + evo.id);
  await changes.close();
  // A forged decision link does nothing either: it is dropped.
  const forged = await owner.newPage();
  await forged.goto(s.base + '/_seed/#decide/' + evo.id + '/apply;DROP');
  await forged.waitForSelector('#view-evolutions:not([hidden])', { timeout: 30000 });
  await forged.close();

  // "Apply" on the candidate: the control plane's Apply, which the owner presses.
  await followBarLink(tab, seen, 'Apply');
  assert.match(await tab.textContent('#preview-asked'), /You chose "Apply" in the preview/);
  // The button is pointed at, never focused: a key the owner presses then acts on nothing.
  assert.strictEqual(await tab.evaluate(() => document.activeElement.id), 'preview-asked');
  assert.ok(await tab.evaluate(() => document.getElementById('preview-apply').classList.contains('asked')));
  await tab.keyboard.press('Enter');
  await tab.keyboard.press('Space');
  await tab.screenshot({ path: path.join(OUT, 'preview-decide.png') });
  seen = null;
  assert.ok((await s.api('/_seed/api/evolutions')).body.evolutions.some((e) => e.id === evo.id && e.state === 'ready'),
    'following a link decided nothing');

  // Leave preview: that browser sees the live app again, without the bar.
  const left = await owner.newPage();
  await left.goto(appOrigin + '/');
  await left.waitForSelector('seed-preview-bar', { state: 'attached', timeout: 30000 });
  const leave = (await previewBar(left)).links.find((l) => l.text === 'Leave preview');
  const [gone] = await Promise.all([
    left.waitForResponse((r) => r.url() === appOrigin + '/_seed/preview/leave', { timeout: 30000 }),
    left.mouse.click(leave.x, leave.y)]);
  assert.strictEqual(gone.status(), 303);
  await waitUntil(async () => (await left.title()) === 'A new Seed', { timeout: 30000, what: 'the live app' });
  await left.waitForLoadState('load');
  assert.strictEqual(await left.locator('script[src="/_seed/preview/bar.js"]').count(), 0);
  assert.strictEqual(await previewBar(left), null);
  await left.close();

  // Apply, pressed on the control plane: live for everyone.
  await tab.click('#preview-apply');
  await tab.locator('#preview-bar').waitFor({ state: 'hidden', timeout: 30000 });
  await bar.waitFor({ state: 'hidden', timeout: 30000 });
  await waitUntil(async () => {
    await other.goto(appOrigin + '/');
    return (await other.title()) === MARKER;
  }, { timeout: 300000, what: 'the candidate live' });
  assert.deepStrictEqual(problems, []);
});
