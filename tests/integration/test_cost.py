#!/usr/bin/env python3
"""End to end: what an evolution costs (issue 19, Cost). A real Seed whose
model is the scripted model server (tests/fakes/model_server.py, provider
openai-compatible) with a small model.context_chars runs one evolution that
reads a large file again and again; the server reports prompt-cache usage in
the OpenAI style (usage.prompt_tokens_details). Checked: the evolution's API
answer and Settings' usage keep cached and uncached input tokens apart, with
the sums of what the model reported; no request to this provider carries a
cache_control breakpoint; every request stays within model.context_chars,
old tool output trimmed to a note. Prints TAP.

Environment: SEED_BIN (the seed CLI).
"""
import json
import os
import re

import taplib
from seedlib import ScriptedSeed, api, evolution, request, script, submit, wait_until
from taplib import Skip, test

CONTEXT_CHARS = 40000
BIG = ''.join(f'line {i:05d} of a large file, long enough to need trimming later on\n' for i in range(300))
USAGE = {'input_tokens': 1000, 'output_tokens': 10, 'cached_tokens': 600, 'cache_write_tokens': 100}


def small_context(seed_dir):
    path = os.path.join(seed_dir, 'seed.yaml')
    text = open(path).read()
    text, n = re.subn(r'(?m)^(model:\n(?:[ \t]+.*\n)+)', lambda m: m.group(1) + f'  context_chars: {CONTEXT_CHARS}\n',
                      text)
    assert n == 1, text
    open(path, 'w').write(text)


def setup():
    return ScriptedSeed('seed-cost-', 'cost', before_run=small_context)


def teardown(c):
    if c is not None:
        c.close()


def call(name, **args):
    return {'tool_calls': [{'name': name, 'arguments': args}], 'usage': USAGE}


def cost_script():
    read = call('read_file', path='organism/big.txt')
    return [
        call('list_dir', path='organism'),
        call('submit_plan', title='A large file', scope='big', summary='Write a large file and read it back.',
             steps=['write organism/big.txt', 'read it']),
        call('write_file', path='organism/big.txt', content=BIG),
        read, read, read, read,
        call('finish', summary='Wrote and read organism/big.txt.'),
        call('submit_reflection', notes='Nothing new learned.'),
        {'text': 'Done.', 'usage': USAGE},
    ]


def model_posts(c):
    reqs = request(c.model_base + '/_requests').json()
    return [q for q in reqs if q['method'] == 'POST' and q['path'].endswith('/chat/completions')]


def request_chars(body):
    """What a request holds, as the kernel counts it: texts, tool calls and tool definitions."""
    n = 0
    for m in body['messages']:
        content = m.get('content')
        if isinstance(content, str):
            n += len(content.encode())
        elif isinstance(content, list):
            n += sum(len(p.get('text', '').encode()) for p in content)
        for tc in m.get('tool_calls') or []:
            n += len(tc['function']['arguments'].encode()) + len(tc['function']['name']) + len(tc['id'])
    for t in body.get('tools') or []:
        fn = t['function']
        n += len(fn['name']) + len(fn.get('description', '').encode()) + \
            len(json.dumps(fn.get('parameters', {}), separators=(',', ':')).encode())
    return n


@test
def an_evolution_records_cached_and_uncached_tokens(c):
    script(c, cost_script())
    evo_id = submit(c, 'Write a large file and read it back')
    e = wait_until(lambda: (lambda x: x if x['state'] in ('complete', 'failed', 'cancelled', 'rolled_back') else None)(
        evolution(c, evo_id)), timeout=900, interval=0.5, what='the evolution')
    assert e['state'] == 'complete', (e['state'], e.get('error'))
    c.evo = e
    posts = model_posts(c)
    answered = [q for q in posts if q['status'] == 200]
    n = len(answered)  # every step but the spare text at the end
    assert n == len(cost_script()) - 1, (n, [q['status'] for q in posts])
    u = e['usage']
    want = {'calls': n, 'input_tokens': 1000 * n, 'cached_input_tokens': 600 * n, 'uncached_input_tokens': 400 * n,
            'cache_write_tokens': 100 * n, 'output_tokens': 10 * n}
    for k, v in want.items():
        assert u[k] == v, (k, u)
    total = api(c, '/_seed/api/usage').json()['total']
    assert total['cached_input_tokens'] >= 600 * n and total['uncached_input_tokens'] >= 400 * n, total
    assert total['input_tokens'] == total['cached_input_tokens'] + total['uncached_input_tokens'], total


@test
def no_breakpoints_for_a_provider_without_prompt_caching(c):
    posts = model_posts(c)
    assert posts
    for q in posts:
        assert q.get('cache_breakpoints') == 0, q.get('cache_breakpoints')
        assert 'cache_control' not in json.dumps(q['body'])


@test
def every_request_stays_within_context_chars(c):
    e = getattr(c, 'evo', None)
    if not e:
        raise Skip('no evolution completed')
    posts = [q for q in model_posts(c) if q['status'] == 200]
    sizes = [request_chars(q['body']) for q in posts]
    print(f'# request characters per turn: {sizes} (budget {CONTEXT_CHARS})', flush=True)
    assert max(sizes) <= CONTEXT_CHARS, sizes
    notes = [ev['data'].get('text', '') for ev in e['events'] if ev['kind'] == 'note']
    assert any('context compacted' in t for t in notes), notes
    # the outputs read before are trimmed to a note naming them; the newest one is whole
    last = posts[7]['body']  # answered by finish's step: the request after the fourth read
    assert 'more bytes of this read_file output' in json.dumps(last), json.dumps(last)[-2000:]
    newest = [m for m in last['messages'] if m['role'] == 'tool'][-1]['content']
    assert 'trimmed' not in newest and len(newest) >= len(BIG) * 0.9, newest[:300]


if __name__ == '__main__':
    taplib.run(setup, teardown)
