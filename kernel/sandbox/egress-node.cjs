'use strict';
// Preloaded in every sandbox that has a way out (NODE_OPTIONS=--require …).
// The sandbox's only way out is the kernel's egress proxy at HTTPS_PROXY
// (HTTP CONNECT). Node.js honours that variable by itself only from 22.21
// and 24 on (with NODE_USE_ENV_PROXY=1); for older ones this routes fetch()
// and the https module's default agent through it. It grants nothing: the
// proxy decides. Hosts in NO_PROXY (localhost, 127.0.0.1) stay direct.
(function () {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major >= 24 || (major === 22 && minor >= 21)) return;
  const proxy = process.env.HTTPS_PROXY || process.env.https_proxy;
  if (!proxy) return;
  let url;
  try { url = new URL(proxy); } catch (e) { return; }
  if (url.protocol !== 'http:') return;
  const net = require('net');
  const tls = require('tls');
  const noProxy = String(process.env.NO_PROXY || process.env.no_proxy || '')
    .split(',').map((h) => h.trim().toLowerCase()).filter(Boolean);
  const direct = (host) => noProxy.includes(String(host).toLowerCase().replace(/^\[|\]$/g, ''));
  const HEAD_MAX = 8192;

  // A socket tunnelled to host:port through the proxy; cb(err, socket).
  function tunnel(host, port, cb) {
    const s = net.connect({ host: url.hostname, port: Number(url.port) || 80 });
    let head = Buffer.alloc(0);
    let done = false;
    const finish = (err, sock) => {
      if (done) return;
      done = true;
      s.removeListener('data', onData);
      s.removeListener('error', finish);
      if (err) s.destroy();
      cb(err, sock);
    };
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > HEAD_MAX) finish(new Error('egress proxy: answer too long'));
        return;
      }
      const lines = head.subarray(0, end).toString('latin1').split('\r\n');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
      if (!m || m[1] !== '200') {
        const why = head.subarray(end + 4).toString('utf8').trim().split('\n')[0];
        finish(new Error(`egress proxy refused ${host}:${port}: ${lines[0]}${why ? ' (' + why + ')' : ''}`));
        return;
      }
      if (end + 4 < head.length) s.unshift(head.subarray(end + 4));
      finish(null, s);
    };
    s.on('data', onData);
    s.once('error', finish);
    s.once('connect', () => {
      const authority = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
      s.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    });
  }

  // fetch(): Node's bundled undici keeps its dispatcher under this symbol;
  // its Agent takes a `connect` function that hands it a ready socket.
  // Installed at the first call, so processes that never fetch pay nothing.
  function installDispatcher(originalFetch) {
    const key = Symbol.for('undici.globalDispatcher.1');
    originalFetch('data:,').catch(() => {}); // loads undici, which sets its dispatcher
    const current = globalThis[key];
    const Agent = current && current.constructor;
    if (!Agent) return;
    globalThis[key] = new Agent({
      connect(opts, cb) {
        const host = opts.hostname;
        const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
        const wrap = (err, sock) => {
          if (err) return cb(err);
          if (opts.protocol !== 'https:') return cb(null, sock);
          const t = tls.connect({ socket: sock, servername: opts.servername || host,
            ALPNProtocols: ['http/1.1'] });
          t.once('secureConnect', () => cb(null, t));
          t.once('error', cb);
        };
        if (direct(host)) {
          const sock = opts.protocol === 'https:'
            ? tls.connect({ host, port, servername: opts.servername || host, ALPNProtocols: ['http/1.1'] })
            : net.connect({ host, port });
          sock.once(opts.protocol === 'https:' ? 'secureConnect' : 'connect', () => cb(null, sock));
          sock.once('error', cb);
          return;
        }
        tunnel(host, port, wrap);
      },
    });
  }
  if (typeof globalThis.fetch === 'function') {
    const originalFetch = globalThis.fetch;
    let installed = false;
    const fetch = function fetch(...args) {
      if (!installed) {
        installed = true;
        try { installDispatcher(originalFetch); } catch (e) { /* fetch stays as it was */ }
      }
      return originalFetch.apply(this, args);
    };
    Object.defineProperty(globalThis, 'fetch', { value: fetch, writable: true, configurable: true,
      enumerable: true });
  }

  // The https module's default agent (https.get, https.request, most clients).
  try {
    const https = require('https');
    class TunnelAgent extends https.Agent {
      createConnection(options, cb) {
        const host = options.host || options.hostname || 'localhost';
        const port = Number(options.port) || 443;
        if (direct(host)) return super.createConnection(options, cb);
        tunnel(host, port, (err, sock) => {
          if (err) return cb(err);
          const t = tls.connect({ ...options, socket: sock, servername: options.servername || host });
          cb(null, t);
        });
        return undefined;
      }
    }
    https.globalAgent = new TunnelAgent({ keepAlive: true });
  } catch (e) { /* https stays as it was */ }
})();
