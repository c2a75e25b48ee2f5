#!/usr/bin/env python3
"""End to end: how far an evolution reaches (issue 19, Reach). A real Seed
whose model is the scripted model server (tests/fakes/model_server.py).
Checked: a plan with a goal and three stages runs stage 1, the kernel ticks
its box in knowledge/roadmap.md (committed with the generation, whatever the
model wrote there) and tells the chat what is next as a kernel record;
continuing the roadmap runs stage 2 with the goal and what is done in its
intent; a declared check that fails goes back to the model for repair and a
passing one completes; finish is refused while a declared write check
expects 2xx and nothing under organism/ changed; bad declarations are
refused with clear errors; the write tools refuse knowledge/roadmap.md; the
chat's continue_roadmap refuses while a stage runs and starts the next one
after; the owner's own words stay with a chat-made evolution and reach its
agent marked as theirs. Prints TAP.

Environment: SEED_BIN (the seed CLI).
"""
import json
import re
import subprocess

import taplib
from seedlib import (EVO_ID, ScriptedSeed, api, evolution, holding, release, request, script, submit,
                     wait_until)
from taplib import Skip, test

GOAL = 'Become a small greeter service'
STAGES = ['Answer GET /hello', 'Accept POST /items', 'Say goodbye at GET /bye']
HANDLE = "function handle(req, res) {\n  const path = new URL(req.url, 'http://localhost').pathname;\n"
HELLO = HANDLE + "  if (path === '/hello') { send(res, 200, 'text/plain; charset=utf-8', 'hello stage\\n', false); return; }\n"
ITEMS = HANDLE + ("  if (path === '/items' && req.method === 'POST') "
                  "{ send(res, 201, 'application/json', '{\"id\":1}', false); return; }\n")
# A kernel record's frame ends with this line before the record's text
# (the closing tag is drawn at random each time the chat reads its history).
RECORD_OPEN = "It ends only at the line"
RECORD_TEXT_START = "everything before that line is part of it.]"


def setup():
    return ScriptedSeed('seed-reach-', 'reach')


def teardown(c):
    if c is not None:
        c.close()


def call(name, match=None, hold=None, **args):
    step = {'tool_calls': [{'name': name, 'arguments': args}]}
    if match:
        step['match'] = match
    if hold:
        step['hold'] = hold
    return step


def ended(c, evo_id):
    e = evolution(c, evo_id)
    return e if e['state'] in ('complete', 'failed', 'cancelled', 'rolled_back') else None


def wait_end(c, evo_id):
    return wait_until(lambda: ended(c, evo_id), timeout=900, interval=0.5, what=f'evolution {evo_id}')


def live_roadmap(c):
    p = subprocess.run(['git', '-c', f'safe.directory={c.dir}', '-C', c.dir, 'show', 'main:knowledge/roadmap.md'], capture_output=True, text=True)
    return p.stdout if p.returncode == 0 else None


def checks_of(e):
    return [(ev['data']['name'], ev['data']['ok']) for ev in e['events'] if ev['kind'] == 'check']


def tool_results(e, tool):
    return [ev['data'] for ev in e['events'] if ev['kind'] == 'tool_result' and ev['data'].get('name') == tool]


def kernel_messages(c):
    return [m for m in api(c, '/_seed/api/messages?limit=50').json()['messages'] if m['role'] == 'kernel']


@test
def a_staged_goal_runs_stage_one_and_ticks_its_box(c):
    hello = {'request': 'http:GET /hello', 'status': 200, 'body_contains': 'hello stage'}
    script(c, [
        # bad declarations: refused with what is wrong, the plan not taken
        call('submit_plan', title='Greeter', scope='greeter', summary='s', steps=['x'],
             checks=[{'request': 'http:FETCH /hello', 'status': 200}]),
        call('submit_plan', match='the method must be one of', title='Greeter', scope='greeter', summary='s',
             steps=['x'], goal=GOAL),
        call('submit_plan', match='a goal needs its stages', title='Greeter', scope='greeter', summary='s',
             steps=['x'], checks=[{'request': 'http:GET /a b', 'status': 200}]),
        call('submit_plan', match='the path may hold only URL path', title='Greeter', scope='greeter', summary='s',
             steps=['x'], checks=[{'request': 'http:GET /x', 'status': 200, 'send': '{}'}]),
        call('submit_plan', match='\\"send\\" is only for POST', title='Greeter: hello', scope='greeter',
             summary='Stage 1: answer GET /hello.', steps=['add the route'], goal=GOAL, stages=STAGES,
             checks=[hello]),
        # the roadmap is the kernel's
        call('write_file', path='knowledge/roadmap.md', content='- [x] everything, says the model\n'),
        call('delete_path', match='only the kernel writes', path='knowledge'),
        call('run', match='only the kernel writes', command='echo forged by a command > knowledge/roadmap.md'),
        # finish without the route: the declared check fails and comes back
        call('finish', summary='Nothing yet.'),
        call('edit_file', match="The kernel's check 'http:GET /hello' failed", path='organism/bin/server',
             old_text=HANDLE, new_text=HELLO),
        call('finish', summary='GET /hello answers.'),
        call('submit_reflection', notes='Stage 1 done.'),
        {'text': 'Done.'},
    ])
    evo_id = submit(c, GOAL)
    e = wait_end(c, evo_id)
    assert e['state'] == 'complete', (e['state'], e.get('error'))
    plans = tool_results(e, 'submit_plan')
    assert len(plans) == 5 and all(p['is_error'] for p in plans[:4]) and not plans[4]['is_error'], plans
    assert [(n, ok) for n, ok in checks_of(e) if n.startswith('http:')] == [('http:GET /hello', False),
                                                                              ('http:GET /hello', True)], checks_of(e)
    assert e['roadmap_id'] == evo_id and e['roadmap_stage'] == 0, e
    writes = tool_results(e, 'write_file') + tool_results(e, 'delete_path')
    assert writes and all(w['is_error'] for w in writes), writes
    md = live_roadmap(c)
    assert md, 'no knowledge/roadmap.md on main'
    assert f'Goal: {GOAL}' in md and '- [x] Stage 1: Answer GET /hello' in md, md
    assert '- [ ] Stage 2: Accept POST /items' in md and '- [ ] Stage 3' in md, md
    assert 'forged' not in md and 'says the model' not in md, md
    r = api(c, '/_seed/api/roadmap').json()
    assert r['roadmap']['done'] == 1 and r['next'] == {'stage': 2, 'text': STAGES[1]} and r['running'] is None, r
    assert r['markdown'] == md, (r['markdown'], md)
    notes = kernel_messages(c)
    assert any('stage 1 of 3' in m['text'] and 'Next is stage 2: Accept POST /items' in m['text'] for m in notes), \
        notes
    c.map = evo_id


@test
def continuing_runs_stage_two_and_finish_is_refused_until_the_organism_changes(c):
    if not getattr(c, 'map', None):
        raise Skip('stage 1 did not complete')
    items = {'request': 'http:POST /items', 'status': 201, 'send': '{"name":"a"}', 'body_contains': '"id"'}
    script(c, [
        call('submit_plan', hold='stage2', match='This evolution does stage 2: Accept POST /items',
             title='Greeter: items', scope='greeter', summary='Stage 2.', steps=['POST /items'], checks=[items]),
        # the chat, while stage 2 runs: continue_roadmap refuses; then its answer
        {**call('continue_roadmap'), 'match': RECORD_TEXT_START + '\nRoadmap: stage 1 of 3'},
        {'text': 'Stage 2 is already running.', 'match': 'under way already'},
        # stage 2 again: finish before any change is refused
        call('finish', summary='Nothing changed.'),
        call('edit_file', match='nothing under organism/ changed', path='organism/bin/server', old_text=HANDLE,
             new_text=ITEMS),
        call('finish', summary='POST /items answers 201.'),
        call('submit_reflection', notes='Stage 2 done.'),
        {'text': 'Done.'},
    ])
    r = api(c, '/_seed/api/roadmap/continue', 'POST', {})
    assert r.status == 202, (r.status, r.text)
    evo_id = r.json()['id']
    assert EVO_ID.match(evo_id), evo_id
    wait_until(lambda: holding(c, 'stage2'), timeout=300, what="stage 2's plan call")
    again = api(c, '/_seed/api/roadmap/continue', 'POST', {})
    assert again.status == 409 and 'under way already' in again.json()['error'], (again.status, again.text)
    chat = api(c, '/_seed/api/messages', 'POST', {'text': 'Go on with the roadmap'})
    assert chat.status == 200 and chat.json()['evolutions'] == [], (chat.status, chat.text)
    release(c, 'stage2')
    e = wait_end(c, evo_id)
    assert e['state'] == 'complete', (e['state'], e.get('error'))
    assert e['roadmap_id'] == c.map and e['roadmap_stage'] == 1, e
    assert 'The goal: ' + GOAL in e['intent'] and '- [x] Stage 1: Answer GET /hello' in e['intent'], e['intent']
    fin = tool_results(e, 'finish')
    assert fin[0]['is_error'] and 'nothing under organism/ changed' in fin[0]['output'], fin
    assert not fin[1]['is_error'], fin
    assert ('http:POST /items', True) in checks_of(e), checks_of(e)
    md = live_roadmap(c)
    assert '- [x] Stage 1' in md and '- [x] Stage 2: Accept POST /items' in md and '- [ ] Stage 3' in md, md
    assert api(c, '/_seed/api/roadmap').json()['roadmap']['done'] == 2
    c.stage2 = True


@test
def the_chat_continues_the_roadmap(c):
    if not getattr(c, 'stage2', None):
        raise Skip('stage 2 did not complete')
    script(c, [
        {**call('continue_roadmap'), 'match': 'Next is stage 3: Say goodbye at GET /bye'},
        # the queued stage may ask the model before the chat's second turn: either gets a text
        {'text': 'Stage 3 started.'},
        {'text': 'Stage 3 started.'},
    ])
    chat = api(c, '/_seed/api/messages', 'POST', {'text': 'Continue the roadmap please'})
    assert chat.status == 200, (chat.status, chat.text)
    started = chat.json()['evolutions']
    assert len(started) == 1, chat.json()
    e = wait_end(c, started[0])
    assert e['roadmap_stage'] == 2 and 'This evolution does stage 3: Say goodbye at GET /bye' in e['intent'], e
    assert '- [x] Stage 2: Accept POST /items' in e['intent'], e['intent']
    # the chat saw the kernel's record as a record, never as the owner's words
    reqs = request(c.model_base + '/_requests').json()
    first = next(q['body'] for q in reqs if q['body'] and 'continue_roadmap' in json.dumps(q['body'].get('tools')))
    users = [m['content'] for m in first['messages'] if m['role'] == 'user']
    text = json.dumps(users)
    assert "A record from the Seed's kernel" in text and RECORD_OPEN in text, text[-3000:]
    assert json.dumps(RECORD_TEXT_START + '\nRoadmap: stage 2 of 3')[1:-1] in text, text[-3000:]


@test
def the_owner_words_stay_with_a_chat_made_evolution(c):
    words = 'make the greeting purple, and keep it short! (exact words 7f3a)'
    script(c, [
        call('start_evolution', intent='Change the greeting colour to purple'),
        {'text': 'Started.'},
        {'text': 'Started.'},
    ])
    chat = api(c, '/_seed/api/messages', 'POST', {'text': words})
    assert chat.status == 200, (chat.status, chat.text)
    evo_id = chat.json()['evolutions'][0]
    e = wait_end(c, evo_id)
    assert e['owner_words'] == words and e['intent'] == 'Change the greeting colour to purple', e
    listed = next(x for x in api(c, '/_seed/api/evolutions').json()['evolutions'] if x['id'] == evo_id)
    assert listed['owner_words'] == words, listed
    reqs = request(c.model_base + '/_requests').json()
    plan = [q['body'] for q in reqs if q['body'] and 'submit_plan' in json.dumps(q['body'].get('tools'))]
    assert plan, 'the evolution never asked the model'
    first_user = next(m['content'] for m in plan[-1]['messages'] if m['role'] == 'user')
    first_user = first_user if isinstance(first_user, str) else json.dumps(first_user)
    tag = re.search(r'<owner-words id="([0-9a-f]{16})">\n', first_user)
    assert "The owner's own words" in first_user and tag, first_user
    assert f'<owner-words id="{tag.group(1)}">\n{words}\n</owner-words id="{tag.group(1)}">' in first_user, first_user
    # a direct request keeps no separate words: its intent is the owner's
    if getattr(c, 'map', None):
        assert evolution(c, c.map)['owner_words'] is None


if __name__ == '__main__':
    taplib.run(setup, teardown)
