/* compact.c — keeping the conversation within a byte budget.
 *
 * Stage 1, oldest first, outside the first message and the last keep_last:
 * long texts (tool output, feedback, replies) become head + "[trimmed N
 * bytes]" + tail, and long string values inside tool-call arguments are
 * trimmed the same way (the arguments stay a valid JSON object). Stage 2, if
 * still too big: the oldest turns are dropped whole — an assistant message
 * together with the tool results and notes that follow it — so a call is
 * never separated from its result. Cuts fall on UTF-8 character boundaries. */
#include "agent/agent.h"
#include "base/buf.h"
#include "base/json.h"


#define MESSAGE_OVERHEAD 16
#define ARG_KEEP 200 /* head and tail bytes of a trimmed argument string */

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

size_t agent_compact(struct agent_state *st, size_t budget, size_t keep_last) {
        size_t before = agent_state_size(st), size = before;
        if (size <= budget || st->n_messages < 2)
                return 0;
        size_t tail = tail_start(st, keep_last);

        for (size_t i = 1; i < tail && size > budget; i++) {
                size_t was = message_size(&st->messages[i]);
                trim_message(&st->messages[i]);
                size -= was - message_size(&st->messages[i]);
        }

        while (size > budget && tail > 1) {
                /* The oldest turn after the first message: up to the next assistant message. */
                size_t end = 2;
                while (end < tail && st->messages[end].role != MODEL_ROLE_ASSISTANT)
                        end++;
                if (end > tail)
                        break;
                for (size_t i = 1; i < end; i++) {
                        size -= message_size(&st->messages[i]);
                        model_message_done(&st->messages[i]);
                }
                memmove(&st->messages[1], &st->messages[end], (st->n_messages - end) * sizeof(st->messages[0]));
                st->n_messages -= end - 1;
                tail -= end - 1;
        }
        return before - size;
}
