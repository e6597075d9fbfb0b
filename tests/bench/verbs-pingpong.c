/*
 * verbs-pingpong: the exchange of tests/nd2/nd2-pingpong --poll written directly on librdmacm and
 * libibverbs, the yardstick of tests/bench/nd2.sh.
 *
 *   verbs-pingpong server LOCAL_IP PORT [--iters N] [--size B] [--poll [--yield] | --mixed N]
 *   verbs-pingpong client LOCAL_IP SERVER_IP PORT [--iters N] [--size B] [--poll [--yield] | --mixed N]
 *
 * The same as nd2-pingpong: an RC connection over rdma_cm; the client sends message i filled with
 * pattern(i), the server checks it and answers with pattern(i + 1), the client checks the answer;
 * one receive posted ahead on each side; every completion's status, opcode and wr_id checked.
 * Event-driven by default, as nd2-pingpong: the CQ armed (ibv_req_notify_cq) when empty and its
 * completion channel waited on; with --poll the CQ is polled (--yield: sched_yield between empty
 * polls, as nd2-pingpong --poll --yield); with --mixed N the exchanges are
 * polled in every other run of N (sched_yield between empty polls) and waited in the others, as
 * nd2-pingpong --mixed N; with --epoll the wait is
 * epoll_wait on the (non-blocking) channel, then the read, as nd-shim's waiting thread does, where
 * the default blocks in the read alone; --touch-pages N reads one byte of each of N pages after
 * every completion, a program with a bigger working set (tests/bench/nd2.sh's experiment on what a
 * wake-up costs under emulation: docs/nd2-performance.md). The client prints the mean round
 * trip, the exchanges per second, the ibv_poll_cq calls per exchange and the CPU time used per
 * exchange, and per thread the context switches and system calls per exchange
 * (with THREAD_COUNTS=1: thread-counts.h), then the typical (median), min, 99th percentile and
 * max of the exchanges' round trips, each exchange timed as nd2-pingpong times it
 * (round-trips.h); under valgrind
 * --tool=callgrind --collect-atstart=no only the client's exchanges are counted.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>

#include "round-trips.h"
#include "thread-counts.h"

#define DIE(...)                                                                                  \
    do {                                                                                          \
        fprintf(stderr, "verbs-pingpong: " __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                                    \
        exit(1);                                                                                  \
    } while (0)

struct ctx {
    int server;
    unsigned iters;
    uint32_t size;
    struct rdma_event_channel *ec;
    struct rdma_cm_id *id;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *mr;
    unsigned char *buf; /* receive half, then send half */
    int early_receive;
    int poll;
    int yield; /* --yield: sched_yield between empty polls (with --poll) */
    unsigned mixed; /* --mixed N: exchanges polled in every other run of N, the others waited */
    int polled;     /* this exchange is polled (--mixed) */
    struct ibv_comp_channel *channel;
    int armed;
    unsigned long polls;
    int epoll; /* --epoll: -1, or the set the wait sleeps in (channel + an idle eventfd) */
    unsigned touch_pages;               /* --touch-pages N: pages read after each completion */
    const volatile unsigned char *touch; /* their buffer, written once before the exchanges */
    unsigned touched;                    /* what the reads added up to (kept, so they are made) */
};

/* --touch-pages: at most 4 GiB of pages. */
#define MAX_TOUCH_PAGES (1u << 20)
/* --iters: each exchange keeps an 8-byte stamp (round-trips.h). --size: one buffer of 2 * B. */
#define MAX_ITERS 10000000u
#define MAX_SIZE (1u << 30)

/* A whole decimal number from min to max for OPTION, else the program says so and exits 1 (atoi
 * took "x" for 0 and "-1" for 4294967295). */
static unsigned parse_count(const char *option, const char *text, unsigned min, unsigned max)
{
    char *end;
    unsigned long value = strtoul(text, &end, 10);
    if (*text < '0' || *text > '9' || *end != '\0' || value < min || value > max)
        DIE("%s %s: expected a whole number from %u to %u", option, text, min, max);
    return (unsigned)value;
}

static unsigned char pattern(unsigned i, uint32_t at) { return (unsigned char)(i * 31 + at * 7 + 1); }

static void fill(unsigned char *b, uint32_t size, unsigned i)
{
    for (uint32_t at = 0; at < size; at++)
        b[at] = pattern(i, at);
}

static int matches(const unsigned char *b, uint32_t size, unsigned i)
{
    for (uint32_t at = 0; at < size; at++)
        if (b[at] != pattern(i, at))
            return 0;
    return 1;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* CPU time the whole process has used, in microseconds. */
static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static struct sockaddr_in ipv4(const char *ip, unsigned port)
{
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1)
        DIE("bad IPv4 address %s", ip);
    return sin;
}

/* The next event on the channel, which must be `want`; returns its id. */
static struct rdma_cm_id *expect_event(struct ctx *c, enum rdma_cm_event_type want)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(c->ec, &ev))
        DIE("rdma_get_cm_event: %m");
    if (ev->event != want)
        DIE("event %s (status %d), want %s", rdma_event_str(ev->event), ev->status, rdma_event_str(want));
    struct rdma_cm_id *id = ev->id;
    rdma_ack_cm_event(ev);
    return id;
}

static void setup_qp(struct ctx *c)
{
    c->pd = ibv_alloc_pd(c->id->verbs);
    c->channel = ibv_create_comp_channel(c->id->verbs);
    c->cq = c->pd && c->channel ? ibv_create_cq(c->id->verbs, 16, NULL, c->channel, 0) : NULL;
    if (!c->cq)
        DIE("PD/CQ: %m");
    if (c->epoll >= 0) {
        /* As nd-shim's leader: a non-blocking channel, level-triggered, in an epoll set beside
         * an eventfd that never fires; each wait is epoll_wait, then the read. */
        fcntl(c->channel->fd, F_SETFL, fcntl(c->channel->fd, F_GETFL) | O_NONBLOCK);
        int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
        if (wake < 0 || epoll_ctl(c->epoll, EPOLL_CTL_ADD, wake, &ev))
            DIE("eventfd: %m");
        ev.data.u64 = 1;
        if (epoll_ctl(c->epoll, EPOLL_CTL_ADD, c->channel->fd, &ev))
            DIE("epoll_ctl: %m");
    }
    struct ibv_qp_init_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.send_cq = attr.recv_cq = c->cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(c->id, c->pd, &attr))
        DIE("rdma_create_qp: %m");
    c->buf = calloc(2, c->size);
    c->mr = c->buf ? ibv_reg_mr(c->pd, c->buf, 2 * (size_t)c->size, IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (!c->mr)
        DIE("ibv_reg_mr: %m");
}

static void post_receive(struct ctx *c, unsigned i)
{
    struct ibv_sge sge = {(uintptr_t)c->buf, c->size, c->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = 2 * (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
    if (ibv_post_recv(c->id->qp, &wr, &bad))
        DIE("ibv_post_recv: %m");
}

static void post_send(struct ctx *c, unsigned i)
{
    struct ibv_sge sge = {(uintptr_t)c->buf + c->size, c->size, c->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 2 * (uint64_t)i + 1, .sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;
    if (ibv_post_send(c->id->qp, &wr, &bad))
        DIE("ibv_post_send: %m");
}

/* Waits for receive i and send i as nd2-pingpong's Complete does (the server's receive i + 1
 * may come before its send i completes: kept for the next call). */
static void complete(struct ctx *c, unsigned i, int want_receive, int want_send)
{
    if (want_receive && c->early_receive) {
        c->early_receive = 0;
        want_receive = 0;
    }
    while (want_receive || want_send) {
        struct ibv_wc wc;
        c->polls++;
        int n = ibv_poll_cq(c->cq, 1, &wc);
        if (n < 0)
            DIE("ibv_poll_cq");
        if (n == 0) {
            if (c->poll) {
                if (c->yield)
                    sched_yield();
                continue;
            }
            if (c->polled) {
                /* --mixed: as nd2-pingpong's polled exchange, yielding between polls. */
                sched_yield();
                continue;
            }
            if (!c->armed) {
                /* What completes before arming is found by the next poll. */
                if (ibv_req_notify_cq(c->cq, 0))
                    DIE("ibv_req_notify_cq");
                c->armed = 1;
                continue;
            }
            struct ibv_cq *cq;
            void *cq_context;
            if (c->epoll >= 0) {
                struct epoll_event ev;
                while (epoll_wait(c->epoll, &ev, 1, -1) != 1)
                    ;
            }
            if (ibv_get_cq_event(c->channel, &cq, &cq_context))
                DIE("ibv_get_cq_event: %m");
            ibv_ack_cq_events(cq, 1);
            c->armed = 0;
            continue;
        }
        /* --touch-pages: one byte of each of N pages, a line apart from page to page. */
        for (unsigned k = 0; k < c->touch_pages; k++)
            c->touched += c->touch[(size_t)k * 4096 + k % 64 * 64];
        if (wc.status != IBV_WC_SUCCESS)
            DIE("completion %s", ibv_wc_status_str(wc.status));
        if (wc.opcode == IBV_WC_RECV) {
            if (wc.byte_len != c->size)
                DIE("received %u bytes", wc.byte_len);
            if (!want_receive && c->server && wc.wr_id == 2 * (uint64_t)(i + 1) && !c->early_receive) {
                c->early_receive = 1;
                continue;
            }
            if (!want_receive || wc.wr_id != 2 * (uint64_t)i)
                DIE("unexpected receive %llu", (unsigned long long)wc.wr_id);
            want_receive = 0;
        } else {
            if (wc.opcode != IBV_WC_SEND || !want_send || wc.wr_id != 2 * (uint64_t)i + 1)
                DIE("unexpected completion opcode %d", wc.opcode);
            want_send = 0;
        }
    }
}

static int serve(struct ctx *c, const char *ip, unsigned port)
{
    struct rdma_cm_id *listener;
    struct sockaddr_in local = ipv4(ip, port);
    if (rdma_create_id(c->ec, &listener, NULL, RDMA_PS_TCP) ||
        rdma_bind_addr(listener, (struct sockaddr *)&local) || rdma_listen(listener, 1))
        DIE("listen: %m");
    c->id = expect_event(c, RDMA_CM_EVENT_CONNECT_REQUEST);
    setup_qp(c);
    post_receive(c, 0);
    struct rdma_conn_param param;
    memset(&param, 0, sizeof param);
    if (rdma_accept(c->id, &param))
        DIE("rdma_accept: %m");
    expect_event(c, RDMA_CM_EVENT_ESTABLISHED);
    for (unsigned i = 0; i < c->iters; i++) {
        c->polled = c->mixed && (i / c->mixed) % 2 == 1;
        complete(c, i, 1, 0);
        if (!matches(c->buf, c->size, i))
            DIE("message %u differs", i);
        if (i + 1 < c->iters)
            post_receive(c, i + 1);
        fill(c->buf + c->size, c->size, i + 1);
        post_send(c, i);
        complete(c, i, 0, 1);
    }
    expect_event(c, RDMA_CM_EVENT_DISCONNECTED);
    rdma_disconnect(c->id);
    printf("server: %u exchanges of %u bytes checked\n", c->iters, c->size);
    rdma_destroy_id(listener);
    return 0;
}

static int ping(struct ctx *c, const char *ip, const char *server_ip, unsigned port)
{
    struct sockaddr_in local = ipv4(ip, 0), server = ipv4(server_ip, port);
    if (rdma_create_id(c->ec, &c->id, NULL, RDMA_PS_TCP) ||
        rdma_resolve_addr(c->id, (struct sockaddr *)&local, (struct sockaddr *)&server, 2000))
        DIE("rdma_resolve_addr: %m");
    expect_event(c, RDMA_CM_EVENT_ADDR_RESOLVED);
    if (rdma_resolve_route(c->id, 2000))
        DIE("rdma_resolve_route: %m");
    expect_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED);
    setup_qp(c);
    struct rdma_conn_param param;
    memset(&param, 0, sizeof param);
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    if (rdma_connect(c->id, &param))
        DIE("rdma_connect: %m");
    expect_event(c, RDMA_CM_EVENT_ESTABLISHED);
    c->polls = 0;
    struct round_trips trips;
    round_trips_init(&trips, c->iters);
    struct thread_counts counts;
    thread_counts_start(&counts);
    CALLGRIND_TOGGLE_COLLECT;
    double start = now_us(), cpu_start = cpu_us();
    for (unsigned i = 0; i < c->iters; i++) {
        round_trips_stamp(&trips, i);
        c->polled = c->mixed && (i / c->mixed) % 2 == 1;
        post_receive(c, i);
        fill(c->buf + c->size, c->size, i);
        post_send(c, i);
        complete(c, i, 1, 1);
        if (!matches(c->buf, c->size, i + 1))
            DIE("answer %u differs", i);
    }
    round_trips_stamp(&trips, c->iters);
    double elapsed = now_us() - start, cpu = cpu_us() - cpu_start;
    CALLGRIND_TOGGLE_COLLECT;
    printf("client: %u exchanges of %u bytes checked (%s), mean round trip %.1f us, %.0f exchanges/s, "
           "%.1f ibv_poll_cq per exchange, %.1f us of CPU per exchange\n",
           c->iters, c->size, c->poll ? "polling" : c->mixed ? "mixed" : "event-driven", elapsed / c->iters, c->iters / (elapsed / 1e6),
           (double)c->polls / c->iters, cpu / c->iters);
    thread_counts_print(&counts, "client", c->iters);
    round_trips_print(&trips, "client");
    rdma_disconnect(c->id);
    expect_event(c, RDMA_CM_EVENT_DISCONNECTED);
    return 0;
}

int main(int argc, char **argv)
{
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.epoll = -1;
    c.iters = 1000;
    c.size = 64;
    int at;
    if (argc >= 4 && strcmp(argv[1], "server") == 0) {
        c.server = 1;
        at = 4;
    } else if (argc >= 5 && strcmp(argv[1], "client") == 0) {
        at = 5;
    } else {
        fprintf(stderr,
                "usage: %s server LOCAL_IP PORT [OPTION...]\n"
                "       %s client LOCAL_IP SERVER_IP PORT [OPTION...]\n"
                "options: --iters N, --size B, --poll (spin on the CQ), --yield (with --poll: sched_yield\n"
                "         between empty polls), --epoll (wait in epoll_wait,\n"
                "         then read the channel), --touch-pages N (read a byte of N pages per completion)\n",
                argv[0], argv[0]);
        return 2;
    }
    for (; at < argc; at++) {
        if (strcmp(argv[at], "--iters") == 0 && at + 1 < argc)
            c.iters = parse_count("--iters", argv[++at], 1, MAX_ITERS);
        else if (strcmp(argv[at], "--size") == 0 && at + 1 < argc)
            c.size = parse_count("--size", argv[++at], 1, MAX_SIZE);
        else if (strcmp(argv[at], "--poll") == 0)
            c.poll = 1;
        else if (strcmp(argv[at], "--yield") == 0)
            c.yield = 1;
        else if (strcmp(argv[at], "--mixed") == 0 && at + 1 < argc)
            c.mixed = parse_count("--mixed", argv[++at], 1, MAX_ITERS);
        else if (strcmp(argv[at], "--epoll") == 0)
            c.epoll = epoll_create1(EPOLL_CLOEXEC);
        else if (strcmp(argv[at], "--touch-pages") == 0 && at + 1 < argc)
            c.touch_pages = parse_count("--touch-pages", argv[++at], 0, MAX_TOUCH_PAGES);
        else
            DIE("unknown option %s", argv[at]);
    }
    if (c.touch_pages) {
        unsigned char *touch = malloc((size_t)c.touch_pages * 4096);
        if (!touch)
            DIE("no memory for %u pages", c.touch_pages);
        memset(touch, 1, (size_t)c.touch_pages * 4096);
        c.touch = touch;
    }
    c.ec = rdma_create_event_channel();
    if (!c.ec)
        DIE("rdma_create_event_channel: %m");
    int rc = c.server ? serve(&c, argv[2], (unsigned)atoi(argv[3])) : ping(&c, argv[2], argv[3], (unsigned)atoi(argv[4]));
    rdma_destroy_qp(c.id);
    ibv_dereg_mr(c.mr);
    free(c.buf);
    free((void *)c.touch);
    if (c.armed) {
        /* Armed, and a completion polled after arming raised an event too: destroying the CQ
         * waits for every event it reported to be acknowledged. */
        fcntl(c.channel->fd, F_SETFL, fcntl(c.channel->fd, F_GETFL) | O_NONBLOCK);
        struct ibv_cq *cq;
        void *cq_context;
        while (ibv_get_cq_event(c.channel, &cq, &cq_context) == 0)
            ibv_ack_cq_events(cq, 1);
    }
    ibv_destroy_cq(c.cq);
    ibv_destroy_comp_channel(c.channel);
    ibv_dealloc_pd(c.pd);
    rdma_destroy_id(c.id);
    rdma_destroy_event_channel(c.ec);
    return rc;
}
