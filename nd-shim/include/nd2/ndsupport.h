/*
 * ndsupport.h: NetworkDirect's helper functions (nd-shim). libnd_shim is the one provider:
 * NdStartup/NdCleanup count their calls, NdFlushProviders has nothing to flush.
 *
 * NdQueryAddressList: the IPv4/IPv6 addresses of RDMA devices (rdma_cm-capable interfaces), as a
 * SOCKET_ADDRESS_LIST whose sockaddrs follow the list in the same buffer. A buffer too small (a
 * size probe with NULL) returns ND_BUFFER_OVERFLOW and sets *pcbAddressList to the size needed.
 * NdOpenAdapter opens the adapter that owns the address's IP (its port is ignored); an address of
 * no RDMA device is ND_INVALID_ADDRESS.
 */
#ifndef ND_SHIM_NDSUPPORT_H
#define ND_SHIM_NDSUPPORT_H

#include "ndspi.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ND_HELPER_API
#define ND_HELPER_API
#endif

#define ND_QUERY_EXCLUDE_EMULATOR_ADDRESSES 0x00000001
#define ND_QUERY_EXCLUDE_NDv1_ADDRESSES 0x00000002
#define ND_QUERY_EXCLUDE_NDv2_ADDRESSES 0x00000004

HRESULT ND_HELPER_API NdStartup(VOID);
HRESULT ND_HELPER_API NdCleanup(VOID);
VOID ND_HELPER_API NdFlushProviders(VOID);
HRESULT ND_HELPER_API NdQueryAddressList(DWORD flags, SOCKET_ADDRESS_LIST *pAddressList, SIZE_T *pcbAddressList);
HRESULT ND_HELPER_API NdResolveAddress(const struct sockaddr *pRemoteAddress, SIZE_T cbRemoteAddress,
                                       struct sockaddr *pLocalAddress, SIZE_T *pcbLocalAddress);
HRESULT ND_HELPER_API NdCheckAddress(const struct sockaddr *pAddress, SIZE_T cbAddress);
HRESULT ND_HELPER_API NdOpenAdapter(REFIID iid, const struct sockaddr *pAddress, SIZE_T cbAddress,
                                    VOID **ppIAdapter);

#ifdef __cplusplus
}
#endif

#endif /* ND_SHIM_NDSUPPORT_H */
