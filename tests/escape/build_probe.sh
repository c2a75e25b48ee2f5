#!/bin/sh
# build_probe.sh — the escape suite's attempts from the live organism's build
# sandbox. tests/escape/test_escape.py has a real evolution write this file
# as organism/escape-build.sh and call it from organism/Makefile's build
# target, so it runs whenever the kernel builds the organism. Only the build
# of the live Seed's own folder (where .git is a directory, not a worktree's
# .git file) attempts anything; it writes its report to
# organism/escape-build.out, which the suite reads from the host. Every line
# starts with the attempt it belongs to; "ESCAPED:" (spelled in two halves
# here) marks something that worked. @KERNEL_PORT@ is filled in by the suite.
cd "$(dirname "$0")/.." || exit 0
if [ ! -d .git ]; then
        echo "where: not the live Seed's folder (a worktree); nothing attempted"
        exit 0
fi
echo "where: live"
for f in kernel/pwned-by-build ESCAPE_BUILD_ROOT knowledge/pwned-by-build .git/hooks/post-commit \
         .git/refs/heads/escape-build; do
        if (echo pwned > "$f") 2>/dev/null; then echo "build-write: ESC""APED:wrote $f"
        else echo "build-write: refused $f: $( (echo x > "$f") 2>&1 | sed 's/.*: //')"; fi
done
for f in seed.yaml .git/config .git/HEAD; do
        if (echo "# pwned" >> "$f") 2>/dev/null; then echo "build-write: ESC""APED:appended to $f"
        else echo "build-write: refused $f"; fi
done
for f in .seed/control-token .seed/secrets/postgres-password .seed/secrets/pg-organism; do
        echo "build-dot-seed: $f: $(head -c 200 "$f" 2>&1)"
done
echo "build-dot-seed: .seed holds: $(ls -A .seed 2>&1 | tr '\n' ' ')"
python3 - <<'PY' 2>&1 | sed 's/^/build-kernel-port: /'
import socket
for host in ("127.0.0.1", "10.0.2.2"):
    try:
        s = socket.create_connection((host, @KERNEL_PORT@), 3)
        s.sendall(b"GET /_seed/healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        print("ESC" + "APED:kernel answered on", host, s.recv(40))
    except Exception as e:
        print(host, "no connection:", e)
PY
