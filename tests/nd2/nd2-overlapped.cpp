/*
 * nd2-overlapped: the OVERLAPPED rules of ND2, one case per argument, on a listener's
 * GetConnectionRequest (pending until a peer connects or it is cancelled) and a CQ's Notify.
 *
 *   nd2-overlapped CASE LOCAL_IP PORT      (nd2-overlapped --list: the cases)
 */
#include "nd2-common.h"

namespace {

struct Rig {
    IND2Adapter *adapter = NULL;
    HANDLE file = NULL;
    HANDLE port = NULL;
    IND2Listener *listener = NULL;

    Rig(const char *ip, unsigned short portNumber)
    {
        CHECK_HR(NdStartup());
        sockaddr_in local = nd2_ipv4(ip, portNumber);
        CHECK_HR(NdOpenAdapter(IID_IND2Adapter, reinterpret_cast<const sockaddr *>(&local), sizeof local,
                               reinterpret_cast<void **>(&adapter)));
        CHECK_HR(adapter->CreateOverlappedFile(&file));
        port = CreateIoCompletionPort(file, NULL, 42, 0);
        EXPECT(port != NULL);
        CHECK_HR(adapter->CreateListener(IID_IND2Listener, file, reinterpret_cast<void **>(&listener)));
        CHECK_HR(listener->Bind(reinterpret_cast<const sockaddr *>(&local), sizeof local));
        CHECK_HR(listener->Listen(4));
    }

    ~Rig()
    {
        if (listener)
            EXPECT(listener->Release() == 0);
        CloseHandle(port);
        CloseHandle(file);
        EXPECT(adapter->Release() == 0);
        CHECK_HR(NdCleanup());
    }

    IND2Connector *Connector()
    {
        IND2Connector *c = NULL;
        CHECK_HR(adapter->CreateConnector(IID_IND2Connector, file, reinterpret_cast<void **>(&c)));
        return c;
    }

    /* The port holds nothing: FALSE, no OVERLAPPED, WAIT_TIMEOUT. */
    void ExpectPortEmpty()
    {
        DWORD bytes = 1;
        ULONG_PTR key = 1;
        OVERLAPPED *ov = reinterpret_cast<OVERLAPPED *>(1);
        SetLastError(0);
        EXPECT(GetQueuedCompletionStatus(port, &bytes, &key, &ov, 0) == FALSE);
        EXPECT(ov == NULL);
        EXPECT(GetLastError() == WAIT_TIMEOUT);
    }

    /* The next packet is `want`'s failure with `status`. */
    void ExpectFailedPacket(IND2Overlapped *object, OVERLAPPED *want, HRESULT status)
    {
        DWORD bytes = 1;
        ULONG_PTR key = 0;
        OVERLAPPED *ov = NULL;
        EXPECT(GetQueuedCompletionStatus(port, &bytes, &key, &ov, 0) == FALSE);
        EXPECT(ov == want);
        EXPECT(key == 42);
        EXPECT(bytes == 0);
        EXPECT(object->GetOverlappedResult(want, FALSE) == status);
    }
};

/* Three requests pending, cancelled: three ND_CANCELED packets, in issue order, all queued
 * before CancelOverlappedRequests returns; each event signalled; GetOverlappedResult(FALSE) is
 * ND_PENDING before. */
ND2_CASE(cancel_order, Rig, rig)
{
    IND2Connector *c[3];
    OVERLAPPED ov[3];
    for (int k = 0; k < 3; k++) {
        c[k] = rig.Connector();
        memset(&ov[k], 0, sizeof ov[k]);
        ov[k].hEvent = CreateEventA(NULL, TRUE, FALSE, NULL);
        EXPECT(rig.listener->GetConnectionRequest(c[k], &ov[k]) == ND_PENDING);
    }
    for (int k = 0; k < 3; k++) {
        EXPECT(rig.listener->GetOverlappedResult(&ov[k], FALSE) == ND_PENDING);
        EXPECT(WaitForSingleObject(ov[k].hEvent, 0) == WAIT_TIMEOUT);
    }
    rig.ExpectPortEmpty();
    CHECK_HR(rig.listener->CancelOverlappedRequests());
    for (int k = 0; k < 3; k++) {
        rig.ExpectFailedPacket(rig.listener, &ov[k], ND_CANCELED);
        EXPECT(WaitForSingleObject(ov[k].hEvent, 0) == WAIT_OBJECT_0);
        EXPECT(ov[k].Internal == static_cast<ULONG_PTR>(static_cast<LONG_PTR>(ND_CANCELED)));
        CloseHandle(ov[k].hEvent);
        EXPECT(c[k]->Release() == 0);
    }
    rig.ExpectPortEmpty();
    return 0;
}

/* hEvent | 1: the event is signalled, nothing is posted to the port. */
ND2_CASE(event_bit, Rig, rig)
{
    IND2Connector *c = rig.Connector();
    HANDLE event = CreateEventA(NULL, TRUE, FALSE, NULL);
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    ov.hEvent = reinterpret_cast<HANDLE>(reinterpret_cast<ULONG_PTR>(event) | 1);
    EXPECT(rig.listener->GetConnectionRequest(c, &ov) == ND_PENDING);
    CHECK_HR(rig.listener->CancelOverlappedRequests());
    EXPECT(WaitForSingleObject(event, 0) == WAIT_OBJECT_0);
    EXPECT(rig.listener->GetOverlappedResult(&ov, TRUE) == ND_CANCELED);
    rig.ExpectPortEmpty();
    CloseHandle(event);
    EXPECT(c->Release() == 0);
    return 0;
}

/* Release with requests pending: each completes ND_CANCELED (posted) before Release returns;
 * the connector it was for stays usable. Same for a CQ's Notify. */
ND2_CASE(release_pending, Rig, rig)
{
    IND2Connector *c = rig.Connector();
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    EXPECT(rig.listener->GetConnectionRequest(c, &ov) == ND_PENDING);
    IND2Listener *listener = rig.listener;
    rig.listener = NULL;
    EXPECT(listener->Release() == 0);
    DWORD bytes = 1;
    ULONG_PTR key = 0;
    OVERLAPPED *got = NULL;
    EXPECT(GetQueuedCompletionStatus(rig.port, &bytes, &key, &got, 0) == FALSE);
    EXPECT(got == &ov);
    EXPECT(ov.Internal == static_cast<ULONG_PTR>(static_cast<LONG_PTR>(ND_CANCELED)));
    /* The connector was never given a request: Accept has nothing to accept. */
    EXPECT(c->Reject(NULL, 0) == ND_CONNECTION_INVALID);
    EXPECT(c->Release() == 0);

    IND2CompletionQueue *cq = NULL;
    CHECK_HR(rig.adapter->CreateCompletionQueue(IID_IND2CompletionQueue, rig.file, 8, 0, 0,
                                                reinterpret_cast<void **>(&cq)));
    OVERLAPPED notify;
    memset(&notify, 0, sizeof notify);
    EXPECT(cq->Notify(ND_CQ_NOTIFY_ANY, &notify) == ND_PENDING);
    EXPECT(cq->GetOverlappedResult(&notify, FALSE) == ND_PENDING);
    EXPECT(cq->Release() == 0);
    got = NULL;
    EXPECT(GetQueuedCompletionStatus(rig.port, &bytes, &key, &got, 0) == FALSE);
    EXPECT(got == &notify);
    EXPECT(notify.Internal == static_cast<ULONG_PTR>(static_cast<LONG_PTR>(ND_CANCELED)));
    rig.ExpectPortEmpty();
    return 0;
}

/* Bad input gets its code inline and touches nothing: wrong IID, wrong kind as IUnknown*, NULL
 * OVERLAPPED; no packet is posted for an inline failure. */
ND2_CASE(bad_input, Rig, rig)
{
    void *object = reinterpret_cast<void *>(1);
    EXPECT(rig.adapter->CreateConnector(IID_IND2Listener, rig.file, &object) == E_NOINTERFACE);
    IND2CompletionQueue *cq = NULL;
    CHECK_HR(rig.adapter->CreateCompletionQueue(IID_IND2CompletionQueue, rig.file, 8, 0, 0,
                                                reinterpret_cast<void **>(&cq)));
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    /* A CQ where a connector belongs. */
    EXPECT(rig.listener->GetConnectionRequest(cq, &ov) == ND_INVALID_PARAMETER);
    IND2Connector *c = rig.Connector();
    EXPECT(rig.listener->GetConnectionRequest(c, NULL) == ND_INVALID_PARAMETER);
    EXPECT(cq->Notify(77, &ov) == ND_INVALID_PARAMETER);
    rig.ExpectPortEmpty();
    EXPECT(c->Release() == 0);
    EXPECT(cq->Release() == 0);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    return nd2_case_main(argc, argv, nd2_registered_cases<Rig>(), "LOCAL_IP PORT", [](const Nd2Case<Rig> &c, const char *localIp, const char *port) {
        Rig rig(localIp, static_cast<unsigned short>(atoi(port)));
        return c.run(rig);
    });
}
