/*
 * nd2-stress: nd-shim's ND2 completion engine under load, every kind of completion waiter at once.
 *
 *   nd2-stress PASSIVE_IP ACTIVE_IP [--completions N] [--reads R] [--depth D] [--port P] [--lockstep L]
 *
 * Both ends live in this process: the passive one (listener, receiver) on PASSIVE_IP, the active
 * one (sender) on ACTIVE_IP. Four connections; each message is a Send of 16 bytes carrying its QP
 * and sequence number, so N completions (default 20000) are N/2 Sends and their N/2 Receives,
 * spread over the four QPs. Who waits for what:
 *   passive QP0 and QP1 share one CQ (for both queues), QP2 has its own: both CQs' overlapped file
 *       is bound to a completion port, and one thread waits in GetQueuedCompletionStatus, another
 *       in GetQueuedCompletionStatusEx, each handling whichever CQ's Notify packet it gets;
 *   passive QP3 has its own CQ, its file bound with BindIoCompletionCallback: the pool's callback
 *       drains the CQ and Notifies again;
 *   active QP0 and QP1 share one CQ, waited by a thread on the Notify OVERLAPPED's event;
 *   active QP2 and QP3 have their own CQs, which the sending thread polls (GetResults, no Notify).
 * Meanwhile a reader thread on the passive side makes --reads R (default N/100) RDMA Reads of 64
 * bytes from a region of the active end, each into a region it registers just before that Read
 * (zeroed first, deregistered after its data is checked), on passive QP3: their completions come
 * to the pool's callback beside QP3's receives, and must come in order, each once, with the data.
 * Each waiter drains its CQ (GetResults until it returns fewer than asked) before the next Notify
 * and reposts the receives it took (at most --depth D per QP, default 32, outstanding; a Send goes
 * only once its receive is posted). Checks: every completion succeeds; each QP's receives and sends
 * come back in the order posted, each once (a receive's context and payload are its sequence
 * number), and every count reaches its total. No progress for 20 s fails with the counts.
 * Prints the counts per waiter kind, the time and the rate. Then the lockstep (--lockstep L,
 * default 1000): L single Sends on QP0, each with both ends' Notify armed before it, each Notify
 * waited for with a 10 s limit (a Notify that needs a later completion never completes there).
 * The setup, the lockstep and the teardown have 60 s each or more: past that, the phase is named,
 * every thread's stack printed (gdb, if there is one), exit 1.
 */
#include "nd2-common.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <initializer_list>

namespace {

const int NQP = 4;
const ULONG_PTR PORT_KEY = 0x5157;
const ULONG_PTR QUIT_KEY = 0xdead;
const ULONG BATCH = 16;
const ULONG MSG = 16;
const ULONG SLOT = 64;
const ULONG MAX_DEPTH = 256;

struct Msg {
    uint32_t qp;
    uint32_t seq;
    uint64_t check;
};

uint64_t CheckOf(uint32_t qp, uint32_t seq) { return (uint64_t(qp) << 40) ^ (uint64_t(seq) * 0x9e3779b97f4a7c15ull); }

ULONG g_depth = 32;
unsigned long g_perQp[NQP];
unsigned long g_messages;

IND2QueuePair *g_pqp[NQP];
IND2QueuePair *g_aqp[NQP];
IND2MemoryRegion *g_pmr;
IND2MemoryRegion *g_amr;
unsigned char *g_recvBuf; /* [NQP][depth][SLOT] */
unsigned char *g_sendBuf; /* [NQP][depth][SLOT] */

/* Passive: receives posted and taken, per QP (written under the QP's CQ lock). */
std::atomic<unsigned long> g_posted[NQP];
std::atomic<unsigned long> g_taken[NQP];
/* Active: sends posted (by the sender) and completed, per QP. */
std::atomic<unsigned long> g_sent[NQP];
std::atomic<unsigned long> g_sendDone[NQP];
std::atomic<unsigned long> g_progress{0};
/* Passive QP3's RDMA Reads: issued (by the reader) and completed (taken by QP3's CQ handler). */
const int READ_QP = 3;
const ULONG READ_LEN = 64;
const ULONG READ_SOURCE = 4096;
unsigned long g_reads;
std::atomic<unsigned long> g_readsIssued{0};
std::atomic<unsigned long> g_readsDone{0};
unsigned char g_readSource[READ_SOURCE];
UINT32 g_readToken;

/* Wake-ups and results per waiter kind. */
std::atomic<unsigned long> g_gqcsPackets{0}, g_gqcsExCalls{0}, g_gqcsExPackets{0}, g_callbacks{0}, g_eventWaits{0},
    g_polls{0}, g_emptyPolls{0}, g_notifyInline{0};

/* A CQ with its Notify OVERLAPPED (first: the callback's LPOVERLAPPED is the PassiveCq). */
struct PassiveCq {
    OVERLAPPED ov;
    const char *name;
    IND2CompletionQueue *cq = NULL;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int qps[2];
    int nqps = 0;
    std::atomic<bool> done{false};
    unsigned long wakes = 0, results = 0;
};

PassiveCq g_shared, g_own2, g_own3;

void PostReceive(int q)
{
    unsigned long idx = g_posted[q].load(std::memory_order_relaxed);
    ND2_SGE sge = {g_recvBuf + (q * g_depth + idx % g_depth) * SLOT, SLOT, g_pmr->GetLocalToken()};
    uintptr_t context = (uintptr_t(q) << 32) | idx;
    CHECK_HR(g_pqp[q]->Receive(reinterpret_cast<void *>(context), &sge, 1));
    g_posted[q].store(idx + 1, std::memory_order_release);
}

bool Owns(const PassiveCq &c, int q)
{
    for (int k = 0; k < c.nqps; k++)
        if (c.qps[k] == q)
            return true;
    return false;
}

/* One Read result of QP3's CQ: in order, each once (the reader checks its data). */
void TakeRead(PassiveCq &c, const ND2_RESULT &r)
{
    unsigned long idx = reinterpret_cast<uintptr_t>(r.RequestContext) & 0xffffffffu;
    if (r.Status != ND_SUCCESS)
        FAIL("%s: Read %lu completed 0x%08x", c.name, idx, (unsigned)r.Status);
    unsigned long want = g_readsDone.load(std::memory_order_relaxed);
    if (idx != want || idx >= g_readsIssued.load())
        FAIL("%s: Read %lu came when %lu was due (%lu issued)", c.name, idx, want, g_readsIssued.load());
    g_readsDone.store(idx + 1, std::memory_order_release);
    c.results++;
    g_progress.fetch_add(1, std::memory_order_relaxed);
}

/* One receive result of `c`: in order, its payload matching, its receive reposted if more are due. */
void TakeReceive(PassiveCq &c, const ND2_RESULT &r)
{
    uintptr_t context = reinterpret_cast<uintptr_t>(r.RequestContext);
    int q = int(context >> 32);
    unsigned long idx = context & 0xffffffffu;
    if (r.RequestType == Nd2RequestTypeRead && Owns(c, READ_QP)) {
        TakeRead(c, r);
        return;
    }
    if (r.Status != ND_SUCCESS || r.RequestType != Nd2RequestTypeReceive)
        FAIL("%s: result status 0x%08x type %d context 0x%lx", c.name, (unsigned)r.Status, (int)r.RequestType,
             (unsigned long)context);
    if (q >= NQP || !Owns(c, q))
        FAIL("%s: a receive of QP %d, not this CQ's", c.name, q);
    unsigned long want = g_taken[q].load(std::memory_order_relaxed);
    if (idx != want)
        FAIL("%s: QP %d's receive %lu came when %lu was due (%s)", c.name, q, idx, want,
             idx < want ? "twice" : "out of order or one lost");
    if (r.BytesTransferred != MSG)
        FAIL("%s: QP %d receive %lu: %lu bytes", c.name, q, idx, (unsigned long)r.BytesTransferred);
    Msg m;
    memcpy(&m, g_recvBuf + (q * g_depth + idx % g_depth) * SLOT, sizeof m);
    if (m.qp != uint32_t(q) || m.seq != idx || m.check != CheckOf(m.qp, m.seq))
        FAIL("%s: QP %d receive %lu carries QP %u seq %u", c.name, q, idx, m.qp, m.seq);
    g_taken[q].store(idx + 1, std::memory_order_release);
    c.results++;
    g_progress.fetch_add(1, std::memory_order_relaxed);
    if (g_posted[q].load(std::memory_order_relaxed) < g_perQp[q])
        PostReceive(q);
}

bool AllTaken(const PassiveCq &c)
{
    if (Owns(c, READ_QP) && g_readsDone.load() < g_reads)
        return false;
    for (int k = 0; k < c.nqps; k++)
        if (g_taken[c.qps[k]].load() < g_perQp[c.qps[k]])
            return false;
    return true;
}

/*
 * `c`'s Notify completed (a port packet or the pool's callback): its status, then the CQ drained
 * and Notified again, unless every receive of its QPs is in. A Notify that completes inline still
 * posts its packet (the file is bound), so nothing else is done for it here.
 */
void HandleNotify(PassiveCq &c)
{
    pthread_mutex_lock(&c.lock);
    HRESULT hr = c.cq->GetOverlappedResult(&c.ov, FALSE);
    if (hr != ND_SUCCESS)
        FAIL("%s: Notify completed 0x%08x", c.name, (unsigned)hr);
    c.wakes++;
    for (;;) {
        ND2_RESULT r[BATCH];
        ULONG n = c.cq->GetResults(r, BATCH);
        for (ULONG k = 0; k < n; k++)
            TakeReceive(c, r[k]);
        if (n < BATCH)
            break;
    }
    if (AllTaken(c)) {
        pthread_mutex_unlock(&c.lock);
        c.done.store(true);
        return;
    }
    hr = c.cq->Notify(ND_CQ_NOTIFY_ANY, &c.ov);
    if (hr == ND_SUCCESS)
        g_notifyInline++;
    else if (hr != ND_PENDING)
        FAIL("%s: Notify returned 0x%08x", c.name, (unsigned)hr);
    pthread_mutex_unlock(&c.lock);
}

PassiveCq *CqOf(OVERLAPPED *ov)
{
    for (PassiveCq *c : {&g_shared, &g_own2, &g_own3})
        if (ov == &c->ov)
            return c;
    FAIL("a packet for an OVERLAPPED %p that is no CQ's", (void *)ov);
    return NULL;
}

HANDLE g_port;

void *GqcsThread(void *)
{
    for (;;) {
        DWORD bytes = 0;
        ULONG_PTR key = 0;
        OVERLAPPED *ov = NULL;
        BOOL ok = GetQueuedCompletionStatus(g_port, &bytes, &key, &ov, 1000);
        if (ov == NULL) {
            if (ok && key == QUIT_KEY)
                return NULL;
            if (!ok && GetLastError() == WAIT_TIMEOUT)
                continue;
            FAIL("GetQueuedCompletionStatus: ok %d key 0x%lx error %u", ok, (unsigned long)key,
                 (unsigned)GetLastError());
        }
        if (!ok || key != PORT_KEY)
            FAIL("GetQueuedCompletionStatus: a packet with ok %d key 0x%lx error %u", ok, (unsigned long)key,
                 (unsigned)GetLastError());
        g_gqcsPackets++;
        HandleNotify(*CqOf(ov));
    }
}

void *GqcsExThread(void *)
{
    for (;;) {
        OVERLAPPED_ENTRY e[4];
        ULONG n = 0;
        BOOL ok = GetQueuedCompletionStatusEx(g_port, e, 4, &n, 1000, FALSE);
        if (!ok) {
            if (GetLastError() == WAIT_TIMEOUT)
                continue;
            FAIL("GetQueuedCompletionStatusEx: error %u", (unsigned)GetLastError());
        }
        g_gqcsExCalls++;
        bool quit = false;
        for (ULONG k = 0; k < n; k++) {
            if (e[k].lpOverlapped == NULL && e[k].lpCompletionKey == QUIT_KEY) {
                /* One quit packet is this thread's; a batch may hold the other thread's too: it
                 * goes back to the port (as on Windows, the batch takes whatever is queued). */
                if (quit)
                    EXPECT(PostQueuedCompletionStatus(g_port, 0, QUIT_KEY, NULL));
                quit = true;
                continue;
            }
            if (e[k].lpCompletionKey != PORT_KEY || e[k].Internal != 0)
                FAIL("GetQueuedCompletionStatusEx: key 0x%lx status 0x%lx", (unsigned long)e[k].lpCompletionKey,
                     (unsigned long)e[k].Internal);
            g_gqcsExPackets++;
            HandleNotify(*CqOf(e[k].lpOverlapped));
        }
        if (quit)
            return NULL;
    }
}

void WINAPI OnComplete(DWORD error, DWORD bytes, LPOVERLAPPED ov)
{
    if (error != 0 || bytes != 0)
        FAIL("BindIoCompletionCallback: error 0x%08x bytes %u", (unsigned)error, (unsigned)bytes);
    g_callbacks++;
    HandleNotify(*CqOf(ov));
}

/* The active side's send results of `cq` (QPs from..to-1): in order, each once. */
ULONG DrainSends(IND2CompletionQueue *cq, int from, int to)
{
    ULONG total = 0;
    for (;;) {
        ND2_RESULT r[BATCH];
        ULONG n = cq->GetResults(r, BATCH);
        for (ULONG k = 0; k < n; k++) {
            uintptr_t context = reinterpret_cast<uintptr_t>(r[k].RequestContext);
            int q = int(context >> 32);
            unsigned long idx = context & 0xffffffffu;
            if (r[k].Status != ND_SUCCESS || r[k].RequestType != Nd2RequestTypeSend)
                FAIL("active CQ: result status 0x%08x type %d context 0x%lx", (unsigned)r[k].Status,
                     (int)r[k].RequestType, (unsigned long)context);
            if (q < from || q >= to)
                FAIL("active CQ of QPs %d-%d: a send of QP %d", from, to - 1, q);
            unsigned long want = g_sendDone[q].load(std::memory_order_relaxed);
            if (idx != want)
                FAIL("QP %d's send %lu came when %lu was due (%s)", q, idx, want,
                     idx < want ? "twice" : "out of order or one lost");
            g_sendDone[q].store(idx + 1, std::memory_order_release);
            g_progress.fetch_add(1, std::memory_order_relaxed);
        }
        total += n;
        if (n < BATCH)
            return total;
    }
}

IND2CompletionQueue *g_acqShared, *g_acq2, *g_acq3;

/* Active QP0 and QP1's CQ: drained, then Notify(ANY) and a wait on its OVERLAPPED's event. */
void *EventThread(void *)
{
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    ov.hEvent = CreateEventA(NULL, TRUE, FALSE, NULL);
    EXPECT(ov.hEvent != NULL);
    for (;;) {
        DrainSends(g_acqShared, 0, 2);
        if (g_sendDone[0].load() == g_perQp[0] && g_sendDone[1].load() == g_perQp[1])
            break;
        ResetEvent(ov.hEvent);
        HRESULT hr = g_acqShared->Notify(ND_CQ_NOTIFY_ANY, &ov);
        if (hr == ND_SUCCESS) {
            g_notifyInline++;
            continue;
        }
        if (hr != ND_PENDING)
            FAIL("active shared CQ: Notify returned 0x%08x", (unsigned)hr);
        while (WaitForSingleObject(ov.hEvent, 1000) != WAIT_OBJECT_0) {
        }
        g_eventWaits++;
        hr = g_acqShared->GetOverlappedResult(&ov, FALSE);
        if (hr != ND_SUCCESS)
            FAIL("active shared CQ: Notify completed 0x%08x", (unsigned)hr);
    }
    CloseHandle(ov.hEvent);
    return NULL;
}

/* The sender: each QP's next Send once its receive is posted and a send slot is free; between
 * rounds it polls active QP2's and QP3's CQs (no Notify). */
void *SenderThread(void *)
{
    unsigned idle = 0;
    for (;;) {
        bool progress = false, more = false;
        for (int q = 0; q < NQP; q++) {
            unsigned long s = g_sent[q].load(std::memory_order_relaxed);
            while (s < g_perQp[q] && s < g_posted[q].load(std::memory_order_acquire) &&
                   s - g_sendDone[q].load(std::memory_order_acquire) < g_depth) {
                unsigned char *slot = g_sendBuf + (q * g_depth + s % g_depth) * SLOT;
                Msg m = {uint32_t(q), uint32_t(s), CheckOf(uint32_t(q), uint32_t(s))};
                memcpy(slot, &m, sizeof m);
                ND2_SGE sge = {slot, MSG, g_amr->GetLocalToken()};
                uintptr_t context = (uintptr_t(q) << 32) | s;
                CHECK_HR(g_aqp[q]->Send(reinterpret_cast<void *>(context), &sge, 1, 0));
                g_sent[q].store(++s, std::memory_order_relaxed);
                progress = true;
            }
            if (s < g_perQp[q])
                more = true;
        }
        g_polls += 2;
        ULONG got = DrainSends(g_acq2, 2, 3) + DrainSends(g_acq3, 3, 4);
        if (got == 0)
            g_emptyPolls++;
        if (!more && g_sendDone[2].load() == g_perQp[2] && g_sendDone[3].load() == g_perQp[3])
            return NULL;
        if (progress || got != 0) {
            idle = 0;
        } else if (++idle < 16) {
            sched_yield();
        } else {
            usleep(100);
        }
    }
}

/* Setup and teardown requests (on unbound files) wait on their own event. */
typedef Nd2EventOv Ov;

void Completes(const char *what, IND2Overlapped *object, HRESULT issued, Ov &ov)
{
    if (issued == ND_PENDING) {
        if (WaitForSingleObject(ov.hEvent, 15000) != WAIT_OBJECT_0)
            FAIL("%s: not complete in 15 s", what);
        issued = object->GetOverlappedResult(&ov, FALSE);
    }
    if (issued != ND_SUCCESS)
        FAIL("%s: 0x%08x", what, (unsigned)issued);
}

IND2CompletionQueue *Cq(IND2Adapter *adapter, HANDLE file, ULONG depth)
{
    IND2CompletionQueue *cq = NULL;
    CHECK_HR(adapter->CreateCompletionQueue(IID_IND2CompletionQueue, file, depth, 0, 0, reinterpret_cast<void **>(&cq)));
    return cq;
}

IND2QueuePair *Qp(IND2Adapter *adapter, IND2CompletionQueue *cq, ULONG receiveDepth, ULONG initiatorDepth)
{
    IND2QueuePair *qp = NULL;
    CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, NULL, receiveDepth, initiatorDepth, 1, 1, 0,
                                      reinterpret_cast<void **>(&qp)));
    return qp;
}

IND2MemoryRegion *Register(IND2Adapter *adapter, HANDLE file, void *buf, size_t len)
{
    IND2MemoryRegion *mr = NULL;
    CHECK_HR(adapter->CreateMemoryRegion(IID_IND2MemoryRegion, file, reinterpret_cast<void **>(&mr)));
    Ov ov;
    Completes("Register", mr, mr->Register(buf, len, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov), ov);
    return mr;
}

void Deregister(IND2MemoryRegion *mr)
{
    Ov ov;
    Completes("Deregister", mr, mr->Deregister(&ov), ov);
    EXPECT(mr->Release() == 0);
}

/* g_reads RDMA Reads on passive QP3, each into a region registered just before it. */
HANDLE g_pctl;
IND2Adapter *g_pad;

void *ReaderThread(void *)
{
    unsigned char sink[2][READ_LEN];
    for (unsigned long k = 0; k < g_reads; k++) {
        unsigned char *dest = sink[k % 2];
        memset(dest, 0, READ_LEN);
        IND2MemoryRegion *mr = NULL;
        CHECK_HR(g_pad->CreateMemoryRegion(IID_IND2MemoryRegion, g_pctl, reinterpret_cast<void **>(&mr)));
        Ov ov;
        Completes("Register (Read sink)", mr,
                  mr->Register(dest, READ_LEN, ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_RDMA_READ_SINK, &ov), ov);
        ULONG at = ULONG(k % (READ_SOURCE / READ_LEN)) * READ_LEN;
        ND2_SGE sge = {dest, READ_LEN, mr->GetLocalToken()};
        uintptr_t context = (uintptr_t(READ_QP) << 32) | k;
        g_readsIssued.store(k + 1);
        CHECK_HR(g_pqp[READ_QP]->Read(reinterpret_cast<void *>(context), &sge, 1,
                                      reinterpret_cast<uintptr_t>(g_readSource + at), g_readToken, 0));
        unsigned idle = 0;
        while (g_readsDone.load(std::memory_order_acquire) <= k) {
            if (++idle < 16)
                sched_yield();
            else
                usleep(100);
        }
        if (memcmp(dest, g_readSource + at, READ_LEN) != 0)
            FAIL("Read %lu: the data at offset %lu of the source did not land in its region", k, (unsigned long)at);
        Deregister(mr);
    }
    return NULL;
}

/*
 * The lockstep: `rounds` single Sends on QP0, each with both ends' CQ Notify armed before it and
 * nothing else in flight, so that each Notify can only be completed by that one completion: the
 * passive one's packet is waited for in GetQueuedCompletionStatus, the active one's event in
 * WaitForSingleObject (in turn first). A Notify that comes only with a later completion (late by
 * one wake-up) never comes here: LOCKSTEP_MS fails the round.
 */
const DWORD LOCKSTEP_MS = 10000;
unsigned long g_lockstep = 1000;

void LockstepWaitPassive(unsigned long k)
{
    DWORD bytes = 0;
    ULONG_PTR key = 0;
    OVERLAPPED *ov = NULL;
    if (!GetQueuedCompletionStatus(g_port, &bytes, &key, &ov, LOCKSTEP_MS))
        FAIL("lockstep round %lu: the receive's Notify packet not in %u ms (error %u): a Notify late by a "
             "wake-up",
             k, (unsigned)LOCKSTEP_MS, (unsigned)GetLastError());
    if (ov != &g_shared.ov || key != PORT_KEY)
        FAIL("lockstep round %lu: a packet for %p key 0x%lx", k, (void *)ov, (unsigned long)key);
    HRESULT hr = g_shared.cq->GetOverlappedResult(&g_shared.ov, FALSE);
    if (hr != ND_SUCCESS)
        FAIL("lockstep round %lu: the receive's Notify completed 0x%08x", k, (unsigned)hr);
    ND2_RESULT r[2];
    ULONG n = g_shared.cq->GetResults(r, 2);
    uintptr_t want = (uintptr_t(0xffff) << 32) | k;
    if (n != 1 || r[0].Status != ND_SUCCESS || r[0].RequestType != Nd2RequestTypeReceive ||
        reinterpret_cast<uintptr_t>(r[0].RequestContext) != want || r[0].BytesTransferred != MSG)
        FAIL("lockstep round %lu: %lu passive results, not its one receive", k, (unsigned long)n);
    Msg m;
    memcpy(&m, g_recvBuf, sizeof m);
    if (m.qp != 0 || m.seq != uint32_t(k) || m.check != CheckOf(0, uint32_t(k)))
        FAIL("lockstep round %lu: the receive carries QP %u seq %u", k, m.qp, m.seq);
}

void LockstepWaitActive(unsigned long k, Nd2EventOv &ov)
{
    if (WaitForSingleObject(ov.hEvent, LOCKSTEP_MS) != WAIT_OBJECT_0)
        FAIL("lockstep round %lu: the send's Notify event not set in %u ms: a Notify late by a wake-up", k,
             (unsigned)LOCKSTEP_MS);
    HRESULT hr = g_acqShared->GetOverlappedResult(&ov, FALSE);
    if (hr != ND_SUCCESS)
        FAIL("lockstep round %lu: the send's Notify completed 0x%08x", k, (unsigned)hr);
    ND2_RESULT r[2];
    ULONG n = g_acqShared->GetResults(r, 2);
    if (n != 1 || r[0].Status != ND_SUCCESS || r[0].RequestType != Nd2RequestTypeSend ||
        reinterpret_cast<uintptr_t>(r[0].RequestContext) != k)
        FAIL("lockstep round %lu: %lu active results, not its one send", k, (unsigned long)n);
}

void Lockstep()
{
    Nd2EventOv ov;
    for (unsigned long k = 0; k < g_lockstep; k++) {
        ND2_SGE rsge = {g_recvBuf, SLOT, g_pmr->GetLocalToken()};
        memset(g_recvBuf, 0, sizeof(Msg));
        CHECK_HR(g_pqp[0]->Receive(reinterpret_cast<void *>((uintptr_t(0xffff) << 32) | k), &rsge, 1));
        HRESULT hr = g_shared.cq->Notify(ND_CQ_NOTIFY_ANY, &g_shared.ov);
        if (hr != ND_PENDING)
            FAIL("lockstep round %lu: the passive Notify on an empty CQ returned 0x%08x", k, (unsigned)hr);
        ov.Reset();
        hr = g_acqShared->Notify(ND_CQ_NOTIFY_ANY, &ov);
        if (hr != ND_PENDING)
            FAIL("lockstep round %lu: the active Notify on an empty CQ returned 0x%08x", k, (unsigned)hr);
        Msg m = {0, uint32_t(k), CheckOf(0, uint32_t(k))};
        memcpy(g_sendBuf, &m, sizeof m);
        ND2_SGE ssge = {g_sendBuf, MSG, g_amr->GetLocalToken()};
        CHECK_HR(g_aqp[0]->Send(reinterpret_cast<void *>(uintptr_t(k)), &ssge, 1, 0));
        if (k % 2 == 0) {
            LockstepWaitPassive(k);
            LockstepWaitActive(k, ov);
        } else {
            LockstepWaitActive(k, ov);
            LockstepWaitPassive(k);
        }
    }
}

/* The phase the 60 s alarm names, and the handler that names it and shows every thread's stack. */
const char *volatile g_phase = "start";

void OnAlarm(int)
{
    const char *phase = g_phase;
    const char head[] = "nd2-stress: stuck for 60 s in: ";
    ssize_t ignored = write(2, head, sizeof head - 1);
    ignored = write(2, phase, strlen(phase));
    ignored = write(2, "\n", 1);
    (void)ignored;
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    pid_t child = fork();
    if (child == 0) {
        dup2(2, 1);
        execlp("gdb", "gdb", "-p", pid, "-batch", "-nx", "-ex", "thread apply all bt", (char *)NULL);
        _exit(127);
    }
    if (child > 0) {
        int status;
        waitpid(child, &status, 0);
    }
    _exit(1);
}

void Phase(const char *phase, unsigned seconds)
{
    g_phase = phase;
    alarm(seconds);
}

void Usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s PASSIVE_IP ACTIVE_IP [--completions N] [--reads R] [--depth D] [--port P] [--lockstep L]\n",
            argv0);
    exit(2);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 3)
        Usage(argv[0]);
    const char *passiveIp = argv[1], *activeIp = argv[2];
    unsigned long completions = 20000;
    unsigned short port = 7470;
    long reads = -1;
    for (int k = 3; k < argc; k += 2) {
        if (k + 1 >= argc)
            Usage(argv[0]);
        if (strcmp(argv[k], "--completions") == 0)
            completions = strtoul(argv[k + 1], NULL, 0);
        else if (strcmp(argv[k], "--reads") == 0)
            reads = strtol(argv[k + 1], NULL, 0);
        else if (strcmp(argv[k], "--depth") == 0)
            g_depth = ULONG(strtoul(argv[k + 1], NULL, 0));
        else if (strcmp(argv[k], "--lockstep") == 0)
            g_lockstep = strtoul(argv[k + 1], NULL, 0);
        else if (strcmp(argv[k], "--port") == 0)
            port = (unsigned short)atoi(argv[k + 1]);
        else
            Usage(argv[0]);
    }
    g_messages = completions / 2;
    if (g_messages < NQP || g_messages > 0xffffffffu || g_depth < 1 || g_depth > MAX_DEPTH) {
        fprintf(stderr, "--completions: at least %d (and below 2^33); --depth: 1 to %lu\n", 2 * NQP,
                (unsigned long)MAX_DEPTH);
        return 2;
    }
    g_reads = reads < 0 ? completions / 100 : (unsigned long)reads;
    for (int q = 0; q < NQP; q++)
        g_perQp[q] = g_messages / NQP + (unsigned long)(q < int(g_messages % NQP) ? 1 : 0);

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, OnAlarm);
    Phase("setup: adapters, files, regions, CQs, QPs", 60);
    CHECK_HR(NdStartup());
    Nd2Address passiveAt = nd2_ipv4(passiveIp, 0), activeAt = nd2_ipv4(activeIp, 0);
    IND2Adapter *pad = NULL, *aad = NULL;
    CHECK_HR(NdOpenAdapter(IID_IND2Adapter, passiveAt.Sa(), passiveAt.Len(), reinterpret_cast<void **>(&pad)));
    CHECK_HR(NdOpenAdapter(IID_IND2Adapter, activeAt.Sa(), activeAt.Len(), reinterpret_cast<void **>(&aad)));
    /* Passive files: requests (events), the port's, the pool's. Active: one, events. */
    HANDLE pctl = NULL, pportFile = NULL, ppoolFile = NULL, actl = NULL;
    CHECK_HR(pad->CreateOverlappedFile(&pctl));
    CHECK_HR(pad->CreateOverlappedFile(&pportFile));
    CHECK_HR(pad->CreateOverlappedFile(&ppoolFile));
    CHECK_HR(aad->CreateOverlappedFile(&actl));
    g_port = CreateIoCompletionPort(pportFile, NULL, PORT_KEY, 0);
    EXPECT(g_port != NULL);
    EXPECT(BindIoCompletionCallback(ppoolFile, OnComplete, 0));

    size_t bufLen = size_t(NQP) * g_depth * SLOT;
    g_recvBuf = static_cast<unsigned char *>(calloc(1, bufLen));
    g_sendBuf = static_cast<unsigned char *>(calloc(1, bufLen));
    EXPECT(g_recvBuf != NULL && g_sendBuf != NULL);
    g_pmr = Register(pad, pctl, g_recvBuf, bufLen);
    g_amr = Register(aad, actl, g_sendBuf, bufLen);
    for (ULONG k = 0; k < READ_SOURCE; k++)
        g_readSource[k] = (unsigned char)(k * 7 + k / READ_LEN);
    IND2MemoryRegion *sourceMr = NULL;
    CHECK_HR(aad->CreateMemoryRegion(IID_IND2MemoryRegion, actl, reinterpret_cast<void **>(&sourceMr)));
    {
        Ov ov;
        Completes("Register (Read source)", sourceMr,
                  sourceMr->Register(g_readSource, READ_SOURCE, ND_MR_FLAG_ALLOW_REMOTE_READ, &ov), ov);
    }
    g_readToken = sourceMr->GetRemoteToken();
    g_pad = pad;
    g_pctl = pctl;

    g_shared.name = "passive CQ of QP0+QP1 (port)";
    g_shared.cq = Cq(pad, pportFile, 4 * g_depth);
    g_shared.qps[0] = 0;
    g_shared.qps[1] = 1;
    g_shared.nqps = 2;
    g_own2.name = "passive CQ of QP2 (port)";
    g_own2.cq = Cq(pad, pportFile, 2 * g_depth);
    g_own2.qps[0] = 2;
    g_own2.nqps = 1;
    g_own3.name = "passive CQ of QP3 (BindIoCompletionCallback)";
    g_own3.cq = Cq(pad, ppoolFile, 2 * g_depth);
    g_own3.qps[0] = 3;
    g_own3.nqps = 1;
    PassiveCq *pcqOf[NQP] = {&g_shared, &g_shared, &g_own2, &g_own3};
    g_acqShared = Cq(aad, actl, 4 * g_depth);
    g_acq2 = Cq(aad, actl, 2 * g_depth);
    g_acq3 = Cq(aad, actl, 2 * g_depth);
    IND2CompletionQueue *acqOf[NQP] = {g_acqShared, g_acqShared, g_acq2, g_acq3};

    for (int q = 0; q < NQP; q++) {
        g_pqp[q] = Qp(pad, pcqOf[q]->cq, g_depth, 1);
        g_aqp[q] = Qp(aad, acqOf[q], 1, g_depth);
        for (ULONG k = 0; k < g_depth && k < g_perQp[q]; k++)
            PostReceive(q);
    }

    /* The four connections, one after another, through one listener. */
    Phase("setup: the four connections", 60);
    sockaddr_in listenAt = nd2_ipv4(passiveIp, port);
    Nd2Address at(listenAt);
    IND2Listener *listener = NULL;
    CHECK_HR(pad->CreateListener(IID_IND2Listener, pctl, reinterpret_cast<void **>(&listener)));
    CHECK_HR(listener->Bind(at.Sa(), at.Len()));
    CHECK_HR(listener->Listen(NQP));
    IND2Connector *pc[NQP], *ac[NQP];
    for (int q = 0; q < NQP; q++) {
        CHECK_HR(pad->CreateConnector(IID_IND2Connector, pctl, reinterpret_cast<void **>(&pc[q])));
        CHECK_HR(aad->CreateConnector(IID_IND2Connector, actl, reinterpret_cast<void **>(&ac[q])));
        Ov get, conn, acc, comp;
        HRESULT getHr = listener->GetConnectionRequest(pc[q], &get);
        HRESULT connHr = ac[q]->Connect(g_aqp[q], at.Sa(), at.Len(), 1, 1, NULL, 0, &conn);
        Completes("GetConnectionRequest", listener, getHr, get);
        HRESULT accHr = pc[q]->Accept(g_pqp[q], 1, 1, NULL, 0, &acc);
        Completes("Connect", ac[q], connHr, conn);
        Completes("CompleteConnect", ac[q], ac[q]->CompleteConnect(&comp), comp);
        Completes("Accept", pc[q], accHr, acc);
    }
    EXPECT(listener->Release() == 0);

    Phase("the run (its own watchdog: 20 s without a completion fails it)", 0);
    double start = nd2_now_us();
    /* The passive CQs' first Notify each; their completions drive everything after. */
    for (PassiveCq *c : {&g_shared, &g_own2, &g_own3}) {
        pthread_mutex_lock(&c->lock);
        HRESULT hr = c->cq->Notify(ND_CQ_NOTIFY_ANY, &c->ov);
        EXPECT(hr == ND_PENDING || hr == ND_SUCCESS);
        pthread_mutex_unlock(&c->lock);
    }
    pthread_t gqcs, gqcsEx, event, sender, reader;
    EXPECT(pthread_create(&gqcs, NULL, GqcsThread, NULL) == 0);
    EXPECT(pthread_create(&gqcsEx, NULL, GqcsExThread, NULL) == 0);
    EXPECT(pthread_create(&event, NULL, EventThread, NULL) == 0);
    EXPECT(pthread_create(&sender, NULL, SenderThread, NULL) == 0);
    EXPECT(pthread_create(&reader, NULL, ReaderThread, NULL) == 0);

    /* Progress or fail: 20 s without a new completion is a lost one (or a lost wake-up). */
    unsigned long last = 0;
    double lastAt = nd2_now_us();
    while (!(g_shared.done.load() && g_own2.done.load() && g_own3.done.load() &&
             g_sendDone[0].load() == g_perQp[0] && g_sendDone[1].load() == g_perQp[1] &&
             g_sendDone[2].load() == g_perQp[2] && g_sendDone[3].load() == g_perQp[3])) {
        usleep(20 * 1000);
        unsigned long now = g_progress.load();
        if (now != last) {
            last = now;
            lastAt = nd2_now_us();
        } else if (nd2_now_us() - lastAt > 20e6) {
            fprintf(stderr, "no completion in 20 s; per QP: posted/taken receives, sent/done sends:\n");
            for (int q = 0; q < NQP; q++)
                fprintf(stderr, "  QP%d: %lu/%lu, %lu/%lu of %lu\n", q, g_posted[q].load(), g_taken[q].load(),
                        g_sent[q].load(), g_sendDone[q].load(), g_perQp[q]);
            fprintf(stderr, "  Reads on QP%d: %lu issued, %lu done of %lu\n", READ_QP, g_readsIssued.load(),
                    g_readsDone.load(), g_reads);
            fprintf(stderr, "  done: shared %d own2 %d own3 %d\n", (int)g_shared.done.load(),
                    (int)g_own2.done.load(), (int)g_own3.done.load());
            exit(1);
        }
    }
    double elapsed = nd2_now_us() - start;
    Phase("the waiter threads' end (quit packets, joins)", 60);
    EXPECT(PostQueuedCompletionStatus(g_port, 0, QUIT_KEY, NULL));
    EXPECT(PostQueuedCompletionStatus(g_port, 0, QUIT_KEY, NULL));
    EXPECT(pthread_join(gqcs, NULL) == 0);
    EXPECT(pthread_join(gqcsEx, NULL) == 0);
    EXPECT(pthread_join(event, NULL) == 0);
    EXPECT(pthread_join(sender, NULL) == 0);
    EXPECT(pthread_join(reader, NULL) == 0);
    /* The pool's last callback may still be returning: take its lock once. */
    pthread_mutex_lock(&g_own3.lock);
    pthread_mutex_unlock(&g_own3.lock);

    Phase("the lockstep (each Notify for its one completion)", 60 + unsigned(g_lockstep / 20));
    double lockStart = nd2_now_us();
    Lockstep();
    double lockElapsed = nd2_now_us() - lockStart;

    unsigned long receives = 0, sends = 0;
    for (int q = 0; q < NQP; q++) {
        EXPECT(g_taken[q].load() == g_perQp[q] && g_posted[q].load() == g_perQp[q]);
        EXPECT(g_sendDone[q].load() == g_perQp[q] && g_sent[q].load() == g_perQp[q]);
        receives += g_taken[q].load();
        sends += g_sendDone[q].load();
    }
    EXPECT(receives == g_messages && sends == g_messages);
    EXPECT(g_readsDone.load() == g_reads && g_readsIssued.load() == g_reads);
    EXPECT(g_shared.results + g_own2.results + g_own3.results == g_messages + g_reads);
    for (PassiveCq *c : {&g_shared, &g_own2, &g_own3}) {
        ND2_RESULT r;
        EXPECT(c->cq->GetResults(&r, 1) == 0);
    }
    for (IND2CompletionQueue *cq : {g_acqShared, g_acq2, g_acq3}) {
        ND2_RESULT r;
        EXPECT(cq->GetResults(&r, 1) == 0);
    }
    printf("  %lu completions (%lu receives, %lu sends over %d QPs), each once, each QP's in order\n",
           receives + sends, receives, sends, NQP);
    printf("  %lu RDMA Reads on QP%d, each into a region registered just before it, in order, each once, data "
           "checked\n",
           g_reads, READ_QP);
    printf("  results per CQ: shared %lu (%lu wake-ups), QP2 %lu (%lu), QP3 %lu (%lu)\n", g_shared.results,
           g_shared.wakes, g_own2.results, g_own2.wakes, g_own3.results, g_own3.wakes);
    printf("  waiters: GetQueuedCompletionStatus %lu packets, GetQueuedCompletionStatusEx %lu packets in %lu "
           "calls, BindIoCompletionCallback %lu callbacks, event %lu waits, %lu polls (%lu empty), %lu Notify "
           "inline\n",
           g_gqcsPackets.load(), g_gqcsExPackets.load(), g_gqcsExCalls.load(), g_callbacks.load(),
           g_eventWaits.load(), g_polls.load(), g_emptyPolls.load(), g_notifyInline.load());
    printf("  %.3f s, %.0f completions/s (the Reads' included)\n", elapsed / 1e6,
           (receives + sends + g_reads) / (elapsed / 1e6));
    printf("  lockstep: %lu rounds of one Send on QP0, each end's Notify complete for that one completion "
           "(GetQueuedCompletionStatus, event) in %.3f s\n",
           g_lockstep, lockElapsed / 1e6);

    Phase("teardown: Disconnect and Release", 60);
    for (int q = 0; q < NQP; q++) {
        Ov ad, pd;
        HRESULT adHr = ac[q]->Disconnect(&ad);
        HRESULT pdHr = pc[q]->Disconnect(&pd);
        Completes("Disconnect (active)", ac[q], adHr, ad);
        Completes("Disconnect (passive)", pc[q], pdHr, pd);
        EXPECT(ac[q]->Release() == 0);
        EXPECT(pc[q]->Release() == 0);
        EXPECT(g_aqp[q]->Release() == 0);
        EXPECT(g_pqp[q]->Release() == 0);
    }
    for (PassiveCq *c : {&g_shared, &g_own2, &g_own3})
        EXPECT(c->cq->Release() == 0);
    for (IND2CompletionQueue *cq : {g_acqShared, g_acq2, g_acq3})
        EXPECT(cq->Release() == 0);
    Phase("teardown: Deregister, CloseHandle, the adapters' Release, NdCleanup", 60);
    Deregister(sourceMr);
    Deregister(g_pmr);
    Deregister(g_amr);
    CloseHandle(g_port);
    CloseHandle(pctl);
    CloseHandle(pportFile);
    CloseHandle(ppoolFile);
    CloseHandle(actl);
    EXPECT(pad->Release() == 0);
    EXPECT(aad->Release() == 0);
    CHECK_HR(NdCleanup());
    alarm(0);
    free(g_recvBuf);
    free(g_sendBuf);
    printf("nd2-stress: ok\n");
    return 0;
}
