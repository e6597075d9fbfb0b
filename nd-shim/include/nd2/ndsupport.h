/*
 * ndsupport.h: NetworkDirect's helper functions (nd-shim). libnd_shim is the one provider:
 * NdStartup/NdCleanup count their calls, NdFlushProviders has nothing to flush.
 *
 * NdQueryAddressList: the IPv4/IPv6 addresses of RDMA devices (rdma_cm-capable interfaces), as a
 * SOCKET_ADDRESS_LIST whose sockaddrs follow the list in the same buffer. A buffer too small (a
 * size probe with NULL) returns ND_BUFFER_OVERFLOW and sets *pcbAddressList to the size needed.
 * NdOpenAdapter opens the adapter that owns the address's IP (its port is ignored); an address of
 * no RDMA device is ND_INVALID_ADDRESS.
 *
 * NdOpenV1Adapter: there is no ND1 provider, so every address is ND_INVALID_ADDRESS (Microsoft's
 * ndutil returns that when no ND1 provider owns the address); NdOpenAdapter with
 * IID_INDAdapter likewise.
 *
 * The provider the Windows way (NetworkDirectSPI.md, "Instantiating a NetworkDirect provider"):
 * libnd_shim exports DllGetClassObject and DllCanUnloadNow. DllGetClassObject(
 * CLSID_NdShimProvider, IID_IClassFactory, &pFactory) gives a class factory whose
 * CreateInstance(NULL, IID_IND2Provider, &pProvider) gives an IND2Provider (QueryAddressList,
 * ResolveAddress, OpenAdapter); IID_IND2Provider may also be asked of DllGetClassObject
 * directly. Another CLSID is CLASS_E_CLASSNOTAVAILABLE; ND1's IID_INDProvider is E_NOINTERFACE.
 * DllCanUnloadNow is S_FALSE while LockServer(TRUE) holds or any object of nd-shim's (factory,
 * provider, adapter, CQ, QP, ...) or any of its threads lives; S_OK once none does.
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
HRESULT ND_HELPER_API NdOpenV1Adapter(const struct sockaddr *pAddress, SIZE_T cbAddress, INDAdapter **ppIAdapter);

/* {1369fba5-7c7a-41c8-a9e1-e9a7a4627241}: nd-shim's provider class. */
DEFINE_GUID(CLSID_NdShimProvider, 0x1369fba5, 0x7c7a, 0x41c8, 0xa9, 0xe1, 0xe9, 0xa7, 0xa4, 0x62, 0x72, 0x41);
HRESULT STDMETHODCALLTYPE DllGetClassObject(REFCLSID rclsid, REFIID riid, LPVOID *ppv);
HRESULT STDMETHODCALLTYPE DllCanUnloadNow(void);

#ifdef __cplusplus
}
#endif

#endif /* ND_SHIM_NDSUPPORT_H */
