#!/usr/bin/env python3
"""End to end: the chat on the live data (seed 001 "Operating on live data")
against a real Seed (real PostgreSQL, bwrap, git, the live organism) whose
model is the scripted model server. Prints TAP.

- change_data stops at an approval showing the whole statement; approved, it
  runs as the app's role; denied, nothing changes; 17 KB is refused unasked.
- query_data reads as role reader and cannot write; its result reaches the
  model as a table, and the answer names the query that produced it.
- call_api: GET reaches the live organism unasked; POST stops at an approval
  showing method, path, headers and body in full; denied, nothing is sent.

Environment: SEED_BIN (the seed CLI).
"""
import json
import threading

import taplib
from seedlib import ScriptedSeed, api, request, script, wait_until
from taplib import test


def setup():
    return ScriptedSeed('seed-live-', 'livedata')


def teardown(c):
    if c is not None:
        c.close()


def chat_in_thread(s, text, out):
    def run():
        out.append(api(s, '/_seed/api/messages', 'POST', {'text': text}))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def pending(s, tool, seen):
    r = api(s, '/_seed/api/approvals')
    assert r.status == 200, r.text
    for a in r.json()['approvals']:
        if a['tool'] == tool and a['id'] not in seen:
            return a
    return None


def approvals(s):
    return api(s, '/_seed/api/approvals').json()['approvals']


def ask_and_decide(s, steps, tool, approve, seen):
    """Runs one owner message whose script calls a dangerous tool; returns
    (the approval as the owner saw it, the chat's answer)."""
    script(s, steps)
    out = []
    t = chat_in_thread(s, 'Please do it.', out)
    a = wait_until(lambda: pending(s, tool, seen), timeout=60, what=f'the approval of {tool}')
    seen.add(a['id'])
    r = api(s, f"/_seed/api/approvals/{a['id']}", 'POST', {'approved': approve})
    assert r.status == 200, r.text
    t.join(timeout=120)
    assert out and out[0].status == 200, out and (out[0].status, out[0].text)
    return a, out[0].json()


def chat(s, steps, text='How many?'):
    script(s, steps)
    r = api(s, '/_seed/api/messages', 'POST', {'text': text})
    assert r.status == 200, (r.status, r.text)
    return r.json()


def rows_now(s):
    """The notes, read through query_data (the model is told the table)."""
    sql = 'SELECT id, body FROM notes ORDER BY id'
    answer = chat(s, [{'tool_calls': [{'name': 'query_data', 'arguments': {'sql': sql}}]},
                      {'text': 'Read.'}])
    reqs = request(s.model_base + '/_requests').json()
    last = json.dumps(reqs[-1])
    return answer, last


CREATE = "CREATE TABLE notes AS SELECT * FROM (VALUES (1, 'first note'), (2, 'second | note')) AS v(id, body)"


@test
def change_data_is_approved_in_full_before_it_runs(c):
    seen = set()
    c.seen = seen
    steps = [{'tool_calls': [{'name': 'change_data', 'arguments': {'sql': CREATE}}]},
             {'text': 'Created the notes.', 'match': 'change_data: SELECT 2'}]
    a, answer = ask_and_decide(c, steps, 'change_data', True, seen)
    assert a['level'] == 'dangerous' and a['evolution_id'] is None, a
    assert a['request']['tool'] == 'change_data', a
    assert a['request']['arguments'] == {'sql': CREATE}, a   # the whole statement, as it runs
    assert answer['sources'] == [{'tool': 'change_data', 'arguments': {'sql': CREATE}}], answer
    assert 'Live data used for this answer' in answer['reply'] and CREATE in answer['reply'], answer


@test
def query_data_reads_and_the_answer_names_its_query(c):
    sql = 'SELECT id, body FROM notes ORDER BY id'
    before = len(approvals(c))
    answer = chat(c, [{'tool_calls': [{'name': 'describe_data', 'arguments': {}}]},
                      {'tool_calls': [{'name': 'query_data', 'arguments': {'sql': sql}}], 'match': 'table notes'},
                      {'text': 'There are 2 notes.', 'match': '2 | second \\\\| note'}])
    assert len(approvals(c)) == before  # safe: nobody was asked
    assert answer['sources'] == [{'tool': 'describe_data', 'arguments': {}},
                                 {'tool': 'query_data', 'arguments': {'sql': sql}}], answer
    assert answer['reply'].startswith('There are 2 notes.'), answer
    assert '```sql\n' + sql + '\n```' in answer['reply'], answer
    # The stored message shows the same (the chat lists it).
    msgs = api(c, '/_seed/api/messages?limit=1').json()['messages']
    assert msgs[-1]['text'] == answer['reply'], msgs


@test
def query_data_cannot_write(c):
    answer = chat(c, [{'tool_calls': [{'name': 'query_data', 'arguments': {'sql': 'DELETE FROM notes'}}]},
                      {'tool_calls': [{'name': 'query_data', 'arguments': {'sql': 'SELECT 1; DELETE FROM notes'}}],
                       'match': 'read-only transaction'},
                      {'text': 'I cannot.', 'match': 'multiple commands'}])
    assert answer['sources'] == [], answer  # failed calls are no source
    _, last = rows_now(c)
    assert 'first note' in last and 'second' in last, last


@test
def a_denied_change_changes_nothing(c):
    steps = [{'tool_calls': [{'name': 'change_data', 'arguments': {'sql': 'DELETE FROM notes'}}]},
             {'text': 'Not deleted.', 'match': 'denied by the owner'}]
    a, answer = ask_and_decide(c, steps, 'change_data', False, c.seen)
    assert a['request']['arguments'] == {'sql': 'DELETE FROM notes'}, a
    assert answer['sources'] == [], answer
    _, last = rows_now(c)
    assert 'first note' in last and 'second' in last, last


@test
def a_17_kb_change_is_refused_unasked(c):
    big = "UPDATE notes SET body = '" + 'x' * (17 * 1024) + "'"
    before = len(approvals(c))
    chat(c, [{'tool_calls': [{'name': 'change_data', 'arguments': {'sql': big}}]},
             {'text': 'Too large.', 'match': 'too large for the owner to review'}])
    assert len(approvals(c)) == before
    _, last = rows_now(c)
    assert 'first note' in last and 'xxxxxxxx' not in last, last


@test
def call_api_get_is_safe_and_other_methods_are_asked_in_full(c):
    wait_until(lambda: request(c.app + '/healthz').status == 200, timeout=180, what='the live organism')
    before = len(approvals(c))
    answer = chat(c, [{'tool_calls': [{'name': 'call_api', 'arguments': {'method': 'GET', 'path': '/healthz'}}]},
                      {'text': 'It is healthy.', 'match': 'HTTP/1.1 200'}])
    assert len(approvals(c)) == before
    assert answer['sources'] == [{'tool': 'call_api', 'arguments': {'method': 'GET', 'path': '/healthz'}}], answer
    assert '```http\nGET /healthz\n```' in answer['reply'], answer
    body = json.dumps({'note': 'line one\nline two', 'pad': 'y' * 9000})
    args = {'method': 'POST', 'path': '/notes', 'headers': {'X-Test': 'yes'}, 'body': body}
    steps = [{'tool_calls': [{'name': 'call_api', 'arguments': args}]},
             {'text': 'Not sent.', 'match': 'denied by the owner'}]
    a, answer = ask_and_decide(c, steps, 'call_api', False, c.seen)
    assert a['level'] == 'dangerous', a
    assert a['request']['arguments'] == args, a   # never truncated
    assert answer['sources'] == [], answer


@test
def evolution_settings_turn_the_preview_on_and_off(c):
    # On by default (integration-preview checks that); seedlib turned it off
    # for the tests' evolutions.
    r = api(c, '/_seed/api/evolution-settings')
    assert r.status == 200 and r.json() == {'preview': False}, (r.status, r.text)
    assert api(c, '/_seed/api/evolution-settings', 'POST', {'preview': True}).json() == {'preview': True}
    for bad in ({}, {'preview': 'no'}, {'preview': False, 'more': 1}, []):
        r = api(c, '/_seed/api/evolution-settings', 'POST', bad)
        assert r.status == 400, (bad, r.status, r.text)
    assert api(c, '/_seed/api/evolution-settings').json() == {'preview': True}
    r = api(c, '/_seed/api/evolution-settings', 'POST', {'preview': False})
    assert r.status == 200 and r.json() == {'preview': False}, r.text
    assert api(c, '/_seed/api/evolution-settings').json() == {'preview': False}
    assert api(c, '/_seed/api/evolution-settings', 'POST', {'preview': True}).json() == {'preview': True}
    assert request(c.base + '/_seed/api/evolution-settings').status == 401


if __name__ == '__main__':
    taplib.run(setup, teardown)
