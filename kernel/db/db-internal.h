/* db-internal.h — shared by the files of kernel/db (not a public API): the
 * inside of a struct db, which only this module sees (libpq's types never
 * leave it). */
#pragma once

#include <libpq-fe.h>
#include <pthread.h>

struct db {
        PGconn *conn;
        pthread_mutex_t lock;   /* every call on conn holds it */
};
