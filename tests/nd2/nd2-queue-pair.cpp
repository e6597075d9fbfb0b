/*
 * nd2-queue-pair: queue pairs as Windows providers behave: the limits IND2Adapter::Query reports
 * are what CreateQueuePair, CreateCompletionQueue and CreateSharedReceiveQueue accept; a QP's
 * limits are minimums a provider may round up; ND_OP_FLAG_INLINE sends inline; remote tokens are
 * in network byte order; work completions carry the codes IND2CompletionQueue.md lists.
 * Both sides live in one process: the passive side on PASSIVE_IP (rxe0), the active side on
 * ACTIVE_IP (rxe1). token-order talks to a plain verbs peer instead (ND2_VERBS_PEER: the
 * program built from tests/nd2/nd2-verbs-peer.c), which reads the token with ntohl.
 *
 *   nd2-queue-pair CASE PASSIVE_IP ACTIVE_IP      (nd2-queue-pair --list: the cases)
 *
 * docs/nd-conformance.md names these cases and the Microsoft test or document behind each.
 */
#include "nd2-common.h"

#include <endian.h>
#include <unistd.h>
#include <vector>

#ifndef STATUS_DATA_ERROR
#define STATUS_DATA_ERROR ((HRESULT)0xC000003EL)
#endif

namespace {

double now_ms() { return nd2_now_us() / 1e3; }

void *Context(unsigned k) { return reinterpret_cast<void *>(static_cast<uintptr_t>(0x5100 + k)); }

unsigned char pattern(unsigned k, unsigned seed) { return static_cast<unsigned char>(k * 13 + seed); }

/* A non-overlapped call's exact code. */
void Returns(const char *what, HRESULT got, HRESULT want)
{
    if (got != want)
        FAIL("%s: 0x%08X, want 0x%08X", what, (unsigned)got, (unsigned)want);
    printf("  %s: 0x%08X\n", what, (unsigned)want);
}

/* One side: adapter, overlapped file, a waiter on events, CQ, MR over a 4 KiB buffer. */
struct Side {
    const char *label;
    sockaddr_in address;
    IND2Adapter *adapter = NULL;
    HANDLE file = NULL;
    Nd2Waiter *waiter = NULL;
    IND2CompletionQueue *cq = NULL;
    IND2MemoryRegion *mr = NULL;
    unsigned char buf[4096];
    ND2_ADAPTER_INFO info;

    Side(const char *labelText, const char *ip) : label(labelText)
    {
        address = nd2_ipv4(ip, 0);
        CHECK_HR(NdOpenAdapter(IID_IND2Adapter, nd2_sa(address), sizeof address, reinterpret_cast<void **>(&adapter)));
        CHECK_HR(adapter->CreateOverlappedFile(&file));
        waiter = new Nd2Waiter(file, false);
        CHECK_HR(adapter->CreateCompletionQueue(IID_IND2CompletionQueue, file, 64, 0, 0,
                                                reinterpret_cast<void **>(&cq)));
        CHECK_HR(adapter->CreateMemoryRegion(IID_IND2MemoryRegion, file, reinterpret_cast<void **>(&mr)));
        memset(buf, 0, sizeof buf);
        CHECK_HR(waiter->Wait(mr, mr->Register(buf, sizeof buf,
                                               ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ |
                                                   ND_MR_FLAG_ALLOW_REMOTE_WRITE,
                                               waiter->Ov())));
        memset(&info, 0, sizeof info);
        info.InfoVersion = ND_VERSION_2;
        ULONG size = sizeof info;
        CHECK_HR(adapter->Query(&info, &size));
    }

    ~Side()
    {
        CHECK_HR(waiter->Wait(mr, mr->Deregister(waiter->Ov())));
        EXPECT(mr->Release() == 0);
        EXPECT(cq->Release() == 0);
        delete waiter;
        CloseHandle(file);
        EXPECT(adapter->Release() == 0);
    }

    IND2QueuePair *Qp(ULONG initiatorSge, ULONG receiveSge, ULONG inlineSize)
    {
        IND2QueuePair *qp = NULL;
        CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, this, 16, 16, receiveSge, initiatorSge,
                                          inlineSize, reinterpret_cast<void **>(&qp)));
        return qp;
    }

    ND2_SGE Sge(size_t offset, ULONG length)
    {
        ND2_SGE s = {buf + offset, length, mr->GetLocalToken()};
        return s;
    }

    /* The next completion, waiting up to 10 s. */
    ND2_RESULT Next()
    {
        ND2_RESULT r;
        double until = now_ms() + 10000;
        while (cq->GetResults(&r, 1) == 0) {
            if (now_ms() > until)
                FAIL("%s: no completion after 10 s", label);
            usleep(500);
        }
        return r;
    }

    /* The next completion: the request `ctx` of `type`, with `status`. */
    ND2_RESULT Expect(const char *what, void *ctx, ND2_REQUEST_TYPE type, HRESULT status)
    {
        ND2_RESULT r = Next();
        if (r.RequestContext != ctx || r.RequestType != type || r.Status != status)
            FAIL("%s: %s: context %p type %d status 0x%08X; want %p, %d, 0x%08X", label, what, r.RequestContext,
                 r.RequestType, (unsigned)r.Status, ctx, type, (unsigned)status);
        printf("  %s: %s 0x%08X, %u bytes\n", label, what, (unsigned)status, (unsigned)r.BytesTransferred);
        return r;
    }

    /* Completions until none comes for 200 ms (flushed requests after a disconnect). */
    void Drain()
    {
        ND2_RESULT r;
        double quiet = now_ms() + 200;
        while (now_ms() < quiet) {
            if (cq->GetResults(&r, 1) == 1)
                quiet = now_ms() + 200;
            else
                usleep(1000);
        }
    }
};

struct Pair {
    Side passive;
    Side active;
    Pair(const char *passiveIp, const char *activeIp) : passive("passive", passiveIp), active("active", activeIp) {}
};

struct Connection {
    IND2Listener *l;
    IND2Connector *p;
    IND2Connector *a;
};

/* pqp and aqp connected through a listener on the passive side's `port`. */
Connection Connect(Pair &s, unsigned short port, IND2QueuePair *pqp, IND2QueuePair *aqp)
{
    Connection c;
    sockaddr_in at = s.passive.address;
    at.sin_port = htons(port);
    CHECK_HR(s.passive.adapter->CreateListener(IID_IND2Listener, s.passive.file, reinterpret_cast<void **>(&c.l)));
    CHECK_HR(c.l->Bind(nd2_sa(at), sizeof at));
    CHECK_HR(c.l->Listen(0));
    CHECK_HR(s.passive.adapter->CreateConnector(IID_IND2Connector, s.passive.file, reinterpret_cast<void **>(&c.p)));
    CHECK_HR(s.active.adapter->CreateConnector(IID_IND2Connector, s.active.file, reinterpret_cast<void **>(&c.a)));
    HRESULT get = c.l->GetConnectionRequest(c.p, s.passive.waiter->Ov());
    HRESULT conn = c.a->Connect(aqp, nd2_sa(at), sizeof at, 0, 0, NULL, 0, s.active.waiter->Ov());
    CHECK_HR(s.passive.waiter->Wait(c.l, get));
    HRESULT acc = c.p->Accept(pqp, 0, 0, NULL, 0, s.passive.waiter->Ov());
    CHECK_HR(s.active.waiter->Wait(c.a, conn));
    CHECK_HR(s.active.waiter->Wait(c.a, c.a->CompleteConnect(s.active.waiter->Ov())));
    CHECK_HR(s.passive.waiter->Wait(c.p, acc));
    return c;
}

/* Both ends disconnect; connectors, listener and the QPs released. */
void Hangup(Pair &s, Connection &c, IND2QueuePair *pqp, IND2QueuePair *aqp)
{
    HRESULT ad = c.a->Disconnect(s.active.waiter->Ov());
    HRESULT pd = c.p->Disconnect(s.passive.waiter->Ov());
    CHECK_HR(s.active.waiter->Wait(c.a, ad));
    CHECK_HR(s.passive.waiter->Wait(c.p, pd));
    EXPECT(c.a->Release() == 0);
    EXPECT(c.p->Release() == 0);
    EXPECT(c.l->Release() == 0);
    s.active.Drain();
    s.passive.Drain();
    EXPECT(aqp->Release() == 0);
    EXPECT(pqp->Release() == 0);
}

/* Query's limits are what the Create calls accept (Microsoft's NdQpMax: a QP at every maximum
 * Query reported), one past any of them is the documented ND_INVALID_PARAMETER_n (NdLargeQPDepth:
 * a receive queue one deeper fails), and the inline and threshold fields are filled. */
ND2_CASE(max_limits, Pair, s)
{
    Side &d = s.passive;
    const ND2_ADAPTER_INFO &i = d.info;
    printf("  Query: depths QP %u/%u, SRQ %u, CQ %u; SGEs initiator %u, receive %u, read %u; inline %u; "
           "thresholds inline %u, large %u\n",
           (unsigned)i.MaxReceiveQueueDepth, (unsigned)i.MaxInitiatorQueueDepth,
           (unsigned)i.MaxSharedReceiveQueueDepth, (unsigned)i.MaxCompletionQueueDepth, (unsigned)i.MaxInitiatorSge,
           (unsigned)i.MaxReceiveSge, (unsigned)i.MaxReadSge, (unsigned)i.MaxInlineDataSize,
           (unsigned)i.InlineRequestThreshold, (unsigned)i.LargeRequestThreshold);
    EXPECT(i.MaxInlineDataSize > 0 && i.InlineRequestThreshold > 0 && i.LargeRequestThreshold > 0);
    EXPECT(i.InlineRequestThreshold <= i.MaxInlineDataSize);

    IND2CompletionQueue *cq = NULL;
    Returns("CreateCompletionQueue at MaxCompletionQueueDepth",
            d.adapter->CreateCompletionQueue(IID_IND2CompletionQueue, d.file, i.MaxCompletionQueueDepth, 0, 0,
                                             reinterpret_cast<void **>(&cq)),
            ND_SUCCESS);
    EXPECT(cq->Release() == 0);
    Returns("CreateCompletionQueue one deeper",
            d.adapter->CreateCompletionQueue(IID_IND2CompletionQueue, d.file, i.MaxCompletionQueueDepth + 1, 0, 0,
                                             reinterpret_cast<void **>(&cq)),
            ND_INVALID_PARAMETER_3);

    IND2SharedReceiveQueue *srq = NULL;
    Returns("CreateSharedReceiveQueue one deeper",
            d.adapter->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, d.file, i.MaxSharedReceiveQueueDepth + 1,
                                                i.MaxReceiveSge, 0, 0, 0, reinterpret_cast<void **>(&srq)),
            ND_INVALID_PARAMETER_3);
    Returns("CreateSharedReceiveQueue with one SGE more",
            d.adapter->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, d.file, i.MaxSharedReceiveQueueDepth,
                                                i.MaxReceiveSge + 1, 0, 0, 0, reinterpret_cast<void **>(&srq)),
            ND_INVALID_PARAMETER_4);
    Returns("CreateSharedReceiveQueue at the maxima",
            d.adapter->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, d.file, i.MaxSharedReceiveQueueDepth,
                                                i.MaxReceiveSge, 0, 0, 0, reinterpret_cast<void **>(&srq)),
            ND_SUCCESS);

    IND2QueuePair *qp = NULL;
    void **out = reinterpret_cast<void **>(&qp);
    Returns("CreateQueuePairWithSrq at the maxima",
            d.adapter->CreateQueuePairWithSrq(IID_IND2QueuePair, d.cq, d.cq, srq, NULL, i.MaxInitiatorQueueDepth,
                                              i.MaxInitiatorSge, i.MaxInlineDataSize, out),
            ND_SUCCESS);
    EXPECT(qp->Release() == 0);
    Returns("CreateQueuePairWithSrq, initiator one deeper",
            d.adapter->CreateQueuePairWithSrq(IID_IND2QueuePair, d.cq, d.cq, srq, NULL,
                                              i.MaxInitiatorQueueDepth + 1, 1, 0, out),
            ND_INVALID_PARAMETER_6);
    Returns("CreateQueuePairWithSrq, one initiator SGE more",
            d.adapter->CreateQueuePairWithSrq(IID_IND2QueuePair, d.cq, d.cq, srq, NULL, 4, i.MaxInitiatorSge + 1,
                                              0, out),
            ND_INVALID_PARAMETER_7);
    Returns("CreateQueuePairWithSrq, one inline byte more",
            d.adapter->CreateQueuePairWithSrq(IID_IND2QueuePair, d.cq, d.cq, srq, NULL, 4, 1,
                                              i.MaxInlineDataSize + 1, out),
            ND_INVALID_PARAMETER_8);
    EXPECT(srq->Release() == 0);

    /* NdQpMax's call (no inline), then every maximum at once. */
    Returns("CreateQueuePair at the maxima (NdQpMax)",
            d.adapter->CreateQueuePair(IID_IND2QueuePair, d.cq, d.cq, NULL, i.MaxReceiveQueueDepth,
                                       i.MaxInitiatorQueueDepth, i.MaxReceiveSge, i.MaxInitiatorSge, 0, out),
            ND_SUCCESS);
    EXPECT(qp->Release() == 0);
    Returns("CreateQueuePair at the maxima with MaxInlineDataSize",
            d.adapter->CreateQueuePair(IID_IND2QueuePair, d.cq, d.cq, NULL, i.MaxReceiveQueueDepth,
                                       i.MaxInitiatorQueueDepth, i.MaxReceiveSge, i.MaxInitiatorSge,
                                       i.MaxInlineDataSize, out),
            ND_SUCCESS);
    EXPECT(qp->Release() == 0);
    Returns("CreateQueuePair, receive queue one deeper (NdLargeQPDepth)",
            d.adapter->CreateQueuePair(IID_IND2QueuePair, d.cq, d.cq, NULL, i.MaxReceiveQueueDepth + 1, 4, 1, 1, 0,
                                       out),
            ND_INVALID_PARAMETER_5);
    Returns("CreateQueuePair, initiator queue one deeper",
            d.adapter->CreateQueuePair(IID_IND2QueuePair, d.cq, d.cq, NULL, 4, i.MaxInitiatorQueueDepth + 1, 1, 1, 0,
                                       out),
            ND_INVALID_PARAMETER_6);
    Returns("CreateQueuePair, one receive SGE more",
            d.adapter->CreateQueuePair(IID_IND2QueuePair, d.cq, d.cq, NULL, 4, 4, i.MaxReceiveSge + 1, 1, 0, out),
            ND_INVALID_PARAMETER_7);
    Returns("CreateQueuePair, one initiator SGE more",
            d.adapter->CreateQueuePair(IID_IND2QueuePair, d.cq, d.cq, NULL, 4, 4, 1, i.MaxInitiatorSge + 1, 0, out),
            ND_INVALID_PARAMETER_8);
    Returns("CreateQueuePair, one inline byte more",
            d.adapter->CreateQueuePair(IID_IND2QueuePair, d.cq, d.cq, NULL, 4, 4, 1, 1, i.MaxInlineDataSize + 1,
                                       out),
            ND_INVALID_PARAMETER_9);
    return 0;
}

/* The QP limits are minimums: a QP created with maxInitiatorRequestSge 1 takes a 2- and a 3-SGE
 * Send (the slot rxe allocates for one SGE holds three; Microsoft's ndmw sends 2 SGEs so), and a
 * Send of no SGE and one of a zero-length SGE complete with 0 bytes at the receiver. */
ND2_CASE(sge_rounding, Pair, s)
{
    IND2QueuePair *pqp = s.passive.Qp(1, 1, 0);
    IND2QueuePair *aqp = s.active.Qp(1, 1, 0);
    for (unsigned k = 0; k < 4; k++) {
        ND2_SGE r = s.passive.Sge(k * 256, 256);
        CHECK_HR(pqp->Receive(Context(k), &r, 1));
    }
    Connection c = Connect(s, 7441, pqp, aqp);
    for (unsigned k = 0; k < 48; k++)
        s.active.buf[k] = pattern(k, 1);
    ND2_SGE two[2] = {s.active.Sge(0, 8), s.active.Sge(8, 8)};
    Returns("Send of 2 SGEs on a 1-SGE QP", aqp->Send(Context(10), two, 2, 0), ND_SUCCESS);
    s.active.Expect("Send of 2 SGEs", Context(10), Nd2RequestTypeSend, ND_SUCCESS);
    ND2_RESULT r = s.passive.Expect("its Receive", Context(0), Nd2RequestTypeReceive, ND_SUCCESS);
    EXPECT(r.BytesTransferred == 16 && memcmp(s.passive.buf, s.active.buf, 16) == 0);
    ND2_SGE three[3] = {s.active.Sge(16, 8), s.active.Sge(24, 8), s.active.Sge(32, 16)};
    Returns("Send of 3 SGEs on a 1-SGE QP", aqp->Send(Context(11), three, 3, 0), ND_SUCCESS);
    s.active.Expect("Send of 3 SGEs", Context(11), Nd2RequestTypeSend, ND_SUCCESS);
    r = s.passive.Expect("its Receive", Context(1), Nd2RequestTypeReceive, ND_SUCCESS);
    EXPECT(r.BytesTransferred == 32 && memcmp(s.passive.buf + 256, s.active.buf + 16, 32) == 0);
    Returns("Send of no SGE", aqp->Send(Context(12), NULL, 0, 0), ND_SUCCESS);
    s.active.Expect("Send of no SGE", Context(12), Nd2RequestTypeSend, ND_SUCCESS);
    r = s.passive.Expect("its Receive", Context(2), Nd2RequestTypeReceive, ND_SUCCESS);
    EXPECT(r.BytesTransferred == 0);
    ND2_SGE empty = s.active.Sge(0, 0);
    Returns("Send of a zero-length SGE", aqp->Send(Context(13), &empty, 1, 0), ND_SUCCESS);
    s.active.Expect("Send of a zero-length SGE", Context(13), Nd2RequestTypeSend, ND_SUCCESS);
    r = s.passive.Expect("its Receive", Context(3), Nd2RequestTypeReceive, ND_SUCCESS);
    EXPECT(r.BytesTransferred == 0);
    /* Beyond what the slot holds: refused when posted, nothing completes. */
    ND2_SGE many[8];
    for (unsigned k = 0; k < 8; k++)
        many[k] = s.active.Sge(k * 4, 4);
    HRESULT hr = aqp->Send(Context(14), many, 8, 0);
    printf("  Send of 8 SGEs on a 1-SGE QP: 0x%08X\n", (unsigned)hr);
    EXPECT(FAILED(hr));
    Hangup(s, c, pqp, aqp);
    return 0;
}

/* ND_OP_FLAG_INLINE sends inline up to MaxInlineDataSize: from memory that is not registered,
 * with a token that is not one ("may be invalid", IND2QueuePair.md), the data copied when the
 * call returns (the buffer is overwritten right after). Send and Write. */
ND2_CASE(inline_data, Pair, s)
{
    const ULONG max = s.active.info.MaxInlineDataSize;
    IND2QueuePair *pqp = s.passive.Qp(1, 1, 0);
    IND2QueuePair *aqp = s.active.Qp(1, 1, max);
    ND2_SGE r = s.passive.Sge(0, 2048);
    CHECK_HR(pqp->Receive(Context(0), &r, 1));
    Connection c = Connect(s, 7442, pqp, aqp);
    std::vector<unsigned char> loose(max);
    for (ULONG k = 0; k < max; k++)
        loose[k] = pattern(k, 5);
    ND2_SGE sge = {loose.data(), max, 0xDEADBEEF};
    Returns("inline Send of MaxInlineDataSize unregistered bytes", aqp->Send(Context(10), &sge, 1, ND_OP_FLAG_INLINE),
            ND_SUCCESS);
    memset(loose.data(), 0xEE, max);
    s.active.Expect("inline Send", Context(10), Nd2RequestTypeSend, ND_SUCCESS);
    ND2_RESULT res = s.passive.Expect("its Receive", Context(0), Nd2RequestTypeReceive, ND_SUCCESS);
    EXPECT(res.BytesTransferred == max);
    for (ULONG k = 0; k < max; k++)
        if (s.passive.buf[k] != pattern(k, 5))
            FAIL("inline Send: byte %u is 0x%02x", (unsigned)k, s.passive.buf[k]);
    /* Write inline into the passive MR, at 2048, with its token as GetRemoteToken gave it. */
    for (ULONG k = 0; k < max; k++)
        loose[k] = pattern(k, 9);
    UINT64 to = reinterpret_cast<UINT64>(s.passive.buf + 2048);
    Returns("inline Write of MaxInlineDataSize unregistered bytes",
            aqp->Write(Context(11), &sge, 1, to, s.passive.mr->GetRemoteToken(), ND_OP_FLAG_INLINE), ND_SUCCESS);
    memset(loose.data(), 0xEE, max);
    s.active.Expect("inline Write", Context(11), Nd2RequestTypeWrite, ND_SUCCESS);
    for (ULONG k = 0; k < max; k++)
        if (s.passive.buf[2048 + k] != pattern(k, 9))
            FAIL("inline Write: byte %u is 0x%02x", (unsigned)k, s.passive.buf[2048 + k]);
    Hangup(s, c, pqp, aqp);
    return 0;
}

/* The codes of failed work completions (IND2CompletionQueue.md's table by request type):
 * Microsoft's ndmval sends 1024 bytes into a 1023-byte receive: the receiver completes with
 * ND_BUFFER_OVERFLOW (the document's code for a Receive) and the sender with ND_SUCCESS or
 * STATUS_DATA_ERROR, as Windows' iWARP and IB providers do (ndmval fails on ND_REMOTE_ERROR). */
ND2_CASE(completion_codes, Pair, s)
{
    IND2QueuePair *pqp = s.passive.Qp(1, 1, 0);
    IND2QueuePair *aqp = s.active.Qp(1, 1, 0);
    ND2_SGE small = s.passive.Sge(0, 1023);
    CHECK_HR(pqp->Receive(Context(0), &small, 1));
    Connection c = Connect(s, 7443, pqp, aqp);
    ND2_SGE message = s.active.Sge(0, 1024);
    CHECK_HR(aqp->Send(Context(10), &message, 1, 0));
    ND2_RESULT sent = s.active.Next();
    printf("  the 1024-byte Send: 0x%08X\n", (unsigned)sent.Status);
    ND2_RESULT r = s.passive.Next();
    if (r.RequestContext != Context(0) || r.RequestType != Nd2RequestTypeReceive || r.Status != ND_BUFFER_OVERFLOW)
        FAIL("receive too small: context %p type %d status 0x%08X, want ND_BUFFER_OVERFLOW", r.RequestContext,
             r.RequestType, (unsigned)r.Status);
    printf("  Receive of 1023 bytes for a 1024-byte Send: ND_BUFFER_OVERFLOW\n");
    r = sent;
    if (r.RequestContext != Context(10) || r.RequestType != Nd2RequestTypeSend ||
        (r.Status != ND_SUCCESS && r.Status != STATUS_DATA_ERROR))
        FAIL("the Send: context %p type %d status 0x%08X, want ND_SUCCESS or STATUS_DATA_ERROR", r.RequestContext,
             r.RequestType, (unsigned)r.Status);
    Hangup(s, c, pqp, aqp);
    return 0;
}

/* The remote token in network byte order, end to end, against a plain verbs peer (not nd-shim)
 * that reads ND's token with ntohl and gives its own with htonl (IND2MemoryRegion.md,
 * GetRemoteToken): the peer reads and writes our MR, we read its buffer. */
ND2_CASE(token_order, Pair, s)
{
    const char *peer = getenv("ND2_VERBS_PEER");
    if (peer == NULL)
        FAIL("ND2_VERBS_PEER is not set");
    const unsigned short PORT = 7444;
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &s.passive.address.sin_addr, ip, sizeof ip);
    char command[512];
    snprintf(command, sizeof command, "%s %s %u", peer, ip, PORT);
    FILE *out = popen(command, "r");
    EXPECT(out != NULL);
    char line[128];
    if (fgets(line, sizeof line, out) == NULL || strncmp(line, "ready", 5) != 0)
        FAIL("the verbs peer did not get ready");
    Side &a = s.active;
    IND2QueuePair *qp = a.Qp(1, 1, 0);
    for (unsigned k = 0; k < 1024; k++)
        a.buf[k] = pattern(k, 3);
    ND2_SGE done = a.Sge(3072, 64);
    CHECK_HR(qp->Receive(Context(0), &done, 1));
    /* Private data: our buffer's address (big-endian) and GetRemoteToken as it is. */
    unsigned char mine[12];
    UINT64 addr = htobe64(reinterpret_cast<UINT64>(a.buf));
    UINT32 token = a.mr->GetRemoteToken();
    memcpy(mine, &addr, 8);
    memcpy(mine + 8, &token, 4);
    IND2Connector *conn = NULL;
    CHECK_HR(a.adapter->CreateConnector(IID_IND2Connector, a.file, reinterpret_cast<void **>(&conn)));
    sockaddr_in at = s.passive.address;
    at.sin_port = htons(PORT);
    CHECK_HR(a.waiter->Wait(conn, conn->Connect(qp, nd2_sa(at), sizeof at, 1, 1, mine, sizeof mine, a.waiter->Ov())));
    unsigned char theirs[196]; /* MaxCalleeData: a REP's private data, padded */
    ULONG size = sizeof theirs;
    CHECK_HR(conn->GetPrivateData(theirs, &size));
    CHECK_HR(a.waiter->Wait(conn, conn->CompleteConnect(a.waiter->Ov())));
    UINT64 peerAddr;
    UINT32 peerToken;
    memcpy(&peerAddr, theirs, 8);
    memcpy(&peerToken, theirs + 8, 4);
    peerAddr = be64toh(peerAddr);
    printf("  our token 0x%08X, the peer's 0x%08X (its rkey with htonl)\n", (unsigned)token, (unsigned)peerToken);
    ND2_SGE sink = a.Sge(1024, 256);
    Returns("Read of the peer's buffer with its token", qp->Read(Context(1), &sink, 1, peerAddr, peerToken, 0),
            ND_SUCCESS);
    /* Our Read, and the receive of the peer's "done" (it read our 1 KiB with ntohl(token) and
     * wrote it back at 2048 first), in either order. */
    bool read = false, received = false;
    for (unsigned n = 0; n < 2; n++) {
        ND2_RESULT r = a.Next();
        if (r.RequestContext == Context(1) && r.RequestType == Nd2RequestTypeRead && r.Status == ND_SUCCESS && !read) {
            read = true;
            printf("  Read: ND_SUCCESS\n");
        } else if (r.RequestContext == Context(0) && r.RequestType == Nd2RequestTypeReceive &&
                   r.Status == ND_SUCCESS && !received) {
            received = true;
            EXPECT(r.BytesTransferred == 5 && memcmp(a.buf + 3072, "done", 5) == 0);
            printf("  the peer's Send: ND_SUCCESS, 5 bytes\n");
        } else {
            FAIL("completion: context %p type %d status 0x%08X", r.RequestContext, r.RequestType, (unsigned)r.Status);
        }
    }
    for (unsigned k = 0; k < 256; k++)
        if (a.buf[1024 + k] != pattern(k, 77))
            FAIL("Read from the peer: byte %u is 0x%02x", k, a.buf[1024 + k]);
    EXPECT(memcmp(a.buf + 2048, a.buf, 1024) == 0);
    printf("  the peer read our buffer with ntohl(token) and wrote it back\n");
    CHECK_HR(a.waiter->Wait(conn, conn->Disconnect(a.waiter->Ov())));
    EXPECT(conn->Release() == 0);
    a.Drain();
    EXPECT(qp->Release() == 0);
    while (fgets(line, sizeof line, out) != NULL)
        printf("  peer: %s", line);
    EXPECT(pclose(out) == 0);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return nd2_fixture_main<Pair>(argc, argv, "PASSIVE_IP ACTIVE_IP");
}
