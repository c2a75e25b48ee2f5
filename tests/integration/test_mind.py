#!/usr/bin/env python3
"""End to end: the Seed's mind (kernel/mind) over the CLI and the API of a
real Seed (real PostgreSQL, bwrap and git) whose model is the scripted model
server through provider openai-compatible, started WITHOUT its model key
(model.api_key_env names a variable that is not passed):

- `seed run` and `seed status` say that the Seed cannot think, naming the
  variable; evolutions and messages are refused (409) and nothing is created;
- a key lent through the API is validated, never echoed, and reaches the
  model; the models list and the probed choice use it;
- the lent key's canary appears nowhere: not in the Seed's folder, .seed,
  logs or git objects, not in any database (pg_dumpall), not in any process's
  command line or environment, not inside a sandbox (checked from inside by
  an evolution's own command), not in any API answer;
- after a restart the key is gone and the choice stays.
Prints TAP. Environment: SEED_BIN (the seed CLI).
"""
import hashlib
import json
import re
import secrets

import taplib
from seedlib import ScriptedSeed, api, canary_hits, evolution, request, script, seed, submit, wait_until
from taplib import test

KEY_ENV = 'MIND_TEST_MODEL_KEY'
CANARY = 'sk-canary-lent-' + secrets.token_hex(16)
CANARY_SHA = hashlib.sha256(CANARY.encode()).hexdigest()
NO_KEY = f'No model key: the Seed cannot think yet. Start it with -e {KEY_ENV} (or lend a key in Settings).'


def setup():
    c = ScriptedSeed('seed-mind-', 'mindapi', key_env=KEY_ENV)
    c.answers = []  # every API answer's body, searched for the canary at the end
    return c


def teardown(c):
    if c is not None:
        c.close()


def call(c, path, method='GET', body=None):
    r = api(c, path, method, body)
    c.answers.append((f'{method} {path}', r.body))
    return r


def model_requests(c):
    return request(c.model_base + '/_requests').json()


@test
def run_says_in_one_line_that_the_seed_cannot_think(c):
    lines = [line for line in c.run_output.splitlines() if 'model key' in line.lower()]
    assert lines == [NO_KEY], c.run_output


@test
def status_names_the_model_and_the_missing_key(c):
    p = seed('status', '--dir', c.dir)
    assert 'Model:       scripted via openai-compatible (key: none)' in p.stdout, p.stdout
    assert f'Warning:     {NO_KEY}' in p.stdout, p.stdout
    st = call(c, '/_seed/api/status').json()
    assert st['mind'] == {'provider': 'openai-compatible', 'model': 'scripted', 'key_source': 'none',
                          'key_env': KEY_ENV, 'ready': False, 'why_not': NO_KEY}, st['mind']


@test
def without_a_key_nothing_is_created(c):
    r = call(c, '/_seed/api/evolutions', 'POST', {'intent': 'Become a guestbook'})
    assert r.status == 409 and r.json() == {'error': NO_KEY}, (r.status, r.text)
    r = call(c, '/_seed/api/messages', 'POST', {'text': 'hello?'})
    assert r.status == 409 and r.json() == {'error': NO_KEY}, (r.status, r.text)
    p = seed('evolve', '--dir', c.dir, 'Become a guestbook', check=False)
    assert p.returncode != 0 and NO_KEY in p.stderr, (p.returncode, p.stdout, p.stderr)
    assert call(c, '/_seed/api/evolutions').json()['evolutions'] == []
    assert call(c, '/_seed/api/messages').json()['messages'] == []
    assert model_requests(c) == []


@test
def a_lent_key_is_validated_and_never_echoed(c):
    bad = [
        {'provider': 'openai-compatible'},
        {'provider': 'openai-compatible', 'key': ''},
        {'provider': 'openai-compatible', 'key': CANARY + ' x'},
        {'provider': 'openai-compatible', 'key': CANARY + '\n'},
        {'provider': 'openai-compatible', 'key': 'k' * 4097},
        {'provider': 'nope', 'key': CANARY},
        {'provider': 'openai-compatible', 'key': CANARY, 'base_url': 'http://evil.example/v1'},
    ]
    for body in bad:
        r = call(c, '/_seed/api/mind/key', 'POST', body)
        assert r.status == 400, (body.keys(), r.status, r.text)
    r = call(c, '/_seed/api/mind/key', 'POST', {'provider': 'openai-compatible', 'key': 'k' * 4096})
    assert r.status == 200, r.text  # the longest allowed
    r = call(c, '/_seed/api/mind/key', 'POST', {'provider': 'openai-compatible', 'key': CANARY})
    assert r.status == 200, r.text
    m = r.json()
    assert m['key_source'] == 'lent' and m['ready'] is True and m['why_not'] is None, m
    r = call(c, '/_seed/api/mind/key/forget', 'POST', {'provider': 'openai-compatible'})
    assert r.json()['forgotten'] == 1 and r.json()['key_source'] == 'none', r.text
    assert call(c, '/_seed/api/evolutions', 'POST', {'intent': 'x'}).status == 409
    r = call(c, '/_seed/api/mind/key', 'POST', {'provider': 'openai-compatible', 'key': CANARY})
    assert r.status == 200 and r.json()['ready'] is True, r.text


@test
def models_are_listed_with_the_lent_key(c):
    r = call(c, '/_seed/api/mind/models?provider=openai-compatible')
    assert r.status == 200, r.text
    assert [m['id'] for m in r.json()['models']] == ['scripted', 'scripted-large'], r.text
    got = [x for x in model_requests(c) if x['method'] == 'GET']
    assert len(got) == 1 and got[0]['path'] == '/v1/models', got
    assert got[0]['auth']['authorization']['sha256'] == CANARY_SHA


@test
def a_choice_is_probed_before_it_is_kept(c):
    script(c, [])
    r = call(c, '/_seed/api/mind', 'POST', {'provider': 'openai-compatible', 'model': 'scripted-no-tools'})
    assert r.status == 502, (r.status, r.text)
    assert 'No endpoints found that support tool use' in r.json()['error'], r.text
    assert call(c, '/_seed/api/mind').json()['model'] == 'scripted'
    script(c, [{'text': 'ready', 'match': 'connection check'}])
    r = call(c, '/_seed/api/mind', 'POST', {'provider': 'openai-compatible', 'model': 'scripted-large'})
    assert r.status == 200, (r.status, r.text)
    assert r.json()['model'] == 'scripted-large' and r.json()['chosen'] is True, r.text
    probe = model_requests(c)[0]
    assert probe['body']['model'] == 'scripted-large' and len(probe['body']['tools']) == 1, probe['body']
    assert probe['auth']['authorization']['sha256'] == CANARY_SHA


# Run inside the evolution's sandbox: counts the canary in every process's
# environment and command line it can see, and in the files it can read.
# The canary is given in two halves, so the command itself never holds it.
def sandbox_check():
    a, b = CANARY[:len(CANARY) // 2], CANARY[len(CANARY) // 2:]
    return (f"a='{a}'; b='{b}'; "
            "{ env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; } 2>/dev/null | tr '\\0' '\\n' > /tmp/dump; "
            'echo "canary-in-processes: $(grep -c -F -- "$a$b" /tmp/dump)"; '
            'echo "canary-in-files: $(grep -rlsF -- "$a$b" /workspace /home /run /tmp 2>/dev/null '
            "| grep -v '^/tmp/dump$' | wc -l)\"")


@test
def the_lent_key_reaches_the_model_and_appears_nowhere(c):
    script(c, [
        {'tool_calls': [{'name': 'submit_plan', 'arguments': {
            'title': 'Leave a note', 'scope': 'note', 'summary': 'Write a note.', 'steps': ['write the note']}}]},
        {'tool_calls': [{'name': 'run', 'arguments': {'command': sandbox_check()}}]},
        {'tool_calls': [{'name': 'write_file', 'arguments': {'path': 'organism/NOTE.txt', 'content': 'hello\n'}}]},
        {'tool_calls': [{'name': 'finish', 'arguments': {'summary': 'Wrote organism/NOTE.txt.'}}]},
        {'tool_calls': [{'name': 'submit_reflection', 'arguments': {'notes': 'Nothing new learned.'}}]},
        {'text': 'Done.'},
    ])
    evo_id = submit(c, 'Leave a note')
    e = wait_until(lambda: (lambda x: x if x['state'] in ('complete', 'failed', 'cancelled') else None)(
        evolution(c, evo_id)), timeout=600, interval=1, what='the evolution to end')
    assert e['state'] == 'complete', (e['state'], e.get('error'))
    reqs = [x for x in model_requests(c) if x['method'] == 'POST']
    assert len(reqs) >= 5, [x['status'] for x in reqs]
    assert all(x['auth']['authorization']['sha256'] == CANARY_SHA for x in reqs)  # it reached the model
    # From inside the sandbox: nothing.
    sent = json.dumps(reqs)
    assert re.search(r'canary-in-processes: 0\\ncanary-in-files: 0', sent), sent[-3000:]
    # Every API answer, now and during the test.
    for path in ['/_seed/api/status', '/_seed/api/mind', '/_seed/api/mind/models', '/_seed/api/settings',
                 '/_seed/api/evolutions', f'/_seed/api/evolutions/{evo_id}', f'/_seed/api/evolutions/{evo_id}/diff',
                 '/_seed/api/approvals', '/_seed/api/generations', '/_seed/api/messages', '/_seed/api/knowledge',
                 '/_seed/api/skills', '/_seed/api/usage', '/_seed/api/identity',
                 '/_seed/api/logs?name=kernel&lines=2000', '/_seed/api/logs?name=organism&lines=2000']:
        r = call(c, path)
        assert r.status == 200, (path, r.status, r.text)
    assert len(c.answers) > 25
    hits = [where for where, body in c.answers if CANARY.encode() in body]
    # The folder, .seed, logs, git, every database, every process.
    hits += canary_hits(c.dir, [CANARY.encode()])
    assert CANARY not in json.dumps(model_requests(c))  # the scripted server keeps only its hash
    assert not hits, f'the lent key was found in: {hits}'


@test
def after_a_restart_the_key_is_gone_and_the_choice_stays(c):
    out = c.restart()
    assert NO_KEY in out, out
    m = call(c, '/_seed/api/mind').json()
    assert m['key_source'] == 'none' and m['ready'] is False, m
    assert m['model'] == 'scripted-large' and m['chosen'] is True, m
    assert call(c, '/_seed/api/evolutions', 'POST', {'intent': 'x'}).status == 409
    assert not canary_hits(c.dir, [CANARY.encode()])


if __name__ == '__main__':
    taplib.run(setup, teardown)
