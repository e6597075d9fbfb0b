/*
 * nd2-cq-notify: IND2CompletionQueue::Notify as IND2CompletionQueue.md has it, one case per run.
 *
 *   nd2-cq-notify CASE PASSIVE_IP ACTIVE_IP [--count N]   (nd2-cq-notify --list: the cases)
 *
 * Both ends live in this process: the passive one (listener, receiver) on PASSIVE_IP, the active
 * one on ACTIVE_IP. Every wait is bounded: a Notify that never completes fails the case instead of
 * hanging it. OVERLAPPEDs carry their own events (the file is bound to no completion port).
 *
 * The cases:
 *   completion-present-before-notify  two receives on a QP never connected, Flush, and only then
 *       Notify(ANY): it completes (the flushed completions were in the CQ before it), and
 *       GetResults(2) returns both, ND_CANCELED, Receive (as Microsoft's ndreceiveflushqp).
 *   drain-then-notify  --count N exchanges (default 10000) between the two ends, each end waiting
 *       as IND2CompletionQueue.md asks: GetResults until it returns fewer than asked, then
 *       Notify(ANY) and the wait, then GetResults again (the completion wanted is often in the
 *       CQ before that Notify: the kernel's rxe may deliver within the peer's post). Prints the
 *       time per exchange and how many Notify requests were complete when Notify returned.
 *   errors-not-completed-by-success  Notify(ERRORS) stays pending across a completion that was in
 *       the CQ before it and one that comes after; CancelOverlappedRequests ends it ND_CANCELED.
 *   errors-on-overrun  more flushed receives than the CQ holds: the CQ's overrun completes a
 *       waiting Notify(ERRORS) with ND_BUFFER_OVERFLOW, and a later Notify fails inline so.
 *   solicited  Notify(SOLICITED) stays pending across a plain Send's receive and completes on a
 *       Send with ND_OP_FLAG_SEND_AND_SOLICIT_EVENT; with a SOLICITED and an ANY request waiting,
 *       a plain Send completes both (ANY takes precedence).
 *   multiple-notifies  three Notify(ANY) waiting complete on one completion; a fourth, issued
 *       before GetResults took that completion, completes at once.
 *   srq-limit  an SRQ's Notify completes when its receives fall below the threshold (given at
 *       creation; kept by Modify with threshold 0; set by Modify), each Notify arming it again.
 *   srq-notify-below-threshold  an SRQ's Notify issued while the SRQ already holds fewer receives
 *       than the threshold (none; one) completes at once; with more it waits for the limit event.
 *   notify-getresults-order  a thread Notifies (ANY) again and again on the passive CQ while the
 *       main thread takes --count N receives (default 4000, rounds of 32) with GetResults of 1 to
 *       4: every receive comes back once, in the order posted (a Notify takes nothing from the
 *       program: Windows' never consumes a completion).
 *   unload-while-alive  DllCanUnloadNow is S_FALSE while an adapter, its CQ or QP, or a thread of
 *       nd-shim's (the adapter's relay and event threads) lives, and S_OK within 2 s of the last
 *       Release.
 */
#include "nd2-common.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <vector>

namespace {

const DWORD WAIT_MS = 10000;
const unsigned short PORT = 7460;

typedef Nd2EventOv Ov;

/* `ov`'s request completes within WAIT_MS with `want`. */
void Completes(const char *what, IND2Overlapped *object, Ov &ov, HRESULT want)
{
    HRESULT hr = ov.Wait(object, WAIT_MS);
    if (hr != want)
        FAIL("%s: 0x%08x, want 0x%08x%s", what, (unsigned)hr, (unsigned)want,
             hr == ND_PENDING ? " (still pending after 10 s)" : "");
}

/* `ov`'s request is still pending after `ms`. */
void StaysPending(const char *what, IND2Overlapped *object, Ov &ov, DWORD ms)
{
    HRESULT hr = ov.Wait(object, ms);
    if (hr != ND_PENDING)
        FAIL("%s: completed 0x%08x, want still pending", what, (unsigned)hr);
}

/* One end: adapter, file, CQ, MR over its buffer. */
struct End {
    sockaddr_in address;
    IND2Adapter *adapter = NULL;
    HANDLE file = NULL;
    IND2CompletionQueue *cq = NULL;
    IND2MemoryRegion *mr = NULL;
    unsigned char buf[4096];

    End(const char *ip, ULONG cqDepth)
    {
        address = nd2_ipv4(ip, 0);
        CHECK_HR(NdOpenAdapter(IID_IND2Adapter, reinterpret_cast<const sockaddr *>(&address), sizeof address,
                               reinterpret_cast<void **>(&adapter)));
        CHECK_HR(adapter->CreateOverlappedFile(&file));
        CHECK_HR(adapter->CreateCompletionQueue(IID_IND2CompletionQueue, file, cqDepth, 0, 0,
                                                reinterpret_cast<void **>(&cq)));
        CHECK_HR(adapter->CreateMemoryRegion(IID_IND2MemoryRegion, file, reinterpret_cast<void **>(&mr)));
        Ov ov;
        CHECK_HR(Await(mr, mr->Register(buf, sizeof buf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov), ov));
    }

    ~End()
    {
        Ov ov;
        CHECK_HR(Await(mr, mr->Deregister(&ov), ov));
        EXPECT(mr->Release() == 0);
        EXPECT(cq->Release() == 0);
        CloseHandle(file);
        EXPECT(adapter->Release() == 0);
    }

    static HRESULT Await(IND2Overlapped *object, HRESULT issued, Ov &ov)
    {
        if (issued != ND_PENDING)
            return issued;
        HRESULT hr = ov.Wait(object, 15000);
        EXPECT(hr != ND_PENDING);
        return hr;
    }

    IND2QueuePair *Qp(ULONG receiveDepth, ULONG initiatorDepth)
    {
        IND2QueuePair *qp = NULL;
        CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, this, receiveDepth, initiatorDepth, 1, 1, 0,
                                          reinterpret_cast<void **>(&qp)));
        return qp;
    }

    ND2_SGE Sge(ULONG at, ULONG length) { return ND2_SGE{buf + at, length, mr->GetLocalToken()}; }

    void Receive(IND2QueuePair *qp, uintptr_t context, ULONG at = 0)
    {
        ND2_SGE sge = Sge(at, 64);
        CHECK_HR(qp->Receive(reinterpret_cast<void *>(context), &sge, 1));
    }

    void Send(IND2QueuePair *qp, uintptr_t context, ULONG flags = 0)
    {
        ND2_SGE sge = Sge(2048, 64);
        CHECK_HR(qp->Send(reinterpret_cast<void *>(context), &sge, 1, flags));
    }

    /* Polls (no Notify) until `n` results are in, at most WAIT_MS. */
    void Poll(ND2_RESULT *r, ULONG n)
    {
        double until = nd2_now_us() + WAIT_MS * 1e3;
        ULONG got = 0;
        while (got < n) {
            got += cq->GetResults(r + got, n - got);
            if (got < n && nd2_now_us() > until)
                FAIL("%lu of %lu results in 10 s", (unsigned long)got, (unsigned long)n);
        }
    }

    /* The CQ is empty. */
    void ExpectEmpty()
    {
        ND2_RESULT r;
        EXPECT(cq->GetResults(&r, 1) == 0);
    }
};

/* A connected pair: the passive end's QP accepted the active end's. */
struct Pair {
    End passive;
    End active;
    IND2QueuePair *pqp;
    IND2QueuePair *aqp;
    IND2Connector *pc = NULL;
    IND2Connector *ac = NULL;

    Pair(const char *passiveIp, const char *activeIp, ULONG depth = 16)
        : passive(passiveIp, 64), active(activeIp, 64), pqp(passive.Qp(depth, depth)), aqp(active.Qp(depth, depth))
    {
        Connect(pqp);
    }

    /* A pair whose passive QP the caller made (on an SRQ). */
    Pair(const char *passiveIp, const char *activeIp, IND2QueuePair *(*make)(End &))
        : passive(passiveIp, 64), active(activeIp, 64), pqp(make(passive)), aqp(active.Qp(16, 16))
    {
        Connect(pqp);
    }

    void Connect(IND2QueuePair *qp)
    {
        sockaddr_in at = passive.address;
        at.sin_port = htons(PORT);
        IND2Listener *l = NULL;
        CHECK_HR(passive.adapter->CreateListener(IID_IND2Listener, passive.file, reinterpret_cast<void **>(&l)));
        CHECK_HR(l->Bind(reinterpret_cast<const sockaddr *>(&at), sizeof at));
        CHECK_HR(l->Listen(1));
        CHECK_HR(passive.adapter->CreateConnector(IID_IND2Connector, passive.file, reinterpret_cast<void **>(&pc)));
        CHECK_HR(active.adapter->CreateConnector(IID_IND2Connector, active.file, reinterpret_cast<void **>(&ac)));
        Ov get, conn, acc, comp;
        EXPECT(l->GetConnectionRequest(pc, &get) == ND_PENDING);
        EXPECT(ac->Connect(aqp, reinterpret_cast<const sockaddr *>(&at), sizeof at, 0, 0, NULL, 0, &conn) ==
               ND_PENDING);
        Completes("GetConnectionRequest", l, get, ND_SUCCESS);
        EXPECT(pc->Accept(qp, 0, 0, NULL, 0, &acc) == ND_PENDING);
        Completes("Connect", ac, conn, ND_SUCCESS);
        EXPECT(ac->CompleteConnect(&comp) == ND_PENDING);
        Completes("CompleteConnect", ac, comp, ND_SUCCESS);
        Completes("Accept", pc, acc, ND_SUCCESS);
        EXPECT(l->Release() == 0);
    }

    ~Pair()
    {
        Ov ad, pd;
        EXPECT(ac->Disconnect(&ad) == ND_PENDING);
        EXPECT(pc->Disconnect(&pd) == ND_PENDING);
        Completes("Disconnect (active)", ac, ad, ND_SUCCESS);
        Completes("Disconnect (passive)", pc, pd, ND_SUCCESS);
        EXPECT(ac->Release() == 0);
        EXPECT(pc->Release() == 0);
        EXPECT(aqp->Release() == 0);
        EXPECT(pqp->Release() == 0);
        /* Flushed requests after the disconnect, if any, leave with the CQs. */
    }
};

void ExpectResult(const ND2_RESULT &r, HRESULT status, uintptr_t context, ND2_REQUEST_TYPE type)
{
    if (r.Status != status || reinterpret_cast<uintptr_t>(r.RequestContext) != context || r.RequestType != type)
        FAIL("result status 0x%08x context %lu type %d, want 0x%08x %lu %d", (unsigned)r.Status,
             (unsigned long)reinterpret_cast<uintptr_t>(r.RequestContext), (int)r.RequestType, (unsigned)status,
             (unsigned long)context, (int)type);
}

struct Args {
    const char *passiveIp;
    const char *activeIp;
    unsigned long count;
};

int completion_present_before_notify(const Args &a)
{
    End end(a.passiveIp, 16);
    IND2QueuePair *qp = end.Qp(4, 4);
    end.Receive(qp, 1, 0);
    end.Receive(qp, 2, 64);
    CHECK_HR(qp->Flush());
    /* The flush is the kernel's work: give it time to put both completions in the CQ. */
    usleep(300 * 1000);
    Ov ov;
    HRESULT hr = end.cq->Notify(ND_CQ_NOTIFY_ANY, &ov);
    EXPECT(hr == ND_PENDING || hr == ND_SUCCESS);
    if (hr == ND_PENDING)
        Completes("Notify(ANY) with completions already in the CQ", end.cq, ov, ND_SUCCESS);
    ND2_RESULT r[2];
    ULONG n = end.cq->GetResults(r, 2);
    if (n != 2)
        FAIL("GetResults(2) after the Notify: %lu", (unsigned long)n);
    ExpectResult(r[0], ND_CANCELED, 1, Nd2RequestTypeReceive);
    ExpectResult(r[1], ND_CANCELED, 2, Nd2RequestTypeReceive);
    end.ExpectEmpty();
    EXPECT(qp->Release() == 0);
    return 0;
}

/* How an end waits: the counts it prints. */
struct Waits {
    unsigned long notifies = 0;
    unsigned long atOnce = 0; /* Notify requests already complete when Notify returned */
};

/*
 * The next results of `end` (up to 4 into `got`), waiting as IND2CompletionQueue.md asks:
 * GetResults until it returns fewer than asked, then Notify(ANY) and the wait, then GetResults
 * again. `drained` says the last GetResults was short: a Notify comes before the next one, even
 * if the completion wanted is already in the CQ (then the Notify must complete at once).
 */
ULONG NextResults(End &end, Ov &ov, bool &drained, ND2_RESULT *got, Waits &w)
{
    for (;;) {
        if (drained) {
            ov.Reset();
            HRESULT hr = end.cq->Notify(ND_CQ_NOTIFY_ANY, &ov);
            w.notifies++;
            if (hr == ND_PENDING && end.cq->GetOverlappedResult(&ov, FALSE) != ND_PENDING)
                w.atOnce++;
            if (hr == ND_PENDING)
                hr = ov.Wait(end.cq, WAIT_MS);
            if (hr == ND_PENDING)
                FAIL("Notify(ANY) after GetResults came up short: no completion in 10 s (a lost one?)");
            CHECK_HR(hr);
            drained = false;
        }
        ULONG n = end.cq->GetResults(got, 4);
        if (n < 4)
            drained = true;
        if (n > 0)
            return n;
    }
}

int drain_then_notify(const Args &a)
{
    Pair s(a.passiveIp, a.activeIp);
    Ov pov, aov;
    bool pdrained = false, adrained = false;
    Waits w;
    /* The passive end's answers whose sends completed. */
    unsigned long answered = 0;
    /* Receive contexts 2i, send contexts 2i + 1. */
    s.passive.Receive(s.pqp, 0);
    s.active.Receive(s.aqp, 0);
    double began = nd2_now_us();
    for (unsigned long i = 0; i < a.count; i++) {
        uintptr_t recv = 2 * i, send = recv + 1, next = 2 * (i + 1);
        s.active.Send(s.aqp, send);
        /* The passive end: its receive, then its answer; the next receive posted first. */
        bool received = false;
        while (!received) {
            ND2_RESULT r[4];
            ULONG n = NextResults(s.passive, pov, pdrained, r, w);
            for (ULONG k = 0; k < n; k++) {
                if (r[k].RequestType == Nd2RequestTypeSend) {
                    /* An earlier answer's send. */
                    ExpectResult(r[k], ND_SUCCESS, 2 * answered + 1, Nd2RequestTypeSend);
                    answered++;
                    continue;
                }
                ExpectResult(r[k], ND_SUCCESS, recv, Nd2RequestTypeReceive);
                received = true;
            }
        }
        s.passive.Receive(s.pqp, next);
        s.passive.Send(s.pqp, send);
        /* The active end: its send and the answer, either order. */
        bool sent = false, answered = false;
        while (!sent || !answered) {
            ND2_RESULT r[4];
            ULONG n = NextResults(s.active, aov, adrained, r, w);
            for (ULONG k = 0; k < n; k++) {
                if (r[k].RequestType == Nd2RequestTypeSend) {
                    ExpectResult(r[k], ND_SUCCESS, send, Nd2RequestTypeSend);
                    sent = true;
                } else {
                    ExpectResult(r[k], ND_SUCCESS, recv, Nd2RequestTypeReceive);
                    answered = true;
                    s.active.Receive(s.aqp, next);
                }
            }
        }
    }
    double us = nd2_now_us() - began;
    printf("  %lu exchanges in %.2f s: %.1f us each; %.2f Notify per exchange, %.2f of them complete when "
           "Notify returned\n",
           a.count, us / 1e6, us / a.count, (double)w.notifies / a.count, (double)w.atOnce / a.count);
    /* The passive end's last answers' send completions. */
    while (answered < a.count) {
        ND2_RESULT r;
        s.passive.Poll(&r, 1);
        ExpectResult(r, ND_SUCCESS, 2 * answered + 1, Nd2RequestTypeSend);
        answered++;
    }
    s.passive.ExpectEmpty();
    return 0;
}

int errors_not_completed_by_success(const Args &a)
{
    Pair s(a.passiveIp, a.activeIp);
    s.passive.Receive(s.pqp, 1);
    s.passive.Receive(s.pqp, 2);
    s.active.Send(s.aqp, 3);
    ND2_RESULT r;
    s.active.Poll(&r, 1);
    ExpectResult(r, ND_SUCCESS, 3, Nd2RequestTypeSend);
    usleep(100 * 1000);
    /* One completion already in the passive CQ: it does not complete an ERRORS request. */
    Ov errors;
    EXPECT(s.passive.cq->Notify(ND_CQ_NOTIFY_ERRORS, &errors) == ND_PENDING);
    StaysPending("Notify(ERRORS) with a successful completion in the CQ", s.passive.cq, errors, 300);
    /* Nor does one that comes after it. */
    s.active.Send(s.aqp, 4);
    s.active.Poll(&r, 1);
    ExpectResult(r, ND_SUCCESS, 4, Nd2RequestTypeSend);
    StaysPending("Notify(ERRORS) across a new successful completion", s.passive.cq, errors, 300);
    ND2_RESULT got[2];
    s.passive.Poll(got, 2);
    ExpectResult(got[0], ND_SUCCESS, 1, Nd2RequestTypeReceive);
    ExpectResult(got[1], ND_SUCCESS, 2, Nd2RequestTypeReceive);
    StaysPending("Notify(ERRORS) after GetResults", s.passive.cq, errors, 100);
    CHECK_HR(s.passive.cq->CancelOverlappedRequests());
    Completes("Notify(ERRORS), cancelled", s.passive.cq, errors, ND_CANCELED);
    return 0;
}

int errors_on_overrun(const Args &a)
{
    const ULONG RECEIVES = 64;
    End end(a.passiveIp, 1);
    IND2QueuePair *qp = end.Qp(RECEIVES, 1);
    for (ULONG k = 0; k < RECEIVES; k++)
        end.Receive(qp, k + 1, 0);
    Ov errors;
    EXPECT(end.cq->Notify(ND_CQ_NOTIFY_ERRORS, &errors) == ND_PENDING);
    StaysPending("Notify(ERRORS) before the overrun", end.cq, errors, 100);
    CHECK_HR(qp->Flush());
    Completes("Notify(ERRORS) on a CQ overrun", end.cq, errors, ND_BUFFER_OVERFLOW);
    Ov after;
    HRESULT hr = end.cq->Notify(ND_CQ_NOTIFY_ANY, &after);
    if (hr != ND_BUFFER_OVERFLOW)
        FAIL("Notify on the overrun CQ: 0x%08x, want ND_BUFFER_OVERFLOW inline", (unsigned)hr);
    EXPECT(qp->Release() == 0);
    return 0;
}

int solicited(const Args &a)
{
    Pair s(a.passiveIp, a.activeIp);
    for (uintptr_t k = 1; k <= 3; k++)
        s.passive.Receive(s.pqp, k, 64 * (k - 1));
    Ov sol;
    EXPECT(s.passive.cq->Notify(ND_CQ_NOTIFY_SOLICITED, &sol) == ND_PENDING);
    s.active.Send(s.aqp, 11);
    ND2_RESULT r;
    s.active.Poll(&r, 1);
    ExpectResult(r, ND_SUCCESS, 11, Nd2RequestTypeSend);
    StaysPending("Notify(SOLICITED) across a plain Send's receive", s.passive.cq, sol, 300);
    s.active.Send(s.aqp, 12, ND_OP_FLAG_SEND_AND_SOLICIT_EVENT);
    Completes("Notify(SOLICITED) on a solicited Send's receive", s.passive.cq, sol, ND_SUCCESS);
    s.active.Poll(&r, 1);
    ExpectResult(r, ND_SUCCESS, 12, Nd2RequestTypeSend);
    ND2_RESULT got[2];
    s.passive.Poll(got, 2);
    ExpectResult(got[0], ND_SUCCESS, 1, Nd2RequestTypeReceive);
    ExpectResult(got[1], ND_SUCCESS, 2, Nd2RequestTypeReceive);
    s.passive.ExpectEmpty();
    /* ANY takes precedence: a SOLICITED and an ANY request waiting, a plain Send completes both. */
    Ov sol2, any;
    EXPECT(s.passive.cq->Notify(ND_CQ_NOTIFY_SOLICITED, &sol2) == ND_PENDING);
    EXPECT(s.passive.cq->Notify(ND_CQ_NOTIFY_ANY, &any) == ND_PENDING);
    StaysPending("Notify(SOLICITED) with nothing new", s.passive.cq, sol2, 100);
    s.active.Send(s.aqp, 13);
    Completes("Notify(ANY) on a plain Send's receive", s.passive.cq, any, ND_SUCCESS);
    Completes("Notify(SOLICITED) with an ANY waiting too", s.passive.cq, sol2, ND_SUCCESS);
    s.active.Poll(&r, 1);
    s.passive.Poll(got, 1);
    ExpectResult(got[0], ND_SUCCESS, 3, Nd2RequestTypeReceive);
    return 0;
}

int multiple_notifies(const Args &a)
{
    Pair s(a.passiveIp, a.activeIp);
    s.passive.Receive(s.pqp, 1);
    Ov ov[3];
    for (Ov &o : ov)
        EXPECT(s.passive.cq->Notify(ND_CQ_NOTIFY_ANY, &o) == ND_PENDING);
    StaysPending("Notify(ANY) with nothing new", s.passive.cq, ov[0], 100);
    s.active.Send(s.aqp, 2);
    for (Ov &o : ov)
        Completes("each of three Notify(ANY) on one completion", s.passive.cq, o, ND_SUCCESS);
    /* The completion is not taken yet: a new Notify completes at once. */
    Ov fourth;
    HRESULT hr = s.passive.cq->Notify(ND_CQ_NOTIFY_ANY, &fourth);
    EXPECT(hr == ND_PENDING || hr == ND_SUCCESS);
    if (hr == ND_PENDING)
        Completes("Notify(ANY) with the completion not taken yet", s.passive.cq, fourth, ND_SUCCESS);
    ND2_RESULT r;
    s.passive.Poll(&r, 1);
    ExpectResult(r, ND_SUCCESS, 1, Nd2RequestTypeReceive);
    s.passive.ExpectEmpty();
    s.active.Poll(&r, 1);
    ExpectResult(r, ND_SUCCESS, 2, Nd2RequestTypeSend);
    return 0;
}

IND2SharedReceiveQueue *g_srq = NULL;

/* The passive QP of srq-limit: on an SRQ of 16 receives with a notify threshold of 2. */
IND2QueuePair *QpOnSrq(End &end)
{
    CHECK_HR(end.adapter->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, end.file, 16, 1, 2, 0, 0,
                                                   reinterpret_cast<void **>(&g_srq)));
    IND2QueuePair *qp = NULL;
    CHECK_HR(end.adapter->CreateQueuePairWithSrq(IID_IND2QueuePair, end.cq, end.cq, g_srq, &end, 16, 1, 0,
                                                 reinterpret_cast<void **>(&qp)));
    return qp;
}

/* `n` SRQ receives, contexts from `first`. */
void SrqReceives(End &end, uintptr_t first, ULONG n)
{
    for (ULONG k = 0; k < n; k++) {
        ND2_SGE sge = end.Sge(64 * ((first + k) % 8), 64);
        CHECK_HR(g_srq->Receive(reinterpret_cast<void *>(first + k), &sge, 1));
    }
}

int srq_limit(const Args &a)
{
    {
        Pair s(a.passiveIp, a.activeIp, QpOnSrq);
        ND2_RESULT got[4];
        /* The threshold given at creation: 4 receives, the Notify completes at 1 left. */
        SrqReceives(s.passive, 1, 4);
        Ov ov;
        EXPECT(g_srq->Notify(&ov) == ND_PENDING);
        s.active.Send(s.aqp, 100);
        s.active.Poll(got, 1);
        StaysPending("SRQ Notify, 3 receives left (threshold 2)", g_srq, ov, 200);
        s.active.Send(s.aqp, 101);
        s.active.Poll(got, 1);
        StaysPending("SRQ Notify, 2 receives left (threshold 2)", g_srq, ov, 200);
        s.active.Send(s.aqp, 102);
        Completes("SRQ Notify, 1 receive left (threshold 2)", g_srq, ov, ND_SUCCESS);
        s.active.Poll(got, 1);
        s.passive.Poll(got, 3);
        /* Modify with threshold 0 keeps it; the next Notify arms it again (the device disarmed it). */
        CHECK_HR(g_srq->Modify(0, 0));
        SrqReceives(s.passive, 5, 3);
        Ov again;
        EXPECT(g_srq->Notify(&again) == ND_PENDING);
        s.active.Send(s.aqp, 103);
        s.active.Send(s.aqp, 104);
        s.active.Poll(got, 2);
        StaysPending("SRQ Notify again, 2 receives left", g_srq, again, 200);
        s.active.Send(s.aqp, 105);
        Completes("SRQ Notify again, 1 receive left (the threshold kept by Modify(0, 0))", g_srq, again,
                  ND_SUCCESS);
        s.active.Poll(got, 1);
        s.passive.Poll(got, 3);
        /* A threshold set by Modify: 3; one receive taken leaves 0 (< 3). */
        CHECK_HR(g_srq->Modify(0, 3));
        Ov third;
        EXPECT(g_srq->Notify(&third) == ND_PENDING);
        s.active.Send(s.aqp, 106);
        Completes("SRQ Notify, threshold 3 from Modify", g_srq, third, ND_SUCCESS);
        s.active.Poll(got, 1);
        s.passive.Poll(got, 1);
    }
    EXPECT(g_srq->Release() == 0);
    return 0;
}

int srq_notify_below_threshold(const Args &a)
{
    {
        Pair s(a.passiveIp, a.activeIp, QpOnSrq);
        ND2_RESULT got[4];
        /* Threshold 2 (QpOnSrq), no receive posted. */
        Ov empty;
        EXPECT(g_srq->Notify(&empty) == ND_PENDING);
        Completes("SRQ Notify on an empty SRQ (threshold 2)", g_srq, empty, ND_SUCCESS);
        SrqReceives(s.passive, 1, 1);
        Ov one;
        EXPECT(g_srq->Notify(&one) == ND_PENDING);
        Completes("SRQ Notify with 1 receive (threshold 2)", g_srq, one, ND_SUCCESS);
        SrqReceives(s.passive, 2, 3);
        Ov four;
        EXPECT(g_srq->Notify(&four) == ND_PENDING);
        StaysPending("SRQ Notify with 4 receives (threshold 2)", g_srq, four, 200);
        for (ULONG k = 0; k < 3; k++) {
            s.active.Send(s.aqp, 200 + k);
            s.active.Poll(got, 1);
        }
        Completes("SRQ Notify, 1 receive left (the device's event)", g_srq, four, ND_SUCCESS);
        s.passive.Poll(got, 3);
        Ov after;
        EXPECT(g_srq->Notify(&after) == ND_PENDING);
        Completes("SRQ Notify with 1 receive left, its completions returned", g_srq, after, ND_SUCCESS);
    }
    EXPECT(g_srq->Release() == 0);
    return 0;
}

/* The Notify thread of notify-getresults-order: Notify(ANY), wait for it (bounded turns), again,
 * until told to stop; then its last Notify is cancelled. */
struct Notifier {
    IND2CompletionQueue *cq;
    std::atomic<bool> stop{false};
    unsigned long notifies = 0, completed = 0;
    HRESULT failed = ND_SUCCESS;
};

void *notifier(void *arg)
{
    Notifier &n = *static_cast<Notifier *>(arg);
    Ov ov;
    while (!n.stop.load()) {
        ov.Reset();
        HRESULT hr = n.cq->Notify(ND_CQ_NOTIFY_ANY, &ov);
        n.notifies++;
        if (hr != ND_PENDING) {
            n.failed = hr;
            return NULL;
        }
        /* Short turns: the completion may land between a turn's timeout and the look. */
        for (;;) {
            WaitForSingleObject(ov.hEvent, 20);
            hr = n.cq->GetOverlappedResult(&ov, FALSE);
            if (hr != ND_PENDING || n.stop.load())
                break;
        }
        if (hr == ND_PENDING) {
            n.cq->CancelOverlappedRequests();
            hr = ov.Wait(n.cq, WAIT_MS);
            if (hr != ND_CANCELED && hr != ND_SUCCESS)
                n.failed = hr;
            return NULL;
        }
        if (hr != ND_SUCCESS) {
            n.failed = hr;
            return NULL;
        }
        n.completed++;
    }
    return NULL;
}

int notify_getresults_order(const Args &a)
{
    const ULONG round = 32;
    Pair s(a.passiveIp, a.activeIp, round);
    Notifier n;
    n.cq = s.passive.cq;
    pthread_t tid;
    EXPECT(pthread_create(&tid, NULL, notifier, &n) == 0);
    unsigned long posted = 0, taken = 0, calls = 0;
    while (taken < a.count) {
        ULONG batch = (ULONG)std::min<unsigned long>(round, a.count - posted);
        for (ULONG k = 0; k < batch; k++)
            s.passive.Receive(s.pqp, ++posted, 64 * (k % 8));
        for (ULONG k = 0; k < batch; k++)
            s.active.Send(s.aqp, 1000000 + k);
        double until = nd2_now_us() + WAIT_MS * 1e3;
        while (taken < posted) {
            ND2_RESULT r[4];
            ULONG want = 1 + (ULONG)(calls++ % 4);
            ULONG got = s.passive.cq->GetResults(r, want);
            for (ULONG k = 0; k < got; k++) {
                if (r[k].Status != ND_SUCCESS || r[k].RequestType != Nd2RequestTypeReceive)
                    FAIL("result %lu: status 0x%08x type %d", taken + 1, (unsigned)r[k].Status, (int)r[k].RequestType);
                uintptr_t context = reinterpret_cast<uintptr_t>(r[k].RequestContext);
                if (context != taken + 1)
                    FAIL("receive %lu came back as the %lu-th result: out of order, lost or twice (%lu Notify "
                         "so far)",
                         (unsigned long)context, taken + 1, n.notifies);
                taken++;
            }
            if (got == 0 && nd2_now_us() > until)
                FAIL("%lu of %lu receives in 10 s (one lost?)", taken, posted);
        }
        ND2_RESULT r[round];
        s.active.Poll(r, batch);
    }
    n.stop.store(true);
    EXPECT(pthread_join(tid, NULL) == 0);
    if (n.failed != ND_SUCCESS)
        FAIL("a Notify failed: 0x%08x", (unsigned)n.failed);
    s.passive.ExpectEmpty();
    printf("  %lu receives in order, each once, while %lu Notify ran (%lu completed)\n", taken, n.notifies,
           n.completed);
    return 0;
}

/* DllCanUnloadNow's answer is `want` (by name, for the message). */
void UnloadIs(const char *when, HRESULT want)
{
    HRESULT hr = DllCanUnloadNow();
    if (hr != want)
        FAIL("DllCanUnloadNow %s: 0x%08x, want %s", when, (unsigned)hr, want == S_OK ? "S_OK" : "S_FALSE");
}

int unload_while_alive(const Args &a)
{
    UnloadIs("before any object", S_OK);
    sockaddr_in address = nd2_ipv4(a.passiveIp, 0);
    IND2Adapter *adapter = NULL;
    CHECK_HR(NdOpenAdapter(IID_IND2Adapter, reinterpret_cast<const sockaddr *>(&address), sizeof address,
                           reinterpret_cast<void **>(&adapter)));
    UnloadIs("with an adapter alive", S_FALSE);
    HANDLE file = NULL;
    CHECK_HR(adapter->CreateOverlappedFile(&file));
    IND2CompletionQueue *cq = NULL;
    CHECK_HR(adapter->CreateCompletionQueue(IID_IND2CompletionQueue, file, 16, 0, 0, reinterpret_cast<void **>(&cq)));
    IND2QueuePair *qp = NULL;
    CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, NULL, 4, 4, 1, 1, 0, reinterpret_cast<void **>(&qp)));
    EXPECT(adapter->Release() == 0);
    UnloadIs("with a CQ and a QP alive (their adapter released)", S_FALSE);
    EXPECT(qp->Release() == 0);
    UnloadIs("with a CQ alive", S_FALSE);
    EXPECT(cq->Release() == 0);
    CloseHandle(file);
    /* Every object released: the adapter's threads end within about 100 ms. */
    double until = nd2_now_us() + 2e6;
    HRESULT hr;
    while ((hr = DllCanUnloadNow()) == S_FALSE && nd2_now_us() < until)
        usleep(10 * 1000);
    if (hr != S_OK)
        FAIL("DllCanUnloadNow 2 s after the last Release: 0x%08x, want S_OK", (unsigned)hr);
    return 0;
}

struct Case {
    const char *name;
    int (*run)(const Args &);
};

const Case CASES[] = {
    {"completion-present-before-notify", completion_present_before_notify},
    {"drain-then-notify", drain_then_notify},
    {"errors-not-completed-by-success", errors_not_completed_by_success},
    {"errors-on-overrun", errors_on_overrun},
    {"solicited", solicited},
    {"multiple-notifies", multiple_notifies},
    {"srq-limit", srq_limit},
    {"srq-notify-below-threshold", srq_notify_below_threshold},
    {"notify-getresults-order", notify_getresults_order},
    {"unload-while-alive", unload_while_alive},
};

} // namespace

int main(int argc, char **argv)
{
    if (nd2_listed(argc, argv, CASES))
        return 0;
    Args args = {NULL, NULL, 0};
    if (argc == 6 && strcmp(argv[4], "--count") == 0)
        args.count = strtoul(argv[5], NULL, 0);
    else if (argc != 4) {
        fprintf(stderr, "usage: %s CASE PASSIVE_IP ACTIVE_IP [--count N] | --list\n", argv[0]);
        return 2;
    }
    args.passiveIp = argv[2];
    args.activeIp = argv[3];
    if (argc == 4)
        args.count = strcmp(argv[1], "notify-getresults-order") == 0 ? 4000 : 10000;
    if (args.count == 0) {
        fprintf(stderr, "--count: at least 1\n");
        return 2;
    }
    return nd2_run_case(argv[1], CASES, [&](const Case &c) { return nd2_with_startup([&] { return c.run(args); }); });
}
