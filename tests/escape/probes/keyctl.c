/* keyctl: the kernel keyrings are not namespaced; a sandbox that can use
 * them can reach keys of the same uid outside. Breach: a key is added or a
 * session keyring joined. */
#include "probe.h"
#include <linux/keyctl.h>
#include <sys/syscall.h>

int main(void) {
        long k = syscall(__NR_add_key, "user", "escape-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING);
        probe_try(k >= 0, "add_key to the process keyring");
        k = syscall(__NR_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "escape-probe");
        probe_try(k >= 0, "KEYCTL_JOIN_SESSION_KEYRING");
        k = syscall(__NR_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0);
        probe_try(k >= 0, "KEYCTL_GET_KEYRING_ID of the uid's user keyring");
        return probe_report("keyctl");
}
