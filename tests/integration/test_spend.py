#!/usr/bin/env python3
"""End to end: Spend (issue 18) over the API of a real Seed (real PostgreSQL,
bwrap and git) whose model is the scripted model server through provider
openai-compatible, with seed.yaml's spend.prices pricing its model "scripted":

- a chat call whose answer carries usage.cost is recorded with that cost and
  purpose chat; one without is priced from seed.yaml's table;
- GET /_seed/api/spend shows this UTC month by purpose and by day;
- a bad budget is a 400 saying what is expected, and changes nothing;
- a budget at or below the month's spend pauses autonomous work and says so
  once in the chat, as a kernel message (not the owner's), which the chat
  agent then reads framed as the kernel's record; the chat itself goes on.
Prints TAP. Environment: SEED_BIN (the seed CLI).
"""
import os
import re
import subprocess
import time

import taplib
from seedlib import ScriptedSeed, api, request, script
from taplib import test

def add_prices(d):
    p = os.path.join(d, 'seed.yaml')
    text = open(p).read()
    assert text.count('\nspend:\n  prices: []\n') == 1, text
    with open(p, 'w') as f:
        f.write(text.replace('\nspend:\n  prices: []\n', '\nspend:\n  prices:\n    - scripted 1000 2000\n'))


def setup():
    return ScriptedSeed('seed-spend-', 'spendapi', before_run=add_prices)


def teardown(c):
    if c is not None:
        c.close()


def psql(c, sql):
    pw = open(os.path.join(c.dir, '.seed/secrets/postgres-password')).read().strip()
    p = subprocess.run(['psql', '-h', os.path.join(c.dir, '.seed/run'), '-U', 'postgres', '-d', 'seed_kernel',
                        '-AtX', '-v', 'ON_ERROR_STOP=1', '-c', sql],
                       capture_output=True, text=True, env={**os.environ, 'PGPASSWORD': pw}, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def say(c, text, usage):
    script(c, [{'text': 'noted', 'usage': usage}])
    r = api(c, '/_seed/api/messages', 'POST', {'text': text})
    assert r.status == 200, r.text


def spend(c):
    r = api(c, '/_seed/api/spend')
    assert r.status == 200, r.text
    return r.json()


@test
def a_call_is_recorded_with_the_providers_cost(c):
    say(c, 'hello', {'input_tokens': 1000, 'output_tokens': 50, 'cost': 0.02})
    rows = psql(c, "SELECT purpose, model, input_tokens, output_tokens, cost_source, cost_usd FROM model_usage")
    assert rows == 'chat|scripted|1000|50|provider|0.02', rows
    s = spend(c)
    assert s['month'] == time.strftime('%Y-%m', time.gmtime()), s
    assert s['calls'] == 1 and s['unknown_cost_calls'] == 0 and abs(s['spent_usd'] - 0.02) < 1e-9, s
    assert s['budget_usd'] is None and s['over_budget'] is False and s['paused'] == [], s
    assert [p['purpose'] for p in s['by_purpose']] == ['chat'], s
    assert [d['day'] for d in s['by_day']] == [time.strftime('%Y-%m-%d', time.gmtime())], s


@test
def a_call_without_a_cost_is_priced_from_seed_yaml(c):
    say(c, 'again', {'input_tokens': 100, 'output_tokens': 20})  # 100 × 1000 + 20 × 2000 per million: 0.14
    rows = psql(c, "SELECT cost_source, cost_usd FROM model_usage WHERE input_tokens = 100")
    assert rows == 'prices|0.14', rows
    s = spend(c)
    assert s['calls'] == 2 and abs(s['spent_usd'] - 0.16) < 1e-9, s


@test
def a_bad_budget_is_a_400_that_changes_nothing(c):
    bad = [{'budget_usd': -1}, {'budget_usd': 1000001}, {'budget_usd': '10'}, {'budget_usd': True}, {},
           {'budget_usd': 5, 'currency': 'EUR'}, [5], 'five', '{"budget_usd": 1e999}']
    for body in bad:
        r = api(c, '/_seed/api/spend', 'POST', body)
        assert r.status == 400, (body, r.status, r.text)
        err = r.json()['error']
        assert 'budget_usd' in err and '1000000' in err, (body, err)
    r = api(c, '/_seed/api/spend', 'POST', 'x' * 2000)
    assert r.status in (400, 413), (r.status, r.text)
    assert spend(c)['budget_usd'] is None
    assert psql(c, "SELECT count(*) FROM kernel_settings WHERE key LIKE 'spend.%'") == '0'


@test
def reaching_the_budget_pauses_autonomous_work_and_says_so_once(c):
    r = api(c, '/_seed/api/spend', 'POST', {'budget_usd': 0.1})
    assert r.status == 200, r.text
    s = r.json()
    assert s['budget_usd'] == 0.1 and s['over_budget'] is True and s['paused'] == ['routine', 'health'], s
    msgs = api(c, '/_seed/api/messages').json()['messages']
    notices = [m for m in msgs if m['role'] == 'kernel']
    assert len(notices) == 1, msgs
    assert notices[0]['text'].startswith('Kernel notice:') and '$0.10' in notices[0]['text'], notices
    # the chat goes on, and reads the notice as the kernel's, not the owner's
    say(c, 'still there?', {'input_tokens': 10, 'output_tokens': 5, 'cost': 0.01})
    sent = request(c.model_base + '/_requests').json()[-1]['body']
    users = [m['content'] for m in sent['messages'] if m['role'] == 'user']
    framed = [u for u in users if "[A record from the Seed's kernel, not written by the owner." in u]
    assert framed and 'Kernel notice:' in framed[0], users
    tag = re.search(r'It ends only at the line "\[end of record ([0-9a-f]{16})\]"', framed[0])
    assert tag and f'\n[end of record {tag.group(1)}]' in framed[0], framed[0]
    msgs = api(c, '/_seed/api/messages').json()['messages']
    assert len([m for m in msgs if m['role'] == 'kernel']) == 1, msgs  # once a month
    r = api(c, '/_seed/api/spend', 'POST', {'budget_usd': 0.05})
    assert r.status == 200 and r.json()['over_budget'] is True, r.text
    msgs = api(c, '/_seed/api/messages').json()['messages']
    assert len([m for m in msgs if m['role'] == 'kernel']) == 1, msgs


@test
def no_budget_pauses_nothing(c):
    r = api(c, '/_seed/api/spend', 'POST', {'budget_usd': None})
    assert r.status == 200, r.text
    s = r.json()
    assert s['budget_usd'] is None and s['over_budget'] is False and s['paused'] == [], s


if __name__ == '__main__':
    taplib.run(setup, teardown)
