// app.js — the control plane: chat, evolutions with live progress, approval
// and question cards, generations, knowledge, skills, logs and settings.
// The API token comes from a <meta> tag of the page (served only for
// top-level navigations) and travels only in the X-Seed-Token header.
// Text from the Seed, the model or the organism is only ever put into the
// page as text (SeedDom.h / textContent) or through SeedMd's safe renderer.
'use strict';

(function () {
  const { h, $, clear, showError, time } = SeedDom;
  const token = document.querySelector('meta[name="seed-token"]').content;
  const seedName = document.querySelector('meta[name="seed-name"]').content;
  // Where the organism's admin screens are framed from (organism.localhost
  // on this page's port), or "" in a layout without them: the kernel fills
  // it in and lets this page's CSP frame that origin only.
  const adminOrigin = document.querySelector('meta[name="seed-admin-origin"]').content;

  const ENDED = new Set(['complete', 'failed', 'cancelled', 'rolled_back']);
  const MAIN_PATH = ['requested', 'planning', 'planned', 'mutating', 'building', 'testing', 'running',
    'observing', 'reflecting', 'ready', 'applying', 'complete'];
  const RECENT_MS = 15 * 60 * 1000; // finished evolutions stay on the chat screen this long

  const state = {
    view: null,
    askDraft: null, // the id of the picture point and ask left, shown above Send
    identity: null,
    status: null,
    approvals: [],
    evolutions: [],
    evolutionsKnown: false,  // the list above came from the server (not yet: no "none yet")
    preview: null,           // the evolution whose preview runs (the bar), or null
    decideAsk: null,         // {id, action}: the candidate's preview bar sent the owner here to decide
    messages: new Map(),     // id → message
    messagesKnown: false,    // the chat's history came from the server (not yet: no "no purpose yet")
    last: new Map(),         // evolution id → {kind, text, at}: its latest step
    gens: new Map(),         // evolution id → the generation it committed (from its "committed" note)
    seenActive: new Set(),   // evolutions seen running in this page
    detail: null,            // the evolution shown in detail
    detailOpen: new Set(),   // event ids whose details are expanded
    currentLog: 'kernel',
    sending: false,
    pendingText: null,       // the owner's message on its way
    detailDiff: undefined,   // the diff of the evolution in detail (or the error getting it)
    mind: null,              // GET mind: the model, where its key comes from, the providers
    mindPick: null,          // the provider picked in Settings → Mind (null: the current one)
    mindSig: null,           // provider, model and key source last shown
    models: new Map(),       // provider → its list of models (or the error getting it)
    screens: null,           // GET extensions: the organism's admin screens and what was refused
  };

  // ---- the API ----

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(method, path, body) {
    const init = {
      method,
      headers: { 'X-Seed-Token': token },
      credentials: 'same-origin',
      cache: 'no-store',
    };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch('/_seed/api/' + path, init);
    } catch (e) {
      throw new ApiError(0, 'The kernel is not answering (it may be restarting).');
    }
    let data = null;
    try {
      data = await res.json();
    } catch (e) {
      data = null;
    }
    if (res.status === 401) signedOut();
    if (!res.ok) {
      throw new ApiError(res.status, (data && typeof data.error === 'string' && data.error) ||
        res.status + ' ' + res.statusText);
    }
    return data;
  }

  // A 401: signed out (here or elsewhere) or the session expired, so
  // reloading shows the private page. Once: if the reloaded page is refused
  // again within a minute, something else is wrong, and reloading again
  // would only loop; the owner is told instead.
  const RELOAD_KEY = 'seed-reloaded-on-401';
  let reloadGaveUp = false; // this page never reloads on a 401 again
  function signedOut() {
    const last = Number(sessionStorage.getItem(RELOAD_KEY)) || 0;
    const now = Date.now();
    if (!reloadGaveUp && !(now - last >= 0 && now - last < 60000)) {
      sessionStorage.setItem(RELOAD_KEY, String(now));
      window.location.reload();
      return;
    }
    reloadGaveUp = true;
    showError($('global-error'), new ApiError(401, 'The kernel refused this page\'s calls (401) again right after ' +
      'a reload, so the page is not reloading again. Reload it yourself to sign in again.'));
  }

  function debounce(fn, ms) {
    let t = null;
    return (...args) => {
      clearTimeout(t);
      t = setTimeout(() => fn(...args), ms);
    };
  }

  function label(key) {
    if (Object.prototype.hasOwnProperty.call(LABELS, key)) return LABELS[key];
    const s = String(key).replace(/_/g, ' ');
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  // What the settings and the status call things, in words a person reads
  // (anything not here falls back to its key, spaced and capitalised).
  const LABELS = {
    server: 'Server', model: 'Model (seed.yaml)', database: 'Database', sandbox: 'Sandboxes',
    organism: 'App (organism)', evolution: 'Evolutions', permissions: 'Permissions', kernel: 'Kernel boundary',
    name: 'Name', addr: 'Address', allowed_hosts: 'Other host names', control_host: 'Control plane host',
    control_plane: 'Control plane', provider: 'Provider', base_url: 'Server address', api_key_env: 'Key variable',
    max_tokens: 'Most tokens per reply', context_chars: 'Most characters per request', external: 'External database', driver: 'Driver', build: 'Build command',
    test: 'Test command', run: 'Run command', port: 'Port', health: 'Health check', migrations: 'Migrations folder',
    max_repair_attempts: 'Repair attempts', max_agent_turns: 'Model calls per evolution',
    command_timeout_seconds: 'Time limit per command', model_wait_seconds: 'Waiting for an unreachable model', safe: 'Safe actions', review: 'Reviewed actions',
    dangerous: 'Dangerous actions', require_plan_approval: 'Plans need your approval',
    require_apply_approval: 'Going live needs your approval', evolvable: 'Changes freely',
    seed: 'Seed name', slug: 'Short name', tagline: 'Tagline', purpose: 'Purpose', accent: 'Accent colour',
    generation: 'Generation', url: 'Address', control_url: 'Control plane', doctor: 'This host',
    admin_screens: 'Admin screens',
  };
  // Values of the settings that read better as words.
  const DECISIONS = { allow: 'allowed', ask: 'asked first', deny: 'denied' };

  // Seconds as "1 min 30 s", "2 h 5 min", "3 d 4 h".
  function duration(sec) {
    const s = Math.max(0, Math.floor(Number(sec) || 0));
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min' + (s % 60 ? ' ' + (s % 60) + ' s' : '');
    if (s < 86400) return Math.floor(s / 3600) + ' h' + (Math.floor(s / 60) % 60 ? ' ' + (Math.floor(s / 60) % 60) + ' min' : '');
    return Math.floor(s / 86400) + ' d' + (Math.floor(s / 3600) % 24 ? ' ' + (Math.floor(s / 3600) % 24) + ' h' : '');
  }

  function capital(s) {
    const t = String(s === undefined || s === null ? '' : s).replace(/_/g, ' ');
    return t.charAt(0).toUpperCase() + t.slice(1);
  }

  function short(s, n) {
    const t = String(s === undefined || s === null ? '' : s).replace(/\s+/g, ' ').trim();
    return t.length > n ? t.slice(0, n - 1) + '…' : t;
  }

  function evoById(id) {
    return state.evolutions.find((e) => e.id === id) || null;
  }

  // The generation an evolution became: the store's column, else its
  // "committed" note (seen live, or among its events).
  function generationOf(e) {
    if (!e) return null;
    if (typeof e.to_generation === 'number') return e.to_generation;
    if (state.gens.has(e.id)) return state.gens.get(e.id);
    const note = (e.events || []).filter((x) => x.kind === 'note' && x.data && typeof x.data.generation === 'number').pop();
    return note ? note.data.generation : null;
  }

  function evoName(e) {
    return (e && (e.title || e.intent)) || (e && e.id) || 'an evolution';
  }

  // ---- identity and theme ----

  function hexColor(s) {
    return typeof s === 'string' && /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.test(s) ? s : null;
  }

  function luminance(hex) {
    let x = hex.slice(1);
    if (x.length === 3) x = x.split('').map((c) => c + c).join('');
    const [r, g, b] = [0, 2, 4].map((i) => {
      const v = parseInt(x.slice(i, i + 2), 16) / 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  }

  function applyIdentity(id) {
    state.identity = id;
    const name = (id && id.name) || (id && id.seed) || seedName;
    $('seed-name').textContent = name;
    $('tagline').textContent = (id && id.tagline) || 'Control plane';
    document.title = name + ' · Seed';
    const root = document.documentElement;
    const accent = hexColor(id && id.accent);
    if (accent) {
      // CSSOM, not a style attribute: allowed by the strict CSP.
      root.style.setProperty('--accent', accent);
      root.style.setProperty('--on-accent', luminance(accent) > 0.45 ? '#111' : '#fff');
    } else {
      root.style.removeProperty('--accent');
      root.style.removeProperty('--on-accent');
    }
    const logo = $('logo');
    // Only the kernel's own route (served with Content-Security-Policy:
    // sandbox); an <img> cannot run the SVG's script either way.
    const url = id && id.logo === '/_seed/logo' ? id.logo : null;
    if (url && logo.getAttribute('src') !== url) {
      logo.src = url;
      logo.alt = name + ' logo';
    }
    if (!logo.dataset.watched) {
      logo.dataset.watched = '1';
      logo.addEventListener('error', () => { logo.hidden = true; $('logo-fallback').hidden = false; });
      logo.addEventListener('load', () => { logo.hidden = false; $('logo-fallback').hidden = true; });
    }
    if (!url) {
      logo.hidden = true;
      $('logo-fallback').hidden = false;
    }
    if (state.view === 'settings') renderIdentityFacts();
  }

  async function refreshIdentity() {
    try {
      applyIdentity(await api('GET', 'identity'));
    } catch (e) {
      if (!state.identity) applyIdentity(null);
    }
  }

  // ---- status ----

  function organismState(status) {
    const o = status && status.organism;
    if (typeof o === 'string') return o;
    if (o && typeof o.state === 'string') return o.state;
    return 'unknown';
  }

  function show(value) {
    if (value === null || value === undefined || value === '') return '—';
    if (value === true) return 'yes';
    if (value === false) return 'no';
    if (Array.isArray(value)) return value.length ? value.map(show).join(', ') : '—';
    if (typeof value === 'object') {
      return Object.entries(value).map(([k, v]) => label(k).toLowerCase() + ' ' + show(v)).join(' · ');
    }
    return String(value);
  }

  function facts(dl, entries) {
    clear(dl);
    for (const [k, v] of entries) dl.append(h('dt', { text: label(k) }), h('dd', {}, v instanceof Node ? v : show(v)));
  }

  // The status as a person reads it: "Organism: Running", "Kernel: pid 1234, up 1 min 30 s".
  function statusFacts(status) {
    const rows = [];
    const k = status.kernel && typeof status.kernel === 'object' ? status.kernel : null;
    const m = status.mind && typeof status.mind === 'object' ? status.mind : null;
    for (const [key, v] of Object.entries(status)) {
      if (key === 'name') continue; // the header and Identity show it
      if (key === 'organism') rows.push(['Organism', capital(organismState(status))]);
      else if (key === 'kernel' && k) {
        rows.push(['Kernel', ['pid ' + k.pid, 'up ' + duration(k.uptime_seconds), k.version ? 'version ' + k.version : null]
          .filter(Boolean).join(', ')]);
      } else if (key === 'mind' && m) rows.push(['Mind', mindSummary(m)]);
      else if (key === 'owner_change' && v && typeof v === 'object') rows.push(['Your commit', String(v.text || v.state || '')]);
      else if (key === 'postgres' && v && typeof v === 'object') {
        rows.push(['Database server', [v.state === 'down' ? 'down' : 'up',
          v.restarts ? 'started again ' + v.restarts + (v.restarts === 1 ? ' time' : ' times') : null,
          typeof v.last_failure === 'string' ? v.last_failure : null].filter(Boolean).join('; ')]);
      }
      else rows.push([label(key), v]);
    }
    return rows;
  }

  function renderStatus() {
    const status = state.status || {};
    const st = organismState(status);
    $('organism-state').textContent = st;
    $('body-state').dataset.state = st;
    $('generation').textContent = typeof status.generation === 'number' ? String(status.generation) : '…';
    // The start-up doctor: why sandboxes (so evolutions) cannot run here, and the fix.
    const doctor = $('doctor');
    doctor.textContent = typeof status.doctor === 'string' ? 'This host: ' + status.doctor : '';
    doctor.hidden = typeof status.doctor !== 'string';
    // The Seed's own PostgreSQL died: the kernel starts it again; until then, say so.
    const pgDown = status.postgres && status.postgres.state === 'down';
    const pgBanner = $('postgres');
    pgBanner.textContent = pgDown ? 'The database is down: ' + String(status.postgres.last_failure || '') : '';
    pgBanner.hidden = !pgDown;
    // The owner's own commits on main: being verified, failed (why, and how to fix or revert).
    const owner = $('owner-change');
    const ownerText = status.owner_change && typeof status.owner_change.text === 'string' ? status.owner_change.text : '';
    owner.textContent = ownerText;
    owner.hidden = !ownerText;
    owner.dataset.state = ownerText ? String(status.owner_change.state || '') : '';
    renderMindState(status.mind);
    if (state.view === 'settings') {
      facts($('status-facts'), statusFacts(status));
      $('status-updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    }
  }

  // ---- the mind: the model the Seed thinks with ----

  const KEY_SOURCES = {
    start: (m) => 'passed at start' + (m.key_env ? ' (-e ' + m.key_env + ')' : ''),
    lent: () => 'lent in the control plane, until the Seed restarts',
    none: (m) => 'none' + (m.key_env ? ': start the Seed with -e ' + m.key_env + ', or lend one here' : ''),
    not_needed: () => 'not needed by this server',
  };

  function keySource(m) {
    const f = KEY_SOURCES[m && m.key_source];
    return f ? f(m) : '—';
  }

  function mindSummary(m) {
    return (m.model || '?') + ' via ' + (m.provider || '?') + (m.ready ? '' : ' · cannot think yet');
  }

  function noKey(m) {
    return m && m.key_source === 'none' && typeof m.key_env === 'string';
  }

  function mindReady() {
    const m = state.status && state.status.mind;
    return !m || m.ready !== false; // an older kernel without a mind: let the API say
  }

  // The header, the banner with the lend-a-key form, and the composer.
  function renderMindState(m) {
    const el = $('mind-state');
    el.hidden = !m;
    if (!m) return;
    // Another key or model (lent, forgotten, a restart): the lists may differ.
    const sig = [m.provider, m.model, m.key_source].join(' ');
    if (state.mindSig && state.mindSig !== sig) {
      state.models.clear();
      if (!state.mind || [state.mind.provider, state.mind.model, state.mind.key_source].join(' ') !== sig) refreshMind();
    }
    state.mindSig = sig;
    $('mind-model').textContent = m.model || '?';
    el.dataset.ready = m.ready ? 'yes' : 'no';
    el.title = m.ready ? 'Thinks with ' + m.model + ' via ' + m.provider + ' (key: ' + keySource(m) + ')' : (m.why_not || 'It cannot think yet');
    const banner = $('no-mind');
    const was = banner.hidden;
    banner.hidden = !!m.ready;
    if (!m.ready) {
      $('no-mind-text').textContent = noKey(m) ? 'No model key: the Seed cannot think yet. Start it with -e ' + m.key_env +
        ', or lend a key here:' : (m.why_not || 'The Seed cannot think yet.');
      if (was) fillProviders($('lend-provider'), m.provider);
    }
    updateComposer();
  }

  // A <select> of the providers the control plane may use, selected first.
  function fillProviders(select, selected) {
    const providers = state.mind && Array.isArray(state.mind.providers) ? state.mind.providers.filter((p) => p.available)
      : [{ name: selected }];
    const keep = select.value || selected;
    clear(select);
    for (const p of providers) select.append(h('option', { value: p.name, text: p.name }));
    select.value = providers.some((p) => p.name === keep) ? keep : selected;
  }

  async function refreshMind() {
    try {
      state.mind = await api('GET', 'mind');
      showError($('mind-error'), null);
    } catch (e) {
      showError($('mind-error'), e);
      return;
    }
    if (!$('no-mind').hidden) fillProviders($('lend-provider'), state.mind.provider);
    if (state.view === 'settings') renderMindCard();
  }

  // Settings → Mind.
  function renderMindCard() {
    const m = state.mind;
    if (!m) return;
    const rows = [['Provider', m.provider], ['Model', m.model], ['Key', keySource(m)]];
    if (!m.ready && m.why_not) rows.push(['Cannot think', m.why_not]);
    if (m.default && (m.default.provider !== m.provider || m.default.model !== m.model)) {
      rows.push(['Default (seed.yaml)', m.default.model + ' via ' + m.default.provider]);
    }
    facts($('mind-facts'), rows);
    const pick = state.mindPick || m.provider;
    fillProviders($('mind-provider'), pick);
    const provider = $('mind-provider').value;
    const input = $('mind-model-input');
    if (!input.value || input.dataset.provider !== provider) input.value = provider === m.provider ? m.model : '';
    input.dataset.provider = provider;
    const p = (m.providers || []).find((x) => x.name === provider);
    const lent = p && p.key_source === 'lent';
    $('mind-key-label').textContent = 'Lend a key for ' + provider;
    $('mind-forget').hidden = !lent;
    renderModels(provider);
  }

  function renderModels(provider) {
    const list = clear($('mind-models'));
    const note = $('mind-models-note');
    const got = state.models.get(provider);
    if (!got) {
      note.textContent = 'Looking up the models of ' + provider + '…';
      loadModels(provider);
      return;
    }
    if (got instanceof Error) {
      note.textContent = 'The list of models is not available: ' + got.message;
      return;
    }
    for (const x of got.models || []) list.append(h('option', { value: x.id, text: x.name && x.name !== x.id ? x.name : '' }));
    const n = (got.models || []).length;
    note.textContent = n + (n === 1 ? ' model' : ' models') + ' of ' + provider + ' that can use tools' +
      (got.truncated ? ' (the first ones)' : '') + '. Type to search, or any model name; it is checked before it is used.';
  }

  async function loadModels(provider, force) {
    if (!force && state.models.has(provider)) return;
    state.models.set(provider, null);
    let got;
    try {
      got = await api('GET', 'mind/models?provider=' + encodeURIComponent(provider));
    } catch (e) {
      got = e;
    }
    state.models.set(provider, got);
    if (state.view === 'settings' && $('mind-provider').value === provider) renderModels(provider);
  }

  function mindChanged(m) {
    state.mind = m;
    if (state.status) state.status.mind = { provider: m.provider, model: m.model, key_source: m.key_source, key_env: m.key_env,
      ready: m.ready, why_not: m.why_not };
    renderMindState(state.status ? state.status.mind : m);
    if (state.view === 'settings') renderMindCard();
    refreshStatus();
  }

  // Reads and clears a key input: the key is not left in the page.
  function takeKey(input) {
    const key = input.value.trim();
    input.value = '';
    return key;
  }

  async function lendKey(provider, key, errorEl) {
    if (!key) {
      showError(errorEl, new Error('Paste a key first.'));
      return null;
    }
    showError(errorEl, null);
    try {
      const m = await api('POST', 'mind/key', { provider, key });
      state.models.delete(provider); // its list may differ with this key
      mindChanged(m);
      return m;
    } catch (e) {
      showError(errorEl, e);
      return null;
    }
  }

  async function lendFromBanner(ev) {
    ev.preventDefault();
    const provider = $('lend-provider').value;
    const m = await lendKey(provider, takeKey($('lend-key')), $('lend-error'));
    if (m && !m.ready && m.provider !== provider) {
      // A key for another provider: it needs a model of that provider.
      state.mindPick = provider;
      window.location.hash = '#settings';
      notice($('mind-notice'), 'Key lent for ' + provider + '. Choose one of its models below to think with it.');
    }
  }

  async function lendFromSettings(ev) {
    ev.preventDefault();
    const provider = $('mind-provider').value;
    const m = await lendKey(provider, takeKey($('mind-key')), $('mind-error'));
    if (m) notice($('mind-notice'), 'Key lent for ' + provider + ' until the Seed restarts.');
  }

  async function forgetKey() {
    const provider = $('mind-provider').value;
    try {
      const m = await api('POST', 'mind/key/forget', { provider });
      state.models.delete(provider);
      mindChanged(m);
      notice($('mind-notice'), 'Forgot the key lent for ' + provider + '.');
    } catch (e) {
      showError($('mind-error'), e);
    }
  }

  async function chooseModel(ev) {
    ev.preventDefault();
    const provider = $('mind-provider').value;
    const model = $('mind-model-input').value.trim();
    if (!model) {
      showError($('mind-error'), new Error('Type or pick a model first.'));
      return;
    }
    showError($('mind-error'), null);
    const button = $('mind-choose');
    button.disabled = true;
    notice($('mind-notice'), 'Checking ' + model + ' with one short call…');
    try {
      const m = await api('POST', 'mind', { provider, model });
      state.mindPick = null;
      mindChanged(m);
      notice($('mind-notice'), 'Now thinking with ' + m.model + ' via ' + m.provider + '.');
    } catch (e) {
      $('mind-notice').hidden = true;
      showError($('mind-error'), e);
    } finally {
      button.disabled = false;
    }
  }

  function notice(el, text) {
    el.textContent = text;
    el.hidden = !text;
  }

  async function refreshStatus() {
    try {
      state.status = await api('GET', 'status');
      renderStatus();
      showError($('global-error'), null);
      showError($('status-error'), null);
    } catch (err) {
      showError(state.view === 'settings' ? $('status-error') : $('global-error'), err);
    }
  }

  // ---- a confirmation dialog (a real <dialog>, not window.confirm) ----

  function confirmDialog(title, text, ok) {
    const dlg = $('confirm');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    $('confirm-ok').textContent = ok || 'Confirm';
    dlg.returnValue = '';
    return new Promise((resolve) => {
      dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
      dlg.showModal();
      $('confirm-cancel').focus();
    });
  }

  // ---- approvals and questions ----

  // Any JSON value, in full and readable: strings keep every character
  // (multi-line ones in a <pre>), objects become labelled fields.
  function renderValue(v, depth) {
    const d = depth || 0;
    if (v === null || v === undefined) return h('span', { class: 'value-null', text: 'null' });
    if (typeof v === 'string') {
      if (v.includes('\n') || v.length > 100) return h('pre', { class: 'value-text', text: v });
      return h('span', { class: 'value-str', text: v === '' ? '(empty)' : v });
    }
    if (typeof v !== 'object') return h('span', { class: 'value-atom', text: String(v) });
    if (d > 12) return h('pre', { class: 'value-text', text: JSON.stringify(v, null, 2) });
    if (Array.isArray(v)) {
      if (!v.length) return h('span', { class: 'value-null', text: '(none)' });
      return h('ol', { class: 'value-list' }, v.map((x) => h('li', {}, renderValue(x, d + 1))));
    }
    const keys = Object.keys(v);
    if (!keys.length) return h('span', { class: 'value-null', text: '(nothing)' });
    return h('dl', { class: 'value-fields' }, keys.map((k) => [h('dt', { text: k }), h('dd', {}, renderValue(v[k], d + 1))]));
  }

  function approvalTitle(a) {
    switch (a.kind) {
      case 'tool': return a.level === 'dangerous' ? 'Approve a dangerous action?' : 'Approve an action?';
      case 'plan': return 'Approve this plan?';
      case 'apply': return 'Apply this generation?';
      case 'question': return 'The Seed asks you';
      default: return 'Waiting for you';
    }
  }

  async function decide(card, a, approved) {
    for (const b of card.querySelectorAll('button, textarea')) b.disabled = true;
    const err = card.querySelector('.error');
    try {
      await api('POST', 'approvals/' + encodeURIComponent(a.id), { approved });
      card.classList.add('decided');
      card.querySelector('.decision').textContent = !approved ? 'Denied.'
        : a.evolution_id ? 'Approved. The evolution goes on.' : 'Approved.';
      if (a.tool === 'request_outbound_access' && state.view === 'settings') setTimeout(refreshOutbound, 600);
      setTimeout(refreshApprovals, 600);
    } catch (e) {
      showError(err, e);
      for (const b of card.querySelectorAll('button, textarea')) b.disabled = false;
    }
  }

  async function answer(card, a, text) {
    const err = card.querySelector('.error');
    if (!text.trim()) {
      showError(err, new Error('Write an answer first.'));
      return;
    }
    for (const b of card.querySelectorAll('button, textarea')) b.disabled = true;
    try {
      await api('POST', 'evolutions/' + encodeURIComponent(a.evolution_id) + '/answer', { approval: a.id, answer: text });
      card.classList.add('decided');
      card.querySelector('.decision').textContent = 'Answered. The evolution goes on.';
      setTimeout(refreshApprovals, 600);
    } catch (e) {
      showError(err, e);
      for (const b of card.querySelectorAll('button, textarea')) b.disabled = false;
    }
  }

  // request_outbound_access, shown in full: exactly this is granted.
  function outboundRequest(args) {
    const list = (v) => (Array.isArray(v) ? v : []).map(String);
    const hosts = list(args.hosts), secrets = list(args.secrets);
    const forText = args.for === 'evolutions' ? 'evolution, build and test commands' : 'the live app (and previews)';
    const dl = h('dl', { class: 'facts' });
    facts(dl, [['hosts', h('span', { class: 'hosts', text: hosts.join('\n') })], ['for', forText],
      ['secrets', secrets.length ? secrets.join(', ') : '(none)'],
      ['reason', typeof args.reason === 'string' && args.reason ? args.reason : '(none given)']]);
    return h('div', { class: 'request outbound-request' },
      h('p', { class: 'tool-line' }, 'The Seed asks for outbound access ', h('code', { text: 'request_outbound_access' }),
        ' · level ', h('strong', { class: 'level level-dangerous', text: 'dangerous' })),
      dl,
      secrets.length ? h('p', { class: 'outbound-warning', text: 'A granted secret can be sent anywhere the app may ' +
        'reach. Approve secrets only together with the hosts they are meant for.' }) : null);
  }

  // change_data and call_api, shown in full: exactly this runs on the live
  // data or is sent to the live app once approved. Statement and body are
  // shown as they are sent, every character, never cut.
  function liveRequest(tool, args) {
    const dl = h('dl', { class: 'facts' });
    const exact = (text) => h('pre', { class: ['value-text', 'source'], text });
    const str = (v) => (typeof v === 'string' ? v : '');
    const bytes = (v) => new TextEncoder().encode(v).length + ' bytes';
    let intro;
    if (tool === 'change_data') {
      intro = 'The Seed asks to change the live data with ';
      const sql = str(args.sql);
      facts(dl, [['statement', exact(sql)], ['size', bytes(sql)],
        ['runs', "once, on the live database, as the app's own role, when you approve"]]);
    } else {
      intro = 'The Seed asks to send a request to the live app with ';
      const headers = args.headers && typeof args.headers === 'object' ? Object.entries(args.headers) : [];
      const body = str(args.body);
      facts(dl, [['request', h('code', { class: 'http-line', text: str(args.method) + ' ' + str(args.path) })],
        ['headers', headers.length ? exact(headers.map(([k, v]) => k + ': ' + v).join('\n')) : '(none)'],
        ['body', typeof args.body === 'string' ? exact(body) : '(none)'],
        ['size', bytes(body)]]);
    }
    return h('div', { class: 'request live-request' },
      h('p', { class: 'tool-line' }, intro, h('code', { text: tool }),
        ' · level ', h('strong', { class: 'level level-dangerous', text: 'dangerous' })),
      dl);
  }

  // create_routine, shown in full: exactly this routine is created, and its
  // prompt runs on its schedule, every character as shown.
  function routineRequest(args) {
    const str = (v) => (typeof v === 'string' ? v : '');
    const dl = h('dl', { class: 'facts' });
    facts(dl, [['name', str(args.name)],
      ['schedule', h('span', {}, h('code', { text: str(args.schedule) }), ' ', str(args.tz) || 'UTC')],
      ['prompt', h('pre', { class: ['value-text', 'source'], text: str(args.prompt) })],
      ['runs', 'on its schedule, with read-only tools (it never changes anything); reports come to the chat']]);
    return h('div', { class: 'request routine-request' },
      h('p', { class: 'tool-line' }, 'The Seed asks to create a routine with ', h('code', { text: 'create_routine' }),
        ' · level ', h('strong', { class: 'level level-dangerous', text: 'dangerous' })),
      dl);
  }

  function approvalCard(a) {
    const evo = evoById(a.evolution_id);
    const req = a.request;
    const body = [];
    if (a.kind === 'tool' && req && typeof req === 'object' && req.tool === 'request_outbound_access' &&
        req.arguments && typeof req.arguments === 'object') {
      body.push(outboundRequest(req.arguments));
    } else if (a.kind === 'tool' && req && typeof req === 'object' && (req.tool === 'change_data' || req.tool === 'call_api') &&
        req.arguments && typeof req.arguments === 'object') {
      body.push(liveRequest(req.tool, req.arguments));
    } else if (a.kind === 'tool' && req && typeof req === 'object' && req.tool === 'create_routine' &&
        req.arguments && typeof req.arguments === 'object') {
      body.push(routineRequest(req.arguments));
    } else if (a.kind === 'tool' && req && typeof req === 'object') {
      body.push(h('p', { class: 'tool-line' }, 'Tool ', h('code', { text: req.tool || a.tool || '?' }),
        ' · level ', h('strong', { class: 'level level-' + (req.level || a.level), text: req.level || a.level || '?' })));
      body.push(h('div', { class: 'request' }, renderValue(req.arguments)));
    } else if (a.kind === 'question' && req && typeof req.question === 'string') {
      body.push(h('p', { class: 'question' }, h('strong', { text: req.question })));
    } else {
      body.push(h('div', { class: 'request' }, renderValue(req)));
    }
    const card = h('article', { class: ['card', 'approval', 'approval-' + a.kind], dataset: { approval: a.id } },
      h('div', { class: 'card-head' },
        h('h2', { text: approvalTitle(a) }),
        h('span', { class: 'updated' }, time(Number(a.created_at)))),
      a.evolution_id ? h('p', { class: 'muted' }, 'For ', h('a', { href: '#evolution/' + a.evolution_id, text: evoName(evo) }))
        : h('p', { class: 'muted', text: 'Asked in the chat' }),
      body,
      h('p', { class: 'decision', role: 'status' }),
      h('p', { class: 'error', role: 'alert', hidden: true }));
    if (a.kind === 'question') {
      const ta = h('textarea', { rows: 3, maxlength: 16384, placeholder: 'Your answer', aria: { label: 'Your answer' } });
      card.append(ta, h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'primary', text: 'Answer', on: { click: () => answer(card, a, ta.value) } })));
    } else {
      card.append(h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'danger-quiet', text: 'Deny', on: { click: () => decide(card, a, false) } }),
        h('button', { type: 'button', class: 'primary', text: 'Approve', on: { click: () => decide(card, a, true) } })));
    }
    return card;
  }

  function renderApprovals() {
    const box = $('attention');
    // Keep cards that are being answered (focus, typed text) in place.
    const keep = new Map();
    for (const c of box.querySelectorAll('[data-approval]')) keep.set(c.dataset.approval, c);
    const ids = new Set(state.approvals.map((a) => a.id));
    for (const [id, c] of keep) if (!ids.has(id) && !c.classList.contains('decided')) c.remove();
    for (const [id, c] of keep) if (!ids.has(id) && c.classList.contains('decided')) setTimeout(() => c.remove(), 4000);
    for (const a of state.approvals) if (!keep.has(a.id)) box.append(approvalCard(a));
    box.hidden = !box.querySelector('[data-approval]');
  }

  async function refreshApprovals() {
    try {
      const data = await api('GET', 'approvals');
      state.approvals = Array.isArray(data.approvals) ? data.approvals : [];
      renderApprovals();
    } catch (e) {
      // the global banner says when the kernel is away
    }
  }

  // ---- evolutions: summaries ----

  function badge(s) {
    return h('span', { class: 'badge', dataset: { state: s || 'unknown' }, text: (s || 'unknown').replace(/_/g, ' ') });
  }

  function progress(e) {
    const cur = e.state === 'needs_input' ? (e.resume_state || '') : e.state;
    let idx = MAIN_PATH.indexOf(cur);
    if (e.state === 'complete') idx = MAIN_PATH.length - 1;
    const pct = idx < 0 ? (ENDED.has(e.state) ? 100 : 0) : Math.round((idx / (MAIN_PATH.length - 1)) * 100);
    const bar = h('div', { class: 'progress', role: 'progressbar', dataset: { state: e.state },
      aria: { valuemin: 0, valuemax: 100, valuenow: pct, label: 'Progress' } },
      h('span', { class: 'progress-fill' }));
    bar.firstChild.style.setProperty('--pct', pct + '%');
    return bar;
  }

  // A time in ms since the epoch as the local clock time.
  function clock(ms) {
    return typeof ms === 'number' && isFinite(ms) ? new Date(ms).toLocaleTimeString() : '?';
  }

  // The model cannot be reached: the evolution waits it out, keeping its work.
  function waitingText(w) {
    return 'Waiting for the model: ' + short(w.reason || 'unreachable', 200) + ', retrying at ' + clock(w.retry_at) +
      '. It keeps its work and gives up at ' + clock(w.until) + '.';
  }

  function waitingNote(e) {
    return e.waiting && typeof e.waiting === 'object' && !ENDED.has(e.state)
      ? h('p', { class: 'model-waiting', role: 'status' }, waitingText(e.waiting)) : null;
  }

  function eventText(kind, d) {
    d = d || {};
    switch (kind) {
      case 'waiting': return waitingText(d);
      case 'resumed': return 'The model answers again' + (typeof d.waited_ms === 'number' ? ' (after ' + duration(d.waited_ms / 1000) + ')' : '') + '.';
      case 'phase': return (d.from ? d.from.replace(/_/g, ' ') + ' → ' : '') + String(d.to || '').replace(/_/g, ' ') +
        (d.note ? ': ' + d.note : '');
      case 'plan': return 'Plan: ' + (d.title || '');
      case 'tool_call': {
        const a = d.arguments && typeof d.arguments === 'object' ? d.arguments : {};
        return (d.name || 'tool') + ' ' + short(a.path || a.command || a.query || a.summary || '', 80);
      }
      case 'tool_result': return (d.name || 'tool') + (d.is_error ? ' failed: ' + short(d.output, 120) : ' done');
      case 'check': return 'Check ' + (d.name || '') + (d.ok ? ' passed' : ' FAILED');
      case 'note': return short(d.text, 160);
      case 'error': return 'Error: ' + short(d.error, 160);
      case 'approval': return 'Waiting for your approval: ' + (d.tool || d.kind || '');
      case 'question': return 'Question for you: ' + short(d.request && d.request.question, 120);
      case 'agent_text': return short(d.text, 160);
      default: return kind;
    }
  }

  function liveCard(e) {
    const last = state.last.get(e.id);
    const ended = ENDED.has(e.state);
    const waiting = waitingNote(e); // it says the latest step itself
    return h('article', { class: ['card', 'live-evo', ended ? 'ended' : 'running'], dataset: { evolution: e.id, state: e.state } },
      h('div', { class: 'card-head' },
        h('h2', {}, ended ? null : h('span', { class: 'spinner', aria: { hidden: 'true' } }), ' ', evoName(e)),
        badge(e.state)),
      progress(e),
      waiting || h('p', { class: 'last-step' }, e.state === 'failed' && e.error ? 'Failed: ' + e.error
        : last ? last.text : (ended ? (e.error || 'Finished.') : 'Waiting to start…')),
      e.state === 'needs_input' ? h('p', { class: 'needs' }, 'It is waiting for you: see the card above.') : null,
      h('p', { class: 'actions-inline' },
        h('a', { href: '#evolution/' + e.id, text: 'Details' }),
        generationOf(e) && e.state === 'complete' ? h('span', { class: 'muted', text: ' · generation ' + generationOf(e) + ' is live' }) : null));
  }

  function renderLive() {
    const box = $('live-evolutions');
    const now = Date.now();
    const shown = state.evolutions.filter((e) => !ENDED.has(e.state) ||
      (state.seenActive.has(e.id) && now - Number(e.finished_at || e.updated_at || now) < RECENT_MS));
    clear(box);
    for (const e of shown.slice(0, 5)) box.append(liveCard(e));
  }

  // ---- the preview before apply: a bar while the owner's preview runs ----

  // The evolution whose preview runs, from its notes ("preview": "running"
  // then "ended"), or null.
  async function findPreview() {
    for (const e of state.evolutions) {
      if (e.state !== 'ready') continue;
      try {
        const d = await api('GET', 'evolutions/' + encodeURIComponent(e.id));
        let on = false;
        for (const ev of d.events || []) if (ev.kind === 'note' && ev.data && ev.data.preview) on = ev.data.preview === 'running';
        if (on) return e.id;
      } catch (err) {
        // not readable now: no bar for it
      }
    }
    return null;
  }

  // The preview bar on the candidate's pages links to
  // #decide/<id>/<apply|changes|discard>. A page can forge that link, so it
  // only points at the bar's own button here: the owner presses it.
  const DECIDE_WORDS = { apply: 'Apply', changes: 'Ask for changes', discard: 'Discard' };

  function renderPreview() {
    const bar = $('preview-bar');
    const id = state.preview;
    const ask = state.decideAsk;
    const gone = $('preview-gone');
    gone.hidden = !ask || ask.id === id;
    if (ask && ask.id !== id) {
      gone.textContent = 'A link from a preview asked to decide about an evolution whose preview is not running ' +
        'now; nothing was done.';
      state.decideAsk = null;
    }
    bar.hidden = !id;
    if (!id) return;
    const e = evoById(id);
    $('preview-text').textContent = 'The Seed made "' + (e ? evoName(e) : id) + '" and runs it on a copy of your live ' +
      'data. Only your browser sees it at the app\'s address once you open the preview; everyone else keeps the live ' +
      'app. Try it, then apply it, ask for changes or discard it.';
    const note = $('preview-asked');
    if (ask && ask.id === id) {
      state.decideAsk = null;
      note.textContent = 'You chose "' + DECIDE_WORDS[ask.action] + '" in the preview. Nothing is done until you ' +
        'press it here.';
      note.hidden = false;
      if (ask.action === 'changes') {
        $('preview-feedback').hidden = false;
        $('preview-feedback-text').focus();
      } else {
        // Never focus an acting button from a fragment: the candidate can forge
        // this link and time it to catch a key the owner is pressing. The
        // button is shown, the note gets the focus, the owner clicks.
        $('preview-' + ask.action).classList.add('asked');
        note.tabIndex = -1;
        note.focus();
        $('preview-' + ask.action).scrollIntoView({ block: 'center' });
      }
    }
  }

  async function previewDecide(action, feedback) {
    const id = state.preview;
    if (!id) return;
    const err = $('preview-error');
    try {
      await api('POST', 'evolutions/' + encodeURIComponent(id) + '/decide', feedback ? { action, feedback } : { action });
      state.preview = null;
      $('preview-asked').hidden = true;
      renderPreview();
      showError(err, null);
    } catch (e) {
      showError(err, e);
    }
  }

  function setupPreviewBar() {
    $('preview-open').addEventListener('click', async () => {
      const err = $('preview-error');
      try {
        const t = await api('POST', 'preview/ticket', {});
        const u = new URL(t.url);
        $('preview-leave').href = u.origin + '/_seed/preview/leave';
        window.open(t.url, '_blank', 'noopener');
        showError(err, null);
      } catch (e) {
        showError(err, e);
      }
    });
    $('preview-apply').addEventListener('click', () => previewDecide('apply'));
    $('preview-discard').addEventListener('click', () => previewDecide('discard'));
    $('preview-changes').addEventListener('click', () => {
      $('preview-feedback').hidden = false;
      $('preview-feedback-text').focus();
    });
    $('preview-feedback').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const text = $('preview-feedback-text').value.trim();
      if (text) previewDecide('changes', text).then(() => { $('preview-feedback').hidden = true; });
    });
  }

  async function refreshPreview() {
    state.preview = await findPreview();
    renderPreview();
  }

  async function refreshEvolutions() {
    try {
      const data = await api('GET', 'evolutions');
      state.evolutions = Array.isArray(data.evolutions) ? data.evolutions : [];
      state.evolutionsKnown = true;
      refreshPreview();
      for (const e of state.evolutions) if (!ENDED.has(e.state)) state.seenActive.add(e.id);
      renderLive();
      if (state.view === 'evolutions') renderEvolutionList();
      showError($('evolutions-error'), null);
    } catch (e) {
      showError($('evolutions-error'), e);
    }
  }

  // ---- chat ----

  function messageItem(m) {
    const owner = m.role === 'owner';
    // A record the kernel posted (e.g. the budget reached): plain text,
    // neither yours nor the Seed's words.
    const kernel = m.role === 'kernel';
    // A routine's report: the Seed's words on its own schedule, never yours.
    const routine = m.role === 'routine';
    const body = owner || kernel ? h('p', { class: 'text', text: m.text }) : SeedMd.render(m.text);
    const who = owner ? 'You' : kernel ? 'Kernel' : routine ? 'Routine' : (state.identity && state.identity.name) || 'Seed';
    const from = owner ? 'from-owner' : kernel ? 'from-kernel' : routine ? 'from-routine' : 'from-seed';
    return h('li', { class: ['message', from], dataset: { id: String(m.id) } },
      h('div', { class: 'bubble' },
        h('span', { class: 'who', text: who }),
        body,
        m.evolution_id ? h('a', { class: 'chip', href: '#evolution/' + m.evolution_id, text: 'evolution ' + m.evolution_id.slice(4, 10) }) : null,
        h('span', { class: 'when' }, time(Number(m.at)))));
  }

  function renderMessages() {
    const list = $('messages');
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    clear(list);
    const all = [...state.messages.values()].sort((a, b) => Number(a.id) - Number(b.id));
    if (!all.length && state.messagesKnown) {
      list.append(h('li', { class: 'empty' }, "I don't have a purpose yet. What should I become?"));
    }
    for (const m of all) list.append(messageItem(m));
    if (state.pendingText) {
      list.append(h('li', { class: ['message', 'from-owner', 'pending'] },
        h('div', { class: 'bubble' }, h('span', { class: 'who', text: 'You' }), h('p', { class: 'text', text: state.pendingText }))));
    }
    if (atBottom && state.view === 'chat') window.scrollTo(0, document.body.scrollHeight);
  }

  function addMessage(m) {
    if (!m || m.id === undefined || typeof m.text !== 'string') return;
    if (m.role === 'owner' && state.pendingText === m.text) state.pendingText = null;
    state.messages.set(String(m.id), m);
    renderMessages();
  }

  async function loadMessages() {
    try {
      const data = await api('GET', 'messages?limit=100');
      state.messages.clear();
      for (const m of data.messages || []) state.messages.set(String(m.id), m);
      state.messagesKnown = true;
      renderMessages();
    } catch (e) {
      showError($('composer-error'), e);
    }
  }

  function setSending(on, what) {
    state.sending = on;
    $('thinking').hidden = !on;
    $('thinking-text').textContent = what || 'The Seed is thinking…';
    updateComposer();
  }

  // Send and Evolve work only when the Seed can think; otherwise they say why.
  function updateComposer() {
    const ready = mindReady();
    $('send-button').disabled = state.sending || !ready;
    $('evolve-button').disabled = state.sending || !ready;
    const why = $('composer-why');
    const m = state.status && state.status.mind;
    why.textContent = ready ? '' : noKey(m) ? 'Send and Evolve wait until the Seed can think: lend a key above, or start ' +
      'it with -e ' + m.key_env + '.' : 'Send and Evolve wait until the Seed can think: ' + ((m && m.why_not) || '');
    why.hidden = ready;
  }

  // Whether the composer may call the model; if not, says why.
  function canThink() {
    if (mindReady()) return true;
    updateComposer();
    return false;
  }

  async function sendMessage() {
    const ta = $('composer-text');
    const text = ta.value.trim();
    if (!text || state.sending || !canThink()) return;
    showError($('composer-error'), null);
    setSending(true);
    state.pendingText = text;
    ta.value = '';
    $('composer-ask').hidden = true;
    const draft = state.askDraft;
    renderMessages();
    try {
      const res = await api('POST', 'messages', draft ? { text, draft } : { text });
      if (draft) showAskDraft(null);
      if (res && res.id !== undefined) {
        addMessage({ id: res.id, role: 'seed', text: res.reply || '', evolution_id: (res.evolutions || [])[0] || null, at: Date.now() });
      }
      if (res && Array.isArray(res.evolutions) && res.evolutions.length) refreshEvolutions();
    } catch (e) {
      showError($('composer-error'), e);
      if (!ta.value) ta.value = text;
    } finally {
      state.pendingText = null;
      setSending(false);
      await loadMessages();
    }
  }

  async function startEvolution() {
    const ta = $('composer-text');
    const intent = ta.value.trim();
    if (intent && !state.sending && !canThink()) return;
    if (!intent || state.sending) {
      if (!intent) showError($('composer-error'), new Error('Say what the Seed should become or change, then press Evolve.'));
      return;
    }
    showError($('composer-error'), null);
    setSending(true, 'Starting an evolution…');
    try {
      const res = await api('POST', 'evolutions', { intent });
      ta.value = '';
      state.seenActive.add(res.id);
      // Its events may have come first (it can fail at once): never hide them.
      if (!state.last.has(res.id)) state.last.set(res.id, { kind: 'note', text: 'Queued.', at: Date.now() });
      await refreshEvolutions();
    } catch (e) {
      showError($('composer-error'), e);
    } finally {
      setSending(false);
    }
  }

  // ---- evolutions: list and detail ----

  function renderEvolutionList() {
    const list = clear($('evolution-list'));
    if (!state.evolutions.length && state.evolutionsKnown) list.append(h('li', { class: 'empty', text: 'No evolutions yet. Ask for one in the chat.' }));
    for (const e of state.evolutions) {
      list.append(h('li', { class: 'row' },
        h('a', { class: 'row-main', href: '#evolution/' + e.id },
          h('span', { class: 'row-title', text: evoName(e) }),
          h('span', { class: 'row-sub' }, e.kind === 'rollback' ? 'rollback · ' : e.kind === 'owner' ? 'your commit · ' : '', time(Number(e.created_at)),
            generationOf(e) ? ' · generation ' + generationOf(e) : '',
            e.error ? h('span', { class: 'row-error', text: ' · ' + short(e.error, 120) }) : null)),
        badge(e.state)));
    }
  }

  function diffView(text) {
    const pre = h('pre', { class: 'diff', tabindex: 0 });
    for (const line of String(text).split('\n')) {
      let cls = 'ctx';
      if (line.startsWith('diff --git') || line.startsWith('+++') || line.startsWith('---') || line.startsWith('index ')) cls = 'file';
      else if (line.startsWith('@@')) cls = 'hunk';
      else if (line.startsWith('+')) cls = 'add';
      else if (line.startsWith('-')) cls = 'del';
      pre.append(h('span', { class: 'd-' + cls, text: line + '\n' }));
    }
    return pre;
  }

  function eventItem(ev) {
    const d = ev.data || {};
    const open = state.detailOpen.has(ev.id);
    const data = h('div', { class: 'ev-data' });
    // The data (tool output can be long) is built when first opened.
    const fill = () => {
      if (!data.firstChild) data.append(renderValue(d));
    };
    const details = h('details', { open },
      h('summary', {},
        h('span', { class: ['kind', 'kind-' + ev.kind], text: ev.kind.replace(/_/g, ' ') }), ' ',
        h('span', { class: 'ev-text', text: eventText(ev.kind, d) }), ' ',
        h('span', { class: 'when' }, time(Number(ev.at)))),
      data);
    if (open) fill();
    details.addEventListener('toggle', () => {
      if (details.open) {
        fill();
        state.detailOpen.add(ev.id);
      } else {
        state.detailOpen.delete(ev.id);
      }
    });
    return h('li', { class: 'event', dataset: { kind: ev.kind } }, details);
  }

  function stepper(e) {
    const cur = e.state === 'needs_input' ? e.resume_state : e.state;
    const reached = MAIN_PATH.indexOf(cur);
    return h('ol', { class: 'stepper', aria: { label: 'Phases' } }, MAIN_PATH.map((s, i) => h('li', {
      class: [i < reached || e.state === 'complete' ? 'done' : '', s === cur && e.state !== 'complete' ? 'current' : ''],
      text: s,
    })));
  }

  // What an evolution's model calls took: input read from the provider's
  // prompt cache and not, output, cost.
  function usageLine(u) {
    if (!u || !Number(u.calls)) return null;
    const n = (x) => Number(x || 0).toLocaleString();
    return h('p', { class: 'muted usage-line', id: 'evolution-usage' },
      'Model: ' + n(u.calls) + ' calls · ' + n(u.input_tokens) + ' tokens in (' + n(u.cached_input_tokens) + ' cached, ' +
      n(u.uncached_input_tokens) + ' uncached) · ' + n(u.output_tokens) + ' out · $' + Number(u.cost_usd || 0).toFixed(4));
  }

  function renderDetail() {
    const box = clear($('evolution-detail'));
    const e = state.detail;
    if (!e) return;
    const events = e.events || [];
    const checks = events.filter((x) => x.kind === 'check');
    const phases = events.filter((x) => x.kind === 'phase');
    const plan = e.plan && typeof e.plan === 'object' ? e.plan : null;
    const active = !ENDED.has(e.state);
    box.append(h('div', { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', { text: evoName(e) }), badge(e.state)),
      e.title && e.intent !== e.title ? h('p', { class: 'intent' }, h('span', { class: 'muted', text: e.owner_words ? 'Intent (the chat\'s): ' : 'Asked: ' }), e.intent) : null,
      e.owner_words ? h('blockquote', { class: 'intent owner-words' }, h('span', { class: 'muted', text: 'Your words: ' }), e.owner_words) : null,
      e.roadmap_id ? h('p', { class: 'muted' }, 'Stage ' + (Number(e.roadmap_stage) + 1) + ' of the ', h('a', { href: '#roadmap', text: 'roadmap' })) : null,
      h('p', { class: 'muted' }, e.id, ' · ', e.kind || 'evolve', ' · started ', time(Number(e.created_at)),
        e.from_generation ? ' · from generation ' + e.from_generation : '',
        generationOf(e) ? ' → generation ' + generationOf(e) : ''),
      usageLine(e.usage),
      stepper(e),
      e.state === 'needs_input' ? h('p', { class: 'needs' }, 'It is waiting for you: see the card above.') : null,
      waitingNote(e),
      e.error ? h('p', { class: 'error-box', text: e.error }) : null,
      active ? h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'danger-quiet', id: 'cancel-evolution', text: 'Cancel this evolution', on: { click: () => cancelEvolution(e.id) } })) : null,
      h('p', { class: 'error', id: 'detail-error', role: 'alert', hidden: true })));
    if (plan) {
      box.append(h('section', { class: 'card' }, h('div', { class: 'card-head' }, h('h3', { text: 'Plan' })),
        plan.title ? h('p', {}, h('strong', { text: plan.title }), plan.scope ? h('span', { class: 'muted', text: ' · ' + plan.scope }) : null) : null,
        plan.summary ? SeedMd.render(String(plan.summary)) : null,
        Array.isArray(plan.steps) && plan.steps.length ? [h('h4', { text: 'Steps' }), h('ol', {}, plan.steps.map((s) => h('li', {}, typeof s === 'string' ? s : renderValue(s))))] : null,
        Array.isArray(plan.risks) && plan.risks.length ? [h('h4', { text: 'Risks' }), h('ul', {}, plan.risks.map((s) => h('li', {}, typeof s === 'string' ? s : renderValue(s))))] : null));
    }
    box.append(h('section', { class: 'card' }, h('div', { class: 'card-head' }, h('h3', { text: 'Phases' })),
      phases.length ? h('ol', { class: 'phases' }, phases.map((p) => h('li', {},
        h('span', { text: eventText('phase', p.data) }), ' ', h('span', { class: 'when' }, time(Number(p.at))))))
        : h('p', { class: 'muted', text: 'Not started yet.' })));
    box.append(h('section', { class: 'card' }, h('div', { class: 'card-head' }, h('h3', { text: 'Checks' })),
      checks.length ? h('ul', { class: 'checks' }, checks.map((c) => h('li', { class: c.data && c.data.ok ? 'ok' : 'bad' },
        h('details', {},
          h('summary', {}, h('span', { class: 'check-mark', text: c.data && c.data.ok ? '✓' : '✗' }), ' ',
            h('strong', { text: (c.data && c.data.name) || 'check' }),
            c.data && typeof c.data.duration_ms === 'number' ? h('span', { class: 'muted', text: ' · ' + (c.data.duration_ms / 1000).toFixed(1) + ' s' }) : null),
          h('pre', { class: 'value-text', text: (c.data && c.data.output) || '(no output)' })))))
        : h('p', { class: 'muted', text: 'The kernel has not checked anything yet.' })));
    const diffBox = h('section', { class: 'card', id: 'diff-card' }, h('div', { class: 'card-head' }, h('h3', { text: 'Change' }),
      h('span', { class: 'updated', id: 'diff-source' })), h('div', { id: 'diff-body' }, h('p', { class: 'muted', text: 'Loading the diff…' })));
    box.append(diffBox);
    box.append(h('section', { class: 'card' }, h('div', { class: 'card-head' }, h('h3', { text: 'Events' }),
      h('span', { class: 'updated', text: events.length + ' so far' })),
      h('ol', { class: 'events' }, events.map(eventItem))));
    if (state.detailDiff !== undefined) renderDiff(state.detailDiff);
  }

  function renderDiff(d) {
    const body = $('diff-body');
    if (!body) return;
    clear(body);
    if (d instanceof Error) {
      body.append(h('p', { class: 'muted', text: d.message }));
      return;
    }
    $('diff-source').textContent = d.source === 'commit' ? 'committed' : d.source === 'worktree' ? 'work in progress' : '';
    if (!d.diff) body.append(h('p', { class: 'muted', text: d.source === 'none' ? 'No change to show.' : 'No change yet.' }));
    else body.append(diffView(d.diff));
  }

  async function loadDiff(id) {
    try {
      const d = await api('GET', 'evolutions/' + id + '/diff');
      if (state.detail && state.detail.id === id) {
        state.detailDiff = d;
        renderDiff(d);
      }
    } catch (e) {
      if (state.detail && state.detail.id === id) {
        state.detailDiff = e;
        renderDiff(e);
      }
    }
  }

  async function loadDetail(id) {
    try {
      const e = await api('GET', 'evolutions/' + id);
      const first = !state.detail || state.detail.id !== id;
      if (first) {
        state.detailOpen.clear();
        state.detailDiff = undefined;
      }
      state.detail = e;
      renderDetail();
      loadDiff(id);
    } catch (e) {
      clear($('evolution-detail')).append(h('div', { class: 'card' }, h('p', { class: 'error', text: e.message })));
    }
  }

  // New events of the evolution on screen, without reloading the rest.
  const refreshDetail = debounce(async (phaseChanged) => {
    const e = state.detail;
    if (!e || state.view !== 'evolution') return;
    const lastId = e.events && e.events.length ? e.events[e.events.length - 1].id : 0;
    try {
      const fresh = await api('GET', 'evolutions/' + e.id + '?after=' + lastId);
      if (!state.detail || state.detail.id !== e.id) return;
      const seen = new Set((e.events || []).map((x) => x.id));
      fresh.events = (e.events || []).concat((fresh.events || []).filter((x) => !seen.has(x.id)));
      state.detail = fresh;
      renderDetail();
      if (phaseChanged) loadDiff(e.id);
    } catch (err) {
      showError($('detail-error'), err);
    }
  }, 250);

  async function cancelEvolution(id) {
    const ok = await confirmDialog('Cancel this evolution?', 'The Seed stops working on it. Nothing it changed so far goes live.', 'Cancel evolution');
    if (!ok) return;
    try {
      await api('POST', 'evolutions/' + id + '/cancel', {});
      refreshDetail(true);
    } catch (e) {
      showError($('detail-error'), e);
    }
  }

  // ---- generations ----

  async function refreshGenerations() {
    const list = $('generation-list');
    try {
      const data = await api('GET', 'generations');
      clear(list);
      for (const g of data.generations || []) {
        const when = typeof g.time === 'number' ? (g.time < 1e12 ? g.time * 1000 : g.time) : null;
        list.append(h('li', { class: ['row', g.current ? 'current' : ''], dataset: { generation: String(g.number) } },
          h('div', { class: 'row-main' },
            h('span', { class: 'row-title' }, 'Generation ' + g.number, g.current ? h('span', { class: 'badge', dataset: { state: 'complete' }, text: 'live' }) : null,
              g.owner ? h('span', { class: ['badge', 'owner'], title: 'your own commit ' + String(g.owner_commit || '').slice(0, 10), text: 'owner' }) : null),
            h('span', { class: 'row-sub' }, g.summary || '', ' · ', time(when), ' · ', h('code', { text: String(g.commit || '').slice(0, 10) }))),
          g.current ? null : h('button', { type: 'button', class: 'secondary', text: 'Roll back to ' + g.number, on: { click: () => rollback(g.number) } })));
      }
      showError($('generations-error'), null);
    } catch (e) {
      showError($('generations-error'), e);
    }
  }

  async function rollback(n) {
    const ok = await confirmDialog('Roll back to generation ' + n + '?',
      'The Seed makes a new generation with the files of generation ' + n + ' and restarts its app on it. ' +
      'Data stays as it is: database migrations are not undone.', 'Roll back');
    if (!ok) return;
    const notice = $('generations-notice');
    try {
      const res = await api('POST', 'generations/' + n + '/rollback', {});
      state.seenActive.add(res.id);
      clear(notice).append('Rolling back to generation ' + n + ' … ', h('a', { href: '#evolution/' + res.id, text: 'follow it' }));
      notice.hidden = false;
      showError($('generations-error'), null);
      refreshEvolutions();
    } catch (e) {
      showError($('generations-error'), e);
    }
  }

  // ---- backups of the live data ----

  function sizeText(n) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let v = Number(n) || 0, u = 0;
    while (v >= 1024 && u < units.length - 1) {
      v /= 1024;
      u++;
    }
    return (u ? v.toFixed(1) : String(v)) + ' ' + units[u];
  }

  const BACKUP_KINDS = { 'before-apply': 'before an apply', daily: 'daily', manual: 'yours', 'before-restore': 'before a restore' };

  async function refreshBackups() {
    const list = $('backup-list');
    try {
      const data = await api('GET', 'backups');
      clear(list);
      for (const b of data.backups || []) {
        list.append(h('li', { class: 'row backup', dataset: { backup: b.id } },
          h('div', { class: 'row-main' },
            h('span', { class: 'row-title' }, h('code', { text: b.id }),
              h('span', { class: 'badge', dataset: { kind: b.kind }, text: BACKUP_KINDS[b.kind] || b.kind })),
            h('span', { class: 'row-sub' }, 'generation ' + b.generation, ' · ', sizeText(b.size), ' · ', time(b.time))),
          h('div', { class: 'row-actions' },
            h('button', { type: 'button', class: 'secondary', text: 'Download', on: { click: () => downloadBackup(b) } }),
            h('button', { type: 'button', class: 'danger-quiet', text: 'Restore', on: { click: () => restoreBackup(b) } }))));
      }
      $('backups-empty').hidden = list.children.length > 0;
      $('backup-kinds').textContent = (data.kinds || []).map((k) => k.keep + ' ' + (BACKUP_KINDS[k.kind] || k.kind)).join(', ');
      $('backup-now').disabled = !!data.busy;
      showError($('backups-error'), null);
    } catch (e) {
      showError($('backups-error'), e);
    }
  }

  function backupNotice(...parts) {
    const notice = $('backups-notice');
    clear(notice).append(...parts);
    notice.hidden = !parts.length;
  }

  async function backupNow() {
    const btn = $('backup-now');
    btn.disabled = true;
    backupNotice('Backing up …');
    try {
      const res = await api('POST', 'backups', {});
      backupNotice('Backed up as ', h('code', { text: res.id }), '.');
      showError($('backups-error'), null);
    } catch (e) {
      backupNotice();
      showError($('backups-error'), e);
    }
    btn.disabled = false;
    refreshBackups();
  }

  async function restoreBackup(b) {
    const taken = new Date(b.time).toLocaleString();
    const ok = await confirmDialog('Restore backup ' + b.id + '?',
      'This replaces ALL of the app\'s data with this backup (' + (BACKUP_KINDS[b.kind] || b.kind) + ', taken ' + taken +
      ' while generation ' + b.generation + ' was live, ' + sizeText(b.size) + '). Everything stored since then is ' +
      'replaced. Today\'s data is saved first as a backup of its own, and the app stops while the restore runs.',
      'Replace the data');
    if (!ok) return;
    backupNotice('Restoring ' + b.id + ' … the app stops for a moment.');
    try {
      const res = await api('POST', 'backups/' + encodeURIComponent(b.id) + '/restore', {});
      backupNotice('Restored ', h('code', { text: res.restored }), '. Today\'s data was saved as ', h('code', { text: res.saved }), '.');
      showError($('backups-error'), null);
    } catch (e) {
      backupNotice();
      showError($('backups-error'), e);
    }
    refreshBackups();
  }

  // The API wants the token in a header, so the file comes through fetch
  // and is handed to the browser as a download from memory.
  async function downloadBackup(b) {
    try {
      const res = await fetch('/_seed/api/backups/' + encodeURIComponent(b.id) + '/download', {
        headers: { 'X-Seed-Token': token }, credentials: 'same-origin', cache: 'no-store',
      });
      if (res.status === 401) signedOut();
      if (!res.ok) {
        let msg = res.status + ' ' + res.statusText;
        try {
          msg = (await res.json()).error || msg;
        } catch (e) { /* not JSON */ }
        throw new ApiError(res.status, msg);
      }
      const url = URL.createObjectURL(await res.blob());
      const a = document.createElement('a');
      a.href = url;
      a.download = b.id + '.dump';
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      showError($('backups-error'), null);
    } catch (e) {
      showError($('backups-error'), e);
    }
  }

  // ---- routines and the app's jobs ----

  const RUN_OUTCOMES = { quiet: 'quiet', reported: 'reported', ok: 'ok', failed: 'failed', skipped: 'skipped (budget)' };
  const openRuns = new Set(); // "routines/<id>" or "jobs/<name>" whose runs are shown

  function lastRunText(run) {
    if (!run) return 'not run yet';
    return [RUN_OUTCOMES[run.outcome] || run.outcome, ' · ', time(Number(run.started_at))];
  }

  function runItem(run) {
    return h('li', { class: 'run', dataset: { outcome: run.outcome } },
      h('span', { class: 'badge', dataset: { outcome: run.outcome }, text: RUN_OUTCOMES[run.outcome] || run.outcome }),
      ' ', h('span', { class: 'when' }, time(Number(run.started_at))),
      run.text ? h('p', { class: 'text', text: run.text }) : null,
      run.error ? h('p', { class: 'error-text', text: run.error }) : null);
  }

  async function showRuns(kind, id, box) {
    try {
      const runs = await api('GET', kind + '/' + encodeURIComponent(id) + '/runs');
      clear(box);
      if (!runs.length) box.append(h('li', { class: 'muted', text: 'No runs yet.' }));
      for (const run of runs) box.append(runItem(run));
    } catch (e) {
      showError($('routines-error'), e);
    }
  }

  function scheduleRow(kind, item, id, title, sub) {
    const key = kind + '/' + id;
    const runs = h('ol', { class: 'runs', hidden: !openRuns.has(key) });
    if (openRuns.has(key)) showRuns(kind, id, runs);
    const act = (what) => routineAction(kind, id, what);
    return h('li', { class: 'row routine', dataset: { kind, id } },
      h('div', { class: 'row-main' },
        h('span', { class: 'row-title' }, title,
          item.paused ? h('span', { class: 'badge', dataset: { state: 'paused' }, text: 'paused' }) : null,
          item.running ? h('span', { class: 'badge', dataset: { state: 'running' }, text: 'running' }) : null),
        h('span', { class: 'row-sub' }, sub, ' · last run: ', lastRunText(item.last_run))),
      h('div', { class: 'row-actions' },
        h('button', { type: 'button', class: 'secondary', text: openRuns.has(key) ? 'Hide runs' : 'Runs', on: {
          click: () => { if (openRuns.has(key)) openRuns.delete(key); else openRuns.add(key); refreshRoutines(); } } }),
        h('button', { type: 'button', class: 'secondary', text: item.paused ? 'Resume' : 'Pause',
          on: { click: () => act(item.paused ? 'resume' : 'pause') } }),
        h('button', { type: 'button', class: 'secondary', text: 'Run now', disabled: !!item.running, on: { click: () => act('run') } }),
        kind === 'routines' ? h('button', { type: 'button', class: 'danger-quiet', text: 'Delete', on: { click: () => deleteRoutine(item) } }) : null),
      runs);
  }

  function renderRoutines(data) {
    const list = clear($('routine-list'));
    for (const r of data.routines || []) {
      list.append(scheduleRow('routines', r, r.id, h('strong', { text: r.name }),
        [h('code', { text: r.schedule }), ' ', r.tz, ' · ', h('span', { class: 'prompt', text: r.prompt.length > 140 ? r.prompt.slice(0, 140) + '…' : r.prompt })]));
    }
    $('routines-empty').hidden = list.children.length > 0;
    $('routines-count').textContent = (data.routines || []).length + ' of ' + data.max;
    const jobs = clear($('job-list'));
    for (const j of data.jobs || []) {
      jobs.append(scheduleRow('jobs', j, j.name, h('strong', { text: j.name }),
        [h('code', { text: j.method + ' ' + j.path }), ' · ', h('code', { text: j.schedule }), ' ', j.tz]));
    }
    $('jobs-empty').hidden = jobs.children.length > 0;
    const fileError = $('jobs-file-error');
    fileError.textContent = data.jobs_error ? 'organism/routines.yaml was not synced (the jobs below are the ones before): ' + data.jobs_error : '';
    fileError.hidden = !data.jobs_error;
  }

  async function refreshRoutines() {
    try {
      renderRoutines(await api('GET', 'routines'));
      showError($('routines-error'), null);
    } catch (e) {
      showError($('routines-error'), e);
    }
  }

  async function routineAction(kind, id, what) {
    try {
      renderRoutines(await api('POST', kind + '/' + encodeURIComponent(id) + '/' + what, {}));
      showError($('routines-error'), null);
      if (what === 'run') setTimeout(refreshRoutines, 1500);
    } catch (e) {
      showError($('routines-error'), e);
    }
  }

  async function deleteRoutine(r) {
    const ok = await confirmDialog('Delete the routine “' + r.name + '”?',
      'It stops running and its runs are deleted. The reports it posted stay in the chat.', 'Delete it');
    if (!ok) return;
    openRuns.delete('routines/' + r.id);
    routineAction('routines', r.id, 'delete');
  }

  // ---- knowledge and skills ----

  function pathHash(prefix, path) {
    return '#' + prefix + '/' + path.split('/').map(encodeURIComponent).join('/');
  }

  function docView(box, title, sub, content, markdown) {
    clear(box);
    box.append(h('div', { class: 'card-head' }, h('h2', { class: 'doc-title', text: title }), sub ? h('span', { class: 'updated', text: sub }) : null));
    if (content === null || content === undefined) {
      box.append(h('p', { class: 'muted', text: 'This file is not text, so it is not shown.' }));
    } else if (markdown) {
      box.append(SeedMd.render(content));
    } else {
      box.append(h('pre', { class: 'value-text source', text: content }));
    }
  }

  async function showKnowledge(path) {
    const list = $('knowledge-files');
    const doc = $('knowledge-doc');
    try {
      const data = await api('GET', 'knowledge');
      clear(list);
      const files = data.files || [];
      if (!files.length) list.append(h('li', { class: 'empty', text: 'No knowledge yet.' }));
      for (const f of files) {
        const link = f.type === 'file';
        list.append(h('li', { class: path === f.path ? 'selected' : '' },
          link ? h('a', { href: pathHash('knowledge', f.path), text: f.path }) : h('span', { class: 'muted', text: f.path + ' (link, not shown)' })));
      }
      if (data.truncated) list.append(h('li', { class: 'muted', text: 'More files are not listed.' }));
      showError($('knowledge-error'), null);
      if (!path) {
        const first = files.find((f) => f.path === 'README.md') || files.find((f) => f.type === 'file');
        if (first) path = first.path;
      }
    } catch (e) {
      showError($('knowledge-error'), e);
    }
    if (!path) {
      clear(doc).append(h('p', { class: 'muted', text: 'Pick a file.' }));
      return;
    }
    for (const li of list.querySelectorAll('li')) li.classList.toggle('selected', li.textContent === path);
    try {
      const f = await api('GET', 'knowledge?path=' + encodeURIComponent(path));
      docView(doc, f.path, f.size + ' bytes', f.content, /\.(md|markdown)$/i.test(f.path));
    } catch (e) {
      clear(doc).append(h('p', { class: 'error', text: e.message }));
    }
  }

  // ---- the roadmap (staged goals; knowledge/roadmap.md, written by the kernel) ----

  async function refreshRoadmap() {
    const doc = $('roadmap-doc');
    const status = $('roadmap-status');
    const btn = $('roadmap-continue');
    try {
      const d = await api('GET', 'roadmap');
      showError($('roadmap-error'), null);
      clear(doc);
      if (!d.roadmap) {
        doc.append(h('p', { class: 'muted', text: 'No roadmap yet. When a goal is too large for one change, the Seed splits it into stages and keeps them here.' }));
        status.textContent = '';
        btn.hidden = true;
        return;
      }
      doc.append(SeedMd.render(String(d.markdown || '')));
      btn.hidden = false;
      btn.disabled = !d.next || !!d.running;
      clear(status);
      if (d.running) status.append('Stage ', String(d.next ? d.next.stage : ''), ' is under way: ', h('a', { href: '#evolution/' + encodeURIComponent(d.running), text: d.running }), '.');
      else if (d.next) status.append('Next: stage ' + d.next.stage + ', ' + d.next.text);
      else status.append('The goal is reached: every stage is done.');
    } catch (e) {
      showError($('roadmap-error'), e);
    }
  }

  async function continueRoadmap() {
    const btn = $('roadmap-continue');
    btn.disabled = true;
    try {
      const res = await api('POST', 'roadmap/continue', {});
      showError($('roadmap-error'), null);
      window.location.hash = '#evolution/' + encodeURIComponent(res.id);
    } catch (e) {
      showError($('roadmap-error'), e);
      refreshRoadmap();
    }
  }

  async function showSkills(name) {
    const list = $('skill-list');
    const doc = $('skill-doc');
    try {
      const data = await api('GET', 'skills');
      clear(list);
      const skills = data.skills || [];
      if (!skills.length) list.append(h('li', { class: 'empty', text: 'No skills yet.' }));
      for (const s of skills) {
        list.append(h('li', { class: name === s.name ? 'selected' : '' },
          h('a', { href: '#skills/' + encodeURIComponent(s.name) },
            h('strong', { text: s.title || s.name }),
            s.description ? h('span', { class: 'row-sub', text: s.description }) : null,
            s.problem ? h('span', { class: 'row-error', text: s.problem }) : null)));
      }
      if (!name && skills.length) name = skills[0].name;
      showError($('skills-error'), null);
    } catch (e) {
      showError($('skills-error'), e);
    }
    if (!name) {
      clear(doc).append(h('p', { class: 'muted', text: 'The Seed writes skills as it learns how to do things.' }));
      return;
    }
    try {
      const s = await api('GET', 'skills/' + encodeURIComponent(name));
      const fm = SeedMd.frontMatter(s.content || '');
      docView(doc, s.title || s.name, s.path, s.content === null ? null : fm.body, true);
      if (s.description) doc.querySelector('.card-head').after(h('p', { class: 'muted', text: s.description }));
    } catch (e) {
      clear(doc).append(h('p', { class: 'error', text: e.message }));
    }
  }

  // ---- logs ----

  async function refreshLogs() {
    const pre = $('log-lines');
    try {
      const data = await api('GET', 'logs?name=' + encodeURIComponent(state.currentLog) + '&lines=300');
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      pre.textContent = data.lines && data.lines.length ? data.lines.join('\n') : '(empty)';
      if (atBottom) pre.scrollTop = pre.scrollHeight;
      showError($('logs-error'), null);
    } catch (err) {
      showError($('logs-error'), err);
    }
  }

  function selectLog(name) {
    state.currentLog = name;
    for (const tab of document.querySelectorAll('[data-log]')) tab.setAttribute('aria-selected', String(tab.dataset.log === name));
    $('log-lines').textContent = 'Loading…';
    refreshLogs();
  }

  // ---- settings ----

  function renderIdentityFacts() {
    const id = state.identity || {};
    const accent = hexColor(id.accent);
    const swatch = accent ? h('span', {}, h('span', { class: 'swatch', aria: { hidden: 'true' } }), ' ', accent) : '—';
    facts($('identity-facts'), [['name', id.name], ['seed', id.seed || seedName], ['slug', id.slug],
      ['tagline', id.tagline], ['purpose', id.purpose], ['accent', swatch]]);
  }

  async function refreshSessions() {
    const list = $('session-list');
    try {
      const data = await api('GET', 'owner/sessions');
      clear(list);
      for (const s of data.sessions || []) {
        list.append(h('li', { class: 'row', dataset: { session: s.id } },
          h('div', { class: 'row-main' },
            h('span', { class: 'row-title' }, s.current ? h('strong', { text: 'This browser' }) : 'Another browser', ' ',
              h('span', { class: 'muted', text: short(s.user_agent || '', 90) })),
            h('span', { class: 'row-sub' }, 'signed in ', time(Number(s.created_at)), ' · last used ', time(Number(s.last_used_at)))),
          s.current ? h('button', { type: 'button', class: 'secondary', text: 'Sign out', on: { click: signOut } })
            : h('button', { type: 'button', class: 'danger-quiet', text: 'Sign out', on: { click: () => revoke(s.id) } })));
      }
      showError($('sessions-error'), null);
    } catch (e) {
      showError($('sessions-error'), e);
    }
  }

  async function revoke(id) {
    const ok = await confirmDialog('Sign out that browser?', 'It will need a new sign-in link or the password to come back.', 'Sign it out');
    if (!ok) return;
    try {
      await api('POST', 'owner/sessions/' + encodeURIComponent(id) + '/revoke', {});
      refreshSessions();
    } catch (e) {
      showError($('sessions-error'), e);
    }
  }

  async function refreshUsage() {
    const box = $('usage');
    try {
      const data = await api('GET', 'usage');
      const rows = data.usage || [];
      clear(box);
      if (!rows.length) {
        box.append(h('p', { class: 'muted', text: 'No model calls yet.' }));
        return;
      }
      const n = (x) => Number(x || 0).toLocaleString();
      const cost = (x) => '$' + Number(x || 0).toFixed(4);
      // A cost the provider did not report and no price covers is unknown, not free.
      const rowCost = (r) => (r.cost_usd === null ? 'unknown' : cost(r.cost_usd)) +
        (r.cost_usd !== null && r.unknown_cost_calls ? ' + ' + r.unknown_cost_calls + ' unknown' : '');
      box.append(h('div', { class: 'md-table' }, h('table', { class: 'usage' },
        h('thead', {}, h('tr', {}, ['For', 'Model', 'Calls', 'Tokens in', 'Cached', 'Uncached', 'Tokens out', 'Cost'].map((t) => h('th', { text: t })))),
        h('tbody', {}, rows.map((r) => h('tr', {}, [r.purpose, r.model, n(r.calls), n(r.input_tokens), n(r.cached_input_tokens),
          n(r.uncached_input_tokens), n(r.output_tokens), rowCost(r)]
          .map((t) => h('td', { text: t }))))),
        data.total ? h('tfoot', {}, h('tr', {}, ['Total', '', n(data.total.calls), n(data.total.input_tokens), n(data.total.cached_input_tokens),
          n(data.total.uncached_input_tokens), n(data.total.output_tokens), rowCost(data.total)]
          .map((t) => h('td', { text: t })))) : null)));
    } catch (e) {
      clear(box).append(h('p', { class: 'error', text: e.message }));
    }
  }

  // ---- health: the doctor's incidents ----

  const INCIDENT_KINDS = { '5xx': 'server errors', crash: 'crash', gave_up: 'gave up', job: 'job failing' };
  const INCIDENT_STATUS = {
    open: 'open', diagnosing: 'diagnosing …', diagnosed: 'diagnosed', fixing: 'fixing …',
    watching: 'watching (30 min)', resolved: 'resolved', ignored: 'ignored',
  };
  const FIXABLE = new Set(['open', 'diagnosed']);
  const INCIDENT_ENDED = new Set(['resolved', 'ignored']);
  let fixStarted = null; // {id, evolution}: the fix this browser started, said on its incident


  async function refreshHealth(id) {
    const list = $('health-list');
    try {
      const data = await api('GET', 'incidents');
      clear(list);
      for (const i of data.incidents || []) {
        list.append(h('li', { class: ['row', 'incident', i.id === id ? 'selected' : null], dataset: { incident: i.id, status: i.status } },
          h('a', { class: 'row-main', href: '#health/' + i.id },
            h('span', { class: 'row-title' }, h('code', { text: i.cause }),
              h('span', { class: 'badge', dataset: { status: i.status }, text: INCIDENT_STATUS[i.status] || i.status })),
            h('span', { class: 'row-sub' }, INCIDENT_KINDS[i.kind] || i.kind, ' · ', String(i.occurrences),
              i.occurrences === 1 ? ' time · last ' : ' times · last ', time(Number(i.last_seen_at))))));
      }
      $('health-empty').hidden = list.children.length > 0;
      $('health-today').textContent = data.diagnoses_today + ' of ' + data.diagnoses_per_day + ' diagnoses today';
      const box = $('health-auto-fix');
      if (document.activeElement !== box) box.checked = !!data.auto_fix;
      showError($('health-error'), null);
    } catch (e) {
      showError($('health-error'), e);
    }
    if (id) await showIncident(id);
    else $('health-detail').hidden = true;
  }

  // Evidence and diagnosis are text from logs and a model: shown as text in
  // <pre>, never as HTML or Markdown.
  async function showIncident(id) {
    const box = $('health-detail');
    try {
      const i = await api('GET', 'incidents/' + encodeURIComponent(id));
      const facts = h('dl', { class: 'facts' });
      const add = (k, ...v) => facts.append(h('dt', { text: k }), h('dd', {}, ...v));
      add('Status', INCIDENT_STATUS[i.status] || i.status);
      add('What', INCIDENT_KINDS[i.kind] || i.kind);
      add('Seen', String(i.occurrences) + (i.occurrences === 1 ? ' time, first ' : ' times, first '), time(Number(i.opened_at)),
        ', last ', time(Number(i.last_seen_at)));
      if (i.note) add('Note', i.note);
      if (i.fix_evolution) add('Fix', h('a', { href: '#evolution/' + i.fix_evolution, text: i.fix_evolution }));
      clear(box).append(...[
        h('div', { class: 'card-head' }, h('h3', {}, h('code', { text: i.cause })),
          h('div', { class: 'row-actions' },
            h('button', { type: 'button', class: 'primary', id: 'incident-fix', text: 'Fix', disabled: !FIXABLE.has(i.status),
              on: { click: () => fixIncident(i.id) } }),
            h('button', { type: 'button', class: 'danger-quiet', id: 'incident-ignore', text: 'Ignore', disabled: INCIDENT_ENDED.has(i.status),
              on: { click: () => ignoreIncident(i.id) } }))),
        facts,
        h('h4', { text: 'Evidence' }),
        h('pre', { class: 'evidence', id: 'incident-evidence', text: i.evidence || '(none)' }),
        h('h4', { text: 'Diagnosis' }),
        i.diagnosis ? h('pre', { class: 'evidence', id: 'incident-diagnosis', text: i.diagnosis })
          : h('p', { class: 'muted', id: 'incident-diagnosis', text: i.status === 'diagnosing' ? 'Being diagnosed …' : 'Not diagnosed yet.' }),
        fixStarted && fixStarted.id === i.id
          ? h('p', { class: 'notice', id: 'incident-notice', role: 'status' },
            'The fix runs as ', h('a', { href: '#evolution/' + fixStarted.evolution, text: fixStarted.evolution }), '.')
          : null,
        h('p', { class: 'error', id: 'incident-error', role: 'alert', hidden: true })].filter(Boolean));
      box.hidden = false;
    } catch (e) {
      clear(box).append(h('p', { class: 'error', text: e.message }));
      box.hidden = false;
    }
  }

  async function fixIncident(id) {
    try {
      const res = await api('POST', 'incidents/' + encodeURIComponent(id) + '/fix', {});
      state.seenActive.add(res.evolution);
      fixStarted = { id, evolution: res.evolution };
      await refreshHealth(id);
      refreshEvolutions();
    } catch (e) {
      showError($('incident-error'), e);
    }
  }

  async function ignoreIncident(id) {
    try {
      await api('POST', 'incidents/' + encodeURIComponent(id) + '/ignore', {});
      await refreshHealth(id);
    } catch (e) {
      showError($('incident-error'), e);
    }
  }

  async function setAutoFix(ev) {
    const box = ev.target;
    try {
      await api('POST', 'health', { auto_fix: box.checked });
      showError($('health-error'), null);
    } catch (e) {
      box.checked = !box.checked;
      showError($('health-error'), e);
    }
  }

  // ---- spending ----

  const money = (x) => '$' + Number(x || 0).toFixed(2);
  const PURPOSES = {
    chat: 'Chat', evolution: 'Evolutions', reflection: 'Reflection after evolutions', probe: 'Model checks',
    routine: 'Routines', health: 'Diagnosis and fixes',
  };

  function spendTable(heads, rows) {
    return h('div', { class: 'md-table' }, h('table', { class: 'usage spend' },
      h('thead', {}, h('tr', {}, heads.map((t) => h('th', { text: t })))),
      h('tbody', {}, rows)));
  }

  function unknownText(n) {
    return n ? n + (n === 1 ? ' call' : ' calls') + ' of unknown cost' : '';
  }

  function renderSpend(s) {
    $('spend-month').textContent = s.month + ' (UTC)';
    const facts = clear($('spend-facts'));
    const add = (k, v, id) => facts.append(h('dt', { text: k }), h('dd', { text: v, id }));
    add('Spent this month', money(s.spent_usd), 'spend-total');
    add('Budget', s.budget_usd === null ? 'none' : money(s.budget_usd), 'spend-budget-shown');
    if (s.budget_usd !== null) {
      facts.append(h('dt', { text: 'Used' }),
        h('dd', {}, h('meter', { id: 'spend-meter', min: 0, max: Math.max(s.budget_usd, 0.01), low: s.budget_usd * 0.8,
          high: s.budget_usd * 0.999, optimum: 0, value: Math.min(s.spent_usd, Math.max(s.budget_usd, 0.01)) }),
        ' ' + (s.budget_usd > 0 ? Math.round(100 * s.spent_usd / s.budget_usd) + '%' : '')));
    }
    add('Calls', Number(s.calls).toLocaleString(), 'spend-calls');
    add('Calls of unknown cost', String(s.unknown_cost_calls), 'spend-unknown');
    const paused = $('spend-paused');
    paused.hidden = !s.over_budget;
    paused.textContent = s.over_budget
      ? 'The budget is reached: routines, diagnosis and automatic fixes are paused until the month ends or the budget is raised.'
      : '';
    const input = $('spend-budget');
    if (document.activeElement !== input) input.value = s.budget_usd === null ? '' : String(s.budget_usd);
    const n = (x) => Number(x || 0).toLocaleString();
    const byPurpose = clear($('spend-by-purpose'));
    if (!s.by_purpose.length) byPurpose.append(h('p', { class: 'muted', text: 'No model calls this month.' }));
    else {
      byPurpose.append(spendTable(['For', 'Calls', 'Tokens in', 'Tokens out', 'Cost', 'Unknown cost'],
        s.by_purpose.map((r) => h('tr', { dataset: { purpose: r.purpose } },
          [PURPOSES[r.purpose] || r.purpose, n(r.calls), n(r.input_tokens), n(r.output_tokens), money(r.cost_usd),
            r.unknown_cost_calls ? unknownText(r.unknown_cost_calls) : '—'].map((t) => h('td', { text: t }))))));
    }
    const byDay = clear($('spend-by-day'));
    const top = Math.max(0.01, ...s.by_day.map((d) => d.cost_usd));
    if (!s.by_day.length) byDay.append(h('p', { class: 'muted', text: 'No model calls this month.' }));
    else {
      byDay.append(spendTable(['Day', 'Calls', 'Cost', '', 'Unknown cost'],
        s.by_day.map((d) => h('tr', { dataset: { day: d.day } },
          h('td', { text: d.day }), h('td', { text: n(d.calls) }), h('td', { text: money(d.cost_usd) }),
          h('td', {}, h('meter', { min: 0, max: top, value: d.cost_usd, title: money(d.cost_usd) })),
          h('td', { text: d.unknown_cost_calls ? unknownText(d.unknown_cost_calls) : '—' })))));
    }
  }

  async function refreshSpend() {
    try {
      renderSpend(await api('GET', 'spend'));
      showError($('spend-error'), null);
    } catch (e) {
      showError($('spend-error'), e);
    }
  }

  // The budget as typed: "" is none; anything else must be a plain amount.
  // The kernel checks it again and says what is wrong.
  async function setBudget(value) {
    const btn = $('spend-save');
    btn.disabled = true;
    try {
      renderSpend(await api('POST', 'spend', { budget_usd: value }));
      showError($('spend-error'), null);
    } catch (e) {
      showError($('spend-error'), e);
    } finally {
      btn.disabled = false;
    }
  }

  function budgetFromForm(ev) {
    ev.preventDefault();
    const text = $('spend-budget').value.trim().replace(/^\$/, '');
    if (text === '') return setBudget(null);
    // Sent as typed when it is not a number, so the kernel's message explains.
    const v = /^[0-9]+(\.[0-9]+)?$/.test(text) ? Number(text) : text;
    return setBudget(v);
  }

  // A seed.yaml value in words: decisions, seconds.
  function configValue(key, v) {
    if (typeof v === 'string' && DECISIONS[v] && ['safe', 'review', 'dangerous'].includes(key)) return DECISIONS[v];
    if ((key === 'command_timeout_seconds' || key === 'model_wait_seconds') && typeof v === 'number') return duration(v);
    return v;
  }

  async function refreshConfig() {
    const box = $('settings-config');
    try {
      const cfg = await api('GET', 'settings');
      clear(box);
      const top = [];
      for (const [k, v] of Object.entries(cfg)) {
        if (v && typeof v === 'object' && !Array.isArray(v)) {
          const dl = h('dl', { class: 'facts' });
          facts(dl, Object.entries(v).map(([key, x]) => [key, configValue(key, x)]));
          box.append(h('h4', { text: label(k) }), dl);
        } else {
          top.push([k, v]);
        }
      }
      if (top.length) {
        const dl = h('dl', { class: 'facts' });
        facts(dl, top);
        box.prepend(dl);
      }
      showError($('settings-error'), null);
    } catch (e) {
      showError($('settings-error'), e);
    }
  }

  // ---- outbound access ----

  function grantFor(f) {
    return f === 'evolutions' ? 'for evolution, build and test commands' : 'for the live app';
  }

  function grantBy(by) {
    return by === 'owner' ? 'granted by you in Settings' : 'approved request ' + by;
  }

  function grantRow(g, active) {
    const secrets = Array.isArray(g.secrets) ? g.secrets : [];
    const sub = [grantFor(g.for), ' · ', grantBy(String(g.by || '')), ' · ', time(Number(g.at))];
    if (!active && g.revoked_at) sub.push(' · revoked ', time(Number(g.revoked_at)));
    return h('li', { class: 'row', dataset: { grant: g.id } },
      h('div', { class: 'row-main' },
        h('span', { class: 'row-title hosts', text: (Array.isArray(g.hosts) ? g.hosts : []).join(', ') }),
        h('span', { class: 'row-sub' }, sub),
        secrets.length ? h('span', { class: 'row-sub' }, 'secrets: ', secrets.map((s, i) => [i ? ', ' : '',
          s.available ? h('code', { text: s.name })
            : h('span', { class: 'secret-missing' }, h('code', { text: s.name }), ' not available (pass it with -e ' + s.name + ' at start)')])) : null,
        g.reason ? h('span', { class: 'row-sub', text: 'why: ' + g.reason }) : null),
      active ? h('button', { type: 'button', class: 'danger-quiet', text: 'Revoke', on: { click: () => revokeGrant(g) } }) : null);
  }

  function refusedRow(r) {
    const host = r.host ? r.host + (r.port && r.port !== 443 ? ':' + r.port : '') : '(no well-formed host)';
    return h('li', { class: 'row', dataset: { refused: r.host || '' } },
      h('div', { class: 'row-main' },
        h('span', { class: 'row-title hosts', text: host }),
        h('span', { class: 'row-sub' }, 'from ', h('strong', { text: r.door || '?' }), ' · ', r.reason || 'refused', ' · ', time(Number(r.at)))));
  }

  async function refreshOutbound() {
    try {
      const d = await api('GET', 'outbound');
      const grants = clear($('outbound-grants')), refused = clear($('outbound-refused'));
      const regs = clear($('outbound-registries')), revoked = clear($('outbound-revoked'));
      for (const g of d.grants || []) grants.append(grantRow(g, true));
      if (!grants.children.length) grants.append(h('li', { class: 'muted', text: 'Nothing is granted: the live app reaches no host.' }));
      for (const r of d.refused || []) refused.append(refusedRow(r));
      if (!refused.children.length) refused.append(h('li', { class: 'muted', text: 'No connection was refused.' }));
      for (const r of d.registries || []) {
        regs.append(h('li', { class: 'row' }, h('div', { class: 'row-main' },
          h('span', { class: 'row-title hosts', text: r.host }), h('span', { class: 'row-sub', text: r.from }))));
      }
      if (!regs.children.length) {
        regs.append(h('li', { class: 'muted', text: d.registries_pending ? 'Asking the package clients…' : 'None.' }));
      }
      for (const n of d.registry_notes || []) regs.append(h('li', { class: 'row-sub', text: n }));
      for (const g of d.revoked || []) revoked.append(grantRow(g, false));
      $('outbound-revoked-box').hidden = !revoked.children.length;
      showError($('outbound-error'), null);
    } catch (e) {
      showError($('outbound-error'), e);
    }
  }

  async function revokeGrant(g) {
    const hosts = (Array.isArray(g.hosts) ? g.hosts : []).join(', ');
    const secrets = (Array.isArray(g.secrets) ? g.secrets : []).length;
    const ok = await confirmDialog('Revoke this grant?', 'New connections to ' + hosts + ' are refused at once and open ones end.' +
      (secrets ? ' The live app restarts without its secrets.' : ''), 'Revoke');
    if (!ok) return;
    try {
      await api('POST', 'outbound/revoke', { id: g.id });
      refreshOutbound();
    } catch (e) {
      showError($('outbound-error'), e);
    }
  }

  function splitList(s) {
    return String(s || '').split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);
  }

  async function grantFromForm(ev) {
    ev.preventDefault();
    const body = { hosts: splitList($('grant-hosts').value), for: $('grant-for').value };
    const secrets = splitList($('grant-secrets').value);
    if (secrets.length) body.secrets = secrets;
    if ($('grant-reason').value.trim()) body.reason = $('grant-reason').value.trim();
    const button = $('grant-submit');
    button.disabled = true;
    try {
      await api('POST', 'outbound/grant', body);
      $('outbound-form').reset();
      showError($('outbound-error'), null);
      refreshOutbound();
    } catch (e) {
      showError($('outbound-error'), e);
    } finally {
      button.disabled = false;
    }
  }

  async function signOut() {
    try {
      await api('POST', 'owner/logout', {});
    } catch (err) {
      showError($('global-error'), err);
      return;
    }
    window.location.reload();
  }

  // ---- the organism's admin screens ----

  // The frame's sandbox: the screen's scripts and forms run, on its own
  // origin (organism.localhost: another origin than this page, so it cannot
  // reach this page, its cookies or its storage, and cannot lift its own
  // sandbox). No popups, no top navigation (not even on a click), no
  // modals, no downloads: the screen stays inside its frame.
  const SCREEN_SANDBOX = 'allow-scripts allow-forms allow-same-origin';

  async function refreshScreens() {
    try {
      state.screens = await api('GET', 'extensions');
      showError($('screens-error'), null);
    } catch (e) {
      if (state.view === 'screens') showError($('screens-error'), e);
    }
    const d = state.screens || {};
    $('nav-screens').hidden = !((d.screens || []).length || (d.errors || []).length);
    if (state.view === 'screens') renderScreens(parseHash().arg);
  }

  // The screen's URL on the admin origin, or null: path must stay there.
  function screenUrl(path) {
    if (!adminOrigin || typeof path !== 'string' || !path.startsWith('/') || path.startsWith('//')) return null;
    try {
      const u = new URL(path, adminOrigin + '/');
      return u.origin === adminOrigin ? u.href : null;
    } catch (e) {
      return null;
    }
  }

  function screenFrame(screen, url) {
    const f = document.createElement('iframe');
    f.setAttribute('sandbox', SCREEN_SANDBOX);
    f.setAttribute('referrerpolicy', 'no-referrer');
    f.className = 'screen-frame';
    f.id = 'screen-frame';
    f.title = screen.title;
    f.src = url;
    return f;
  }

  function renderScreens(arg) {
    const known = state.screens !== null; // not before the first answer: "none" would be a guess
    const d = state.screens || { screens: [], errors: [] };
    const screens = Array.isArray(d.screens) ? d.screens : [];
    const errors = Array.isArray(d.errors) ? d.errors : [];
    const list = clear($('screens-errors'));
    for (const e of errors) list.append(h('li', { text: e }));
    list.hidden = !errors.length;
    const notice = $('screens-notice');
    notice.hidden = true;
    if (!known) {
      // (refreshScreens renders again when the list comes)
    } else if (!screens.length) {
      notice.textContent = errors.length ? 'No admin screen could be shown: see what was refused above.'
        : 'The app declares no admin screens (organism/control/extensions.json).';
      notice.hidden = false;
    } else if (!adminOrigin) {
      notice.textContent = 'Admin screens are shown only from the app\'s admin origin, organism.localhost, beside a ' +
        'control plane on a localhost origin of its own (server.control_host: seed.localhost, the default). ' +
        'In this layout they are listed, not shown.';
      notice.hidden = false;
    }
    const current = screens.find((x) => x.id === arg) || screens[0] || null;
    const tabs = clear($('screen-tabs'));
    for (const x of screens) {
      tabs.append(h('button', {
        type: 'button', role: 'tab', text: x.title, dataset: { screen: x.id },
        aria: { selected: String(current === x) },
        on: { click: () => { window.location.hash = '#screens/' + encodeURIComponent(x.id); } },
      }));
    }
    const box = $('screen-box');
    const url = current ? screenUrl(current.path) : null;
    const shown = box.querySelector('iframe');
    if (shown && url && shown.dataset.url === url) return; // keep the screen's own state
    clear(box);
    if (!url) return;
    const f = screenFrame(current, url);
    f.dataset.url = url;
    box.append(f);
  }

  // ---- the router ----

  const views = {
    chat: { show: () => { renderLive(); renderMessages(); } },
    evolutions: { show: () => { renderEvolutionList(); refreshEvolutions(); } },
    evolution: { show: (arg) => loadDetail(arg), nav: 'evolutions' },
    generations: { show: () => { $('generations-notice').hidden = true; refreshGenerations(); } },
    backups: { show: () => { backupNotice(); refreshBackups(); } },
    knowledge: { show: (arg) => showKnowledge(arg) },
    roadmap: { show: () => refreshRoadmap() },
    skills: { show: (arg) => showSkills(arg) },
    screens: { show: (arg) => { renderScreens(arg); refreshScreens(); } },
    routines: { show: () => refreshRoutines() },
    spending: { show: () => refreshSpend() },
    health: { show: (arg) => refreshHealth(arg) },
    logs: { show: () => refreshLogs() },
    settings: { show: () => { renderIdentityFacts(); renderStatus(); renderMindCard(); refreshMind(); refreshSessions(); refreshBadge(); refreshOutbound(); refreshUsage(); refreshConfig(); } },
  };

  // The path an #ask= fragment names, or null: "/" then URL path
  // characters only (no spaces, newlines or other controls), at most
  // ASK_PATH_MAX of them once decoded.
  const ASK_PATH_MAX = 200;
  function askPath(raw) {
    let path;
    try {
      path = decodeURIComponent(raw);
    } catch (e) {
      return null;
    }
    return path.length <= ASK_PATH_MAX && /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@%\/]*$/.test(path) ? path : null;
  }

  // The picture point and ask left, shown above Send (fetched with the API
  // token, shown as a data: URL); null hides it.
  async function showAskDraft(id) {
    state.askDraft = null;
    $('ask-draft').hidden = true;
    $('ask-draft-img').removeAttribute('src');
    if (!id) return;
    try {
      const res = await fetch('/_seed/api/ask-drafts/' + id, {
        headers: { 'X-Seed-Token': token }, credentials: 'same-origin', cache: 'no-store',
      });
      if (!res.ok) throw new Error('gone');
      const blob = await res.blob();
      const url = await new Promise((resolve, reject) => {
        const r = new FileReader();
        r.onload = () => resolve(r.result);
        r.onerror = reject;
        r.readAsDataURL(blob);
      });
      if (!/^data:image\/(png|jpeg);base64,/.test(url)) throw new Error('not a picture');
      $('ask-draft-img').src = url;
      $('ask-draft').hidden = false;
      state.askDraft = id;
    } catch (e) {
      const note = $('composer-ask');
      note.textContent += ' The picture of the page is gone (sent, replaced, or older than 30 minutes).';
    }
  }

  // "Open the app": through a one-time link that gives this browser the
  // badge on the app's origin (the control plane's cookie never goes there).
  async function openApp(ev) {
    ev.preventDefault();
    const tab = window.open('about:blank', '_blank');
    try {
      const t = await api('POST', 'badge/ticket', {});
      if (tab) tab.location.href = t.url;
      else window.location.href = t.url;
    } catch (e) {
      if (tab) tab.close();
      showError($('global-error'), e);
    }
  }

  async function refreshBadge() {
    try {
      const b = await api('GET', 'badge');
      $('badge-on').checked = !!b.on;
      showError($('badge-error'), null);
    } catch (e) {
      showError($('badge-error'), e);
    }
  }

  async function switchBadge() {
    const on = $('badge-on').checked;
    try {
      const b = await api('POST', 'badge', { on });
      $('badge-on').checked = !!b.on;
      showError($('badge-error'), null);
    } catch (e) {
      $('badge-on').checked = !on;
      showError($('badge-error'), e);
    }
  }

  function parseHash() {
    let hash = window.location.hash.slice(1);
    if (hash.startsWith('ask=')) {
      // The owner's badge on an organism page opens
      // /_seed/#ask=<path>[&draft=<id>]. A page can forge that link, so it
      // carries only the page's path and the id of a picture left at
      // /_seed/ask-draft: the composer gets one short visible line and the
      // picture on show, nothing is sent until the owner presses Send, and
      // anything else is dropped (and said so).
      const rest = hash.slice(4);
      const amp = rest.indexOf('&');
      const path = askPath(amp < 0 ? rest : rest.slice(0, amp));
      const draft = amp < 0 ? null : rest.slice(amp + 1);
      const note = $('composer-ask');
      if (path && (draft === null || /^draft=[0-9a-f]{32}$/.test(draft))) {
        $('composer-text').value = 'On the page ' + path + ': ';
        note.textContent = 'Filled in from a link on the page ' + path + '. Nothing is sent until you press Send.';
        showAskDraft(draft ? draft.slice(6) : null);
      } else {
        note.textContent = 'A link tried to fill in a message here that was not a page path; it was dropped.';
      }
      note.hidden = false;
      history.replaceState(null, '', window.location.pathname + '#chat');
      hash = 'chat';
    }
    if (hash.startsWith('decide/')) {
      const m = /^decide\/(evo_[0-9a-f]{16})\/(apply|changes|discard)$/.exec(hash);
      if (m) state.decideAsk = { id: m[1], action: m[2] };
      hash = m ? 'evolution/' + m[1] : 'evolutions';
      history.replaceState(null, '', window.location.pathname + '#' + hash);
    }
    const slash = hash.indexOf('/');
    const name = slash < 0 ? hash : hash.slice(0, slash);
    let arg = slash < 0 ? '' : hash.slice(slash + 1);
    try {
      arg = arg.split('/').map(decodeURIComponent).join('/');
    } catch (e) {
      arg = '';
    }
    return views[name] ? { name, arg } : { name: 'chat', arg: '' };
  }

  function route() {
    const { name, arg } = parseHash();
    if (state.decideAsk && state.evolutions.length) refreshPreview();
    if (name === 'evolution' && !/^evo_[0-9a-f]{16}$/.test(arg)) {
      window.location.hash = '#evolutions';
      return;
    }
    const changed = state.view !== name;
    state.view = name;
    if (name !== 'evolution') state.detail = null;
    for (const sec of document.querySelectorAll('.view')) sec.hidden = sec.id !== 'view-' + name;
    const nav = views[name].nav || name;
    for (const a of document.querySelectorAll('[data-view]')) {
      if (a.dataset.view === nav) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    if (changed) window.scrollTo(0, 0);
    views[name].show(arg);
  }

  // ---- live events ----

  const refreshApprovalsSoon = debounce(refreshApprovals, 150);
  const refreshEvolutionsSoon = debounce(refreshEvolutions, 200);
  const refreshHealthSoon = debounce(() => refreshHealth(parseHash().arg), 300);
  // What a finished evolution (or a kernel restart) may have changed: the
  // identity and theme, the status, and the data of the screen on show.
  function refreshVisible() {
    refreshIdentity();
    refreshStatus();
    refreshMind();
    refreshScreens();
    if (state.view === 'generations') refreshGenerations();
    if (state.view === 'knowledge') showKnowledge(parseHash().arg);
    if (state.view === 'skills') showSkills(parseHash().arg);
    if (state.view === 'settings') views.settings.show();
    if (state.view === 'spending') refreshSpend();
    if (state.view === 'routines') refreshRoutines();
    if (state.view === 'health') refreshHealth(parseHash().arg);
  }
  const afterEnd = debounce(refreshVisible, 300);

  function onEvent(kind, data) {
    if (kind === 'message') {
      addMessage(data);
      if (data.role === 'routine' && state.view === 'routines') refreshRoutines();
      return;
    }
    const id = typeof data.evolution === 'string' ? data.evolution : null;
    if (!id) {
      if (kind === 'approval' || kind === 'question') refreshApprovalsSoon(); // the chat's
      if (kind === 'incident' && state.view === 'health') refreshHealthSoon();
      return;
    }
    state.seenActive.add(id);
    if (kind === 'note' && typeof data.generation === 'number') state.gens.set(id, data.generation);
    if (kind !== 'tool_result' || data.is_error) state.last.set(id, { kind, text: eventText(kind, data), at: Date.now() });
    const e = evoById(id);
    if (kind === 'phase') {
      if (e && typeof data.to === 'string') {
        if (data.to === 'needs_input') e.resume_state = data.from;
        e.state = data.to;
        e.updated_at = Date.now();
        if (ENDED.has(data.to)) e.finished_at = Date.now();
      }
      refreshEvolutionsSoon();
      if (data.to === 'needs_input' || data.from === 'needs_input' || ENDED.has(data.to)) refreshApprovalsSoon();
      if (ENDED.has(data.to)) afterEnd();
    } else if (kind === 'plan' && e) {
      e.title = data.title || e.title;
    } else if ((kind === 'waiting' || kind === 'resumed') && e) {
      e.waiting = kind === 'waiting' ? data : null;
    } else if (kind === 'note' && data.preview) {
      state.preview = data.preview === 'running' ? id : state.preview === id ? null : state.preview;
      renderPreview();
    } else if (kind === 'approval' || kind === 'question') {
      refreshApprovalsSoon();
    }
    if (!e) refreshEvolutionsSoon();
    renderLive();
    if (state.view === 'evolutions') renderEvolutionList();
    if (state.detail && state.detail.id === id) refreshDetail(kind === 'phase');
  }

  function onLiveState(s, info) {
    const el = $('live');
    el.dataset.state = s;
    el.textContent = s === 'live' ? 'live' : s === 'reconnecting' ? 'reconnecting…' : 'connecting…';
    el.title = s === 'reconnecting' && info ? 'Live updates dropped; trying again in ' + Math.round(info.wait / 1000) + ' s' : 'Live updates';
  }

  // After every (re)connection: whatever happened while we were away.
  let opens = 0;
  function onStreamOpen() {
    refreshEvolutions();
    refreshApprovals();
    loadMessages();
    if (opens++ > 0) refreshVisible(); // a reconnection: the kernel may have restarted
    if (state.detail) refreshDetail(true);
  }

  // ---- start ----

  document.addEventListener('DOMContentLoaded', () => {
    $('sign-out').addEventListener('click', signOut);
    $('open-app').addEventListener('click', openApp);
    $('badge-on').addEventListener('change', switchBadge);
    $('ask-draft-remove').addEventListener('click', () => showAskDraft(null));
    $('composer').addEventListener('submit', (ev) => {
      ev.preventDefault();
      sendMessage();
    });
    $('evolve-button').addEventListener('click', startEvolution);
    $('outbound-form').addEventListener('submit', grantFromForm);
    $('backup-now').addEventListener('click', backupNow);
    $('health-auto-fix').addEventListener('change', setAutoFix);
    $('roadmap-continue').addEventListener('click', continueRoadmap);
    $('spend-form').addEventListener('submit', budgetFromForm);
    $('spend-clear').addEventListener('click', () => { $('spend-budget').value = ''; setBudget(null); });
    $('lend-form').addEventListener('submit', lendFromBanner);
    $('mind-form').addEventListener('submit', chooseModel);
    $('mind-key-form').addEventListener('submit', lendFromSettings);
    $('mind-forget').addEventListener('click', forgetKey);
    setupPreviewBar();
    $('mind-provider').addEventListener('change', () => {
      state.mindPick = $('mind-provider').value;
      renderMindCard();
    });
    $('composer-text').addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
        ev.preventDefault();
        sendMessage();
      }
    });
    for (const tab of document.querySelectorAll('[data-log]')) tab.addEventListener('click', () => selectLog(tab.dataset.log));
    window.addEventListener('hashchange', route);

    refreshIdentity();
    refreshStatus();
    refreshMind();
    refreshScreens();
    refreshEvolutions();
    refreshApprovals();
    loadMessages();
    route();
    SeedEvents.connect({
      token,
      onEvent,
      onState: onLiveState,
      onOpen: onStreamOpen,
      onUnauthorized: signedOut,
    });
    setInterval(() => {
      if (document.visibilityState !== 'visible') return;
      refreshStatus();
      if (state.view === 'logs') refreshLogs();
      if (state.view === 'chat') renderLive();
    }, 5000);
  });
})();
