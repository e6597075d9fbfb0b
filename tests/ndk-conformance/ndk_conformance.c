/*
 * NDK-face conformance of nd-shim, for the VM rig (rxe0 on 198.18.0.1, rxe1 on 198.18.0.2):
 * a C program against include/ndk_shim.h and libnd_shim.so, as an NDK consumer would be.
 * `ndk-conformance CASE` runs one case (the passive side as a thread with its own adapter on
 * the shim's event thread; the active side on the main thread, mostly on a polled adapter),
 * prints PASS CASE or FAIL CASE: why, and exits 0 only on PASS. `--list` prints the cases.
 * The rig suite is tests/suites/ndk-conformance.sh; docs/nd-conformance.md maps codes to cases.
 *
 * Every call's result is checked against the RequestCompletion rule: a call that returned
 * STATUS_PENDING has its callback called exactly once; any other return, never. Each such
 * result is asserted with how it came (EXPECT_INLINE / EXPECT_DONE). The first failure prints
 * FAIL and ends the process at once (see fail()).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ndk_shim.h"

#define SERVER_IP "198.18.0.1"
#define CLIENT_IP "198.18.0.2"

static const char *current_case;
static char failure[512];

/*
 * The first failure ends the process: it prints FAIL and exits at once, from whichever thread
 * failed. Returning instead would unwind frames whose requests and signals the shim may still
 * complete from its event thread (a pending NdkAccept cancelled by a close, a late
 * DisconnectEvent), writing into dead stack memory; glibc then aborts on what it takes for a
 * robust mutex. The kernel releases the process's RDMA objects at exit.
 */
static int fail(const char *fmt, ...)
{
    static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&once);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failure, sizeof failure, fmt, ap);
    va_end(ap);
    printf("FAIL %s: %s\n", current_case ? current_case : "(no case)", failure);
    fflush(stdout);
    _exit(1);
}

static const char *status_name(NTSTATUS s)
{
    switch (s) {
#define N(x) case x: return #x;
    N(STATUS_SUCCESS) N(STATUS_PENDING) N(STATUS_BUFFER_OVERFLOW) N(STATUS_UNSUCCESSFUL)
    N(STATUS_INVALID_HANDLE) N(STATUS_INVALID_PARAMETER) N(STATUS_INVALID_DEVICE_REQUEST)
    N(STATUS_NO_MEMORY) N(STATUS_BUFFER_TOO_SMALL) N(STATUS_SHARING_VIOLATION)
    N(STATUS_INSUFFICIENT_RESOURCES) N(STATUS_IO_TIMEOUT) N(STATUS_NOT_SUPPORTED)
    N(STATUS_INTERNAL_ERROR) N(STATUS_CANCELLED) N(STATUS_INVALID_ADDRESS)
    N(STATUS_INVALID_DEVICE_STATE) N(STATUS_INVALID_BUFFER_SIZE) N(STATUS_TOO_MANY_ADDRESSES)
    N(STATUS_ADDRESS_ALREADY_EXISTS) N(STATUS_CONNECTION_DISCONNECTED)
    N(STATUS_CONNECTION_REFUSED) N(STATUS_ADDRESS_ALREADY_ASSOCIATED)
    N(STATUS_CONNECTION_INVALID) N(STATUS_CONNECTION_ACTIVE) N(STATUS_NETWORK_UNREACHABLE)
    N(STATUS_HOST_UNREACHABLE) N(STATUS_CONNECTION_ABORTED) N(STATUS_DEVICE_REMOVED)
#undef N
    }
    static __thread char buf[16];
    snprintf(buf, sizeof buf, "0x%08X", (unsigned)s);
    return buf;
}

/*
 * How the last result of finish() on this thread came: inline (the call's return value) or
 * through RequestCompletion (the call returned STATUS_PENDING). Every row of
 * docs/nd-conformance.md states one, so a result of finish() must be checked with
 * EXPECT_INLINE or EXPECT_DONE; EXPECT on it fails the case.
 */
enum via { VIA_NONE, VIA_INLINE, VIA_COMPLETION };
static __thread enum via last_via;

static const char *via_name(enum via v)
{
    return v == VIA_INLINE ? "inline" : v == VIA_COMPLETION ? "through the completion" : "(not from finish)";
}

/* EXPECT(what, got, want): prints the code, or fails the case. */
#define EXPECT(what, got, want)                                                          \
    do {                                                                                 \
        NTSTATUS got_ = (got), want_ = (want);                                           \
        if (last_via != VIA_NONE)                                                        \
            return fail("%s: a RequestCompletion call's result checked without saying how it came", (what)); \
        if (got_ != want_)                                                               \
            return fail("%s: got %s, want %s", (what), status_name(got_), status_name(want_)); \
        printf("  %s: %s\n", (what), status_name(got_));                                 \
    } while (0)

/* EXPECT_VIA(what, got, want, how): the code, and whether it came inline or through the
 * completion, as `got` (a call of finish() or of a helper around it) reports. */
#define EXPECT_VIA(what, got, want, how)                                                 \
    do {                                                                                 \
        NTSTATUS gotv_ = (got), wantv_ = (want);                                         \
        enum via came_ = last_via, wantc_ = (how);                                       \
        last_via = VIA_NONE;                                                             \
        if (gotv_ != wantv_ || came_ != wantc_)                                          \
            return fail("%s: got %s %s, want %s %s", (what), status_name(gotv_), via_name(came_), \
                        status_name(wantv_), via_name(wantc_));                          \
        printf("  %s: %s %s\n", (what), status_name(gotv_), via_name(came_));             \
    } while (0)
#define EXPECT_INLINE(what, got, want) EXPECT_VIA(what, got, want, VIA_INLINE)
#define EXPECT_DONE(what, got, want) EXPECT_VIA(what, got, want, VIA_COMPLETION)
/* EXPECT_SETTLED(what, got, want), EXPECT_ACCEPTED(what, got): NdkAccept's result (STATUS_SUCCESS
 * for EXPECT_ACCEPTED). It normally comes through the
 * completion (the RTU arrives after the call returned), but a handshake that finished before the
 * call looked at its request is reported inline, as docs/nd-conformance.md says of every request
 * that completed before the call returned (seen once under a loaded host). Either way, once. */
#define EXPECT_SETTLED(what, got, want)                                                  \
    do {                                                                                 \
        NTSTATUS gotv_ = (got), wantv_ = (want);                                         \
        enum via came_ = last_via;                                                       \
        last_via = VIA_NONE;                                                             \
        if (gotv_ != wantv_ || came_ == VIA_NONE)                                        \
            return fail("%s: got %s %s, want %s", (what), status_name(gotv_),             \
                        via_name(came_), status_name(wantv_));                           \
        printf("  %s: %s %s\n", (what), status_name(gotv_), via_name(came_));            \
    } while (0)
#define EXPECT_ACCEPTED(what, got) EXPECT_SETTLED(what, got, STATUS_SUCCESS)

#define ENSURE(cond, ...)                                                                \
    do {                                                                                 \
        if (!(cond))                                                                     \
            return fail(__VA_ARGS__);                                                    \
    } while (0)

#define OK(what, call) EXPECT(what, call, STATUS_SUCCESS)

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static struct sockaddr_in addr(const char *ip, uint16_t port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &sin.sin_addr);
    return sin;
}

#define SA(sin) ((PSOCKADDR)&(sin))

/* A request: RequestCompletion's record. */
struct request {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int calls;
    NTSTATUS status;
};

static void request_init(struct request *r)
{
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->calls = 0;
    r->status = STATUS_PENDING;
}

static void on_complete(PVOID ctx, NTSTATUS status)
{
    struct request *r = ctx;
    pthread_mutex_lock(&r->lock);
    r->calls++;
    r->status = status;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

/* A one-shot signal (connect and disconnect events, thread handshakes). */
struct signal {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int count;
    void *value;
};

static void signal_init(struct signal *s)
{
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->count = 0;
    s->value = NULL;
}

static void signal_raise(struct signal *s, void *value)
{
    pthread_mutex_lock(&s->lock);
    s->count++;
    s->value = value;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static int signal_count(struct signal *s)
{
    pthread_mutex_lock(&s->lock);
    int n = s->count;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* Runs a polled adapter's events for up to `ms`; sleeps when the adapter has its own thread. */
static void drive(NDK_ADAPTER *a, int polled, int ms)
{
    if (!polled) {
        usleep(ms * 1000);
        return;
    }
    int fd = -1;
    a->Dispatch->NdkGetEventFd(a, &fd);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    poll(&p, 1, ms);
    a->Dispatch->NdkProcessEvents(a, NULL);
}

/* Waits up to timeout_ms for the signal to reach `count`; returns the value, or NULL. */
static void *signal_wait(struct signal *s, int count, NDK_ADAPTER *a, int polled, int timeout_ms)
{
    long long end = now_ms() + timeout_ms;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        int n = s->count;
        void *v = s->value;
        pthread_mutex_unlock(&s->lock);
        if (n >= count)
            return v ? v : (void *)1;
        if (now_ms() >= end)
            return NULL;
        drive(a, polled, 20);
    }
}

/* "Exactly once": waits up to 10 s for the first call of a callback that `s` counts, then
 * keeps the adapter running for quiet_ms and requires that it was not called again. */
static int exactly_once(struct signal *s, NDK_ADAPTER *a, int polled, int quiet_ms, const char *what)
{
    if (!signal_wait(s, 1, a, polled, 10000))
        return fail("%s: not called within 10 s", what);
    long long end = now_ms() + quiet_ms;
    while (now_ms() < end) {
        if (a)
            drive(a, polled, 20);
        else
            usleep(20 * 1000);
    }
    int n = signal_count(s);
    if (n != 1)
        return fail("%s: called %d times", what, n);
    printf("  %s: called once (counted after %d ms more)\n", what, quiet_ms);
    return 0;
}

/*
 * The result of a call that takes a RequestCompletion: the inline code, or (after
 * STATUS_PENDING) the completion's, and in last_via which of the two. Checks the callback
 * rule. Returns STATUS_PENDING when a pending request did not complete within timeout_ms.
 */
static NTSTATUS finish(NTSTATUS returned, struct request *r, NDK_ADAPTER *a, int polled, int timeout_ms)
{
    last_via = returned == STATUS_PENDING ? VIA_COMPLETION : VIA_INLINE;
    if (returned != STATUS_PENDING) {
        drive(a, polled, 50);
        pthread_mutex_lock(&r->lock);
        int calls = r->calls;
        pthread_mutex_unlock(&r->lock);
        if (calls != 0) {
            fail("returned %s inline, yet RequestCompletion was called", status_name(returned));
            return STATUS_INTERNAL_ERROR;
        }
        return returned;
    }
    long long end = now_ms() + timeout_ms;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        int calls = r->calls;
        NTSTATUS status = r->status;
        pthread_mutex_unlock(&r->lock);
        if (calls > 1) {
            fail("RequestCompletion called %d times", calls);
            return STATUS_INTERNAL_ERROR;
        }
        if (calls == 1)
            return status;
        if (now_ms() >= end)
            return STATUS_PENDING;
        drive(a, polled, 20);
    }
}

/* One side's objects. */
struct side {
    NDK_ADAPTER *adapter;
    int polled;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_MR *mr;
    uint8_t *buf;
    size_t len;
    NDK_RESULT early[8]; /* completions that came while waiting for another one */
    int nearly;
};

static int side_open(struct side *s, const char *ip, int polled)
{
    memset(s, 0, sizeof *s);
    struct sockaddr_in a = addr(ip, 0);
    s->polled = polled;
    OK("NdkOpenAdapter", NdkOpenAdapter(SA(a), sizeof a, polled ? NDK_SHIM_ADAPTER_POLLED : 0, &s->adapter));
    const NDK_ADAPTER_DISPATCH *d = s->adapter->Dispatch;
    ENSURE(d->NdkCreateCq(s->adapter, 64, &s->cq) == STATUS_SUCCESS, "NdkCreateCq failed");
    ENSURE(d->NdkCreateQp(s->adapter, s->cq, s->cq, 16, 16, 2, &s->qp) == STATUS_SUCCESS, "NdkCreateQp failed");
    ENSURE(d->NdkCreateMr(s->adapter, 4096, &s->mr) == STATUS_SUCCESS, "NdkCreateMr failed");
    PVOID buf;
    ENSURE(s->mr->Dispatch->NdkGetMrBuffer(s->mr, &buf, &s->len) == STATUS_SUCCESS, "NdkGetMrBuffer failed");
    s->buf = buf;
    return 0;
}

static void side_close(struct side *s)
{
    if (s->qp)
        s->qp->Dispatch->NdkCloseQp(s->qp);
    if (s->mr)
        s->mr->Dispatch->NdkCloseMr(s->mr);
    if (s->cq)
        s->cq->Dispatch->NdkCloseCq(s->cq);
    if (s->adapter)
        s->adapter->Dispatch->NdkCloseAdapter(s->adapter);
    memset(s, 0, sizeof *s);
}

/* Private data that tells the peer where to RDMA-write: buffer address and remote token. */
static void token_data(struct side *s, uint8_t *out, size_t len)
{
    uint64_t va = (uintptr_t)s->buf;
    uint32_t token = s->mr->Dispatch->NdkGetRemoteTokenFromMr(s->mr);
    for (size_t i = 0; i < len; i++)
        out[i] = (uint8_t)i;
    memcpy(out, &va, 8);
    memcpy(out + 8, &token, 4);
}

static NDK_SGE sge(struct side *s, size_t offset, ULONG len)
{
    NDK_SGE e = {.VirtualAddress = s->buf + offset, .Length = len,
                 .MemoryRegionToken = s->mr->Dispatch->NdkGetLocalTokenFromMr(s->mr)};
    return e;
}

/* Waits for the completion of request context `ctx` on the side's CQ; others that come first
 * (one CQ serves sends and receives) are kept for their own wait. */
static int wait_result(struct side *s, uintptr_t ctx, NTSTATUS want, const char *what)
{
    long long end = now_ms() + 10000;
    while (now_ms() < end) {
        NDK_RESULT r;
        int found = 0;
        for (int i = 0; i < s->nearly; i++) {
            if ((uintptr_t)s->early[i].RequestContext == ctx) {
                r = s->early[i];
                s->early[i] = s->early[--s->nearly];
                found = 1;
                break;
            }
        }
        if (!found && s->cq->Dispatch->NdkGetCqResults(s->cq, &r, 1) == 1) {
            if ((uintptr_t)r.RequestContext != ctx) {
                ENSURE(s->nearly < 8, "%s: too many unexpected completions", what);
                s->early[s->nearly++] = r;
                continue;
            }
            found = 1;
        }
        if (found) {
            EXPECT(what, r.Status, want);
            return (int)r.BytesTransferred;
        }
        drive(s->adapter, s->polled, 5);
    }
    return fail("%s: no completion within 10 s", what);
}

static int post_receive(struct side *s, uintptr_t ctx, size_t offset)
{
    NDK_SGE e = sge(s, offset, 64);
    OK("NdkReceive", s->qp->Dispatch->NdkReceive(s->qp, (PVOID)ctx, &e, 1));
    return 0;
}

static int send_text(struct side *s, uintptr_t ctx, size_t offset, const char *text)
{
    size_t n = strlen(text) + 1;
    memcpy(s->buf + offset, text, n);
    NDK_SGE e = sge(s, offset, (ULONG)n);
    OK("NdkSend", s->qp->Dispatch->NdkSend(s->qp, (PVOID)ctx, &e, 1, 0));
    return wait_result(s, ctx, STATUS_SUCCESS, "send completion") < 0 ? -1 : 0;
}

/* The passive side, on a thread of its own. */
struct server {
    pthread_t thread;
    uint16_t port;
    int (*body)(struct server *);
    struct side side;
    NDK_LISTENER *listener;
    struct signal ready;     /* listening */
    struct signal incoming;  /* value: the newest NDK_CONNECTOR from the connect event */
    struct signal done;      /* the active side is finished: the server may close */
    struct signal disconnected; /* DisconnectEvent */
    int result;
    void *arg;
};

static void on_connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    signal_raise(&((struct server *)ctx)->incoming, c);
}

static void on_disconnect_event(PVOID ctx)
{
    signal_raise(ctx, NULL);
}

static int server_listen(struct server *srv)
{
    if (side_open(&srv->side, SERVER_IP, 0) < 0)
        return -1;
    NDK_ADAPTER *a = srv->side.adapter;
    OK("NdkCreateListener", a->Dispatch->NdkCreateListener(a, on_connect_event, srv, NULL, NULL, &srv->listener));
    struct sockaddr_in l = addr(SERVER_IP, srv->port);
    struct request r;
    request_init(&r);
    EXPECT_INLINE("NdkListen", finish(srv->listener->Dispatch->NdkListen(srv->listener, SA(l), sizeof l, on_complete, &r),
                               &r, a, 0, 5000),
           STATUS_SUCCESS);
    return 0;
}

/* The next connector the listener hands over, within 10 s. */
static NDK_CONNECTOR *server_next(struct server *srv, int nth)
{
    NDK_CONNECTOR *c = signal_wait(&srv->incoming, nth, NULL, 0, 10000);
    if (!c)
        fail("no connect event within 10 s");
    return c;
}

static void *server_main(void *arg)
{
    struct server *srv = arg;
    if (server_listen(srv) == 0) {
        signal_raise(&srv->ready, NULL);
        srv->result = srv->body(srv);
    } else {
        srv->result = -1;
    }
    signal_raise(&srv->ready, NULL);
    signal_wait(&srv->done, 1, NULL, 0, 30000);
    if (srv->listener)
        srv->listener->Dispatch->NdkCloseListener(srv->listener);
    side_close(&srv->side);
    return NULL;
}

static int server_start(struct server *srv, uint16_t port, int (*body)(struct server *), void *arg)
{
    memset(srv, 0, sizeof *srv);
    srv->port = port;
    srv->body = body;
    srv->arg = arg;
    signal_init(&srv->ready);
    signal_init(&srv->incoming);
    signal_init(&srv->done);
    signal_init(&srv->disconnected);
    pthread_create(&srv->thread, NULL, server_main, srv);
    ENSURE(signal_wait(&srv->ready, 1, NULL, 0, 20000), "server did not start listening");
    return 0;
}

static int server_join(struct server *srv)
{
    signal_raise(&srv->done, NULL);
    pthread_join(srv->thread, NULL);
    return srv->result;
}

/* An active-side connect on the client's side: returns the final code (STATUS_PENDING on timeout). */
static NTSTATUS client_connect(struct side *s, NDK_CONNECTOR *c, const char *ip, uint16_t port,
                               const void *pd, ULONG pdlen, int timeout_ms)
{
    struct sockaddr_in src = addr(CLIENT_IP, 0), dst = addr(ip, port);
    struct request r;
    request_init(&r);
    NTSTATUS st = c->Dispatch->NdkConnect(c, s->qp, SA(src), sizeof src, SA(dst), sizeof dst, 4, 4,
                                          (PVOID)pd, pdlen, on_complete, &r);
    return finish(st, &r, s->adapter, s->polled, timeout_ms);
}

/* NdkConnect from a given source to the server's port 7199 (nobody listens there). */
static NTSTATUS connect_from(struct side *s, NDK_CONNECTOR *c, const void *src, ULONG srclen, int timeout_ms)
{
    struct sockaddr_in dst = addr(SERVER_IP, 7199);
    struct request r;
    request_init(&r);
    NTSTATUS st = c->Dispatch->NdkConnect(c, s->qp, (PSOCKADDR)src, srclen, SA(dst), sizeof dst, 0, 0, NULL, 0,
                                          on_complete, &r);
    return finish(st, &r, s->adapter, s->polled, timeout_ms);
}

static NDK_CONNECTOR *new_connector(struct side *s)
{
    NDK_CONNECTOR *c = NULL;
    if (s->adapter->Dispatch->NdkCreateConnector(s->adapter, NULL, NULL, &c) != STATUS_SUCCESS)
        fail("NdkCreateConnector failed");
    return c;
}

static NTSTATUS accept_on(struct side *s, NDK_CONNECTOR *c, NDK_QP *qp, const void *pd, ULONG pdlen,
                          struct signal *disconnected)
{
    struct request r;
    request_init(&r);
    NTSTATUS st = c->Dispatch->NdkAccept(c, qp, 4, 4, (PVOID)pd, pdlen,
                                         disconnected ? on_disconnect_event : NULL, disconnected,
                                         on_complete, &r);
    return finish(st, &r, s->adapter, s->polled, 15000);
}

static NTSTATUS disconnect_on(struct side *s, NDK_CONNECTOR *c)
{
    struct request r;
    request_init(&r);
    return finish(c->Dispatch->NdkDisconnect(c, on_complete, &r), &r, s->adapter, s->polled, 10000);
}

/* NdkCompleteConnect without a DisconnectEvent (always inline, so RequestCompletion is never called). */
static NTSTATUS complete_connect(NDK_CONNECTOR *c)
{
    return c->Dispatch->NdkCompleteConnect(c, NULL, NULL, on_complete, NULL);
}

/* NdkConnect from CLIENT_IP:0 to ip:port (no reads, no private data) with `r` as its request:
 * the code it returned, for cases that look at the pending request themselves. */
static NTSTATUS connect_start(struct side *s, NDK_CONNECTOR *c, const char *ip, uint16_t port, struct request *r)
{
    struct sockaddr_in src = addr(CLIENT_IP, 0), dst = addr(ip, port);
    request_init(r);
    return c->Dispatch->NdkConnect(c, s->qp, SA(src), sizeof src, SA(dst), sizeof dst, 0, 0, NULL, 0, on_complete, r);
}

/* NdkAccept on the passive side's own QP, without private data or DisconnectEvent. */
static NTSTATUS server_accept(struct server *srv, NDK_CONNECTOR *c)
{
    return accept_on(&srv->side, c, srv->side.qp, NULL, 0, NULL);
}

/* A passive side that passed: its connector closed, 0. */
static int passed_closing(NDK_CONNECTOR *c)
{
    c->Dispatch->NdkCloseConnector(c);
    return 0;
}

/* The end of a passive side that holds its connection until the active side is finished. */
static int server_close_when_done(struct server *srv, NDK_CONNECTOR *c, int timeout_ms)
{
    signal_wait(&srv->done, 1, NULL, 0, timeout_ms);
    return passed_closing(c);
}

/* The passive side's first connector, its NdkAccept (on the side's own QP, no private data,
 * `disconnected` as DisconnectEvent unless NULL) completing STATUS_SUCCESS; -1 when either fails. */
static int server_accept_first(struct server *srv, struct signal *disconnected, NDK_CONNECTOR **c)
{
    *c = server_next(srv, 1);
    if (!*c)
        return -1;
    EXPECT_ACCEPTED("NdkAccept", accept_on(&srv->side, *c, srv->side.qp, NULL, 0, disconnected));
    return 0;
}

/* The active side of a case: its side on CLIENT_IP and a first connector. */
static int client_open(struct side *s, int polled, NDK_CONNECTOR **c)
{
    if (side_open(s, CLIENT_IP, polled) < 0)
        return -1;
    *c = new_connector(s);
    return *c ? 0 : -1;
}

/* Closes the active side, and `c` first unless NULL (the case closed it already). */
static int client_close(struct side *s, NDK_CONNECTOR *c)
{
    if (c)
        c->Dispatch->NdkCloseConnector(c);
    side_close(s);
    return 0;
}

/* A case with both sides: the passive one listening on `port` and running `body` on its thread,
 * then the active one (polled) with a first connector. */
static int case_start(struct server *srv, uint16_t port, int (*body)(struct server *), void *arg, struct side *s,
                      NDK_CONNECTOR **c)
{
    if (server_start(srv, port, body, arg) < 0)
        return -1;
    return client_open(s, 1, c);
}

/* A case's passive side's opening: its first connector `c` (server_next), or -1 from the case. */
#define SERVER_FIRST                                                                                                   \
    NDK_CONNECTOR *c = server_next(srv, 1);                                                                            \
    if (!c)                                                                                                            \
        return -1

/* A case with the active side only: the side `s` and its connector `c` (client_open), or -1 from
 * the case. */
#define CLIENT_START                                                                                                   \
    struct side s;                                                                                                     \
    NDK_CONNECTOR *c;                                                                                                  \
    if (client_open(&s, 1, &c) < 0)                                                                                    \
        return -1

/* The sides a case declares: the passive side `srv`, the active side `s` and its connector `c`. */
#define CASE_SIDES                                                                                                     \
    struct server srv;                                                                                                 \
    struct side s;                                                                                                     \
    NDK_CONNECTOR *c

/* A case's opening: CASE_SIDES, started by case_start (the passive side on PORT running BODY with
 * ARG); the case returns -1 when that fails. */
#define CASE_START(port, body, arg)                                                                                    \
    CASE_SIDES;                                                                                                        \
    if (case_start(&srv, (port), (body), (arg), &s, &c) < 0)                                                           \
        return -1

/* Ends a case with both sides: waits for the passive side, then closes the active side (and `c`,
 * unless NULL: a case that closes its connector before the passive side ends does so itself).
 * Returns the passive side's result. */
static int case_end(struct server *srv, struct side *s, NDK_CONNECTOR *c)
{
    int rc = server_join(srv);
    client_close(s, c);
    return rc;
}

/* NdkConnect to the passive side's port and NdkCompleteConnect, both succeeding, then 300 ms for
 * the passive side's Accept to complete. */
static int connected(struct side *s, NDK_CONNECTOR *c, uint16_t port)
{
    EXPECT_DONE("NdkConnect", client_connect(s, c, SERVER_IP, port, NULL, 0, 15000), STATUS_SUCCESS);
    OK("NdkCompleteConnect", complete_connect(c));
    drive(s->adapter, 1, 300);
    return 0;
}

/* A receive posted (context `ctx`, at offset 0), then connected as connected() does. */
static int connected_receiving(struct side *s, NDK_CONNECTOR *c, uint16_t port, uintptr_t ctx)
{
    if (post_receive(s, ctx, 0) < 0)
        return -1;
    return connected(s, c, port);
}

/* A shared endpoint on CLIENT_IP, its port from the ND range. */
static int shared_endpoint_open(struct side *s, NDK_SHARED_ENDPOINT **e)
{
    struct sockaddr_in at = addr(CLIENT_IP, 0);
    OK("NdkCreateSharedEndpoint",
       s->adapter->Dispatch->NdkCreateSharedEndpoint(s->adapter, SA(at), sizeof at, NULL, NULL, e));
    return 0;
}

/* The active side (polled) on CLIENT_IP and a shared endpoint on it (shared_endpoint_open). */
static int client_endpoint_open(struct side *s, NDK_SHARED_ENDPOINT **e)
{
    if (side_open(s, CLIENT_IP, 1) < 0)
        return -1;
    return shared_endpoint_open(s, e);
}

/* A listener on the active side's adapter at `at`, only for its address: nobody connects to it. */
static int address_listener(struct side *s, struct signal *unused, struct sockaddr_in *at, const char *what,
                            NDK_LISTENER **l)
{
    NDK_ADAPTER *a = s->adapter;
    signal_init(unused);
    OK("NdkCreateListener", a->Dispatch->NdkCreateListener(a, on_connect_event, unused, NULL, NULL, l));
    OK(what, (*l)->Dispatch->NdkListen(*l, SA(*at), sizeof *at, on_complete, NULL));
    return 0;
}

/* A further QP on the side's CQ, for cases with more than one connection. */
static int another_qp(struct side *s, NDK_QP **qp)
{
    ENSURE(s->adapter->Dispatch->NdkCreateQp(s->adapter, s->cq, s->cq, 4, 4, 1, qp) == STATUS_SUCCESS,
           "NdkCreateQp failed");
    return 0;
}

static int check_ipv4(const char *what, struct sockaddr_in *sin, ULONG len, const char *ip, int nd_range)
{
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text);
    ENSURE(len == sizeof *sin && sin->sin_family == AF_INET && strcmp(text, ip) == 0,
           "%s: %s (length %u), want %s", what, text, len, ip);
    uint16_t port = ntohs(sin->sin_port);
    ENSURE(!nd_range || port >= 49152, "%s: port %u outside 49152-65535", what, port);
    printf("  %s: %s:%u\n", what, text, port);
    return 0;
}

/* The private data the peer sent on `c` (its REQ or REP, `msg`), which must be `want` bytes (RDS's
 * limit), into `pd`, and the read limits into *in and *out; `who` prefixes the calls' output. */
static int connection_data(NDK_CONNECTOR *c, const char *who, const char *msg, uint8_t *pd, ULONG want, ULONG *in,
                           ULONG *out)
{
    const NDK_CONNECTOR_DISPATCH *d = c->Dispatch;
    char what[64];
    ULONG len = 0;
    snprintf(what, sizeof what, "%sNdkGetConnectionData (size)", who);
    OK(what, d->NdkGetConnectionData(c, in, out, NULL, &len));
    ENSURE(len == want, "%s private data size %u, want %u (RDS)", msg, len, want);
    snprintf(what, sizeof what, "%sNdkGetConnectionData", who);
    OK(what, d->NdkGetConnectionData(c, in, out, pd, &len));
    return 0;
}

/* ---- connect-accept-data ---------------------------------------------------------------- */

static int cad_server(struct server *srv)
{
    struct side *s = &srv->side;
    SERVER_FIRST;
    const NDK_CONNECTOR_DISPATCH *d = c->Dispatch;
    ULONG in = 0, out = 0;
    uint8_t pd[56];
    if (connection_data(c, "server ", "REQ", pd, sizeof pd, &in, &out) < 0)
        return -1;
    ENSURE(pd[20] == 20 && pd[55] == 55, "REQ private data does not match what the client sent");
    printf("  server read limits: inbound %u outbound %u\n", in, out);
    uint64_t client_va;
    uint32_t client_token;
    memcpy(&client_va, pd, 8);
    memcpy(&client_token, pd + 8, 4);
    struct sockaddr_in peer;
    ULONG plen = sizeof peer;
    /* The request carries the peer's address: readable before NdkAccept (Microsoft's ndmpic
     * relies on it through IND2Connector::GetPeerAddress). */
    OK("server NdkGetPeerAddress before NdkAccept", d->NdkGetPeerAddress(c, SA(peer), &plen));
    if (check_ipv4("server's peer before NdkAccept", &peer, plen, CLIENT_IP, 1) < 0)
        return -1;
    if (post_receive(s, 100, 0) < 0)
        return -1;
    uint8_t rep[196];
    token_data(s, rep, sizeof rep);
    EXPECT_ACCEPTED("NdkAccept", accept_on(s, c, s->qp, rep, sizeof rep, &srv->disconnected));
    plen = sizeof peer;
    OK("server NdkGetPeerAddress", d->NdkGetPeerAddress(c, SA(peer), &plen));
    if (check_ipv4("server's peer", &peer, plen, CLIENT_IP, 1) < 0)
        return -1;
    int n = wait_result(s, 100, STATUS_SUCCESS, "server receive");
    if (n < 0)
        return -1;
    ENSURE(strcmp((char *)s->buf, "ping from the active side") == 0, "server received '%s'", (char *)s->buf);
    printf("  server received: %s\n", (char *)s->buf);
    /* RDMA write into the client's buffer at 1024, then a send telling it so. */
    const char *w = "written by the passive side";
    memcpy(s->buf + 1024, w, strlen(w) + 1);
    NDK_SGE e = sge(s, 1024, (ULONG)strlen(w) + 1);
    OK("NdkWrite", s->qp->Dispatch->NdkWrite(s->qp, (PVOID)101, &e, 1, client_va + 1024, client_token, 0));
    if (wait_result(s, 101, STATUS_SUCCESS, "write completion") < 0)
        return -1;
    if (send_text(s, 102, 2048, "pong from the passive side") < 0)
        return -1;
    ENSURE(signal_wait(&srv->disconnected, 1, NULL, 0, 10000), "no DisconnectEvent after the peer's NdkDisconnect");
    printf("  server DisconnectEvent called (the active side counts the calls)\n");
    EXPECT_INLINE("server NdkDisconnect after the peer's", disconnect_on(s, c), STATUS_SUCCESS);
    OK("server NdkCloseConnector", d->NdkCloseConnector(c));
    return 0;
}

static int case_connect_accept_data(void)
{
    CASE_START(7101, cad_server, NULL);
    const NDK_CONNECTOR_DISPATCH *d = c->Dispatch;
    if (post_receive(&s, 1, 0) < 0)
        return -1;
    uint8_t req[56];
    token_data(&s, req, sizeof req);
    EXPECT_DONE("NdkConnect", client_connect(&s, c, SERVER_IP, 7101, req, sizeof req, 15000), STATUS_SUCCESS);
    ULONG in = 99, out = 99;
    uint8_t rep[196];
    if (connection_data(c, "", "REP", rep, sizeof rep, &in, &out) < 0)
        return -1;
    ENSURE(rep[100] == 100 && rep[195] == 195, "REP private data does not match what the server sent");
    ENSURE(in <= 4 && out <= 4, "read limits %u/%u exceed what was asked", in, out);
    printf("  client read limits: inbound %u outbound %u\n", in, out);
    struct signal own_disconnect;
    signal_init(&own_disconnect);
    struct request r;
    request_init(&r);
    EXPECT_INLINE("NdkCompleteConnect",
           finish(d->NdkCompleteConnect(c, on_disconnect_event, &own_disconnect, on_complete, &r), &r, s.adapter, 1, 5000),
           STATUS_SUCCESS);
    if (send_text(&s, 2, 512, "ping from the active side") < 0)
        return -1;
    if (wait_result(&s, 1, STATUS_SUCCESS, "client receive") < 0)
        return -1;
    ENSURE(strcmp((char *)s.buf, "pong from the passive side") == 0, "client received '%s'", (char *)s.buf);
    printf("  client received: %s\n", (char *)s.buf);
    ENSURE(strcmp((char *)s.buf + 1024, "written by the passive side") == 0, "RDMA write not seen: '%s'",
           (char *)s.buf + 1024);
    printf("  client sees the RDMA write: %s\n", (char *)s.buf + 1024);
    struct sockaddr_in local;
    ULONG llen = sizeof local;
    OK("NdkGetLocalAddress", d->NdkGetLocalAddress(c, SA(local), &llen));
    if (check_ipv4("client local", &local, llen, CLIENT_IP, 1) < 0)
        return -1;
    EXPECT_DONE("NdkDisconnect", disconnect_on(&s, c), STATUS_SUCCESS);
    if (exactly_once(&srv.disconnected, s.adapter, 1, 1000, "passive DisconnectEvent") < 0)
        return -1;
    ENSURE(signal_count(&own_disconnect) == 0, "DisconnectEvent called after this side's own NdkDisconnect");
    OK("NdkCloseConnector", d->NdkCloseConnector(c));
    return case_end(&srv, &s, NULL);
}

/* ---- no-listener-refused ---------------------------------------------------------------- */

static int case_no_listener_refused(void)
{
    CLIENT_START;
    EXPECT_DONE("NdkConnect to a port nobody listens on", client_connect(&s, c, SERVER_IP, 7102, NULL, 0, 15000),
           STATUS_CONNECTION_REFUSED);
    return client_close(&s, c);
}

/* ---- listener-reject -------------------------------------------------------------------- */

static int reject_server(struct server *srv)
{
    SERVER_FIRST;
    uint8_t rej[149];
    for (size_t i = 0; i < sizeof rej; i++)
        rej[i] = (uint8_t)(0xA0 + i);
    EXPECT("NdkReject with 149 bytes", c->Dispatch->NdkReject(c, rej, 149), STATUS_INVALID_BUFFER_SIZE);
    EXPECT("NdkReject with 148 bytes", c->Dispatch->NdkReject(c, rej, 148), STATUS_SUCCESS);
    EXPECT_INLINE("NdkAccept after NdkReject", server_accept(srv, c), STATUS_CONNECTION_INVALID);
    return passed_closing(c);
}

static int case_listener_reject(void)
{
    CASE_START(7103, reject_server, NULL);
    EXPECT_DONE("NdkConnect to a rejecting listener", client_connect(&s, c, SERVER_IP, 7103, NULL, 0, 15000),
           STATUS_CONNECTION_REFUSED);
    ULONG len = 0;
    OK("NdkGetConnectionData (size) after the REJ", c->Dispatch->NdkGetConnectionData(c, NULL, NULL, NULL, &len));
    ENSURE(len == 148, "REJ private data size %u, want 148", len);
    uint8_t rej[148];
    len = sizeof rej;
    /* The read limits are not known after a REJ: only the private data is asked for. */
    NTSTATUS st = c->Dispatch->NdkGetConnectionData(c, NULL, NULL, rej, &len);
    EXPECT("NdkGetConnectionData after the REJ", st, STATUS_SUCCESS);
    ENSURE(rej[0] == 0xA0 && rej[147] == (uint8_t)(0xA0 + 147), "REJ private data does not match");
    ULONG in;
    len = sizeof rej;
    EXPECT("NdkGetConnectionData with a read limit after the REJ (none was negotiated)",
           c->Dispatch->NdkGetConnectionData(c, &in, NULL, rej, &len), STATUS_CONNECTION_INVALID);
    EXPECT("NdkCompleteConnect after a refusal", complete_connect(c), STATUS_CONNECTION_INVALID);
    c->Dispatch->NdkCloseConnector(c);
    return case_end(&srv, &s, NULL);
}

/* ---- private-data-limit ----------------------------------------------------------------- */

static int limit_server(struct server *srv)
{
    SERVER_FIRST;
    uint8_t pd[197] = {0};
    EXPECT_INLINE("NdkAccept with 197 bytes", accept_on(&srv->side, c, srv->side.qp, pd, 197, NULL),
           STATUS_INVALID_BUFFER_SIZE);
    EXPECT_ACCEPTED("NdkAccept with 196 bytes, same connector",
                    accept_on(&srv->side, c, srv->side.qp, pd, 196, NULL));
    return server_close_when_done(srv, c, 10000);
}

static int case_private_data_limit(void)
{
    CASE_START(7104, limit_server, NULL);
    uint8_t pd[57] = {0};
    EXPECT_INLINE("NdkConnect with 57 bytes (inline)", client_connect(&s, c, SERVER_IP, 7104, pd, 57, 1000),
           STATUS_INVALID_BUFFER_SIZE);
    EXPECT_DONE("NdkConnect with 56 bytes, same connector", client_connect(&s, c, SERVER_IP, 7104, pd, 56, 15000),
           STATUS_SUCCESS);
    OK("NdkCompleteConnect", complete_connect(c));
    signal_raise(&srv.done, NULL);
    drive(s.adapter, 1, 300);
    c->Dispatch->NdkCloseConnector(c);
    return case_end(&srv, &s, NULL);
}

/* ---- connect-state-errors --------------------------------------------------------------- */

static int accept_server(struct server *srv)
{
    NDK_CONNECTOR *c;
    if (server_accept_first(srv, NULL, &c) < 0)
        return -1;
    EXPECT_INLINE("NdkAccept again on the established connector", server_accept(srv, c), STATUS_CONNECTION_ACTIVE);
    return server_close_when_done(srv, c, 10000);
}

static int case_connect_state_errors(void)
{
    CASE_START(7105, accept_server, NULL);
    const NDK_CONNECTOR_DISPATCH *d = c->Dispatch;
    EXPECT("NdkCompleteConnect on a new connector", complete_connect(c), STATUS_CONNECTION_INVALID);
    EXPECT("NdkReject on a new connector", d->NdkReject(c, NULL, 0), STATUS_CONNECTION_INVALID);
    EXPECT_INLINE("NdkAccept on a new connector", accept_on(&s, c, s.qp, NULL, 0, NULL), STATUS_CONNECTION_INVALID);
    EXPECT_DONE("NdkConnect", client_connect(&s, c, SERVER_IP, 7105, NULL, 0, 15000), STATUS_SUCCESS);
    EXPECT_INLINE("NdkConnect again before NdkCompleteConnect", client_connect(&s, c, SERVER_IP, 7105, NULL, 0, 1000),
           STATUS_CONNECTION_ACTIVE);
    OK("NdkCompleteConnect", complete_connect(c));
    EXPECT_INLINE("NdkConnect on a connected connector", client_connect(&s, c, SERVER_IP, 7105, NULL, 0, 1000),
           STATUS_CONNECTION_ACTIVE);
    EXPECT("NdkCompleteConnect when connected", complete_connect(c), STATUS_CONNECTION_INVALID);
    EXPECT("NdkReject when connected", d->NdkReject(c, NULL, 0), STATUS_CONNECTION_INVALID);
    signal_raise(&srv.done, NULL);
    d->NdkCloseConnector(c);
    return case_end(&srv, &s, NULL);
}

/* ---- active-reject ---------------------------------------------------------------------- */

static int refused_accept_server(struct server *srv)
{
    SERVER_FIRST;
    /* Through the completion as a rule; inline when the active side's REJ came before the call
     * looked at its request again (as EXPECT_ACCEPTED allows; seen once over rxe_rs on one vCPU). */
    EXPECT_SETTLED("NdkAccept when the active side rejects", server_accept(srv, c), STATUS_CONNECTION_REFUSED);
    return passed_closing(c);
}

static int case_active_reject(void)
{
    CASE_START(7106, refused_accept_server, NULL);
    EXPECT_DONE("NdkConnect", client_connect(&s, c, SERVER_IP, 7106, NULL, 0, 15000), STATUS_SUCCESS);
    uint8_t pd[8] = "no thx";
    OK("NdkReject after the REP", c->Dispatch->NdkReject(c, pd, sizeof pd));
    EXPECT("NdkCompleteConnect after NdkReject", complete_connect(c), STATUS_CONNECTION_INVALID);
    return case_end(&srv, &s, c);
}

/* ---- disconnect-event ------------------------------------------------------------------- */

static int flush_server(struct server *srv)
{
    struct side *s = &srv->side;
    SERVER_FIRST;
    if (post_receive(s, 200, 0) < 0)
        return -1;
    EXPECT_ACCEPTED("NdkAccept", accept_on(s, c, s->qp, NULL, 0, &srv->disconnected));
    if (exactly_once(&srv->disconnected, NULL, 0, 1000, "passive DisconnectEvent") < 0)
        return -1;
    /* The peer's disconnect flushes the QP (as Windows providers do; Microsoft's
     * ndreceiveconnectorclosed): the posted receive completes STATUS_CANCELLED. */
    if (wait_result(s, 200, STATUS_CANCELLED, "passive receive after the peer's disconnect") < 0)
        return -1;
    EXPECT_INLINE("passive NdkDisconnect", disconnect_on(s, c), STATUS_SUCCESS);
    usleep(500 * 1000);
    ENSURE(signal_count(&srv->disconnected) == 1, "DisconnectEvent called again after this side's NdkDisconnect");
    return passed_closing(c);
}

static int case_disconnect_event(void)
{
    CASE_START(7107, flush_server, NULL);
    if (connected_receiving(&s, c, 7107, 3) < 0)
        return -1;
    EXPECT_DONE("NdkDisconnect", disconnect_on(&s, c), STATUS_SUCCESS);
    if (wait_result(&s, 3, STATUS_CANCELLED, "active receive after NdkDisconnect") < 0)
        return -1;
    EXPECT_INLINE("NdkConnect after NdkDisconnect", client_connect(&s, c, SERVER_IP, 7107, NULL, 0, 1000),
           STATUS_CONNECTION_INVALID);
    return case_end(&srv, &s, c);
}

/* ---- close-disconnects ------------------------------------------------------------------ */

static int wait_disconnect_server(struct server *srv)
{
    NDK_CONNECTOR *c;
    if (server_accept_first(srv, &srv->disconnected, &c) < 0)
        return -1;
    if (exactly_once(&srv->disconnected, NULL, 0, 1000, "passive DisconnectEvent after the active side's NdkCloseConnector") < 0)
        return -1;
    return passed_closing(c);
}

static int case_close_disconnects(void)
{
    CASE_START(7108, wait_disconnect_server, NULL);
    if (connected_receiving(&s, c, 7108, 4) < 0)
        return -1;
    OK("NdkCloseConnector while connected", c->Dispatch->NdkCloseConnector(c));
    if (wait_result(&s, 4, STATUS_CANCELLED, "receive after the connector's close") < 0)
        return -1;
    ENSURE(signal_wait(&srv.disconnected, 1, s.adapter, 1, 10000), "passive side saw no disconnect");
    return case_end(&srv, &s, NULL);
}

/* ---- cancel-connect --------------------------------------------------------------------- */

static int hold_server(struct server *srv)
{
    /* Takes the connector and never accepts: the client's NdkConnect stays pending. */
    SERVER_FIRST;
    return server_close_when_done(srv, c, 15000);
}

static int case_cancel_connect(void)
{
    CASE_START(7109, hold_server, NULL);
    struct request r;
    NTSTATUS st = connect_start(&s, c, SERVER_IP, 7109, &r);
    EXPECT("NdkConnect", st, STATUS_PENDING);
    EXPECT_DONE("NdkConnect without an accept, after 1 s", finish(st, &r, s.adapter, 1, 1000), STATUS_PENDING);
    OK("NdkCancelConnector", c->Dispatch->NdkCancelConnector(c));
    EXPECT_DONE("NdkConnect after cancel", finish(st, &r, s.adapter, 1, 5000), STATUS_CANCELLED);
    EXPECT("NdkCompleteConnect after cancel", complete_connect(c), STATUS_CONNECTION_INVALID);
    c->Dispatch->NdkCloseConnector(c);
    return case_end(&srv, &s, NULL);
}

/* ---- shared-endpoint -------------------------------------------------------------------- */

static int two_port_server(struct server *srv)
{
    /* The listener on srv->port; a second one on port + 1 on the same adapter. */
    struct side *s = &srv->side;
    NDK_LISTENER *second;
    OK("second NdkCreateListener",
       s->adapter->Dispatch->NdkCreateListener(s->adapter, on_connect_event, srv, NULL, NULL, &second));
    struct sockaddr_in l = addr(SERVER_IP, srv->port + 1);
    OK("second NdkListen", second->Dispatch->NdkListen(second, SA(l), sizeof l, on_complete, NULL));
    signal_raise((struct signal *)srv->arg, NULL);
    NDK_CONNECTOR *accepted[2];
    NDK_QP *qps[2];
    for (int i = 0; i < 2; i++) {
        accepted[i] = server_next(srv, i + 1);
        if (!accepted[i])
            return -1;
        if (another_qp(s, &qps[i]) < 0)
            return -1;
        EXPECT_ACCEPTED("NdkAccept", accept_on(s, accepted[i], qps[i], NULL, 0, NULL));
    }
    signal_wait(&srv->done, 1, NULL, 0, 10000);
    for (int i = 0; i < 2; i++) {
        accepted[i]->Dispatch->NdkCloseConnector(accepted[i]);
        qps[i]->Dispatch->NdkCloseQp(qps[i]);
    }
    second->Dispatch->NdkCloseListener(second);
    return 0;
}

static NTSTATUS shared_connect(struct side *s, NDK_CONNECTOR *c, NDK_QP *qp, NDK_SHARED_ENDPOINT *e, const char *ip,
                               uint16_t port, int timeout_ms)
{
    struct sockaddr_in dst = addr(ip, port);
    struct request r;
    request_init(&r);
    NTSTATUS st = c->Dispatch->NdkConnectWithSharedEndpoint(c, qp, e, SA(dst), sizeof dst, 0, 0, NULL, 0,
                                                            on_complete, &r);
    return finish(st, &r, s->adapter, s->polled, timeout_ms);
}

static int case_shared_endpoint(void)
{
    struct signal second_ready;
    signal_init(&second_ready);
    struct server srv;
    if (server_start(&srv, 7110, two_port_server, &second_ready) < 0)
        return -1;
    ENSURE(signal_wait(&second_ready, 1, NULL, 0, 10000), "second listener did not start");
    struct side s;
    NDK_SHARED_ENDPOINT *e;
    if (client_endpoint_open(&s, &e) < 0)
        return -1;
    struct sockaddr_in local;
    ULONG len = sizeof local;
    OK("NdkGetSharedEndpointLocalAddress", e->Dispatch->NdkGetSharedEndpointLocalAddress(e, SA(local), &len));
    if (check_ipv4("shared endpoint", &local, len, CLIENT_IP, 1) < 0)
        return -1;
    NDK_QP *qps[3];
    NDK_CONNECTOR *c[3];
    for (int i = 0; i < 3; i++) {
        if (another_qp(&s, &qps[i]) < 0)
            return -1;
        if (!(c[i] = new_connector(&s)))
            return -1;
    }
    /* The passive side accepts one at a time: each Accept completes at this side's RTU. */
    EXPECT_DONE("NdkConnectWithSharedEndpoint to :7110", shared_connect(&s, c[0], qps[0], e, SERVER_IP, 7110, 15000),
           STATUS_SUCCESS);
    OK("NdkCompleteConnect", complete_connect(c[0]));
    EXPECT_DONE("NdkConnectWithSharedEndpoint to :7111", shared_connect(&s, c[1], qps[1], e, SERVER_IP, 7111, 15000),
           STATUS_SUCCESS);
    OK("NdkCompleteConnect", complete_connect(c[1]));
    EXPECT_INLINE("NdkConnectWithSharedEndpoint to :7110 again (same 4-tuple, inline)",
           shared_connect(&s, c[2], qps[2], e, SERVER_IP, 7110, 1000), STATUS_ADDRESS_ALREADY_EXISTS);
    for (int i = 0; i < 2; i++) {
        struct sockaddr_in mine;
        ULONG mlen = sizeof mine;
        OK("NdkGetLocalAddress", c[i]->Dispatch->NdkGetLocalAddress(c[i], SA(mine), &mlen));
        ENSURE(mine.sin_port == local.sin_port, "connection %d is on port %u, not the endpoint's %u", i,
               ntohs(mine.sin_port), ntohs(local.sin_port));
    }
    printf("  both connections share %s:%u\n", CLIENT_IP, ntohs(local.sin_port));
    /* An exclusive user of the endpoint's port: refused. */
    NDK_CONNECTOR *x = new_connector(&s);
    if (!x)
        return -1;
    EXPECT_INLINE("NdkConnect from the shared endpoint's address", connect_from(&s, x, &local, sizeof local, 1000), STATUS_SHARING_VIOLATION);
    x->Dispatch->NdkCloseConnector(x);
    signal_raise(&srv.done, NULL);
    drive(s.adapter, 1, 300);
    for (int i = 0; i < 3; i++) {
        c[i]->Dispatch->NdkCloseConnector(c[i]);
        qps[i]->Dispatch->NdkCloseQp(qps[i]);
    }
    OK("NdkCloseSharedEndpoint", e->Dispatch->NdkCloseSharedEndpoint(e));
    return case_end(&srv, &s, NULL);
}

/* ---- shared-endpoint-failures ----------------------------------------------------------- */

static int case_shared_endpoint_failures(void)
{
    struct side s;
    NDK_SHARED_ENDPOINT *e;
    if (client_endpoint_open(&s, &e) < 0)
        return -1;
    static const struct {
        const char *what, *ip;
        uint16_t port;
        NTSTATUS want;
        enum via via;
        int timeout_ms;
    } tries[] = {
        {"NdkConnectWithSharedEndpoint to a port nobody listens on", SERVER_IP, 7128, STATUS_CONNECTION_REFUSED,
         VIA_COMPLETION, 15000},
        {"NdkConnectWithSharedEndpoint to 203.0.113.1 (no route)", "203.0.113.1", 7128, STATUS_NETWORK_UNREACHABLE,
         VIA_INLINE, 1000},
        {"NdkConnectWithSharedEndpoint to 198.18.0.77", "198.18.0.77", 7128, STATUS_HOST_UNREACHABLE, VIA_COMPLETION,
         30000},
    };
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        NDK_CONNECTOR *c = new_connector(&s);
        if (!c)
            return -1;
        EXPECT_VIA(tries[i].what, shared_connect(&s, c, s.qp, e, tries[i].ip, tries[i].port, tries[i].timeout_ms),
                   tries[i].want, tries[i].via);
        c->Dispatch->NdkCloseConnector(c);
    }
    e->Dispatch->NdkCloseSharedEndpoint(e);
    side_close(&s);
    return 0;
}

/* ---- cancel-accept ---------------------------------------------------------------------- */

static int cancel_accept_server(struct server *srv)
{
    struct side *s = &srv->side;
    SERVER_FIRST;
    struct request r;
    request_init(&r);
    NTSTATUS st = c->Dispatch->NdkAccept(c, s->qp, 0, 0, NULL, 0, NULL, NULL, on_complete, &r);
    EXPECT("NdkAccept", st, STATUS_PENDING);
    /* The active side never calls NdkCompleteConnect: the accept stays pending. */
    EXPECT_DONE("NdkAccept without the RTU, after 1 s", finish(st, &r, s->adapter, 0, 1000), STATUS_PENDING);
    OK("NdkCancelConnector", c->Dispatch->NdkCancelConnector(c));
    EXPECT_DONE("NdkAccept after cancel", finish(st, &r, s->adapter, 0, 5000), STATUS_CANCELLED);
    return passed_closing(c);
}

static int case_cancel_accept(void)
{
    CASE_START(7129, cancel_accept_server, NULL);
    EXPECT_DONE("NdkConnect", client_connect(&s, c, SERVER_IP, 7129, NULL, 0, 15000), STATUS_SUCCESS);
    return case_end(&srv, &s, c);
}

/* ---- address-errors --------------------------------------------------------------------- */

static int case_address_errors(void)
{
    NDK_ADAPTER *none = NULL;
    struct sockaddr_in test_net = addr("192.0.2.1", 0), loopback = addr("127.0.0.1", 0);
    EXPECT("NdkOpenAdapter 192.0.2.1", NdkOpenAdapter(SA(test_net), sizeof test_net, 0, &none), STATUS_INVALID_ADDRESS);
    EXPECT("NdkOpenAdapter 127.0.0.1", NdkOpenAdapter(SA(loopback), sizeof loopback, 0, &none), STATUS_INVALID_ADDRESS);
    EXPECT("NdkOpenAdapter with a NULL address", NdkOpenAdapter(NULL, 16, 0, &none), STATUS_INVALID_PARAMETER);
    struct sockaddr_in client = addr(CLIENT_IP, 0);
    EXPECT("NdkOpenAdapter with an 8-byte sockaddr_in", NdkOpenAdapter(SA(client), 8, 0, &none), STATUS_INVALID_ADDRESS);
    ENSURE(none == NULL, "a failed NdkOpenAdapter wrote a handle");

    CLIENT_START;
    NDK_ADAPTER *a = s.adapter;
    /* A failed bind leaves its connector unusable ("errors do not allow the connector to be
     * used to retry"): each address error gets a connector of its own, and the first one
     * shows the rule. Malformed arguments are refused before the connector is touched. */
    NDK_CONNECTOR *spent = new_connector(&s);
    if (!spent)
        return -1;
    EXPECT_INLINE("NdkConnect from 192.0.2.1", connect_from(&s, spent, &test_net, sizeof test_net, 1000),
           STATUS_INVALID_ADDRESS);
    EXPECT_INLINE("NdkConnect again on the connector whose bind failed", connect_from(&s, spent, &loopback, sizeof loopback, 1000),
           STATUS_CONNECTION_INVALID);
    spent->Dispatch->NdkCloseConnector(spent);
    if (!(spent = new_connector(&s)))
        return -1;
    EXPECT_INLINE("NdkConnect from 127.0.0.1", connect_from(&s, spent, &loopback, sizeof loopback, 1000),
           STATUS_INVALID_ADDRESS);
    spent->Dispatch->NdkCloseConnector(spent);
    struct sockaddr unix_family = {.sa_family = AF_UNIX};
    EXPECT_INLINE("NdkConnect from an AF_UNIX address", connect_from(&s, c, &unix_family, sizeof unix_family, 1000),
           STATUS_INVALID_ADDRESS);
    struct sockaddr_in src = addr(CLIENT_IP, 0);
    struct request r;
    request_init(&r);
    EXPECT("NdkConnect with a NULL destination",
           c->Dispatch->NdkConnect(c, s.qp, SA(src), sizeof src, NULL, 16, 0, 0, NULL, 0, on_complete, &r),
           STATUS_INVALID_PARAMETER);
    EXPECT("NdkConnect without RequestCompletion",
           c->Dispatch->NdkConnect(c, s.qp, SA(src), sizeof src, SA(src), sizeof src, 0, 0, NULL, 0, NULL, NULL),
           STATUS_INVALID_PARAMETER);

    /* A listener holds CLIENT:7120 exclusively. */
    NDK_LISTENER *l;
    struct signal unused;
    struct sockaddr_in held = addr(CLIENT_IP, 7120);
    if (address_listener(&s, &unused, &held, "NdkListen on :7120", &l) < 0)
        return -1;
    if (!(spent = new_connector(&s)))
        return -1;
    EXPECT_INLINE("NdkConnect from the listener's address", connect_from(&s, spent, &held, sizeof held, 1000),
           STATUS_SHARING_VIOLATION);
    spent->Dispatch->NdkCloseConnector(spent);
    NDK_SHARED_ENDPOINT *e = NULL;
    EXPECT("NdkCreateSharedEndpoint on the listener's address",
           a->Dispatch->NdkCreateSharedEndpoint(a, SA(held), sizeof held, NULL, NULL, &e), STATUS_SHARING_VIOLATION);
    EXPECT("NdkCreateSharedEndpoint on 192.0.2.1",
           a->Dispatch->NdkCreateSharedEndpoint(a, SA(test_net), sizeof test_net, NULL, NULL, &e),
           STATUS_INVALID_ADDRESS);
    NDK_LISTENER *l2;
    OK("second NdkCreateListener", a->Dispatch->NdkCreateListener(a, on_connect_event, &unused, NULL, NULL, &l2));
    EXPECT("second NdkListen on :7120", l2->Dispatch->NdkListen(l2, SA(held), sizeof held, on_complete, NULL),
           STATUS_SHARING_VIOLATION);
    l2->Dispatch->NdkCloseListener(l2);
    /* The connector that only saw malformed arguments is untouched: a real attempt to a port
     * nobody listens on. */
    EXPECT_DONE("NdkConnect from CLIENT:0 after the argument errors", connect_from(&s, c, &src, sizeof src, 15000),
           STATUS_CONNECTION_REFUSED);
    l->Dispatch->NdkCloseListener(l);
    return client_close(&s, c);
}

/* ---- host-unreachable / network-unreachable --------------------------------------------- */

static int case_host_unreachable(void)
{
    CLIENT_START;
    struct request r;
    NTSTATUS st = connect_start(&s, c, "198.18.0.77", 7121, &r);
    EXPECT("NdkConnect to 198.18.0.77", st, STATUS_PENDING);
    EXPECT_DONE("NdkConnect to 198.18.0.77 completes", finish(st, &r, s.adapter, 1, 30000), STATUS_HOST_UNREACHABLE);
    return client_close(&s, c);
}

static int case_network_unreachable(void)
{
    CLIENT_START;
    EXPECT_INLINE("NdkConnect to 203.0.113.1 (no route, inline)", client_connect(&s, c, "203.0.113.1", 7122, NULL, 0, 1000),
           STATUS_NETWORK_UNREACHABLE);
    return client_close(&s, c);
}

/* ---- getters-short-buffers -------------------------------------------------------------- */

static int untouched(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0x5A)
            return 0;
    return 1;
}

static int case_getters_short_buffers(void)
{
    CASE_START(7123, accept_server, NULL);
    NDK_ADAPTER *a = s.adapter;
    const NDK_CONNECTOR_DISPATCH *d = c->Dispatch;
    uint8_t buf[256];
    ULONG len;

    len = sizeof buf;
    EXPECT("NdkGetConnectionData before any peer data", d->NdkGetConnectionData(c, NULL, NULL, buf, &len),
           STATUS_CONNECTION_INVALID);
    len = sizeof buf;
    EXPECT("NdkGetPeerAddress on a new connector", d->NdkGetPeerAddress(c, (PSOCKADDR)buf, &len),
           STATUS_CONNECTION_INVALID);
    len = sizeof buf;
    EXPECT("NdkGetLocalAddress on a new connector", d->NdkGetLocalAddress(c, (PSOCKADDR)buf, &len),
           STATUS_CONNECTION_INVALID);

    EXPECT_DONE("NdkConnect", client_connect(&s, c, SERVER_IP, 7123, NULL, 0, 15000), STATUS_SUCCESS);
    memset(buf, 0x5A, sizeof buf);
    len = 10;
    EXPECT("NdkGetConnectionData with 10 bytes", d->NdkGetConnectionData(c, NULL, NULL, buf, &len),
           STATUS_BUFFER_TOO_SMALL);
    ENSURE(len == 196 && untouched(buf, sizeof buf), "short NdkGetConnectionData: length %u, buffer %s", len,
           untouched(buf, sizeof buf) ? "untouched" : "written");
    len = 0;
    EXPECT("NdkGetConnectionData NULL/0 (RDS)", d->NdkGetConnectionData(c, NULL, NULL, NULL, &len), STATUS_SUCCESS);
    ENSURE(len == 196, "RDS %u, want 196", len);
    EXPECT("NdkGetConnectionData with a NULL length", d->NdkGetConnectionData(c, NULL, NULL, buf, NULL),
           STATUS_INVALID_PARAMETER);
    len = 5;
    EXPECT("NdkGetConnectionData NULL buffer, length 5", d->NdkGetConnectionData(c, NULL, NULL, NULL, &len),
           STATUS_INVALID_PARAMETER);
    OK("NdkCompleteConnect", complete_connect(c));

    len = 4;
    EXPECT("NdkGetLocalAddress with 4 bytes", d->NdkGetLocalAddress(c, (PSOCKADDR)buf, &len), STATUS_BUFFER_TOO_SMALL);
    ENSURE(len == sizeof(struct sockaddr_in) && untouched(buf, sizeof buf), "short NdkGetLocalAddress: length %u", len);
    len = 0;
    EXPECT("NdkGetLocalAddress NULL/0", d->NdkGetLocalAddress(c, NULL, &len), STATUS_BUFFER_TOO_SMALL);
    ENSURE(len == sizeof(struct sockaddr_in), "NdkGetLocalAddress NULL/0: length %u", len);
    EXPECT("NdkGetLocalAddress with a NULL length", d->NdkGetLocalAddress(c, (PSOCKADDR)buf, NULL),
           STATUS_INVALID_PARAMETER);
    len = 15;
    EXPECT("NdkGetPeerAddress with 15 bytes", d->NdkGetPeerAddress(c, (PSOCKADDR)buf, &len), STATUS_BUFFER_TOO_SMALL);
    ENSURE(len == sizeof(struct sockaddr_in) && untouched(buf, sizeof buf), "short NdkGetPeerAddress: length %u", len);
    struct sockaddr_in6 big;
    len = sizeof big;
    OK("NdkGetPeerAddress into a sockaddr_in6", d->NdkGetPeerAddress(c, (PSOCKADDR)&big, &len));
    if (check_ipv4("peer", (struct sockaddr_in *)&big, len, SERVER_IP, 0) < 0)
        return -1;

    NDK_LISTENER *l;
    struct signal unused;
    struct sockaddr_in any = addr(CLIENT_IP, 0);
    if (address_listener(&s, &unused, &any, "NdkListen on port 0", &l) < 0)
        return -1;
    len = 8;
    EXPECT("NdkGetListenerLocalAddress with 8 bytes", l->Dispatch->NdkGetListenerLocalAddress(l, (PSOCKADDR)buf, &len),
           STATUS_BUFFER_TOO_SMALL);
    ENSURE(len == sizeof(struct sockaddr_in) && untouched(buf, sizeof buf), "short listener address: length %u", len);
    struct sockaddr_in la;
    len = sizeof la;
    OK("NdkGetListenerLocalAddress", l->Dispatch->NdkGetListenerLocalAddress(l, SA(la), &len));
    if (check_ipv4("listener", &la, len, CLIENT_IP, 1) < 0)
        return -1;

    NDK_SHARED_ENDPOINT *e;
    if (shared_endpoint_open(&s, &e) < 0)
        return -1;
    len = 2;
    EXPECT("NdkGetSharedEndpointLocalAddress with 2 bytes",
           e->Dispatch->NdkGetSharedEndpointLocalAddress(e, (PSOCKADDR)buf, &len), STATUS_BUFFER_TOO_SMALL);
    ENSURE(len == sizeof(struct sockaddr_in) && untouched(buf, sizeof buf), "short endpoint address: length %u", len);

    NDK_ADAPTER_INFO info;
    len = 8;
    EXPECT("NdkQueryAdapterInfo with 8 bytes", a->Dispatch->NdkQueryAdapterInfo(a, &info, &len), STATUS_BUFFER_TOO_SMALL);
    ENSURE(len == sizeof info, "NdkQueryAdapterInfo: length %u, want %zu", len, sizeof info);
    OK("NdkQueryAdapterInfo", a->Dispatch->NdkQueryAdapterInfo(a, &info, &len));
    ENSURE(info.MaxCallerData == 56 && info.MaxCalleeData == 196, "MaxCallerData %u MaxCalleeData %u",
           info.MaxCallerData, info.MaxCalleeData);
    printf("  adapter: vendor 0x%x, read limits %u/%u, caller/callee data %u/%u\n", info.VendorId,
           info.MaxInboundReadLimit, info.MaxOutboundReadLimit, info.MaxCallerData, info.MaxCalleeData);

    EXPECT("NdkReject on a NULL connector", d->NdkReject(NULL, NULL, 0), STATUS_INVALID_HANDLE);
    EXPECT("NdkGetLocalAddress on a listener handle", d->NdkGetLocalAddress((NDK_CONNECTOR *)l, (PSOCKADDR)buf, &len),
           STATUS_INVALID_HANDLE);
    EXPECT("NdkCloseConnector on a shared endpoint handle", d->NdkCloseConnector((NDK_CONNECTOR *)e),
           STATUS_INVALID_HANDLE);

    e->Dispatch->NdkCloseSharedEndpoint(e);
    l->Dispatch->NdkCloseListener(l);
    signal_raise(&srv.done, NULL);
    d->NdkCloseConnector(c);
    return case_end(&srv, &s, NULL);
}

/* ---- ports-exhausted (the suite narrows ND_SHIM_PORT_RANGE) ----------------------------- */

static int case_ports_exhausted(void)
{
    const char *range = getenv("ND_SHIM_PORT_RANGE");
    ENSURE(range, "ND_SHIM_PORT_RANGE is not set");
    struct side s;
    if (side_open(&s, CLIENT_IP, 1) < 0)
        return -1;
    NDK_ADAPTER *a = s.adapter;
    NDK_SHARED_ENDPOINT *held[1000];
    int n = 0;
    struct sockaddr_in any = addr(CLIENT_IP, 0);
    NTSTATUS st;
    while (n < 1000 && (st = a->Dispatch->NdkCreateSharedEndpoint(a, SA(any), sizeof any, NULL, NULL, &held[n])) ==
                           STATUS_SUCCESS)
        n++;
    printf("  %d shared endpoints in %s\n", n, range);
    ENSURE(n < 1000, "the range did not run out");
    EXPECT("NdkCreateSharedEndpoint with the range used up", st, STATUS_TOO_MANY_ADDRESSES);
    NDK_CONNECTOR *c = new_connector(&s);
    if (!c)
        return -1;
    EXPECT_INLINE("NdkConnect from port 0 with the range used up", connect_from(&s, c, &any, sizeof any, 1000),
           STATUS_TOO_MANY_ADDRESSES);
    /* That connector is spent (no reuse after a failed bind); a new one gets the freed port. */
    c->Dispatch->NdkCloseConnector(c);
    if (!(c = new_connector(&s)))
        return -1;
    n--;
    held[n]->Dispatch->NdkCloseSharedEndpoint(held[n]);
    EXPECT_DONE("NdkConnect from port 0 after one endpoint closed", connect_from(&s, c, &any, sizeof any, 15000),
           STATUS_CONNECTION_REFUSED);
    c->Dispatch->NdkCloseConnector(c);
    while (n > 0) {
        n--;
        held[n]->Dispatch->NdkCloseSharedEndpoint(held[n]);
    }
    side_close(&s);
    return 0;
}

/* ---- connect-events-paused -------------------------------------------------------------- */

/* The listener pauses its connect events; the active side's NdkConnect goes out and, a second
 * later (its REQ long delivered over the veth pair), says so; a second after that the passive
 * side checks that no event came and resumes. The event must then come at once: within 2 s,
 * shorter than any REQ retransmission (over 4 s here, and a retransmitted REQ is a duplicate
 * the CM answers without a new event), so the request the event reports is the one that
 * arrived during the pause. */
struct paused {
    struct signal paused, requested;
};

static int paused_server(struct server *srv)
{
    struct paused *p = srv->arg;
    OK("NdkControlConnectEvents(pause)", srv->listener->Dispatch->NdkControlConnectEvents(srv->listener, 1));
    signal_raise(&p->paused, NULL);
    ENSURE(signal_wait(&p->requested, 1, NULL, 0, 15000), "the active side never sent its request");
    sleep(1);
    ENSURE(signal_count(&srv->incoming) == 0, "a connect event arrived while paused");
    printf("  no connect event while paused, 1 s after the request went out\n");
    long long resumed = now_ms();
    OK("NdkControlConnectEvents(resume)", srv->listener->Dispatch->NdkControlConnectEvents(srv->listener, 0));
    SERVER_FIRST;
    long long after = now_ms() - resumed;
    ENSURE(after < 2000, "the connect event came %lld ms after the resume: not the request held during the pause",
           after);
    printf("  connect event %lld ms after the resume\n", after);
    EXPECT_ACCEPTED("NdkAccept", server_accept(srv, c));
    return server_close_when_done(srv, c, 10000);
}

static int case_connect_events_paused(void)
{
    struct paused p;
    signal_init(&p.paused);
    signal_init(&p.requested);
    struct server srv;
    if (server_start(&srv, 7124, paused_server, &p) < 0)
        return -1;
    ENSURE(signal_wait(&p.paused, 1, NULL, 0, 10000), "server did not pause");
    struct side s;
    NDK_CONNECTOR *c;
    if (client_open(&s, 0, &c) < 0)
        return -1;
    struct request r;
    NTSTATUS st = connect_start(&s, c, SERVER_IP, 7124, &r);
    EXPECT("NdkConnect (thread-mode adapter)", st, STATUS_PENDING);
    usleep(1000 * 1000);
    ENSURE(signal_count(&srv.incoming) == 0, "a connect event arrived while paused");
    signal_raise(&p.requested, NULL);
    EXPECT_DONE("NdkConnect, accepted after the resume", finish(st, &r, s.adapter, 0, 15000), STATUS_SUCCESS);
    OK("NdkCompleteConnect", complete_connect(c));
    signal_raise(&srv.done, NULL);
    c->Dispatch->NdkCloseConnector(c);
    return case_end(&srv, &s, NULL);
}

/* ---- accept-aborted / reject-aborted ---------------------------------------------------- */

/* The server takes the request, waits until the active side has cancelled its NdkConnect, then
 * answers with NdkAccept (arg NULL) or NdkReject (arg non-NULL). */
struct abandon {
    struct signal taken, cancelled;
};

static int abandoned_server(struct server *srv)
{
    struct abandon *ab = srv->arg;
    SERVER_FIRST;
    signal_raise(&ab->taken, NULL);
    ENSURE(signal_wait(&ab->cancelled, 1, NULL, 0, 20000), "the active side never cancelled");
    usleep(500 * 1000);
    if (srv->port == 7125) {
        EXPECT_INLINE("NdkAccept after the active side abandoned", server_accept(srv, c), STATUS_CONNECTION_ABORTED);
    } else {
        EXPECT("NdkReject after the active side abandoned", c->Dispatch->NdkReject(c, NULL, 0),
               STATUS_CONNECTION_ABORTED);
    }
    return passed_closing(c);
}

static int abandon_case(uint16_t port)
{
    struct abandon ab;
    signal_init(&ab.taken);
    signal_init(&ab.cancelled);
    CASE_START(port, abandoned_server, &ab);
    struct request r;
    NTSTATUS st = connect_start(&s, c, SERVER_IP, port, &r);
    EXPECT("NdkConnect", st, STATUS_PENDING);
    ENSURE(signal_wait(&ab.taken, 1, s.adapter, 1, 15000), "the passive side got no connect event");
    OK("NdkCancelConnector", c->Dispatch->NdkCancelConnector(c));
    EXPECT_DONE("NdkConnect after cancel", finish(st, &r, s.adapter, 1, 5000), STATUS_CANCELLED);
    c->Dispatch->NdkCloseConnector(c);
    signal_raise(&ab.cancelled, NULL);
    return case_end(&srv, &s, NULL);
}

static int case_accept_aborted(void)
{
    return abandon_case(7125);
}

static int case_reject_aborted(void)
{
    return abandon_case(7126);
}

/* ---- complete-connect-aborted ------------------------------------------------------------- */

/* The passive side abandons after its REP: it accepts, and once the active side has the REP it
 * closes the connector (the kernel CM answers for the closed id with a REJ). The active side's
 * NdkCompleteConnect then reports STATUS_CONNECTION_ABORTED. */
struct rep_then_close {
    struct signal rep_seen, closed;
};

static int tc(const char *args)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "tc qdisc %s", args);
    int rc = system(cmd);
    printf("  %s: %s\n", cmd, rc == 0 ? "done" : "failed");
    return rc == 0 ? 0 : -1;
}

/* The passive side of a struct rep_then_close case: NdkAccept (read limits `read_limit`) left
 * pending; once the active side has the REP, `netem` applied to veth0 unless NULL, then the
 * connector closed before the RTU: the pending NdkAccept completes STATUS_CANCELLED. */
static int abandon_after_rep(struct server *srv, ULONG read_limit, const char *netem)
{
    struct rep_then_close *rc = srv->arg;
    SERVER_FIRST;
    struct request r;
    request_init(&r);
    NTSTATUS st = c->Dispatch->NdkAccept(c, srv->side.qp, read_limit, read_limit, NULL, 0, NULL, NULL, on_complete, &r);
    EXPECT("NdkAccept", st, STATUS_PENDING);
    ENSURE(signal_wait(&rc->rep_seen, 1, NULL, 0, 15000), "the active side never got the REP");
    if (netem)
        ENSURE(tc(netem) == 0, "cannot delay veth0 (tc netem)");
    c->Dispatch->NdkCloseConnector(c);
    EXPECT_DONE("the pending NdkAccept, closed before the RTU", finish(st, &r, srv->side.adapter, 0, 5000),
           STATUS_CANCELLED);
    signal_raise(&rc->closed, NULL);
    return 0;
}

/* A struct rep_then_close case up to the passive side's close: both sides started (the passive
 * one running `body` on `port`), NdkConnect completing STATUS_SUCCESS, the REP reported seen. */
static int abandoned_case_start(struct rep_then_close *rc, struct server *srv, uint16_t port,
                                int (*body)(struct server *), struct side *s, NDK_CONNECTOR **c)
{
    signal_init(&rc->rep_seen);
    signal_init(&rc->closed);
    if (case_start(srv, port, body, rc, s, c) < 0)
        return -1;
    EXPECT_DONE("NdkConnect", client_connect(s, *c, SERVER_IP, port, NULL, 0, 15000), STATUS_SUCCESS);
    signal_raise(&rc->rep_seen, NULL);
    ENSURE(signal_wait(&rc->closed, 1, s->adapter, s->polled, 15000), "the passive side never closed");
    return 0;
}

/* A rep_then_close case's opening: the struct `rc` and the sides (CASE_SIDES) declared and started
 * by abandoned_case_start (the passive side on PORT running BODY), or -1 from the case. */
#define ABANDONED_CASE_START(rc, port, body)                                                                           \
    struct rep_then_close rc;                                                                                          \
    CASE_SIDES;                                                                                                        \
    if (abandoned_case_start(&rc, &srv, (port), (body), &s, &c) < 0)                                                   \
        return -1

static int rep_then_close_server(struct server *srv)
{
    return abandon_after_rep(srv, 4, NULL);
}

static int case_complete_connect_aborted(void)
{
    ABANDONED_CASE_START(rc, 7130, rep_then_close_server);
    /* Let the REJ arrive and its event run. */
    drive(s.adapter, s.polled, 500);
    EXPECT("NdkCompleteConnect after the passive side abandoned", complete_connect(c), STATUS_CONNECTION_ABORTED);
    c->Dispatch->NdkCloseConnector(c);
    return case_end(&srv, &s, NULL);
}

/* ---- passive-disconnects-first ---------------------------------------------------------- */

/* The passive side disconnects first: the DisconnectEvent the active side gave
 * NdkCompleteConnect is called exactly once (counted after a quiet second), and the QP is flushed;
 * the active NdkDisconnect then completes inline (the DREQ already came) and sends the DREP
 * that completes the passive side's pending NdkDisconnect. */
struct disconnect_first {
    struct signal completed;
};

static int disconnect_first_server(struct server *srv)
{
    struct disconnect_first *df = srv->arg;
    struct side *s = &srv->side;
    NDK_CONNECTOR *c;
    if (server_accept_first(srv, &srv->disconnected, &c) < 0)
        return -1;
    ENSURE(signal_wait(&df->completed, 1, NULL, 0, 15000), "the active side never completed its connect");
    EXPECT_DONE("passive NdkDisconnect (first; completes at the active side's DREP)", disconnect_on(s, c),
                STATUS_SUCCESS);
    usleep(500 * 1000);
    ENSURE(signal_count(&srv->disconnected) == 0, "passive DisconnectEvent called after its own NdkDisconnect");
    return passed_closing(c);
}

static int case_passive_disconnects_first(void)
{
    struct disconnect_first df;
    signal_init(&df.completed);
    CASE_START(7131, disconnect_first_server, &df);
    if (post_receive(&s, 6, 0) < 0)
        return -1;
    EXPECT_DONE("NdkConnect", client_connect(&s, c, SERVER_IP, 7131, NULL, 0, 15000), STATUS_SUCCESS);
    struct signal own;
    signal_init(&own);
    struct request r;
    request_init(&r);
    EXPECT_INLINE("NdkCompleteConnect with a DisconnectEvent",
                  finish(c->Dispatch->NdkCompleteConnect(c, on_disconnect_event, &own, on_complete, &r), &r, s.adapter,
                         1, 1000),
                  STATUS_SUCCESS);
    signal_raise(&df.completed, NULL);
    if (exactly_once(&own, s.adapter, 1, 1000, "active DisconnectEvent (the passive side disconnected)") < 0)
        return -1;
    /* The peer's disconnect flushed the QP: the receive completes STATUS_CANCELLED. */
    if (wait_result(&s, 6, STATUS_CANCELLED, "active receive after the peer's disconnect") < 0)
        return -1;
    EXPECT_INLINE("active NdkDisconnect after the peer's", disconnect_on(&s, c), STATUS_SUCCESS);
    drive(s.adapter, 1, 500);
    ENSURE(signal_count(&own) == 1, "active DisconnectEvent called %d times", signal_count(&own));
    return case_end(&srv, &s, c);
}

/* ---- rej-after-complete-connect (tc netem on veth0; the suite removes it after the case) -- */

/* The passive side abandons after its REP, and its REJ is held back 3 s (netem delay on
 * veth0, the passive side's egress) so that it arrives after the active side's
 * NdkCompleteConnect succeeded. The REJ then ends an established connection: reported through
 * the DisconnectEvent, exactly once, never dropped; NdkDisconnect completes inline. */
static int late_rej_server(struct server *srv)
{
    return abandon_after_rep(srv, 0, "add dev veth0 root netem delay 3000ms");
}

static int case_rej_after_complete_connect(void)
{
    ABANDONED_CASE_START(lr, 7132, late_rej_server);
    long long closed = now_ms();
    struct signal own;
    signal_init(&own);
    struct request r;
    request_init(&r);
    EXPECT_INLINE("NdkCompleteConnect while the passive side's REJ is on its way",
                  finish(c->Dispatch->NdkCompleteConnect(c, on_disconnect_event, &own, on_complete, &r), &r, s.adapter,
                         1, 1000),
                  STATUS_SUCCESS);
    ENSURE(signal_count(&own) == 0 && now_ms() - closed < 2500,
           "the REJ was not held back: NdkCompleteConnect came %lld ms after the close", now_ms() - closed);
    if (exactly_once(&own, s.adapter, 1, 1000, "active DisconnectEvent (the late REJ)") < 0)
        return -1;
    printf("  the REJ ended the connection %lld ms after the passive side's close\n", now_ms() - closed - 1000);
    EXPECT_INLINE("NdkDisconnect after the REJ", disconnect_on(&s, c), STATUS_SUCCESS);
    if (tc("del dev veth0 root") < 0)
        return fail("cannot remove the delay from veth0");
    return case_end(&srv, &s, c);
}

/* ---- rej-during-disconnect (tc netem on veth0, as above) --------------------------------- */

/* As rej-after-complete-connect, but the active side calls NdkDisconnect at once after
 * NdkCompleteConnect: the late REJ crosses its DREQ, and the IB CM then cancels the DREQ, so
 * neither a DREP nor a DREQ timeout will come. The pending NdkDisconnect must complete on the
 * REJ (STATUS_SUCCESS, about 3 s after the close), not stay pending. */
static int case_rej_during_disconnect(void)
{
    ABANDONED_CASE_START(lr, 7134, late_rej_server);
    long long closed = now_ms();
    OK("NdkCompleteConnect while the passive side's REJ is on its way", complete_connect(c));
    struct request r;
    request_init(&r);
    NTSTATUS st = c->Dispatch->NdkDisconnect(c, on_complete, &r);
    long long sent = now_ms() - closed;
    EXPECT("NdkDisconnect before the REJ arrives", st, STATUS_PENDING);
    ENSURE(sent < 2500, "the REJ was not held back: NdkDisconnect came %lld ms after the close", sent);
    EXPECT_DONE("NdkDisconnect, the REJ crossing its DREQ", finish(st, &r, s.adapter, 1, 15000), STATUS_SUCCESS);
    printf("  completed %lld ms after the passive side's close\n", now_ms() - closed);
    if (tc("del dev veth0 root") < 0)
        return fail("cannot remove the delay from veth0");
    return case_end(&srv, &s, c);
}

/* ---- disconnect-peer-vanished (tc netem on veth0; the suite removes it after the case) ---- */

/* NDK_VANISH_TOGETHER=DIR:COUNT: COUNT processes (one per provider) run this case at once, each on
 * its own port (NDK_VANISH_PORT), so that their DREQ timeouts (about 100 s) are waited out once.
 * The loss on veth0 would cut off a connection still being made, so each waits at a barrier
 * (files in DIR) until all are connected before the loss, and again until all are done before
 * its removal; the loss is then put on with `replace` and taken off by whichever comes first. */
static int vanish_barrier(const char *step)
{
    const char *together = getenv("NDK_VANISH_TOGETHER");
    if (!together)
        return 0;
    char dir[200], path[300];
    int count = 0;
    if (sscanf(together, "%199[^:]:%d", dir, &count) != 2 || count < 1)
        return fail("NDK_VANISH_TOGETHER is DIR:COUNT, not '%s'", together);
    snprintf(path, sizeof path, "%s/%s.%d", dir, step, (int)getpid());
    FILE *mark = fopen(path, "w");
    ENSURE(mark != NULL, "cannot write the barrier's file");
    fclose(mark);
    size_t prefix = strlen(step);
    for (long long started = now_ms(); now_ms() - started < 120000; usleep(50000)) {
        DIR *d = opendir(dir);
        ENSURE(d != NULL, "cannot read the barrier's directory");
        int reached = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            reached += strncmp(e->d_name, step, prefix) == 0 && e->d_name[prefix] == '.';
        closedir(d);
        if (reached >= count)
            return 0;
    }
    return fail("%s: the other processes did not reach the barrier in 120 s", step);
}

/* After the connection is up, every frame the passive side sends is dropped (netem loss 100%
 * on veth0): the peer has vanished as far as this side can tell. NdkDisconnect returns
 * STATUS_PENDING and completes, with STATUS_SUCCESS, when the IB CM gives up on its DREQ
 * (rdma_cm reports the DREQ timeout as DISCONNECTED): never pending forever. */
static int vanishing_server(struct server *srv)
{
    NDK_CONNECTOR *c;
    if (server_accept_first(srv, NULL, &c) < 0)
        return -1;
    return server_close_when_done(srv, c, 300000);
}

static int case_disconnect_peer_vanished(void)
{
    const char *port_text = getenv("NDK_VANISH_PORT");
    const uint16_t port = port_text ? (uint16_t)atoi(port_text) : 7133;
    const int together = getenv("NDK_VANISH_TOGETHER") != NULL;
    CASE_START(port, vanishing_server, NULL);
    if (connected(&s, c, port) < 0)
        return -1;
    if (vanish_barrier("connected") < 0)
        return -1;
    ENSURE(tc(together ? "replace dev veth0 root netem loss 100%" : "add dev veth0 root netem loss 100%") == 0,
           "cannot drop veth0's frames (tc netem)");
    long long started = now_ms();
    struct request r;
    request_init(&r);
    NTSTATUS st = c->Dispatch->NdkDisconnect(c, on_complete, &r);
    EXPECT("NdkDisconnect with the peer gone", st, STATUS_PENDING);
    st = finish(st, &r, s.adapter, 1, 250000);
    printf("  completed after %lld s\n", (now_ms() - started) / 1000);
    EXPECT_DONE("NdkDisconnect with the peer gone", st, STATUS_SUCCESS);
    if (vanish_barrier("done") < 0)
        return -1;
    if (tc("del dev veth0 root") < 0 && !together)
        return fail("cannot remove the loss from veth0");
    return case_end(&srv, &s, c);
}

/* ---- io-timeout (the suite gives 198.18.0.51 a neighbour entry nobody answers for) ------ */

static int case_io_timeout(void)
{
    CLIENT_START;
    long long started = now_ms();
    struct request r;
    NTSTATUS st = connect_start(&s, c, "198.18.0.51", 7127, &r);
    EXPECT("NdkConnect to 198.18.0.51", st, STATUS_PENDING);
    st = finish(st, &r, s.adapter, 1, 170000);
    printf("  completed after %lld s\n", (now_ms() - started) / 1000);
    EXPECT_DONE("NdkConnect to 198.18.0.51 (REQ unanswered)", st, STATUS_IO_TIMEOUT);
    return client_close(&s, c);
}

/* ---- main ------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int (*run)(void);
} cases[] = {
    {"connect-accept-data", case_connect_accept_data},
    {"no-listener-refused", case_no_listener_refused},
    {"listener-reject", case_listener_reject},
    {"private-data-limit", case_private_data_limit},
    {"connect-state-errors", case_connect_state_errors},
    {"active-reject", case_active_reject},
    {"disconnect-event", case_disconnect_event},
    {"close-disconnects", case_close_disconnects},
    {"cancel-connect", case_cancel_connect},
    {"shared-endpoint", case_shared_endpoint},
    {"shared-endpoint-failures", case_shared_endpoint_failures},
    {"cancel-accept", case_cancel_accept},
    {"address-errors", case_address_errors},
    {"host-unreachable", case_host_unreachable},
    {"network-unreachable", case_network_unreachable},
    {"getters-short-buffers", case_getters_short_buffers},
    {"ports-exhausted", case_ports_exhausted},
    {"connect-events-paused", case_connect_events_paused},
    {"accept-aborted", case_accept_aborted},
    {"reject-aborted", case_reject_aborted},
    {"complete-connect-aborted", case_complete_connect_aborted},
    {"passive-disconnects-first", case_passive_disconnects_first},
    {"rej-after-complete-connect", case_rej_after_complete_connect},
    {"rej-during-disconnect", case_rej_during_disconnect},
    {"disconnect-peer-vanished", case_disconnect_peer_vanished},
    {"io-timeout", case_io_timeout},
};

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            puts(cases[i].name);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE | --list\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        current_case = cases[i].name;
        printf("%s\n", current_case);
        int rc = cases[i].run();
        if (rc == 0 && !failure[0]) {
            printf("PASS %s\n", current_case);
            return 0;
        }
        printf("FAIL %s: %s\n", current_case, failure[0] ? failure : "(no reason recorded)");
        return 1;
    }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
