/*
 * nd2-queue-setup: what a CQ and a QP at a given depth cost to create, through ND2 and through
 * libibverbs directly, in one process on one device (a benchmark: it prints figures, it asserts
 * no time).
 *
 *   nd2-queue-setup LOCAL_IP [--depth N] [--rounds R]
 *     --depth N    the CQ's and both queues' depth (default: the adapter's maximum, Query's
 *                  MaxCompletionQueueDepth / MaxInitiatorQueueDepth / MaxReceiveQueueDepth)
 *     --rounds R   rounds (default 5); each creates and releases, in turn, the ND2 pair
 *                  (CreateCompletionQueue, CreateQueuePair with 1 SGE each way and no inline
 *                  data) and the verbs pair (ibv_create_cq on a completion channel,
 *                  ibv_create_qp with the same depths and SGEs, RESET -> INIT, as nd-shim
 *                  does), the two paths alternating which goes first
 *
 * Prints each step's median over the rounds in milliseconds and the ratio ND2 / verbs.
 *
 * nd2-build: -libverbs -lrdmacm
 */
#include "nd2-common.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <vector>

namespace {

struct Steps {
    std::vector<double> cq, qp, release;
    static double Median(std::vector<double> v)
    {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0 : v[v.size() / 2];
    }
};

/* The ND2 pair: CreateCompletionQueue, CreateQueuePair, then both released. */
void nd2_round(IND2Adapter *adapter, HANDLE file, ULONG cqDepth, ULONG qpDepth, Steps &steps)
{
    IND2CompletionQueue *cq = NULL;
    IND2QueuePair *qp = NULL;
    double t0 = nd2_now_us();
    CHECK_HR(adapter->CreateCompletionQueue(IID_IND2CompletionQueue, file, cqDepth, 0, 0,
                                            reinterpret_cast<void **>(&cq)));
    double t1 = nd2_now_us();
    CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, NULL, qpDepth, qpDepth, 1, 1, 0,
                                      reinterpret_cast<void **>(&qp)));
    double t2 = nd2_now_us();
    EXPECT(qp->Release() == 0);
    EXPECT(cq->Release() == 0);
    double t3 = nd2_now_us();
    steps.cq.push_back((t1 - t0) / 1e3);
    steps.qp.push_back((t2 - t1) / 1e3);
    steps.release.push_back((t3 - t2) / 1e3);
}

/* The same through libibverbs: the context and PD of an rdma_cm id bound to LOCAL_IP. */
struct Verbs {
    rdma_event_channel *cm = NULL;
    rdma_cm_id *id = NULL;
    ibv_pd *pd = NULL;
    ibv_comp_channel *channel = NULL;

    explicit Verbs(const Nd2Address &local)
    {
        cm = rdma_create_event_channel();
        EXPECT(cm != NULL);
        EXPECT(rdma_create_id(cm, &id, NULL, RDMA_PS_TCP) == 0);
        EXPECT(rdma_bind_addr(id, const_cast<sockaddr *>(local.Sa())) == 0);
        EXPECT(id->verbs != NULL);
        pd = ibv_alloc_pd(id->verbs);
        EXPECT(pd != NULL);
        channel = ibv_create_comp_channel(id->verbs);
        EXPECT(channel != NULL);
    }
    ~Verbs()
    {
        ibv_destroy_comp_channel(channel);
        ibv_dealloc_pd(pd);
        rdma_destroy_id(id);
        rdma_destroy_event_channel(cm);
    }

    void Round(int cqDepth, const ibv_qp_cap &cap, Steps &steps)
    {
        double t0 = nd2_now_us();
        ibv_cq *cq = ibv_create_cq(id->verbs, cqDepth, NULL, channel, 0);
        EXPECT(cq != NULL);
        double t1 = nd2_now_us();
        ibv_qp_init_attr init;
        memset(&init, 0, sizeof init);
        init.send_cq = cq;
        init.recv_cq = cq;
        init.cap = cap;
        init.qp_type = IBV_QPT_RC;
        ibv_qp *qp = ibv_create_qp(pd, &init);
        EXPECT(qp != NULL);
        ibv_qp_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.qp_state = IBV_QPS_INIT;
        attr.port_num = id->port_num;
        attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        EXPECT(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
        double t2 = nd2_now_us();
        EXPECT(ibv_destroy_qp(qp) == 0);
        EXPECT(ibv_destroy_cq(cq) == 0);
        double t3 = nd2_now_us();
        steps.cq.push_back((t1 - t0) / 1e3);
        steps.qp.push_back((t2 - t1) / 1e3);
        steps.release.push_back((t3 - t2) / 1e3);
    }
};

void report(const char *step, const std::vector<double> &nd2, const std::vector<double> &verbs)
{
    double a = Steps::Median(nd2), b = Steps::Median(verbs);
    printf("%-34s nd2 %9.2f ms   verbs %9.2f ms   nd2/verbs %.2f\n", step, a, b, b > 0 ? a / b : 0);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2)
        FAIL("usage: %s LOCAL_IP [--depth N] [--rounds R]", argv[0]);
    Nd2Address local = nd2_address(argv[1], 0);
    ULONG depth = 0;
    unsigned rounds = 5;
    for (int at = 2; at < argc; at++) {
        if (strcmp(argv[at], "--depth") == 0 && at + 1 < argc)
            depth = static_cast<ULONG>(strtoul(argv[++at], NULL, 0));
        else if (strcmp(argv[at], "--rounds") == 0 && at + 1 < argc)
            rounds = static_cast<unsigned>(strtoul(argv[++at], NULL, 0));
        else
            FAIL("unknown argument %s", argv[at]);
    }

    IND2Adapter *adapter = NULL;
    HANDLE file = NULL;
    nd2_open_adapter(local, &adapter, &file);
    ND2_ADAPTER_INFO info;
    memset(&info, 0, sizeof info);
    info.InfoVersion = ND_VERSION_2;
    ULONG size = sizeof info;
    CHECK_HR(adapter->Query(&info, &size));
    ULONG cqDepth = depth ? depth : info.MaxCompletionQueueDepth;
    ULONG qpDepth = depth ? depth : std::min(info.MaxInitiatorQueueDepth, info.MaxReceiveQueueDepth);

    /* The verbs QP asks what the ND2 program asks: 1 SGE each way, no inline data (nd-shim
     * widens its own request to fill the ring slot rxe rounds to anyway: the same queue memory). */
    ibv_qp_cap cap;
    memset(&cap, 0, sizeof cap);
    cap.max_send_wr = cap.max_recv_wr = qpDepth;
    cap.max_send_sge = cap.max_recv_sge = 1;
    Verbs verbs(local);
    printf("depth: CQ %u, QP %u/%u; %u rounds after one untimed round of each\n", cqDepth, qpDepth, qpDepth, rounds);

    Steps nd2, direct;
    nd2_round(adapter, file, cqDepth, qpDepth, nd2);
    verbs.Round(static_cast<int>(cqDepth), cap, direct);
    nd2 = direct = Steps();
    for (unsigned r = 0; r < rounds; r++) {
        if (r % 2 == 0) {
            nd2_round(adapter, file, cqDepth, qpDepth, nd2);
            verbs.Round(static_cast<int>(cqDepth), cap, direct);
        } else {
            verbs.Round(static_cast<int>(cqDepth), cap, direct);
            nd2_round(adapter, file, cqDepth, qpDepth, nd2);
        }
    }
    report("CreateCompletionQueue/ibv_create_cq", nd2.cq, direct.cq);
    report("CreateQueuePair/ibv_create_qp+INIT", nd2.qp, direct.qp);
    report("Release both/ibv_destroy_*", nd2.release, direct.release);
    nd2_close_adapter(adapter, file);
    return 0;
}
