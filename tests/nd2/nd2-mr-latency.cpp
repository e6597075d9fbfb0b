/*
 * nd2-mr-latency: how long IND2MemoryRegion::Register and Deregister take, overlapped, as a
 * Windows ND2 program measures them; every region registered is used before it goes.
 *
 *   nd2-mr-latency server LOCAL_IP PORT [--iters N] [--sizes B,B,...]
 *   nd2-mr-latency client LOCAL_IP SERVER_IP PORT [--iters N] [--sizes B,B,...]
 *     --iters N    registrations per size (default 100)
 *     --sizes      region sizes in bytes (default 4096,65536,1048576); both sides alike
 *     --event      wait for Register/Deregister with the OVERLAPPED's event and
 *                  GetOverlappedResult; the default is the completion port of the adapter's
 *                  overlapped file
 *
 * For each size, the client N times: registers a region over its buffer (timed: the call and
 * its completion), sends the whole region from it (untimed; the server checks the pattern and
 * acknowledges), deregisters it (timed). It prints the mean, minimum and maximum of each.
 */
#include "nd2-common.h"

#include <vector>

namespace {

struct Options : Nd2PairOptions {
    Options() : Nd2PairOptions(100) {}
    std::vector<ULONG> sizes;
    bool event = false;
};

unsigned char pattern(unsigned i, ULONG at) { return static_cast<unsigned char>(i * 13 + at * 5 + (at >> 12) + 1); }

struct Figures {
    double sum = 0, min = 1e30, max = 0;
    void Add(double us)
    {
        sum += us;
        if (us < min)
            min = us;
        if (us > max)
            max = us;
    }
};

class MrLatency : Nd2PairSide {
public:
    explicit MrLatency(const Options &opt) : m_opt(opt)
    {
        for (ULONG size : opt.sizes)
            if (size > m_max)
                m_max = size;
        m_buf.resize(m_max);
    }

    int Run()
    {
        sockaddr_in local = nd2_ipv4(m_opt.localIp, m_opt.server ? m_opt.port : 0);
        nd2_open_adapter(local, &m_adapter, &m_file);
        Nd2Waiter waiter(m_file, !m_opt.event);
        m_waiter = &waiter;
        m_cq = nd2_create_cq(m_adapter, m_file, 16);
        /* The acknowledgements: one region over a small buffer for the whole run. */
        m_ackMr = nd2_register(waiter, m_adapter, m_file, m_ack, sizeof m_ack, ND_MR_FLAG_ALLOW_LOCAL_WRITE);
        CreateQpAndConnector(this, 4, 4);

        int rc = m_opt.server ? Serve(local) : Measure(local);

        ReleaseQpAndConnector();
        nd2_deregister(waiter, m_ackMr);
        CloseAdapter();
        return rc;
    }

private:
    ND2_RESULT Next(ND2_REQUEST_TYPE type, void *context)
    {
        ND2_RESULT r;
        while (m_cq->GetResults(&r, 1) == 0) {
        }
        EXPECT(r.Status == ND_SUCCESS);
        EXPECT(r.QueuePairContext == this);
        EXPECT(r.RequestType == type);
        EXPECT(r.RequestContext == context);
        return r;
    }

    void PostAckReceive()
    {
        ND2_SGE sge = {m_ack, sizeof m_ack, m_ackMr->GetLocalToken()};
        CHECK_HR(m_qp->Receive(m_ack, &sge, 1));
    }

    int Serve(const sockaddr_in &local)
    {
        IND2MemoryRegion *mr = NULL;
        CHECK_HR(m_adapter->CreateMemoryRegion(IID_IND2MemoryRegion, m_file, reinterpret_cast<void **>(&mr)));
        CHECK_HR(m_waiter->Wait(mr, mr->Register(m_buf.data(), m_max, ND_MR_FLAG_ALLOW_LOCAL_WRITE, m_waiter->Ov())));
        IND2Listener *listener = nd2_listen(m_adapter, m_file, local);
        nd2_get_request(*m_waiter, listener, m_connector);
        ND2_SGE sge = {m_buf.data(), m_max, mr->GetLocalToken()};
        CHECK_HR(m_qp->Receive(m_buf.data(), &sge, 1));
        nd2_accept(*m_waiter, listener, m_connector, m_qp, 0, 0, NULL, 0);
        unsigned round = 0;
        unsigned acks = 0; /* acknowledgements sent and not completed: the client's next message
                              can arrive before the completion of the acknowledgement it follows */
        for (ULONG size : m_opt.sizes) {
            for (unsigned i = 0; i < m_opt.iters; i++, round++) {
                ND2_RESULT r;
                for (;;) {
                    while (m_cq->GetResults(&r, 1) == 0) {
                    }
                    EXPECT(r.Status == ND_SUCCESS && r.QueuePairContext == this);
                    if (r.RequestType != Nd2RequestTypeSend)
                        break;
                    EXPECT(acks > 0 && r.RequestContext == m_ack);
                    acks--;
                }
                EXPECT(r.RequestType == Nd2RequestTypeReceive && r.RequestContext == m_buf.data());
                EXPECT(r.BytesTransferred == size);
                for (ULONG at = 0; at < size; at++)
                    EXPECT(m_buf[at] == pattern(round, at));
                CHECK_HR(m_qp->Receive(m_buf.data(), &sge, 1));
                ND2_SGE ack = {m_ack, sizeof m_ack, m_ackMr->GetLocalToken()};
                CHECK_HR(m_qp->Send(m_ack, &ack, 1, 0));
                acks++;
            }
        }
        for (; acks > 0; acks--)
            Next(Nd2RequestTypeSend, m_ack);
        CHECK_HR(m_waiter->Wait(m_connector, m_connector->NotifyDisconnect(m_waiter->Ov())));
        CHECK_HR(m_waiter->Wait(m_connector, m_connector->Disconnect(m_waiter->Ov())));
        ND2_RESULT flushed;
        while (m_cq->GetResults(&flushed, 1) == 0) {
        }
        EXPECT(flushed.Status == ND_CANCELED && flushed.RequestContext == m_buf.data());
        CHECK_HR(m_waiter->Wait(mr, mr->Deregister(m_waiter->Ov())));
        EXPECT(mr->Release() == 0);
        printf("server: %u regions of each size checked\n", m_opt.iters);
        return 0;
    }

    int Measure(const sockaddr_in &local)
    {
        sockaddr_in server = nd2_ipv4(m_opt.serverIp, m_opt.port);
        CHECK_HR(m_connector->Bind(reinterpret_cast<const sockaddr *>(&local), sizeof local));
        nd2_connect(*m_waiter, m_connector, m_qp, server, 0, 0, NULL, 0);
        IND2MemoryRegion *mr = NULL;
        CHECK_HR(m_adapter->CreateMemoryRegion(IID_IND2MemoryRegion, m_file, reinterpret_cast<void **>(&mr)));
        unsigned round = 0;
        printf("client: %u Register/Deregister pairs per size (%s), each region used for a send:\n", m_opt.iters,
               m_opt.event ? "event + GetOverlappedResult" : "completion port");
        for (ULONG size : m_opt.sizes) {
            Figures reg, dereg;
            for (unsigned i = 0; i < m_opt.iters; i++, round++) {
                for (ULONG at = 0; at < size; at++)
                    m_buf[at] = pattern(round, at);
                double t0 = nd2_now_us();
                CHECK_HR(m_waiter->Wait(mr, mr->Register(m_buf.data(), size, ND_MR_FLAG_ALLOW_LOCAL_WRITE,
                                                         m_waiter->Ov())));
                reg.Add(nd2_now_us() - t0);
                PostAckReceive();
                ND2_SGE sge = {m_buf.data(), size, mr->GetLocalToken()};
                CHECK_HR(m_qp->Send(m_buf.data(), &sge, 1, 0));
                /* The send and the acknowledgement, in either order. */
                bool sent = false, acked = false;
                while (!sent || !acked) {
                    ND2_RESULT r;
                    while (m_cq->GetResults(&r, 1) == 0) {
                    }
                    EXPECT(r.Status == ND_SUCCESS && r.QueuePairContext == this);
                    if (r.RequestType == Nd2RequestTypeSend) {
                        EXPECT(!sent && r.RequestContext == m_buf.data());
                        sent = true;
                    } else {
                        EXPECT(!acked && r.RequestType == Nd2RequestTypeReceive && r.RequestContext == m_ack);
                        acked = true;
                    }
                }
                double t1 = nd2_now_us();
                CHECK_HR(m_waiter->Wait(mr, mr->Deregister(m_waiter->Ov())));
                dereg.Add(nd2_now_us() - t1);
            }
            printf("  %8u bytes: Register mean %8.1f us (min %.1f, max %.1f); Deregister mean %8.1f us "
                   "(min %.1f, max %.1f)\n",
                   size, reg.sum / m_opt.iters, reg.min, reg.max, dereg.sum / m_opt.iters, dereg.min, dereg.max);
        }
        EXPECT(mr->Release() == 0);
        CHECK_HR(m_waiter->Wait(m_connector, m_connector->Disconnect(m_waiter->Ov())));
        return 0;
    }

    Options m_opt;
    ULONG m_max = 0;
    std::vector<unsigned char> m_buf;
    unsigned char m_ack[8];
    IND2MemoryRegion *m_ackMr = NULL;
};

} // namespace

int main(int argc, char **argv)
{
    Options opt;
    bool ok = nd2_parse_pair(argc, argv, opt, [&](int &at) {
        if (const char *sizes = nd2_option_value(argc, argv, at, "--sizes")) {
            for (const char *p = sizes; *p;) {
                char *end = NULL;
                unsigned long size = strtoul(p, &end, 10);
                if (end == p || size == 0 || size > (1UL << 30))
                    return false;
                opt.sizes.push_back(static_cast<ULONG>(size));
                p = *end == ',' ? end + 1 : end;
            }
            return true;
        }
        if (strcmp(argv[at], "--event") == 0) {
            opt.event = true;
            return true;
        }
        return false;
    });
    if (!ok || opt.port == 0 || opt.iters == 0)
        return nd2_pair_usage(argv[0], "[--iters N] [--sizes B,B,...] [--event]");
    if (opt.sizes.empty()) {
        opt.sizes.push_back(4096);
        opt.sizes.push_back(65536);
        opt.sizes.push_back(1048576);
    }
    MrLatency latency(opt);
    return latency.Run();
}
