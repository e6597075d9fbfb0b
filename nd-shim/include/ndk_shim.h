/*
 * ndk_shim.h: NDKPI-shaped connector semantics on Linux rdma_cm (nd-shim's NDK face).
 * Link with -lnd_shim (target/release/libnd_shim.so or .a).
 *
 * Objects. Every object is a struct whose first member points to a const dispatch table of
 * function pointers, as in NDKPI: call `obj->Dispatch->NdkSomething(obj, ...)`. The adapter comes
 * from NdkOpenAdapter; every other object from its adapter's Create entries, except the
 * connectors a listener hands to its connect-event callback. The caller owns each object it
 * receives and frees it with the table's Close entry (children before their adapter). A handle
 * must not be used after its Close. A NULL handle, or a handle of another kind, is
 * STATUS_INVALID_HANDLE; a NULL required pointer argument is STATUS_INVALID_PARAMETER.
 *
 * Windows types: NTSTATUS = int32_t, ULONG = uint32_t, PSOCKADDR = struct sockaddr *,
 * PVOID = void *. Addresses are struct sockaddr_in / sockaddr_in6 with their full length; a
 * shorter length or another family is STATUS_INVALID_ADDRESS.
 *
 * Completion. A call that returns STATUS_PENDING finishes later through its
 * RequestCompletion(RequestContext, status), exactly once. RequestCompletion is called only
 * after STATUS_PENDING; it may run before the call returns, and it runs on the shim's event
 * thread (or inside NdkProcessEvents for a polled adapter). Any other return value is the
 * call's final result and RequestCompletion is never called for it.
 *
 * Which failures come inline and which through RequestCompletion:
 *   inline     - argument checks; private data over the limit (STATUS_INVALID_BUFFER_SIZE,
 *                checked before anything else: the connector is unchanged and usable);
 *                state errors (STATUS_CONNECTION_ACTIVE, STATUS_CONNECTION_INVALID); address
 *                errors (STATUS_INVALID_ADDRESS, STATUS_SHARING_VIOLATION,
 *                STATUS_TOO_MANY_ADDRESSES, STATUS_ADDRESS_ALREADY_EXISTS on a shared
 *                endpoint's duplicate 4-tuple); STATUS_NETWORK_UNREACHABLE when there is no
 *                route at all; STATUS_CONNECTION_ABORTED from NdkAccept when the abandoned
 *                request is found before the REP goes out; everything NdkCompleteConnect,
 *                NdkReject (STATUS_CONNECTION_ABORTED when the peer abandoned first), NdkListen
 *                and the getters report (they finish inline, never calling RequestCompletion).
 *   completion - what the peer or the network decides after the call started:
 *                STATUS_CONNECTION_REFUSED (no listener, or the listener rejected),
 *                STATUS_HOST_UNREACHABLE (no neighbour answers), STATUS_IO_TIMEOUT (REQ
 *                retries exhausted), NdkAccept's STATUS_CONNECTION_REFUSED (the active side
 *                rejected after the REP) and STATUS_CONNECTION_ABORTED (the REP reached an
 *                abandoned id), STATUS_CANCELLED after NdkCancelConnector or close.
 *   docs/nd-conformance.md maps each documented code to the rig case that produces it.
 *   A request that completed before the call returned (e.g. NdkDisconnect after the peer
 *   disconnected) reports its final code inline.
 *
 * Short buffers (NdkGetConnectionData, the address getters, NdkQueryAdapterInfo): the buffer is
 * untouched, *Length is set to the required size, and the result is STATUS_BUFFER_TOO_SMALL.
 * NdkGetConnectionData with pPrivateData NULL and *pPrivateDataLength 0 returns STATUS_SUCCESS
 * with the required size (RDS: the full wire size, 56 after a REQ, 196 after a REP, 148 after
 * a REJ, whatever the peer sent).
 *
 * DisconnectEvent(DisconnectEventContext), given to NdkAccept or NdkCompleteConnect, is called
 * once when the peer disconnects; not after this side's NdkDisconnect or close.
 *
 * Every entry is behind a panic boundary: an internal failure returns STATUS_INTERNAL_ERROR.
 * ND_SHIM_LOG=error|warn|info|debug|trace in the environment logs to stderr.
 * Ports: a bind to port 0 picks from ND's ephemeral range, 49152-65535, or from
 * ND_SHIM_PORT_RANGE=lo-hi when it is set (read once per process; a malformed range makes every
 * NdkOpenAdapter fail with STATUS_INVALID_PARAMETER). See nd-shim(7).
 */
#ifndef NDK_SHIM_H
#define NDK_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t NTSTATUS;
typedef uint32_t ULONG;
typedef void *PVOID;
typedef struct sockaddr *PSOCKADDR;

#define STATUS_SUCCESS                    ((NTSTATUS)0x00000000)
#define STATUS_PENDING                    ((NTSTATUS)0x00000103)
#define STATUS_BUFFER_OVERFLOW            ((NTSTATUS)0x80000005)
#define STATUS_UNSUCCESSFUL               ((NTSTATUS)0xC0000001)
#define STATUS_INVALID_HANDLE             ((NTSTATUS)0xC0000008)
#define STATUS_INVALID_PARAMETER          ((NTSTATUS)0xC000000D)
#define STATUS_INVALID_DEVICE_REQUEST     ((NTSTATUS)0xC0000010)
#define STATUS_NO_MEMORY                  ((NTSTATUS)0xC0000017)
#define STATUS_BUFFER_TOO_SMALL           ((NTSTATUS)0xC0000023)
#define STATUS_SHARING_VIOLATION          ((NTSTATUS)0xC0000043)
#define STATUS_INSUFFICIENT_RESOURCES     ((NTSTATUS)0xC000009A)
#define STATUS_IO_TIMEOUT                 ((NTSTATUS)0xC00000B5)
#define STATUS_NOT_SUPPORTED              ((NTSTATUS)0xC00000BB)
#define STATUS_INTERNAL_ERROR             ((NTSTATUS)0xC00000E5)
#define STATUS_CANCELLED                  ((NTSTATUS)0xC0000120)
#define STATUS_INVALID_ADDRESS            ((NTSTATUS)0xC0000141)
#define STATUS_INVALID_DEVICE_STATE       ((NTSTATUS)0xC0000184)
#define STATUS_INVALID_BUFFER_SIZE        ((NTSTATUS)0xC0000206)
#define STATUS_TOO_MANY_ADDRESSES         ((NTSTATUS)0xC0000209)
#define STATUS_ADDRESS_ALREADY_EXISTS     ((NTSTATUS)0xC000020A)
#define STATUS_CONNECTION_DISCONNECTED    ((NTSTATUS)0xC000020C)
#define STATUS_CONNECTION_REFUSED         ((NTSTATUS)0xC0000236)
#define STATUS_ADDRESS_ALREADY_ASSOCIATED ((NTSTATUS)0xC0000238)
#define STATUS_CONNECTION_INVALID         ((NTSTATUS)0xC000023A)
#define STATUS_CONNECTION_ACTIVE          ((NTSTATUS)0xC000023B)
#define STATUS_NETWORK_UNREACHABLE        ((NTSTATUS)0xC000023C)
#define STATUS_HOST_UNREACHABLE           ((NTSTATUS)0xC000023D)
#define STATUS_CONNECTION_ABORTED         ((NTSTATUS)0xC0000241)
#define STATUS_DEVICE_REMOVED             ((NTSTATUS)0xC00002B6)

/* NdkOpenAdapter flags. */
#define NDK_SHIM_ADAPTER_POLLED 0x1u /* no event thread: drive with NdkGetEventFd/NdkProcessEvents */

/* NdkSend / NdkWrite / NdkRead flags. */
#define NDK_OP_FLAG_SILENT_SUCCESS 0x1u

typedef struct NDK_ADAPTER NDK_ADAPTER;
typedef struct NDK_CQ NDK_CQ;
typedef struct NDK_QP NDK_QP;
typedef struct NDK_MR NDK_MR;
typedef struct NDK_CONNECTOR NDK_CONNECTOR;
typedef struct NDK_LISTENER NDK_LISTENER;
typedef struct NDK_SHARED_ENDPOINT NDK_SHARED_ENDPOINT;

typedef void (*NDK_FN_REQUEST_COMPLETION)(PVOID Context, NTSTATUS Status);
typedef void (*NDK_FN_DISCONNECT_EVENT_CALLBACK)(PVOID Context);
/* A new connector holding an incoming request; the callee owns it (NdkCloseConnector). */
typedef void (*NDK_FN_CONNECT_EVENT_CALLBACK)(PVOID Context, NDK_CONNECTOR *pNdkConnector);
/* Creation always finishes inline in this shim: never called; may be NULL. */
typedef void (*NDK_FN_CREATE_COMPLETION)(PVOID Context, NTSTATUS Status, PVOID pNdkObject);

/* A subset of NDK_ADAPTER_INFO, filled from the device. */
typedef struct NDK_ADAPTER_INFO {
    ULONG InfoVersion;
    ULONG VendorId;
    ULONG DeviceId;
    uint64_t MaxRegistrationSize;
    ULONG MaxInitiatorRequestSge;
    ULONG MaxReceiveRequestSge;
    ULONG MaxReadRequestSge;
    ULONG MaxReceiveQueueDepth;
    ULONG MaxInitiatorQueueDepth;
    ULONG MaxCqDepth;
    ULONG MaxInboundReadLimit;
    ULONG MaxOutboundReadLimit;
    ULONG MaxCallerData;  /* private data of NdkConnect: 56 */
    ULONG MaxCalleeData;  /* private data of NdkAccept: 196 (NdkReject: 148) */
} NDK_ADAPTER_INFO;

/* A completion: the request context given to NdkReceive/NdkSend/NdkWrite/NdkRead. */
typedef struct NDK_RESULT {
    NTSTATUS Status;          /* STATUS_CANCELLED for requests flushed by NdkDisconnect */
    ULONG BytesTransferred;
    PVOID RequestContext;
    ULONG Opcode;             /* ibv_wc_opcode */
} NDK_RESULT;

/* A range inside an MR of this shim: VirtualAddress within NdkGetMrBuffer's buffer. */
typedef struct NDK_SGE {
    PVOID VirtualAddress;
    ULONG Length;
    ULONG MemoryRegionToken;  /* NdkGetLocalTokenFromMr */
} NDK_SGE;

typedef struct NDK_ADAPTER_DISPATCH {
    NTSTATUS (*NdkCloseAdapter)(NDK_ADAPTER *pNdkAdapter);
    /* *pLength in: sizeof the buffer; out: sizeof(NDK_ADAPTER_INFO). */
    NTSTATUS (*NdkQueryAdapterInfo)(NDK_ADAPTER *pNdkAdapter, NDK_ADAPTER_INFO *pInfo, ULONG *pLength);
    /* Polled adapters only (else STATUS_INVALID_DEVICE_REQUEST): readable when events wait. */
    NTSTATUS (*NdkGetEventFd)(NDK_ADAPTER *pNdkAdapter, int *pFd);
    /* Polled adapters only: runs every ready event and its callbacks; *pCount (optional) = how many. */
    NTSTATUS (*NdkProcessEvents)(NDK_ADAPTER *pNdkAdapter, ULONG *pCount);
    NTSTATUS (*NdkCreateCq)(NDK_ADAPTER *pNdkAdapter, ULONG CqDepth, NDK_CQ **ppNdkCq);
    NTSTATUS (*NdkCreateQp)(NDK_ADAPTER *pNdkAdapter, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                            ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth, ULONG MaxSge,
                            NDK_QP **ppNdkQp);
    /* Allocates and registers Length bytes (local write, remote read and write). */
    NTSTATUS (*NdkCreateMr)(NDK_ADAPTER *pNdkAdapter, size_t Length, NDK_MR **ppNdkMr);
    NTSTATUS (*NdkCreateConnector)(NDK_ADAPTER *pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                   PVOID RequestContext, NDK_CONNECTOR **ppNdkConnector);
    NTSTATUS (*NdkCreateListener)(NDK_ADAPTER *pNdkAdapter, NDK_FN_CONNECT_EVENT_CALLBACK ConnectEventHandler,
                                  PVOID ConnectEventContext, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                  PVOID RequestContext, NDK_LISTENER **ppNdkListener);
    /* Port 0 picks a free port of the ephemeral range (the opening comment's "Ports"). Address
     * in use: STATUS_SHARING_VIOLATION; not this adapter's: STATUS_INVALID_ADDRESS; range
     * exhausted: STATUS_TOO_MANY_ADDRESSES. */
    NTSTATUS (*NdkCreateSharedEndpoint)(NDK_ADAPTER *pNdkAdapter, const PSOCKADDR pAddress, ULONG AddressLength,
                                        NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                                        NDK_SHARED_ENDPOINT **ppNdkSharedEndpoint);
} NDK_ADAPTER_DISPATCH;

struct NDK_ADAPTER { const NDK_ADAPTER_DISPATCH *Dispatch; };

typedef struct NDK_CQ_DISPATCH {
    NTSTATUS (*NdkCloseCq)(NDK_CQ *pNdkCq);
    /* Up to Count results; returns how many (0 on a bad argument). */
    ULONG (*NdkGetCqResults)(NDK_CQ *pNdkCq, NDK_RESULT *pResults, ULONG Count);
} NDK_CQ_DISPATCH;

struct NDK_CQ { const NDK_CQ_DISPATCH *Dispatch; };

/* The QP starts in INIT: receives may be posted before the handshake. */
typedef struct NDK_QP_DISPATCH {
    NTSTATUS (*NdkCloseQp)(NDK_QP *pNdkQp);
    NTSTATUS (*NdkReceive)(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge);
    NTSTATUS (*NdkSend)(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge, ULONG Flags);
    NTSTATUS (*NdkWrite)(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                         uint64_t RemoteAddress, uint32_t RemoteToken, ULONG Flags);
    NTSTATUS (*NdkRead)(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                        uint64_t RemoteAddress, uint32_t RemoteToken, ULONG Flags);
} NDK_QP_DISPATCH;

struct NDK_QP { const NDK_QP_DISPATCH *Dispatch; };

typedef struct NDK_MR_DISPATCH {
    NTSTATUS (*NdkCloseMr)(NDK_MR *pNdkMr);
    /* The registered buffer (owned by the MR, valid until NdkCloseMr) and its length. */
    NTSTATUS (*NdkGetMrBuffer)(NDK_MR *pNdkMr, PVOID *ppBuffer, size_t *pLength);
    uint32_t (*NdkGetLocalTokenFromMr)(NDK_MR *pNdkMr);   /* 0 on a bad handle */
    uint32_t (*NdkGetRemoteTokenFromMr)(NDK_MR *pNdkMr);  /* 0 on a bad handle */
} NDK_MR_DISPATCH;

struct NDK_MR { const NDK_MR_DISPATCH *Dispatch; };

/* NDK_CONNECTOR_DISPATCH's order, then the shim's NdkCancelConnector. */
typedef struct NDK_CONNECTOR_DISPATCH {
    /* Releases the connector; a connected one is disconnected implicitly (QP flushed), a
     * pending connect or accept is abandoned. */
    NTSTATUS (*NdkCloseConnector)(NDK_CONNECTOR *pNdkConnector);
    /* Binds pSrcAddress (port 0: the ephemeral range) and sends the REQ. Completes at the peer's
     * accept (then NdkGetConnectionData, and NdkCompleteConnect or NdkReject) or with the
     * failure. */
    NTSTATUS (*NdkConnect)(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp,
                           const PSOCKADDR pSrcAddress, ULONG SrcAddressLength,
                           const PSOCKADDR pDestAddress, ULONG DestAddressLength,
                           ULONG InboundReadLimit, ULONG OutboundReadLimit,
                           const PVOID pPrivateData, ULONG PrivateDataLength,
                           NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
    /* As NdkConnect from the endpoint's ip:port; the same destination twice from one endpoint
     * is STATUS_ADDRESS_ALREADY_EXISTS (inline). */
    NTSTATUS (*NdkConnectWithSharedEndpoint)(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp,
                                             NDK_SHARED_ENDPOINT *pNdkSharedEndpoint,
                                             const PSOCKADDR pDestAddress, ULONG DestAddressLength,
                                             ULONG InboundReadLimit, ULONG OutboundReadLimit,
                                             const PVOID pPrivateData, ULONG PrivateDataLength,
                                             NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
    /* Passive side: sends the REP; completes when the connection is established (the RTU). */
    NTSTATUS (*NdkAccept)(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp,
                          ULONG InboundReadLimit, ULONG OutboundReadLimit,
                          const PVOID pPrivateData, ULONG PrivateDataLength,
                          NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent, PVOID DisconnectEventContext,
                          NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
    /* Passive before accept, or active after NdkConnect completed. Inline. */
    NTSTATUS (*NdkReject)(NDK_CONNECTOR *pNdkConnector, const PVOID pPrivateData, ULONG PrivateDataLength);
    NTSTATUS (*NdkGetConnectionData)(NDK_CONNECTOR *pNdkConnector, ULONG *pInboundReadLimit,
                                     ULONG *pOutboundReadLimit, PVOID pPrivateData, ULONG *pPrivateDataLength);
    NTSTATUS (*NdkGetLocalAddress)(NDK_CONNECTOR *pNdkConnector, PSOCKADDR pAddress, ULONG *pAddressLength);
    NTSTATUS (*NdkGetPeerAddress)(NDK_CONNECTOR *pNdkConnector, PSOCKADDR pAddress, ULONG *pAddressLength);
    /* Active side: QP to RTS and the RTU. Finishes inline: STATUS_SUCCESS or
     * STATUS_CONNECTION_INVALID when no NdkConnect completed; RequestCompletion (required) is
     * never called. */
    NTSTATUS (*NdkCompleteConnect)(NDK_CONNECTOR *pNdkConnector,
                                   NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent, PVOID DisconnectEventContext,
                                   NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
    /* DREQ, and the QP to error: every outstanding request completes with STATUS_CANCELLED. */
    NTSTATUS (*NdkDisconnect)(NDK_CONNECTOR *pNdkConnector,
                              NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
    /* The shim's addition (IND2Overlapped::CancelOverlappedRequests): a pending NdkConnect or
     * NdkAccept completes with STATUS_CANCELLED; the connector is then unusable. */
    NTSTATUS (*NdkCancelConnector)(NDK_CONNECTOR *pNdkConnector);
} NDK_CONNECTOR_DISPATCH;

struct NDK_CONNECTOR { const NDK_CONNECTOR_DISPATCH *Dispatch; };

typedef struct NDK_LISTENER_DISPATCH {
    /* Pending requests not yet handed over are rejected. */
    NTSTATUS (*NdkCloseListener)(NDK_LISTENER *pNdkListener);
    /* Binds (exclusively; port 0: the ephemeral range) and listens. Finishes inline;
     * RequestCompletion is never called. */
    NTSTATUS (*NdkListen)(NDK_LISTENER *pNdkListener, const PSOCKADDR pAddress, ULONG AddressLength,
                          NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
    NTSTATUS (*NdkGetListenerLocalAddress)(NDK_LISTENER *pNdkListener, PSOCKADDR pAddress, ULONG *pAddressLength);
    /* Pause != 0 holds new connectors back; 0 delivers the held ones and resumes. */
    NTSTATUS (*NdkControlConnectEvents)(NDK_LISTENER *pNdkListener, uint8_t Pause);
} NDK_LISTENER_DISPATCH;

struct NDK_LISTENER { const NDK_LISTENER_DISPATCH *Dispatch; };

typedef struct NDK_SHARED_ENDPOINT_DISPATCH {
    /* The address stays busy until the connectors connected through it are closed too. */
    NTSTATUS (*NdkCloseSharedEndpoint)(NDK_SHARED_ENDPOINT *pNdkSharedEndpoint);
    NTSTATUS (*NdkGetSharedEndpointLocalAddress)(NDK_SHARED_ENDPOINT *pNdkSharedEndpoint, PSOCKADDR pAddress,
                                                 ULONG *pAddressLength);
} NDK_SHARED_ENDPOINT_DISPATCH;

struct NDK_SHARED_ENDPOINT { const NDK_SHARED_ENDPOINT_DISPATCH *Dispatch; };

/* Opens the RDMA adapter that has pAddress's IP (its port is ignored). Flags: 0 (the shim's
 * event thread runs callbacks) or NDK_SHIM_ADAPTER_POLLED. Loopback, unspecified or an address
 * of no RDMA device: STATUS_INVALID_ADDRESS. */
NTSTATUS NdkOpenAdapter(const PSOCKADDR pAddress, ULONG AddressLength, uint32_t Flags,
                        NDK_ADAPTER **ppNdkAdapter);

#ifdef __cplusplus
}
#endif

#endif /* NDK_SHIM_H */
