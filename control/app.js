// The control plane's first screen: status and logs.
// The API token comes from a <meta> tag in the page (served only for
// top-level navigations) and travels only in the X-Seed-Token header.
'use strict';

(function () {
  const token = document.querySelector('meta[name="seed-token"]').content;
  const $ = (id) => document.getElementById(id);
  let currentLog = 'kernel';

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
    const res = await fetch('/_seed/api/' + path, init);
    let data = null;
    try {
      data = await res.json();
    } catch (e) {
      data = null;
    }
    if (res.status === 401) {
      // Signed out elsewhere or the session expired: show the private page.
      window.location.reload();
    }
    if (!res.ok) {
      throw new ApiError(res.status, (data && data.error) || res.status + ' ' + res.statusText);
    }
    return data;
  }

  function showError(el, err) {
    if (err) {
      el.textContent = err.message;
      el.hidden = false;
    } else {
      el.textContent = '';
      el.hidden = true;
    }
  }

  function organismState(status) {
    const o = status && status.organism;
    if (typeof o === 'string') return o;
    if (o && typeof o.state === 'string') return o.state;
    return 'unknown';
  }

  function label(key) {
    const s = key.replace(/_/g, ' ');
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  function show(value) {
    if (value === null || value === undefined) return '—';
    if (Array.isArray(value)) return value.map(show).join(', ');
    if (typeof value === 'object') {
      return Object.entries(value).map(([k, v]) => label(k).toLowerCase() + ' ' + show(v)).join(' · ');
    }
    return String(value);
  }

  function renderStatus(status) {
    const state = organismState(status);
    $('organism-state').textContent = state;
    $('body-state').dataset.state = state;
    if (typeof status.name === 'string' && status.name) {
      $('seed-name').textContent = status.name;
    }
    const facts = $('status-facts');
    facts.replaceChildren();
    for (const [key, value] of Object.entries(status || {})) {
      if (key === 'name' || key === 'organism') continue;
      const dt = document.createElement('dt');
      dt.textContent = label(key);
      const dd = document.createElement('dd');
      dd.textContent = show(value);
      facts.append(dt, dd);
    }
    $('status-updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  }

  async function refreshStatus() {
    try {
      renderStatus(await api('GET', 'status'));
      showError($('status-error'), null);
    } catch (err) {
      showError($('status-error'), err);
    }
  }

  async function refreshLogs() {
    const pre = $('log-lines');
    try {
      const data = await api('GET', 'logs?name=' + encodeURIComponent(currentLog) + '&lines=300');
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      pre.textContent = data.lines.length ? data.lines.join('\n') : '(empty)';
      if (atBottom) pre.scrollTop = pre.scrollHeight;
      showError($('logs-error'), null);
    } catch (err) {
      showError($('logs-error'), err);
    }
  }

  function selectLog(name) {
    currentLog = name;
    for (const tab of document.querySelectorAll('[data-log]')) {
      tab.setAttribute('aria-selected', String(tab.dataset.log === name));
    }
    $('log-lines').textContent = 'Loading…';
    refreshLogs();
  }

  async function signOut() {
    try {
      await api('POST', 'owner/logout', {});
    } catch (err) {
      showError($('status-error'), err);
      return;
    }
    window.location.reload();
  }

  document.addEventListener('DOMContentLoaded', () => {
    for (const tab of document.querySelectorAll('[data-log]')) {
      tab.addEventListener('click', () => selectLog(tab.dataset.log));
    }
    $('sign-out').addEventListener('click', signOut);
    refreshStatus();
    refreshLogs();
    setInterval(() => {
      if (document.visibilityState === 'visible') {
        refreshStatus();
        refreshLogs();
      }
    }, 5000);
  });
})();
