/* mhd.h — the libmicrohttpd-facing part shared by server.c and proxy.c.
 * No other file of the module (and nothing outside it) includes microhttpd.h. */
#pragma once

#include "ctl/server.h"

#include <microhttpd.h>

/* Sets how many idle seconds the connection may wait from now on (see
 * CTL_HEAD_TIMEOUT_S); the next request starts with the head timeout again. */
void ctl_conn_timeout(struct MHD_Connection *conn, unsigned seconds);

/* Queues resp (headers as given, nothing added) and clears it. */
enum MHD_Result ctl_queue(struct MHD_Connection *conn, struct ctl_resp *resp);

/* The reverse proxy: begin on the request head, upload for each piece of
 * the request body (*size: what it did not take yet; libmicrohttpd hands
 * it again once the connection is resumed), finish when the body is
 * complete. On the loop's daemon (q->loop) each may suspend the connection
 * and is then called again. */
enum MHD_Result ctl_proxy_begin(struct ctl_req *q, struct MHD_Connection *conn);
enum MHD_Result ctl_proxy_upload(struct ctl_req *q, const char *data, size_t *size);
enum MHD_Result ctl_proxy_finish(struct ctl_req *q, struct MHD_Connection *conn);
