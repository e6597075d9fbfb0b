/*
 * nd2-pingpong: an ND2 send/receive ping-pong, written as a Windows ND2 program would be.
 *
 *   nd2-pingpong server LOCAL_IP PORT [options]
 *   nd2-pingpong client LOCAL_IP SERVER_IP PORT [options]
 *     --iters N    exchanges (default 1000)
 *     --size B     message size (default 64)
 *     --poll       overlapped requests waited with events + GetOverlappedResult, the CQ
 *                  polled with GetResults; the default is event-driven: everything through the
 *                  completion port of the adapter's overlapped file, the CQ armed with Notify.
 *     --yield      (both ends, with --poll) sched_yield between empty polls, so that two
 *                  polling ends share one CPU (tests/bench/nd2.sh on the instruction clock).
 *     --reject     (both ends) the server rejects the first request with 148 bytes of private
 *                  data (the most a REJ carries); the client's Connect must complete
 *                  ND_CONNECTION_REFUSED with those bytes readable, and the same connector then
 *                  connects again and is accepted.
 *     --server-disconnects  (both ends) the server disconnects after the last answer and the
 *                  client sees it through NotifyDisconnect; by default the client disconnects
 *                  and the server sees it.
 *     --mixed N    (both ends) waits and polls mixed, N exchanges of each in turn (N = 1: every
 *                  other exchange): a waited exchange arms the CQ with Notify and waits for its
 *                  event (WaitForSingleObject, then GetOverlappedResult); a polled one arms it with
 *                  Notify on an OVERLAPPED with no event and polls GetOverlappedResult(FALSE)
 *                  (sched_yield between polls) until the Notify completes. The client prints the
 *                  typical and max round trip of each kind.
 *     --stall-check  (both ends, with --mixed N) the server sleeps 150 ms before its answer to
 *                  the last exchange of each waited run (the client's waiter then sleeps through
 *                  ticks of nd-shim's relay); the client fails if a polled exchange takes more
 *                  than 50 ms while the waited ones typically take under 5 ms: a functional
 *                  check that no completion waits for a parked relay's tick (100 ms) once the
 *                  program stops waiting, for a quiet machine by hand (a loaded one can delay
 *                  an exchange as long, so the rig suite runs --mixed without it).
 *     --memory-poll  (both ends, with --mixed N; the client acts on it) the client's polled
 *                  exchanges run on a second thread that has never waited in the shim, and its
 *                  Notify is polled in memory alone (HasOverlappedIoCompleted, sched_yield between
 *                  looks), calling nothing in nd-shim until it completes, as a program polling
 *                  OVERLAPPED.Internal does. The main thread waits in the waited exchanges (nd-shim's
 *                  relay is parked when a polled one starts), and during the first
 *                  WAITER_WINDOW_MS (50 ms) of each polled one keeps coming back to wait and leaving
 *                  at once (WaitForSingleObject(INFINITE) on a set event, each 1 ms), as a thread
 *                  draining a busy port does. The poller times each Notify from the moment its
 *                  message is in the receive buffer (seen in memory) to its completion (0 when the
 *                  look that first sees the message sees the completion too); the client
 *                  fails if the typical (median) delay is MEMORY_POLL_LIMIT_MS (10 ms, the parked
 *                  relay's tick) or more, or if fewer than MEMORY_POLL_TIMED (5) Notify requests
 *                  were timed (the others' message came before the Notify). The server pauses
 *                  MEMORY_POLL_PAUSE_MS (2 ms) before each polled answer, so that it rarely does.
 *     --context-base X  request contexts are X + 2i (receive i) and X + 2i + 1 (send i) instead
 *                  of 2i and 2i + 1: with the top bits set (0xfc00000000000000), every request
 *                  takes nd-shim's record path instead of the direct one (nd-shim/src/nd2/requests.rs).
 *
 * Private data both ways is checked: the client's "ping" in the REQ, the server's "pong" in the
 * REP. Both ends must be given the same options.
 *
 * The client sends message i filled with pattern i (nd2_fill); the server checks it and answers
 * with pattern i + 1; the client checks the answer. Every completion's status, type, context and
 * length is checked. The client prints the mean round trip, the exchanges per second, the
 * GetResults calls per exchange (two find a completion, the rest find the CQ empty) and the CPU
 * time its process (every thread, the shim's too) used per exchange, and per thread the context
 * switches and system calls per exchange (with THREAD_COUNTS=1: tests/bench/thread-counts.h), then
 * the typical (median), min, 99th percentile and max of the exchanges' round trips, each exchange
 * timed as tests/bench/verbs-pingpong.c times it (tests/bench/round-trips.h). Under
 * valgrind --tool=callgrind --collect-atstart=no only the client's exchanges are counted
 * (tests/bench/nd2.sh).
 */
#include "nd2-common.h"
/* Linux only, for tests/bench/nd2.sh: context switches and system calls per thread. */
#include "../bench/thread-counts.h"
/* Each exchange's round trip, timed as tests/bench/verbs-pingpong.c times it. */
#include "../bench/round-trips.h"

#include <algorithm>
#include <atomic>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <vector>

namespace {

struct Options : Nd2PairOptions {
    Options() : Nd2PairOptions(1000) {}
    ULONG size = 64;
    bool poll = false;
    bool yield = false; /* --yield */
    bool reject = false;
    bool serverDisconnects = false;
    uintptr_t contextBase = 0;
    unsigned mixed = 0;
    bool stallCheck = false;
    bool memoryPoll = false;
};

/* The server's pause at the end of each waited run (--stall-check), and the client's limits. */
const unsigned STALL_PAUSE_MS = 150;
const double STALL_LIMIT_MS = 50, STALL_WAITED_MS = 5;
/* --memory-poll: the Notify's typical delay must stay under the limit; the main thread's
 * short waits during each polled exchange last this long. */
const double MEMORY_POLL_LIMIT_MS = 10, WAITER_WINDOW_MS = 50;
/* --memory-poll: at least this many Notify delays timed, or the case proves nothing; the
 * server's pause before each polled answer, so that the client's Notify is armed before it. */
const unsigned MEMORY_POLL_TIMED = 5, MEMORY_POLL_PAUSE_MS = 2;

/* The REJ's private data: as much as it carries. */
const ULONG REJECT_DATA = 148;

/* The pattern index of the REJ's private data (no exchange uses it). */
const unsigned REJECT_PATTERN = 0xdead;

class PingPong : Nd2PairSide {
public:
    explicit PingPong(const Options &opt) : m_opt(opt), m_buf(2 * opt.size) {}

    int Run()
    {
        double began = nd2_now_us();
        Nd2Address local = nd2_address(m_opt.localIp, m_opt.server ? m_opt.port : 0);
        nd2_open_adapter(local, &m_adapter, &m_file);
        Nd2Waiter waiter(m_file, !m_opt.poll && !m_opt.mixed);
        memset(&m_pollOv, 0, sizeof m_pollOv);
        m_waiter = &waiter;

        m_cq = nd2_create_cq(m_adapter, m_file, 16);
        m_mr = nd2_register(waiter, m_adapter, m_file, m_buf.data(), m_buf.size(), ND_MR_FLAG_ALLOW_LOCAL_WRITE);
        CreateQpAndConnector(this, 4, 4);

        return Timed(
            Role(), began, [&] { return m_opt.server ? Serve(local) : Ping(local); },
            [&] { nd2_deregister(waiter, m_mr); });
    }

private:
    const char *Role() const { return m_opt.server ? "server" : "client"; }

    unsigned char *RecvBuf() { return m_buf.data(); }
    unsigned char *SendBuf() { return m_buf.data() + m_opt.size; }

    void PostReceive(unsigned i)
    {
        ND2_SGE sge = {RecvBuf(), m_opt.size, m_mr->GetLocalToken()};
        CHECK_HR(m_qp->Receive(reinterpret_cast<void *>(m_opt.contextBase + 2 * i), &sge, 1));
    }

    void PostSend(unsigned i)
    {
        ND2_SGE sge = {SendBuf(), m_opt.size, m_mr->GetLocalToken()};
        CHECK_HR(m_qp->Send(reinterpret_cast<void *>(m_opt.contextBase + 2 * i + 1), &sge, 1, 0));
    }

    /*
     * The next completion: polled, or else as Windows programs wait (ndtestutil's
     * WaitForCompletion): GetResults until it returns fewer than asked, then Notify and the wait.
     * A completion that came between the empty GetResults and the Notify completes the Notify at
     * once (IND2CompletionQueue.md, Implementation Note), so nothing is polled between them.
     */
    ND2_RESULT NextResult()
    {
        ND2_RESULT result;
        for (;;) {
            m_polls++;
            if (m_cq->GetResults(&result, 1) == 1)
                return result;
            if (m_opt.poll) {
                if (m_opt.yield)
                    sched_yield();
                continue;
            }
            if (m_polledExchange && m_opt.memoryPoll && !m_opt.server) {
                /* --memory-poll: the Notify polled in memory, nothing called meanwhile. */
                HRESULT hr = m_cq->Notify(ND_CQ_NOTIFY_ANY, &m_pollOv);
                if (hr == ND_PENDING) {
                    /* The message is in memory a moment before its completion's event. */
                    double landed = 0;
                    bool before = nd2_matches(RecvBuf(), m_opt.size, m_exchange + 1);
                    while (!HasOverlappedIoCompleted(&m_pollOv)) {
                        if (!before && landed == 0 && nd2_matches(RecvBuf(), m_opt.size, m_exchange + 1))
                            landed = nd2_now_us();
                        sched_yield();
                    }
                    /* Seen in memory between two looks with the completion: no delay seen. */
                    if (landed != 0)
                        m_notifyDelays.push_back((nd2_now_us() - landed) / 1e3);
                    else if (!before && nd2_matches(RecvBuf(), m_opt.size, m_exchange + 1))
                        m_notifyDelays.push_back(0);
                    hr = static_cast<HRESULT>(m_pollOv.Internal);
                }
                CHECK_HR(hr);
                continue;
            }
            if (m_polledExchange) {
                /* --mixed: the Notify polled, nobody waiting in the shim. */
                HRESULT hr = m_cq->Notify(ND_CQ_NOTIFY_ANY, &m_pollOv);
                while (hr == ND_PENDING) {
                    sched_yield();
                    hr = m_cq->GetOverlappedResult(&m_pollOv, FALSE);
                }
                CHECK_HR(hr);
                continue;
            }
            CHECK_HR(m_waiter->Wait(m_cq, m_cq->Notify(ND_CQ_NOTIFY_ANY, m_waiter->CqOv()), m_waiter->CqOv()));
        }
    }

    /* --mixed N: exchange i is polled in every other run of N. */
    bool Polled(unsigned i) const { return m_opt.mixed && (i / m_opt.mixed) % 2 == 1; }

    /* --stall-check: exchange i ends a waited run (the server pauses before answering it). */
    bool EndsWaitedRun(unsigned i) const
    {
        return m_opt.mixed && !Polled(i) && ((i + 1) % m_opt.mixed == 0) && i + 1 < m_opt.iters;
    }

    /*
     * --mixed: the typical and max round trip of the waited and of the polled exchanges (the
     * stamps as round_trips_stats reads them, before it sorts them); with --stall-check, false
     * if a polled exchange took more than STALL_LIMIT_MS while the waited ones typically took
     * under STALL_WAITED_MS (the server's pauses left out of the waited ones).
     */
    bool MixedReport(const round_trips &trips)
    {
        const int64_t *d = trips.stamps;
        unsigned n = trips.n;
        double ticks = (double)(d[n] - d[0]);
        double unit = ticks > 0 ? (double)(trips.clock1 - trips.clock0) / ticks : 1;
        std::vector<double> waited, polled;
        for (unsigned i = 0; i < n; i++) {
            double ms = unit * (double)(d[i + 1] - d[i]) / 1e6;
            if (Polled(i))
                polled.push_back(ms);
            else if (!(m_opt.stallCheck && EndsWaitedRun(i)))
                waited.push_back(ms);
        }
        std::sort(waited.begin(), waited.end());
        std::sort(polled.begin(), polled.end());
        double waitedTypical = waited.empty() ? 0 : waited[waited.size() / 2];
        double polledTypical = polled.empty() ? 0 : polled[polled.size() / 2];
        double polledMax = polled.empty() ? 0 : polled.back();
        printf("client: mixed, %zu waited exchanges: typical %.3f ms, max %.3f ms; %zu polled: typical %.3f ms, "
               "max %.3f ms\n",
               waited.size(), waitedTypical, waited.empty() ? 0 : waited.back(), polled.size(), polledTypical,
               polledMax);
        if (m_opt.memoryPoll) {
            std::vector<double> &d = m_notifyDelays;
            std::sort(d.begin(), d.end());
            double typical = d.empty() ? 0 : d[d.size() / 2];
            printf("client: memory poll: %zu Notify delays timed (message in memory to completion): typical %.3f ms, "
                   "min %.3f ms, max %.3f ms\n",
                   d.size(), typical, d.empty() ? 0 : d.front(), d.empty() ? 0 : d.back());
            if (d.size() < MEMORY_POLL_TIMED) {
                fprintf(stderr, "client: memory poll FAILED: %zu of %zu polled exchanges timed (want %u)\n",
                        d.size(), polled.size(), MEMORY_POLL_TIMED);
                return false;
            }
            if (typical >= MEMORY_POLL_LIMIT_MS) {
                fprintf(stderr,
                        "client: memory poll FAILED: a Notify polled in memory typically completed %.3f ms (>= %.0f "
                        "ms) after its message: it waited for nd-shim's parked relay, not for its event\n",
                        typical, MEMORY_POLL_LIMIT_MS);
                return false;
            }
            printf("client: memory poll passed (typical delay under %.0f ms)\n", MEMORY_POLL_LIMIT_MS);
        }
        if (!m_opt.stallCheck)
            return true;
        if (waitedTypical >= STALL_WAITED_MS) {
            printf("client: stall check: the waited exchanges typically took %.3f ms (>= %.0f ms): too slow to "
                   "judge, not failed\n",
                   waitedTypical, STALL_WAITED_MS);
            return true;
        }
        if (polledMax > STALL_LIMIT_MS) {
            fprintf(stderr,
                    "client: stall check FAILED: a polled exchange took %.3f ms (> %.0f ms) while the waited ones "
                    "typically take %.3f ms: a completion waited for a parked relay's tick\n",
                    polledMax, STALL_LIMIT_MS, waitedTypical);
            return false;
        }
        printf("client: stall check passed: no polled exchange over %.0f ms\n", STALL_LIMIT_MS);
        return true;
    }

    /*
     * Waits for the receive i and the send i (any order); checks both. The server's receive i + 1
     * may complete before its send i does: it is kept for the next call.
     */
    void Complete(unsigned i, bool wantReceive, bool wantSend)
    {
        if (wantReceive && m_earlyReceive) {
            m_earlyReceive = false;
            wantReceive = false;
        }
        while (wantReceive || wantSend) {
            ND2_RESULT r = NextResult();
            EXPECT(r.Status == ND_SUCCESS);
            EXPECT(r.QueuePairContext == this);
            uintptr_t ctx = reinterpret_cast<uintptr_t>(r.RequestContext) - m_opt.contextBase;
            if (r.RequestType == Nd2RequestTypeReceive) {
                EXPECT(r.BytesTransferred == m_opt.size);
                if (!wantReceive && m_opt.server && ctx == 2 * (i + 1) && !m_earlyReceive) {
                    m_earlyReceive = true;
                    continue;
                }
                EXPECT(wantReceive && ctx == 2 * i);
                wantReceive = false;
            } else {
                EXPECT(r.RequestType == Nd2RequestTypeSend);
                EXPECT(wantSend && ctx == 2 * i + 1);
                wantSend = false;
            }
        }
    }

    int Serve(const Nd2Address &local)
    {
        IND2Listener *listener = nd2_listen(m_adapter, m_file, local);
        if (m_opt.reject) {
            /* The first request on a connector of its own, refused with private data; the
             * client's second request waits in the listener's backlog meanwhile. */
            IND2Connector *refused = NULL;
            CHECK_HR(m_adapter->CreateConnector(IID_IND2Connector, m_file, reinterpret_cast<void **>(&refused)));
            nd2_get_request(*m_waiter, listener, refused);
            ExpectPing(refused);
            unsigned char no[REJECT_DATA];
            nd2_fill(no, sizeof no, REJECT_PATTERN);
            CHECK_HR(refused->Reject(no, sizeof no));
            EXPECT(refused->Release() == 0);
            printf("server: rejected the first request with %u bytes of private data\n", REJECT_DATA);
        }
        nd2_get_request(*m_waiter, listener, m_connector);
        ExpectPing(m_connector);

        PostReceive(0);
        nd2_accept(*m_waiter, listener, m_connector, m_qp, 0, 0, "pong", 5);

        for (unsigned i = 0; i < m_opt.iters; i++) {
            m_polledExchange = Polled(i);
            Complete(i, true, false);
            EXPECT(nd2_matches(RecvBuf(), m_opt.size, i));
            if (m_opt.stallCheck && EndsWaitedRun(i))
                usleep(STALL_PAUSE_MS * 1000);
            if (m_opt.memoryPoll && Polled(i))
                usleep(MEMORY_POLL_PAUSE_MS * 1000);
            if (i + 1 < m_opt.iters)
                PostReceive(i + 1);
            nd2_fill(SendBuf(), m_opt.size, i + 1);
            PostSend(i);
            Complete(i, false, true);
        }
        if (m_opt.serverDisconnects) {
            /* Completes once the client has disconnected too (its DREP). */
            CHECK_HR(m_waiter->Wait(m_connector, m_connector->Disconnect(m_waiter->Ov())));
            printf("server: %u exchanges of %u bytes checked, disconnected\n", m_opt.iters, m_opt.size);
        } else {
            /* The client disconnects once it has the last answer. */
            CHECK_HR(m_waiter->Wait(m_connector, m_connector->NotifyDisconnect(m_waiter->Ov())));
            printf("server: %u exchanges of %u bytes checked, the client's disconnect seen\n", m_opt.iters,
                   m_opt.size);
        }
        return 0;
    }

    /* rdma_cm (like IB on Windows) pads the private data: read it with a buffer of MaxCallerData. */
    static void ExpectPing(IND2Connector *connector)
    {
        char hello[56] = {0};
        ULONG helloLen = sizeof hello;
        CHECK_HR(connector->GetPrivateData(hello, &helloLen));
        EXPECT(helloLen == sizeof hello && strcmp(hello, "ping") == 0);
    }

    /* The first Connect of --reject: refused, with the server's REJ data readable. */
    void ExpectRefused(const Nd2Address &server)
    {
        HRESULT hr = m_waiter->Wait(m_connector, m_connector->Connect(m_qp, server.Sa(), server.Len(), 0, 0, "ping", 5,
                                                                      m_waiter->Ov()));
        if (hr != ND_CONNECTION_REFUSED) {
            fprintf(stderr, "client: the first Connect gave 0x%08x, not ND_CONNECTION_REFUSED\n", (unsigned)hr);
            exit(1);
        }
        unsigned char no[REJECT_DATA];
        ULONG noLen = sizeof no;
        CHECK_HR(m_connector->GetPrivateData(no, &noLen));
        EXPECT(noLen == REJECT_DATA && nd2_matches(no, noLen, REJECT_PATTERN));
        printf("client: refused (ND_CONNECTION_REFUSED) with the server's %u bytes of private data\n", REJECT_DATA);
    }

    int Ping(const Nd2Address &local)
    {
        Nd2Address server = nd2_address(m_opt.serverIp, m_opt.port);
        CHECK_HR(m_connector->Bind(local.Sa(), local.Len()));
        double phase = nd2_now_us();
        if (m_opt.reject) {
            ExpectRefused(server); /* "The connection attempt may be retried": on the same connector. */
            printf("client: refused in %.1f ms\n", (nd2_now_us() - phase) / 1e3);
            phase = nd2_now_us();
        }
        nd2_connect(*m_waiter, m_connector, m_qp, server, 0, 0, "ping", 5);
        printf("client: connected in %.1f ms (Connect, CompleteConnect)\n", (nd2_now_us() - phase) / 1e3);
        char reply[196] = {0}; /* MaxCalleeData: the REP's padded private data */
        ULONG replyLen = sizeof reply;
        CHECK_HR(m_connector->GetPrivateData(reply, &replyLen));
        EXPECT(replyLen == sizeof reply && strcmp(reply, "pong") == 0);

        m_polls = 0;
        round_trips trips;
        round_trips_init(&trips, m_opt.iters);
        thread_counts counts;
        thread_counts_start(&counts);
        CALLGRIND_TOGGLE_COLLECT;
        double start = nd2_now_us(), cpuStart = nd2_cpu_us();
        m_trips = &trips;
        if (m_opt.memoryPoll) {
            /* The polled runs on a thread of their own; the two take turns. */
            m_setEvent = CreateEventA(NULL, TRUE, TRUE, NULL);
            pthread_t poller;
            if (pthread_create(&poller, NULL, PolledRuns, this) != 0)
                FAIL("pthread_create");
            Runs(false);
            pthread_join(poller, NULL);
            CloseHandle(m_setEvent);
        } else {
            for (unsigned i = 0; i < m_opt.iters; i++)
                Exchange(i);
        }
        round_trips_stamp(&trips, m_opt.iters);
        double elapsed = nd2_now_us() - start, cpu = nd2_cpu_us() - cpuStart;
        CALLGRIND_TOGGLE_COLLECT;
        bool mixedOk = !m_opt.mixed || MixedReport(trips);
        printf("client: %u exchanges of %u bytes checked (%s), mean round trip %.1f us, %.0f exchanges/s, "
               "%.1f GetResults per exchange, %.1f us of CPU per exchange\n",
               m_opt.iters, m_opt.size, m_opt.poll ? "polling" : m_opt.mixed ? "mixed" : "event-driven",
               elapsed / m_opt.iters,
               m_opt.iters / (elapsed / 1e6), static_cast<double>(m_polls) / m_opt.iters, cpu / m_opt.iters);
        thread_counts_print(&counts, "client", m_opt.iters);
        round_trips_print(&trips, "client");
        phase = nd2_now_us();
        if (m_opt.serverDisconnects) {
            CHECK_HR(m_waiter->Wait(m_connector, m_connector->NotifyDisconnect(m_waiter->Ov())));
            printf("client: the server's disconnect seen after %.1f ms\n", (nd2_now_us() - phase) / 1e3);
            phase = nd2_now_us();
        }
        CHECK_HR(m_waiter->Wait(m_connector, m_connector->Disconnect(m_waiter->Ov())));
        printf("client: Disconnect completed in %.1f ms\n", (nd2_now_us() - phase) / 1e3);
        return mixedOk ? 0 : 1;
    }

    /* The client's exchange i, timed. */
    void Exchange(unsigned i)
    {
        round_trips_stamp(m_trips, i);
        m_exchange = i;
        m_polledExchange = Polled(i);
        PostReceive(i);
        nd2_fill(SendBuf(), m_opt.size, i);
        PostSend(i);
        Complete(i, true, true);
        EXPECT(nd2_matches(RecvBuf(), m_opt.size, i + 1));
    }

    /* --memory-poll: the exchanges of one kind (polled or waited), each at its turn. */
    void Runs(bool polled)
    {
        for (;;) {
            unsigned i = m_turn.load();
            if (i >= m_opt.iters)
                return;
            if (Polled(i) != polled) {
                if (!polled && nd2_now_ms() - m_turnAt < WAITER_WINDOW_MS) {
                    /* A wait that is satisfied at once: the leader role taken and left. */
                    EXPECT(WaitForSingleObject(m_setEvent, INFINITE) == WAIT_OBJECT_0);
                    usleep(1000);
                } else {
                    sched_yield();
                }
                continue;
            }
            Exchange(i);
            m_turnAt = nd2_now_ms();
            m_turn.store(i + 1);
        }
    }

    static void *PolledRuns(void *self)
    {
        static_cast<PingPong *>(self)->Runs(true);
        return NULL;
    }

    Options m_opt;
    std::vector<unsigned char> m_buf;
    round_trips *m_trips = NULL;
    /* --memory-poll: whose turn, since when (ms), the exchange under way, the Notify delays. */
    std::atomic<unsigned> m_turn{0};
    std::atomic<double> m_turnAt{0};
    unsigned m_exchange = 0;
    HANDLE m_setEvent = NULL;
    std::vector<double> m_notifyDelays;
    bool m_earlyReceive = false;
    /* --mixed: this exchange's Notify is polled, on m_pollOv (no event). */
    bool m_polledExchange = false;
    OVERLAPPED m_pollOv;
    unsigned long m_polls = 0;
    IND2MemoryRegion *m_mr = NULL;
};

/* The options without a value: each sets its flag. */
const struct {
    const char *name;
    bool Options::*flag;
} FLAGS[] = {
    {"--poll", &Options::poll},
    {"--yield", &Options::yield},
    {"--stall-check", &Options::stallCheck},
    {"--memory-poll", &Options::memoryPoll},
    {"--reject", &Options::reject},
    {"--server-disconnects", &Options::serverDisconnects},
};

/* `arg` one of FLAGS: its flag set in opt, true; false otherwise. */
bool SetFlag(Options &opt, const char *arg)
{
    for (const auto &f : FLAGS) {
        if (strcmp(arg, f.name) == 0) {
            opt.*f.flag = true;
            return true;
        }
    }
    return false;
}

} // namespace

int main(int argc, char **argv)
{
    Options opt;
    bool ok = nd2_parse_pair(argc, argv, opt, [&](int &at) {
        const char *value;
        if ((value = nd2_option_value(argc, argv, at, "--size")))
            opt.size = static_cast<ULONG>(atoi(value));
        else if ((value = nd2_option_value(argc, argv, at, "--mixed")))
            opt.mixed = static_cast<unsigned>(strtoul(value, NULL, 0));
        else if ((value = nd2_option_value(argc, argv, at, "--context-base")))
            opt.contextBase = static_cast<uintptr_t>(strtoull(value, NULL, 0));
        else
            return SetFlag(opt, argv[at]);
        return true;
    });
    if (!ok || opt.port == 0 || opt.iters == 0 || opt.size == 0 || (opt.stallCheck && !opt.mixed) || (opt.memoryPoll && !opt.mixed) ||
        (opt.mixed && opt.poll) || (opt.yield && !opt.poll))
        return nd2_pair_usage(argv[0], "[--iters N] [--size B] [--poll [--yield]] [--reject] [--server-disconnects] "
                                       "[--context-base X] [--mixed N [--stall-check] [--memory-poll]]");
    PingPong pingPong(opt);
    return pingPong.Run();
}
