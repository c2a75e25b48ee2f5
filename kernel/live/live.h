/* live.h — the chat's way to the live data and the live app (seed 001
 * "Operating on live data"), and its four tools:
 *
 *   query_data     safe       one SQL statement as role reader (pg_read_all_data,
 *                             CONNECT on the live database only): no SQL whatsoever
 *                             can write; run as a single statement of the extended
 *                             protocol in a READ ONLY transaction, with a statement
 *                             timeout and caps on rows and bytes (db_statement)
 *   describe_data  safe       the live database's tables and columns, with row
 *                             estimates, read the same way
 *   change_data    dangerous  one SQL statement as role organism (the app's own),
 *                             asked every time
 *   call_api       GET: safe, any other method: dangerous (asked every time) — one
 *                             HTTP request to the live organism through its bridge
 *                             socket (organism_http)
 *
 * A dangerous call is shown to the owner in full as an approval (the call
 * path of kernel/tools refuses one whose arguments are over
 * TOOLS_DANGEROUS_INPUT_MAX, 16 KB, as too large to review), and its handler
 * runs only for the call the owner approved just now. Results reach the
 * model as bounded text tables. Every connection is a new one, closed after
 * the call; nothing here is shared between calls, so the handlers may run
 * from any thread. */
#pragma once

#include "tools/tools.h"

struct organism;
struct pg;

#define LIVE_READ_TIMEOUT_MS (10 * 1000)    /* query_data, describe_data */
#define LIVE_CHANGE_TIMEOUT_MS (30 * 1000)  /* change_data */
#define LIVE_ROWS_MAX 200                   /* rows shown */
#define LIVE_BYTES_MAX (256 * 1024)         /* bytes of values read into the kernel */
#define LIVE_CELL_SHOWN 300                 /* bytes of one value shown (then "…") */
#define LIVE_SQL_MAX (64 * 1024)            /* the text of a statement (change_data: 16 KB, see above) */

struct live_config {
        const struct pg *pg;          /* the private PostgreSQL (borrowed); NULL: no data tools */
        struct organism *organism;    /* the live organism (borrowed); NULL: no call_api */
};

struct live;

/* c's pointers stay borrowed: they outlive the struct live. Caller frees. */
int live_new(const struct live_config *c, struct live **ret);
void live_free(struct live *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct live *, live_free)

/* The text table of a result as the model and the chat see it: a header of
 * column names, a row per line, cells separated by " | " with '|', '\' and
 * line breaks escaped ("\|", "\\", "\n"), NULL as "NULL", each value cut at
 * LIVE_CELL_SHOWN bytes (on a character boundary, then "…"). Caller frees. */
struct db_statement_result;
int live_table_text(const struct db_statement_result *res, char **ret);

/* The tools (static data, TOOL_TABLE_END-terminated), for the chat's set;
 * their handlers reach the struct live through tool_ctx.live (NULL: "not
 * available here"). */
extern const struct tool live_tools[];
