/*
 * nd2-win32: the Win32 calls ND programs make on ND-created handles, each with a real ND
 * completion (a CQ's Notify completed by a send between rxe0 and rxe1, both ends in this
 * process), and the provider the Windows way (DllGetClassObject) and the ND1 refusals.
 *
 *   nd2-win32 CASE SERVER_IP CLIENT_IP      (nd2-win32 --list: the cases)
 *
 * The semantics (Microsoft's Win32 documentation; NetworkDirectSPI.md and IND2Provider.md for
 * the provider; ndutil's NdOpenV1Adapter for the ND1 code) are listed in docs/nd-conformance.md.
 */
#include "nd2-common.h"

#include <thread>

namespace {

const unsigned short kPort = 7420;

/* Progress on stderr (the suite keeps it in the case's log): where a slow or stuck case is. */
void note(const char *what)
{
    static double start = nd2_now_us();
    fprintf(stderr, "nd2-win32: %8.3f s %s\n", (nd2_now_us() - start) / 1e6, what);
}

/* One side (Nd2PairSide without its waiter): adapter, overlapped file, CQ, registered buffer, QP,
 * connector. */
struct Side : Nd2PairSide {
    IND2MemoryRegion *mr = NULL;
    char buf[64];

    void Open(const char *ip)
    {
        sockaddr_in local = nd2_ipv4(ip, 0);
        nd2_open_adapter(local, &m_adapter, &m_file);
        CHECK_HR(m_adapter->CreateCompletionQueue(IID_IND2CompletionQueue, m_file, 16, 0, 0,
                                                  reinterpret_cast<void **>(&m_cq)));
        CHECK_HR(m_adapter->CreateMemoryRegion(IID_IND2MemoryRegion, m_file, reinterpret_cast<void **>(&mr)));
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        HRESULT hr = mr->Register(buf, sizeof buf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov);
        if (hr == ND_PENDING)
            hr = mr->GetOverlappedResult(&ov, TRUE);
        CHECK_HR(hr);
        CreateQpAndConnector(this, 4, 4);
    }

    ND2_SGE Sge()
    {
        ND2_SGE sge;
        sge.Buffer = buf;
        sge.BufferLength = sizeof buf;
        sge.MemoryRegionToken = mr->GetLocalToken();
        return sge;
    }

    /* After both sides' Disconnects completed (Pair's destructor). */
    void Close()
    {
        OVERLAPPED ov;
        ReleaseQpAndConnector();
        memset(&ov, 0, sizeof ov);
        HRESULT hr = mr->Deregister(&ov);
        if (hr == ND_PENDING)
            hr = mr->GetOverlappedResult(&ov, TRUE);
        CHECK_HR(hr);
        EXPECT(mr->Release() == 0);
        CloseAdapter();
    }
};

/* A connection between rxe0 (server) and rxe1 (client), both ends here; the files stay unbound
 * (each case binds what it needs). */
struct Pair {
    Side server, client;

    Pair(const char *serverIp, const char *clientIp)
    {
        note("opening the adapters");
        server.Open(serverIp);
        client.Open(clientIp);
        note("connecting");
        sockaddr_in listenAt = nd2_ipv4(serverIp, kPort);
        IND2Listener *listener = nd2_listen(server.m_adapter, server.m_file, listenAt);
        OVERLAPPED req, conn;
        memset(&req, 0, sizeof req);
        memset(&conn, 0, sizeof conn);
        EXPECT(listener->GetConnectionRequest(server.m_connector, &req) == ND_PENDING);
        sockaddr_in clientAt = nd2_ipv4(clientIp, 0);
        CHECK_HR(client.m_connector->Bind(reinterpret_cast<const sockaddr *>(&clientAt), sizeof clientAt));
        HRESULT connecting = client.m_connector->Connect(client.m_qp, reinterpret_cast<const sockaddr *>(&listenAt),
                                                       sizeof listenAt, 0, 0, NULL, 0, &conn);
        EXPECT(connecting == ND_PENDING);
        CHECK_HR(listener->GetOverlappedResult(&req, TRUE));
        OVERLAPPED acc;
        memset(&acc, 0, sizeof acc);
        HRESULT accepting = server.m_connector->Accept(server.m_qp, 0, 0, NULL, 0, &acc);
        CHECK_HR(client.m_connector->GetOverlappedResult(&conn, TRUE));
        memset(&conn, 0, sizeof conn);
        HRESULT completing = client.m_connector->CompleteConnect(&conn);
        if (completing == ND_PENDING)
            completing = client.m_connector->GetOverlappedResult(&conn, TRUE);
        CHECK_HR(completing);
        if (accepting == ND_PENDING)
            accepting = server.m_connector->GetOverlappedResult(&acc, TRUE);
        CHECK_HR(accepting);
        EXPECT(listener->Release() == 0);
        note("connected");
    }

    ~Pair()
    {
        note("closing");
        /* Both Disconnects first: the active one completes with the passive side's DREP. */
        OVERLAPPED cd, sd;
        memset(&cd, 0, sizeof cd);
        memset(&sd, 0, sizeof sd);
        HRESULT c = client.m_connector->Disconnect(&cd);
        HRESULT s = server.m_connector->Disconnect(&sd);
        if (c == ND_PENDING)
            c = client.m_connector->GetOverlappedResult(&cd, TRUE);
        if (s == ND_PENDING)
            s = server.m_connector->GetOverlappedResult(&sd, TRUE);
        EXPECT(c == ND_SUCCESS && s == ND_SUCCESS);
        client.Close();
        server.Close();
        note("closed");
    }

    /* The server posts a receive, the client a send: one completion on each CQ. */
    void Exchange()
    {
        ND2_SGE rsge = server.Sge(), ssge = client.Sge();
        CHECK_HR(server.m_qp->Receive(reinterpret_cast<void *>(1), &rsge, 1));
        ssge.BufferLength = 8;
        CHECK_HR(client.m_qp->Send(reinterpret_cast<void *>(2), &ssge, 1, 0));
    }

    /* Takes the one result of `side`'s CQ (`context` its request's). */
    static void ExpectResult(Side &side, ULONG_PTR context)
    {
        ND2_RESULT result;
        for (int tries = 0; tries < 5000; tries++) {
            ULONG n = side.m_cq->GetResults(&result, 1);
            if (n == 1) {
                EXPECT(result.Status == ND_SUCCESS);
                EXPECT(reinterpret_cast<ULONG_PTR>(result.RequestContext) == context);
                return;
            }
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        EXPECT(!"a result");
    }
};

/* A Notify armed with `event` (no port: the files are unbound). */
void ArmNotify(Side &side, OVERLAPPED &ov, HANDLE event)
{
    memset(&ov, 0, sizeof ov);
    ov.hEvent = event;
    EXPECT(side.m_cq->Notify(ND_CQ_NOTIFY_ANY, &ov) == ND_PENDING);
    EXPECT(!HasOverlappedIoCompleted(&ov));
}

/* WaitForMultipleObjects(Ex) and WaitForSingleObjectEx on the events of CQ Notifies: wait-any
 * gives WAIT_OBJECT_0 + the index of the signalled one (an auto-reset event is taken), a timeout
 * WAIT_TIMEOUT; wait-all returns when both sides' Notifies completed. */
int wait_multiple(Pair &pair)
{
    HANDLE idle = CreateEventA(NULL, TRUE, FALSE, NULL);
    HANDLE s = CreateEventA(NULL, FALSE, FALSE, NULL);
    HANDLE c = CreateEventA(NULL, FALSE, FALSE, NULL);
    EXPECT(idle && s && c);
    OVERLAPPED sov, cov;
    ArmNotify(pair.server, sov, s);
    HANDLE any[2] = {idle, s};
    EXPECT(WaitForMultipleObjects(2, any, FALSE, 0) == WAIT_TIMEOUT);
    EXPECT(WaitForMultipleObjects(2, any, FALSE, 50) == WAIT_TIMEOUT);
    pair.Exchange();
    EXPECT(WaitForMultipleObjects(2, any, FALSE, 10000) == WAIT_OBJECT_0 + 1);
    EXPECT(HasOverlappedIoCompleted(&sov));
    EXPECT(pair.server.m_cq->GetOverlappedResult(&sov, FALSE) == ND_SUCCESS);
    /* Auto-reset: the wait took it. */
    EXPECT(WaitForMultipleObjectsEx(2, any, FALSE, 0, TRUE) == WAIT_TIMEOUT);
    Pair::ExpectResult(pair.server, 1);
    Pair::ExpectResult(pair.client, 2);

    note("wait-any done");
    /* Wait-all over both sides' Notifies. */
    ArmNotify(pair.server, sov, s);
    ArmNotify(pair.client, cov, c);
    HANDLE all[2] = {s, c};
    EXPECT(WaitForMultipleObjects(2, all, TRUE, 0) == WAIT_TIMEOUT);
    pair.Exchange();
    EXPECT(WaitForMultipleObjectsEx(2, all, TRUE, 10000, FALSE) == WAIT_OBJECT_0);
    EXPECT(HasOverlappedIoCompleted(&sov) && HasOverlappedIoCompleted(&cov));
    EXPECT(WaitForSingleObject(s, 0) == WAIT_TIMEOUT && WaitForSingleObject(c, 0) == WAIT_TIMEOUT);
    Pair::ExpectResult(pair.server, 1);
    Pair::ExpectResult(pair.client, 2);

    note("wait-all done");
    /* WaitForSingleObjectEx, alertable: the same wait (no APCs). */
    ArmNotify(pair.server, sov, s);
    EXPECT(WaitForSingleObjectEx(s, 0, TRUE) == WAIT_TIMEOUT);
    pair.Exchange();
    EXPECT(WaitForSingleObjectEx(s, 10000, TRUE) == WAIT_OBJECT_0);
    Pair::ExpectResult(pair.server, 1);
    Pair::ExpectResult(pair.client, 2);

    /* Bad input. */
    SetLastError(0);
    EXPECT(WaitForMultipleObjects(0, any, FALSE, 0) == WAIT_FAILED && GetLastError() == ERROR_INVALID_PARAMETER);
    HANDLE twice[2] = {s, s};
    EXPECT(WaitForMultipleObjects(2, twice, TRUE, 0) == WAIT_FAILED && GetLastError() == ERROR_INVALID_PARAMETER);
    HANDLE withFile[2] = {s, pair.server.m_file};
    EXPECT(WaitForMultipleObjects(2, withFile, FALSE, 0) == WAIT_FAILED && GetLastError() == ERROR_INVALID_HANDLE);
    CloseHandle(idle);
    CloseHandle(s);
    CloseHandle(c);
    return 0;
}

/* GetQueuedCompletionStatusEx: the Notify's packet (key, OVERLAPPED, Internal 0) with a posted
 * one, in one call; a timeout is FALSE with WAIT_TIMEOUT. */
int gqcs_ex(Pair &pair)
{
    HANDLE port = CreateIoCompletionPort(pair.server.m_file, NULL, 11, 0);
    EXPECT(port != NULL);
    EXPECT(CreateIoCompletionPort(pair.client.m_file, port, 22, 0) == port);
    OVERLAPPED_ENTRY entries[4];
    ULONG n = 99;
    SetLastError(0);
    EXPECT(GetQueuedCompletionStatusEx(port, entries, 4, &n, 0, FALSE) == FALSE);
    EXPECT(GetLastError() == WAIT_TIMEOUT && n == 0);
    OVERLAPPED sov, cov;
    ArmNotify(pair.server, sov, NULL);
    ArmNotify(pair.client, cov, NULL);
    pair.Exchange();
    /* Both Notifies' packets, whichever first; then a posted one. */
    int seen = 0;
    while (seen != 3) {
        n = 0;
        EXPECT(GetQueuedCompletionStatusEx(port, entries, 4, &n, 10000, TRUE) == TRUE);
        EXPECT(n >= 1 && n <= 2);
        for (ULONG i = 0; i < n; i++) {
            EXPECT(entries[i].Internal == 0 && entries[i].dwNumberOfBytesTransferred == 0);
            if (entries[i].lpOverlapped == &sov) {
                EXPECT(entries[i].lpCompletionKey == 11 && !(seen & 1));
                seen |= 1;
            } else {
                EXPECT(entries[i].lpOverlapped == &cov && entries[i].lpCompletionKey == 22 && !(seen & 2));
                seen |= 2;
            }
        }
    }
    EXPECT(HasOverlappedIoCompleted(&sov) && HasOverlappedIoCompleted(&cov));
    Pair::ExpectResult(pair.server, 1);
    Pair::ExpectResult(pair.client, 2);
    /* A cancelled Notify's packet is returned too (TRUE), its status in Internal. */
    ArmNotify(pair.server, sov, NULL);
    EXPECT(PostQueuedCompletionStatus(port, 5, 33, NULL) == TRUE);
    CHECK_HR(pair.server.m_cq->CancelOverlappedRequests());
    n = 0;
    EXPECT(GetQueuedCompletionStatusEx(port, entries, 4, &n, 10000, FALSE) == TRUE);
    EXPECT(n == 2);
    EXPECT(entries[0].lpCompletionKey == 33 && entries[0].dwNumberOfBytesTransferred == 5 &&
           entries[0].lpOverlapped == NULL);
    EXPECT(entries[1].lpOverlapped == &sov && entries[1].lpCompletionKey == 11);
    EXPECT(entries[1].Internal == static_cast<ULONG_PTR>(static_cast<LONG_PTR>(ND_CANCELED)));
    EXPECT(GetQueuedCompletionStatusEx(port, entries, 4, &n, 0, FALSE) == FALSE && GetLastError() == WAIT_TIMEOUT);
    CloseHandle(port);
    return 0;
}

/* Closing a completion port wakes the thread waiting on it: FALSE, ERROR_ABANDONED_WAIT_0, no
 * OVERLAPPED (after that thread took a real completion from it). */
int port_close(Pair &pair)
{
    HANDLE port = CreateIoCompletionPort(pair.server.m_file, NULL, 11, 0);
    EXPECT(port != NULL);
    OVERLAPPED sov;
    ArmNotify(pair.server, sov, NULL);
    BOOL first = FALSE, second = TRUE;
    DWORD firstError = 1, secondError = 0;
    OVERLAPPED *firstOv = NULL, *secondOv = &sov;
    std::thread waiter([&] {
        DWORD bytes;
        ULONG_PTR key;
        first = GetQueuedCompletionStatus(port, &bytes, &key, &firstOv, INFINITE);
        firstError = first ? 0 : GetLastError();
        second = GetQueuedCompletionStatus(port, &bytes, &key, &secondOv, INFINITE);
        secondError = GetLastError();
    });
    pair.Exchange();
    Pair::ExpectResult(pair.client, 2);
    /* Give the waiter time to take the packet and wait again. */
    while (!HasOverlappedIoCompleted(&sov)) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    struct timespec settle = {0, 200000000};
    nanosleep(&settle, NULL);
    EXPECT(CloseHandle(port) == TRUE);
    waiter.join();
    EXPECT(first == TRUE && firstError == 0 && firstOv == &sov);
    EXPECT(second == FALSE && secondError == ERROR_ABANDONED_WAIT_0 && secondOv == NULL);
    Pair::ExpectResult(pair.server, 1);
    /* The handle is gone. */
    DWORD bytes;
    ULONG_PTR key;
    OVERLAPPED *ov;
    EXPECT(GetQueuedCompletionStatus(port, &bytes, &key, &ov, 0) == FALSE && GetLastError() == ERROR_INVALID_HANDLE);
    return 0;
}

/* HasOverlappedIoCompleted polled, no wait in the shim: the Notify completes all the same. */
int has_overlapped_io_completed(Pair &pair)
{
    OVERLAPPED sov;
    ArmNotify(pair.server, sov, NULL);
    EXPECT(sov.Internal == static_cast<ULONG_PTR>(STATUS_PENDING));
    pair.Exchange();
    int polls = 0;
    while (!HasOverlappedIoCompleted(&sov)) {
        EXPECT(++polls < 10000);
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    EXPECT(sov.Internal == 0);
    Pair::ExpectResult(pair.server, 1);
    Pair::ExpectResult(pair.client, 2);
    return 0;
}

/* The provider the Windows way: DllGetClassObject -> IClassFactory -> IND2Provider; its
 * QueryAddressList, ResolveAddress and OpenAdapter; DllCanUnloadNow. */
int provider(const char *serverIp, const char *clientIp)
{
    IClassFactory *factory = NULL;
    void *none = reinterpret_cast<void *>(1);
    EXPECT(DllGetClassObject(IID_IND2Provider, IID_IClassFactory, &none) == CLASS_E_CLASSNOTAVAILABLE);
    EXPECT(none == NULL);
    CHECK_HR(DllGetClassObject(CLSID_NdShimProvider, IID_IClassFactory, reinterpret_cast<void **>(&factory)));
    EXPECT(DllCanUnloadNow() == S_FALSE);
    IND2Provider *prov = NULL;
    EXPECT(factory->CreateInstance(NULL, IID_INDProvider, reinterpret_cast<void **>(&prov)) == E_NOINTERFACE);
    CHECK_HR(factory->CreateInstance(NULL, IID_IND2Provider, reinterpret_cast<void **>(&prov)));
    EXPECT(factory->Release() == 0);

    ULONG size = 0;
    EXPECT(prov->QueryAddressList(NULL, &size) == ND_BUFFER_OVERFLOW && size > 0);
    SOCKET_ADDRESS_LIST *list = static_cast<SOCKET_ADDRESS_LIST *>(malloc(size));
    CHECK_HR(prov->QueryAddressList(list, &size));
    sockaddr_in server = nd2_ipv4(serverIp, 0), client = nd2_ipv4(clientIp, 0);
    int found = 0;
    for (INT i = 0; i < list->iAddressCount; i++) {
        const sockaddr_in *a = reinterpret_cast<const sockaddr_in *>(list->Address[i].lpSockaddr);
        if (a->sin_family == AF_INET && a->sin_addr.s_addr == server.sin_addr.s_addr)
            found |= 1;
        if (a->sin_family == AF_INET && a->sin_addr.s_addr == client.sin_addr.s_addr)
            found |= 2;
    }
    free(list);
    EXPECT(found == 3);

    UINT64 id = 0;
    CHECK_HR(prov->ResolveAddress(reinterpret_cast<const sockaddr *>(&server), sizeof server, &id));
    sockaddr_in nobody = nd2_ipv4("192.0.2.1", 0);
    UINT64 other = 0;
    EXPECT(prov->ResolveAddress(reinterpret_cast<const sockaddr *>(&nobody), sizeof nobody, &other) ==
           ND_INVALID_ADDRESS);
    IND2Adapter *adapter = NULL;
    EXPECT(prov->OpenAdapter(IID_INDAdapter, id, reinterpret_cast<void **>(&adapter)) == E_NOINTERFACE);
    EXPECT(prov->OpenAdapter(IID_IND2Adapter, id ^ 0x5a5a5a5a, reinterpret_cast<void **>(&adapter)) ==
           ND_INVALID_PARAMETER);
    CHECK_HR(prov->OpenAdapter(IID_IND2Adapter, id, reinterpret_cast<void **>(&adapter)));
    EXPECT(prov->Release() == 0);
    /* The adapter outlives the provider object, and holds the library. */
    EXPECT(DllCanUnloadNow() == S_FALSE);
    ND2_ADAPTER_INFO info;
    memset(&info, 0, sizeof info);
    info.InfoVersion = ND_VERSION_2;
    ULONG cb = sizeof info;
    CHECK_HR(adapter->Query(&info, &cb));
    EXPECT(info.AdapterId == id);
    EXPECT(adapter->Release() == 0);
    /* The adapter's threads end within about 100 ms of its release: S_FALSE until then. */
    double until = nd2_now_us() + 2e6;
    HRESULT unload;
    while ((unload = DllCanUnloadNow()) == S_FALSE && nd2_now_us() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT(unload == S_OK);
    return 0;
}

/* ND1: no ND1 provider. NdOpenV1Adapter and NdOpenAdapter(IID_INDAdapter) are
 * ND_INVALID_ADDRESS (ndutil's answer when no ND1 provider owns the address); QueryInterface
 * for an ND1 IID is E_NOINTERFACE. */
int nd1_refused(const char *serverIp, const char *)
{
    CHECK_HR(NdStartup());
    sockaddr_in server = nd2_ipv4(serverIp, 0);
    INDAdapter *v1 = reinterpret_cast<INDAdapter *>(1);
    EXPECT(NdOpenV1Adapter(reinterpret_cast<const sockaddr *>(&server), sizeof server, &v1) == ND_INVALID_ADDRESS);
    EXPECT(v1 == NULL);
    void *any = NULL;
    EXPECT(NdOpenAdapter(IID_INDAdapter, reinterpret_cast<const sockaddr *>(&server), sizeof server, &any) ==
           ND_INVALID_ADDRESS);
    IND2Adapter *adapter = NULL;
    HANDLE file = NULL;
    nd2_open_adapter(server, &adapter, &file);
    CHECK_HR(NdCleanup());
    void *out = reinterpret_cast<void *>(1);
    EXPECT(adapter->QueryInterface(IID_INDAdapter, &out) == E_NOINTERFACE && out == NULL);
    IND2Connector *connector = nd2_create_connector(adapter, file);
    EXPECT(connector->QueryInterface(IID_INDConnector, &out) == E_NOINTERFACE && out == NULL);
    EXPECT(adapter->CreateConnector(IID_INDConnector, file, &out) == E_NOINTERFACE);
    EXPECT(connector->Release() == 0);
    nd2_close_adapter(adapter, file);
    return 0;
}

struct Case {
    const char *name;
    int (*withPair)(Pair &);
    int (*alone)(const char *, const char *);
} const cases[] = {
    {"wait-multiple", wait_multiple, NULL},
    {"gqcs-ex", gqcs_ex, NULL},
    {"port-close", port_close, NULL},
    {"has-overlapped-io-completed", has_overlapped_io_completed, NULL},
    {"provider", NULL, provider},
    {"nd1-refused", NULL, nd1_refused},
};

} // namespace

int main(int argc, char **argv)
{
    return nd2_case_main(argc, argv, cases, "SERVER_IP CLIENT_IP",
                         [](const Case &c, const char *serverIp, const char *clientIp) {
                             if (c.alone)
                                 return c.alone(serverIp, clientIp);
                             Pair pair(serverIp, clientIp);
                             return c.withPair(pair);
                         });
}
