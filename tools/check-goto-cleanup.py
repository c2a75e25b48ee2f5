#!/usr/bin/env python3
"""A goto must not jump forward over a _cleanup_ declaration into its scope.

GCC compiles such a jump without a word and then runs the cleanup on a
variable that was never set (free() of whatever the stack held); clang
refuses it. The suites are built with gcc, so this reads the sources: for
every forward goto, no variable declared with _cleanup_* (or
__attribute__((cleanup))) may lie between the goto and its label in a
block that holds the label. Prints TAP (one test) and the places.

Usage: check-goto-cleanup.py DIR...   (every .c file beneath)
"""
import os
import re
import sys

CLEANUP = re.compile(r'\b_cleanup_\w*\b|__attribute__\s*\(\(\s*cleanup\b')
GOTO = re.compile(r'\bgoto\s+([A-Za-z_]\w*)\s*;')
LABEL = re.compile(r'^[ \t]*([A-Za-z_]\w*)[ \t]*:(?!:)', re.M)


def blank(src):
    """Comments, strings and character constants as spaces (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
        elif src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
        elif c in '"\'':
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            j += 1
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r'[^\n]', ' ', src[i:j]))
        i = j
    return ''.join(out)


def functions(text):
    """(start, end) of every brace block at file level."""
    depth, start = 0, None
    for i, c in enumerate(text):
        if c == '{':
            if depth == 0:
                start = i
            depth += 1
        elif c == '}':
            depth -= 1
            if depth == 0:
                yield start, i + 1


def problems(path):
    text = blank(open(path, encoding='utf-8', errors='replace').read())
    for lo, hi in functions(text):
        body = text[lo:hi]
        # The block (its range in body) that encloses each position.
        stack, blocks, inner = [], {}, [None] * len(body)
        for i, c in enumerate(body):
            if c == '{':
                stack.append(i)
            elif c == '}' and stack:
                s = stack.pop()
                blocks[s] = i
            inner[i] = stack[-1] if stack else None
        labels = {m.group(1): m.start(1) for m in LABEL.finditer(body)
                  if m.group(1) not in ('default', 'case')}
        decls = [m.start() for m in CLEANUP.finditer(body)]
        for g in GOTO.finditer(body):
            q = labels.get(g.group(1))
            if q is None or q < g.start():
                continue
            for d in decls:
                b = inner[d]
                if g.start() < d < q and b is not None and b < q < blocks.get(b, -1):
                    line = text.count('\n', 0, lo + g.start()) + 1
                    dline = text.count('\n', 0, lo + d) + 1
                    yield f'{path}:{line}: goto {g.group(1)} jumps over the _cleanup_ declaration on line {dline}'
                    break


def main(dirs):
    found = []
    for top in dirs:
        for root, _, files in os.walk(top):
            for f in sorted(files):
                if f.endswith('.c'):
                    found.extend(problems(os.path.join(root, f)))
    print('TAP version 13')
    print('1..1')
    for p in found:
        print('# ' + p)
    print(('ok' if not found else 'not ok') + ' 1 - no goto jumps over a _cleanup_ declaration')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:] or ['.']))
