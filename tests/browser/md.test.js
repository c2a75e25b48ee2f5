// The control plane's pure modules in Node (no browser needed): the
// Markdown parser (control/md.js) and the Server-Sent Events parser and
// backoff (control/sse.js). What they build in a real page is checked by
// evolution.test.js in Chromium.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const SeedMd = require(path.join(__dirname, '../../control/md.js'));
const SeedEvents = require(path.join(__dirname, '../../control/sse.js'));

// The text of inline nodes, with links as [text](href).
function flat(nodes) {
  return nodes.map((n) => {
    switch (n.t) {
      case 'text': return n.v;
      case 'code': return '`' + n.v + '`';
      case 'br': return '\n';
      case 'em': return '_' + flat(n.c) + '_';
      case 'strong': return '**' + flat(n.c) + '**';
      case 'link': return '[' + flat(n.c) + '](' + n.href + ')';
      default: throw new Error('unknown inline ' + n.t);
    }
  }).join('');
}

function kinds(blocks) {
  return blocks.map((b) => b.t);
}

test('headings, paragraphs, rules and fenced code', () => {
  const b = SeedMd.parse('# Title #\n\nSome *text* and **bold**.\nsecond line\n\n---\n```js\nconst a = "<b>";\n```\n## Two');
  assert.deepStrictEqual(kinds(b), ['h', 'p', 'hr', 'code', 'h']);
  assert.strictEqual(b[0].level, 1);
  assert.strictEqual(flat(b[0].c), 'Title');
  assert.strictEqual(flat(b[1].c), 'Some _text_ and **bold**. second line');
  assert.strictEqual(b[3].lang, 'js');
  assert.strictEqual(b[3].text, 'const a = "<b>";');
  assert.strictEqual(b[4].level, 2);
});

test('no link to the control plane\'s host on another port', () => {
  const here = new URL('http://seed.localhost:8080/_seed/');
  assert.strictEqual(SeedMd.linkHref('http://seed.localhost:8080/_seed/#evolutions', here),
    'http://seed.localhost:8080/_seed/#evolutions');
  assert.strictEqual(SeedMd.linkHref('http://seed.localhost:8081/_seed/', here), null);
  assert.strictEqual(SeedMd.linkHref('http://SEED.localhost/x', here), null); // port 80
  assert.strictEqual(SeedMd.linkHref('https://seed.localhost/', here), null); // 443
  assert.strictEqual(SeedMd.linkHref('http://127.0.0.1:9999/', here), 'http://127.0.0.1:9999/');
  assert.strictEqual(SeedMd.linkHref('javascript:alert(1)', here), null);
  assert.strictEqual(SeedMd.linkHref('https://example.com/', null), 'https://example.com/');
});

test('raw HTML stays text', () => {
  const b = SeedMd.parse('<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>');
  assert.deepStrictEqual(kinds(b), ['p', 'p']);
  assert.strictEqual(flat(b[0].c), '<script>alert(1)</script>');
  assert.strictEqual(flat(b[1].c), '<img src=x onerror=alert(2)>');
});

test('only http(s) links become links; images are never loaded', () => {
  const c = SeedMd.parseInline('[ok](https://example.com/a_(b)) [js](javascript:alert(1)) [rel](notes.md) ' +
    '![pic](https://example.com/p.png) <https://x.test/> see https://y.test/path. [data](data:text/html,x)');
  const links = c.filter((n) => n.t === 'link');
  assert.deepStrictEqual(links.map((l) => l.href),
    ['https://example.com/a_(b)', 'https://example.com/p.png', 'https://x.test/', 'https://y.test/path']);
  const text = flat(c);
  assert.match(text, / js rel /);
  assert.match(text, /\[image: pic\]\(https:\/\/example.com\/p.png\)/);
  assert.doesNotMatch(text, /javascript:/);
  assert.match(text, / data$/);
});

test('inline code, escapes, emphasis rules and hard breaks', () => {
  assert.strictEqual(flat(SeedMd.parseInline('`a *b*` \\*c\\* snake_case_name *x*')),
    '`a *b*` *c* snake_case_name _x_');
  assert.strictEqual(flat(SeedMd.parseInline('a  \nb\\\nc')), 'a\nb\nc');
  assert.strictEqual(flat(SeedMd.parseInline('2 * 3 * 4')), '2 * 3 * 4');
  assert.strictEqual(flat(SeedMd.parseInline('**unclosed')), '**unclosed');
});

test('lists: ordered, unordered, nested, loose continuation', () => {
  const b = SeedMd.parse('- one\n- two\n  - two.a\n  - two.b\n- three\ncontinued\n\n3. c\n4. d');
  assert.deepStrictEqual(kinds(b), ['ul', 'ol']);
  assert.strictEqual(b[0].items.length, 3);
  assert.deepStrictEqual(kinds(b[0].items[1]), ['p', 'ul']);
  assert.strictEqual(b[0].items[1][1].items.length, 2);
  assert.strictEqual(flat(b[0].items[2][0].c), 'three continued');
  assert.strictEqual(b[1].start, 3);
  assert.strictEqual(b[1].items.length, 2);
});

test('quotes and tables', () => {
  const b = SeedMd.parse('> quoted **x**\n> more\n\n| a | b |\n|:--|--:|\n| 1 | 2 \\| 3 |\n');
  assert.deepStrictEqual(kinds(b), ['quote', 'table']);
  assert.strictEqual(flat(b[0].c[0].c), 'quoted **x** more');
  assert.deepStrictEqual(b[1].align, ['left', 'right']);
  assert.strictEqual(flat(b[1].rows[0][1]), '2 | 3');
});

test('front matter is split off', () => {
  const fm = SeedMd.frontMatter('---\nname: x\n---\n# Body\n');
  assert.strictEqual(fm.matter, 'name: x');
  assert.strictEqual(fm.body, '# Body\n');
  assert.strictEqual(SeedMd.frontMatter('# none').matter, null);
});

test('hostile input stays fast and bounded', () => {
  const started = Date.now();
  SeedMd.parse('*'.repeat(200000));
  SeedMd.parse('['.repeat(20000) + ']'.repeat(20000));
  SeedMd.parse('> '.repeat(5000) + 'deep');
  SeedMd.parse('- '.repeat(3000) + 'deep');
  SeedMd.parse('`'.repeat(100000));
  assert.ok(Date.now() - started < 5000, 'took ' + (Date.now() - started) + ' ms');
});

test('the SSE parser joins data lines, skips comments and survives any chunking', () => {
  const stream = ': connected\n\nevent: phase\ndata: {"to":\ndata: "planning"}\n\n: ping\n\n' +
    'data: plain\r\n\r\nevent: note\ndata:{"text":"x"}\n\nevent: empty\n\n';
  const want = [
    { event: 'phase', data: '{"to":\n"planning"}' },
    { event: 'message', data: 'plain' },
    { event: 'note', data: '{"text":"x"}' },
  ];
  for (const size of [1, 2, 3, 7, stream.length]) {
    const got = [];
    const feed = SeedEvents.createParser((e) => got.push(e));
    for (let i = 0; i < stream.length; i += size) feed(stream.slice(i, i + size));
    assert.deepStrictEqual(got, want, 'chunk size ' + size);
  }
});

test('reconnect backoff grows to 30 s with jitter', () => {
  for (let n = 0; n < 12; n++) {
    const base = Math.min(30000, 1000 * 2 ** Math.min(n, 5));
    const d = SeedEvents.backoff(n);
    assert.ok(d >= base * 0.8 - 1 && d <= base * 1.2 + 1, `attempt ${n}: ${d}`);
  }
});
