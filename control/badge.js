// badge.js — the owner's badge on the app's pages (seed 001, "The owner's
// badge"). The kernel adds this one script to the organism's pages; it asks
// /_seed/badge whether this browser is the owner's (200 yes, 204 no: never a
// token) and, if so, shows a small link back to the control plane in a
// closed shadow root: the Seed's logo as an image, or the seed when it has
// none.
//
// Point and ask: hovering the badge offers it. The owner drags a box around
// part of the page; the picture of that area is drawn here in the browser
// (the vendored modern-screenshot, /_seed/badge/modern-screenshot.js) and left at
// /_seed/ask-draft. Then the control plane opens with
// #ask=<this page's path>&draft=<id>, where the owner says what should
// change and alone decides to send it. This script never sends a message:
// it shares the page with the organism's scripts, which could drive it.
(function () {
  'use strict';
  if (window.top !== window || document.documentElement.hasAttribute('data-seed-badge')) return;
  document.documentElement.setAttribute('data-seed-badge', '');

  const PATH_MAX = 200; // what #ask= may carry (the control plane checks again)
  const SIDE_MAX = 4096; // the kernel's limits for a draft
  const BYTES_MAX = 3 * 1024 * 1024;
  const SVG = 'http://www.w3.org/2000/svg';

  fetch('/_seed/badge', { credentials: 'same-origin', cache: 'no-store' })
    .then((res) => { if (res.status === 200) show(); })
    .catch(() => {});

  // The page's path, as #ask= may carry it: path characters only, bounded.
  function pagePath() {
    const p = window.location.pathname;
    return p.length <= PATH_MAX && /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/.test(p) ? p : '/';
  }

  function seedMark() {
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('viewBox', '0 0 64 64');
    svg.setAttribute('aria-hidden', 'true');
    const parts = [
      ['M32 56 V31', 'none', '#3f7d4e'],
      ['M32 35 C 31 24, 23 16, 11 16 C 11 28, 19 35, 32 35 Z', '#3f7d4e'],
      ['M32 30 C 33 18, 41 10, 53 10 C 53 22, 45 30, 32 30 Z', '#5f9a6c'],
    ];
    for (const [d, fill, stroke] of parts) {
      const p = document.createElementNS(SVG, 'path');
      p.setAttribute('d', d);
      p.setAttribute('fill', fill);
      if (stroke) { p.setAttribute('stroke', stroke); p.setAttribute('stroke-width', '4'); p.setAttribute('stroke-linecap', 'round'); }
      svg.appendChild(p);
    }
    return svg;
  }

  const STYLE = `
    :host { all: initial; }
    .badge { position: fixed; right: 16px; bottom: 16px; z-index: 2147483647; display: flex;
      flex-direction: row-reverse; align-items: center; gap: 6px; font: 13px/1.2 system-ui, sans-serif; }
    .home { display: block; width: 40px; height: 40px; border-radius: 50%; background: #fff;
      box-shadow: 0 1px 6px rgba(0,0,0,.3); overflow: hidden; }
    .home img, .home svg { width: 100%; height: 100%; object-fit: contain; display: block; }
    .ask { display: none; padding: 6px 10px; border: 0; border-radius: 14px; background: #3f7d4e;
      color: #fff; cursor: pointer; font: inherit; box-shadow: 0 1px 4px rgba(0,0,0,.3); }
    .badge:hover .ask, .badge:focus-within .ask { display: block; }
    .layer { position: fixed; inset: 0; z-index: 2147483647; cursor: crosshair; background: rgba(0,0,0,.08); }
    .box { position: fixed; border: 2px dashed #3f7d4e; background: rgba(63,125,78,.12); pointer-events: none; }
    .note { position: fixed; left: 50%; top: 12px; transform: translateX(-50%); background: #fff; color: #222;
      padding: 6px 12px; border-radius: 6px; box-shadow: 0 1px 6px rgba(0,0,0,.3); }
  `;

  function show() {
    const host = document.createElement('seed-badge');
    const root = host.attachShadow({ mode: 'closed' });
    const style = document.createElement('style');
    style.textContent = STYLE;
    const badge = document.createElement('div');
    badge.className = 'badge';
    const home = document.createElement('a');
    home.className = 'home';
    home.href = '/_seed/';
    home.title = 'Your Seed';
    const img = document.createElement('img');
    img.alt = 'Your Seed';
    img.src = '/_seed/badge/logo';
    img.addEventListener('error', () => img.replaceWith(seedMark()));
    home.appendChild(img);
    const ask = document.createElement('button');
    ask.type = 'button';
    ask.className = 'ask';
    ask.textContent = 'Point and ask';
    ask.addEventListener('click', () => pointAndAsk(host, root, badge));
    badge.append(home, ask);
    root.append(style, badge);
    (document.body || document.documentElement).appendChild(host);
  }

  // A full-page layer on which the owner drags a box; resolves with it in
  // viewport coordinates, or null (Escape, or a box too small to mean one).
  function dragBox(root) {
    return new Promise((resolve) => {
      const layer = document.createElement('div');
      layer.className = 'layer';
      const note = document.createElement('div');
      note.className = 'note';
      note.textContent = 'Drag a box around what should change (Esc to stop)';
      const box = document.createElement('div');
      box.className = 'box';
      box.hidden = true;
      layer.append(note, box);
      root.appendChild(layer);
      let start = null;
      const rect = (e) => ({
        x: Math.min(start.x, e.clientX), y: Math.min(start.y, e.clientY),
        w: Math.abs(e.clientX - start.x), h: Math.abs(e.clientY - start.y),
      });
      const done = (value) => { layer.remove(); window.removeEventListener('keydown', onKey, true); resolve(value); };
      const onKey = (e) => { if (e.key === 'Escape') done(null); };
      window.addEventListener('keydown', onKey, true);
      layer.addEventListener('mousedown', (e) => { start = { x: e.clientX, y: e.clientY }; e.preventDefault(); });
      layer.addEventListener('mousemove', (e) => {
        if (!start) return;
        const r = rect(e);
        Object.assign(box.style, { left: r.x + 'px', top: r.y + 'px', width: r.w + 'px', height: r.h + 'px' });
        box.hidden = false;
      });
      layer.addEventListener('mouseup', (e) => {
        if (!start) return;
        const r = rect(e);
        done(r.w >= 4 && r.h >= 4 ? r : null);
      });
    });
  }

  let library = null;
  function loadLibrary() {
    if (!library) {
      library = new Promise((resolve, reject) => {
        const s = document.createElement('script');
        s.src = '/_seed/badge/modern-screenshot.js';
        s.onload = () => (window.modernScreenshot ? resolve(window.modernScreenshot) : reject(new Error('no library')));
        s.onerror = () => reject(new Error('the screenshot library did not load'));
        document.head ? document.head.appendChild(s) : document.documentElement.appendChild(s);
      });
    }
    return library;
  }

  function toBlob(canvas, type, quality) {
    return new Promise((resolve) => canvas.toBlob(resolve, type, quality));
  }

  // The picture of rect (viewport coordinates): the page drawn by
  // modern-screenshot, cut to the box, scaled down to the kernel's limits.
  async function picture(host, rect) {
    const lib = await loadLibrary();
    const page = await lib.domToCanvas(document.documentElement, {
      scale: 1,
      filter: (node) => node !== host,
    });
    const scale = Math.min(1, SIDE_MAX / rect.w, SIDE_MAX / rect.h);
    const out = document.createElement('canvas');
    out.width = Math.max(1, Math.round(rect.w * scale));
    out.height = Math.max(1, Math.round(rect.h * scale));
    out.getContext('2d').drawImage(page, rect.x + window.scrollX, rect.y + window.scrollY, rect.w, rect.h,
      0, 0, out.width, out.height);
    let blob = await toBlob(out, 'image/png');
    if (!blob || blob.size > BYTES_MAX) blob = await toBlob(out, 'image/jpeg', 0.8);
    return blob && blob.size <= BYTES_MAX ? blob : null;
  }

  async function pointAndAsk(host, root, badge) {
    badge.hidden = true;
    const rect = await dragBox(root);
    badge.hidden = false;
    if (!rect) return;
    // Opened now, while the click still counts as the owner's: the control
    // plane (its own origin, COOP same-origin) loads in it once the picture
    // is left.
    const tab = window.open('about:blank', '_blank');
    let fragment = 'ask=' + encodeURIComponent(pagePath());
    try {
      const blob = await picture(host, rect);
      if (blob) {
        const res = await fetch('/_seed/ask-draft', {
          method: 'POST', credentials: 'same-origin', cache: 'no-store',
          headers: { 'Content-Type': blob.type }, body: blob,
        });
        const data = res.status === 201 ? await res.json() : null;
        if (data && /^[0-9a-f]{32}$/.test(data.id)) fragment += '&draft=' + data.id;
      }
    } catch (e) {
      // Without a picture the ask still opens: the owner says it in words.
    }
    const url = '/_seed/#' + fragment;
    if (tab) tab.location.href = url;
    else window.location.href = url;
  }
})();
