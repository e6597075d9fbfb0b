/*
 * nd2-conformance: the codes IND2Connector and IND2Listener document, produced through vtable
 * calls from C++. Both sides live in one process: the passive side on PASSIVE_IP (rxe0), the
 * active side on ACTIVE_IP (rxe1), each with its adapter, overlapped file and completion port.
 *
 *   nd2-conformance CASE PASSIVE_IP ACTIVE_IP      (nd2-conformance --list: the cases)
 *
 * Every overlapped call is asserted two ways: the exact code, and how it came. "Inline": the
 * call returned the code, no packet reached the port for its OVERLAPPED and Internal holds the
 * code. "Completion": the call returned ND_PENDING, GetOverlappedResult then gave the code, and
 * exactly one packet for the OVERLAPPED reached the port (FALSE from GetQueuedCompletionStatus
 * for a failure). docs/nd-conformance.md's ND2 COM column names these cases.
 */
#include "nd2-common.h"

#include <unistd.h>
#include <vector>

namespace {

/* One side: adapter, overlapped file bound to a completion port, CQ, MR over a buffer. */
struct Side : Nd2PortSide {
    IND2MemoryRegion *mr = NULL;
    unsigned char buf[1024];
    std::vector<IND2QueuePair *> qps;
    std::vector<OVERLAPPED *> stash; /* packets taken from the port, not yet asked for */

    Side(const char *labelText, const char *ip) : Nd2PortSide(labelText, ip, 32)
    {
        mr = nd2_create_mr(adapter, file);
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        EXPECT(mr->Register(buf, sizeof buf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov) == ND_PENDING);
        CHECK_HR(mr->GetOverlappedResult(&ov, TRUE));
        Packet(&ov, true);
    }

    ~Side()
    {
        for (IND2QueuePair *qp : qps)
            EXPECT(qp->Release() == 0);
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        EXPECT(mr->Deregister(&ov) == ND_PENDING);
        CHECK_HR(mr->GetOverlappedResult(&ov, TRUE));
        Packet(&ov, true);
        EXPECT(mr->Release() == 0);
        EXPECT(cq->Release() == 0);
        Drain();
        if (!stash.empty())
            FAIL("%s: %zu packets nobody asked for", label, stash.size());
        ClosePort();
    }

    IND2Connector *Connector() { return nd2_create_connector(adapter, file); }

    /* A QP on the side's CQ (8 deep each way, one SGE), released by its caller. */
    IND2QueuePair *NewQp()
    {
        IND2QueuePair *qp = NULL;
        CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, this, 8, 8, 1, 1, 0,
                                          reinterpret_cast<void **>(&qp)));
        return qp;
    }

    /* A NewQp the side releases when it goes. */
    IND2QueuePair *Qp()
    {
        IND2QueuePair *qp = NewQp();
        qps.push_back(qp);
        return qp;
    }

    /* An SGE over `length` bytes of buf from `offset`, with the MR's local token. */
    ND2_SGE Sge(size_t offset, ULONG length) { return ND2_SGE{buf + offset, length, mr->GetLocalToken()}; }

    /* A listener on this side's address and `portNumber`, listening. */
    IND2Listener *Listen(unsigned short portNumber)
    {
        IND2Listener *l = NULL;
        CHECK_HR(adapter->CreateListener(IID_IND2Listener, file, reinterpret_cast<void **>(&l)));
        sockaddr_in at = address;
        at.sin_port = htons(portNumber);
        CHECK_HR(l->Bind(nd2_sa(at), sizeof at));
        CHECK_HR(l->Listen(0));
        return l;
    }

    sockaddr_in At(unsigned short portNumber) const
    {
        sockaddr_in at = address;
        at.sin_port = htons(portNumber);
        return at;
    }

    /* Moves what the port holds into the stash. */
    void Drain()
    {
        for (;;) {
            BOOL ok = FALSE;
            ULONG_PTR key = 0;
            OVERLAPPED *ov = nd2_next_packet(port, 0, &ok, &key);
            if (ov == NULL) {
                EXPECT(ok == FALSE && GetLastError() == WAIT_TIMEOUT);
                return;
            }
            EXPECT(key == 5);
            stash.push_back(ov);
        }
    }

    /* The one packet for `want` (waiting up to 10 s); `ok` is what GetQueuedCompletionStatus said. */
    void Packet(OVERLAPPED *want, bool ok)
    {
        double until = nd2_now_ms() + 10000;
        for (;;) {
            for (size_t at = 0; at < stash.size(); at++) {
                if (stash[at] == want) {
                    stash.erase(stash.begin() + at);
                    Drain();
                    for (OVERLAPPED *other : stash)
                        if (other == want)
                            FAIL("%s: a second packet for one request", label);
                    return;
                }
            }
            BOOL got = FALSE;
            ULONG_PTR key = 0;
            OVERLAPPED *ov = nd2_next_packet(port, 100, &got, &key);
            if (ov == want && (got != FALSE) != ok)
                FAIL("%s: GetQueuedCompletionStatus said %d for the request", label, got);
            if (ov != NULL)
                stash.push_back(ov);
            else if (nd2_now_ms() > until)
                FAIL("%s: no packet for the request", label);
        }
    }

    /* No packet for `ov` has reached the port. */
    void NoPacket(OVERLAPPED *ov)
    {
        Drain();
        for (OVERLAPPED *got : stash)
            if (got == ov)
                FAIL("%s: a packet for a request that failed inline", label);
    }
};

/* An overlapped call that must fail inline with `want`. */
void Inline(Side &side, const char *what, HRESULT got, OVERLAPPED *ov, HRESULT want)
{
    nd2_failed_inline(what, got, ov, want);
    side.NoPacket(ov);
    printf("  %s: %s inline\n", what, nd2_status_name(want));
}

/* The final status of a pending request, waiting up to `ms`. */
HRESULT Wait(IND2Overlapped *object, OVERLAPPED *ov, double ms)
{
    double until = nd2_now_ms() + ms;
    for (;;) {
        HRESULT hr = object->GetOverlappedResult(ov, FALSE);
        if (hr != ND_PENDING || nd2_now_ms() > until)
            return hr;
        usleep(2000);
    }
}

/* An overlapped call that must return ND_PENDING; its completion is checked by Done. */
void Issued(const char *what, HRESULT got)
{
    if (got != ND_PENDING)
        FAIL("%s: returned 0x%08X (%s), want ND_PENDING", what, (unsigned)got, nd2_status_name(got));
}

/* The pending request `ov` completes with `want` within `ms`, with one packet. */
void Done(Side &side, const char *what, IND2Overlapped *object, OVERLAPPED *ov, HRESULT want, double ms = 15000)
{
    HRESULT final = Wait(object, ov, ms);
    if (final != want)
        FAIL("%s: completed 0x%08X (%s), want %s", what, (unsigned)final, nd2_status_name(final), nd2_status_name(want));
    EXPECT(object->GetOverlappedResult(ov, TRUE) == want);
    side.Packet(ov, SUCCEEDED(want));
    printf("  %s: %s through the completion\n", what, nd2_status_name(want));
}

/* An overlapped call that must return ND_PENDING and complete with `want` within `ms`. */
void Completes(Side &side, const char *what, IND2Overlapped *object, HRESULT got, OVERLAPPED *ov, HRESULT want,
               double ms = 15000)
{
    Issued(what, got);
    Done(side, what, object, ov, want, ms);
}

/* An overlapped call that returned ND_PENDING and is still pending after `ms`. */
void StillPending(const char *what, IND2Overlapped *object, HRESULT got, OVERLAPPED *ov, double ms)
{
    if (got != ND_PENDING)
        FAIL("%s: returned 0x%08X (%s), want ND_PENDING", what, (unsigned)got, nd2_status_name(got));
    if (Wait(object, ov, ms) != ND_PENDING)
        FAIL("%s: completed, want it still pending after %.0f ms", what, ms);
    printf("  %s: ND_PENDING, still pending after %.0f ms\n", what, ms);
}

struct Pair {
    Side passive;
    Side active;
    Pair(const char *passiveIp, const char *activeIp) : passive("passive", passiveIp), active("active", activeIp) {}
};

/* A request taken: the passive GetConnectionRequest on `p` (with `get`) issued, the active
 * Connect of `a` with `aqp` to `to` (read limits and private data as given) issued with `conn`,
 * left to complete, and the GetConnectionRequest completed ND_SUCCESS. */
void Requested(Pair &s, IND2Listener *l, IND2Connector *p, Nd2Ov &get, IND2Connector *a, IND2QueuePair *aqp,
               const sockaddr_in &to, ULONG inbound, ULONG outbound, const void *data, ULONG size, Nd2Ov &conn)
{
    Issued("GetConnectionRequest", l->GetConnectionRequest(p, &get));
    Issued("Connect", a->Connect(aqp, nd2_sa(to), sizeof to, inbound, outbound, data, size, &conn));
    Done(s.passive, "GetConnectionRequest", l, &get, ND_SUCCESS);
}

/* Connected: the passive connector accepted `qp`, the active connected with `aqp`. */
struct Connection {
    IND2Connector *p;
    IND2Connector *a;
};

Connection Connect(Pair &s, IND2Listener *l, unsigned short portNumber, IND2QueuePair *pqp, IND2QueuePair *aqp)
{
    Connection c;
    c.p = s.passive.Connector();
    c.a = s.active.Connector();
    Nd2Ov get, conn, acc, comp;
    EXPECT(l->GetConnectionRequest(c.p, &get) == ND_PENDING);
    sockaddr_in to = s.passive.At(portNumber);
    EXPECT(c.a->Connect(aqp, nd2_sa(to), sizeof to, 0, 0, NULL, 0, &conn) == ND_PENDING);
    EXPECT(Wait(l, &get, 15000) == ND_SUCCESS);
    s.passive.Packet(&get, true);
    EXPECT(c.p->Accept(pqp, 0, 0, NULL, 0, &acc) == ND_PENDING);
    EXPECT(Wait(c.a, &conn, 15000) == ND_SUCCESS);
    s.active.Packet(&conn, true);
    EXPECT(c.a->CompleteConnect(&comp) == ND_PENDING);
    EXPECT(Wait(c.a, &comp, 15000) == ND_SUCCESS);
    s.active.Packet(&comp, true);
    EXPECT(Wait(c.p, &acc, 15000) == ND_SUCCESS);
    s.passive.Packet(&acc, true);
    return c;
}

/* Both sides disconnect and release their connectors. The active Disconnect completes when
 * the passive side disconnects too (its DREP). */
void Hangup(Pair &s, Connection &c)
{
    Nd2Ov ad, pd;
    EXPECT(c.a->Disconnect(&ad) == ND_PENDING);
    EXPECT(c.p->Disconnect(&pd) == ND_PENDING);
    EXPECT(Wait(c.a, &ad, 15000) == ND_SUCCESS);
    s.active.Packet(&ad, true);
    EXPECT(Wait(c.p, &pd, 15000) == ND_SUCCESS);
    s.passive.Packet(&pd, true);
    EXPECT(c.a->Release() == 0);
    EXPECT(c.p->Release() == 0);
}

/* Results in a CQ until it is quiet for 200 ms (flushed requests after a disconnect). */
void DrainCq(Side &side)
{
    ND2_RESULT r;
    double quiet = nd2_now_ms() + 200;
    while (nd2_now_ms() < quiet) {
        if (side.cq->GetResults(&r, 1) == 1)
            quiet = nd2_now_ms() + 200;
        else
            usleep(1000);
    }
}

/* Both sides' CQs drained (DrainCq). */
void DrainCqs(Pair &s)
{
    DrainCq(s.active);
    DrainCq(s.passive);
}

/* The end of a case with one connection: Hangup, both CQs drained, the listener released. */
void Finish(Pair &s, Connection &c, IND2Listener *l)
{
    Hangup(s, c);
    DrainCqs(s);
    EXPECT(l->Release() == 0);
}

/* A connected case's start: a listener on the passive side's `port`, a QP on each side and their
 * connection. With `receive`, a receive with that context over the first 64 bytes of the passive
 * side's buffer is posted on pqp before the handshake. */
struct Connected {
    IND2Listener *l;
    IND2QueuePair *pqp;
    IND2QueuePair *aqp;
    Connection c;

    Connected(Pair &s, unsigned short port, void *receive = NULL)
        : l(s.passive.Listen(port)), pqp(s.passive.Qp()), aqp(s.active.Qp())
    {
        if (receive != NULL) {
            ND2_SGE rs = s.passive.Sge(0, 64);
            CHECK_HR(pqp->Receive(receive, &rs, 1));
        }
        c = Connect(s, l, port, pqp, aqp);
    }

    /* The end of the case (Finish). */
    void Finish(Pair &s) { ::Finish(s, c, l); }
};

unsigned char pattern(unsigned k) { return static_cast<unsigned char>(k * 7 + 3); }

/* A connection attempt to a listener on the passive side's `port`: a connector (the active one
 * given or new) and a QP on each side, the address the active side connects to and the
 * OVERLAPPEDs of the handshake's requests. */
struct Attempt {
    IND2Listener *l;
    IND2Connector *p;
    IND2Connector *a;
    IND2QueuePair *pqp;
    IND2QueuePair *aqp;
    sockaddr_in to;
    Nd2Ov get, conn, acc, comp;

    Attempt(Pair &s, unsigned short port, IND2Connector *active = NULL)
        : l(s.passive.Listen(port)), p(s.passive.Connector()), a(active ? active : s.active.Connector()),
          pqp(s.passive.Qp()), aqp(s.active.Qp()), to(s.passive.At(port))
    {
    }

    /* Requested: the active Connect with aqp (read limits and private data as given). */
    void Request(Pair &s, ULONG inbound, ULONG outbound, const void *data, ULONG size)
    {
        Requested(s, l, p, get, a, aqp, to, inbound, outbound, data, size, conn);
    }

    /* The passive Accept with pqp (read limits as given, no private data) issued, then the active
     * Connect completes ND_SUCCESS. */
    void Accept(Pair &s, ULONG inbound, ULONG outbound)
    {
        Issued("Accept", p->Accept(pqp, inbound, outbound, NULL, 0, &acc));
        Done(s.active, "Connect", a, &conn, ND_SUCCESS);
    }

    /* The active CompleteConnect completes ND_SUCCESS, then the passive Accept (`accept`). */
    void Established(Pair &s, const char *accept)
    {
        Completes(s.active, "CompleteConnect", a, a->CompleteConnect(&comp), &comp, ND_SUCCESS);
        Done(s.passive, accept, p, &acc, ND_SUCCESS);
    }

    /* Both sides hang up (Hangup), then the listener is released. */
    void Hangup(Pair &s)
    {
        Connection c = {p, a};
        ::Hangup(s, c);
        EXPECT(l->Release() == 0);
    }

    /* The connectors released (the active first when `activeFirst`), then the listener. */
    void Release(bool activeFirst)
    {
        EXPECT((activeFirst ? a : p)->Release() == 0);
        EXPECT((activeFirst ? p : a)->Release() == 0);
        EXPECT(l->Release() == 0);
    }
};

/* `n` bytes of the private-data pattern at `data`. */
void Patterned(unsigned char *data, size_t n)
{
    for (size_t k = 0; k < n; k++)
        data[k] = pattern(k);
}

/* Private data over the limits: ND_INVALID_BUFFER_SIZE inline, and the same connector then
 * succeeds with exactly the limit (Connect 56, Accept 196); each side reads the other's. */
ND2_CASE(private_data_limit, Pair, s)
{
    Attempt t(s, 7420);
    unsigned char data[200];
    Patterned(data, sizeof data);
    Issued("GetConnectionRequest", t.l->GetConnectionRequest(t.p, &t.get));
    Inline(s.active, "Connect with 57 bytes", t.a->Connect(t.aqp, nd2_sa(t.to), sizeof t.to, 0, 0, data, 57, &t.conn),
           &t.conn, ND_INVALID_BUFFER_SIZE);
    Issued("Connect with 56 bytes, same connector",
           t.a->Connect(t.aqp, nd2_sa(t.to), sizeof t.to, 0, 0, data, 56, &t.conn));
    Done(s.passive, "GetConnectionRequest", t.l, &t.get, ND_SUCCESS);
    unsigned char got[196];
    ULONG size = sizeof got;
    nd2_returns("passive GetPrivateData", t.p->GetPrivateData(got, &size), ND_SUCCESS);
    EXPECT(size == 56 && memcmp(got, data, 56) == 0);
    Inline(s.passive, "Accept with 197 bytes", t.p->Accept(t.pqp, 0, 0, data, 197, &t.acc), &t.acc, ND_INVALID_BUFFER_SIZE);
    Issued("Accept with 196 bytes, same connector", t.p->Accept(t.pqp, 0, 0, data, 196, &t.acc));
    Done(s.active, "Connect with 56 bytes, same connector", t.a, &t.conn, ND_SUCCESS);
    size = sizeof got;
    nd2_returns("active GetPrivateData", t.a->GetPrivateData(got, &size), ND_SUCCESS);
    EXPECT(size == 196 && memcmp(got, data, 196) == 0);
    t.Established(s, "Accept with 196 bytes, same connector");
    t.Hangup(s);
    return 0;
}

/* The listener side rejects: Reject over 148 bytes ND_INVALID_BUFFER_SIZE, then 148 bytes
 * ND_SUCCESS; Connect completes ND_CONNECTION_REFUSED with the REJ's data readable; both
 * connectors refuse what follows; the refused connector may retry and connects. */
ND2_CASE(reject, Pair, s)
{
    Attempt t(s, 7421);
    unsigned char data[149];
    Patterned(data, sizeof data);
    t.Request(s, 0, 0, NULL, 0);
    nd2_returns("Reject with 149 bytes", t.p->Reject(data, 149), ND_INVALID_BUFFER_SIZE);
    nd2_returns("Reject with 148 bytes", t.p->Reject(data, 148), ND_SUCCESS);
    Done(s.active, "Connect", t.a, &t.conn, ND_CONNECTION_REFUSED);
    unsigned char got[148];
    ULONG size = sizeof got;
    nd2_returns("GetPrivateData after the REJ", t.a->GetPrivateData(got, &size), ND_SUCCESS);
    EXPECT(size == 148 && memcmp(got, data, 148) == 0);
    ULONG in = 0, out = 0;
    nd2_returns("GetReadLimits after the REJ", t.a->GetReadLimits(&in, &out), ND_CONNECTION_INVALID);
    Inline(s.active, "CompleteConnect after the REJ", t.a->CompleteConnect(&t.comp), &t.comp, ND_CONNECTION_INVALID);
    Inline(s.passive, "Accept after Reject", t.p->Accept(t.pqp, 0, 0, NULL, 0, &t.acc), &t.acc, ND_CONNECTION_INVALID);
    nd2_returns("Reject again", t.p->Reject(NULL, 0), ND_CONNECTION_INVALID);
    EXPECT(t.p->Release() == 0);

    /* "The connection attempt may be retried": the same connector connects. */
    t.p = s.passive.Connector();
    Issued("GetConnectionRequest", t.l->GetConnectionRequest(t.p, &t.get));
    Issued("Connect again after ND_CONNECTION_REFUSED",
           t.a->Connect(t.aqp, nd2_sa(t.to), sizeof t.to, 0, 0, NULL, 0, &t.conn));
    Done(s.passive, "GetConnectionRequest", t.l, &t.get, ND_SUCCESS);
    Issued("Accept", t.p->Accept(t.pqp, 0, 0, NULL, 0, &t.acc));
    Done(s.active, "Connect again after ND_CONNECTION_REFUSED", t.a, &t.conn, ND_SUCCESS);
    t.Established(s, "Accept");
    t.Hangup(s);
    return 0;
}

/* `what`: a Connect from a new active connector (first bound to the active address when `bind`)
 * with `aqp` to `to`, no read limits and no private data, fails with `want`: inline when `ms` is
 * 0, else through the completion within `ms`. The connector is released; the milliseconds the
 * Connect took until its failure. */
double ConnectFails(Pair &s, const char *what, IND2QueuePair *aqp, bool bind, const sockaddr_in &to, HRESULT want,
                    double ms)
{
    IND2Connector *a = s.active.Connector();
    if (bind)
        CHECK_HR(a->Bind(nd2_sa(s.active.address), sizeof s.active.address));
    Nd2Ov conn;
    double started = nd2_now_ms();
    HRESULT got = a->Connect(aqp, nd2_sa(to), sizeof to, 0, 0, NULL, 0, &conn);
    if (ms == 0)
        Inline(s.active, what, got, &conn, want);
    else
        Completes(s.active, what, a, got, &conn, want, ms);
    double took = nd2_now_ms() - started;
    EXPECT(a->Release() == 0);
    return took;
}

/* Nobody listens on the port: ND_CONNECTION_REFUSED (REJ reason 8) through the completion. */
ND2_CASE(no_listener, Pair, s)
{
    ConnectFails(s, "Connect to a port nobody listens on", s.active.Qp(), false, s.passive.At(7422),
                 ND_CONNECTION_REFUSED, 15000);
    return 0;
}

/* No route: ND_NETWORK_UNREACHABLE inline; nobody behind an address of the subnet:
 * ND_HOST_UNREACHABLE through the completion. */
ND2_CASE(unreachable, Pair, s)
{
    IND2QueuePair *aqp = s.active.Qp();
    ConnectFails(s, "Connect to 203.0.113.1 (no route)", aqp, false, nd2_ipv4("203.0.113.1", 7423),
                 ND_NETWORK_UNREACHABLE, 0);
    ConnectFails(s, "Connect to 198.18.0.77 (nobody behind it)", aqp, false, nd2_ipv4("198.18.0.77", 7423),
                 ND_HOST_UNREACHABLE, 60000);
    return 0;
}

/* A REQ that nobody answers (the suite gives 198.18.0.52 a permanent neighbour entry on rxe1's
 * veth1 with a MAC no interface has): the IB CM retries for about 100 s, then UNREACHABLE, and
 * Connect completes ND_IO_TIMEOUT, as the Rust API's and NDK's io-timeout. The suite runs this
 * case in the background while the others run. */
ND2_CASE(io_timeout, Pair, s)
{
    double took = ConnectFails(s, "Connect to 198.18.0.52 (nobody answers)", s.active.Qp(), false,
                               nd2_ipv4("198.18.0.52", 7429), ND_IO_TIMEOUT, 200000);
    printf("  completed after %.0f s\n", took / 1e3);
    return 0;
}

/* Address and port errors of Bind (connector and listener), and no reuse after a failed Bind. */
ND2_CASE(address_errors, Pair, s)
{
    const unsigned short PORT = 7424;
    IND2Listener *l = s.passive.Listen(PORT);
    sockaddr_in taken = s.passive.At(PORT);
    IND2Listener *l2 = NULL;
    CHECK_HR(s.passive.adapter->CreateListener(IID_IND2Listener, s.passive.file, reinterpret_cast<void **>(&l2)));
    nd2_returns("listener Bind to a listener's port", l2->Bind(nd2_sa(taken), sizeof taken), ND_SHARING_VIOLATION);
    EXPECT(l2->Release() == 0);
    IND2Connector *c = s.passive.Connector();
    nd2_returns("connector Bind to a listener's port", c->Bind(nd2_sa(taken), sizeof taken), ND_SHARING_VIOLATION);
    nd2_returns("Bind again on the refused connector", c->Bind(nd2_sa(taken), sizeof taken), ND_CONNECTION_INVALID);
    Nd2Ov conn;
    sockaddr_in to = s.active.At(PORT);
    Inline(s.passive, "Connect on the refused connector", c->Connect(s.passive.Qp(), nd2_sa(to), sizeof to, 0, 0, NULL, 0, &conn),
           &conn, ND_CONNECTION_INVALID);
    EXPECT(c->Release() == 0);

    sockaddr_in testNet = nd2_ipv4("192.0.2.1", 0), loopback = nd2_ipv4("127.0.0.1", 0);
    c = s.passive.Connector();
    nd2_returns("connector Bind to 192.0.2.1", c->Bind(nd2_sa(testNet), sizeof testNet), ND_INVALID_ADDRESS);
    EXPECT(c->Release() == 0);
    c = s.passive.Connector();
    nd2_returns("connector Bind to 127.0.0.1", c->Bind(nd2_sa(loopback), sizeof loopback), ND_INVALID_ADDRESS);
    EXPECT(c->Release() == 0);
    c = s.passive.Connector();
    nd2_returns("connector Bind with an 8-byte sockaddr_in", c->Bind(nd2_sa(s.passive.address), 8), ND_INVALID_ADDRESS);
    EXPECT(c->Release() == 0);
    CHECK_HR(s.passive.adapter->CreateListener(IID_IND2Listener, s.passive.file, reinterpret_cast<void **>(&l2)));
    nd2_returns("listener Bind to 127.0.0.1", l2->Bind(nd2_sa(loopback), sizeof loopback), ND_INVALID_ADDRESS);
    EXPECT(l2->Release() == 0);

    c = s.passive.Connector();
    nd2_returns("connector Bind to port 0", c->Bind(nd2_sa(s.passive.address), sizeof s.passive.address), ND_SUCCESS);
    nd2_returns("connector Bind again", c->Bind(nd2_sa(s.passive.address), sizeof s.passive.address),
            STATUS_ADDRESS_ALREADY_ASSOCIATED);
    EXPECT(c->Release() == 0);
    EXPECT(l->Release() == 0);
    /* The port is free again once its listener is gone. */
    c = s.passive.Connector();
    nd2_returns("connector Bind to the released listener's port", c->Bind(nd2_sa(taken), sizeof taken), ND_SUCCESS);
    EXPECT(c->Release() == 0);
    return 0;
}

/* The ND range narrowed by the suite (ND_SHIM_PORT_RANGE) and used up: ND_TOO_MANY_ADDRESSES
 * from a connector's and a listener's Bind to port 0. */
ND2_CASE(ports_exhausted, Pair, s)
{
    EXPECT(getenv("ND_SHIM_PORT_RANGE") != NULL);
    std::vector<IND2Connector *> held;
    HRESULT hr;
    for (;;) {
        IND2Connector *c = s.passive.Connector();
        hr = c->Bind(nd2_sa(s.passive.address), sizeof s.passive.address);
        if (hr != ND_SUCCESS) {
            EXPECT(c->Release() == 0);
            break;
        }
        held.push_back(c);
        EXPECT(held.size() < 1000);
    }
    printf("  %zu binds in %s\n", held.size(), getenv("ND_SHIM_PORT_RANGE"));
    nd2_returns("connector Bind to port 0 with the range used up", hr, ND_TOO_MANY_ADDRESSES);
    IND2Listener *l = NULL;
    CHECK_HR(s.passive.adapter->CreateListener(IID_IND2Listener, s.passive.file, reinterpret_cast<void **>(&l)));
    nd2_returns("listener Bind to port 0 with the range used up", l->Bind(nd2_sa(s.passive.address), sizeof s.passive.address),
            ND_TOO_MANY_ADDRESSES);
    EXPECT(l->Release() == 0);
    for (IND2Connector *c : held)
        EXPECT(c->Release() == 0);
    return 0;
}

/* A listener on the passive side's `port` that takes no request, and an active connector (bound
 * to the active address first when `bind`) whose Connect with `aqp` to it was still pending after
 * `ms`, until CancelOverlappedRequests completed it ND_CANCELED before returning. */
struct CancelledConnect {
    IND2Listener *l;
    IND2Connector *a;
    sockaddr_in to;

    CancelledConnect(Pair &s, unsigned short port, bool bind, IND2QueuePair *aqp, double ms)
        : l(s.passive.Listen(port)), a(s.active.Connector()), to(s.passive.At(port))
    {
        if (bind)
            CHECK_HR(a->Bind(nd2_sa(s.active.address), sizeof s.active.address));
        Nd2Ov conn;
        StillPending("Connect, never taken", a, a->Connect(aqp, nd2_sa(to), sizeof to, 0, 0, NULL, 0, &conn), &conn,
                     ms);
        nd2_returns("CancelOverlappedRequests", a->CancelOverlappedRequests(), ND_SUCCESS);
        EXPECT(a->GetOverlappedResult(&conn, FALSE) == ND_CANCELED);
        Done(s.active, "Connect, cancelled", a, &conn, ND_CANCELED, 0);
    }

    /* The connector, then the listener released. */
    void Release()
    {
        EXPECT(a->Release() == 0);
        EXPECT(l->Release() == 0);
    }
};

/* A Connect nobody takes stays pending; CancelOverlappedRequests completes it ND_CANCELED
 * (queued before it returns); CompleteConnect then has nothing to complete. */
ND2_CASE(cancel_connect, Pair, s)
{
    CancelledConnect x(s, 7425, false, s.active.Qp(), 1000);
    Nd2Ov comp;
    Inline(s.active, "CompleteConnect after the cancel", x.a->CompleteConnect(&comp), &comp, ND_CONNECTION_INVALID);
    x.Release();
    return 0;
}

/* The active side abandons a request the passive side has taken: Accept and Reject on it
 * fail ND_CONNECTION_ABORTED inline. */
ND2_CASE(abandoned, Pair, s)
{
    const unsigned short PORT = 7426;
    IND2Listener *l = s.passive.Listen(PORT);
    IND2QueuePair *pqp = s.passive.Qp();
    IND2QueuePair *aqp = s.active.Qp();
    sockaddr_in to = s.passive.At(PORT);
    for (int round = 0; round < 2; round++) {
        IND2Connector *p = s.passive.Connector();
        IND2Connector *a = s.active.Connector();
        Nd2Ov get, conn, acc;
        Requested(s, l, p, get, a, aqp, to, 0, 0, NULL, 0, conn);
        nd2_returns("active CancelOverlappedRequests", a->CancelOverlappedRequests(), ND_SUCCESS);
        Done(s.active, "Connect, abandoned", a, &conn, ND_CANCELED, 0);
        EXPECT(a->Release() == 0);
        usleep(500 * 1000); /* the REJ reaches the passive CM */
        if (round == 0)
            Inline(s.passive, "Accept of the abandoned request", p->Accept(pqp, 0, 0, NULL, 0, &acc), &acc,
                   ND_CONNECTION_ABORTED);
        else
            nd2_returns("Reject of the abandoned request", p->Reject(NULL, 0), ND_CONNECTION_ABORTED);
        EXPECT(p->Release() == 0);
    }
    EXPECT(l->Release() == 0);
    return 0;
}

/* The active side rejects after its Connect completed (read limits not to its liking): the
 * passive Accept completes ND_CONNECTION_REFUSED. */
ND2_CASE(active_reject, Pair, s)
{
    Attempt t(s, 7427);
    t.Request(s, 4, 4, NULL, 0);
    t.Accept(s, 1, 1);
    ULONG in = 0, out = 0;
    nd2_returns("active GetReadLimits", t.a->GetReadLimits(&in, &out), ND_SUCCESS);
    EXPECT(in == 1 && out == 1);
    nd2_returns("active Reject after Connect", t.a->Reject(NULL, 0), ND_SUCCESS);
    Done(s.passive, "Accept", t.p, &t.acc, ND_CONNECTION_REFUSED);
    t.Release(true);
    return 0;
}

/* The active side holds back CompleteConnect: the passive Accept stays pending until
 * CancelOverlappedRequests completes it ND_CANCELED. */
ND2_CASE(cancel_accept, Pair, s)
{
    Attempt t(s, 7428);
    t.Request(s, 0, 0, NULL, 0);
    HRESULT issued = t.p->Accept(t.pqp, 0, 0, NULL, 0, &t.acc);
    Done(s.active, "Connect", t.a, &t.conn, ND_SUCCESS);
    StillPending("Accept without the RTU", t.p, issued, &t.acc, 1000);
    nd2_returns("passive CancelOverlappedRequests", t.p->CancelOverlappedRequests(), ND_SUCCESS);
    Done(s.passive, "Accept, cancelled", t.p, &t.acc, ND_CANCELED, 0);
    t.Release(false);
    return 0;
}

/* The passive side abandons after its REP (releases its connector): its pending Accept
 * completes ND_CANCELED before Release returns, and the active CompleteConnect fails
 * ND_CONNECTION_ABORTED inline. */
ND2_CASE(complete_connect_aborted, Pair, s)
{
    Attempt t(s, 7429);
    t.Request(s, 0, 0, NULL, 0);
    t.Accept(s, 0, 0);
    EXPECT(t.p->Release() == 0);
    /* Final before Release returned; read through the listener, the connector is gone. */
    EXPECT(t.acc.ov.Internal == static_cast<ULONG_PTR>(static_cast<LONG_PTR>(ND_CANCELED)));
    Done(s.passive, "Accept, its connector released", t.l, &t.acc, ND_CANCELED, 0);
    usleep(500 * 1000); /* the REJ for the released id reaches the active side */
    Inline(s.active, "CompleteConnect after the passive side abandoned", t.a->CompleteConnect(&t.comp), &t.comp,
           ND_CONNECTION_ABORTED);
    EXPECT(t.a->Release() == 0);
    EXPECT(t.l->Release() == 0);
    return 0;
}

/* A connected connector or a QP another connection uses: ND_CONNECTION_ACTIVE inline, from
 * Connect, Accept and GetConnectionRequest; CompleteConnect when connected:
 * ND_CONNECTION_INVALID inline. */
ND2_CASE(connection_active, Pair, s)
{
    const unsigned short PORT = 7430;
    Connected x(s, PORT);
    sockaddr_in to = s.passive.At(PORT);
    Nd2Ov conn, comp, get, acc, conn2;
    Inline(s.active, "Connect on a connected connector", x.c.a->Connect(x.aqp, nd2_sa(to), sizeof to, 0, 0, NULL, 0, &conn),
           &conn, ND_CONNECTION_ACTIVE);
    Inline(s.active, "CompleteConnect when connected", x.c.a->CompleteConnect(&comp), &comp, ND_CONNECTION_INVALID);
    IND2Connector *a2 = s.active.Connector();
    Inline(s.active, "Connect with a connected QP", a2->Connect(x.aqp, nd2_sa(to), sizeof to, 0, 0, NULL, 0, &conn), &conn,
           ND_CONNECTION_ACTIVE);
    EXPECT(a2->Release() == 0);
    Inline(s.passive, "GetConnectionRequest with a connected connector", x.l->GetConnectionRequest(x.c.p, &get), &get,
           ND_CONNECTION_ACTIVE);
    IND2Connector *p2 = s.passive.Connector();
    IND2Connector *a3 = s.active.Connector();
    Issued("GetConnectionRequest", x.l->GetConnectionRequest(p2, &get));
    Issued("Connect with a second QP", a3->Connect(s.active.Qp(), nd2_sa(to), sizeof to, 0, 0, NULL, 0, &conn2));
    Done(s.passive, "GetConnectionRequest", x.l, &get, ND_SUCCESS);
    Inline(s.passive, "Accept with the QP of another connection", p2->Accept(x.pqp, 0, 0, NULL, 0, &acc), &acc,
           ND_CONNECTION_ACTIVE);
    EXPECT(p2->Release() == 0);
    EXPECT(Wait(a3, &conn2, 15000) != ND_PENDING);
    s.active.Packet(&conn2, false);
    EXPECT(a3->Release() == 0);
    /* The first connection still carries data. */
    ND2_SGE rs = s.passive.Sge(0, 64);
    CHECK_HR(x.pqp->Receive(s.passive.buf, &rs, 1));
    memcpy(s.active.buf, "still connected", 16);
    ND2_SGE ss = s.active.Sge(0, 16);
    CHECK_HR(x.aqp->Send(s.active.buf, &ss, 1, 0));
    ND2_RESULT r;
    double until = nd2_now_ms() + 5000;
    while (s.passive.cq->GetResults(&r, 1) == 0)
        EXPECT(nd2_now_ms() < until);
    EXPECT(r.Status == ND_SUCCESS && r.RequestType == Nd2RequestTypeReceive && r.BytesTransferred == 16);
    EXPECT(memcmp(s.passive.buf, "still connected", 16) == 0);
    x.Finish(s);
    return 0;
}

/* A request context that names request k of a case. */
void *Context(unsigned k) { return reinterpret_cast<void *>(static_cast<uintptr_t>(0x7000 + k)); }

/* Takes `n` completions from `side`'s CQ (waiting up to 10 s) into `out`. */
void Results(Side &side, ND2_RESULT *out, unsigned n)
{
    double until = nd2_now_ms() + 10000;
    for (unsigned got = 0; got < n;) {
        got += side.cq->GetResults(out + got, n - got);
        if (got < n && nd2_now_ms() > until)
            FAIL("%s: %u of %u completions after 10 s", side.label, got, n);
    }
}

/* The completion of the request with context `ctx` among `n`; it must have `status` and `type`. */
void Expect(const char *what, const ND2_RESULT *results, unsigned n, void *ctx, HRESULT status, ND2_REQUEST_TYPE type,
            void *qpContext)
{
    for (unsigned k = 0; k < n; k++) {
        if (results[k].RequestContext != ctx)
            continue;
        if (results[k].Status != status || results[k].RequestType != type || results[k].QueuePairContext != qpContext)
            FAIL("%s: status %s (0x%08x), RequestType %d, QueuePairContext %p; want %s, RequestType %d, %p", what,
                 nd2_status_name(results[k].Status), (unsigned)results[k].Status, results[k].RequestType,
                 results[k].QueuePairContext, nd2_status_name(status), type, qpContext);
        printf("  %s: %s (0x%08x), RequestType %d\n", what, nd2_status_name(status), (unsigned)status, type);
        return;
    }
    FAIL("%s: no completion with its context", what);
}

/* The getters by state: ND_CONNECTION_INVALID before there is anything to report,
 * ND_BUFFER_OVERFLOW with the size (addresses: buffer untouched; private data: partial copy),
 * ND_SUCCESS with the right values. */
ND2_CASE(getters, Pair, s)
{
    IND2Connector *fresh = s.active.Connector();
    ULONG in = 0, out = 0, size = 0;
    unsigned char buf[256];
    size = sizeof buf;
    nd2_returns("GetReadLimits on a new connector", fresh->GetReadLimits(&in, &out), ND_CONNECTION_INVALID);
    nd2_returns("GetPrivateData on a new connector", fresh->GetPrivateData(buf, &size), ND_CONNECTION_INVALID);
    size = sizeof buf;
    nd2_returns("GetLocalAddress on a new connector", fresh->GetLocalAddress(reinterpret_cast<sockaddr *>(buf), &size),
            ND_CONNECTION_INVALID);
    size = sizeof buf;
    nd2_returns("GetPeerAddress on a new connector", fresh->GetPeerAddress(reinterpret_cast<sockaddr *>(buf), &size),
            ND_CONNECTION_INVALID);
    EXPECT(fresh->Release() == 0);

    Attempt t(s, 7431);
    unsigned char data[56];
    Patterned(data, sizeof data);
    t.Request(s, 3, 2, data, 56);
    nd2_returns("passive GetReadLimits after the request", t.p->GetReadLimits(&in, &out), ND_SUCCESS);
    EXPECT(in == 2 && out == 3);
    size = 0;
    nd2_returns("GetPrivateData with no buffer", t.p->GetPrivateData(NULL, &size), ND_BUFFER_OVERFLOW);
    EXPECT(size == 56);
    memset(buf, 0xEE, sizeof buf);
    size = 4;
    nd2_returns("GetPrivateData with 4 bytes", t.p->GetPrivateData(buf, &size), ND_BUFFER_OVERFLOW);
    EXPECT(size == 56 && memcmp(buf, data, 4) == 0 && buf[4] == 0xEE);
    sockaddr_in addr;
    ULONG len = sizeof addr;
    nd2_returns("passive GetLocalAddress after the request", t.p->GetLocalAddress(reinterpret_cast<sockaddr *>(&addr), &len),
            ND_SUCCESS);
    EXPECT(len == sizeof addr && addr.sin_addr.s_addr == t.to.sin_addr.s_addr && addr.sin_port == t.to.sin_port);
    len = sizeof addr;
    /* The request carries the peer's address: Microsoft's ndmpic reads it before Accept. */
    nd2_returns("passive GetPeerAddress before Accept", t.p->GetPeerAddress(reinterpret_cast<sockaddr *>(&addr), &len),
            ND_SUCCESS);
    EXPECT(len == sizeof addr && addr.sin_addr.s_addr == s.active.address.sin_addr.s_addr);
    unsigned short requestPort = addr.sin_port;
    t.Accept(s, 8, 8);
    nd2_returns("active GetReadLimits after Connect", t.a->GetReadLimits(&in, &out), ND_SUCCESS);
    EXPECT(in == 3 && out == 2); /* the passive side's 8/8, capped to what Connect offered */
    len = sizeof addr;
    nd2_returns("active GetLocalAddress while connecting", t.a->GetLocalAddress(reinterpret_cast<sockaddr *>(&addr), &len),
            ND_SUCCESS);
    EXPECT(addr.sin_addr.s_addr == s.active.address.sin_addr.s_addr && ntohs(addr.sin_port) >= 49152);
    unsigned short activePort = addr.sin_port;
    EXPECT(activePort == requestPort);
    t.Established(s, "Accept");

    memset(&addr, 0xAB, sizeof addr);
    len = 4;
    nd2_returns("GetPeerAddress with 4 bytes", t.a->GetPeerAddress(reinterpret_cast<sockaddr *>(&addr), &len),
            ND_BUFFER_OVERFLOW);
    EXPECT(len == sizeof addr && reinterpret_cast<unsigned char *>(&addr)[0] == 0xAB);
    len = 4;
    nd2_returns("GetLocalAddress with 4 bytes", t.a->GetLocalAddress(reinterpret_cast<sockaddr *>(&addr), &len),
            ND_BUFFER_OVERFLOW);
    EXPECT(len == sizeof addr && reinterpret_cast<unsigned char *>(&addr)[0] == 0xAB);
    len = sizeof addr;
    nd2_returns("active GetPeerAddress", t.a->GetPeerAddress(reinterpret_cast<sockaddr *>(&addr), &len), ND_SUCCESS);
    EXPECT(addr.sin_addr.s_addr == t.to.sin_addr.s_addr && addr.sin_port == t.to.sin_port);
    len = sizeof addr;
    nd2_returns("passive GetPeerAddress", t.p->GetPeerAddress(reinterpret_cast<sockaddr *>(&addr), &len), ND_SUCCESS);
    EXPECT(addr.sin_addr.s_addr == s.active.address.sin_addr.s_addr && addr.sin_port == activePort);
    len = 4;
    nd2_returns("listener GetLocalAddress with 4 bytes", t.l->GetLocalAddress(reinterpret_cast<sockaddr *>(&addr), &len),
            ND_BUFFER_OVERFLOW);
    EXPECT(len == sizeof addr);
    t.Hangup(s);
    return 0;
}

/* NotifyDisconnect and Disconnect: ND_CONNECTION_INVALID inline when never connected;
 * NotifyDisconnect ND_CANCELED by CancelOverlappedRequests, then ND_SUCCESS on the peer's
 * Disconnect, which flushes the QP (the outstanding receive ND_CANCELED); Disconnect
 * ND_SUCCESS. */
ND2_CASE(disconnect_codes, Pair, s)
{
    const unsigned short PORT = 7432;
    IND2Connector *fresh = s.passive.Connector();
    Nd2Ov nd, d;
    Inline(s.passive, "NotifyDisconnect on a new connector", fresh->NotifyDisconnect(&nd), &nd, ND_CONNECTION_INVALID);
    Inline(s.passive, "Disconnect on a new connector", fresh->Disconnect(&d), &d, ND_CONNECTION_INVALID);
    EXPECT(fresh->Release() == 0);

    IND2Listener *l = s.passive.Listen(PORT);
    IND2QueuePair *pqp = s.passive.Qp();
    Connection c = Connect(s, l, PORT, pqp, s.active.Qp());
    ND2_SGE rs = s.passive.Sge(0, 64);
    CHECK_HR(pqp->Receive(s.passive.buf, &rs, 1));
    Nd2Ov nd1, nd2, ad, pd;
    StillPending("NotifyDisconnect", c.p, c.p->NotifyDisconnect(&nd1), &nd1, 200);
    nd2_returns("CancelOverlappedRequests", c.p->CancelOverlappedRequests(), ND_SUCCESS);
    Done(s.passive, "NotifyDisconnect, cancelled", c.p, &nd1, ND_CANCELED, 0);
    Issued("NotifyDisconnect again", c.p->NotifyDisconnect(&nd2));
    Issued("active Disconnect", c.a->Disconnect(&ad));
    Done(s.passive, "NotifyDisconnect again", c.p, &nd2, ND_SUCCESS);
    /* The peer's disconnect flushes the QP (Microsoft's ndmemorytest NdReceiveConnClosed). */
    ND2_RESULT r;
    Results(s.passive, &r, 1);
    EXPECT(r.Status == ND_CANCELED && r.RequestContext == s.passive.buf);
    printf("  outstanding receive after the peer's Disconnect: ND_CANCELED\n");
    /* The active Disconnect waits for the passive side's (its DREP). */
    EXPECT(c.a->GetOverlappedResult(&ad, FALSE) == ND_PENDING);
    Completes(s.passive, "passive Disconnect after the peer's", c.p, c.p->Disconnect(&pd), &pd, ND_SUCCESS);
    Done(s.active, "active Disconnect", c.a, &ad, ND_SUCCESS);
    EXPECT(c.a->Release() == 0);
    EXPECT(c.p->Release() == 0);
    EXPECT(l->Release() == 0);
    return 0;
}

/* IND2Listener: GetLocalAddress and GetConnectionRequest before Listen:
 * ND_INVALID_DEVICE_STATE; Bind to port 0 picks from 49152-65535; Listen twice:
 * ND_INVALID_DEVICE_STATE; a pending GetConnectionRequest: ND_CANCELED. */
ND2_CASE(listener_codes, Pair, s)
{
    IND2Listener *l = NULL;
    CHECK_HR(s.passive.adapter->CreateListener(IID_IND2Listener, s.passive.file, reinterpret_cast<void **>(&l)));
    sockaddr_in addr;
    ULONG len = sizeof addr;
    nd2_returns("GetLocalAddress before Bind", l->GetLocalAddress(reinterpret_cast<sockaddr *>(&addr), &len),
            ND_INVALID_DEVICE_STATE);
    IND2Connector *p = s.passive.Connector();
    Nd2Ov get, get2;
    nd2_returns("Bind to port 0", l->Bind(nd2_sa(s.passive.address), sizeof s.passive.address), ND_SUCCESS);
    Inline(s.passive, "GetConnectionRequest before Listen", l->GetConnectionRequest(p, &get), &get,
           ND_INVALID_DEVICE_STATE);
    nd2_returns("Listen", l->Listen(0), ND_SUCCESS);
    nd2_returns("Listen again", l->Listen(0), ND_INVALID_DEVICE_STATE);
    len = sizeof addr;
    nd2_returns("GetLocalAddress", l->GetLocalAddress(reinterpret_cast<sockaddr *>(&addr), &len), ND_SUCCESS);
    EXPECT(len == sizeof addr && addr.sin_addr.s_addr == s.passive.address.sin_addr.s_addr);
    EXPECT(ntohs(addr.sin_port) >= 49152);
    printf("  listening on port %u\n", ntohs(addr.sin_port));
    memset(&addr, 0xAB, sizeof addr);
    len = 4;
    nd2_returns("GetLocalAddress with 4 bytes", l->GetLocalAddress(reinterpret_cast<sockaddr *>(&addr), &len),
            ND_BUFFER_OVERFLOW);
    EXPECT(len == sizeof addr && reinterpret_cast<unsigned char *>(&addr)[0] == 0xAB);
    StillPending("GetConnectionRequest", l, l->GetConnectionRequest(p, &get2), &get2, 200);
    nd2_returns("CancelOverlappedRequests", l->CancelOverlappedRequests(), ND_SUCCESS);
    Done(s.passive, "GetConnectionRequest, cancelled", l, &get2, ND_CANCELED, 0);
    EXPECT(p->Release() == 0);
    EXPECT(l->Release() == 0);
    return 0;
}

/* ND2_RESULT.RequestType (and RequestContext) of failed and flushed requests: verbs leaves a
 * failed completion's opcode undefined, so the type must come from the request as posted. A
 * silent send (ND_OP_FLAG_SILENT_SUCCESS) with an SGE outside its region fails with
 * ND_ACCESS_VIOLATION and reports Send; the QP is then in error, and what was posted after it
 * (a signalled send, another silent send, a write) and the receive posted before it are flushed
 * with ND_CANCELED, each reporting its own type. */
ND2_CASE(failed_request_types, Pair, s)
{
    Connected x(s, 7433);
    UINT32 token = s.active.mr->GetLocalToken();
    ND2_SGE receive = {s.active.buf, 64, token};
    CHECK_HR(x.aqp->Receive(Context(1), &receive, 1));
    ND2_SGE outside = {s.active.buf + sizeof s.active.buf, 16, token};
    CHECK_HR(x.aqp->Send(Context(2), &outside, 1, ND_OP_FLAG_SILENT_SUCCESS));
    ND2_SGE inside = {s.active.buf + 64, 16, token};
    CHECK_HR(x.aqp->Send(Context(3), &inside, 1, 0));
    CHECK_HR(x.aqp->Send(Context(4), &inside, 1, ND_OP_FLAG_SILENT_SUCCESS));
    CHECK_HR(x.aqp->Write(Context(5), &inside, 1, reinterpret_cast<uintptr_t>(s.passive.buf),
                        s.passive.mr->GetRemoteToken(), 0));
    ND2_RESULT r[5];
    Results(s.active, r, 5);
    Expect("silent Send outside its region", r, 5, Context(2), ND_ACCESS_VIOLATION, Nd2RequestTypeSend, &s.active);
    Expect("Send after it", r, 5, Context(3), ND_CANCELED, Nd2RequestTypeSend, &s.active);
    Expect("silent Send after it", r, 5, Context(4), ND_CANCELED, Nd2RequestTypeSend, &s.active);
    Expect("Write after it", r, 5, Context(5), ND_CANCELED, Nd2RequestTypeWrite, &s.active);
    Expect("Receive posted before", r, 5, Context(1), ND_CANCELED, Nd2RequestTypeReceive, &s.active);
    /* The sends completed in post order. */
    unsigned order = 0;
    for (unsigned k = 0; k < 5; k++)
        if (r[k].RequestContext != Context(1))
            EXPECT(r[k].RequestContext == Context(2 + order++));
    x.Finish(s);
    return 0;
}

/* The same through a shared receive queue: an SRQ receive too small for the message fails and
 * reports Receive with its context (the peer's send: ND_REMOTE_ERROR, Send); after Flush, an SRQ
 * receive that a flush completes reports Receive and ND_CANCELED (the kernel's rxe leaves SRQ
 * receives in the SRQ for its other QPs: then none comes, which the case prints). */
ND2_CASE(srq_request_types, Pair, s)
{
    const unsigned short PORT = 7434;
    IND2Listener *l = s.passive.Listen(PORT);
    IND2SharedReceiveQueue *srq = NULL;
    CHECK_HR(s.passive.adapter->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, s.passive.file, 8, 1, 0, 0, 0,
                                                         reinterpret_cast<void **>(&srq)));
    IND2QueuePair *pqp = NULL;
    CHECK_HR(s.passive.adapter->CreateQueuePairWithSrq(IID_IND2QueuePair, s.passive.cq, s.passive.cq, srq,
                                                       &s.passive, 8, 1, 0, reinterpret_cast<void **>(&pqp)));
    s.passive.qps.push_back(pqp);
    IND2QueuePair *aqp = s.active.Qp();
    Connection c = Connect(s, l, PORT, pqp, aqp);
    ND2_SGE small = s.passive.Sge(0, 8);
    CHECK_HR(srq->Receive(Context(1), &small, 1));
    ND2_SGE message = s.active.Sge(0, 16);
    CHECK_HR(aqp->Send(Context(2), &message, 1, 0));
    ND2_RESULT r;
    Results(s.passive, &r, 1);
    EXPECT(FAILED(r.Status));
    Expect("SRQ Receive too small", &r, 1, Context(1), r.Status, Nd2RequestTypeReceive, &s.passive);
    Results(s.active, &r, 1);
    EXPECT(FAILED(r.Status));
    Expect("Send to it", &r, 1, Context(2), r.Status, Nd2RequestTypeSend, &s.active);
    ND2_SGE next = s.passive.Sge(0, 64);
    CHECK_HR(srq->Receive(Context(3), &next, 1));
    CHECK_HR(pqp->Flush());
    double until = nd2_now_ms() + 1000;
    unsigned flushed = 0;
    while (nd2_now_ms() < until) {
        if (s.passive.cq->GetResults(&r, 1) == 0) {
            usleep(1000);
            continue;
        }
        Expect("SRQ Receive after Flush", &r, 1, Context(3), ND_CANCELED, Nd2RequestTypeReceive, &s.passive);
        flushed++;
    }
    EXPECT(flushed <= 1);
    if (flushed == 0)
        printf("  SRQ Receive after Flush: stays in the SRQ (no completion in 1 s)\n");
    Finish(s, c, l);
    s.passive.qps.pop_back();
    EXPECT(pqp->Release() == 0);
    EXPECT(srq->Release() == 0);
    return 0;
}

/* Connect to 0.0.0.0 (Microsoft's ndmemorytest NdInvalidIP zeroes the server's address and
 * expects STATUS_BAD_NETWORK_NAME): inline, at once. */
ND2_CASE(invalid_ip, Pair, s)
{
    double took = ConnectFails(s, "Connect to 0.0.0.0", s.active.Qp(), true, nd2_ipv4("0.0.0.0", 7435),
                               STATUS_BAD_NETWORK_NAME, 0);
    EXPECT(took < 1000);
    return 0;
}

/* A Send to a peer that posted no receive (Microsoft's ndmemorytest NdSendNoReceive): the RNR
 * retries are finite, so the Send completes ND_IO_TIMEOUT instead of waiting for ever; the
 * passive side sees no completion. */
ND2_CASE(send_no_receive, Pair, s)
{
    Connected x(s, 7436);
    ND2_SGE message = s.active.Sge(0, 64);
    double started = nd2_now_ms();
    CHECK_HR(x.aqp->Send(Context(1), &message, 1, 0));
    ND2_RESULT r;
    double until = nd2_now_ms() + 60000;
    while (s.active.cq->GetResults(&r, 1) == 0) {
        if (nd2_now_ms() > until)
            FAIL("no completion for the Send after 60 s");
        usleep(1000);
    }
    Expect("Send with no receive posted", &r, 1, Context(1), ND_IO_TIMEOUT, Nd2RequestTypeSend, &s.active);
    printf("  completed after %.1f s\n", (nd2_now_ms() - started) / 1e3);
    EXPECT(s.passive.cq->GetResults(&r, 1) == 0);
    x.Finish(s);
    return 0;
}

/* A receive posted before Accept, and the peer releases its connector right after
 * CompleteConnect (Microsoft's ndmemorytest NdReceiveConnClosed): the receive completes
 * ND_CANCELED once the disconnect arrives; the passive Disconnect then succeeds. */
ND2_CASE(receive_peer_closed, Pair, s)
{
    Connected x(s, 7437, Context(1));
    EXPECT(x.c.a->Release() == 0);
    ND2_RESULT r;
    Results(s.passive, &r, 1);
    Expect("Receive after the peer released its connector", &r, 1, Context(1), ND_CANCELED, Nd2RequestTypeReceive,
           &s.passive);
    Nd2Ov pd;
    Completes(s.passive, "passive Disconnect after the peer's", x.c.p, x.c.p->Disconnect(&pd), &pd, ND_SUCCESS);
    EXPECT(x.c.p->Release() == 0);
    DrainCqs(s);
    EXPECT(x.l->Release() == 0);
    return 0;
}

/* Receives posted after the QP is in the error state complete ND_CANCELED too, instead of
 * staying posted: first after the peer released its connector (the peer's disconnect flushed
 * the QP), then after IND2QueuePair::Flush of a QP never connected. Microsoft's ndpingpong
 * (src/examples/ndpingpong/ndpingpong.cpp:136-153) keeps posting a receive per iteration once
 * a completion was ND_CANCELED; on rxe such receives stayed posted until the queue was full
 * (ND_NO_MEMORY). Every one posted here must complete within 10 s (Results). */
ND2_CASE(receive_after_flush, Pair, s)
{
    const unsigned N = 8; /* Side::Qp's receive depth: three rounds post three times as many */
    Connected x(s, 7439, Context(1));
    ND2_SGE rs = s.passive.Sge(0, 64);
    EXPECT(x.c.a->Release() == 0);
    ND2_RESULT r[N];
    Results(s.passive, r, 1);
    Expect("Receive before the peer released its connector", r, 1, Context(1), ND_CANCELED, Nd2RequestTypeReceive,
           &s.passive);
    /* The QP is in error now: a queue's worth of receives, three times over. */
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned k = 0; k < N; k++)
            nd2_returns("Receive after the peer's disconnect", x.pqp->Receive(Context(100 + k), &rs, 1), ND_SUCCESS);
        Results(s.passive, r, N);
        for (unsigned k = 0; k < N; k++)
            if (r[k].Status != ND_CANCELED || r[k].RequestType != Nd2RequestTypeReceive)
                FAIL("receive %u after the peer's disconnect: %s (0x%08x)", k, nd2_status_name(r[k].Status),
                     (unsigned)r[k].Status);
    }
    printf("  %u receives posted after the peer's disconnect: all ND_CANCELED\n", 3 * N);
    Nd2Ov pd;
    Completes(s.passive, "passive Disconnect after the peer's", x.c.p, x.c.p->Disconnect(&pd), &pd, ND_SUCCESS);
    EXPECT(x.c.p->Release() == 0);
    EXPECT(x.l->Release() == 0);

    /* A QP never connected, flushed by the caller. */
    IND2QueuePair *fqp = s.passive.Qp();
    CHECK_HR(fqp->Flush());
    for (unsigned k = 0; k < N; k++)
        nd2_returns("Receive after Flush", fqp->Receive(Context(200 + k), &rs, 1), ND_SUCCESS);
    Results(s.passive, r, N);
    for (unsigned k = 0; k < N; k++)
        if (r[k].Status != ND_CANCELED)
            FAIL("receive %u after Flush: %s (0x%08x)", k, nd2_status_name(r[k].Status), (unsigned)r[k].Status);
    printf("  %u receives posted after Flush: all ND_CANCELED\n", N);
    DrainCqs(s);
    return 0;
}

/* True if the SOCKET_ADDRESS_LIST holds IPv4 `ip`. */
bool Lists(const SOCKET_ADDRESS_LIST *list, const sockaddr_in &ip)
{
    for (INT i = 0; i < list->iAddressCount; i++) {
        const sockaddr *a = list->Address[i].lpSockaddr;
        if (a->sa_family == AF_INET && reinterpret_cast<const sockaddr_in *>(a)->sin_addr.s_addr == ip.sin_addr.s_addr)
            return true;
    }
    return false;
}

/* NdQueryAddressList honours its flags (ndsupport.h; Microsoft's ndutil framework): the shim is
 * an NDv2 provider, so ND_QUERY_EXCLUDE_NDv2_ADDRESSES leaves no address (size 0, ND_SUCCESS)
 * and the emulator and NDv1 flags leave every one. IND2Adapter::QueryAddressList lists the
 * addresses of its own adapter: rxe0's, not rxe1's. */
ND2_CASE(address_list, Pair, s)
{
    SIZE_T all = 0;
    nd2_returns("NdQueryAddressList(0) size probe", NdQueryAddressList(0, NULL, &all), ND_BUFFER_OVERFLOW);
    std::vector<char> buf(all);
    SOCKET_ADDRESS_LIST *list = reinterpret_cast<SOCKET_ADDRESS_LIST *>(buf.data());
    nd2_returns("NdQueryAddressList(0)", NdQueryAddressList(0, list, &all), ND_SUCCESS);
    EXPECT(Lists(list, s.passive.address) && Lists(list, s.active.address));
    SIZE_T size = 0;
    nd2_returns("NdQueryAddressList(EXCLUDE_EMULATOR | EXCLUDE_NDv1) size probe",
            NdQueryAddressList(ND_QUERY_EXCLUDE_EMULATOR_ADDRESSES | ND_QUERY_EXCLUDE_NDv1_ADDRESSES, NULL, &size),
            ND_BUFFER_OVERFLOW);
    EXPECT(size == all);
    size = 123;
    nd2_returns("NdQueryAddressList(EXCLUDE_NDv2)", NdQueryAddressList(ND_QUERY_EXCLUDE_NDv2_ADDRESSES, NULL, &size),
            ND_SUCCESS);
    EXPECT(size == 0);
    printf("  NdQueryAddressList(EXCLUDE_NDv2): no address, size 0\n");

    ULONG mine = 0;
    nd2_returns("passive IND2Adapter::QueryAddressList size probe", s.passive.adapter->QueryAddressList(NULL, &mine),
            ND_BUFFER_OVERFLOW);
    std::vector<char> own(mine);
    SOCKET_ADDRESS_LIST *ownList = reinterpret_cast<SOCKET_ADDRESS_LIST *>(own.data());
    nd2_returns("passive IND2Adapter::QueryAddressList",
            s.passive.adapter->QueryAddressList(ownList, &mine), ND_SUCCESS);
    EXPECT(Lists(ownList, s.passive.address) && !Lists(ownList, s.active.address));
    printf("  passive adapter lists %d address(es), its own and not the active side's\n", ownList->iAddressCount);
    return 0;
}

/* A connection of the churn cases on listener `l` (the passive side's `port`), with QPs of its own
 * on both sides: a receive with context `ctx` over the first 64 bytes of each side's buffer is
 * posted before the handshake. Close releases it all. */
struct Round {
    IND2QueuePair *pqp;
    IND2QueuePair *aqp;
    Connection c;

    Round(Pair &s, IND2Listener *l, unsigned short port, void *ctx)
        : pqp(s.passive.NewQp()), aqp(s.active.NewQp())
    {
        ND2_SGE prs = s.passive.Sge(0, 64);
        ND2_SGE ars = s.active.Sge(0, 64);
        CHECK_HR(pqp->Receive(ctx, &prs, 1));
        CHECK_HR(aqp->Receive(ctx, &ars, 1));
        c = Connect(s, l, port, pqp, aqp);
    }

    /* Both Disconnects, issued with `ad` and `pd`, complete ND_SUCCESS with their packets (FAIL
     * naming `round` otherwise); both connectors and both QPs are released. */
    void Close(Pair &s, unsigned round, Nd2Ov &ad, Nd2Ov &pd)
    {
        if (Wait(c.a, &ad, 15000) != ND_SUCCESS || Wait(c.p, &pd, 15000) != ND_SUCCESS)
            FAIL("round %u: a Disconnect did not complete ND_SUCCESS", round);
        s.active.Packet(&ad, true);
        s.passive.Packet(&pd, true);
        EXPECT(c.a->Release() == 0);
        EXPECT(c.p->Release() == 0);
        EXPECT(aqp->Release() == 0);
        EXPECT(pqp->Release() == 0);
    }
};

/* Connection churn in the pattern of Microsoft's ndconn (our own code): 100 connections one
 * after the other on one listener, each with new connectors and new QPs (QP numbers are
 * reused quickly), a receive posted on both sides before the handshake, one message each way,
 * and both sides disconnecting at once (crossing DREQs), then everything released. Every call
 * must succeed; the case prints the rate. */
ND2_CASE(churn, Pair, s)
{
    const unsigned short PORT = 7438;
    const unsigned ROUNDS = 100;
    IND2Listener *l = s.passive.Listen(PORT);
    double started = nd2_now_ms();
    for (unsigned k = 0; k < ROUNDS; k++) {
        Round n(s, l, PORT, Context(1));
        ND2_SGE pss = s.passive.Sge(64, 16);
        ND2_SGE ass = s.active.Sge(64, 16);
        CHECK_HR(n.aqp->Send(Context(2), &ass, 1, 0));
        CHECK_HR(n.pqp->Send(Context(2), &pss, 1, 0));
        ND2_RESULT r[2];
        Results(s.passive, r, 2);
        for (ND2_RESULT &one : r)
            if (one.Status != ND_SUCCESS)
                FAIL("round %u: passive completion 0x%08X (%s)", k, (unsigned)one.Status, nd2_status_name(one.Status));
        Results(s.active, r, 2);
        for (ND2_RESULT &one : r)
            if (one.Status != ND_SUCCESS)
                FAIL("round %u: active completion 0x%08X (%s)", k, (unsigned)one.Status, nd2_status_name(one.Status));
        Nd2Ov ad, pd;
        HRESULT a = n.c.a->Disconnect(&ad), p = n.c.p->Disconnect(&pd);
        if (a != ND_PENDING || p != ND_PENDING)
            FAIL("round %u: Disconnect returned 0x%08X / 0x%08X", k, (unsigned)a, (unsigned)p);
        n.Close(s, k, ad, pd);
    }
    double secs = (nd2_now_ms() - started) / 1e3;
    printf("  %u connections in %.1f s (%.1f per second)\n", ROUNDS, secs, ROUNDS / secs);
    DrainCqs(s);
    EXPECT(l->Release() == 0);
    return 0;
}

/* The peer's disconnect does not cancel at once what is in flight: IND2Connector::NotifyDisconnect
 * says a queue pair "should not have its outstanding requests completed with a canceled status
 * when receiving a disconnection request", and Microsoft's ndconn relies on it (its server's
 * Send, whose message the client received, must complete ND_SUCCESS although the client
 * disconnects as soon as it has the message; its client's Disconnect must not lose the ACK of
 * that message). First a passive Send kept in flight by RNR (the active side posted no
 * receive): still outstanding when NotifyDisconnect completes, and flushed (ND_CANCELED) soon
 * after, as the receive of Microsoft's NdReceiveConnClosed is. Then ndconn's exchange, 20
 * times: receives posted before the handshake, the active side sends, the passive side answers,
 * the active side disconnects as soon as it has the answer; every Send completes ND_SUCCESS. */
ND2_CASE(disconnect_in_flight, Pair, s)
{
    const unsigned short PORT = 7440;
    Connected x(s, PORT);
    ND2_SGE message = s.passive.Sge(0, 64);
    Nd2Ov nd, ad, pd;
    ND2_RESULT r[4];
    Issued("NotifyDisconnect", x.c.p->NotifyDisconnect(&nd));
    CHECK_HR(x.pqp->Send(Context(1), &message, 1, 0));
    usleep(20000);
    EXPECT(s.passive.cq->GetResults(r, 1) == 0); /* RNR: in flight */
    Issued("active Disconnect", x.c.a->Disconnect(&ad));
    Done(s.passive, "NotifyDisconnect", x.c.p, &nd, ND_SUCCESS);
    usleep(20000);
    if (s.passive.cq->GetResults(r, 1) != 0)
        FAIL("the Send in flight completed %s (0x%08x) with the peer's disconnect; want it still outstanding",
             nd2_status_name(r[0].Status), (unsigned)r[0].Status);
    printf("  Send in flight: still outstanding after the peer's disconnect\n");
    Results(s.passive, r, 1);
    Expect("Send in flight, soon after", r, 1, Context(1), ND_CANCELED, Nd2RequestTypeSend, &s.passive);
    Completes(s.passive, "passive Disconnect after the peer's", x.c.p, x.c.p->Disconnect(&pd), &pd, ND_SUCCESS);
    Done(s.active, "active Disconnect", x.c.a, &ad, ND_SUCCESS);
    EXPECT(x.c.a->Release() == 0);
    EXPECT(x.c.p->Release() == 0);
    DrainCqs(s);

    const unsigned ROUNDS = 20;
    for (unsigned k = 0; k < ROUNDS; k++) {
        Round n(s, x.l, PORT, Context(10));
        ND2_SGE pss = s.passive.Sge(64, 64);
        ND2_SGE ass = s.active.Sge(64, 64);
        CHECK_HR(n.aqp->Send(Context(11), &ass, 1, 0));
        Results(s.passive, r, 1);
        Expect("passive Receive", r, 1, Context(10), ND_SUCCESS, Nd2RequestTypeReceive, &s.passive);
        CHECK_HR(n.pqp->Send(Context(12), &pss, 1, 0));
        Results(s.active, r, 2);
        Expect("active Send", r, 2, Context(11), ND_SUCCESS, Nd2RequestTypeSend, &s.active);
        Expect("active Receive", r, 2, Context(10), ND_SUCCESS, Nd2RequestTypeReceive, &s.active);
        Nd2Ov ad2, pd2;
        Issued("active Disconnect at once", n.c.a->Disconnect(&ad2));
        Results(s.passive, r, 1);
        Expect("passive Send, the peer disconnecting", r, 1, Context(12), ND_SUCCESS, Nd2RequestTypeSend, &s.passive);
        HRESULT p = n.c.p->Disconnect(&pd2);
        if (p != ND_PENDING && p != ND_SUCCESS)
            FAIL("round %u: passive Disconnect returned 0x%08X", k, (unsigned)p);
        n.Close(s, k, ad2, pd2);
    }
    printf("  %u exchanges with the receiver disconnecting at once: every Send ND_SUCCESS\n", ROUNDS);
    DrainCqs(s);
    EXPECT(x.l->Release() == 0);
    return 0;
}

/* A connector's GetLocalAddress, which must succeed. */
sockaddr_in LocalAddress(IND2Connector *c)
{
    sockaddr_in addr;
    ULONG len = sizeof addr;
    memset(&addr, 0, sizeof addr);
    CHECK_HR(c->GetLocalAddress(reinterpret_cast<sockaddr *>(&addr), &len));
    EXPECT(len == sizeof addr);
    return addr;
}

/* GetLocalAddress after Bind, before Connect: the bound address (Windows providers answer it;
 * the document asks for "connected or connecting"), port 0's pick and an explicit port alike;
 * the active side's Connect then goes out from that port. */
ND2_CASE(local_address_after_bind, Pair, s)
{
    IND2Connector *a = s.active.Connector();
    CHECK_HR(a->Bind(nd2_sa(s.active.address), sizeof s.active.address));
    sockaddr_in addr;
    ULONG len = sizeof addr;
    nd2_returns("GetLocalAddress after Bind to port 0", a->GetLocalAddress(reinterpret_cast<sockaddr *>(&addr), &len),
            ND_SUCCESS);
    EXPECT(len == sizeof addr && addr.sin_family == AF_INET);
    EXPECT(addr.sin_addr.s_addr == s.active.address.sin_addr.s_addr && ntohs(addr.sin_port) >= 49152);
    printf("  bound to port %u\n", ntohs(addr.sin_port));
    unsigned short bound = addr.sin_port;
    len = 4;
    nd2_returns("GetLocalAddress after Bind with 4 bytes", a->GetLocalAddress(reinterpret_cast<sockaddr *>(&addr), &len),
            ND_BUFFER_OVERFLOW);
    EXPECT(len == sizeof addr);

    IND2Connector *e = s.active.Connector();
    sockaddr_in explicitAt = s.active.At(7461);
    CHECK_HR(e->Bind(nd2_sa(explicitAt), sizeof explicitAt));
    sockaddr_in got = LocalAddress(e);
    EXPECT(got.sin_addr.s_addr == explicitAt.sin_addr.s_addr && got.sin_port == explicitAt.sin_port);
    printf("  GetLocalAddress after Bind to port 7461: port %u\n", ntohs(got.sin_port));
    EXPECT(e->Release() == 0);

    Attempt t(s, 7460, a);
    t.Request(s, 0, 0, NULL, 0);
    len = sizeof addr;
    CHECK_HR(t.p->GetPeerAddress(reinterpret_cast<sockaddr *>(&addr), &len));
    EXPECT(addr.sin_port == bound);
    printf("  the request came from the bound port\n");
    EXPECT(LocalAddress(a).sin_port == bound);
    t.Accept(s, 0, 0);
    t.Established(s, "Accept");
    EXPECT(LocalAddress(a).sin_port == bound);
    t.Hangup(s);
    return 0;
}

/* Connectors share a local port (Windows providers let them): a second and third Bind to a
 * bound connector's address (7465) succeed, and connections from it to distinct listeners
 * come up side by side. The same 4-tuple twice is ND_ADDRESS_ALREADY_EXISTS; a listener's port
 * stays exclusive both ways (a connector Bind on it, a listener Bind on the connectors' port). */
ND2_CASE(connectors_share_port, Pair, s)
{
    const unsigned short PORT1 = 7462, PORT2 = 7463, LOCAL = 7465;
    IND2Listener *l1 = s.passive.Listen(PORT1);
    IND2Listener *l2 = s.passive.Listen(PORT2);
    IND2Connector *a1 = s.active.Connector();
    sockaddr_in shared = s.active.At(LOCAL);
    nd2_returns("first connector Bind", a1->Bind(nd2_sa(shared), sizeof shared), ND_SUCCESS);
    IND2Connector *a2 = s.active.Connector();
    nd2_returns("second connector Bind to the same address and port", a2->Bind(nd2_sa(shared), sizeof shared), ND_SUCCESS);
    EXPECT(LocalAddress(a2).sin_port == shared.sin_port);
    IND2Connector *a3 = s.active.Connector();
    nd2_returns("third connector Bind to the same address and port", a3->Bind(nd2_sa(shared), sizeof shared), ND_SUCCESS);

    IND2Listener *la = NULL;
    CHECK_HR(s.active.adapter->CreateListener(IID_IND2Listener, s.active.file, reinterpret_cast<void **>(&la)));
    nd2_returns("listener Bind to the connectors' port", la->Bind(nd2_sa(shared), sizeof shared), ND_SHARING_VIOLATION);
    EXPECT(la->Release() == 0);
    IND2Connector *pc = s.passive.Connector();
    sockaddr_in listening = s.passive.At(PORT1);
    nd2_returns("connector Bind to a listener's port", pc->Bind(nd2_sa(listening), sizeof listening), ND_SHARING_VIOLATION);
    EXPECT(pc->Release() == 0);

    /* Two connections from the one local port, to two listeners. */
    IND2Connector *p1 = s.passive.Connector(), *p2 = s.passive.Connector();
    IND2QueuePair *pqp1 = s.passive.Qp(), *pqp2 = s.passive.Qp();
    sockaddr_in to1 = s.passive.At(PORT1), to2 = s.passive.At(PORT2);
    Nd2Ov get1, get2, conn1, conn2, acc1, acc2, comp1, comp2, conn3;
    Requested(s, l1, p1, get1, a1, s.active.Qp(), to1, 0, 0, NULL, 0, conn1);
    Requested(s, l2, p2, get2, a2, s.active.Qp(), to2, 0, 0, NULL, 0, conn2);
    sockaddr_in addr;
    ULONG len = sizeof addr;
    CHECK_HR(p1->GetPeerAddress(reinterpret_cast<sockaddr *>(&addr), &len));
    EXPECT(addr.sin_port == shared.sin_port);
    len = sizeof addr;
    CHECK_HR(p2->GetPeerAddress(reinterpret_cast<sockaddr *>(&addr), &len));
    EXPECT(addr.sin_port == shared.sin_port);
    printf("  both requests came from port %u\n", ntohs(shared.sin_port));
    Issued("Accept 1", p1->Accept(pqp1, 0, 0, NULL, 0, &acc1));
    Issued("Accept 2", p2->Accept(pqp2, 0, 0, NULL, 0, &acc2));
    Done(s.active, "Connect 1", a1, &conn1, ND_SUCCESS);
    Done(s.active, "Connect 2", a2, &conn2, ND_SUCCESS);
    Completes(s.active, "CompleteConnect 1", a1, a1->CompleteConnect(&comp1), &comp1, ND_SUCCESS);
    Completes(s.active, "CompleteConnect 2", a2, a2->CompleteConnect(&comp2), &comp2, ND_SUCCESS);
    Done(s.passive, "Accept 1", p1, &acc1, ND_SUCCESS);
    Done(s.passive, "Accept 2", p2, &acc2, ND_SUCCESS);

    /* Data on both: a send from each passive QP to the active side's receives. */
    IND2QueuePair *aqp1 = s.active.qps[s.active.qps.size() - 2], *aqp2 = s.active.qps.back();
    ND2_SGE r1 = s.active.Sge(0, 64);
    ND2_SGE r2 = s.active.Sge(64, 64);
    CHECK_HR(aqp1->Receive(s.active.buf, &r1, 1));
    CHECK_HR(aqp2->Receive(s.active.buf + 64, &r2, 1));
    ND2_SGE s1 = s.passive.Sge(0, 8);
    CHECK_HR(pqp1->Send(s.passive.buf, &s1, 1, 0));
    CHECK_HR(pqp2->Send(s.passive.buf, &s1, 1, 0));
    ND2_RESULT r;
    for (int k = 0; k < 2; k++) {
        Results(s.passive, &r, 1);
        EXPECT(r.Status == ND_SUCCESS);
        Results(s.active, &r, 1);
        EXPECT(r.Status == ND_SUCCESS);
    }
    printf("  a message over each connection\n");

    /* The same local and remote address again: refused. */
    Inline(s.active, "Connect with the same 4-tuple as a live connection",
           a3->Connect(s.active.Qp(), nd2_sa(to1), sizeof to1, 0, 0, NULL, 0, &conn3), &conn3, ND_ADDRESS_ALREADY_EXISTS);
    EXPECT(a3->Release() == 0);

    Connection c1 = {p1, a1}, c2 = {p2, a2};
    Hangup(s, c1);
    Hangup(s, c2);
    DrainCqs(s);
    EXPECT(l1->Release() == 0);
    EXPECT(l2->Release() == 0);
    return 0;
}

/* Connect again on a connector whose Connect was cancelled: ND_CONNECTION_ACTIVE inline (from
 * Connect's documented codes, as programs written for Windows providers expect). */
ND2_CASE(connect_after_cancel, Pair, s)
{
    IND2QueuePair *aqp = s.active.Qp();
    CancelledConnect x(s, 7464, true, aqp, 500);
    Nd2Ov again;
    Inline(s.active, "Connect after the cancelled Connect",
           x.a->Connect(aqp, nd2_sa(x.to), sizeof x.to, 0, 0, NULL, 0, &again), &again, ND_CONNECTION_ACTIVE);
    x.Release();
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    return nd2_fixture_main<Pair>(argc, argv, "PASSIVE_IP ACTIVE_IP");
}
