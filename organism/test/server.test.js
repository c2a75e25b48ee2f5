'use strict';
// Starts bin/server on a random free port and checks what it serves.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');

let child;
let base;

before(async () => {
  child = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'server')], {
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  base = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('server did not start')), 10000);
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
});

after(() => {
  if (child) child.kill('SIGTERM');
});

test('GET / greets', async () => {
  const res = await fetch(`${base}/`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/html/);
  const body = await res.text();
  assert.match(body, /I don't have a purpose yet\. What should I become\?/);
  assert.doesNotMatch(body, /<script/i);
});

test('the page shows the logo as an image, and it is the favicon', async () => {
  const body = await (await fetch(`${base}/`)).text();
  assert.match(body, /<img class="seed" src="\/logo\.svg"/);
  assert.match(body, /<link rel="icon" href="\/logo\.svg" type="image\/svg\+xml">/);
  assert.doesNotMatch(body, /\u{1F331}|&#x1F331;/u); // no emoji: fonts without one show a box
  for (const p of ['/logo.svg', '/favicon.ico']) {
    const res = await fetch(`${base}${p}`);
    assert.equal(res.status, 200, p);
    assert.equal(res.headers.get('content-type'), 'image/svg+xml');
    assert.match(res.headers.get('content-security-policy'), /default-src 'none'/);
    const svg = await res.text();
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.match(svg, /#3f7d4e/); // the Seed's accent colour
  }
});

test('GET /healthz is ok', async () => {
  const res = await fetch(`${base}/healthz`);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { ok: true });
});

test('unknown paths are 404', async () => {
  const res = await fetch(`${base}/nope`);
  assert.equal(res.status, 404);
});

test('only GET and HEAD', async () => {
  const res = await fetch(`${base}/`, { method: 'POST', body: 'x' });
  assert.equal(res.status, 405);
  const head = await fetch(`${base}/healthz`, { method: 'HEAD' });
  assert.equal(head.status, 200);
});
