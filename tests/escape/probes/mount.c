/* mount: a tmpfs, a bind of organism/ over kernel/, the new mount API, and
 * unmounting what hides things (/workspace/.seed) or the workspace itself.
 * Breach: any of them works. */
#include "probe.h"
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

int main(void) {
        mkdir("/tmp/escape-mnt", 0700);
        int r = mount("none", "/tmp/escape-mnt", "tmpfs", 0, NULL);
        probe_try(r == 0, "mount tmpfs");
        r = mount("/workspace/organism", "/workspace/kernel", NULL, MS_BIND, NULL);
        probe_try(r == 0, "bind organism/ over kernel/");
        r = mount(NULL, "/workspace", NULL, MS_REMOUNT | MS_BIND, NULL);
        probe_try(r == 0, "remount /workspace read-write");
        r = umount2("/workspace/.seed", MNT_DETACH);
        probe_try(r == 0, "umount /workspace/.seed");
        r = umount2("/workspace", MNT_DETACH);
        probe_try(r == 0, "umount /workspace");
#ifdef __NR_fsopen
        long fd = syscall(__NR_fsopen, "tmpfs", 0);
        probe_try(fd >= 0, "fsopen tmpfs");
        if (fd >= 0)
                close((int)fd);
#endif
#ifdef __NR_open_tree
        long t = syscall(__NR_open_tree, -100, "/workspace/organism", 1 /* OPEN_TREE_CLONE */);
        probe_try(t >= 0, "open_tree clone");
        if (t >= 0)
                close((int)t);
#endif
        return probe_report("mount");
}
