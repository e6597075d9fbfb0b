/*
 * nd2-bindio: an ND2 client in C (calls through lpVtbl, the provider from DllGetClassObject) that
 * drives its progress from BindIoCompletionCallback's thread pool, as Windows clients do: every
 * overlapped file is bound with BindIoCompletionCallback, every ND2 operation's completion arrives
 * in the callback (on a pool thread, never the caller's), and some callbacks issue the next
 * operation themselves (GetConnectionRequest's issues Accept, Connect's CompleteConnect, the CQ
 * Notify's drains the CQ with GetResults). Both ends (rxe0 server, rxe1 client) in one process.
 *
 *   nd2-bindio CASE SERVER_IP CLIENT_IP      (nd2-bindio --list: the cases)
 *
 * The callback's dwErrorCode is the operation's NTSTATUS (OVERLAPPED.Internal: 0,
 * STATUS_CANCELLED, ND_CONNECTION_REFUSED...), its byte count the OVERLAPPED's InternalHigh.
 */
#define _GNU_SOURCE
#include "nd2-check.h"

#include <ndspi.h>
#include <ndstatus.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const unsigned short kPort = 7430;
static const unsigned short kRefusedPort = 7431;

static void note(const char *what)
{
    static struct timespec start;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (start.tv_sec == 0)
        start = now;
    fprintf(stderr, "nd2-bindio: %8.3f s %s\n",
            (double)(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9, what);
}

/* One overlapped operation: the OVERLAPPED first, so that the callback's LPOVERLAPPED is the Op. */
typedef struct Op Op;
struct Op {
    OVERLAPPED ov;
    const char *name;
    /* Run in the callback, on the pool thread, before `done` is posted: the next operation. */
    void (*then)(Op *op);
    sem_t done;
    atomic_int calls;
    DWORD error, bytes;
    ULONG_PTR internal, internalHigh;
    int onPoolThread;
};

static pthread_t mainThread;

static void WINAPI on_complete(DWORD dwErrorCode, DWORD dwNumberOfBytesTransfered, LPOVERLAPPED lpOverlapped)
{
    Op *op = (Op *)lpOverlapped;
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    op->error = dwErrorCode;
    op->bytes = dwNumberOfBytesTransfered;
    op->internal = lpOverlapped->Internal;
    op->internalHigh = lpOverlapped->InternalHigh;
    op->onPoolThread = !pthread_equal(pthread_self(), mainThread) && strcmp(name, "nd2-io-pool") == 0;
    atomic_fetch_add(&op->calls, 1);
    if (op->then)
        op->then(op);
    sem_post(&op->done);
}

static void op_init(Op *op, const char *name, void (*then)(Op *))
{
    memset(&op->ov, 0, sizeof op->ov);
    op->name = name;
    op->then = then;
    sem_init(&op->done, 0, 0);
    atomic_store(&op->calls, 0);
    op->error = op->bytes = 0xdeadbeef;
    op->onPoolThread = 0;
}

/* The call that issued `op` returned `hr`: pending, or finished at once (a packet comes either
 * way, as on Windows for a handle bound to a port). */
static void issued(Op *op, HRESULT hr)
{
    if (hr != ND_PENDING && hr != ND_SUCCESS) {
        fprintf(stderr, "%s returned 0x%08x inline\n", op->name, (unsigned)hr);
        exit(1);
    }
}

/* Waits (10 s at most) for op's callback and checks what it was given: `status` as dwErrorCode
 * (the NTSTATUS, as Internal holds it), InternalHigh as the byte count, on a pool thread, once. */
static void expect_callback(Op *op, NTSTATUS status)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    while (sem_timedwait(&op->done, &deadline) != 0) {
        if (errno != EINTR) {
            fprintf(stderr, "no callback for %s in 10 s\n", op->name);
            exit(1);
        }
    }
    fprintf(stderr, "nd2-bindio: %s: dwErrorCode 0x%08x, bytes %u, Internal 0x%llx\n", op->name,
            (unsigned)op->error, (unsigned)op->bytes, (unsigned long long)op->internal);
    EXPECT(op->error == (DWORD)status);
    EXPECT((NTSTATUS)op->internal == status);
    EXPECT(op->internal == (ULONG_PTR)(LONG_PTR)status); /* sign-extended, as Windows stores it */
    EXPECT(op->bytes == (DWORD)op->internalHigh);
    EXPECT(op->bytes == 0); /* ND2's overlapped operations transfer no bytes */
    EXPECT(op->onPoolThread);
    EXPECT(atomic_load(&op->calls) == 1);
}

/* The provider the Windows way: DllGetClassObject -> IClassFactory -> IND2Provider. */
static IND2Provider *open_provider(void)
{
    IClassFactory *factory = NULL;
    IND2Provider *provider = NULL;
    CHECK_HR(DllGetClassObject(&CLSID_NdShimProvider, &IID_IClassFactory, (void **)&factory));
    CHECK_HR(factory->lpVtbl->CreateInstance(factory, NULL, &IID_IND2Provider, (void **)&provider));
    EXPECT(factory->lpVtbl->Release(factory) == 0);
    return provider;
}

static IND2Adapter *open_adapter(IND2Provider *provider, const char *ip)
{
    struct sockaddr_in at = nd2_ipv4(ip, 0);
    UINT64 id = 0;
    IND2Adapter *adapter = NULL;
    CHECK_HR(provider->lpVtbl->ResolveAddress(provider, (const struct sockaddr *)&at, sizeof at, &id));
    CHECK_HR(provider->lpVtbl->OpenAdapter(provider, &IID_IND2Adapter, id, (void **)&adapter));
    return adapter;
}

/* One side: adapter, its overlapped file bound to the pool, CQ, registered buffer, QP, connector. */
typedef struct {
    IND2Adapter *adapter;
    HANDLE file;
    IND2CompletionQueue *cq;
    IND2MemoryRegion *mr;
    IND2QueuePair *qp;
    IND2Connector *connector;
    char buf[64];
} Side;

static void side_open(Side *s, IND2Provider *provider, const char *ip, int connector)
{
    Op reg;
    memset(s, 0, sizeof *s);
    s->adapter = open_adapter(provider, ip);
    CHECK_HR(s->adapter->lpVtbl->CreateOverlappedFile(s->adapter, &s->file));
    EXPECT(BindIoCompletionCallback(s->file, on_complete, 0));
    CHECK_HR(s->adapter->lpVtbl->CreateCompletionQueue(s->adapter, &IID_IND2CompletionQueue, s->file, 16, 0, 0,
                                                       (void **)&s->cq));
    CHECK_HR(s->adapter->lpVtbl->CreateMemoryRegion(s->adapter, &IID_IND2MemoryRegion, s->file, (void **)&s->mr));
    op_init(&reg, "Register", NULL);
    issued(&reg, s->mr->lpVtbl->Register(s->mr, s->buf, sizeof s->buf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &reg.ov));
    expect_callback(&reg, STATUS_SUCCESS);
    if (!connector)
        return;
    CHECK_HR(s->adapter->lpVtbl->CreateQueuePair(s->adapter, &IID_IND2QueuePair, (IUnknown *)s->cq,
                                                 (IUnknown *)s->cq, s, 4, 4, 1, 1, 0, (void **)&s->qp));
    CHECK_HR(s->adapter->lpVtbl->CreateConnector(s->adapter, &IID_IND2Connector, s->file, (void **)&s->connector));
}

static void side_close(Side *s)
{
    Op dereg;
    if (s->connector)
        EXPECT(s->connector->lpVtbl->Release(s->connector) == 0);
    if (s->qp)
        EXPECT(s->qp->lpVtbl->Release(s->qp) == 0);
    op_init(&dereg, "Deregister", NULL);
    issued(&dereg, s->mr->lpVtbl->Deregister(s->mr, &dereg.ov));
    expect_callback(&dereg, STATUS_SUCCESS);
    EXPECT(s->mr->lpVtbl->Release(s->mr) == 0);
    EXPECT(s->cq->lpVtbl->Release(s->cq) == 0);
    EXPECT(CloseHandle(s->file));
    EXPECT(s->adapter->lpVtbl->Release(s->adapter) == 0);
}

static ND2_SGE sge_of(Side *s, ULONG length)
{
    ND2_SGE sge;
    sge.Buffer = s->buf;
    sge.BufferLength = length;
    sge.MemoryRegionToken = s->mr->lpVtbl->GetLocalToken(s->mr);
    return sge;
}

/* The sides, for the callbacks that issue the next operation. */
static Side server, client;
static Op accept_op, complete_connect_op;
/* What the Notify's callback took from the CQ. */
static ULONG drained;
static HRESULT drainedStatus;

/* GetConnectionRequest's callback accepts, from the pool thread. */
static void then_accept(Op *op)
{
    if (op->error != 0)
        return;
    op_init(&accept_op, "Accept", NULL);
    issued(&accept_op, server.connector->lpVtbl->Accept(server.connector, (IUnknown *)server.qp, 0, 0, NULL, 0,
                                                        &accept_op.ov));
}

/* Connect's callback completes the connection, from the pool thread. */
static void then_complete_connect(Op *op)
{
    if (op->error != 0)
        return;
    op_init(&complete_connect_op, "CompleteConnect", NULL);
    issued(&complete_connect_op, client.connector->lpVtbl->CompleteConnect(client.connector, &complete_connect_op.ov));
}

/* The server CQ's Notify callback takes the CQ's results. */
static void then_drain(Op *op)
{
    ND2_RESULT result;
    (void)op;
    drained = server.cq->lpVtbl->GetResults(server.cq, &result, 1);
    drainedStatus = drained == 1 ? result.Status : -1;
}

/* The client's send completion, polled from the main thread. */
static void expect_send_result(void)
{
    ND2_RESULT result;
    int tries;
    for (tries = 0; tries < 5000; tries++) {
        if (client.cq->lpVtbl->GetResults(client.cq, &result, 1) == 1) {
            EXPECT(result.Status == ND_SUCCESS);
            return;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    EXPECT(!"the send's result");
}

/* Bind rules on handles of IND2Adapter::CreateOverlappedFile, and Register/Deregister through the
 * callback on an adapter of its own. */
static int bind_rules(IND2Provider **provider, const char *serverIp, const char *clientIp)
{
    IND2Adapter *adapter = open_adapter(*provider, serverIp);
    HANDLE file = NULL, other = NULL, port, event;
    IND2MemoryRegion *mr = NULL;
    char buf[64];
    Op reg, dereg;
    (void)clientIp;
    CHECK_HR(adapter->lpVtbl->CreateOverlappedFile(adapter, &file));
    CHECK_HR(adapter->lpVtbl->CreateOverlappedFile(adapter, &other));
    event = CreateEventA(NULL, TRUE, FALSE, NULL);
    EXPECT(event != NULL);

    EXPECT(!BindIoCompletionCallback(file, on_complete, 1));
    EXPECT(GetLastError() == ERROR_INVALID_PARAMETER);
    EXPECT(!BindIoCompletionCallback((HANDLE)(uintptr_t)0x1234, on_complete, 0));
    EXPECT(GetLastError() == ERROR_INVALID_HANDLE);
    EXPECT(!BindIoCompletionCallback(event, on_complete, 0));
    EXPECT(GetLastError() == ERROR_INVALID_HANDLE);
    EXPECT(BindIoCompletionCallback(file, on_complete, 0));
    /* Bound once: neither a second bind nor a port. */
    EXPECT(!BindIoCompletionCallback(file, on_complete, 0));
    EXPECT(GetLastError() == ERROR_INVALID_PARAMETER);
    EXPECT(CreateIoCompletionPort(file, NULL, 1, 0) == NULL);
    EXPECT(GetLastError() == ERROR_INVALID_PARAMETER);
    /* A file bound to a port is not bound to the pool. */
    port = CreateIoCompletionPort(other, NULL, 1, 0);
    EXPECT(port != NULL);
    EXPECT(!BindIoCompletionCallback(other, on_complete, 0));
    EXPECT(GetLastError() == ERROR_INVALID_PARAMETER);
    note("bind rules checked");
    /* With no provider object left, the pool's threads alone keep the library loaded. */
    EXPECT((*provider)->lpVtbl->Release(*provider) == 0);
    EXPECT(DllCanUnloadNow() == S_FALSE);
    *provider = open_provider();

    CHECK_HR(adapter->lpVtbl->CreateMemoryRegion(adapter, &IID_IND2MemoryRegion, file, (void **)&mr));
    op_init(&reg, "Register", NULL);
    issued(&reg, mr->lpVtbl->Register(mr, buf, sizeof buf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &reg.ov));
    expect_callback(&reg, STATUS_SUCCESS);
    op_init(&dereg, "Deregister", NULL);
    issued(&dereg, mr->lpVtbl->Deregister(mr, &dereg.ov));
    expect_callback(&dereg, STATUS_SUCCESS);
    EXPECT(mr->lpVtbl->Release(mr) == 0);
    EXPECT(CloseHandle(file) && CloseHandle(other) && CloseHandle(port) && CloseHandle(event));
    EXPECT(adapter->lpVtbl->Release(adapter) == 0);
    return 0;
}

/* Every ND2 operation's completion through the callback: Register, a refused Connect,
 * GetConnectionRequest -> Accept, Connect -> CompleteConnect, CQ Notify (rounds), NotifyDisconnect,
 * Disconnect, Deregister. */
static int operations(IND2Provider **pprovider, const char *serverIp, const char *clientIp)
{
    IND2Provider *provider = *pprovider;
    struct sockaddr_in listenAt = nd2_ipv4(serverIp, kPort), refusedAt = nd2_ipv4(serverIp, kRefusedPort);
    struct sockaddr_in clientAt = nd2_ipv4(clientIp, 0);
    IND2Listener *listener = NULL;
    IND2QueuePair *qp2 = NULL;
    IND2Connector *refused = NULL;
    Op refused_op, gcr, conn, notify_disc, notify, cd, sd;
    int round;

    side_open(&server, provider, serverIp, 1);
    side_open(&client, provider, clientIp, 1);
    note("both sides open, Register completed through the callback");

    /* A Connect nobody listens for: its failure's NTSTATUS in the callback. */
    CHECK_HR(client.adapter->lpVtbl->CreateQueuePair(client.adapter, &IID_IND2QueuePair, (IUnknown *)client.cq,
                                                     (IUnknown *)client.cq, NULL, 4, 4, 1, 1, 0, (void **)&qp2));
    CHECK_HR(client.adapter->lpVtbl->CreateConnector(client.adapter, &IID_IND2Connector, client.file,
                                                     (void **)&refused));
    op_init(&refused_op, "Connect (refused)", NULL);
    issued(&refused_op, refused->lpVtbl->Connect(refused, (IUnknown *)qp2, (const struct sockaddr *)&refusedAt,
                                                 sizeof refusedAt, 0, 0, NULL, 0, &refused_op.ov));
    expect_callback(&refused_op, ND_CONNECTION_REFUSED);
    EXPECT(refused->lpVtbl->Release(refused) == 0);
    EXPECT(qp2->lpVtbl->Release(qp2) == 0);

    CHECK_HR(server.adapter->lpVtbl->CreateListener(server.adapter, &IID_IND2Listener, server.file,
                                                    (void **)&listener));
    CHECK_HR(listener->lpVtbl->Bind(listener, (const struct sockaddr *)&listenAt, sizeof listenAt));
    CHECK_HR(listener->lpVtbl->Listen(listener, 4));
    op_init(&gcr, "GetConnectionRequest", then_accept);
    issued(&gcr, listener->lpVtbl->GetConnectionRequest(listener, (IUnknown *)server.connector, &gcr.ov));
    CHECK_HR(client.connector->lpVtbl->Bind(client.connector, (const struct sockaddr *)&clientAt, sizeof clientAt));
    op_init(&conn, "Connect", then_complete_connect);
    issued(&conn, client.connector->lpVtbl->Connect(client.connector, (IUnknown *)client.qp,
                                                    (const struct sockaddr *)&listenAt, sizeof listenAt, 0, 0, NULL,
                                                    0, &conn.ov));
    expect_callback(&gcr, STATUS_SUCCESS);
    expect_callback(&conn, STATUS_SUCCESS);
    expect_callback(&accept_op, STATUS_SUCCESS);
    expect_callback(&complete_connect_op, STATUS_SUCCESS);
    EXPECT(listener->lpVtbl->Release(listener) == 0);
    note("connected from the callbacks");

    op_init(&notify_disc, "NotifyDisconnect", NULL);
    issued(&notify_disc, server.connector->lpVtbl->NotifyDisconnect(server.connector, &notify_disc.ov));

    for (round = 0; round < 5; round++) {
        ND2_SGE rsge = sge_of(&server, sizeof server.buf), ssge = sge_of(&client, 8);
        CHECK_HR(server.qp->lpVtbl->Receive(server.qp, (void *)1, &rsge, 1));
        op_init(&notify, "Notify", then_drain);
        issued(&notify, server.cq->lpVtbl->Notify(server.cq, ND_CQ_NOTIFY_ANY, &notify.ov));
        CHECK_HR(client.qp->lpVtbl->Send(client.qp, (void *)2, &ssge, 1, 0));
        expect_callback(&notify, STATUS_SUCCESS);
        EXPECT(drained == 1 && drainedStatus == ND_SUCCESS);
        expect_send_result();
    }
    note("5 CQ Notifies completed through the callback, the CQ drained in it");

    op_init(&cd, "Disconnect (client)", NULL);
    issued(&cd, client.connector->lpVtbl->Disconnect(client.connector, &cd.ov));
    expect_callback(&notify_disc, STATUS_SUCCESS);
    op_init(&sd, "Disconnect (server)", NULL);
    issued(&sd, server.connector->lpVtbl->Disconnect(server.connector, &sd.ov));
    expect_callback(&cd, STATUS_SUCCESS);
    expect_callback(&sd, STATUS_SUCCESS);
    note("disconnected");

    side_close(&client);
    side_close(&server);
    /* No operation's callback came twice. */
    EXPECT(atomic_load(&gcr.calls) == 1 && atomic_load(&conn.calls) == 1 && atomic_load(&notify.calls) == 1 &&
           atomic_load(&notify_disc.calls) == 1 && atomic_load(&accept_op.calls) == 1);
    return 0;
}

/* Teardown: a pending CQ Notify and a pending GetConnectionRequest cancelled with
 * CancelOverlappedRequests arrive in the callback as STATUS_CANCELLED before anything is released. */
static int cancel_teardown(IND2Provider **pprovider, const char *serverIp, const char *clientIp)
{
    IND2Provider *provider = *pprovider;
    struct sockaddr_in listenAt = nd2_ipv4(serverIp, kPort);
    IND2Listener *listener = NULL;
    Op notify, gcr;
    struct timespec settle = {0, 100000000};
    (void)clientIp;

    side_open(&server, provider, serverIp, 1);
    op_init(&notify, "Notify (cancelled)", NULL);
    EXPECT(server.cq->lpVtbl->Notify(server.cq, ND_CQ_NOTIFY_ANY, &notify.ov) == ND_PENDING);
    CHECK_HR(server.adapter->lpVtbl->CreateListener(server.adapter, &IID_IND2Listener, server.file,
                                                    (void **)&listener));
    CHECK_HR(listener->lpVtbl->Bind(listener, (const struct sockaddr *)&listenAt, sizeof listenAt));
    CHECK_HR(listener->lpVtbl->Listen(listener, 4));
    op_init(&gcr, "GetConnectionRequest (cancelled)", NULL);
    EXPECT(listener->lpVtbl->GetConnectionRequest(listener, (IUnknown *)server.connector, &gcr.ov) == ND_PENDING);
    /* Nothing completes them meanwhile. */
    nanosleep(&settle, NULL);
    EXPECT(atomic_load(&notify.calls) == 0 && atomic_load(&gcr.calls) == 0);

    CHECK_HR(server.cq->lpVtbl->CancelOverlappedRequests(server.cq));
    expect_callback(&notify, (NTSTATUS)STATUS_CANCELLED);
    EXPECT(server.cq->lpVtbl->GetOverlappedResult(server.cq, &notify.ov, FALSE) == ND_CANCELED);
    CHECK_HR(listener->lpVtbl->CancelOverlappedRequests(listener));
    expect_callback(&gcr, (NTSTATUS)STATUS_CANCELLED);
    note("the cancelled requests arrived as STATUS_CANCELLED");

    EXPECT(listener->lpVtbl->Release(listener) == 0);
    side_close(&server);
    nanosleep(&settle, NULL);
    EXPECT(atomic_load(&notify.calls) == 1 && atomic_load(&gcr.calls) == 1);
    return 0;
}

typedef struct {
    const char *name;
    int (*run)(IND2Provider **provider, const char *serverIp, const char *clientIp);
} Case;

static const Case cases[] = {
    {"bind-rules", bind_rules},
    {"operations", operations},
    {"cancel-teardown", cancel_teardown},
};

/* The process's threads by name (the shim names its own: nd2-io-pool, nd2-cq-notify,
 * nd-shim-events, nd-shim-flush), for a DllCanUnloadNow that stays S_FALSE. */
static void print_threads(void)
{
    DIR *tasks = opendir("/proc/self/task");
    struct dirent *task;
    if (!tasks)
        return;
    while ((task = readdir(tasks)) != NULL) {
        char path[300], name[64] = "";
        FILE *comm;
        if (task->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", task->d_name);
        comm = fopen(path, "r");
        if (comm) {
            if (fgets(name, sizeof name, comm))
                name[strcspn(name, "\n")] = 0;
            fclose(comm);
        }
        fprintf(stderr, "nd2-bindio: thread %s %s\n", task->d_name, name);
    }
    closedir(tasks);
}

int main(int argc, char **argv)
{
    size_t i;
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
            printf("%s\n", cases[i].name);
        return 0;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: %s CASE SERVER_IP CLIENT_IP | --list\n", argv[0]);
        return 2;
    }
    mainThread = pthread_self();
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        IND2Provider *provider;
        struct timespec ms10 = {0, 10000000};
        int rc, tries;
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        note("start");
        provider = open_provider();
        rc = cases[i].run(&provider, argv[2], argv[3]);
        EXPECT(provider->lpVtbl->Release(provider) == 0);
        /* Every bound file released: the pool's threads end, and the library may be unloaded. */
        for (tries = 0; tries < 500 && DllCanUnloadNow() != S_OK; tries++)
            nanosleep(&ms10, NULL);
        if (DllCanUnloadNow() != S_OK)
            print_threads();
        EXPECT(DllCanUnloadNow() == S_OK);
        if (rc == 0)
            printf("%s: ok\n", cases[i].name);
        return rc;
    }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
