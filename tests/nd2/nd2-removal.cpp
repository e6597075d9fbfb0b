/*
 * nd2-removal: the adapter goes away under a waiting ND2 program (IND2Adapter.md and the others:
 * ND_DEVICE_REMOVED, "only cleanup operations on the NetworkDirect adapter will succeed").
 *
 *   nd2-removal CASE IP READY_FILE   (nd2-removal --list: the cases)
 *
 * The program opens the adapter of IP and sets up what a waiting server has: a CQ with a QP on it
 * and a Receive posted, a Listener with a GetConnectionRequest pending, Notify(ANY) and
 * Notify(ERRORS) waiting on the CQ. Then it creates READY_FILE and waits; the caller removes the
 * device (rdma link delete) once READY_FILE exists. Every wait is bounded (WAIT_MS). After its
 * cleanup it creates READY_FILE.released and waits for READY_FILE.gone, which the caller creates
 * when the removal has finished: the device's removal must not wait for the program's exit.
 *
 * The cases:
 *   waiting  both Notify requests and the GetConnectionRequest complete with ND_DEVICE_REMOVED; a
 *       Notify issued after that fails with ND_DEVICE_REMOVED (inline or at once); then every
 *       object is released (each Release returns 0), the removal finishes while the program
 *       lives, and the program exits 0. Prints how long after READY_FILE each step came.
 */
#include "nd2-common.h"

#include <stdint.h>
#include <unistd.h>

#include <string>

namespace {

const DWORD WAIT_MS = 30000;

#define FAIL(...)                                                                                 \
    do {                                                                                          \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                           \
        fprintf(stderr, __VA_ARGS__);                                                             \
        fprintf(stderr, "\n");                                                                    \
        exit(1);                                                                                  \
    } while (0)

/* An OVERLAPPED with its own manual-reset event. */
struct Ov : OVERLAPPED {
    Ov()
    {
        memset(static_cast<OVERLAPPED *>(this), 0, sizeof(OVERLAPPED));
        hEvent = CreateEventA(NULL, TRUE, FALSE, NULL);
        EXPECT(hEvent != NULL);
    }
    ~Ov() { CloseHandle(hEvent); }
};

/* The final status of `ov`'s request on `object` (issued returned `issued`), waiting up to `ms`. */
HRESULT Wait(IND2Overlapped *object, HRESULT issued, Ov &ov, DWORD ms)
{
    if (issued != ND_PENDING)
        return issued;
    if (WaitForSingleObject(ov.hEvent, ms) != WAIT_OBJECT_0) {
        EXPECT(object->GetOverlappedResult(&ov, FALSE) == ND_PENDING);
        return ND_PENDING;
    }
    HRESULT hr = object->GetOverlappedResult(&ov, FALSE);
    EXPECT(hr != ND_PENDING);
    return hr;
}

void ExpectRemoved(const char *what, HRESULT hr, double since)
{
    if (hr != ND_DEVICE_REMOVED)
        FAIL("%s: 0x%08x, want ND_DEVICE_REMOVED 0x%08x%s", what, (unsigned)hr, (unsigned)ND_DEVICE_REMOVED,
             hr == ND_PENDING ? " (still pending)" : "");
    printf("%s: ND_DEVICE_REMOVED %.2f s after ready\n", what, (nd2_now_us() - since) / 1e6);
}

int Waiting(const char *ip, const char *readyFile)
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

    Ov getOv, anyOv, errorsOv;
    HRESULT get = listener->GetConnectionRequest(connector, &getOv);
    HRESULT any = cq->Notify(ND_CQ_NOTIFY_ANY, &anyOv);
    HRESULT errors = cq->Notify(ND_CQ_NOTIFY_ERRORS, &errorsOv);
    EXPECT(get == ND_PENDING && any == ND_PENDING && errors == ND_PENDING);

    FILE *ready = fopen(readyFile, "w");
    EXPECT(ready != NULL);
    fclose(ready);
    double since = nd2_now_us();
    printf("waiting (ready file %s)\n", readyFile);
    fflush(stdout);

    ExpectRemoved("IND2CompletionQueue::Notify(ANY)", Wait(cq, any, anyOv, WAIT_MS), since);
    ExpectRemoved("IND2CompletionQueue::Notify(ERRORS)", Wait(cq, errors, errorsOv, WAIT_MS), since);
    ExpectRemoved("IND2Listener::GetConnectionRequest", Wait(listener, get, getOv, WAIT_MS), since);
    {
        Ov ov;
        ExpectRemoved("a later IND2CompletionQueue::Notify(ANY)", Wait(cq, cq->Notify(ND_CQ_NOTIFY_ANY, &ov), ov, 5000),
                      since);
    }
    fflush(stdout);

    /* Cleanup: every object goes. Deregister may report the removal; it still releases. */
    {
        Ov ov;
        HRESULT hr = Wait(mr, mr->Deregister(&ov), ov, WAIT_MS);
        if (hr != ND_SUCCESS && hr != ND_DEVICE_REMOVED)
            FAIL("IND2MemoryRegion::Deregister: 0x%08x", (unsigned)hr);
    }
    EXPECT(connector->Release() == 0);
    EXPECT(listener->Release() == 0);
    EXPECT(qp->Release() == 0);
    EXPECT(mr->Release() == 0);
    EXPECT(cq->Release() == 0);
    nd2_close_adapter(adapter, file);
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
    int (*run)(const char *ip, const char *readyFile);
};

const Case CASES[] = {
    {"waiting", Waiting},
};

} // namespace

int main(int argc, char **argv)
{
    return nd2_case_main(argc, argv, CASES, "IP READY_FILE", [](const Case &c, const char *ip, const char *ready) {
        return c.run(ip, ready);
    });
}
