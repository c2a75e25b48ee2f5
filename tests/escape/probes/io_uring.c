/* io_uring_setup: the io_uring interface (a large kernel attack surface that
 * also bypasses syscall filters). Breach: a ring is created. */
#include "probe.h"
#include <linux/io_uring.h>
#include <sys/syscall.h>

int main(void) {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        long fd = syscall(__NR_io_uring_setup, 4, &p);
        probe_try(fd >= 0, "io_uring_setup");
        if (fd >= 0)
                close((int)fd);
        return probe_report("io_uring");
}
