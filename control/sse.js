// sse.js — GET /_seed/api/events read with fetch() (EventSource cannot send
// the X-Seed-Token header), parsed as Server-Sent Events, reconnecting with
// backoff. The server pings every 15 s; a stream silent for 45 s is dropped
// and opened again.
'use strict';

const SeedEvents = (() => {
  const MAX_LINE = 4 * 1024 * 1024; // a line longer than this ends the stream
  const IDLE_MS = 45000;

  // A stateful SSE parser: feed(text) calls onEvent({event, data}) for each
  // complete event (data lines joined with "\n"). Comments and unknown
  // fields are ignored; "message" is the default event name.
  function createParser(onEvent) {
    let buf = '';
    let event = '';
    let data = [];
    let sawCR = false;

    function line(l) {
      if (l === '') {
        if (data.length) onEvent({ event: event || 'message', data: data.join('\n') });
        event = '';
        data = [];
        return;
      }
      if (l[0] === ':') return;
      const i = l.indexOf(':');
      const field = i < 0 ? l : l.slice(0, i);
      let value = i < 0 ? '' : l.slice(i + 1);
      if (value[0] === ' ') value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }

    return function feed(chunk) {
      let s = String(chunk);
      if (sawCR && s[0] === '\n') s = s.slice(1); // a CRLF split across chunks
      sawCR = false;
      buf += s;
      let start = 0;
      for (let i = 0; i < buf.length; i++) {
        const c = buf[i];
        if (c === '\n' || c === '\r') {
          line(buf.slice(start, i));
          if (c === '\r') {
            if (i + 1 === buf.length) sawCR = true;
            else if (buf[i + 1] === '\n') i++;
          }
          start = i + 1;
        }
      }
      buf = buf.slice(start);
      if (buf.length > MAX_LINE) throw new Error('event stream line too long');
    };
  }

  // Backoff before attempt n (0-based): 1 s, 2 s, 4 s … 30 s, ±20 % jitter.
  function backoff(n) {
    const base = Math.min(30000, 1000 * Math.pow(2, Math.min(n, 5)));
    return Math.round(base * (0.8 + Math.random() * 0.4));
  }

  // Opens the stream and keeps it open. opts: {token, onEvent(kind, data),
  // onState('connecting'|'live'|'reconnecting'), onUnauthorized(),
  // onOpen() (after every (re)connection: refresh what may have been missed)}.
  // Returns {close()}.
  function connect(opts) {
    let closed = false;
    let attempt = 0;
    let controller = null;
    let timer = null;

    const state = (s, info) => opts.onState && opts.onState(s, info);

    async function once() {
      controller = new AbortController();
      let idle = null;
      const arm = () => {
        clearTimeout(idle);
        idle = setTimeout(() => controller.abort(), IDLE_MS);
      };
      try {
        arm();
        const res = await fetch('/_seed/api/events', {
          headers: { 'X-Seed-Token': opts.token, Accept: 'text/event-stream' },
          credentials: 'same-origin',
          cache: 'no-store',
          signal: controller.signal,
        });
        if (res.status === 401) {
          closed = true;
          if (opts.onUnauthorized) opts.onUnauthorized();
          return;
        }
        if (!res.ok || !res.body) throw new Error('event stream: HTTP ' + res.status);
        const feed = createParser((ev) => {
          let data = null;
          try {
            data = JSON.parse(ev.data);
          } catch (e) {
            data = null;
          }
          if (data && typeof data === 'object') opts.onEvent(ev.event, data);
        });
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let opened = false;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          arm();
          if (!opened) {
            opened = true;
            attempt = 0;
            state('live');
            if (opts.onOpen) opts.onOpen();
          }
          feed(value);
        }
      } catch (e) {
        // network error, abort on idle, or a malformed stream: reconnect
      } finally {
        clearTimeout(idle);
      }
    }

    async function loop() {
      state('connecting');
      while (!closed) {
        await once();
        if (closed) break;
        const wait = backoff(attempt++);
        state('reconnecting', { wait });
        await new Promise((resolve) => {
          timer = setTimeout(resolve, wait);
        });
      }
    }

    loop();
    return {
      close() {
        closed = true;
        clearTimeout(timer);
        if (controller) controller.abort();
      },
    };
  }

  return { createParser, backoff, connect };
})();

if (typeof module === 'object' && module.exports) module.exports = SeedEvents;
