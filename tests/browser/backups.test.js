// The Backups screen in a real browser (issue 18): it lists the daily
// backup the scheduler took, "Back up now" adds one, Restore asks first
// (naming the backup and that all of the data is replaced; cancelled,
// nothing changes) and then brings the data back, and Download saves the
// file itself. Screenshots in tests/browser/out/.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { TestSeed, launch, shots, waitUntil, httpJson } = require('./lib.js');

let s, browser, context, page;
const problems = [];

before(async () => {
  s = await TestSeed.start('backupsui');
  browser = await launch();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
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

// One statement on the live data as the app's role (psql over the Seed's
// private socket as its superuser); the last line of the output.
function sql(statement) {
  const pw = fs.readFileSync(path.join(s.dir, '.seed/secrets/postgres-password'), 'utf8').trim();
  const out = execFileSync('psql', ['-h', path.join(s.dir, '.seed/run'), '-U', 'postgres', '-d', 'organism', '-X', '-A',
    '-t', '-v', 'ON_ERROR_STOP=1', '-c', 'SET ROLE organism; ' + statement],
  { encoding: 'utf8', env: Object.assign({}, process.env, { PGPASSWORD: pw }), timeout: 120000 });
  return out.trim().split('\n').pop();
}

function notes() {
  return sql("SELECT string_agg(body, ',' ORDER BY id) FROM notes");
}

async function backupsScreen() {
  await page.goto(s.base + '/_seed/#backups');
  await page.locator('#view-backups').waitFor();
}

test('the screen lists the daily backup the scheduler took', async () => {
  await waitUntil(async () => (await s.api('/_seed/api/backups')).body.backups.some((b) => b.kind === 'daily'),
    { timeout: 120000, what: 'the first daily backup' });
  await backupsScreen();
  const row = page.locator('#backup-list li', { hasText: 'daily' }).first();
  await row.waitFor();
  assert.match(await row.textContent(), /generation \d+ · [\d.]+ (B|KiB|MiB)/);
  assert.match(await page.textContent('#backup-kinds'), /10 before an apply, 7 daily, 10 yours, 5 before a restore/);
  assert.deepStrictEqual(problems, []);
});

test('Back up now takes a backup and lists it', async () => {
  sql("CREATE TABLE notes (id int PRIMARY KEY, body text); INSERT INTO notes VALUES (1, 'kept'), (2, 'also kept')");
  await backupsScreen();
  await page.click('#backup-now');
  await page.locator('#backups-notice', { hasText: 'Backed up as' }).waitFor();
  const id = (await page.textContent('#backups-notice code')).trim();
  assert.match(id, /^manual-\d+-[0-9a-f]+$/);
  await page.locator(`#backup-list li[data-backup="${id}"]`).waitFor();
  await shots(page, 'backups');
});

test('Restore names what it replaces, cancels cleanly, then brings the data back', async () => {
  const list = (await s.api('/_seed/api/backups')).body.backups;
  const manual = list.find((b) => b.kind === 'manual');
  sql("INSERT INTO notes VALUES (3, 'written later'); UPDATE notes SET body = 'changed' WHERE id = 1");
  assert.strictEqual(notes(), 'changed,also kept,written later');
  await backupsScreen();
  const row = page.locator(`#backup-list li[data-backup="${manual.id}"]`);
  await row.getByRole('button', { name: 'Restore' }).click();
  await page.locator('#confirm[open]').waitFor();
  const title = await page.textContent('#confirm-title');
  const text = await page.textContent('#confirm-text');
  assert.ok(title.includes(manual.id), title);
  assert.match(text, /replaces ALL of the app's data/);
  assert.match(text, new RegExp(`generation ${manual.generation} was live`));
  assert.match(text, /saved first/);
  await shots(page, 'backups-restore-confirm', { fullPage: false });
  await page.click('#confirm-cancel');
  await page.locator('#confirm[open]').waitFor({ state: 'detached' }).catch(() => {});
  assert.strictEqual(notes(), 'changed,also kept,written later'); // cancelled: nothing changed
  await row.getByRole('button', { name: 'Restore' }).click();
  await page.click('#confirm-ok');
  await page.locator('#backups-notice', { hasText: 'Restored' }).waitFor({ timeout: 300000 });
  assert.strictEqual(notes(), 'kept,also kept');
  const saved = (await page.locator('#backups-notice code').nth(1).textContent()).trim();
  assert.match(saved, /^restore-\d+-[0-9a-f]+$/);
  await page.locator(`#backup-list li[data-backup="${saved}"]`, { hasText: 'before a restore' }).waitFor();
  await waitUntil(async () => (await httpJson(s.app + '/healthz')).status === 200, { timeout: 60000, what: 'the app' });
  assert.deepStrictEqual(problems, []);
});

test('Download saves the backup file itself', async () => {
  const list = (await s.api('/_seed/api/backups')).body.backups;
  const manual = list.find((b) => b.kind === 'manual');
  await backupsScreen();
  const row = page.locator(`#backup-list li[data-backup="${manual.id}"]`);
  await row.waitFor();
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    row.getByRole('button', { name: 'Download' }).click(),
  ]);
  assert.strictEqual(download.suggestedFilename(), manual.id + '.dump');
  const got = fs.readFileSync(await download.path());
  const want = fs.readFileSync(path.join(s.dir, '.seed/backups', manual.id + '.dump'));
  assert.ok(got.equals(want), `downloaded ${got.length} bytes, the file has ${want.length}`);
  assert.strictEqual(got.subarray(0, 5).toString(), 'PGDMP');
  assert.strictEqual(await page.locator('#backups-error').isVisible(), false);
  assert.deepStrictEqual(problems, []);
});
