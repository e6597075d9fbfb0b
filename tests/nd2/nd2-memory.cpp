/*
 * nd2-memory: IND2MemoryRegion, IND2MemoryWindow and object lifetime, through vtable calls from
 * C++. The passive side lives on PASSIVE_IP (rxe0), the active side on ACTIVE_IP (rxe1), both in
 * this process, each with its adapter, overlapped file bound to a completion port, and CQ.
 *
 *   nd2-memory CASE PASSIVE_IP ACTIVE_IP      (nd2-memory --list: the cases)
 *
 * The expected codes come from Microsoft's documents (docs/IND2MemoryRegion.md,
 * IND2MemoryWindow.md) and unit tests (src/unittests/ndmemorytest/ndmrinvalidbuffer.cpp,
 * ndmrderegister.cpp); docs/nd-conformance.md names them per case. An overlapped call is
 * asserted "inline" (the code returned, left in Internal, no packet at the port) or "completed"
 * (ND_PENDING, then the code from GetOverlappedResult and one packet).
 */
#include "nd2-common.h"

#include <atomic>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

namespace {

const size_t kBuf = 4096;

/* One side: adapter, overlapped file on a completion port, a CQ, a page-aligned buffer. */
struct Side : Nd2PortSide {
    unsigned char *buf = NULL;

    Side(const char *labelText, const char *ip) : Nd2PortSide(labelText, ip, 64)
    {
        buf = static_cast<unsigned char *>(aligned_alloc(4096, kBuf));
        EXPECT(buf != NULL);
        memset(buf, 0, kBuf);
    }

    ~Side()
    {
        EXPECT(cq->Release() == 0);
        Drain();
        ClosePort();
        free(buf);
    }

    IND2MemoryRegion *Mr() { return nd2_create_mr(adapter, file); }

    IND2MemoryWindow *Mw()
    {
        IND2MemoryWindow *mw = NULL;
        CHECK_HR(adapter->CreateMemoryWindow(IID_IND2MemoryWindow, reinterpret_cast<void **>(&mw)));
        return mw;
    }

    /* Packets at the port, dropped; how many. */
    int Drain()
    {
        int n = 0;
        for (;;) {
            BOOL ok = FALSE;
            ULONG_PTR key = 0;
            if (nd2_next_packet(port, 0, &ok, &key) == NULL)
                return n;
            n++;
        }
    }

    /* The one packet for `want`, within 10 s, and no other. */
    void Packet(OVERLAPPED *want, bool ok)
    {
        BOOL got = FALSE;
        ULONG_PTR key = 0;
        OVERLAPPED *ov = nd2_next_packet(port, 10000, &got, &key);
        if (ov != want)
            FAIL("%s: packet %p, want %p", label, static_cast<void *>(ov), static_cast<void *>(want));
        if ((got != FALSE) != ok)
            FAIL("%s: GetQueuedCompletionStatus said %d", label, got);
        if (Drain() != 0)
            FAIL("%s: more packets than requests", label);
    }

    /* The next CQ result within `ms`; FAIL if none. */
    ND2_RESULT Result(double ms = 10000)
    {
        double until = nd2_now_ms() + ms;
        ND2_RESULT r;
        while (cq->GetResults(&r, 1) == 0) {
            if (nd2_now_ms() > until)
                FAIL("%s: no completion within %.0f ms", label, ms);
            usleep(200);
        }
        return r;
    }

    /* The next CQ result is `context`'s with `status`. */
    void Completed(const char *what, void *context, HRESULT status)
    {
        ND2_RESULT r = Result();
        if (r.RequestContext != context || r.Status != status)
            FAIL("%s: completion %p 0x%08X (%s), want %p %s", what, r.RequestContext, (unsigned)r.Status,
                 nd2_status_name(r.Status), context, nd2_status_name(status));
        printf("  %s: completion %s\n", what, nd2_status_name(status));
    }
};

/* An overlapped call that must fail inline with `want`. */
void Inline(Side &side, const char *what, HRESULT got, OVERLAPPED *ov, HRESULT want)
{
    nd2_failed_inline(what, got, ov, want);
    if (side.Drain() != 0)
        FAIL("%s: a packet for a request that failed inline", what);
    printf("  %s: %s inline\n", what, nd2_status_name(want));
}

/* An overlapped call that must complete with `want` (ND_PENDING, then one packet). */
void Completes(Side &side, const char *what, IND2Overlapped *object, HRESULT got, OVERLAPPED *ov, HRESULT want)
{
    if (got != ND_PENDING)
        FAIL("%s: returned 0x%08X (%s), want ND_PENDING", what, (unsigned)got, nd2_status_name(got));
    HRESULT final = object->GetOverlappedResult(ov, TRUE);
    if (final != want)
        FAIL("%s: completed 0x%08X (%s), want %s", what, (unsigned)final, nd2_status_name(final), nd2_status_name(want));
    side.Packet(ov, SUCCEEDED(want));
    printf("  %s: %s through the completion\n", what, nd2_status_name(want));
}

void Register(Side &side, IND2MemoryRegion *mr, void *at, size_t len, ULONG flags)
{
    Nd2Ov ov;
    Completes(side, "Register", mr, mr->Register(at, len, flags, &ov), &ov, ND_SUCCESS);
}

void Deregister(Side &side, IND2MemoryRegion *mr)
{
    Nd2Ov ov;
    Completes(side, "Deregister", mr, mr->Deregister(&ov), &ov, ND_SUCCESS);
}

/* ---------------------------------------------------------------------------------------- */

/* Register's argument errors, in ndmrinvalidbuffer's order; register twice; deregister twice. */
int register_args(Side &s, Side &)
{
    IND2MemoryRegion *mr = s.Mr();
    {
        Nd2Ov ov;
        Inline(s, "Register NULL, length 0 (ndmrinvalidbuffer server)", mr->Register(NULL, 0, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov),
               &ov, ND_INVALID_PARAMETER);
    }
    {
        Nd2Ov ov;
        Inline(s, "Register NULL, length 64", mr->Register(NULL, 64, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov), &ov,
               ND_INVALID_PARAMETER);
    }
    {
        Nd2Ov ov;
        Inline(s, "Register a buffer, length 0 (ndmrinvalidbuffer client)",
               mr->Register(s.buf, 0, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov), &ov, ND_INVALID_BUFFER_SIZE);
    }
    {
        Nd2Ov ov;
        Inline(s, "Register with an unknown flag 0x10", mr->Register(s.buf, kBuf, 0x10, &ov), &ov, ND_INVALID_PARAMETER);
    }
    nd2_returns("Register with a NULL OVERLAPPED", mr->Register(s.buf, kBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, NULL),
            ND_INVALID_PARAMETER);
    {
        /* Unmapped memory: the kernel cannot pin it (IND2MemoryRegion.md: "The specified buffer
         * or buffer size was not valid"). */
        void *gone = mmap(NULL, 2 * kBuf, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT(gone != MAP_FAILED);
        EXPECT(munmap(gone, 2 * kBuf) == 0);
        Nd2Ov ov;
        Inline(s, "Register unmapped memory", mr->Register(gone, 2 * kBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov), &ov,
               ND_ACCESS_VIOLATION);
    }
    {
        Nd2Ov ov;
        Inline(s, "Deregister, never registered", mr->Deregister(&ov), &ov, ND_INVALID_DEVICE_STATE);
    }
    Register(s, mr, s.buf, kBuf, 0);
    EXPECT(mr->GetLocalToken() != 0 || mr->GetRemoteToken() != 0);
    {
        Nd2Ov ov;
        Inline(s, "Register again (one buffer per region)", mr->Register(s.buf, kBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov),
               &ov, ND_INVALID_DEVICE_STATE);
    }
    nd2_returns("Deregister with a NULL OVERLAPPED", mr->Deregister(NULL), ND_INVALID_PARAMETER);
    Deregister(s, mr);
    {
        Nd2Ov ov;
        Inline(s, "Deregister again", mr->Deregister(&ov), &ov, ND_INVALID_DEVICE_STATE);
    }
    /* The region is reusable, with other flags (the documentation: the same buffer may be
     * registered several times, with other access rights). */
    Register(s, mr, s.buf, kBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ);
    IND2MemoryRegion *second = s.Mr();
    Register(s, second, s.buf, kBuf, ND_MR_FLAG_ALLOW_REMOTE_WRITE);
    Deregister(s, second);
    EXPECT(second->Release() == 0);
    Deregister(s, mr);
    EXPECT(mr->Release() == 0);
    return 0;
}

/* A connected pair of QPs: the passive side's `pqp`, the active side's `aqp`. */
struct Link {
    IND2QueuePair *pqp = NULL;
    IND2QueuePair *aqp = NULL;
    IND2Connector *pc = NULL;
    IND2Connector *ac = NULL;
};

IND2QueuePair *Qp(Side &s)
{
    IND2QueuePair *qp = NULL;
    CHECK_HR(s.adapter->CreateQueuePair(IID_IND2QueuePair, s.cq, s.cq, &s, 16, 16, 1, 1, 0,
                                        reinterpret_cast<void **>(&qp)));
    return qp;
}

Link Connect(Side &p, Side &a, unsigned short portNumber)
{
    Link l;
    l.pqp = Qp(p);
    l.aqp = Qp(a);
    CHECK_HR(p.adapter->CreateConnector(IID_IND2Connector, p.file, reinterpret_cast<void **>(&l.pc)));
    CHECK_HR(a.adapter->CreateConnector(IID_IND2Connector, a.file, reinterpret_cast<void **>(&l.ac)));
    IND2Listener *listener = NULL;
    CHECK_HR(p.adapter->CreateListener(IID_IND2Listener, p.file, reinterpret_cast<void **>(&listener)));
    sockaddr_in at = p.address;
    at.sin_port = htons(portNumber);
    CHECK_HR(listener->Bind(nd2_sa(at), sizeof at));
    CHECK_HR(listener->Listen(0));
    Nd2Ov get, conn, acc, comp;
    EXPECT(listener->GetConnectionRequest(l.pc, &get) == ND_PENDING);
    EXPECT(l.ac->Connect(l.aqp, nd2_sa(at), sizeof at, 4, 4, NULL, 0, &conn) == ND_PENDING);
    CHECK_HR(listener->GetOverlappedResult(&get, TRUE));
    p.Packet(&get, true);
    EXPECT(l.pc->Accept(l.pqp, 4, 4, NULL, 0, &acc) == ND_PENDING);
    CHECK_HR(l.ac->GetOverlappedResult(&conn, TRUE));
    a.Packet(&conn, true);
    EXPECT(l.ac->CompleteConnect(&comp) == ND_PENDING);
    CHECK_HR(l.ac->GetOverlappedResult(&comp, TRUE));
    a.Packet(&comp, true);
    CHECK_HR(l.pc->GetOverlappedResult(&acc, TRUE));
    p.Packet(&acc, true);
    EXPECT(listener->Release() == 0);
    return l;
}

/* Releases the QPs and connectors (no Disconnect: their release tears the connection down). */
void Hangup(Side &p, Side &a, Link &l)
{
    EXPECT(l.pc->Release() == 0);
    EXPECT(l.ac->Release() == 0);
    EXPECT(l.pqp->Release() == 0);
    EXPECT(l.aqp->Release() == 0);
    p.Drain();
    a.Drain();
}

/* Binds `mw` to `buf` of `mr` through `qp` and waits for the bind's completion. */
void Bind(Side &s, IND2QueuePair *qp, IND2MemoryRegion *mr, IND2MemoryWindow *mw, void *buf, size_t len)
{
    void *ctx = reinterpret_cast<void *>(0xB1);
    nd2_returns("Bind", qp->Bind(ctx, mr, mw, buf, len, ND_OP_FLAG_ALLOW_READ | ND_OP_FLAG_ALLOW_WRITE), ND_SUCCESS);
    s.Completed("Bind", ctx, ND_SUCCESS);
}

/* The active side writes `byte` over `len` bytes at `remote` with `token`, from its own MR. */
void RemoteWrite(Side &a, Link &l, IND2MemoryRegion *amr, unsigned char byte, void *remote, UINT32 token,
                 HRESULT want)
{
    memset(a.buf, byte, 64);
    ND2_SGE sge = {a.buf, 64, amr->GetLocalToken()};
    void *ctx = reinterpret_cast<void *>(0x3A);
    nd2_returns("Write", l.aqp->Write(ctx, &sge, 1, reinterpret_cast<UINT64>(remote), token, 0), ND_SUCCESS);
    ND2_RESULT r = a.Result();
    EXPECT(r.RequestContext == ctx);
    if (want == ND_SUCCESS ? r.Status != ND_SUCCESS : r.Status == ND_SUCCESS)
        FAIL("Write: completion 0x%08X (%s), want %s", (unsigned)r.Status, nd2_status_name(r.Status),
             want == ND_SUCCESS ? "ND_SUCCESS" : "a failure");
    printf("  Write: completion %s\n", nd2_status_name(r.Status));
}

/* ndmrderegister: Deregister of a region a window is bound to is ND_DEVICE_BUSY; the region
 * stays registered and usable (locally and remotely, same tokens); after the window's
 * Invalidate, Deregister succeeds; with a second region, after the window's Release. */
int deregister_bound(Side &p, Side &a)
{
    Link l = Connect(p, a, 7520);
    IND2MemoryRegion *amr = a.Mr();
    Register(a, amr, a.buf, kBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE);

    IND2MemoryRegion *mr = p.Mr();
    Register(p, mr, p.buf, kBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ | ND_MR_FLAG_ALLOW_REMOTE_WRITE);
    UINT32 local = mr->GetLocalToken(), remote = mr->GetRemoteToken();
    IND2MemoryWindow *mw = p.Mw();
    Bind(p, l.pqp, mr, mw, p.buf, 1024);
    {
        Nd2Ov ov;
        Inline(p, "Deregister with a window bound", mr->Deregister(&ov), &ov, ND_DEVICE_BUSY);
        EXPECT(mr->GetOverlappedResult(&ov, FALSE) == ND_DEVICE_BUSY);
    }
    EXPECT(mr->GetLocalToken() == local && mr->GetRemoteToken() == remote);
    printf("  tokens unchanged after the refused Deregister\n");
    {
        Nd2Ov ov;
        Inline(p, "Register on the still registered region", mr->Register(p.buf, kBuf, 0, &ov), &ov,
               ND_INVALID_DEVICE_STATE);
    }
    /* Still usable: remote writes through the window and through the region's own token. */
    RemoteWrite(a, l, amr, 0x11, p.buf, mw->GetRemoteToken(), ND_SUCCESS);
    EXPECT(p.buf[0] == 0x11 && p.buf[63] == 0x11);
    RemoteWrite(a, l, amr, 0x22, p.buf + 2048, remote, ND_SUCCESS);
    EXPECT(p.buf[2048] == 0x22);
    /* And locally: a Send from the region to the active side. */
    {
        ND2_SGE rsge = {a.buf + 1024, 64, amr->GetLocalToken()};
        nd2_returns("active Receive", l.aqp->Receive(reinterpret_cast<void *>(0x4E), &rsge, 1), ND_SUCCESS);
        ND2_SGE sge = {p.buf, 64, local};
        nd2_returns("Send from the region", l.pqp->Send(reinterpret_cast<void *>(0x5E), &sge, 1, 0), ND_SUCCESS);
        p.Completed("Send", reinterpret_cast<void *>(0x5E), ND_SUCCESS);
        a.Completed("Receive", reinterpret_cast<void *>(0x4E), ND_SUCCESS);
        EXPECT(a.buf[1024] == 0x11);
    }
    nd2_returns("Invalidate", l.pqp->Invalidate(reinterpret_cast<void *>(0x1A), mw, 0), ND_SUCCESS);
    p.Completed("Invalidate", reinterpret_cast<void *>(0x1A), ND_SUCCESS);
    Deregister(p, mr);

    /* A second region, its window released instead of invalidated. */
    IND2MemoryRegion *mr2 = p.Mr();
    Register(p, mr2, p.buf, kBuf, ND_MR_FLAG_ALLOW_REMOTE_READ | ND_MR_FLAG_ALLOW_REMOTE_WRITE);
    UINT32 remote2 = mr2->GetRemoteToken();
    Bind(p, l.pqp, mr2, mw, p.buf, 512);
    {
        Nd2Ov ov;
        Inline(p, "Deregister the second region with the window bound", mr2->Deregister(&ov), &ov, ND_DEVICE_BUSY);
    }
    EXPECT(mw->Release() == 0);
    Deregister(p, mr2);
    /* Deregistered for real: the old token no longer reaches the buffer (the failed Write
     * breaks the connection, so it comes last). */
    p.buf[100] = 0;
    RemoteWrite(a, l, amr, 0x33, p.buf + 64, remote2, ND_ACCESS_VIOLATION);
    EXPECT(p.buf[100] == 0);
    Hangup(p, a, l);
    EXPECT(mr->Release() == 0);
    EXPECT(mr2->Release() == 0);
    Deregister(a, amr);
    EXPECT(amr->Release() == 0);
    return 0;
}

/* VmPin of /proc/self/status, KiB: the pages the kernel holds pinned for this process's
 * registrations (rxe pins a region's pages until it is deregistered). */
long pinned_kib()
{
    FILE *f = fopen("/proc/self/status", "r");
    EXPECT(f != NULL);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmPin: %ld kB", &kib) == 1)
            break;
    fclose(f);
    EXPECT(kib >= 0);
    return kib;
}

/* Microsoft's ndrpingpong's teardown (ndrpingpong.cpp:168-169, 206 and 426 with ndtestutil.cpp:23-33,
 * 328-332): Deregister with its window bound (ND_DEVICE_BUSY, unchecked), then the region's
 * last Release before the window's. The region is deregistered once the window is gone, with
 * the adapter still open: by the window's Release (first round; until then the window still
 * takes a Write), or by the release of the QP it was bound through (second round). Before, the
 * region's Release logged "ibv_dereg_mr at the region's release: ND_DEVICE_BUSY" and left it
 * registered, its pages pinned, until the adapter's close. */
int release_bound_region(Side &p, Side &a)
{
    const size_t len = 1 << 20;
    unsigned char *big = static_cast<unsigned char *>(aligned_alloc(4096, len));
    EXPECT(big != NULL);
    memset(big, 0, len);
    IND2MemoryRegion *amr = a.Mr();
    Register(a, amr, a.buf, kBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE);
    long base = pinned_kib();
    for (int round = 0; round < 2; round++) {
        Link l = Connect(p, a, static_cast<unsigned short>(7522 + round));
        IND2MemoryRegion *mr = p.Mr();
        Register(p, mr, big, len, ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_WRITE);
        long registered = pinned_kib();
        printf("  round %d: VmPin %ld kB, %ld kB with the region registered\n", round, base, registered);
        EXPECT(registered - base >= static_cast<long>(len / 1024));
        IND2MemoryWindow *mw = p.Mw();
        Bind(p, l.pqp, mr, mw, big, len);
        {
            Nd2Ov ov;
            Inline(p, "Deregister with the window bound", mr->Deregister(&ov), &ov, ND_DEVICE_BUSY);
        }
        EXPECT(mr->Release() == 0);
        printf("  the region's last Release with the window bound: VmPin %ld kB\n", pinned_kib());
        if (round == 0) {
            RemoteWrite(a, l, amr, 0x44, big + len - 64, mw->GetRemoteToken(), ND_SUCCESS);
            EXPECT(big[len - 1] == 0x44);
            EXPECT(mw->Release() == 0);
            long after = pinned_kib();
            printf("  after the window's Release: VmPin %ld kB\n", after);
            if (after != base)
                FAIL("the released region is still registered after its window's Release (VmPin %ld kB, %ld before)",
                     after, base);
            Hangup(p, a, l);
        } else {
            Hangup(p, a, l);
            long after = pinned_kib();
            printf("  after the QP's release: VmPin %ld kB\n", after);
            if (after != base)
                FAIL("the released region is still registered after its window's QP's release (VmPin %ld kB, %ld before)",
                     after, base);
            EXPECT(mw->Release() == 0);
        }
    }
    Deregister(a, amr);
    EXPECT(amr->Release() == 0);
    free(big);
    return 0;
}

/* Bind racing Deregister and Register of its region on another thread: every call gives one of
 * its codes, nothing crashes or hangs; in the end the window's Release lets Deregister succeed. */
struct Race {
    Side *p;
    Link *l;
    IND2MemoryRegion *mr;
    IND2MemoryWindow *mw;
    volatile bool stop;
    int deregistered, busy;
    /* Binds the main thread has finished: the deregisterer keeps each registration until two more
     * end, so at least one Bind starts and ends while the region is registered, whatever order
     * the scheduler runs the threads in (one vCPU under ASan ran every Bind between a
     * Deregister and the next Register). */
    std::atomic<int> attempts;
};

/* Until `attempts` has moved two past `seen`, or the race is over. */
static void await_binds(Race &r, int seen)
{
    while (!r.stop && r.attempts.load() < seen + 2)
        sched_yield();
}

void *deregisterer(void *arg)
{
    Race &r = *static_cast<Race *>(arg);
    while (!r.stop) {
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        HRESULT hr = r.mr->Deregister(&ov);
        if (hr == ND_PENDING) {
            if (r.mr->GetOverlappedResult(&ov, TRUE) != ND_SUCCESS)
                FAIL("Deregister completed 0x%08X", (unsigned)r.mr->GetOverlappedResult(&ov, FALSE));
            r.deregistered++;
            memset(&ov, 0, sizeof ov);
            HRESULT reg = r.mr->Register(r.p->buf, kBuf, ND_MR_FLAG_ALLOW_REMOTE_WRITE, &ov);
            if (reg != ND_PENDING || r.mr->GetOverlappedResult(&ov, TRUE) != ND_SUCCESS)
                FAIL("Register after Deregister: 0x%08X", (unsigned)reg);
            await_binds(r, r.attempts.load());
        } else if (hr == ND_DEVICE_BUSY) {
            r.busy++;
        } else {
            FAIL("Deregister: 0x%08X (%s)", (unsigned)hr, nd2_status_name(hr));
        }
    }
    return NULL;
}

int bind_deregister_race(Side &p, Side &a)
{
    Link l = Connect(p, a, 7521);
    Race r;
    r.p = &p;
    r.l = &l;
    r.mr = p.Mr();
    r.mw = p.Mw();
    r.stop = false;
    r.deregistered = r.busy = 0;
    r.attempts = 0;
    Register(p, r.mr, p.buf, kBuf, ND_MR_FLAG_ALLOW_REMOTE_WRITE);
    pthread_t thread;
    EXPECT(pthread_create(&thread, NULL, deregisterer, &r) == 0);
    int binds = 0, refused = 0, failed = 0;
    double until = nd2_now_ms() + 3000;
    for (int i = 0; i < 3000 && nd2_now_ms() < until; i++) {
        HRESULT hr = l.pqp->Bind(reinterpret_cast<void *>(0xB0), r.mr, r.mw, p.buf, 256, ND_OP_FLAG_ALLOW_WRITE);
        r.attempts++;
        if (hr == ND_INVALID_PARAMETER) {
            refused++;
            /* Let the deregisterer register again. */
            sched_yield();
            continue;
        }
        if (hr != ND_SUCCESS)
            FAIL("Bind: 0x%08X (%s)", (unsigned)hr, nd2_status_name(hr));
        binds++;
        ND2_RESULT res = p.Result();
        if (res.Status != ND_SUCCESS) {
            failed++; /* deregistered before the bind ran; the QP is in error from now on */
            continue;
        }
        l.pqp->Invalidate(reinterpret_cast<void *>(0x1B), r.mw, 0);
        p.Result();
    }
    r.stop = true;
    EXPECT(pthread_join(thread, NULL) == 0);
    p.Drain();
    printf("  %d binds posted (%d completed in error), %d found no registration; %d deregistrations, %d busy\n",
           binds, failed, refused, r.deregistered, r.busy);
    EXPECT(binds > 0 && r.deregistered > 0);
    EXPECT(r.mw->Release() == 0);
    Deregister(p, r.mr);
    EXPECT(r.mr->Release() == 0);
    Hangup(p, a, l);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */

long rss_kib()
{
    FILE *f = fopen("/proc/self/statm", "r");
    EXPECT(f != NULL);
    long size = 0, resident = 0;
    EXPECT(fscanf(f, "%ld %ld", &size, &resident) == 2);
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* RSS grows by at most `slack` KiB over `n` rounds of `round` after `warm` rounds. */
template <typename Round> void Flat(const char *what, int warm, int n, long slack, Round round)
{
    for (int i = 0; i < warm; i++)
        round();
    long before = rss_kib();
    double t0 = nd2_now_us();
    for (int i = 0; i < n; i++)
        round();
    long after = rss_kib();
    printf("  %s: %d rounds in %.1f s, RSS %ld -> %ld KiB\n", what, n, (nd2_now_us() - t0) / 1e6, before, after);
    /* ND2_LIFETIME_RSS=unjudged: under valgrind, whose queue of freed blocks (20 MB) holds them
     * on purpose, RSS says nothing; the leak check is valgrind's own. */
    const char *judge = getenv("ND2_LIFETIME_RSS");
    if (after - before > slack && !(judge && strcmp(judge, "unjudged") == 0))
        FAIL("%s: RSS grew %ld KiB over %d rounds (allowed %ld)", what, after - before, n, slack);
}

/* Every object's last Release frees it: RSS stays flat over many create/release rounds (it grew
 * by about 32 bytes a round when the shells were kept). AddRef/QueryInterface/Release count.
 * ND2_LIFETIME_ROUNDS (10000) rounds of each kind, ten times as many bare MRs and a fiftieth as
 * many adapters (each opens the device: 20 ms under the rig's emulation); a run under valgrind
 * takes a small count, a long one a big count (docs/safety.md, "Leaks"). */
int lifetime_rss(Side &s, Side &)
{
    const char *env = getenv("ND2_LIFETIME_ROUNDS");
    const int n = env ? atoi(env) : 10000;
    EXPECT(n >= 10);
    /* Warm-up rounds before the first reading: at least 2,048, past the 1,024 released shells
     * a class keeps before it reuses one (nd2/mod.rs) and the allocator's first growth. With
     * 1,000 (and 128 KiB allowed), one stock run's window loop grew 228 KiB over its 10^4
     * rounds; 10^5 rounds of the same loop stay flat (docs/safety.md, Leaks). */
    const int warm = n / 10 < 2048 ? (n < 2048 ? n / 10 : 2048) : n / 10;
    {
        IND2MemoryRegion *mr = s.Mr();
        EXPECT(mr->AddRef() == 2);
        IND2MemoryRegion *again = NULL;
        nd2_returns("QueryInterface", mr->QueryInterface(IID_IND2MemoryRegion, reinterpret_cast<void **>(&again)),
                ND_SUCCESS);
        EXPECT(again == mr);
        EXPECT(mr->Release() == 2);
        EXPECT(mr->Release() == 1);
        EXPECT(mr->Release() == 0);
    }
    Flat("MR create/release", n, 10 * n, 256, [&] {
        IND2MemoryRegion *mr = s.Mr();
        EXPECT(mr->Release() == 0);
    });
    Flat("MR create/register/deregister/release", warm, n, 256, [&] {
        IND2MemoryRegion *mr = s.Mr();
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        ov.hEvent = reinterpret_cast<HANDLE>(1); /* no packet */
        EXPECT(mr->Register(s.buf, kBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov) == ND_PENDING);
        CHECK_HR(mr->GetOverlappedResult(&ov, TRUE));
        EXPECT(mr->Deregister(&ov) == ND_PENDING);
        CHECK_HR(mr->GetOverlappedResult(&ov, TRUE));
        EXPECT(mr->Release() == 0);
    });
    Flat("MW create/release", warm, n, 256, [&] {
        IND2MemoryWindow *mw = s.Mw();
        EXPECT(mw->Release() == 0);
    });
    Flat("CQ create/release", warm, n, 256, [&] {
        IND2CompletionQueue *cq = NULL;
        CHECK_HR(s.adapter->CreateCompletionQueue(IID_IND2CompletionQueue, s.file, 16, 0, 0,
                                                  reinterpret_cast<void **>(&cq)));
        EXPECT(cq->Release() == 0);
    });
    Flat("connector create/release", warm, n, 256, [&] {
        IND2Connector *c = NULL;
        CHECK_HR(s.adapter->CreateConnector(IID_IND2Connector, s.file, reinterpret_cast<void **>(&c)));
        EXPECT(c->Release() == 0);
    });
    /* Bound: the connector has its rdma_cm id and port from here on. */
    Flat("connector create/bind/release", warm, n, 256, [&] {
        IND2Connector *c = NULL;
        CHECK_HR(s.adapter->CreateConnector(IID_IND2Connector, s.file, reinterpret_cast<void **>(&c)));
        CHECK_HR(c->Bind(nd2_sa(s.address), sizeof s.address));
        EXPECT(c->Release() == 0);
    });
    Flat("adapter open/release", n / 500 < 2 ? 2 : n / 500, n / 50 < 5 ? 5 : n / 50, 256, [&] {
        IND2Adapter *adapter = NULL;
        CHECK_HR(NdOpenAdapter(IID_IND2Adapter, nd2_sa(s.address), sizeof s.address,
                               reinterpret_cast<void **>(&adapter)));
        HANDLE file = NULL;
        CHECK_HR(adapter->CreateOverlappedFile(&file));
        CloseHandle(file);
        EXPECT(adapter->Release() == 0);
    });
    return 0;
}

/* release-race: calls on one object from several threads while another thread makes its last
 * Release. Each call either runs on the whole object (ND_SUCCESS) or finds it released
 * (ND_INVALID_HANDLE, from the first call after the Release on): nothing else, no crash, and
 * the object released once (the adapter's last Release at the end finds nothing left over). */
struct ReleaseRace {
    IND2MemoryRegion *mr;
    std::atomic<int> calls;
    int refused;
    HRESULT other;
};

void *release_racer(void *arg)
{
    ReleaseRace *r = static_cast<ReleaseRace *>(arg);
    for (;;) {
        HRESULT hr = r->mr->CancelOverlappedRequests();
        if (hr == ND_SUCCESS) {
            r->calls.fetch_add(1);
            continue;
        }
        if (hr == ND_INVALID_HANDLE)
            r->refused++;
        else
            r->other = hr;
        break;
    }
    return NULL;
}

int release_race(Side &s, Side &)
{
    const int rounds = 200, threads = 3;
    int calls = 0;
    for (int round = 0; round < rounds; round++) {
        IND2MemoryRegion *mr = s.Mr();
        ReleaseRace r[threads];
        pthread_t tid[threads];
        for (int t = 0; t < threads; t++) {
            r[t].mr = mr;
            r[t].calls = 0;
            r[t].refused = 0;
            r[t].other = ND_SUCCESS;
            EXPECT(pthread_create(&tid[t], NULL, release_racer, &r[t]) == 0);
        }
        /* The Release while every thread is calling. */
        for (int t = 0; t < threads; t++)
            while (r[t].calls.load() == 0)
                sched_yield();
        EXPECT(mr->Release() == 0);
        for (int t = 0; t < threads; t++) {
            EXPECT(pthread_join(tid[t], NULL) == 0);
            if (r[t].other != ND_SUCCESS)
                FAIL("a call racing the last Release returned 0x%08X (%s)", (unsigned)r[t].other, nd2_status_name(r[t].other));
            EXPECT(r[t].refused == 1);
            calls += r[t].calls;
        }
        /* Released: refused, and counts stay 0. */
        EXPECT(mr->CancelOverlappedRequests() == ND_INVALID_HANDLE);
        EXPECT(mr->AddRef() == 0);
        EXPECT(mr->Release() == 0);
    }
    printf("  %d rounds of %d threads: %d calls ran on the whole object, every thread then refused "
           "ND_INVALID_HANDLE\n",
           rounds, threads, calls);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */

/* deregister-concurrent: threads Deregister and Register one region over and over with no window
 * anywhere. Each call either does its work or finds the region already in the state it asks for
 * (ND_INVALID_DEVICE_STATE); ND_DEVICE_BUSY, the answer for bound windows, never comes (another
 * thread's call holding the region is no window). */
struct Cycler {
    Side *s;
    IND2MemoryRegion *mr;
    int deregistered = 0, registered = 0, busy = 0;
    HRESULT other = ND_SUCCESS;
};

void *cycler(void *arg)
{
    Cycler &c = *static_cast<Cycler *>(arg);
    for (int i = 0; i < 2000; i++) {
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        HRESULT hr = c.mr->Deregister(&ov);
        if (hr == ND_PENDING)
            hr = c.mr->GetOverlappedResult(&ov, TRUE);
        if (hr == ND_SUCCESS)
            c.deregistered++;
        else if (hr == ND_DEVICE_BUSY)
            c.busy++;
        else if (hr != ND_INVALID_DEVICE_STATE && c.other == ND_SUCCESS)
            c.other = hr;
        memset(&ov, 0, sizeof ov);
        hr = c.mr->Register(c.s->buf, kBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov);
        if (hr == ND_PENDING)
            hr = c.mr->GetOverlappedResult(&ov, TRUE);
        if (hr == ND_SUCCESS)
            c.registered++;
        else if (hr != ND_INVALID_DEVICE_STATE && c.other == ND_SUCCESS)
            c.other = hr;
        if (i % 8 == 0)
            sched_yield();
    }
    return NULL;
}

int deregister_concurrent(Side &s, Side &)
{
    const int threads = 3;
    IND2MemoryRegion *mr = s.Mr();
    Register(s, mr, s.buf, kBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE);
    Cycler c[threads];
    pthread_t tid[threads];
    for (int t = 0; t < threads; t++) {
        c[t].s = &s;
        c[t].mr = mr;
        EXPECT(pthread_create(&tid[t], NULL, cycler, &c[t]) == 0);
    }
    int deregistered = 0, registered = 0, busy = 0;
    for (int t = 0; t < threads; t++) {
        EXPECT(pthread_join(tid[t], NULL) == 0);
        if (c[t].other != ND_SUCCESS)
            FAIL("a Deregister or Register returned 0x%08X (%s)", (unsigned)c[t].other, nd2_status_name(c[t].other));
        deregistered += c[t].deregistered;
        registered += c[t].registered;
        busy += c[t].busy;
    }
    printf("  %d threads: %d deregistrations, %d registrations, %d ND_DEVICE_BUSY\n", threads, deregistered,
           registered, busy);
    if (busy != 0)
        FAIL("%d Deregister calls were ND_DEVICE_BUSY with no window anywhere", busy);
    EXPECT(deregistered > 0 && registered > 0);
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    HRESULT hr = mr->Deregister(&ov);
    EXPECT(hr == ND_PENDING || hr == ND_INVALID_DEVICE_STATE);
    if (hr == ND_PENDING)
        EXPECT(mr->GetOverlappedResult(&ov, TRUE) == ND_SUCCESS);
    EXPECT(mr->Release() == 0);
    return 0;
}

const Nd2Case<Side, Side> cases[] = {
    {"register-args", register_args},
    {"deregister-bound", deregister_bound},
    {"bind-deregister-race", bind_deregister_race},
    {"release-bound-region", release_bound_region},
    {"lifetime-rss", lifetime_rss},
    {"release-race", release_race},
    {"deregister-concurrent", deregister_concurrent},
};

} // namespace

int main(int argc, char **argv)
{
    return nd2_case_main(argc, argv, cases, "PASSIVE_IP ACTIVE_IP",
                         [](const Nd2Case<Side, Side> &c, const char *passiveIp, const char *activeIp) {
                             return nd2_with_startup([&] {
                                 Side passive("passive", passiveIp);
                                 Side active("active", activeIp);
                                 return c.run(passive, active);
                             });
                         });
}
