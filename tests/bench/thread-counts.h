/*
 * thread-counts.h: exact counts of a benchmark's measured loop, per thread of the process, for
 * tests/bench/nd2.sh's two ping-pong programs (C and C++; Linux only, header only).
 *
 *   struct thread_counts counts;
 *   thread_counts_start(&counts);     just before the loop: the threads that exist now
 *   ... the loop ...
 *   thread_counts_print(&counts, "client", iterations);
 *
 * For every thread: voluntary and involuntary context switches (/proc/self/task/TID/status) and
 * system calls (a perf counter of the raw_syscalls:sys_enter tracepoint on that thread; needs
 * tracefs and the right to count, i.e. root in the rig's guest: "n/a" otherwise), per
 * iteration, then the sums. One line:
 *
 *   client counts per exchange: total 2.01 voluntary, 0.00 involuntary, 6.03 syscalls | main(812) 2.01/0.00/6.03 | ...
 *
 * Threads started during the loop are not counted (neither program starts one there). The
 * counting costs nothing inside the loop: the counters run in the kernel.
 *
 * Only with THREAD_COUNTS=1 in the environment (tests/bench/nd2.sh sets it); otherwise nothing
 * is counted or printed. Opening the first counter switches the tracepoint on, and the kernel
 * patches its own syscall entry code for that while the other vCPU runs it; under QEMU's software
 * emulation that patching (text_poke_bp's int3) can spin both vCPUs for good (Debian 12's
 * 6.1.0-56 kernel: soft lockups in syscall_trace_enter and asm_exc_int3, once in about 20
 * ping-pongs on this machine), which hung the rig's nd2 suite when every client counted.
 */
#ifndef THREAD_COUNTS_H
#define THREAD_COUNTS_H

#include <dirent.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREAD_COUNTS_MAX 32

struct thread_count {
    int tid;
    char name[20];
    long voluntary, involuntary; /* at the start, then the differences */
    int syscalls_fd;             /* -1: not counted */
    uint64_t syscalls;
};

struct thread_counts {
    int n;
    struct thread_count t[THREAD_COUNTS_MAX];
};

/* The thread's context switches so far; 0 if it is gone. */
static inline void thread_counts_switches(int tid, long *voluntary, long *involuntary)
{
    char path[64], line[128];
    *voluntary = *involuntary = 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
            *voluntary = strtol(line + 24, NULL, 10);
        else if (strncmp(line, "nonvoluntary_ctxt_switches:", 27) == 0)
            *involuntary = strtol(line + 27, NULL, 10);
    }
    fclose(f);
}

/* The id of the raw_syscalls:sys_enter tracepoint, or -1. */
static inline long thread_counts_sys_enter_id(void)
{
    static const char *const paths[] = {"/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
                                        "/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id"};
    for (unsigned i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        FILE *f = fopen(paths[i], "r");
        long id = -1;
        if (!f)
            continue;
        if (fscanf(f, "%ld", &id) != 1)
            id = -1;
        fclose(f);
        if (id >= 0)
            return id;
    }
    return -1;
}

static inline int thread_counts_wanted(void)
{
    const char *wanted = getenv("THREAD_COUNTS");
    return wanted && strcmp(wanted, "1") == 0;
}

static inline void thread_counts_start(struct thread_counts *c)
{
    c->n = 0;
    if (!thread_counts_wanted())
        return;
    long sys_enter = thread_counts_sys_enter_id();
    DIR *dir = opendir("/proc/self/task");
    struct dirent *entry;
    if (!dir)
        return;
    while ((entry = readdir(dir)) != NULL && c->n < THREAD_COUNTS_MAX) {
        if (entry->d_name[0] == '.')
            continue;
        struct thread_count *t = &c->t[c->n++];
        char path[64];
        t->tid = atoi(entry->d_name);
        snprintf(t->name, sizeof t->name, "?");
        snprintf(path, sizeof path, "/proc/self/task/%d/comm", t->tid);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(t->name, sizeof t->name, f))
                t->name[strcspn(t->name, "\n")] = 0;
            fclose(f);
        }
        t->syscalls_fd = -1;
        t->syscalls = 0;
        if (sys_enter >= 0) {
            struct perf_event_attr attr;
            memset(&attr, 0, sizeof attr);
            attr.type = PERF_TYPE_TRACEPOINT;
            attr.size = sizeof attr;
            attr.config = (uint64_t)sys_enter;
            attr.disabled = 1;
            attr.exclude_hv = 1;
            t->syscalls_fd = (int)syscall(SYS_perf_event_open, &attr, t->tid, -1, -1, 0);
        }
    }
    closedir(dir);
    /* Last, so that the set-up above is not counted: the switches, then the counters on. */
    for (int i = 0; i < c->n; i++) {
        thread_counts_switches(c->t[i].tid, &c->t[i].voluntary, &c->t[i].involuntary);
        if (c->t[i].syscalls_fd >= 0)
            ioctl(c->t[i].syscalls_fd, PERF_EVENT_IOC_ENABLE, 0);
    }
}

static inline void thread_counts_print(struct thread_counts *c, const char *who, unsigned iterations)
{
    double n = iterations ? (double)iterations : 1.0;
    long voluntary = 0, involuntary = 0;
    uint64_t syscalls = 0;
    int counted = c->n > 0;
    if (!thread_counts_wanted())
        return;
    for (int i = 0; i < c->n; i++) {
        struct thread_count *t = &c->t[i];
        if (t->syscalls_fd >= 0) {
            ioctl(t->syscalls_fd, PERF_EVENT_IOC_DISABLE, 0);
            if (read(t->syscalls_fd, &t->syscalls, sizeof t->syscalls) != (ssize_t)sizeof t->syscalls)
                counted = 0;
            close(t->syscalls_fd);
        } else {
            counted = 0;
        }
    }
    for (int i = 0; i < c->n; i++) {
        struct thread_count *t = &c->t[i];
        long v, inv;
        thread_counts_switches(t->tid, &v, &inv);
        t->voluntary = v - t->voluntary;
        t->involuntary = inv - t->involuntary;
        voluntary += t->voluntary;
        involuntary += t->involuntary;
        syscalls += t->syscalls;
    }
    printf("%s counts per exchange: total %.2f voluntary, %.2f involuntary, ", who, voluntary / n, involuntary / n);
    if (counted)
        printf("%.2f syscalls", (double)syscalls / n);
    else
        printf("n/a syscalls");
    for (int i = 0; i < c->n; i++) {
        struct thread_count *t = &c->t[i];
        printf(" | %s(%d) %.2f/%.2f/", t->name, t->tid, t->voluntary / n, t->involuntary / n);
        if (counted)
            printf("%.2f", (double)t->syscalls / n);
        else
            printf("n/a");
    }
    printf("\n");
}

#endif
