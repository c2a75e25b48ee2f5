/* Unit tests for kernel/ctl/loop.c: deadlines, edge-triggered watches that
 * stay in the epoll set when parked, jobs worked off the loop and finished
 * on it, and a stop that ends everything (queued jobs cancelled, watches
 * told), on a real libmicrohttpd daemon in external epoll mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "ctl/loop.h"

#include <microhttpd.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static enum MHD_Result no_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **con_cls) {
        return MHD_NO;
}

static struct MHD_Daemon *daemon_start(void) {
        struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET,
                                                0, NULL, NULL, no_request, NULL, MHD_OPTION_END);
        assert_non_null(d);
        return d;
}

/* What the callbacks saw, under a lock; waited for with a deadline. */
static struct {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        pthread_t loop_thread;
        int ready[4];             /* ready() calls by why */
        uint32_t events;
        int worked, done, cancelled;
        bool worked_off_loop, done_on_loop;
} seen = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void seen_reset(void) {
        pthread_mutex_lock(&seen.lock);
        memset(seen.ready, 0, sizeof seen.ready);
        seen.events = 0;
        seen.worked = seen.done = seen.cancelled = 0;
        seen.worked_off_loop = seen.done_on_loop = true;
        pthread_mutex_unlock(&seen.lock);
}

/* Waits until *counter reaches n (5 s at most); its value then. */
static int wait_for(int *counter, int n) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        pthread_mutex_lock(&seen.lock);
        while (*counter < n && pthread_cond_timedwait(&seen.cond, &seen.lock, &until) == 0)
                ;
        int v = *counter;
        pthread_mutex_unlock(&seen.lock);
        return v;
}

static void on_ready(struct ctl_loop_watch *w, int why) {
        pthread_mutex_lock(&seen.lock);
        seen.ready[why]++;
        if (why == CTL_LOOP_IO)
                seen.events |= w->events;
        pthread_cond_broadcast(&seen.cond);
        pthread_mutex_unlock(&seen.lock);
}

/* A job that runs fn(arg) on the loop thread (watch calls belong there). */
struct on_loop {
        struct ctl_loop_job j;
        void (*fn)(void *arg);
        void *arg;
        pthread_mutex_t *hold;    /* work() waits for it, if set */
};

static void job_work(struct ctl_loop_job *j) {
        struct on_loop *o = (struct on_loop *)j;
        if (o->hold) {
                pthread_mutex_lock(o->hold);
                pthread_mutex_unlock(o->hold);
        }
        pthread_mutex_lock(&seen.lock);
        seen.worked++;
        if (seen.loop_thread && pthread_equal(seen.loop_thread, pthread_self()))
                seen.worked_off_loop = false;
        pthread_cond_broadcast(&seen.cond);
        pthread_mutex_unlock(&seen.lock);
}

static void job_done(struct ctl_loop_job *j, bool cancelled) {
        struct on_loop *o = (struct on_loop *)j;
        pthread_mutex_lock(&seen.lock);
        if (!seen.loop_thread)
                seen.loop_thread = pthread_self(); /* the first done() names it */
        else if (!pthread_equal(seen.loop_thread, pthread_self()))
                seen.done_on_loop = false;
        pthread_mutex_unlock(&seen.lock);
        if (o->fn && !cancelled)
                o->fn(o->arg);
        pthread_mutex_lock(&seen.lock);
        seen.done++;
        seen.cancelled += cancelled;
        pthread_cond_broadcast(&seen.cond);
        pthread_mutex_unlock(&seen.lock);
}

struct ctx {
        struct ctl_loop *l;
        struct ctl_loop_watch w;
        int r;
};

static void run_on_loop(struct ctl_loop *l, void (*fn)(void *), void *arg) {
        static struct on_loop o; /* one at a time: waited for below */
        int before = wait_for(&seen.done, 0);
        o = (struct on_loop){.j = {.work = job_work, .done = job_done}, .fn = fn, .arg = arg};
        ctl_loop_offload(l, &o.j);
        assert_int_equal(wait_for(&seen.done, before + 1), before + 1);
}

static void do_watch(void *arg) {
        struct ctx *x = arg;
        x->r = ctl_loop_watch(x->l, &x->w);
}

static void do_unwatch(void *arg) {
        struct ctx *x = arg;
        ctl_loop_unwatch(x->l, &x->w);
}

static void do_forget(void *arg) {
        struct ctx *x = arg;
        ctl_loop_forget(x->l, x->w.fd);
}

/* A timer (no fd) gets its deadline once, on the loop thread. */
static void test_deadline(void **state) {
        seen_reset();
        struct MHD_Daemon *d = daemon_start();
        struct ctl_loop *l = NULL;
        assert_int_equal(ctl_loop_start(d, NULL, &l), 0);
        struct ctx x = {.l = l, .w = {.ready = on_ready, .fd = -1, .deadline_ms = now_ms() + 50}};
        run_on_loop(l, do_watch, &x);
        assert_int_equal(x.r, 0);
        assert_int_equal(wait_for(&seen.ready[CTL_LOOP_DEADLINE], 1), 1);
        assert_int_equal(x.w.deadline_ms, 0);
        run_on_loop(l, do_unwatch, &x);
        ctl_loop_stop(l);
        MHD_stop_daemon(d);
        ctl_loop_free(l);
        assert_int_equal(seen.ready[CTL_LOOP_STOP], 0); /* unwatched before */
        assert_true(seen.done_on_loop);
        assert_true(seen.worked_off_loop);
}

/* Edge-triggered: bytes on a watched socket call ready(); a parked one
 * (unwatched) stays quiet; watched again, it is heard again without a new
 * registration; forgotten and closed, its number can be watched anew. */
static void test_watch_park_forget(void **state) {
        seen_reset();
        struct MHD_Daemon *d = daemon_start();
        struct ctl_loop *l = NULL;
        assert_int_equal(ctl_loop_start(d, NULL, &l), 0);
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        struct ctx x = {.l = l, .w = {.ready = on_ready, .fd = sv[0]}};
        run_on_loop(l, do_watch, &x);
        assert_int_equal(x.r, 0);
        int io = wait_for(&seen.ready[CTL_LOOP_IO], 1); /* the first edge: writable */
        assert_int_equal(write(sv[1], "a", 1), 1);
        assert_true(wait_for(&seen.ready[CTL_LOOP_IO], io + 1) > io);
        assert_true(seen.events & EPOLLIN);

        run_on_loop(l, do_unwatch, &x);
        io = wait_for(&seen.ready[CTL_LOOP_IO], 0);
        assert_int_equal(write(sv[1], "b", 1), 1);
        run_on_loop(l, NULL, NULL); /* a loop turn after the bytes */
        assert_int_equal(wait_for(&seen.ready[CTL_LOOP_IO], 0), io);

        run_on_loop(l, do_watch, &x);
        assert_int_equal(x.r, 0);
        assert_int_equal(write(sv[1], "c", 1), 1);
        assert_true(wait_for(&seen.ready[CTL_LOOP_IO], io + 1) > io);

        run_on_loop(l, do_unwatch, &x);
        run_on_loop(l, do_forget, &x);
        close(sv[0]);
        close(sv[1]);
        /* The same numbers again, new sockets: registered anew. */
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        x.w = (struct ctl_loop_watch){.ready = on_ready, .fd = sv[0]};
        run_on_loop(l, do_watch, &x);
        assert_int_equal(x.r, 0);
        io = wait_for(&seen.ready[CTL_LOOP_IO], 0);
        assert_int_equal(write(sv[1], "d", 1), 1);
        assert_true(wait_for(&seen.ready[CTL_LOOP_IO], io + 1) > io);

        /* Still watched at the stop: told so. */
        ctl_loop_stop(l);
        assert_int_equal(seen.ready[CTL_LOOP_STOP], 1);
        MHD_stop_daemon(d);
        ctl_loop_free(l);
        close(sv[0]);
        close(sv[1]);
}

/* What the ops saw: connections taken, parked fds with news, turns run. */
struct ops_seen {
        int taken_fd, parked_fd;
        int taken, parked, runs, last_runs;
};
static struct ops_seen ops_seen;

static void op_take(void *userdata, int fd, const struct sockaddr *sa, socklen_t len) {
        pthread_mutex_lock(&seen.lock);
        ops_seen.taken_fd = fd;
        ops_seen.taken++;
        pthread_cond_broadcast(&seen.cond);
        pthread_mutex_unlock(&seen.lock);
}

static void op_run(void *userdata, bool stopping) {
        pthread_mutex_lock(&seen.lock);
        ops_seen.runs++;
        if (stopping)
                ops_seen.last_runs++;
        pthread_cond_broadcast(&seen.cond);
        pthread_mutex_unlock(&seen.lock);
}

static void op_parked(void *userdata, int fd) {
        pthread_mutex_lock(&seen.lock);
        ops_seen.parked_fd = fd;
        ops_seen.parked++;
        pthread_cond_broadcast(&seen.cond);
        pthread_mutex_unlock(&seen.lock);
}

/* With ops: a connection added goes to take() (not the daemon), run() is
 * called after turns and once at the stop, and bytes on a parked fd (in
 * the set, no owner) are told to parked_news() — only for reading's
 * events: a watch for reading alone is not woken by its peer's reads. */
static void test_ops(void **state) {
        seen_reset();
        ops_seen = (struct ops_seen){.taken_fd = -1, .parked_fd = -1};
        struct MHD_Daemon *d = daemon_start();
        struct ctl_loop *l = NULL;
        const struct ctl_loop_ops ops = {.take = op_take, .run = op_run, .parked_news = op_parked};
        assert_int_equal(ctl_loop_start(d, &ops, &l), 0);
        int conn[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, conn), 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        assert_int_equal(ctl_loop_add_conn(l, conn[0], (struct sockaddr *)&sa, sizeof sa.sun_family), 0);
        assert_int_equal(wait_for(&ops_seen.taken, 1), 1);
        assert_int_equal(ops_seen.taken_fd, conn[0]);
        assert_true(wait_for(&ops_seen.runs, 1) >= 1);

        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        struct ctx x = {.l = l, .w = {.ready = on_ready, .fd = sv[0], .want = EPOLLIN | EPOLLRDHUP}};
        run_on_loop(l, do_watch, &x);
        assert_int_equal(x.r, 0);
        /* Our bytes read by the peer: no edge for a reading watch. */
        assert_int_equal(write(sv[0], "q", 1), 1);
        char ch;
        assert_int_equal(read(sv[1], &ch, 1), 1);
        run_on_loop(l, NULL, NULL);
        assert_int_equal(wait_for(&seen.ready[CTL_LOOP_IO], 0), 0);
        /* Parked: the peer's bytes go to parked_news. */
        run_on_loop(l, do_unwatch, &x);
        assert_int_equal(write(sv[1], "n", 1), 1);
        assert_int_equal(wait_for(&ops_seen.parked, 1), 1);
        assert_int_equal(ops_seen.parked_fd, sv[0]);
        assert_int_equal(wait_for(&seen.ready[CTL_LOOP_IO], 0), 0);

        ctl_loop_stop(l);
        assert_int_equal(ops_seen.last_runs, 1);
        MHD_stop_daemon(d);
        ctl_loop_free(l);
        close(conn[0]);
        close(conn[1]);
        close(sv[0]);
        close(sv[1]);
}

static void *stop_main(void *arg) {
        ctl_loop_stop(arg);
        return NULL;
}

/* Stopping while the workers are held and more jobs wait: each job gets
 * its done() exactly once, worked or cancelled (which ones depends on how
 * far the workers got before the stop: none to all). */
static void test_stop_ends_every_job(void **state) {
        seen_reset();
        struct MHD_Daemon *d = daemon_start();
        struct ctl_loop *l = NULL;
        assert_int_equal(ctl_loop_start(d, NULL, &l), 0);
        pthread_mutex_t hold = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&hold);
        enum { N = CTL_LOOP_WORKERS + 3 };
        struct on_loop jobs[N];
        for (int i = 0; i < N; i++) {
                jobs[i] = (struct on_loop){.j = {.work = job_work, .done = job_done}, .hold = &hold};
                ctl_loop_offload(l, &jobs[i].j);
        }
        pthread_t stopper;
        assert_int_equal(pthread_create(&stopper, NULL, stop_main, l), 0);
        pthread_mutex_unlock(&hold);
        pthread_join(stopper, NULL);
        assert_int_equal(seen.done, N);
        assert_int_equal(seen.worked + seen.cancelled, N);
        MHD_stop_daemon(d);
        ctl_loop_free(l);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_deadline),
                cmocka_unit_test(test_watch_park_forget),
                cmocka_unit_test(test_ops),
                cmocka_unit_test(test_stop_ends_every_job),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
