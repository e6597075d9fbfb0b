/*
 * nd2-rdma-pingpong: an ND2 RDMA ping-pong through memory windows, written as a Windows ND2
 * program would be.
 *
 *   nd2-rdma-pingpong server LOCAL_IP PORT [--iters N] [--size B]
 *   nd2-rdma-pingpong client LOCAL_IP SERVER_IP PORT [--iters N] [--size B]
 *
 * Each side registers one memory region and binds a memory window (IND2MemoryWindow,
 * IND2QueuePair::Bind) over the part of it the peer may read and write, then sends the peer the
 * window's address, remote token and length. Exchange i: the client writes message i (pattern i)
 * into the server's window (IND2QueuePair::Write) and sends a doorbell; the server checks its
 * window, writes message i + 1 into the client's window and rings back; the client checks its
 * window, then reads the server's window back (IND2QueuePair::Read) and checks that too. RC
 * ordering makes a write visible before the send behind it completes its receive.
 *
 * At the end, once the client says it has read the last message, the server invalidates its
 * window (IND2QueuePair::Invalidate) and says so; the client's Read through the old token then
 * completes ND_ACCESS_VIOLATION. Every completion's
 * status, type, context and length is checked. The client prints the mean exchange time.
 */
#include "nd2-common.h"

#include <deque>
#include <vector>

namespace {

struct Options : Nd2PairOptions {
    Options() : Nd2PairOptions(1000) {}
    ULONG size = 64;
};

/* What a side tells the peer about its window. */
struct WindowToken {
    UINT64 address;
    UINT32 token;
    UINT32 length;
};

/* Small messages: the window token, doorbells (the exchange number), the end. */
struct Message {
    UINT32 kind;
    UINT32 exchange;
    WindowToken window;
};
enum { MSG_WINDOW = 1, MSG_DOORBELL = 2, MSG_INVALIDATED = 3 };

const unsigned RECEIVE_SLOTS = 4;

/* Request contexts: receives by slot, the other requests by kind. */
void *ReceiveContext(unsigned slot) { return reinterpret_cast<void *>(static_cast<uintptr_t>(0x100 + slot)); }
void *const SEND_CONTEXT = reinterpret_cast<void *>(static_cast<uintptr_t>(1));
void *const WRITE_CONTEXT = reinterpret_cast<void *>(static_cast<uintptr_t>(2));
void *const READ_CONTEXT = reinterpret_cast<void *>(static_cast<uintptr_t>(3));
void *const BIND_CONTEXT = reinterpret_cast<void *>(static_cast<uintptr_t>(4));
void *const INVALIDATE_CONTEXT = reinterpret_cast<void *>(static_cast<uintptr_t>(5));

/* The context a request of `type` (not a receive) is posted with. */
void *ContextOf(ND2_REQUEST_TYPE type)
{
    switch (type) {
    case Nd2RequestTypeSend:
        return SEND_CONTEXT;
    case Nd2RequestTypeWrite:
        return WRITE_CONTEXT;
    case Nd2RequestTypeRead:
        return READ_CONTEXT;
    case Nd2RequestTypeBind:
        return BIND_CONTEXT;
    case Nd2RequestTypeInvalidate:
        return INVALIDATE_CONTEXT;
    default:
        return NULL;
    }
}

class RdmaPingPong : Nd2PairSide {
public:
    explicit RdmaPingPong(const Options &opt)
        : m_opt(opt), m_buf(2 * opt.size + (RECEIVE_SLOTS + 1) * sizeof(Message))
    {
    }

    int Run()
    {
        double began = nd2_now_us();
        Nd2Address local = nd2_address(m_opt.localIp, m_opt.server ? m_opt.port : 0);
        nd2_open_adapter(local, &m_adapter, &m_file);
        Nd2Waiter waiter(m_file, true);
        m_waiter = &waiter;
        m_cq = nd2_create_cq(m_adapter, m_file, 32);
        m_mr = nd2_register(waiter, m_adapter, m_file, m_buf.data(), m_buf.size(),
                            ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ | ND_MR_FLAG_ALLOW_REMOTE_WRITE);
        CHECK_HR(m_adapter->CreateMemoryWindow(IID_IND2MemoryWindow, reinterpret_cast<void **>(&m_mw)));
        CreateQpAndConnector(this, 2 * RECEIVE_SLOTS, 8);

        return Timed(
            Role(), began, [&] { return m_opt.server ? Serve(local) : Ping(local); },
            [&] {
                EXPECT(m_mw->Release() == 0);
                nd2_deregister(waiter, m_mr);
            });
    }

private:
    const char *Role() const { return m_opt.server ? "server" : "client"; }

    unsigned char *Window() { return m_buf.data(); }
    unsigned char *Staging() { return m_buf.data() + m_opt.size; }
    Message *Slot(unsigned slot) { return reinterpret_cast<Message *>(m_buf.data() + 2 * m_opt.size) + slot; }
    Message *Outgoing() { return Slot(RECEIVE_SLOTS); }

    ND2_SGE Sge(void *at, ULONG length)
    {
        ND2_SGE sge = {at, length, m_mr->GetLocalToken()};
        return sge;
    }

    /* Receive number `n` (counted from 0 over the whole run) goes into slot n % RECEIVE_SLOTS. */
    void PostReceive()
    {
        unsigned slot = m_posted++ % RECEIVE_SLOTS;
        ND2_SGE sge = Sge(Slot(slot), sizeof(Message));
        CHECK_HR(m_qp->Receive(ReceiveContext(slot), &sge, 1));
    }

    void SendMessage(UINT32 kind, UINT32 exchange)
    {
        Message *m = Outgoing();
        memset(m, 0, sizeof *m);
        m->kind = kind;
        m->exchange = exchange;
        if (kind == MSG_WINDOW) {
            m->window.address = reinterpret_cast<UINT64>(Window());
            m->window.token = m_mw->GetRemoteToken();
            m->window.length = m_opt.size;
        }
        ND2_SGE sge = Sge(m, sizeof *m);
        CHECK_HR(m_qp->Send(SEND_CONTEXT, &sge, 1, 0));
    }

    /* The next completion (polled), checked against the QP and, for receives, the next slot. */
    ND2_RESULT Next()
    {
        ND2_RESULT r;
        while (m_cq->GetResults(&r, 1) == 0) {
        }
        EXPECT(r.QueuePairContext == this);
        return r;
    }

    /*
     * Waits until each of the `n` requests `types` (their contexts are fixed by type) completed
     * with ND_SUCCESS; returns the receive's message when one of them is a receive. A receive
     * that nobody waits for yet (the peer's next message can beat our own send's completion) is
     * kept for the next wait that wants one.
     */
    Message Await(const ND2_REQUEST_TYPE *types, unsigned n)
    {
        Message got;
        memset(&got, 0, sizeof got);
        bool seen[4] = {false, false, false, false};
        unsigned left = n;
        for (unsigned k = 0; k < n; k++) {
            if (types[k] == Nd2RequestTypeReceive && !m_early.empty()) {
                got = m_early.front();
                m_early.pop_front();
                seen[k] = true;
                left--;
            }
        }
        while (left > 0) {
            ND2_RESULT r = Next();
            if (r.Status != ND_SUCCESS) {
                fprintf(stderr, "completion of type %d failed: 0x%08x\n", r.RequestType, (unsigned)r.Status);
                exit(1);
            }
            unsigned k = 0;
            while (k < n && (seen[k] || types[k] != r.RequestType))
                k++;
            EXPECT(k < n || r.RequestType == Nd2RequestTypeReceive);
            switch (r.RequestType) {
            case Nd2RequestTypeReceive: {
                unsigned slot = m_completed++ % RECEIVE_SLOTS;
                EXPECT(r.RequestContext == ReceiveContext(slot));
                EXPECT(r.BytesTransferred == sizeof(Message));
                if (k == n) {
                    m_early.push_back(*Slot(slot));
                    continue;
                }
                got = *Slot(slot);
                break;
            }
            default:
                EXPECT(r.RequestContext == ContextOf(r.RequestType));
                if (r.RequestType == Nd2RequestTypeRead)
                    EXPECT(r.BytesTransferred == m_opt.size);
                break;
            }
            seen[k] = true;
            left--;
        }
        return got;
    }

    Message Await1(ND2_REQUEST_TYPE t) { return Await(&t, 1); }

    /* Binds the window over Window() and trades tokens with the peer. */
    void TradeWindows()
    {
        CHECK_HR(m_qp->Bind(BIND_CONTEXT, m_mr, m_mw, Window(), m_opt.size,
                            ND_OP_FLAG_ALLOW_READ | ND_OP_FLAG_ALLOW_WRITE));
        Await1(Nd2RequestTypeBind);
        SendMessage(MSG_WINDOW, 0);
        const ND2_REQUEST_TYPE both[] = {Nd2RequestTypeSend, Nd2RequestTypeReceive};
        Message m = Await(both, 2);
        EXPECT(m.kind == MSG_WINDOW && m.window.length == m_opt.size && m.window.token != 0);
        m_peer = m.window;
    }

    /* Writes message i from Staging() into the peer's window, then rings. */
    void WriteAndRing(unsigned i)
    {
        nd2_fill(Staging(), m_opt.size, i);
        ND2_SGE sge = Sge(Staging(), m_opt.size);
        CHECK_HR(m_qp->Write(WRITE_CONTEXT, &sge, 1, m_peer.address, m_peer.token, 0));
        SendMessage(MSG_DOORBELL, i);
    }

    int Serve(const Nd2Address &local)
    {
        IND2Listener *listener = nd2_listen(m_adapter, m_file, local);
        nd2_get_request(*m_waiter, listener, m_connector);
        for (unsigned k = 0; k < RECEIVE_SLOTS; k++)
            PostReceive();
        nd2_accept(*m_waiter, listener, m_connector, m_qp, 4, 4, NULL, 0);
        TradeWindows();

        const ND2_REQUEST_TYPE answer[] = {Nd2RequestTypeWrite, Nd2RequestTypeSend};
        for (unsigned i = 0; i < m_opt.iters; i++) {
            Message m = Await1(Nd2RequestTypeReceive);
            EXPECT(m.kind == MSG_DOORBELL && m.exchange == i);
            EXPECT(nd2_matches(Window(), m_opt.size, i));
            PostReceive();
            WriteAndRing(i + 1);
            Await(answer, 2);
        }
        /* Once the client has read the last message back, the window goes: its next Read
         * through the token must fail. */
        Message done = Await1(Nd2RequestTypeReceive);
        EXPECT(done.kind == MSG_DOORBELL && done.exchange == m_opt.iters);
        CHECK_HR(m_qp->Invalidate(INVALIDATE_CONTEXT, m_mw, 0));
        Await1(Nd2RequestTypeInvalidate);
        SendMessage(MSG_INVALIDATED, m_opt.iters);
        Await1(Nd2RequestTypeSend);
        CHECK_HR(m_waiter->Wait(m_connector, m_connector->NotifyDisconnect(m_waiter->Ov())));
        printf("server: %u exchanges of %u bytes through memory windows checked\n", m_opt.iters, m_opt.size);
        return 0;
    }

    int Ping(const Nd2Address &local)
    {
        Nd2Address server = nd2_address(m_opt.serverIp, m_opt.port);
        for (unsigned k = 0; k < RECEIVE_SLOTS; k++)
            PostReceive();
        CHECK_HR(m_connector->Bind(local.Sa(), local.Len()));
        double phase = nd2_now_us();
        nd2_connect(*m_waiter, m_connector, m_qp, server, 4, 4, NULL, 0);
        double connected = nd2_now_us();
        TradeWindows();
        printf("client: connected in %.1f ms, windows traded in %.1f ms\n", (connected - phase) / 1e3,
               (nd2_now_us() - connected) / 1e3);

        const ND2_REQUEST_TYPE exchange[] = {Nd2RequestTypeWrite, Nd2RequestTypeSend, Nd2RequestTypeReceive};
        ND2_SGE readSge = Sge(Staging(), m_opt.size);
        double start = nd2_now_us();
        for (unsigned i = 0; i < m_opt.iters; i++) {
            WriteAndRing(i);
            Message m = Await(exchange, 3);
            EXPECT(m.kind == MSG_DOORBELL && m.exchange == i + 1);
            EXPECT(nd2_matches(Window(), m_opt.size, i + 1));
            PostReceive();
            memset(Staging(), 0, m_opt.size);
            CHECK_HR(m_qp->Read(READ_CONTEXT, &readSge, 1, m_peer.address, m_peer.token, 0));
            Await1(Nd2RequestTypeRead);
            EXPECT(nd2_matches(Staging(), m_opt.size, i));
        }
        double elapsed = nd2_now_us() - start;
        phase = nd2_now_us();
        SendMessage(MSG_DOORBELL, m_opt.iters); /* done reading */
        Await1(Nd2RequestTypeSend);
        Message m = Await1(Nd2RequestTypeReceive);
        EXPECT(m.kind == MSG_INVALIDATED);
        CHECK_HR(m_qp->Read(READ_CONTEXT, &readSge, 1, m_peer.address, m_peer.token, 0));
        /* The error moves the QP to error: receives still posted may complete (flushed) too. */
        ND2_RESULT r = Next();
        while (r.RequestContext != READ_CONTEXT) {
            EXPECT(r.Status == ND_CANCELED && r.RequestType == Nd2RequestTypeReceive);
            r = Next();
        }
        EXPECT(r.RequestType == Nd2RequestTypeRead);
        if (r.Status != ND_ACCESS_VIOLATION) {
            fprintf(stderr, "Read through an invalidated window: 0x%08x, want ND_ACCESS_VIOLATION\n",
                    (unsigned)r.Status);
            exit(1);
        }
        printf("client: %u exchanges of %u bytes checked (write, doorbell, write back, read back), "
               "mean %.1f us; Read after Invalidate: ND_ACCESS_VIOLATION\n",
               m_opt.iters, m_opt.size, elapsed / m_opt.iters);
        printf("client: the invalidation round and the refused Read took %.1f ms\n", (nd2_now_us() - phase) / 1e3);
        phase = nd2_now_us();
        /* The QP is in error now: the receives still posted complete ND_CANCELED. */
        CHECK_HR(m_waiter->Wait(m_connector, m_connector->Disconnect(m_waiter->Ov())));
        printf("client: Disconnect completed in %.1f ms\n", (nd2_now_us() - phase) / 1e3);
        return 0;
    }

    Options m_opt;
    std::vector<unsigned char> m_buf;
    IND2MemoryRegion *m_mr = NULL;
    IND2MemoryWindow *m_mw = NULL;
    WindowToken m_peer;
    unsigned m_posted = 0;
    unsigned m_completed = 0;
    std::deque<Message> m_early;
};

} // namespace

int main(int argc, char **argv)
{
    Options opt;
    bool ok = nd2_parse_pair(argc, argv, opt, [&](int &at) {
        const char *size = nd2_option_value(argc, argv, at, "--size");
        if (size)
            opt.size = static_cast<ULONG>(atoi(size));
        return size != NULL;
    });
    if (!ok || opt.port == 0 || opt.iters == 0 || opt.size == 0)
        return nd2_pair_usage(argv[0], "[--iters N] [--size B]");
    RdmaPingPong pingPong(opt);
    return pingPong.Run();
}
