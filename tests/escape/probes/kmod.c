/* Kernel modules: init_module / finit_module / delete_module. Breach: the
 * call gets past the permission check (it works, or fails for another
 * reason than EPERM/EACCES; ENOSYS means the kernel has no modules). */
#include "probe.h"
#include <fcntl.h>
#include <sys/syscall.h>

static int refused(long r) {
        return r != 0 && (errno == EPERM || errno == EACCES || errno == ENOSYS);
}

int main(void) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        long r = syscall(__NR_finit_module, fd, "", 0);
        probe_try(!refused(r), "finit_module (errno %d)", r ? errno : 0);
        close(fd);
        static char image[64];
        r = syscall(__NR_init_module, image, sizeof image, "");
        probe_try(!refused(r), "init_module (errno %d)", r ? errno : 0);
        r = syscall(__NR_delete_module, "vsock", 0);
        probe_try(!refused(r), "delete_module vsock (errno %d)", r ? errno : 0);
        return probe_report("kmod");
}
