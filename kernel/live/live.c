/* live.c — the live data's connections and the text tables results are
 * shown as. See live.h. */
#include "live/live-internal.h"
#include "base/buf.h"
#include "base/text.h"
#include "db/db.h"
#include "pg/pg.h"

int live_new(const struct live_config *c, struct live **ret) {
        if (!c || !ret)
                return -EINVAL;
        struct live *l = calloc(1, sizeof *l);
        if (!l)
                return -ENOMEM;
        l->c = *c;
        *ret = l;
        return 0;
}

void live_free(struct live *l) { free(l); }

int live_connect(const struct live *l, const char *role, struct db **ret, char **ret_error) {
        if (!l || !l->c.pg)
                return errorf(-ENOENT, ret_error, "the live database is not available");
        _cleanup_free_ char *ci = NULL;
        int r = pg_conninfo(l->c.pg, role, PG_LIVE_DB, &ci);
        if (r >= 0)
                r = db_connect_err(ci, ret, ret_error);
        if (ci)
                secure_zero(ci, strlen(ci));
        return r;
}

/* One value, escaped and cut. */
static int put_cell(struct buf *b, const char *v) {
        if (!v)
                return buf_puts(b, "NULL");
        size_t len = strlen(v), shown = len;
        if (shown > LIVE_CELL_SHOWN) {
                shown = LIVE_CELL_SHOWN;
                while (shown > 0 && ((unsigned char)v[shown] & 0xC0) == 0x80)
                        shown--;
        }
        for (size_t i = 0; i < shown; i++) {
                const char *esc = v[i] == '|' ? "\\|" : v[i] == '\\' ? "\\\\" : v[i] == '\n' ? "\\n"
                                                                          : v[i] == '\r' ? "\\r" : NULL;
                int r = esc ? buf_puts(b, esc) : buf_append(b, v + i, 1);
                if (r < 0)
                        return r;
        }
        return shown < len ? buf_printf(b, "… (%zu bytes)", len) : 0;
}

int live_table_text(const struct db_statement_result *res, char **ret) {
        if (!res || !ret)
                return -EINVAL;
        struct buf b = BUF_INIT((size_t)LIVE_ROWS_MAX * 64 * 1024);
        int r = 0;
        for (size_t i = 0; r >= 0 && i < res->n_columns; i++)
                r = buf_printf(&b, "%s%s", i ? " | " : "", res->columns[i]);
        if (r >= 0 && res->n_columns)
                r = buf_puts(&b, "\n");
        for (size_t row = 0; r >= 0 && row < res->n_rows; row++) {
                for (size_t i = 0; r >= 0 && i < res->n_columns; i++) {
                        if (i)
                                r = buf_puts(&b, " | ");
                        if (r >= 0)
                                r = put_cell(&b, res->cells[row * res->n_columns + i]);
                }
                if (r >= 0)
                        r = buf_puts(&b, "\n");
        }
        if (r >= 0 && !b.data)
                r = buf_append(&b, "", 0);
        if (r < 0) {
                buf_free(&b);
                return r;
        }
        *ret = buf_steal(&b);
        return *ret ? 0 : -ENOMEM;
}
