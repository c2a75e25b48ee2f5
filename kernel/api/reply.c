/* reply.c — see reply.h. */
#include "api/reply.h"

int api_reply(int status, json_t *o_taken, int *ret_status, char **ret_json) {
        _cleanup_json_ json_t *o = o_taken;
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (!s)
                return -ENOMEM;
        *ret_status = status;
        *ret_json = s;
        return 0;
}

int api_reply_error(int status, const char *msg, int *ret_status, char **ret_json) {
        return api_reply(status, json_pack("{s:s}", "error", msg), ret_status, ret_json);
}
