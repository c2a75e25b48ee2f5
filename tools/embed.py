#!/usr/bin/env python3
"""Embeds files into a C source as byte arrays.

usage: embed.py OUT.c SYMBOL BASEDIR FILE...

Writes `const struct embedded_file SYMBOL[]` (terminated by a zeroed entry)
with each file's path relative to BASEDIR, its bytes and their length.
The struct is declared in kernel/base/embedded.h.
"""
import os
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, symbol, base = sys.argv[1:4]
    files = sorted(sys.argv[4:], key=lambda f: os.path.relpath(f, base))
    lines = ['#include "base/embedded.h"', '']
    for i, path in enumerate(files):
        with open(path, 'rb') as f:
            data = f.read()
        body = ','.join(str(b) for b in data)
        lines.append(f'static const unsigned char {symbol}_{i}[] = {{{body}{"," if data else ""}0}};')
    lines.append(f'const struct embedded_file {symbol}[] = {{')
    for i, path in enumerate(files):
        rel = os.path.relpath(path, base).replace('\\', '/')
        size = os.path.getsize(path)
        lines.append(f'  {{"{rel}", {symbol}_{i}, {size}}},')
    lines.append('  {0, 0, 0},')
    lines.append('};')
    with open(out, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
