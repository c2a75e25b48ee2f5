// dom.js — building the page from data without ever parsing HTML.
// Everything the Seed, the model or the organism wrote reaches the page
// through textContent or a checked attribute: never innerHTML.
'use strict';

const SeedDom = (() => {
  // Attributes h() may set; anything else (style, on*, srcdoc…) is refused,
  // so a slip in a caller cannot turn data into script.
  const ATTRS = new Set(['id', 'href', 'src', 'alt', 'title', 'type', 'role', 'name', 'value', 'for',
    'rel', 'target', 'rows', 'maxlength', 'placeholder', 'width', 'height', 'datetime', 'tabindex',
    'open', 'disabled', 'hidden', 'colspan', 'start', 'lang', 'autocomplete', 'inputmode',
    'min', 'max', 'low', 'high', 'optimum']);

  function safeUrl(url) {
    // Only http(s) links, resolved against this page; everything else is text.
    try {
      const u = new URL(String(url), document.baseURI);
      return (u.protocol === 'http:' || u.protocol === 'https:') ? u.href : null;
    } catch (e) {
      return null;
    }
  }

  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) {
      for (const c of child) append(el, c);
    } else if (child instanceof Node) {
      el.append(child);
    } else {
      el.append(document.createTextNode(String(child)));
    }
  }

  // h('a', {href, class, text, dataset, aria, on: {click}}, ...children)
  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = Array.isArray(v) ? v.filter(Boolean).join(' ') : v;
      else if (k === 'text') el.textContent = String(v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'aria') for (const [a, av] of Object.entries(v)) el.setAttribute('aria-' + a, String(av));
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      else if (k === 'href' || k === 'src') {
        const s = String(v);
        // Our own routes (#view, /_seed/…, data:image from the API) or a checked http(s) URL.
        const own = s.startsWith('#') || (s.startsWith('/') && s[1] !== '/' && s[1] !== '\\') ||
          s.startsWith('data:image/svg+xml;base64,');
        const ok = own ? s : safeUrl(s);
        if (ok) el.setAttribute(k, ok);
      } else if (ATTRS.has(k)) el.setAttribute(k, v === true ? '' : String(v));
      else throw new Error('h(): attribute not allowed: ' + k);
    }
    append(el, children);
    return el;
  }

  function $(id) {
    return document.getElementById(id);
  }

  function clear(el) {
    el.replaceChildren();
    return el;
  }

  function showError(el, err) {
    if (!el) return;
    if (err) {
      el.textContent = err.message || String(err);
      el.hidden = false;
    } else {
      el.textContent = '';
      el.hidden = true;
    }
  }

  function ago(ms) {
    if (typeof ms !== 'number' || !isFinite(ms)) return '';
    const s = Math.round((Date.now() - ms) / 1000);
    if (s < 5) return 'just now';
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    if (s < 86400) return Math.round(s / 3600) + ' h ago';
    return new Date(ms).toLocaleDateString();
  }

  function time(ms) {
    if (typeof ms !== 'number' || !isFinite(ms)) return null;
    return h('time', { datetime: new Date(ms).toISOString(), title: new Date(ms).toLocaleString(), text: ago(ms) });
  }

  return { h, $, clear, showError, safeUrl, ago, time };
})();

if (typeof module === 'object' && module.exports) module.exports = SeedDom;
