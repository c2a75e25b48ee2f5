/* canned-server.h — a thread of a unit test plays an HTTP server on a
 * listening Unix socket: it takes one connection, keeps the request head,
 * sends a canned answer (then `repeat` KiB of 'x') and closes. Shared by the
 * tests of kernel/httpc and of the organism's health probe; header-only
 * (static), for test binaries. */
#pragma once

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CANNED_REQUEST_MAX 8192

struct canned_server {
        int listen_fd;          /* borrowed: the caller listens and closes */
        const char *answer;     /* sent after the request head */
        size_t answer_len;      /* 0: strlen(answer) */
        size_t repeat;          /* then this many more KiB of 'x' */
        char request[CANNED_REQUEST_MAX]; /* what arrived (the head), NUL-terminated */
};

/* A pthread start routine; userdata is a struct canned_server. */
static void *canned_serve(void *userdata) {
        struct canned_server *s = userdata;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return NULL;
        size_t got = 0;
        while (got < sizeof s->request - 1 && !strstr(s->request, "\r\n\r\n")) {
                ssize_t n = read(fd, s->request + got, sizeof s->request - 1 - got);
                if (n <= 0)
                        break;
                got += (size_t)n;
                s->request[got] = 0;
        }
        size_t len = s->answer_len ? s->answer_len : strlen(s->answer);
        (void)send(fd, s->answer, len, MSG_NOSIGNAL);
        char kib[1024];
        memset(kib, 'x', sizeof kib);
        for (size_t i = 0; i < s->repeat; i++)
                if (send(fd, kib, sizeof kib, MSG_NOSIGNAL) < 0)
                        break;
        close(fd);
        return NULL;
}
