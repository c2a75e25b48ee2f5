// preview-bar.js — the preview bar on the candidate's pages (issue 15, "Preview
// before apply"). The kernel adds this script to the candidate's pages in the
// owner's previewing browser only (kernel/ctl/preview.h). It asks
// /_seed/preview/state (200 {"evolution","generation"} for that browser, 204
// for any other) and shows, in a closed shadow root, "Preview of generation N
// — only you see this" with four links:
//  - Apply, Ask for changes, Discard: the control plane at that evolution
//    (/_seed/#decide/<id>/<action>; the app's origin sends /_seed/ on to the
//    control plane's own), where the owner decides with its own buttons;
//  - Leave preview: /_seed/preview/leave (drops the preview cookie, back to
//    the live app).
// The page is the candidate's, and its scripts share it: this script holds no
// token and makes no request that acts; a link it shows does nothing by being
// followed but open a screen.
(function () {
  'use strict';
  if (window.top !== window || document.documentElement.hasAttribute('data-seed-preview')) return;
  document.documentElement.setAttribute('data-seed-preview', '');

  const EVO = /^evo_[0-9a-f]{16}$/;

  fetch('/_seed/preview/state', { credentials: 'same-origin', cache: 'no-store' })
    .then((res) => (res.status === 200 ? res.json() : null))
    .then((s) => {
      if (s && typeof s.evolution === 'string' && EVO.test(s.evolution) && Number.isInteger(s.generation)) show(s);
    })
    .catch(() => {});

  const STYLE = `
    :host { all: initial; }
    .bar { position: fixed; left: 0; right: 0; top: 0; z-index: 2147483647; display: flex; flex-wrap: wrap;
      align-items: center; gap: 8px 14px; padding: 8px 14px; background: #1f3d28; color: #fff;
      font: 14px/1.3 system-ui, sans-serif; box-shadow: 0 1px 6px rgba(0,0,0,.35); }
    .what { font-weight: 600; margin-right: auto; }
    a { color: #fff; text-decoration: none; padding: 4px 10px; border-radius: 12px; border: 1px solid #9cc7a8; }
    a:hover, a:focus-visible { background: #3f7d4e; outline: none; }
    a.apply { background: #3f7d4e; border-color: #3f7d4e; }
    .hide { background: none; border: 0; color: #cfe3d5; cursor: pointer; font: inherit; padding: 4px; }
  `;

  function link(text, href, cls) {
    const a = document.createElement('a');
    a.textContent = text;
    a.href = href;
    if (cls) a.className = cls;
    return a;
  }

  function show(s) {
    const host = document.createElement('seed-preview-bar');
    const root = host.attachShadow({ mode: 'closed' });
    const style = document.createElement('style');
    style.textContent = STYLE;
    const bar = document.createElement('div');
    bar.className = 'bar';
    bar.setAttribute('role', 'region');
    bar.setAttribute('aria-label', 'Preview');
    const what = document.createElement('span');
    what.className = 'what';
    what.textContent = 'Preview of generation ' + s.generation + ' \u2014 only you see this';
    const decide = (action) => '/_seed/#decide/' + s.evolution + '/' + action;
    const hide = document.createElement('button');
    hide.type = 'button';
    hide.className = 'hide';
    hide.textContent = '\u00d7';
    hide.title = 'Hide this bar on this page';
    hide.addEventListener('click', () => host.remove());
    bar.append(what, link('Apply', decide('apply'), 'apply'), link('Ask for changes', decide('changes')),
      link('Discard', decide('discard')), link('Leave preview', '/_seed/preview/leave'), hide);
    root.append(style, bar);
    (document.body || document.documentElement).appendChild(host);
  }
})();
