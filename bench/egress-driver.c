/* egress-driver — measures the egress proxy's tunnels against direct
 * connections to the same upstream, for bench/egress.
 *
 *   egress-driver [BYTES [TUNNELS [RUNS]]]
 *
 * (defaults: 1 GiB, 64, 3). In a private network namespace of its own
 * (tests/common/testnet.h) an upstream on the public address
 * 93.184.215.14:443 reads a client's ClientHello and then sends it BYTES.
 * Each run measures, alternating so that a change in the machine's load
 * weighs on both alike:
 *   single    one client receiving BYTES, directly and through a tunnel of
 *             the real proxy (door, CONNECT, resolver seam, address check,
 *             ClientHello check, splice);
 *   parallel  TUNNELS clients at once, BYTES / TUNNELS each, directly and
 *             through as many tunnels: the aggregate.
 * Prints the median throughput of each and the ratios tunnel / direct.
 * Drops root like the kernel does (its pipes then count against an
 * unprivileged account's limits, as the kernel's do). */
#include "base/log.h"
#include "base/priv.h"
#include "egress/egress.h"

#include "../tests/common/testnet.h"
#include "../tests/common/tlshello.h"

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#define HOST "bench.public.net"
#define CHUNK (1 << 20)

static uint8_t hello[512];
static size_t hello_len;
static int door_port;

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int die(const char *what) {
        fprintf(stderr, "egress-driver: %s: %s\n", what, strerror(errno));
        exit(1);
}

static int read_full(int fd, void *buf, size_t len) {
        uint8_t *p = buf;
        while (len > 0) {
                ssize_t n = recv(fd, p, len, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

static int send_full(int fd, const void *buf, size_t len) {
        const uint8_t *p = buf;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* ---- The upstream: per connection, the ClientHello in, then N bytes out
 * (N sent first by the client as 8 bytes after its hello). ---- */

static void *upstream_conn(void *arg) {
        int fd = (int)(intptr_t)arg;
        static uint8_t data[CHUNK]; /* read-only after the first fill: any content does */
        uint8_t got[sizeof hello + 8];
        uint64_t n = 0;
        if (read_full(fd, got, hello_len + 8) == 0 && !memcmp(got, hello, hello_len)) {
                memcpy(&n, got + hello_len, 8);
                while (n > 0) {
                        size_t k = n < sizeof data ? (size_t)n : sizeof data;
                        if (send_full(fd, data, k) < 0)
                                break;
                        n -= k;
                }
        }
        close(fd);
        return NULL;
}

static void *upstream_main(void *arg) {
        int l = (int)(intptr_t)arg;
        for (;;) {
                int fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                pthread_t t;
                pthread_attr_t a;
                pthread_attr_init(&a);
                pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
                if (pthread_create(&t, &a, upstream_conn, (void *)(intptr_t)fd) != 0)
                        close(fd);
                pthread_attr_destroy(&a);
        }
        return NULL;
}

/* ---- Clients ---- */

static int dial(const char *ip, int port) {
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, ip, &sin.sin_addr);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof sin) < 0)
                die("connect");
        return fd;
}

/* A tunnel to the upstream. A 503 (the tunnels of the previous round
 * still ending: their clients saw the end first) is retried. */
static int open_tunnel(void) {
        static const char req[] = "CONNECT " HOST ":443 HTTP/1.1\r\nHost: " HOST ":443\r\n\r\n";
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        static const char busy[] = "HTTP/1.1 503 ";
        double deadline = now_s() + 10;
        for (;;) {
                int fd = dial("127.0.0.1", door_port);
                char head[sizeof ok] = "";
                if (send_full(fd, req, sizeof req - 1) < 0 || read_full(fd, head, sizeof ok - 1) < 0) {
                        fprintf(stderr, "egress-driver: no answer from the proxy\n");
                        exit(1);
                }
                if (!memcmp(head, ok, sizeof ok - 1))
                        return fd;
                close(fd);
                if (memcmp(head, busy, sizeof busy - 1) || now_s() > deadline) {
                        fprintf(stderr, "egress-driver: the proxy answered %.*s\n", (int)strcspn(head, "\r"), head);
                        exit(1);
                }
                (void)poll(NULL, 0, 1);
        }
}

/* Receives n bytes from the upstream, directly or through a tunnel. */
static void fetch(bool tunnel, uint64_t n) {
        int fd;
        if (tunnel)
                fd = open_tunnel();
        else
                fd = dial(TESTNET_V4, 443);
        uint8_t first[sizeof hello + 8];
        memcpy(first, hello, hello_len);
        memcpy(first + hello_len, &n, 8);
        if (send_full(fd, first, hello_len + 8) < 0)
                die("send");
        static __thread uint8_t *buf;
        if (!buf && !(buf = malloc(256 * 1024)))
                die("malloc");
        uint64_t got = 0;
        for (;;) {
                ssize_t k = recv(fd, buf, 256 * 1024, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                got += (uint64_t)k;
        }
        if (got != n) {
                fprintf(stderr, "egress-driver: got %llu of %llu bytes\n", (unsigned long long)got,
                        (unsigned long long)n);
                exit(1);
        }
        close(fd);
}

struct job {
        bool tunnel;
        uint64_t n;
};

static void *fetch_main(void *arg) {
        struct job *j = arg;
        fetch(j->tunnel, j->n);
        return NULL;
}

static double cpu_s(void) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
               (double)ru.ru_stime.tv_usec / 1e6;
}

static double cpu_used; /* by the last measure(): every thread of the process (upstream, proxy, clients) */

/* Seconds for `count` clients at once, n bytes each. */
static double measure(bool tunnel, int count, uint64_t n) {
        double cpu0 = cpu_s();
        pthread_t t[1024];
        struct job j = {tunnel, n};
        double start = now_s();
        if (count == 1)
                fetch(tunnel, n);
        else {
                for (int i = 0; i < count; i++)
                        if (pthread_create(&t[i], NULL, fetch_main, &j) != 0)
                                die("pthread_create");
                for (int i = 0; i < count; i++)
                        pthread_join(t[i], NULL);
        }
        double took = now_s() - start;
        cpu_used = cpu_s() - cpu0;
        return took;
}

static int resolve(void *userdata, const char *host, struct sockaddr_storage *ret, size_t max, size_t *ret_n) {
        if (!streq(host, HOST) || max < 1)
                return -ENOENT;
        struct sockaddr_in *s = (struct sockaddr_in *)&ret[0];
        *s = (struct sockaddr_in){.sin_family = AF_INET};
        inet_pton(AF_INET, TESTNET_V4, &s->sin_addr);
        *ret_n = 1;
        return 0;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
        uint64_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 1ULL << 30;
        int tunnels = argc > 2 ? atoi(argv[2]) : EGRESS_MAX_TUNNELS;
        int runs = argc > 3 ? atoi(argv[3]) : 3;
        if (bytes < (1 << 20) || tunnels < 1 || tunnels > EGRESS_MAX_TUNNELS || runs < 1 || runs > 100) {
                fprintf(stderr, "usage: egress-driver [BYTES >= 1048576 [TUNNELS 1..%d [RUNS 1..100]]]\n",
                        EGRESS_MAX_TUNNELS);
                return 2;
        }
        char *why = NULL;
        if (testnet_enter(&why) < 0) {
                fprintf(stderr, "egress-driver: %s\n", why ? why : "no private network");
                return 1;
        }
        int r = priv_drop_if_root(NULL);
        if (r < 0) {
                fprintf(stderr, "egress-driver: cannot drop root: %s\n", strerror(-r));
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        log_set_level(LOG_WARN);
        hello_len = tlshello_build(&(struct tlshello){.sni = HOST}, hello, sizeof hello);
        struct sockaddr_in up = {.sin_family = AF_INET, .sin_port = htons(443)};
        inet_pton(AF_INET, TESTNET_V4, &up.sin_addr);
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (l < 0 || bind(l, (struct sockaddr *)&up, sizeof up) < 0 || listen(l, 256) < 0)
                die("upstream listen");
        pthread_t ut;
        pthread_create(&ut, NULL, upstream_main, (void *)(intptr_t)l);

        struct egress *e = NULL;
        if (egress_new(NULL, &e) < 0 || egress_grant(e, EGRESS_SCOPE_ORGANISM, HOST) < 0)
                die("egress_new");
        egress_set_resolver(e, resolve, NULL);
        struct sockaddr_in d = {.sin_family = AF_INET};
        inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
        socklen_t dl = sizeof d;
        int dfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (dfd < 0 || bind(dfd, (struct sockaddr *)&d, sizeof d) < 0 || listen(dfd, 256) < 0 ||
            getsockname(dfd, (struct sockaddr *)&d, &dl) < 0)
                die("door");
        door_port = ntohs(d.sin_port);
        struct egress_door *door = NULL;
        if (egress_door_open(e, dfd, EGRESS_POLICY_LIVE, "bench", &door) < 0)
                die("egress_door_open");

        /* A warm-up of each, unmeasured. */
        (void)measure(false, 1, bytes / 16);
        (void)measure(true, 1, bytes / 16);
        double t[4][100], c[4][100];
        for (int i = 0; i < runs; i++)
                for (int k = 0; k < 4; k++) {
                        t[k][i] = measure(k % 2 == 1, k < 2 ? 1 : tunnels, bytes / (uint64_t)(k < 2 ? 1 : tunnels));
                        c[k][i] = cpu_used;
                }
        double mb = (double)bytes / 1e6;
        double m[4];
        for (int k = 0; k < 4; k++)
                m[k] = median(t[k], runs);
        printf("single    direct %8.0f MB/s   tunnel %8.0f MB/s   (%.2f GB, median of %d)\n", mb / m[0], mb / m[1],
               (double)bytes / 1e9, runs);
        printf("parallel  direct %8.0f MB/s   tunnel %8.0f MB/s   (%d connections, %.1f MB each)\n", mb / m[2],
               mb / m[3], tunnels, mb / tunnels);
        double cpu[4];
        for (int k = 0; k < 4; k++)
                cpu[k] = median(c[k], runs) / ((double)bytes / 1e9);
        printf("CPU (all threads) per GB: single direct %.2f s, tunnel %.2f s; parallel direct %.2f s, tunnel %.2f s\n",
               cpu[0], cpu[1], cpu[2], cpu[3]);
        printf("tunnel / direct: single %.2fx, %d parallel %.2fx\n", m[0] / m[1], tunnels, m[2] / m[3]);
        egress_door_close(door);
        egress_free(e);
        return 0;
}
