/* netns.h — outbound network for the sandboxes that install dependencies
 * (evolution, build, test) without any way to the host's loopback.
 *
 * Each such sandbox gets its own network namespace (bwrap --unshare-net), so
 * the host's 127.0.0.1 (the kernel's control port, the proxy to the live app)
 * and the host's abstract Unix sockets are out of reach. slirp4netns, running
 * outside as the same user, gives the namespace a tap0 interface (10.0.2.100,
 * gateway 10.0.2.2, DNS 10.0.2.3) with user-mode NAT to the outside and
 * --disable-host-loopback, so 10.0.2.2 does not lead back to the host's
 * loopback either. It ends with the sandbox: its exit fd is the read end of a
 * pipe whose write end only bwrap (--sync-fd) holds.
 * Without slirp4netns these sandboxes have no network at all, never the
 * host's.
 *
 * The namespace's lo is bwrap's alone: bwrap's sandbox process gives it
 * 127.0.0.1/8 (failing if it already has it) and brings it up while the
 * network starts here. So slirp4netns runs without --configure (which
 * would bring lo up too; the host's kernel gives a loopback going up
 * 127.0.0.1 at once, and bwrap would then die with "loopback: Failed
 * RTM_NEWADDR"); it only creates tap0, and a child of ours that joins the
 * namespace gives tap0 its address, MTU and default route. */
#pragma once

#include "base/base.h"
#include <sys/types.h>

#define SANDBOX_SLIRP_PATH "/usr/bin/slirp4netns"
#define SANDBOX_SLIRP_DNS "10.0.2.3"

/* Path of slirp4netns, or NULL when missing. Borrowed. */
const char *sandbox_slirp_path(void);
/* 0 if sandboxes can get outbound network here; otherwise -errno and
 * *ret_message (caller frees) says what is missing and how to fix it. */
int sandbox_check_network(char **ret_message);

/* Starts slirp4netns for the network namespace of init_pid (the sandbox's
 * pid 1, held by bwrap's --block-fd so nothing runs yet), configures tap0,
 * all within timeout_ms; lo is left alone. exit_fd: slirp4netns ends once it
 * reads EOF there (borrowed; the caller closes its copy afterwards).
 * *ret_pid is the caller's child: end it with sandbox_net_release(). */
int sandbox_net_start(pid_t init_pid, int exit_fd, int timeout_ms, pid_t *ret_pid);
/* Ends slirp4netns once its sandbox is gone: kills and reaps it in a
 * detached thread, since its exit tears down tap0, which takes the host's
 * kernel some 20 ms that no caller should wait for. Its pid stays ours
 * (unreaped) until then, so it cannot be reused. pid <= 0 is a no-op. */
void sandbox_net_release(pid_t pid);

/* The resolv.conf a networked sandbox gets, from the host's (host_path,
 * normally /etc/resolv.conf): loopback nameservers (a local resolver such as
 * systemd-resolved's 127.0.0.53, unreachable from the namespace) become
 * slirp's DNS forwarder, other lines are kept; no nameserver at all gets
 * slirp's. *ret_dest is where to bind it inside: host_path, or the file a
 * symlinked host_path points to (e.g. /run/systemd/resolve/stub-resolv.conf,
 * which the sandbox does not otherwise have). Returns 0 with both set
 * (caller frees), or -ENOENT when the host has no such file (nothing to
 * bind). */
int sandbox_resolv_conf(const char *host_path, char **ret_content, char **ret_dest);
