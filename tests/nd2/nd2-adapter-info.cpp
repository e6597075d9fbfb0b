/*
 * nd2-adapter-info: lists the RDMA addresses (NdQueryAddressList, size probe first) and, for
 * each, opens its adapter and prints ND2_ADAPTER_INFO. With --expect IP (IPv4 or IPv6, repeatable),
 * fails unless each IP is listed, its adapter reports the documented private data limits and lists
 * the IP among its own addresses.
 */
#include "nd2-common.h"

#include <vector>

/* Whether two sockaddrs carry the same IPv4 or IPv6 address (ports aside). */
static bool same_ip(const sockaddr *a, const sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET)
        return reinterpret_cast<const sockaddr_in *>(a)->sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in *>(b)->sin_addr.s_addr;
    return a->sa_family == AF_INET6 && memcmp(&reinterpret_cast<const sockaddr_in6 *>(a)->sin6_addr,
                                              &reinterpret_cast<const sockaddr_in6 *>(b)->sin6_addr,
                                              sizeof(in6_addr)) == 0;
}

static void show_adapter(const sockaddr *addr, SIZE_T len, bool check)
{
    IND2Adapter *adapter = NULL;
    CHECK_HR(NdOpenAdapter(IID_IND2Adapter, addr, len, reinterpret_cast<void **>(&adapter)));

    ULONG size = 0;
    EXPECT(adapter->Query(NULL, &size) == ND_BUFFER_OVERFLOW);
    EXPECT(size == sizeof(ND2_ADAPTER_INFO));
    ND2_ADAPTER_INFO info;
    memset(&info, 0, sizeof info);
    info.InfoVersion = ND_VERSION_2;
    CHECK_HR(adapter->Query(&info, &size));

    printf("  AdapterId              0x%016llx\n", (unsigned long long)info.AdapterId);
    printf("  VendorId/DeviceId      0x%04x/0x%04x\n", info.VendorId, info.DeviceId);
    printf("  MaxRegistrationSize    %zu\n", (size_t)info.MaxRegistrationSize);
    printf("  MaxWindowSize          %zu\n", (size_t)info.MaxWindowSize);
    printf("  MaxInitiatorSge        %u\n", info.MaxInitiatorSge);
    printf("  MaxReceiveSge          %u\n", info.MaxReceiveSge);
    printf("  MaxReadSge             %u\n", info.MaxReadSge);
    printf("  MaxTransferLength      %u\n", info.MaxTransferLength);
    printf("  MaxInlineDataSize      %u\n", info.MaxInlineDataSize);
    printf("  MaxInboundReadLimit    %u\n", info.MaxInboundReadLimit);
    printf("  MaxOutboundReadLimit   %u\n", info.MaxOutboundReadLimit);
    printf("  MaxReceiveQueueDepth   %u\n", info.MaxReceiveQueueDepth);
    printf("  MaxInitiatorQueueDepth %u\n", info.MaxInitiatorQueueDepth);
    printf("  MaxSharedReceiveQueueDepth %u\n", info.MaxSharedReceiveQueueDepth);
    printf("  MaxCompletionQueueDepth %u\n", info.MaxCompletionQueueDepth);
    printf("  MaxCallerData          %u\n", info.MaxCallerData);
    printf("  MaxCalleeData          %u\n", info.MaxCalleeData);
    printf("  AdapterFlags           0x%08x\n", info.AdapterFlags);

    if (check) {
        EXPECT(info.MaxCallerData == 56);
        EXPECT(info.MaxCalleeData == 196);
        EXPECT(info.MaxInitiatorSge >= 1 && info.MaxReceiveSge >= 1);
        EXPECT(info.MaxCompletionQueueDepth >= 1);

        /* IUnknown: the same object under each of its IIDs, E_NOINTERFACE for another's. */
        void *same = NULL;
        CHECK_HR(adapter->QueryInterface(IID_IUnknown, &same));
        EXPECT(same == adapter);
        EXPECT(adapter->Release() == 1);
        void *other = reinterpret_cast<void *>(1);
        EXPECT(adapter->QueryInterface(IID_IND2Connector, &other) == E_NOINTERFACE);
        EXPECT(other == NULL);

        /* The adapter's own address list: its address, after a size probe. */
        ULONG listSize = 0;
        EXPECT(adapter->QueryAddressList(NULL, &listSize) == ND_BUFFER_OVERFLOW);
        std::vector<char> buf(listSize);
        SOCKET_ADDRESS_LIST *list = reinterpret_cast<SOCKET_ADDRESS_LIST *>(buf.data());
        CHECK_HR(adapter->QueryAddressList(list, &listSize));
        bool listed = false;
        for (INT i = 0; i < list->iAddressCount; i++)
            listed = listed || same_ip(list->Address[i].lpSockaddr, addr);
        EXPECT(listed);
    }
    EXPECT(adapter->Release() == 0);
}

int main(int argc, char **argv)
{
    std::vector<const char *> expected;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc)
            expected.push_back(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--expect IPv4|IPv6]...\n", argv[0]);
            return 2;
        }
    }
    static_assert(sizeof(ND2_ADAPTER_INFO) == 96, "ND2_ADAPTER_INFO is 96 bytes on LP64");
    static_assert(sizeof(ND2_RESULT) == 32, "ND2_RESULT is 32 bytes on LP64");
    static_assert(sizeof(ND2_SGE) == 16, "ND2_SGE is 16 bytes on LP64");

    CHECK_HR(NdStartup());
    SIZE_T size = 0;
    EXPECT(NdQueryAddressList(0, NULL, &size) == ND_BUFFER_OVERFLOW);
    EXPECT(size >= sizeof(SOCKET_ADDRESS_LIST));
    std::vector<char> buf(size);
    SOCKET_ADDRESS_LIST *list = reinterpret_cast<SOCKET_ADDRESS_LIST *>(buf.data());
    CHECK_HR(NdQueryAddressList(0, list, &size));

    std::vector<bool> seen(expected.size(), false);
    for (INT i = 0; i < list->iAddressCount; i++) {
        const SOCKET_ADDRESS &a = list->Address[i];
        char text[INET6_ADDRSTRLEN] = "?";
        bool check = false;
        if (a.lpSockaddr->sa_family == AF_INET) {
            const sockaddr_in *sin = reinterpret_cast<const sockaddr_in *>(a.lpSockaddr);
            inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text);
        } else if (a.lpSockaddr->sa_family == AF_INET6) {
            inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(a.lpSockaddr)->sin6_addr, text, sizeof text);
        }
        for (size_t e = 0; e < expected.size(); e++)
            if (strcmp(expected[e], text) == 0)
                seen[e] = check = true;
        printf("%s\n", text);
        show_adapter(a.lpSockaddr, a.iSockaddrLength, check);
    }
    for (size_t e = 0; e < expected.size(); e++) {
        if (!seen[e]) {
            fprintf(stderr, "%s is not in NdQueryAddressList\n", expected[e]);
            return 1;
        }
    }
    CHECK_HR(NdCleanup());
    return 0;
}
