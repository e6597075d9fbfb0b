/*
 * nd2-common.h: what the ND2 example programs share. Plain ND2 as a Windows program writes it;
 * only the includes and the POSIX argument parsing differ from a Windows build.
 */
#ifndef ND2_COMMON_H
#define ND2_COMMON_H

#include "nd2-check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iterator>
#include <string>
#include <vector>

/*
 * An IPv4 or IPv6 socket address, as the ND2 calls take one (a sockaddr and its length). A
 * sockaddr_in converts to it, so the helpers below serve programs that only know IPv4.
 */
struct Nd2Address {
    union {
        sockaddr sa;
        sockaddr_in v4;
        sockaddr_in6 v6;
    } u;
    Nd2Address(const sockaddr_in &v4) /* implicit: every IPv4 caller */
    {
        memset(&u, 0, sizeof u);
        u.v4 = v4;
    }
    explicit Nd2Address(const sockaddr_in6 &v6)
    {
        memset(&u, 0, sizeof u);
        u.v6 = v6;
    }
    const sockaddr *Sa() const { return &u.sa; }
    ULONG Len() const { return u.sa.sa_family == AF_INET6 ? sizeof u.v6 : sizeof u.v4; }
};

/* "a.b.c.d" or an IPv6 address ("2001:2::1") and a port; exits on a bad address. */
static inline Nd2Address nd2_address(const char *ip, unsigned short port)
{
    if (strchr(ip, ':') == NULL)
        return nd2_ipv4(ip, port);
    sockaddr_in6 sin6;
    memset(&sin6, 0, sizeof sin6);
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(port);
    nd2_pton(AF_INET6, ip, &sin6.sin6_addr);
    return Nd2Address(sin6);
}

/* The role a pair program's command line gives (nd2_parse_pair), and its exchange count. */
struct Nd2PairOptions {
    bool server = false;
    const char *localIp = NULL;
    const char *serverIp = NULL;
    unsigned short port = 0;
    unsigned iters;
    explicit Nd2PairOptions(unsigned defaultIters) : iters(defaultIters) {}
};

/*
 * The pair programs' usage on stderr, "usage: PROG server LOCAL_IP PORT OPTIONS" and
 * "PROG client LOCAL_IP SERVER_IP PORT OPTIONS": 2, the exit status.
 */
static inline int nd2_pair_usage(const char *argv0, const char *options)
{
    fprintf(stderr, "usage: %s server LOCAL_IP PORT %s\n       %s client LOCAL_IP SERVER_IP PORT %s\n", argv0,
            options, argv0, options);
    return 2;
}

/* argv[at] is `name` and a value follows: the value, with `at` moved onto it; NULL otherwise. */
static inline const char *nd2_option_value(int argc, char **argv, int &at, const char *name)
{
    if (strcmp(argv[at], name) != 0 || at + 1 >= argc)
        return NULL;
    return argv[++at];
}

/*
 * A pair program's command line into opt: the role words, "server LOCAL_IP PORT" or "client
 * LOCAL_IP SERVER_IP PORT" (opt's server, localIp, serverIp and port), then its options: "--iters
 * N" (opt.iters), and any other through option(at), which takes argv[at] (and a value after it,
 * moving `at` onto the value) and says whether it knew it. False when anything is wrong.
 */
template <typename Option>
static inline bool nd2_parse_pair(int argc, char **argv, Nd2PairOptions &opt, Option option)
{
    int at;
    if (argc >= 4 && strcmp(argv[1], "server") == 0) {
        opt.server = true;
        opt.localIp = argv[2];
        opt.port = static_cast<unsigned short>(atoi(argv[3]));
        at = 4;
    } else if (argc >= 5 && strcmp(argv[1], "client") == 0) {
        opt.localIp = argv[2];
        opt.serverIp = argv[3];
        opt.port = static_cast<unsigned short>(atoi(argv[4]));
        at = 5;
    } else {
        return false;
    }
    for (; at < argc; at++) {
        if (const char *iters = nd2_option_value(argc, argv, at, "--iters"))
            opt.iters = static_cast<unsigned>(atoi(iters));
        else if (!option(at))
            return false;
    }
    return true;
}

/* A case program's command line is "--list": the case names printed, one a line. `cases`: an
 * array of cases or nd2_registered_cases(). */
template <typename Cases> static inline bool nd2_listed(int argc, char **argv, const Cases &cases)
{
    if (argc != 2 || strcmp(argv[1], "--list") != 0)
        return false;
    for (const auto &c : cases)
        printf("%s\n", c.name);
    return true;
}

/* The case named `name` run through run(case), "CASE: ok" printed when that returns 0: its status;
 * "unknown case" and 2 when no case has the name. */
template <typename Cases, typename Run> static inline int nd2_run_case(const char *name, const Cases &cases, Run run)
{
    for (const auto &c : cases) {
        if (strcmp(name, c.name) != 0)
            continue;
        int rc = run(c);
        if (rc == 0)
            printf("%s: ok\n", c.name);
        return rc;
    }
    fprintf(stderr, "unknown case %s\n", name);
    return 2;
}

/*
 * The case programs' main: "--list" prints the case names (nd2_listed); "CASE ARG1 ARG2"
 * (`argsUsage` names the two) runs the named case through run(case, ARG1, ARG2) (nd2_run_case).
 * Anything else: usage, 2.
 */
template <typename Cases, typename Run>
static inline int nd2_case_main(int argc, char **argv, const Cases &cases, const char *argsUsage, Run run)
{
    typedef decltype(*std::begin(cases)) Case; /* a const reference to one case */
    if (nd2_listed(argc, argv, cases))
        return 0;
    if (argc != 4) {
        fprintf(stderr, "usage: %s CASE %s | --list\n", argv[0], argsUsage);
        return 2;
    }
    return nd2_run_case(argv[1], cases, [&](Case c) { return run(c, argv[2], argv[3]); });
}

#ifndef STATUS_ADDRESS_ALREADY_ASSOCIATED
#define STATUS_ADDRESS_ALREADY_ASSOCIATED ((HRESULT)0xC0000238L)
#endif
#ifndef STATUS_BAD_NETWORK_NAME
#define STATUS_BAD_NETWORK_NAME ((HRESULT)0xC00000CCL)
#endif

/* The name of an ND2 status code ("ND_PENDING"), or "another code". */
static inline const char *nd2_status_name(HRESULT hr)
{
    switch (hr) {
#define NAME(code)                                                                                \
    case code:                                                                                    \
        return #code;
        NAME(ND_SUCCESS)
        NAME(ND_PENDING)
        NAME(ND_BUFFER_OVERFLOW)
        NAME(ND_CANCELED)
        NAME(ND_INVALID_ADDRESS)
        NAME(ND_INVALID_BUFFER_SIZE)
        NAME(ND_INVALID_DEVICE_STATE)
        NAME(ND_INVALID_PARAMETER)
        NAME(ND_SHARING_VIOLATION)
        NAME(ND_ADDRESS_ALREADY_EXISTS)
        NAME(ND_TOO_MANY_ADDRESSES)
        NAME(ND_CONNECTION_REFUSED)
        NAME(ND_CONNECTION_INVALID)
        NAME(ND_CONNECTION_ACTIVE)
        NAME(ND_CONNECTION_ABORTED)
        NAME(ND_NETWORK_UNREACHABLE)
        NAME(ND_HOST_UNREACHABLE)
        NAME(ND_IO_TIMEOUT)
        NAME(ND_ACCESS_VIOLATION)
        NAME(ND_REMOTE_ERROR)
        NAME(STATUS_ADDRESS_ALREADY_ASSOCIATED)
        NAME(STATUS_BAD_NETWORK_NAME)
        NAME(ND_DEVICE_BUSY)
        NAME(ND_INVALID_HANDLE)
        NAME(ND_NO_MEMORY)
        NAME(ND_INSUFFICIENT_RESOURCES)
#undef NAME
    default:
        return "another code";
    }
}

/* A non-overlapped call's exact code (FAIL otherwise), printed by name. */
static inline void nd2_returns(const char *what, HRESULT got, HRESULT want)
{
    if (got != want)
        FAIL("%s: 0x%08X (%s), want %s", what, (unsigned)got, nd2_status_name(got), nd2_status_name(want));
    printf("  %s: %s\n", what, nd2_status_name(want));
}

/* An overlapped call that failed inline: it returned `want` and left `want` in the OVERLAPPED (FAIL otherwise). */
static inline void nd2_failed_inline(const char *what, HRESULT got, const OVERLAPPED *ov, HRESULT want)
{
    if (got != want)
        FAIL("%s: 0x%08X (%s), want %s inline", what, (unsigned)got, nd2_status_name(got), nd2_status_name(want));
    if (static_cast<HRESULT>(ov->Internal) != want)
        FAIL("%s: Internal 0x%08X after an inline failure", what, (unsigned)ov->Internal);
}

/*
 * One packet from `port` within `ms` (0: only one already there): its OVERLAPPED, or NULL when
 * none came; *ok is what GetQueuedCompletionStatus returned, *key the packet's key.
 */
static inline OVERLAPPED *nd2_next_packet(HANDLE port, DWORD ms, BOOL *ok, ULONG_PTR *key)
{
    DWORD bytes = 0;
    OVERLAPPED *ov = NULL;
    *key = 0;
    *ok = GetQueuedCompletionStatus(port, &bytes, key, &ov, ms);
    return ov;
}

/* The ping-pongs' message pattern i: byte `at` of it. */
static inline unsigned char nd2_pattern(unsigned i, ULONG at) { return static_cast<unsigned char>(i * 31 + at * 7 + 1); }

/* `size` bytes of pattern i at `buf`. */
static inline void nd2_fill(unsigned char *buf, ULONG size, unsigned i)
{
    for (ULONG at = 0; at < size; at++)
        buf[at] = nd2_pattern(i, at);
}

/* Whether `size` bytes at `buf` are pattern i. */
static inline bool nd2_matches(const unsigned char *buf, ULONG size, unsigned i)
{
    for (ULONG at = 0; at < size; at++)
        if (buf[at] != nd2_pattern(i, at))
            return false;
    return true;
}

/* CLOCK_MONOTONIC in milliseconds. */
static inline double nd2_now_ms() { return nd2_now_us() / 1e3; }

static inline const sockaddr *nd2_sa(const sockaddr_in &a) { return reinterpret_cast<const sockaddr *>(&a); }

/* A zeroed OVERLAPPED whose & gives the OVERLAPPED (programs that wait through a completion port). */
struct Nd2Ov {
    OVERLAPPED ov;
    Nd2Ov() { memset(&ov, 0, sizeof ov); }
    OVERLAPPED *operator&() { return &ov; }
};

/* run() between NdStartup and NdCleanup (what run() made is gone by then): run()'s status. */
template <typename Run> static inline int nd2_with_startup(Run run)
{
    CHECK_HR(NdStartup());
    int rc = run();
    CHECK_HR(NdCleanup());
    return rc;
}

/* One row of a case program's table: the case's name and what runs it on the program's fixtures. */
template <typename... Fixture> struct Nd2Case {
    const char *name;
    int (*run)(Fixture &...);
};

/* The cases on Fixture... that the program registered (ND2_CASE), in the order of registration. */
template <typename... Fixture> static inline std::vector<Nd2Case<Fixture...>> &nd2_registered_cases()
{
    static std::vector<Nd2Case<Fixture...>> cases;
    return cases;
}

/* What ND2_CASE defines: registers the case, named as its function with '-' for '_'. */
template <typename... Fixture> struct Nd2Registration {
    std::string name;
    Nd2Registration(const char *function, int (*run)(Fixture &...)) : name(function)
    {
        for (char &c : name)
            if (c == '_')
                c = '-';
        nd2_registered_cases<Fixture...>().push_back(Nd2Case<Fixture...>{name.c_str(), run});
    }
};

/*
 * The head of a case's function, int function(Fixture &param), which registers the case as
 * "function" with '-' for '_' (--list names the cases in the file's order):
 *     ND2_CASE(max_limits, Pair, s)
 *     {
 *         ...
 *     }
 */
#define ND2_CASE(function, Fixture, param)                                                         \
    int function(Fixture &);                                                                       \
    static const Nd2Registration<Fixture> function##_case(#function, function);                    \
    int function(Fixture &param)

/* nd2_case_main over the cases registered on Fixture, each run on one Fixture(ARG1, ARG2) made
 * between NdStartup and NdCleanup. */
template <typename Fixture> static inline int nd2_fixture_main(int argc, char **argv, const char *argsUsage)
{
    return nd2_case_main(argc, argv, nd2_registered_cases<Fixture>(), argsUsage,
                         [](const Nd2Case<Fixture> &c, const char *arg1, const char *arg2) {
                             return nd2_with_startup([&] {
                                 Fixture fixture(arg1, arg2);
                                 return c.run(fixture);
                             });
                         });
}

/* An OVERLAPPED with its own manual-reset event (programs that wait on the event). */
struct Nd2EventOv : OVERLAPPED {
    Nd2EventOv()
    {
        memset(static_cast<OVERLAPPED *>(this), 0, sizeof(OVERLAPPED));
        hEvent = CreateEventA(NULL, TRUE, FALSE, NULL);
        EXPECT(hEvent != NULL);
    }
    ~Nd2EventOv() { CloseHandle(hEvent); }

    /* The final status of this OVERLAPPED's request on `object`, waiting up to `ms` for the
     * event; ND_PENDING if the request is still pending then. */
    HRESULT Wait(IND2Overlapped *object, DWORD ms)
    {
        if (WaitForSingleObject(hEvent, ms) != WAIT_OBJECT_0) {
            EXPECT(object->GetOverlappedResult(this, FALSE) == ND_PENDING);
            return ND_PENDING;
        }
        HRESULT hr = object->GetOverlappedResult(this, FALSE);
        EXPECT(hr != ND_PENDING);
        return hr;
    }
    Nd2EventOv(const Nd2EventOv &) = delete;
    Nd2EventOv &operator=(const Nd2EventOv &) = delete;
    void Reset() { ResetEvent(hEvent); }
};

/* NdStartup, then the adapter of `local` and its overlapped file. */
static inline void nd2_open_adapter(const Nd2Address &local, IND2Adapter **adapter, HANDLE *file)
{
    CHECK_HR(NdStartup());
    CHECK_HR(NdOpenAdapter(IID_IND2Adapter, local.Sa(), local.Len(), reinterpret_cast<void **>(adapter)));
    CHECK_HR((*adapter)->CreateOverlappedFile(file));
}

/* The other end of nd2_open_adapter: the file closed, the adapter's last reference released, NdCleanup. */
static inline void nd2_close_adapter(IND2Adapter *adapter, HANDLE file)
{
    CloseHandle(file);
    EXPECT(adapter->Release() == 0);
    CHECK_HR(NdCleanup());
}

/*
 * Waits for overlapped requests the two ways ND2 programs do: through the completion port the
 * adapter's overlapped file is bound to (useIocp), or through the OVERLAPPED's event and
 * GetOverlappedResult(FALSE). Two OVERLAPPEDs: Ov() for one request at a time, CqOv() for a CQ
 * notification that may stay armed meanwhile (never waited for at the same time as Ov()).
 */
class Nd2Waiter {
public:
    Nd2Waiter(HANDLE overlappedFile, bool useIocp) : m_port(NULL), m_useIocp(useIocp)
    {
        memset(&m_ov, 0, sizeof m_ov);
        memset(&m_cqOv, 0, sizeof m_cqOv);
        if (useIocp) {
            m_port = CreateIoCompletionPort(overlappedFile, NULL, 7, 0);
            EXPECT(m_port != NULL);
        } else {
            m_ov.hEvent = CreateEventA(NULL, FALSE, FALSE, NULL);
            m_cqOv.hEvent = CreateEventA(NULL, FALSE, FALSE, NULL);
            EXPECT(m_ov.hEvent != NULL && m_cqOv.hEvent != NULL);
        }
    }

    ~Nd2Waiter()
    {
        if (m_port)
            CloseHandle(m_port);
        if (m_ov.hEvent)
            CloseHandle(m_ov.hEvent);
        if (m_cqOv.hEvent)
            CloseHandle(m_cqOv.hEvent);
    }

    OVERLAPPED *Ov() { return &m_ov; }
    OVERLAPPED *CqOv() { return &m_cqOv; }

    /* The final status of the request `issued` returned for `object` with Ov(). */
    HRESULT Wait(IND2Overlapped *object, HRESULT issued) { return Wait(object, issued, &m_ov); }

    /* The final status of the request `issued` returned for `object` with `want` (ours). */
    HRESULT Wait(IND2Overlapped *object, HRESULT issued, OVERLAPPED *want)
    {
        if (issued != ND_PENDING)
            return issued;
        if (m_useIocp) {
            BOOL ok = FALSE;
            ULONG_PTR key = 0;
            OVERLAPPED *ov = nd2_next_packet(m_port, INFINITE, &ok, &key);
            EXPECT(ov == want);
            EXPECT(key == 7);
            HRESULT hr = object->GetOverlappedResult(want, FALSE);
            EXPECT((ok != FALSE) == SUCCEEDED(hr));
            return hr;
        }
        /* An auto-reset event: the wait consumes the signal, then the result is final. */
        EXPECT(WaitForSingleObject(want->hEvent, INFINITE) == WAIT_OBJECT_0);
        HRESULT hr = object->GetOverlappedResult(want, FALSE);
        EXPECT(hr != ND_PENDING);
        return hr;
    }

    HANDLE Port() { return m_port; }

private:
    HANDLE m_port;
    bool m_useIocp;
    OVERLAPPED m_ov;
    OVERLAPPED m_cqOv;
};

/* A CQ of `depth` on the adapter's overlapped file. */
static inline IND2CompletionQueue *nd2_create_cq(IND2Adapter *adapter, HANDLE file, ULONG depth)
{
    IND2CompletionQueue *cq = NULL;
    CHECK_HR(adapter->CreateCompletionQueue(IID_IND2CompletionQueue, file, depth, 0, 0, reinterpret_cast<void **>(&cq)));
    return cq;
}

/* A memory region over `size` bytes at `buf`, registered with `flags` (waited for through `waiter`). */
static inline IND2MemoryRegion *nd2_register(Nd2Waiter &waiter, IND2Adapter *adapter, HANDLE file, void *buf,
                                             SIZE_T size, ULONG flags)
{
    IND2MemoryRegion *mr = NULL;
    CHECK_HR(adapter->CreateMemoryRegion(IID_IND2MemoryRegion, file, reinterpret_cast<void **>(&mr)));
    CHECK_HR(waiter.Wait(mr, mr->Register(buf, size, flags, waiter.Ov())));
    return mr;
}

/* The other end of nd2_register: deregistered (waited for), its last reference released. */
static inline void nd2_deregister(Nd2Waiter &waiter, IND2MemoryRegion *mr)
{
    CHECK_HR(waiter.Wait(mr, mr->Deregister(waiter.Ov())));
    EXPECT(mr->Release() == 0);
}

/* A connector on the adapter's overlapped file. */
static inline IND2Connector *nd2_create_connector(IND2Adapter *adapter, HANDLE file)
{
    IND2Connector *connector = NULL;
    CHECK_HR(adapter->CreateConnector(IID_IND2Connector, file, reinterpret_cast<void **>(&connector)));
    return connector;
}

/* A memory region on the adapter's overlapped file, not registered yet. */
static inline IND2MemoryRegion *nd2_create_mr(IND2Adapter *adapter, HANDLE file)
{
    IND2MemoryRegion *mr = NULL;
    CHECK_HR(adapter->CreateMemoryRegion(IID_IND2MemoryRegion, file, reinterpret_cast<void **>(&mr)));
    return mr;
}

/*
 * What a case program's side opens, both sides in one process (after NdStartup): the adapter of
 * `ip`, its overlapped file bound to a completion port (key 5) and a CQ of `cqDepth`; `label`
 * names the side in failures. ClosePort() is the other end, once the side released the CQ.
 */
struct Nd2PortSide {
    const char *label;
    sockaddr_in address;
    IND2Adapter *adapter = NULL;
    HANDLE file = NULL;
    HANDLE port = NULL;
    IND2CompletionQueue *cq = NULL;

    Nd2PortSide(const char *labelText, const char *ip, ULONG cqDepth) : label(labelText), address(nd2_ipv4(ip, 0))
    {
        CHECK_HR(NdOpenAdapter(IID_IND2Adapter, nd2_sa(address), sizeof address, reinterpret_cast<void **>(&adapter)));
        CHECK_HR(adapter->CreateOverlappedFile(&file));
        port = CreateIoCompletionPort(file, NULL, 5, 0);
        EXPECT(port != NULL);
        cq = nd2_create_cq(adapter, file, cqDepth);
    }

    /* The port and the file closed, the adapter's last reference released. */
    void ClosePort()
    {
        CloseHandle(port);
        CloseHandle(file);
        EXPECT(adapter->Release() == 0);
    }
};

/*
 * What a pair program's side holds: the adapter and its overlapped file, the waiter of the run,
 * one CQ, one QP and the connector.
 */
struct Nd2PairSide {
    IND2Adapter *m_adapter = NULL;
    HANDLE m_file = NULL;
    Nd2Waiter *m_waiter = NULL;
    IND2CompletionQueue *m_cq = NULL;
    IND2QueuePair *m_qp = NULL;
    IND2Connector *m_connector = NULL;

    /* The QP on m_cq (`context` its context) with one SGE each way, then the connector. */
    void CreateQpAndConnector(void *context, ULONG receiveDepth, ULONG initiatorDepth)
    {
        CHECK_HR(m_adapter->CreateQueuePair(IID_IND2QueuePair, m_cq, m_cq, context, receiveDepth, initiatorDepth, 1, 1,
                                            0, reinterpret_cast<void **>(&m_qp)));
        m_connector = nd2_create_connector(m_adapter, m_file);
    }

    /* The other end of CreateQpAndConnector: both last references released. */
    void ReleaseQpAndConnector()
    {
        EXPECT(m_connector->Release() == 0);
        EXPECT(m_qp->Release() == 0);
    }

    /* The CQ released, the waiter forgotten, the adapter closed (nd2_close_adapter). */
    void CloseAdapter()
    {
        EXPECT(m_cq->Release() == 0);
        m_waiter = NULL;
        nd2_close_adapter(m_adapter, m_file);
    }

    /*
     * A pair program's run once set up (set-up began at `began`, nd2_now_us): prints how long
     * set-up took (`role`: the side), runs exchange(), then releases the QP and the connector,
     * runs release() (the rest the program made), closes the adapter and prints how long the
     * release took. exchange()'s status.
     */
    template <typename Exchange, typename Release>
    int Timed(const char *role, double began, Exchange exchange, Release release)
    {
        printf("%s: set up in %.1f ms (adapter, CQ, MR, QP, connector)\n", role, (nd2_now_us() - began) / 1e3);
        int rc = exchange();
        double releasing = nd2_now_us();
        ReleaseQpAndConnector();
        release();
        CloseAdapter();
        printf("%s: released in %.1f ms\n", role, (nd2_now_us() - releasing) / 1e3);
        return rc;
    }
};

/* The server's listener: bound to `local`, listening with a backlog of one. */
static inline IND2Listener *nd2_listen(IND2Adapter *adapter, HANDLE file, const Nd2Address &local)
{
    IND2Listener *listener = NULL;
    CHECK_HR(adapter->CreateListener(IID_IND2Listener, file, reinterpret_cast<void **>(&listener)));
    CHECK_HR(listener->Bind(local.Sa(), local.Len()));
    CHECK_HR(listener->Listen(1));
    return listener;
}

/* The listener's next connection request, onto `connector`. */
static inline void nd2_get_request(Nd2Waiter &waiter, IND2Listener *listener, IND2Connector *connector)
{
    CHECK_HR(waiter.Wait(listener, listener->GetConnectionRequest(connector, waiter.Ov())));
}

/* Accepts the request on `connector` with `qp`, then releases the listener (its last reference). */
static inline void nd2_accept(Nd2Waiter &waiter, IND2Listener *listener, IND2Connector *connector,
                              IND2QueuePair *qp, ULONG inboundReadLimit, ULONG outboundReadLimit,
                              const void *privateData, ULONG privateDataSize)
{
    CHECK_HR(waiter.Wait(connector, connector->Accept(qp, inboundReadLimit, outboundReadLimit, privateData,
                                                      privateDataSize, waiter.Ov())));
    EXPECT(listener->Release() == 0);
}

/* The client's Connect to `server` with `qp` (the connector already bound), then CompleteConnect. */
static inline void nd2_connect(Nd2Waiter &waiter, IND2Connector *connector, IND2QueuePair *qp,
                               const Nd2Address &server, ULONG inboundReadLimit, ULONG outboundReadLimit,
                               const void *privateData, ULONG privateDataSize)
{
    CHECK_HR(waiter.Wait(connector, connector->Connect(qp, server.Sa(), server.Len(), inboundReadLimit,
                                                       outboundReadLimit, privateData, privateDataSize, waiter.Ov())));
    CHECK_HR(waiter.Wait(connector, connector->CompleteConnect(waiter.Ov())));
}

#endif /* ND2_COMMON_H */
