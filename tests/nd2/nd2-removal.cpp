/*
 * nd2-removal: the adapter goes away under a waiting ND2 program (IND2Adapter.md and the others:
 * ND_DEVICE_REMOVED, "only cleanup operations on the NetworkDirect adapter will succeed").
 *
 *   nd2-removal CASE IP PEER_IP READY_FILE   (nd2-removal --list: the cases)
 *
 * The program opens the adapter of IP and sets up what a waiting program has: a CQ with a QP on
 * it and a Receive posted, a Listener with a GetConnectionRequest pending, Notify(ANY) and
 * Notify(ERRORS) waiting on the CQ, and a Connect pending (to a Listener of its own on PEER_IP's
 * adapter, which never takes the request). Then it creates READY_FILE and waits; the caller removes the
 * device (rdma link delete) once READY_FILE exists. Every wait is bounded (WAIT_MS). After its
 * cleanup it creates READY_FILE.released and waits for READY_FILE.gone, which the caller creates
 * when the removal has finished: the device's removal must not wait for the program's exit.
 *
 * The cases:
 *   waiting  both Notify requests, the GetConnectionRequest and the Connect complete with
 *       ND_DEVICE_REMOVED; a
 *       Notify issued after that fails with ND_DEVICE_REMOVED (inline or at once), and so do the
 *       adapter's Create methods (inline; IND2Adapter.md lists it for each); then every
 *       object is released (each Release returns 0), the removal finishes while the program
 *       lives, and the program exits 0. Prints how long after READY_FILE each step came.
 */
#include "nd2-common.h"

#include <stdint.h>
#include <unistd.h>

#include <string>

namespace {

const DWORD WAIT_MS = 30000;

typedef Nd2EventOv Ov;

/* The final status of `ov`'s request on `object` (issued returned `issued`), waiting up to `ms`. */
HRESULT Wait(IND2Overlapped *object, HRESULT issued, Ov &ov, DWORD ms)
{
    return issued != ND_PENDING ? issued : ov.Wait(object, ms);
}

void ExpectRemoved(const char *what, HRESULT hr, double since)
{
    if (hr != ND_DEVICE_REMOVED)
        FAIL("%s: 0x%08x, want ND_DEVICE_REMOVED 0x%08x%s", what, (unsigned)hr, (unsigned)ND_DEVICE_REMOVED,
             hr == ND_PENDING ? " (still pending)" : "");
    printf("%s: ND_DEVICE_REMOVED %.2f s after ready\n", what, (nd2_now_us() - since) / 1e6);
}

int Waiting(const char *ip, const char *peerIp, const char *readyFile)
{
    sockaddr_in address = nd2_ipv4(ip, 0);
    IND2Adapter *adapter = NULL;
    HANDLE file = NULL;
    nd2_open_adapter(address, &adapter, &file);

    IND2CompletionQueue *cq = NULL;
    CHECK_HR(adapter->CreateCompletionQueue(IID_IND2CompletionQueue, file, 16, 0, 0,
                                            reinterpret_cast<void **>(&cq)));
    static unsigned char buf[4096];
    IND2MemoryRegion *mr = NULL;
    CHECK_HR(adapter->CreateMemoryRegion(IID_IND2MemoryRegion, file, reinterpret_cast<void **>(&mr)));
    {
        Ov ov;
        HRESULT hr = Wait(mr, mr->Register(buf, sizeof buf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov), ov, WAIT_MS);
        CHECK_HR(hr);
    }
    IND2QueuePair *qp = NULL;
    CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, NULL, 4, 4, 1, 1, 0,
                                      reinterpret_cast<void **>(&qp)));
    ND2_SGE sge = {buf, 64, mr->GetLocalToken()};
    CHECK_HR(qp->Receive(reinterpret_cast<void *>(uintptr_t{1}), &sge, 1));

    IND2Listener *listener = NULL;
    CHECK_HR(adapter->CreateListener(IID_IND2Listener, file, reinterpret_cast<void **>(&listener)));
    CHECK_HR(listener->Bind(reinterpret_cast<const sockaddr *>(&address), sizeof address));
    CHECK_HR(listener->Listen(0));
    IND2Connector *connector = NULL;
    CHECK_HR(adapter->CreateConnector(IID_IND2Connector, file, reinterpret_cast<void **>(&connector)));

    /* The peer: a listener on PEER_IP's adapter that never takes the request, so the Connect
       from IP waits (its REQ unanswered) until the removal. */
    sockaddr_in peerAddress = nd2_ipv4(peerIp, 0);
    IND2Adapter *peer = NULL;
    CHECK_HR(NdOpenAdapter(IID_IND2Adapter, reinterpret_cast<const sockaddr *>(&peerAddress), sizeof peerAddress,
                           reinterpret_cast<void **>(&peer)));
    HANDLE peerFile = NULL;
    CHECK_HR(peer->CreateOverlappedFile(&peerFile));
    IND2Listener *peerListener = NULL;
    CHECK_HR(peer->CreateListener(IID_IND2Listener, peerFile, reinterpret_cast<void **>(&peerListener)));
    CHECK_HR(peerListener->Bind(reinterpret_cast<const sockaddr *>(&peerAddress), sizeof peerAddress));
    CHECK_HR(peerListener->Listen(0));
    ULONG size = sizeof peerAddress;
    CHECK_HR(peerListener->GetLocalAddress(reinterpret_cast<sockaddr *>(&peerAddress), &size));

    IND2QueuePair *activeQp = NULL;
    CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, NULL, 4, 4, 1, 1, 0,
                                      reinterpret_cast<void **>(&activeQp)));
    IND2Connector *active = NULL;
    CHECK_HR(adapter->CreateConnector(IID_IND2Connector, file, reinterpret_cast<void **>(&active)));
    CHECK_HR(active->Bind(reinterpret_cast<const sockaddr *>(&address), sizeof address));

    Ov getOv, anyOv, errorsOv, connectOv;
    HRESULT connect = active->Connect(activeQp, reinterpret_cast<const sockaddr *>(&peerAddress), sizeof peerAddress,
                                      0, 0, NULL, 0, &connectOv);
    HRESULT get = listener->GetConnectionRequest(connector, &getOv);
    HRESULT any = cq->Notify(ND_CQ_NOTIFY_ANY, &anyOv);
    HRESULT errors = cq->Notify(ND_CQ_NOTIFY_ERRORS, &errorsOv);
    EXPECT(get == ND_PENDING && any == ND_PENDING && errors == ND_PENDING && connect == ND_PENDING);
    /* The Connect still waits a second later: its REQ is unanswered, not refused. */
    EXPECT(Wait(active, connect, connectOv, 1000) == ND_PENDING);

    FILE *ready = fopen(readyFile, "w");
    EXPECT(ready != NULL);
    fclose(ready);
    double since = nd2_now_us();
    printf("waiting (ready file %s)\n", readyFile);
    fflush(stdout);

    ExpectRemoved("IND2CompletionQueue::Notify(ANY)", Wait(cq, any, anyOv, WAIT_MS), since);
    ExpectRemoved("IND2CompletionQueue::Notify(ERRORS)", Wait(cq, errors, errorsOv, WAIT_MS), since);
    ExpectRemoved("IND2Listener::GetConnectionRequest", Wait(listener, get, getOv, WAIT_MS), since);
    ExpectRemoved("IND2Connector::Connect", Wait(active, connect, connectOv, WAIT_MS), since);
    {
        Ov ov;
        ExpectRemoved("a later IND2CompletionQueue::Notify(ANY)", Wait(cq, cq->Notify(ND_CQ_NOTIFY_ANY, &ov), ov, 5000),
                      since);
    }
    /* Only cleanup succeeds now: the adapter's Create methods fail inline. */
    {
        IND2CompletionQueue *late = NULL;
        ExpectRemoved("IND2Adapter::CreateCompletionQueue",
                      adapter->CreateCompletionQueue(IID_IND2CompletionQueue, file, 16, 0, 0,
                                                     reinterpret_cast<void **>(&late)),
                      since);
        EXPECT(late == NULL);
        IND2Connector *lateConnector = NULL;
        ExpectRemoved("IND2Adapter::CreateConnector",
                      adapter->CreateConnector(IID_IND2Connector, file, reinterpret_cast<void **>(&lateConnector)),
                      since);
        HANDLE lateFile = NULL;
        ExpectRemoved("IND2Adapter::CreateOverlappedFile", adapter->CreateOverlappedFile(&lateFile), since);
    }
    fflush(stdout);

    /* Cleanup: every object goes. Deregister may report the removal; it still releases. */
    {
        Ov ov;
        HRESULT hr = Wait(mr, mr->Deregister(&ov), ov, WAIT_MS);
        if (hr != ND_SUCCESS && hr != ND_DEVICE_REMOVED)
            FAIL("IND2MemoryRegion::Deregister: 0x%08x", (unsigned)hr);
    }
    EXPECT(active->Release() == 0);
    EXPECT(activeQp->Release() == 0);
    EXPECT(connector->Release() == 0);
    EXPECT(listener->Release() == 0);
    EXPECT(qp->Release() == 0);
    EXPECT(mr->Release() == 0);
    EXPECT(cq->Release() == 0);
    CloseHandle(file);
    EXPECT(adapter->Release() == 0);
    /* The peer's adapter (rxe1) lives on: it has nothing to do with the removal. */
    EXPECT(peerListener->Release() == 0);
    CloseHandle(peerFile);
    EXPECT(peer->Release() == 0);
    CHECK_HR(NdCleanup());
    printf("released everything %.2f s after ready\n", (nd2_now_us() - since) / 1e6);
    fflush(stdout);

    std::string released = std::string(readyFile) + ".released", gone = std::string(readyFile) + ".gone";
    FILE *f = fopen(released.c_str(), "w");
    EXPECT(f != NULL);
    fclose(f);
    for (int i = 0; i < 200 && access(gone.c_str(), F_OK) != 0; i++)
        usleep(100000);
    if (access(gone.c_str(), F_OK) != 0)
        FAIL("the device's removal did not finish within 20 s of the cleanup");
    printf("the removal finished %.2f s after ready, the program still running\n", (nd2_now_us() - since) / 1e6);
    return 0;
}

struct Case {
    const char *name;
    int (*run)(const char *ip, const char *peerIp, const char *readyFile);
};

const Case CASES[] = {
    {"waiting", Waiting},
};

} // namespace

int main(int argc, char **argv)
{
    if (nd2_listed(argc, argv, CASES))
        return 0;
    if (argc != 5) {
        fprintf(stderr, "usage: %s CASE IP PEER_IP READY_FILE | --list\n", argv[0]);
        return 2;
    }
    return nd2_run_case(argv[1], CASES, [&](const Case &c) { return c.run(argv[2], argv[3], argv[4]); });
}
