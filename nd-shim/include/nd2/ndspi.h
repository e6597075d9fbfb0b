/*
 * ndspi.h: NetworkDirect's ND2 interfaces (nd-shim), every method in the documented vtable
 * order, IUnknown's three first. Written from the documented interface (IND2*.md of
 * microsoft/NetworkDirect); see ndwinbase.h for how the same declaration serves C++ (abstract
 * classes whose first word is the method table) and C (struct with lpVtbl).
 *
 * Objects come from NdOpenAdapter (ndsupport.h) and the adapter's Create* methods; each starts
 * with one reference and is freed by its last Release. Overlapped methods either fail inline or
 * return ND_PENDING and complete exactly once through the OVERLAPPED: Internal = status,
 * InternalHigh = bytes, hEvent signalled, and a packet on the completion port of the object's
 * overlapped file unless (hEvent & 1). docs/porting-nd2.md says what differs from Windows.
 */
#ifndef ND_SHIM_NDSPI_H
#define ND_SHIM_NDSPI_H

#include "ndwinbase.h"
#include "ndstatus.h"
#include "nddef.h"

/* IND2Overlapped's methods (IUnknown's first, see ndwinbase.h) for each interface that derives
 * from it. */
#define ND_SHIM_IND2OVERLAPPED_METHODS              \
    ND_SHIM_IUNKNOWN_METHODS;                       \
    STDMETHOD(CancelOverlappedRequests)(THIS) PURE; \
    STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE

/* {abf72719-b016-4a40-a6f7-622791a7044c} */
DEFINE_GUID(IID_IND2Overlapped, 0xabf72719, 0xb016, 0x4a40, 0xa6, 0xf7, 0x62, 0x27, 0x91, 0xa7, 0x04, 0x4c);
#undef INTERFACE
#define INTERFACE IND2Overlapped
DECLARE_INTERFACE_(IND2Overlapped, IUnknown)
{
    ND_SHIM_IND2OVERLAPPED_METHODS;
};

/* {20cc445e-64a0-4cbb-aa75-f6a7251fda9e} */
DEFINE_GUID(IID_IND2CompletionQueue, 0x20cc445e, 0x64a0, 0x4cbb, 0xaa, 0x75, 0xf6, 0xa7, 0x25, 0x1f, 0xda, 0x9e);
#undef INTERFACE
#define INTERFACE IND2CompletionQueue
DECLARE_INTERFACE_(IND2CompletionQueue, IND2Overlapped)
{
    ND_SHIM_IND2OVERLAPPED_METHODS;
    STDMETHOD(GetNotifyAffinity)(THIS_ USHORT *pGroup, KAFFINITY *pAffinity) PURE;
    STDMETHOD(Resize)(THIS_ ULONG queueDepth) PURE;
    STDMETHOD(Notify)(THIS_ ULONG type, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD_(ULONG, GetResults)(THIS_ ND2_RESULT results[], ULONG nResults) PURE;
};

/* {aabd67dc-459a-4db1-826b-56cfcc278883} */
DEFINE_GUID(IID_IND2SharedReceiveQueue, 0xaabd67dc, 0x459a, 0x4db1, 0x82, 0x6b, 0x56, 0xcf, 0xcc, 0x27, 0x88, 0x83);
#undef INTERFACE
#define INTERFACE IND2SharedReceiveQueue
DECLARE_INTERFACE_(IND2SharedReceiveQueue, IND2Overlapped)
{
    ND_SHIM_IND2OVERLAPPED_METHODS;
    STDMETHOD(GetNotifyAffinity)(THIS_ USHORT *pGroup, KAFFINITY *pAffinity) PURE;
    STDMETHOD(Modify)(THIS_ ULONG queueDepth, ULONG notifyThreshold) PURE;
    STDMETHOD(Notify)(THIS_ OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(Receive)(THIS_ VOID *requestContext, const ND2_SGE sge[], ULONG nSge) PURE;
};

/* {070fe1f5-0ab5-4361-88db-974ba704d4b9} */
DEFINE_GUID(IID_IND2MemoryWindow, 0x070fe1f5, 0x0ab5, 0x4361, 0x88, 0xdb, 0x97, 0x4b, 0xa7, 0x04, 0xd4, 0xb9);
#undef INTERFACE
#define INTERFACE IND2MemoryWindow
DECLARE_INTERFACE_(IND2MemoryWindow, IUnknown)
{
    ND_SHIM_IUNKNOWN_METHODS;
    STDMETHOD_(UINT32, GetRemoteToken)(THIS) PURE;
};

/* {55dfea2f-bc56-4982-8a45-0301be46c413} */
DEFINE_GUID(IID_IND2MemoryRegion, 0x55dfea2f, 0xbc56, 0x4982, 0x8a, 0x45, 0x03, 0x01, 0xbe, 0x46, 0xc4, 0x13);
#undef INTERFACE
#define INTERFACE IND2MemoryRegion
DECLARE_INTERFACE_(IND2MemoryRegion, IND2Overlapped)
{
    ND_SHIM_IND2OVERLAPPED_METHODS;
    STDMETHOD(Register)(THIS_ const VOID *pBuffer, SIZE_T cbBuffer, ULONG flags, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(Deregister)(THIS_ OVERLAPPED *pOverlapped) PURE;
    STDMETHOD_(UINT32, GetLocalToken)(THIS) PURE;
    STDMETHOD_(UINT32, GetRemoteToken)(THIS) PURE;
};

/* {eef2f332-b75d-4063-bce3-3a0bad2d02ce} */
DEFINE_GUID(IID_IND2QueuePair, 0xeef2f332, 0xb75d, 0x4063, 0xbc, 0xe3, 0x3a, 0x0b, 0xad, 0x2d, 0x02, 0xce);
#undef INTERFACE
#define INTERFACE IND2QueuePair
DECLARE_INTERFACE_(IND2QueuePair, IUnknown)
{
    ND_SHIM_IUNKNOWN_METHODS;
    STDMETHOD(Flush)(THIS) PURE;
    STDMETHOD(Send)(THIS_ VOID *requestContext, const ND2_SGE sge[], ULONG nSge, ULONG flags) PURE;
    STDMETHOD(Receive)(THIS_ VOID *requestContext, const ND2_SGE sge[], ULONG nSge) PURE;
    STDMETHOD(Bind)(THIS_ VOID *requestContext, IUnknown *pMemoryRegion, IUnknown *pMemoryWindow, const VOID *pBuffer, SIZE_T cbBuffer, ULONG flags) PURE;
    STDMETHOD(Invalidate)(THIS_ VOID *requestContext, IUnknown *pMemoryWindow, ULONG flags) PURE;
    STDMETHOD(Read)(THIS_ VOID *requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress, UINT32 remoteToken, ULONG flags) PURE;
    STDMETHOD(Write)(THIS_ VOID *requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress, UINT32 remoteToken, ULONG flags) PURE;
};

/* {7dd615c4-6b4c-4866-950c-f3b1d25a5302} */
DEFINE_GUID(IID_IND2Connector, 0x7dd615c4, 0x6b4c, 0x4866, 0x95, 0x0c, 0xf3, 0xb1, 0xd2, 0x5a, 0x53, 0x02);
#undef INTERFACE
#define INTERFACE IND2Connector
DECLARE_INTERFACE_(IND2Connector, IND2Overlapped)
{
    ND_SHIM_IND2OVERLAPPED_METHODS;
    STDMETHOD(Bind)(THIS_ const struct sockaddr *pAddress, ULONG cbAddress) PURE;
    STDMETHOD(Connect)(THIS_ IUnknown *pQueuePair, const struct sockaddr *pDestAddress, ULONG cbDestAddress, ULONG inboundReadLimit, ULONG outboundReadLimit, const VOID *pPrivateData, ULONG cbPrivateData, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(CompleteConnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(Accept)(THIS_ IUnknown *pQueuePair, ULONG inboundReadLimit, ULONG outboundReadLimit, const VOID *pPrivateData, ULONG cbPrivateData, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(Reject)(THIS_ const VOID *pPrivateData, ULONG cbPrivateData) PURE;
    STDMETHOD(GetReadLimits)(THIS_ ULONG *pInboundReadLimit, ULONG *pOutboundReadLimit) PURE;
    STDMETHOD(GetPrivateData)(THIS_ VOID *pPrivateData, ULONG *pcbPrivateData) PURE;
    STDMETHOD(GetLocalAddress)(THIS_ struct sockaddr *pAddress, ULONG *pcbAddress) PURE;
    STDMETHOD(GetPeerAddress)(THIS_ struct sockaddr *pAddress, ULONG *pcbAddress) PURE;
    STDMETHOD(NotifyDisconnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(Disconnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
};

/* {65d23d83-3a57-4e02-86a4-350165c2d130} */
DEFINE_GUID(IID_IND2Listener, 0x65d23d83, 0x3a57, 0x4e02, 0x86, 0xa4, 0x35, 0x01, 0x65, 0xc2, 0xd1, 0x30);
#undef INTERFACE
#define INTERFACE IND2Listener
DECLARE_INTERFACE_(IND2Listener, IND2Overlapped)
{
    ND_SHIM_IND2OVERLAPPED_METHODS;
    STDMETHOD(Bind)(THIS_ const struct sockaddr *pAddress, ULONG cbAddress) PURE;
    STDMETHOD(Listen)(THIS_ ULONG backlog) PURE;
    STDMETHOD(GetLocalAddress)(THIS_ struct sockaddr *pAddress, ULONG *pcbAddress) PURE;
    STDMETHOD(GetConnectionRequest)(THIS_ IUnknown *pConnector, OVERLAPPED *pOverlapped) PURE;
};

/* {d89c798c-4823-4d69-846c-dfdccff9e5f3} */
DEFINE_GUID(IID_IND2Adapter, 0xd89c798c, 0x4823, 0x4d69, 0x84, 0x6c, 0xdf, 0xdc, 0xcf, 0xf9, 0xe5, 0xf3);
#undef INTERFACE
#define INTERFACE IND2Adapter
DECLARE_INTERFACE_(IND2Adapter, IUnknown)
{
    ND_SHIM_IUNKNOWN_METHODS;
    STDMETHOD(CreateOverlappedFile)(THIS_ HANDLE *phOverlappedFile) PURE;
    STDMETHOD(Query)(THIS_ ND2_ADAPTER_INFO *pInfo, ULONG *pcbInfo) PURE;
    STDMETHOD(QueryAddressList)(THIS_ SOCKET_ADDRESS_LIST *pAddressList, ULONG *pcbAddressList) PURE;
    STDMETHOD(CreateCompletionQueue)(THIS_ REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth, USHORT group, KAFFINITY affinity, VOID **ppCompletionQueue) PURE;
    STDMETHOD(CreateMemoryRegion)(THIS_ REFIID iid, HANDLE hOverlappedFile, VOID **ppMemoryRegion) PURE;
    STDMETHOD(CreateMemoryWindow)(THIS_ REFIID iid, VOID **ppMemoryWindow) PURE;
    STDMETHOD(CreateSharedReceiveQueue)(THIS_ REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth, ULONG maxRequestSge, ULONG notifyThreshold, USHORT group, KAFFINITY affinity, VOID **ppSharedReceiveQueue) PURE;
    STDMETHOD(CreateQueuePair)(THIS_ REFIID iid, IUnknown *pReceiveCompletionQueue, IUnknown *pInitiatorCompletionQueue, VOID *context, ULONG receiveQueueDepth, ULONG initiatorQueueDepth, ULONG maxReceiveRequestSge, ULONG maxInitiatorRequestSge, ULONG inlineDataSize, VOID **ppQueuePair) PURE;
    STDMETHOD(CreateQueuePairWithSrq)(THIS_ REFIID iid, IUnknown *pReceiveCompletionQueue, IUnknown *pInitiatorCompletionQueue, IUnknown *pSharedReceiveQueue, VOID *context, ULONG initiatorQueueDepth, ULONG maxInitiatorRequestSge, ULONG inlineDataSize, VOID **ppQueuePair) PURE;
    STDMETHOD(CreateConnector)(THIS_ REFIID iid, HANDLE hOverlappedFile, VOID **ppConnector) PURE;
    STDMETHOD(CreateListener)(THIS_ REFIID iid, HANDLE hOverlappedFile, VOID **ppListener) PURE;
};

/* {49eae6c1-76c4-46d0-8003-5c2eaa2c9a8e} */
DEFINE_GUID(IID_IND2Provider, 0x49eae6c1, 0x76c4, 0x46d0, 0x80, 0x03, 0x5c, 0x2e, 0xaa, 0x2c, 0x9a, 0x8e);
#undef INTERFACE
#define INTERFACE IND2Provider
DECLARE_INTERFACE_(IND2Provider, IUnknown)
{
    ND_SHIM_IUNKNOWN_METHODS;
    STDMETHOD(QueryAddressList)(THIS_ SOCKET_ADDRESS_LIST *pAddressList, ULONG *pcbAddressList) PURE;
    STDMETHOD(ResolveAddress)(THIS_ const struct sockaddr *pAddress, ULONG cbAddress, UINT64 *pAdapterId) PURE;
    STDMETHOD(OpenAdapter)(THIS_ REFIID iid, UINT64 adapterId, VOID **ppAdapter) PURE;
};

#undef INTERFACE

/* ======== ND1 (NetworkDirect v1), declared so that programs with an ND1 fallback compile ========
 * libnd_shim has no ND1 provider: NdOpenV1Adapter, and NdOpenAdapter with IID_INDAdapter, return
 * ND_INVALID_ADDRESS (no ND1 provider owns the address: what Microsoft's ndutil returns when no
 * v1 provider is installed), and QueryInterface for an ND1 IID is E_NOINTERFACE (but
 * IID_INDMemoryWindow, whose value is IID_IND2MemoryWindow's). Sizes on LP64:
 * sizeof(ND_ADAPTER_INFO1) == 128, sizeof(ND_RESULT) == 16, sizeof(ND_SGE) == 24,
 * sizeof(ND_MW_DESCRIPTOR) == 20 (packed). */
DECLARE_HANDLE(ND_MR_HANDLE);

typedef struct _ND_ADAPTER_INFO1 {
    UINT32 VendorId;
    UINT32 DeviceId;
    SIZE_T MaxInboundSge;
    SIZE_T MaxInboundRequests;
    SIZE_T MaxInboundLength;
    SIZE_T MaxOutboundSge;
    SIZE_T MaxOutboundRequests;
    SIZE_T MaxOutboundLength;
    SIZE_T MaxInlineData;
    SIZE_T MaxInboundReadLimit;
    SIZE_T MaxOutboundReadLimit;
    SIZE_T MaxCqEntries;
    SIZE_T MaxRegistrationSize;
    SIZE_T MaxWindowSize;
    SIZE_T LargeRequestThreshold;
    SIZE_T MaxCallerData;
    SIZE_T MaxCalleeData;
} ND_ADAPTER_INFO1;
#ifndef ND_ADAPTER_INFO
#define ND_ADAPTER_INFO ND_ADAPTER_INFO1
#endif

typedef struct _ND_RESULT {
    HRESULT Status;
    SIZE_T BytesTransferred;
} ND_RESULT;

/* Base, Length and Token in network byte order. */
typedef struct __attribute__((packed)) _ND_MW_DESCRIPTOR {
    UINT64 Base;
    UINT64 Length;
    UINT32 Token;
} ND_MW_DESCRIPTOR;

typedef struct _ND_SGE {
    VOID *pAddr;
    SIZE_T Length;
    ND_MR_HANDLE hMr;
} ND_SGE;

#ifdef __cplusplus
struct INDCompletionQueue;
struct INDEndpoint;
struct INDConnector;
struct INDListen;
struct INDMemoryWindow;
struct INDAdapter;
#else
typedef struct INDCompletionQueue INDCompletionQueue;
typedef struct INDEndpoint INDEndpoint;
typedef struct INDConnector INDConnector;
typedef struct INDListen INDListen;
typedef struct INDMemoryWindow INDMemoryWindow;
typedef struct INDAdapter INDAdapter;
#endif

/* ND1's overlapped base: GetOverlappedResult also returns the byte count. */
#define ND_SHIM_INDOVERLAPPED_METHODS               \
    ND_SHIM_IUNKNOWN_METHODS;                       \
    STDMETHOD(CancelOverlappedRequests)(THIS) PURE; \
    STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, SIZE_T *pNumberOfBytesTransferred, BOOL bWait) PURE

/* {c859e15e-75e2-4fe3-8d6d-0dff36f02442} */
DEFINE_GUID(IID_INDOverlapped, 0xc859e15e, 0x75e2, 0x4fe3, 0x8d, 0x6d, 0x0d, 0xff, 0x36, 0xf0, 0x24, 0x42);
#undef INTERFACE
#define INTERFACE INDOverlapped
DECLARE_INTERFACE_(INDOverlapped, IUnknown)
{
    ND_SHIM_INDOVERLAPPED_METHODS;
};

/* {1245a633-2a32-473a-830c-e05d1f869d02} */
DEFINE_GUID(IID_INDCompletionQueue, 0x1245a633, 0x2a32, 0x473a, 0x83, 0x0c, 0xe0, 0x5d, 0x1f, 0x86, 0x9d, 0x02);
#undef INTERFACE
#define INTERFACE INDCompletionQueue
DECLARE_INTERFACE_(INDCompletionQueue, INDOverlapped)
{
    ND_SHIM_INDOVERLAPPED_METHODS;
    STDMETHOD(Resize)(THIS_ SIZE_T nEntries) PURE;
    STDMETHOD(Notify)(THIS_ DWORD Type, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD_(SIZE_T, GetResults)(THIS_ ND_RESULT *pResults[], SIZE_T nResults) PURE;
};

/* {070fe1f5-0ab5-4361-88db-974ba704d4b9}: the same value as IID_IND2MemoryWindow. */
DEFINE_GUID(IID_INDMemoryWindow, 0x070fe1f5, 0x0ab5, 0x4361, 0x88, 0xdb, 0x97, 0x4b, 0xa7, 0x04, 0xd4, 0xb9);
#undef INTERFACE
#define INTERFACE INDMemoryWindow
DECLARE_INTERFACE_(INDMemoryWindow, IUnknown)
{
    ND_SHIM_IUNKNOWN_METHODS;
};

/* {dbd00eab-b679-44a9-bd65-e82f3de12d1a} */
DEFINE_GUID(IID_INDEndpoint, 0xdbd00eab, 0xb679, 0x44a9, 0xbd, 0x65, 0xe8, 0x2f, 0x3d, 0xe1, 0x2d, 0x1a);
#undef INTERFACE
#define INTERFACE INDEndpoint
DECLARE_INTERFACE_(INDEndpoint, IUnknown)
{
    ND_SHIM_IUNKNOWN_METHODS;
    STDMETHOD(Flush)(THIS) PURE;
    STDMETHOD_(void, StartRequestBatch)(THIS) PURE;
    STDMETHOD_(void, SubmitRequestBatch)(THIS) PURE;
    STDMETHOD(Send)(THIS_ ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge, DWORD Flags) PURE;
    /* Offset is Microsoft's ULONGLONG, spelled as its type so that ND_SHIM_NO_WIN32 needs none. */
    STDMETHOD(SendAndInvalidate)(THIS_ ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge, const ND_MW_DESCRIPTOR *pRemoteMwDescriptor, DWORD Flags) PURE;
    STDMETHOD(Receive)(THIS_ ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge) PURE;
    STDMETHOD(Bind)(THIS_ ND_RESULT *pResult, ND_MR_HANDLE hMr, INDMemoryWindow *pMw, const void *pBuffer, SIZE_T BufferSize, DWORD Flags, ND_MW_DESCRIPTOR *pMwDescriptor) PURE;
    STDMETHOD(Invalidate)(THIS_ ND_RESULT *pResult, INDMemoryWindow *pMw, DWORD Flags) PURE;
    STDMETHOD(Read)(THIS_ ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge, const ND_MW_DESCRIPTOR *pRemoteMwDescriptor, unsigned long long Offset, DWORD Flags) PURE;
    STDMETHOD(Write)(THIS_ ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge, const ND_MW_DESCRIPTOR *pRemoteMwDescriptor, unsigned long long Offset, DWORD Flags) PURE;
};

/* {1bcaf2d1-e274-4aeb-ac57-cd5d4376e0b7} */
DEFINE_GUID(IID_INDConnector, 0x1bcaf2d1, 0xe274, 0x4aeb, 0xac, 0x57, 0xcd, 0x5d, 0x43, 0x76, 0xe0, 0xb7);
#undef INTERFACE
#define INTERFACE INDConnector
DECLARE_INTERFACE_(INDConnector, INDOverlapped)
{
    ND_SHIM_INDOVERLAPPED_METHODS;
    STDMETHOD(CreateEndpoint)(THIS_ INDCompletionQueue *pInboundCq, INDCompletionQueue *pOutboundCq, SIZE_T nInboundEntries, SIZE_T nOutboundEntries, SIZE_T nInboundSge, SIZE_T nOutboundSge, SIZE_T InboundReadLimit, SIZE_T OutboundReadLimit, SIZE_T *pMaxInlineData, INDEndpoint **ppEndpoint) PURE;
    STDMETHOD(Connect)(THIS_ INDEndpoint *pEndpoint, const struct sockaddr *pAddress, SIZE_T AddressLength, INT Protocol, USHORT LocalPort, const void *pPrivateData, SIZE_T PrivateDataLength, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(CompleteConnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(Accept)(THIS_ INDEndpoint *pEndpoint, const void *pPrivateData, SIZE_T PrivateDataLength, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(Reject)(THIS_ const void *pPrivateData, SIZE_T PrivateDataLength) PURE;
    STDMETHOD(GetConnectionData)(THIS_ SIZE_T *pInboundReadLimit, SIZE_T *pOutboundReadLimit, void *pPrivateData, SIZE_T *pPrivateDataLength) PURE;
    STDMETHOD(GetLocalAddress)(THIS_ struct sockaddr *pAddress, SIZE_T *pAddressLength) PURE;
    STDMETHOD(GetPeerAddress)(THIS_ struct sockaddr *pAddress, SIZE_T *pAddressLength) PURE;
    STDMETHOD(NotifyDisconnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(Disconnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
};

/* {bb902588-ba3f-4441-9fe1-3b6795e4e668} */
DEFINE_GUID(IID_INDListen, 0xbb902588, 0xba3f, 0x4441, 0x9f, 0xe1, 0x3b, 0x67, 0x95, 0xe4, 0xe6, 0x68);
#undef INTERFACE
#define INTERFACE INDListen
DECLARE_INTERFACE_(INDListen, INDOverlapped)
{
    ND_SHIM_INDOVERLAPPED_METHODS;
    STDMETHOD(GetConnectionRequest)(THIS_ INDConnector *pConnector, OVERLAPPED *pOverlapped) PURE;
};

/* {a023c5a0-5b73-43bc-8d20-33aa07e9510f} */
DEFINE_GUID(IID_INDAdapter, 0xa023c5a0, 0x5b73, 0x43bc, 0x8d, 0x20, 0x33, 0xaa, 0x07, 0xe9, 0x51, 0x0f);
#undef INTERFACE
#define INTERFACE INDAdapter
DECLARE_INTERFACE_(INDAdapter, INDOverlapped)
{
    ND_SHIM_INDOVERLAPPED_METHODS;
    STDMETHOD_(HANDLE, GetFileHandle)(THIS) PURE;
    STDMETHOD(Query)(THIS_ DWORD VersionRequested, ND_ADAPTER_INFO1 *pInfo, SIZE_T *pBufferSize) PURE;
    STDMETHOD(Control)(THIS_ DWORD IoControlCode, const void *pInBuffer, SIZE_T InBufferSize, void *pOutBuffer, SIZE_T OutBufferSize, SIZE_T *pBytesReturned, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(CreateCompletionQueue)(THIS_ SIZE_T nEntries, INDCompletionQueue **ppCq) PURE;
    STDMETHOD(RegisterMemory)(THIS_ const void *pBuffer, SIZE_T BufferSize, OVERLAPPED *pOverlapped, ND_MR_HANDLE *phMr) PURE;
    STDMETHOD(DeregisterMemory)(THIS_ ND_MR_HANDLE hMr, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(CreateMemoryWindow)(THIS_ ND_RESULT *pInvalidateResult, INDMemoryWindow **ppMw) PURE;
    STDMETHOD(CreateConnector)(THIS_ INDConnector **ppConnector) PURE;
    STDMETHOD(Listen)(THIS_ SIZE_T Backlog, INT Protocol, USHORT Port, USHORT *pAssignedPort, INDListen **ppListen) PURE;
};

/* {0c5dd316-5fdf-47e6-b2d0-2a6eda8d39dd} */
DEFINE_GUID(IID_INDProvider, 0x0c5dd316, 0x5fdf, 0x47e6, 0xb2, 0xd0, 0x2a, 0x6e, 0xda, 0x8d, 0x39, 0xdd);
#undef INTERFACE
#define INTERFACE INDProvider
DECLARE_INTERFACE_(INDProvider, IUnknown)
{
    ND_SHIM_IUNKNOWN_METHODS;
    STDMETHOD(QueryAddressList)(THIS_ SOCKET_ADDRESS_LIST *pAddressList, SIZE_T *pBufferSize) PURE;
    STDMETHOD(OpenAdapter)(THIS_ const struct sockaddr *pAddress, SIZE_T AddressLength, INDAdapter **ppAdapter) PURE;
};

#undef INTERFACE
#undef ND_SHIM_IND2OVERLAPPED_METHODS
#undef ND_SHIM_INDOVERLAPPED_METHODS

#endif /* ND_SHIM_NDSPI_H */
