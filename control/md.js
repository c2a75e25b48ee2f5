// md.js — a small, safe Markdown renderer for what the Seed writes
// (knowledge, skills, its chat replies). parse() turns text into plain data
// (no DOM); render() builds elements from that data with textContent only.
// Raw HTML is never interpreted: "<script>" stays the text "<script>".
// Supported: ATX headings, paragraphs, hard breaks, fenced code, block
// quotes, ordered and unordered lists (nested), tables, rules; inline code,
// **strong**, *emphasis*, [links](http(s) only), <autolinks> and bare URLs.
'use strict';

const SeedMd = (() => {
  const MAX_DEPTH = 8;          // nesting of quotes and lists
  const MAX_INPUT = 512 * 1024; // longer text is cut (the API sends at most 256 KiB)

  const RE_FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
  const RE_HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
  const RE_RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const RE_QUOTE = /^ {0,3}> ?(.*)$/;
  const RE_ITEM = /^( {0,12})([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
  const RE_TABLE_SEP = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;

  function blank(line) {
    return /^[ \t]*$/.test(line);
  }

  function startsBlock(line) {
    return RE_FENCE.test(line) || RE_HEADING.test(line) || RE_RULE.test(line) || RE_QUOTE.test(line) ||
      RE_ITEM.test(line);
  }

  function splitRow(line) {
    let s = line.trim();
    if (s.startsWith('|')) s = s.slice(1);
    if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
    const cells = [];
    let cur = '';
    for (let i = 0; i < s.length; i++) {
      if (s[i] === '\\' && s[i + 1] === '|') {
        cur += '|';
        i++;
      } else if (s[i] === '|') {
        cells.push(cur.trim());
        cur = '';
      } else {
        cur += s[i];
      }
    }
    cells.push(cur.trim());
    return cells;
  }

  // ---- blocks ----

  function parseBlocks(lines, depth) {
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (blank(line)) {
        i++;
        continue;
      }
      let m;
      if ((m = RE_FENCE.exec(line))) {
        const fence = m[1];
        const body = [];
        i++;
        while (i < lines.length) {
          const close = lines[i].trim();
          if (close.length >= fence.length && close[0] === fence[0] && /^(`+|~+)$/.test(close)) {
            i++;
            break;
          }
          body.push(lines[i]);
          i++;
        }
        out.push({ t: 'code', lang: m[2] || '', text: body.join('\n') });
        continue;
      }
      if ((m = RE_HEADING.exec(line))) {
        out.push({ t: 'h', level: m[1].length, c: parseInline(m[2] || '', 0) });
        i++;
        continue;
      }
      if (RE_RULE.test(line)) {
        out.push({ t: 'hr' });
        i++;
        continue;
      }
      if (RE_QUOTE.test(line)) {
        const body = [];
        while (i < lines.length && (m = RE_QUOTE.exec(lines[i]))) {
          body.push(m[1]);
          i++;
        }
        out.push(depth < MAX_DEPTH ? { t: 'quote', c: parseBlocks(body, depth + 1) }
          : { t: 'p', c: parseInline(body.join('\n'), 0) });
        continue;
      }
      if ((m = RE_ITEM.exec(line))) {
        const r = parseList(lines, i, depth);
        out.push(r.block);
        i = r.next;
        continue;
      }
      if (line.includes('|') && i + 1 < lines.length && RE_TABLE_SEP.test(lines[i + 1])) {
        const head = splitRow(line);
        const align = splitRow(lines[i + 1]).map((c) =>
          c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : '');
        const rows = [];
        i += 2;
        while (i < lines.length && !blank(lines[i]) && lines[i].includes('|')) {
          rows.push(splitRow(lines[i]).slice(0, head.length).map((c) => parseInline(c, 0)));
          i++;
        }
        out.push({ t: 'table', head: head.map((c) => parseInline(c, 0)), align, rows });
        continue;
      }
      const para = [line];
      i++;
      while (i < lines.length && !blank(lines[i]) && !startsBlock(lines[i])) {
        para.push(lines[i]);
        i++;
      }
      out.push({ t: 'p', c: parseInline(para.join('\n'), 0) });
    }
    return out;
  }

  function parseList(lines, i, depth) {
    const first = RE_ITEM.exec(lines[i]);
    const indent = first[1].length;
    const ordered = /\d/.test(first[2]);
    const block = { t: ordered ? 'ol' : 'ul', start: ordered ? parseInt(first[2], 10) : 1, items: [] };
    while (i < lines.length) {
      const m = RE_ITEM.exec(lines[i]);
      if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
      const content = [m[3] || ''];
      const inner = indent + m[2].length + 1;
      i++;
      // The item goes on while lines are indented past its marker (or blank
      // between such lines); a less indented marker or text ends it.
      while (i < lines.length) {
        const l = lines[i];
        if (blank(l)) {
          const next = lines[i + 1];
          if (next !== undefined && !blank(next) && next.search(/\S/) >= inner) {
            content.push('');
            i++;
            continue;
          }
          break;
        }
        const lead = l.search(/\S/);
        if (lead >= inner || (lead > indent && RE_ITEM.test(l))) {
          content.push(l.slice(Math.min(lead, inner)));
          i++;
        } else if (!RE_ITEM.test(l) && !startsBlock(l) && lead <= indent && content.length && !blank(content[content.length - 1])) {
          content.push(l.trim()); // a lazy continuation of the item's paragraph
          i++;
        } else {
          break;
        }
      }
      const blocks = depth < MAX_DEPTH ? parseBlocks(content, depth + 1) : [{ t: 'p', c: parseInline(content.join('\n'), 0) }];
      block.items.push(blocks);
      while (i < lines.length && blank(lines[i]) && i + 1 < lines.length && RE_ITEM.test(lines[i + 1]) &&
        RE_ITEM.exec(lines[i + 1])[1].length === indent) i++;
    }
    return { block, next: i };
  }

  // ---- inlines ----

  const PUNCT = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';

  function pushText(out, s) {
    if (!s) return;
    const last = out[out.length - 1];
    if (last && last.t === 'text') last.v += s;
    else out.push({ t: 'text', v: s });
  }

  // Scanning for the ends of links is bounded per paragraph (ctx.budget
  // steps), so text made of many unclosed "[" or "(" stays linear: past the
  // budget the rest is plain text.
  const SCAN_BUDGET = 2000000;

  // The index of a closing ')' for a link destination starting at i, or -1.
  function closeParen(s, i, ctx) {
    let level = 0;
    for (let j = i; j < s.length; j++) {
      if (--ctx.budget < 0) return -1;
      if (s[j] === '\\') j++;
      else if (s[j] === '(') level++;
      else if (s[j] === ')') {
        if (level === 0) return j;
        level--;
      } else if (s[j] === '\n') return -1;
    }
    return -1;
  }

  // The index of the ']' closing a label that opened at i, or -1.
  function closeBracket(s, i, ctx) {
    let level = 0;
    for (let j = i + 1; j < s.length; j++) {
      if (--ctx.budget < 0) return -1;
      if (s[j] === '\\') j++;
      else if (s[j] === '`') {
        const run = /^`+/.exec(s.slice(j))[0];
        const end = s.indexOf(run, j + run.length);
        ctx.budget -= (end > 0 ? end : s.length) - j;
        if (end > 0) j = end + run.length - 1;
      } else if (s[j] === '[') level++;
      else if (s[j] === ']') {
        if (level === 0) return j;
        level--;
      }
    }
    return -1;
  }

  function linkTarget(raw) {
    let dest = raw.trim();
    const titled = /^(\S+)\s+(?:"[^"]*"|'[^']*'|\([^)]*\))$/.exec(dest);
    if (titled) dest = titled[1];
    if (dest.startsWith('<') && dest.endsWith('>')) dest = dest.slice(1, -1);
    return /^https?:\/\//i.test(dest) ? dest : null;
  }

  function parseInline(s, depth, context) {
    const ctx = context || { budget: SCAN_BUDGET };
    const noTicks = {}; // backtick runs with no closer further on in s
    const out = [];
    let text = '';
    const flush = () => {
      pushText(out, text);
      text = '';
    };
    const noCloser = {}; // delimiters known to have no closer further on
    for (let i = 0; i < s.length;) {
      const ch = s[i];
      if (ch === '\\' && i + 1 < s.length && PUNCT.includes(s[i + 1])) {
        text += s[i + 1];
        i += 2;
        continue;
      }
      if (ch === '\\' && s[i + 1] === '\n') {
        flush();
        out.push({ t: 'br' });
        i += 2;
        continue;
      }
      if (ch === '\n') {
        if (/ {2,}$/.test(text)) {
          text = text.replace(/ +$/, '');
          flush();
          out.push({ t: 'br' });
        } else {
          text += ' ';
        }
        i++;
        continue;
      }
      if (ch === '`') {
        const run = /^`+/.exec(s.slice(i, i + 32))[0];
        const end = noTicks[run.length] ? -1 : s.indexOf(run, i + run.length);
        if (end < 0) noTicks[run.length] = true; // none further on either
        if (end > 0) {
          flush();
          let code = s.slice(i + run.length, end).replace(/\n/g, ' ');
          if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
          out.push({ t: 'code', v: code });
          i = end + run.length;
          continue;
        }
        text += run;
        i += run.length;
        continue;
      }
      if (ch === '<') {
        const m = /^<(https?:\/\/[^\s<>]+)>/i.exec(s.slice(i, i + 2048));
        if (m) {
          flush();
          out.push({ t: 'link', href: m[1], c: [{ t: 'text', v: m[1] }] });
          i += m[0].length;
          continue;
        }
      }
      if ((ch === 'h' || ch === 'H') && (i === 0 || /[\s(]/.test(s[i - 1]))) {
        const m = /^https?:\/\/[^\s<>()]+(?:\([^\s<>()]*\)[^\s<>()]*)*/i.exec(s.slice(i, i + 2048));
        if (m) {
          const url = m[0].replace(/[.,:;!?'"*_]+$/, '');
          flush();
          out.push({ t: 'link', href: url, c: [{ t: 'text', v: url }] });
          i += url.length;
          continue;
        }
      }
      if (ch === '[' || (ch === '!' && s[i + 1] === '[')) {
        const image = ch === '!';
        const open = image ? i + 1 : i;
        const close = closeBracket(s, open, ctx);
        if (close > 0 && s[close + 1] === '(') {
          const end = closeParen(s, close + 2, ctx);
          if (end > 0) {
            const label = s.slice(open + 1, close);
            const href = linkTarget(s.slice(close + 2, end));
            flush();
            // Images are never loaded: shown as a link to them (or their text).
            const inner = image ? [{ t: 'text', v: 'image: ' + (label || 'untitled') }]
              : depth < MAX_DEPTH ? parseInline(label, depth + 1, ctx) : [{ t: 'text', v: label }];
            if (href) out.push({ t: 'link', href, c: inner });
            else for (const n of inner) out.push(n);
            i = end + 1;
            continue;
          }
        }
      }
      if (ch === '*' || ch === '_') {
        const dbl = s[i + 1] === ch;
        const delim = dbl ? ch + ch : ch;
        const after = s[i + delim.length];
        const wordBefore = i > 0 && /[\p{L}\p{N}]/u.test(s[i - 1]);
        if (after && !/\s/.test(after) && !(ch === '_' && wordBefore) && !noCloser[delim] && depth < MAX_DEPTH) {
          let j = i + delim.length;
          let found = -1;
          while (true) {
            j = s.indexOf(delim, j + 1);
            if (j < 0) break;
            const prev = s[j - 1];
            const next = s[j + delim.length];
            const okPrev = prev && !/\s/.test(prev);
            const okNext = ch !== '_' || !next || !/[\p{L}\p{N}]/u.test(next);
            const notLonger = dbl || s[j + 1] !== ch || s[j + 2] === ch;
            if (okPrev && okNext && notLonger) {
              found = j;
              break;
            }
          }
          if (found < 0) {
            noCloser[delim] = true;
          } else {
            flush();
            out.push({ t: dbl ? 'strong' : 'em', c: parseInline(s.slice(i + delim.length, found), depth + 1, ctx) });
            i = found + delim.length;
            continue;
          }
        }
        text += delim;
        i += delim.length;
        continue;
      }
      text += ch;
      i++;
    }
    flush();
    return out;
  }

  function parse(text) {
    const s = String(text || '').slice(0, MAX_INPUT).replace(/\r\n?/g, '\n').replace(/\t/g, '    ');
    return parseBlocks(s.split('\n'), 0);
  }

  // Splits "---\nfront: matter\n---\nbody" into its two parts.
  function frontMatter(text) {
    const m = /^---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/.exec(String(text || ''));
    return m ? { matter: m[1], body: String(text).slice(m[0].length) } : { matter: null, body: String(text || '') };
  }

  // ---- render ----

  function effectivePort(u) {
    return u.port || (u.protocol === 'https:' ? '443' : '80');
  }

  // The href a link may have, or null: http(s) only, and never the control
  // plane's own host on another port (here: the page's location). Cookies
  // ignore ports, so whatever listens on another port of this host would
  // get the owner's session from a click.
  function linkHref(href, here) {
    let u;
    try {
      u = new URL(href);
    } catch (e) {
      return null;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    if (here && here.hostname && u.hostname === here.hostname && effectivePort(u) !== effectivePort(here)) return null;
    return u.href;
  }

  function renderInline(nodes, doc) {
    const frag = doc.createDocumentFragment();
    for (const n of nodes) {
      let el;
      switch (n.t) {
        case 'text': el = doc.createTextNode(n.v); break;
        case 'br': el = doc.createElement('br'); break;
        case 'code': el = doc.createElement('code'); el.textContent = n.v; break;
        case 'em': el = doc.createElement('em'); el.append(renderInline(n.c, doc)); break;
        case 'strong': el = doc.createElement('strong'); el.append(renderInline(n.c, doc)); break;
        case 'link': {
          const href = linkHref(n.href, doc.location);
          if (!href) {
            el = doc.createElement('span');
          } else {
            el = doc.createElement('a');
            el.setAttribute('href', href);
            el.setAttribute('rel', 'noopener noreferrer nofollow');
            el.setAttribute('target', '_blank');
          }
          el.append(renderInline(n.c, doc));
          break;
        }
        default: continue;
      }
      frag.append(el);
    }
    return frag;
  }

  function renderBlocks(blocks, doc, tight) {
    const frag = doc.createDocumentFragment();
    for (const b of blocks) {
      let el;
      switch (b.t) {
        case 'h':
          el = doc.createElement('h' + Math.min(6, b.level + 2));
          el.className = 'md-h' + b.level;
          el.append(renderInline(b.c, doc));
          break;
        case 'p':
          if (tight) {
            frag.append(renderInline(b.c, doc));
            continue;
          }
          el = doc.createElement('p');
          el.append(renderInline(b.c, doc));
          break;
        case 'code': {
          el = doc.createElement('pre');
          const code = doc.createElement('code');
          code.textContent = b.text;
          if (/^[\w+-]{1,32}$/.test(b.lang)) code.dataset.lang = b.lang;
          el.append(code);
          break;
        }
        case 'quote':
          el = doc.createElement('blockquote');
          el.append(renderBlocks(b.c, doc, false));
          break;
        case 'hr':
          el = doc.createElement('hr');
          break;
        case 'ul':
        case 'ol':
          el = doc.createElement(b.t);
          if (b.t === 'ol' && b.start !== 1) el.setAttribute('start', String(b.start));
          for (const item of b.items) {
            const li = doc.createElement('li');
            li.append(renderBlocks(item, doc, item.length === 1 || item.filter((x) => x.t === 'p').length === 1));
            el.append(li);
          }
          break;
        case 'table': {
          el = doc.createElement('div');
          el.className = 'md-table';
          const table = doc.createElement('table');
          const thead = doc.createElement('thead');
          const tr = doc.createElement('tr');
          b.head.forEach((c, k) => {
            const th = doc.createElement('th');
            if (b.align[k]) th.className = 'align-' + b.align[k];
            th.append(renderInline(c, doc));
            tr.append(th);
          });
          thead.append(tr);
          const tbody = doc.createElement('tbody');
          for (const row of b.rows) {
            const r = doc.createElement('tr');
            row.forEach((c, k) => {
              const td = doc.createElement('td');
              if (b.align[k]) td.className = 'align-' + b.align[k];
              td.append(renderInline(c, doc));
              r.append(td);
            });
            tbody.append(r);
          }
          table.append(thead, tbody);
          el.append(table);
          break;
        }
        default:
          continue;
      }
      frag.append(el);
    }
    return frag;
  }

  // A <div class="md"> holding text rendered as Markdown.
  function render(text, doc) {
    const d = doc || document;
    const div = d.createElement('div');
    div.className = 'md';
    div.append(renderBlocks(parse(text), d, false));
    return div;
  }

  return { parse, parseInline: (s) => parseInline(String(s), 0), render, frontMatter, linkHref };
})();

if (typeof module === 'object' && module.exports) module.exports = SeedMd;
