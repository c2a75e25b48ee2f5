#!/usr/bin/env python3
"""Lays out the control plane's files for embedding (tools/embed.py).

usage: bundle.py OUTDIR APP_JS_PARTS... -- COPIED_FILES...

The browser gets one script, /_seed/app.js: the parts (dom.js, md.js,
sse.js, app.js, in that order) joined into OUTDIR/app.js. Each part stays
its own file in control/ so tests can load it alone (node --test). The other
files are copied to OUTDIR unchanged.
"""
import os
import shutil
import sys


def main():
    args = sys.argv[1:]
    if len(args) < 2 or '--' not in args:
        sys.exit(__doc__)
    out = args[0]
    sep = args.index('--')
    parts, copies = args[1:sep], args[sep + 1:]
    os.makedirs(out, exist_ok=True)
    chunks = []
    for p in parts:
        with open(p, encoding='utf-8') as f:
            chunks.append(f'// ---- {os.path.basename(p)} ----\n' + f.read())
    tmp = os.path.join(out, 'app.js.tmp')
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write('\n'.join(chunks))
    os.replace(tmp, os.path.join(out, 'app.js'))
    for c in copies:
        shutil.copyfile(c, os.path.join(out, os.path.basename(c)))


if __name__ == '__main__':
    main()
