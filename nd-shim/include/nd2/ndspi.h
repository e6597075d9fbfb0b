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

/* {abf72719-b016-4a40-a6f7-622791a7044c} */
ND_SHIM_DECLARE_IID(IID_IND2Overlapped);
#undef INTERFACE
#define INTERFACE IND2Overlapped
DECLARE_INTERFACE_(IND2Overlapped, IUnknown)
{
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObj) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
    STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
};

/* {20cc445e-64a0-4cbb-aa75-f6a7251fda9e} */
ND_SHIM_DECLARE_IID(IID_IND2CompletionQueue);
#undef INTERFACE
#define INTERFACE IND2CompletionQueue
DECLARE_INTERFACE_(IND2CompletionQueue, IND2Overlapped)
{
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObj) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
    STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
    STDMETHOD(GetNotifyAffinity)(THIS_ USHORT *pGroup, KAFFINITY *pAffinity) PURE;
    STDMETHOD(Resize)(THIS_ ULONG queueDepth) PURE;
    STDMETHOD(Notify)(THIS_ ULONG type, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD_(ULONG, GetResults)(THIS_ ND2_RESULT results[], ULONG nResults) PURE;
};

/* {aabd67dc-459a-4db1-826b-56cfcc278883} */
ND_SHIM_DECLARE_IID(IID_IND2SharedReceiveQueue);
#undef INTERFACE
#define INTERFACE IND2SharedReceiveQueue
DECLARE_INTERFACE_(IND2SharedReceiveQueue, IND2Overlapped)
{
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObj) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
    STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
    STDMETHOD(GetNotifyAffinity)(THIS_ USHORT *pGroup, KAFFINITY *pAffinity) PURE;
    STDMETHOD(Modify)(THIS_ ULONG queueDepth, ULONG notifyThreshold) PURE;
    STDMETHOD(Notify)(THIS_ OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(Receive)(THIS_ VOID *requestContext, const ND2_SGE sge[], ULONG nSge) PURE;
};

/* {070fe1f5-0ab5-4361-88db-974ba704d4b9} */
ND_SHIM_DECLARE_IID(IID_IND2MemoryWindow);
#undef INTERFACE
#define INTERFACE IND2MemoryWindow
DECLARE_INTERFACE_(IND2MemoryWindow, IUnknown)
{
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObj) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
    STDMETHOD_(UINT32, GetRemoteToken)(THIS) PURE;
};

/* {55dfea2f-bc56-4982-8a45-0301be46c413} */
ND_SHIM_DECLARE_IID(IID_IND2MemoryRegion);
#undef INTERFACE
#define INTERFACE IND2MemoryRegion
DECLARE_INTERFACE_(IND2MemoryRegion, IND2Overlapped)
{
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObj) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
    STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
    STDMETHOD(Register)(THIS_ const VOID *pBuffer, SIZE_T cbBuffer, ULONG flags, OVERLAPPED *pOverlapped) PURE;
    STDMETHOD(Deregister)(THIS_ OVERLAPPED *pOverlapped) PURE;
    STDMETHOD_(UINT32, GetLocalToken)(THIS) PURE;
    STDMETHOD_(UINT32, GetRemoteToken)(THIS) PURE;
};

/* {eef2f332-b75d-4063-bce3-3a0bad2d02ce} */
ND_SHIM_DECLARE_IID(IID_IND2QueuePair);
#undef INTERFACE
#define INTERFACE IND2QueuePair
DECLARE_INTERFACE_(IND2QueuePair, IUnknown)
{
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObj) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
    STDMETHOD(Flush)(THIS) PURE;
    STDMETHOD(Send)(THIS_ VOID *requestContext, const ND2_SGE sge[], ULONG nSge, ULONG flags) PURE;
    STDMETHOD(Receive)(THIS_ VOID *requestContext, const ND2_SGE sge[], ULONG nSge) PURE;
    STDMETHOD(Bind)(THIS_ VOID *requestContext, IUnknown *pMemoryRegion, IUnknown *pMemoryWindow, const VOID *pBuffer, SIZE_T cbBuffer, ULONG flags) PURE;
    STDMETHOD(Invalidate)(THIS_ VOID *requestContext, IUnknown *pMemoryWindow, ULONG flags) PURE;
    STDMETHOD(Read)(THIS_ VOID *requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress, UINT32 remoteToken, ULONG flags) PURE;
    STDMETHOD(Write)(THIS_ VOID *requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress, UINT32 remoteToken, ULONG flags) PURE;
};

/* {7dd615c4-6b4c-4866-950c-f3b1d25a5302} */
ND_SHIM_DECLARE_IID(IID_IND2Connector);
#undef INTERFACE
#define INTERFACE IND2Connector
DECLARE_INTERFACE_(IND2Connector, IND2Overlapped)
{
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObj) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
    STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
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
ND_SHIM_DECLARE_IID(IID_IND2Listener);
#undef INTERFACE
#define INTERFACE IND2Listener
DECLARE_INTERFACE_(IND2Listener, IND2Overlapped)
{
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObj) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
    STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
    STDMETHOD(Bind)(THIS_ const struct sockaddr *pAddress, ULONG cbAddress) PURE;
    STDMETHOD(Listen)(THIS_ ULONG backlog) PURE;
    STDMETHOD(GetLocalAddress)(THIS_ struct sockaddr *pAddress, ULONG *pcbAddress) PURE;
    STDMETHOD(GetConnectionRequest)(THIS_ IUnknown *pConnector, OVERLAPPED *pOverlapped) PURE;
};

/* {d89c798c-4823-4d69-846c-dfdccff9e5f3} */
ND_SHIM_DECLARE_IID(IID_IND2Adapter);
#undef INTERFACE
#define INTERFACE IND2Adapter
DECLARE_INTERFACE_(IND2Adapter, IUnknown)
{
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObj) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
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
ND_SHIM_DECLARE_IID(IID_IND2Provider);
#undef INTERFACE
#define INTERFACE IND2Provider
DECLARE_INTERFACE_(IND2Provider, IUnknown)
{
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObj) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
    STDMETHOD(QueryAddressList)(THIS_ SOCKET_ADDRESS_LIST *pAddressList, ULONG *pcbAddressList) PURE;
    STDMETHOD(ResolveAddress)(THIS_ const struct sockaddr *pAddress, ULONG cbAddress, UINT64 *pAdapterId) PURE;
    STDMETHOD(OpenAdapter)(THIS_ REFIID iid, UINT64 adapterId, VOID **ppAdapter) PURE;
};

#undef INTERFACE

#endif /* ND_SHIM_NDSPI_H */
