/* compact.c — keeping the conversation within a byte budget.
 *
 * Compaction starts when the conversation outgrows the budget and brings it
 * down to AGENT_COMPACT_TARGET_PCT of it, so that it happens seldom: every
 * compaction changes the prefix a provider's prompt cache holds. In stages,
 * each only while still too big, and never touching the first message (the
 * intent) or the newest turn (the last assistant message and what follows):
 *  1. tool output, oldest first, outside the last keep_last messages: a long
 *     result becomes its head and a short note saying what was trimmed (how
 *     much of which tool's output, and that calling it again shows it). The
 *     note is short, so it is never trimmed again nor grows back: an output
 *     once summarised is never sent again;
 *  2. other long texts there (feedback, replies) become head + "[trimmed N
 *     bytes]" + tail, and long string values inside tool-call arguments are
 *     trimmed the same way (the arguments stay a valid JSON object);
 *  3. the oldest turns are dropped whole — an assistant message together with
 *     the tool results and notes that follow it — so a call is never
 *     separated from its result;
 *  4. stages 1 to 3 inside the last keep_last messages, up to the newest turn.
 * Cuts fall on UTF-8 character boundaries. */
#include "agent/agent.h"
#include "base/buf.h"
#include "base/json.h"


#define MESSAGE_OVERHEAD 16
#define ARG_KEEP 200    /* head and tail bytes of a trimmed argument string */
#define OUTPUT_HEAD 300 /* bytes of a trimmed tool output kept before its note */
#define NOTE_ROOM 200   /* a note is at most this long: anything longer may be trimmed */

static size_t opt_len(const char *s) {
        return s ? strlen(s) : 0;
}

static size_t message_size(const struct model_message *m) {
        size_t n = MESSAGE_OVERHEAD + opt_len(m->text) + opt_len(m->tool_call_id);
        for (size_t i = 0; i < m->n_calls; i++)
                n += MESSAGE_OVERHEAD + opt_len(m->calls[i].id) + opt_len(m->calls[i].name) +
                     opt_len(m->calls[i].arguments);
        return n;
}

size_t agent_state_size(const struct agent_state *st) {
        size_t n = 0;
        for (size_t i = 0; i < st->n_messages; i++)
                n += message_size(&st->messages[i]);
        return n;
}

static bool continuation(char c) {
        return ((unsigned char)c & 0xC0) == 0x80;
}

/* head + marker + tail of s, or NULL when s is short enough (or on OOM). */
static char *trimmed(const char *s, size_t len, size_t keep) {
        if (len <= 2 * keep + 64)
                return NULL;
        size_t head = keep, tail = len - keep;
        while (head > 0 && continuation(s[head]))
                head--;
        while (tail < len && continuation(s[tail]))
                tail++;
        char *out = NULL;
        if (xasprintf(&out, "%.*s\n[trimmed %zu bytes]\n%s", (int)head, s, tail - head, s + tail) < 0)
                return NULL;
        return out;
}

/* Trims long strings inside a JSON value in place. */
static void trim_json(json_t *v, int depth) {
        if (depth > 32)
                return;
        const char *key;
        json_t *x;
        size_t i;
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                json_object_foreach(v, key, x) {
                        if (json_is_string(x)) {
                                char *t = trimmed(json_string_value(x), json_string_length(x), ARG_KEEP);
                                if (t)
                                        json_object_set_new(v, key, json_string(t));
                                free(t);
                        } else
                                trim_json(x, depth + 1);
                }
                break;
        case JSON_ARRAY:
                json_array_foreach(v, i, x) {
                        if (json_is_string(x)) {
                                char *t = trimmed(json_string_value(x), json_string_length(x), ARG_KEEP);
                                if (t)
                                        json_array_set_new(v, i, json_string(t));
                                free(t);
                        } else
                                trim_json(x, depth + 1);
                }
                break;
        default:
                break;
        }
}

static void trim_arguments(struct model_tool_call *c) {
        size_t len = opt_len(c->arguments);
        if (len <= 2 * ARG_KEEP + 64)
                return;
        _cleanup_json_ json_t *v = json_loads(c->arguments, 0, NULL);
        char *out = NULL;
        if (json_is_object(v)) {
                trim_json(v, 0);
                out = json_dumps(v, JSON_COMPACT);
        } else
                out = strdup("{}"); /* it was never valid: the model was told so then */
        if (out && strlen(out) < len) {
                free(c->arguments);
                c->arguments = out;
        } else
                free(out);
}

static void trim_message(struct model_message *m) {
        char *t = m->text ? trimmed(m->text, strlen(m->text), AGENT_TRIM_KEEP) : NULL;
        if (t) {
                free(m->text);
                m->text = t;
        }
        for (size_t i = 0; i < m->n_calls; i++)
                trim_arguments(&m->calls[i]);
}

/* The name of the call tool result i answers (in the nearest assistant turn
 * before it), or NULL. Borrowed. */
static const char *call_name(const struct agent_state *st, size_t i) {
        const char *id = st->messages[i].tool_call_id;
        for (size_t j = i; id && j-- > 0;) {
                const struct model_message *m = &st->messages[j];
                if (m->role != MODEL_ROLE_ASSISTANT)
                        continue;
                for (size_t k = 0; k < m->n_calls; k++)
                        if (m->calls[k].id && streq(m->calls[k].id, id))
                                return m->calls[k].name;
                return NULL;
        }
        return NULL;
}

/* A tool result: its head and a note saying what was cut, or nothing when it
 * is short (a note already is). */
static void trim_output(struct agent_state *st, size_t i) {
        struct model_message *m = &st->messages[i];
        size_t len = opt_len(m->text);
        if (m->role != MODEL_ROLE_TOOL || len <= OUTPUT_HEAD + NOTE_ROOM)
                return;
        size_t head = OUTPUT_HEAD;
        while (head > 0 && continuation(m->text[head]))
                head--;
        const char *name = call_name(st, i);
        char *out = NULL;
        if (xasprintf(&out, "%.*s\n[trimmed: %zu more bytes of this %.64s output, shown in full before; call it "
                            "again if you need them]",
                      (int)head, m->text, len - head, name ? name : "tool") < 0)
                return;
        if (strlen(out) < len) {
                free(m->text);
                m->text = out;
        } else
                free(out);
}

/* Stages 1 and 2 over messages [from, to) while size > target. */
static void trim_range(struct agent_state *st, size_t from, size_t to, size_t target, size_t *size) {
        for (int stage = 1; stage <= 2; stage++)
                for (size_t i = from; i < to && *size > target; i++) {
                        size_t was = message_size(&st->messages[i]);
                        if (stage == 1)
                                trim_output(st, i);
                        else
                                trim_message(&st->messages[i]);
                        *size -= was - message_size(&st->messages[i]);
                }
}

/* The first index of the newest turn: the last assistant message (or the
 * last message when there is none after the first). */
static size_t newest_turn(const struct agent_state *st) {
        for (size_t i = st->n_messages; i-- > 1;)
                if (st->messages[i].role == MODEL_ROLE_ASSISTANT)
                        return i;
        return st->n_messages > 1 ? st->n_messages - 1 : st->n_messages;
}

/* The first index of the intact tail: the last keep_last messages, moved
 * back to the start of a turn (an assistant message) so that the tail never
 * begins with results whose call would be dropped. Never below 1. */
static size_t tail_start(const struct agent_state *st, size_t keep_last) {
        size_t n = st->n_messages;
        size_t t = n > keep_last + 1 ? n - keep_last : 1;
        while (t > 1 && t < n && st->messages[t].role != MODEL_ROLE_ASSISTANT)
                t--;
        return t;
}

/* Drops the oldest turns after the first message — an assistant message and
 * what follows it up to the next one — while size > target, never reaching
 * index limit. Returns how many messages went. */
static size_t drop_turns(struct agent_state *st, size_t limit, size_t target, size_t *size) {
        size_t dropped = 0;
        while (*size > target && limit > 1) {
                size_t end = 2;
                while (end < limit && st->messages[end].role != MODEL_ROLE_ASSISTANT)
                        end++;
                if (end > limit)
                        break;
                for (size_t i = 1; i < end; i++) {
                        *size -= message_size(&st->messages[i]);
                        model_message_done(&st->messages[i]);
                }
                memmove(&st->messages[1], &st->messages[end], (st->n_messages - end) * sizeof(st->messages[0]));
                st->n_messages -= end - 1;
                limit -= end - 1;
                dropped += end - 1;
        }
        return dropped;
}

size_t agent_compact(struct agent_state *st, size_t budget, size_t keep_last) {
        size_t before = agent_state_size(st), size = before;
        if (size <= budget || st->n_messages < 2)
                return 0;
        size_t target = budget / 100 * AGENT_COMPACT_TARGET_PCT;
        size_t tail = tail_start(st, keep_last);

        trim_range(st, 1, tail, target, &size);
        tail -= drop_turns(st, tail, target, &size);
        size_t newest = newest_turn(st);
        if (tail < newest) {
                trim_range(st, tail, newest, target, &size);
                drop_turns(st, newest, target, &size);
        }
        return before - size;
}
