/* bpf: load an eBPF map and a socket filter program. Breach: either works. */
#include "probe.h"
#include <linux/bpf.h>
#include <sys/syscall.h>

int main(void) {
        union bpf_attr a;
        memset(&a, 0, sizeof a);
        a.map_type = BPF_MAP_TYPE_ARRAY;
        a.key_size = 4;
        a.value_size = 8;
        a.max_entries = 1;
        long fd = syscall(__NR_bpf, BPF_MAP_CREATE, &a, sizeof a);
        probe_try(fd >= 0, "BPF_MAP_CREATE");
        if (fd >= 0)
                close((int)fd);
        struct bpf_insn prog[] = {
                {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
                {.code = BPF_JMP | BPF_EXIT},
        };
        memset(&a, 0, sizeof a);
        a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
        a.insns = (unsigned long)prog;
        a.insn_cnt = 2;
        a.license = (unsigned long)"GPL";
        fd = syscall(__NR_bpf, BPF_PROG_LOAD, &a, sizeof a);
        probe_try(fd >= 0, "BPF_PROG_LOAD socket filter");
        if (fd >= 0)
                close((int)fd);
        return probe_report("bpf");
}
