/*
 * ndwinbase.h: the Win32 base that ND2's headers need, self-sufficient on Linux (nd-shim).
 *
 * Sizes follow Windows' LLP64 model, not Linux's LP64: ULONG, DWORD and LONG are 32 bits
 * (never `unsigned long`), ULONG_PTR and SIZE_T are pointer-sized. Every macro is guarded with
 * #ifndef, every structure with the guard that Windows' own headers and common compatibility
 * headers use (GUID_DEFINED, _OVERLAPPED_DEFINED, ...), and scalar typedefs repeat identical
 * types (allowed in C11 and C++), so a program's own Win32 compatibility header can come before
 * or after this one.
 *
 * COM from C++: DECLARE_INTERFACE_(I, Base) makes `struct I : public Base` with pure virtual
 * methods and no virtual destructor. g++ (Itanium C++ ABI) lays out such a class as one pointer
 * to a table of the methods in declaration order, base methods first: the same binary shape as
 * a COM object on Windows, so C++ calls `p->Method(...)` land in nd-shim's static vtables.
 * From C, the same interface is `struct I { const struct IVtbl *lpVtbl; }`, called as
 * `p->lpVtbl->Method(p, ...)`.
 *
 * The functions (events, completion ports, GetLastError) are exported by libnd_shim.
 *
 * ND_SHIM_NO_WIN32 (defined before the first ND header): for a program that brings its own
 * Win32 layer. This header then declares only what ND2's interfaces need (the scalar types they
 * use, GUID, IUnknown, IClassFactory, OVERLAPPED, SOCKET_ADDRESS_LIST, DECLARE_HANDLE, EXTERN_C,
 * the COM macros, HRESULT codes and macros, SAL macros): no WCHAR, LPWSTR, TCHAR, CHAR, LONG,
 * LONGLONG, INT64, LARGE_INTEGER, NTSTATUS, TRUE, WINAPI or CONTAINING_RECORD, no Win32
 * functions, no OVERLAPPED_ENTRY, no WAIT_ / ERROR_ constants, no CreateEvent or
 * HasOverlappedIoCompleted. libnd_shim still exports its functions, at the version node
 * ND_SHIM_0; see docs/porting-nd2.md.
 *
 * GUIDs: DEFINE_GUID declares (extern) unless INITGUID is defined when this header is first
 * read, or initguid.h was included first: then it defines (weak, as Windows' selectany), so a
 * program that defines INITGUID gets its own definitions of the IIDs, as on Windows.
 */
#ifndef ND_SHIM_NDWINBASE_H
#define ND_SHIM_NDWINBASE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

/* ---- scalar types ND2's declarations use (identical repeats are allowed) ---- */
typedef int32_t HRESULT;
typedef uint32_t ULONG;
typedef uint32_t DWORD;
typedef uint16_t USHORT;
typedef int32_t INT;
typedef uint16_t UINT16;
typedef uint32_t UINT32;
typedef uint64_t UINT64;
typedef uintptr_t ULONG_PTR;
typedef size_t SIZE_T;
typedef ULONG_PTR KAFFINITY;
typedef int32_t BOOL;
typedef void *LPVOID;
typedef void *PVOID;
typedef void *HANDLE;
#ifndef VOID
#define VOID void
#endif

/* ---- the rest of the Win32 base: the full face only ----
   Under ND_SHIM_NO_WIN32 none of these is declared: ND2's interfaces use none of them, and a
   program's own Win32 layer types them its own way (WCHAR as wchar_t, LONGLONG as int64_t, ...).
   Where Windows and Wine agree, the type is theirs: LONGLONG `long long` and ULONGLONG
   `unsigned long long` (Windows, MinGW, Wine's PE headers), WCHAR as Wine's winnt.h has it
   (`char16_t` in C++ with Unicode literals, so `u"..."` is an LPCWSTR; `unsigned short` in C),
   LARGE_INTEGER a union whose QuadPart is a LONGLONG. */
#ifndef ND_SHIM_NO_WIN32
typedef int32_t LONG;
typedef uint16_t WORD;
typedef uint8_t BYTE;
typedef uint8_t UCHAR;
typedef uint32_t UINT;
typedef int64_t INT64;
typedef unsigned long long ULONGLONG;
typedef long long LONGLONG;
typedef intptr_t LONG_PTR;
typedef uintptr_t DWORD_PTR;
typedef char CHAR;
typedef const char *LPCSTR;
#if defined(__cplusplus) && defined(__cpp_unicode_literals) && __cpp_unicode_literals >= 200710
typedef char16_t WCHAR;
#else
typedef unsigned short WCHAR;
#endif
typedef const WCHAR *LPCWSTR;
typedef ULONG *PULONG;
typedef DWORD *LPDWORD;
typedef ULONG_PTR *PULONG_PTR;
typedef SIZE_T *PSIZE_T;
typedef int32_t NTSTATUS;
typedef uint64_t ULONG64;
typedef int64_t LONG64;
typedef uint64_t DWORD64;
typedef intptr_t SSIZE_T;
typedef const void *LPCVOID;
typedef char *LPSTR;
typedef WCHAR *LPWSTR;
typedef BOOL *PBOOL;
typedef BYTE *PBYTE;
typedef LONG *PLONG;
typedef USHORT *PUSHORT;
typedef UCHAR *PUCHAR;
#ifndef _LARGE_INTEGER_DEFINED
#define _LARGE_INTEGER_DEFINED
typedef union _LARGE_INTEGER {
    struct {
        DWORD LowPart;
        LONG HighPart;
    };
    struct {
        DWORD LowPart;
        LONG HighPart;
    } u;
    LONGLONG QuadPart;
} LARGE_INTEGER, *PLARGE_INTEGER;
typedef union _ULARGE_INTEGER {
    struct {
        DWORD LowPart;
        DWORD HighPart;
    };
    struct {
        DWORD LowPart;
        DWORD HighPart;
    } u;
    ULONGLONG QuadPart;
} ULARGE_INTEGER, *PULARGE_INTEGER;
#endif
#ifndef TRUE
#define TRUE 1
#endif
#ifndef FALSE
#define FALSE 0
#endif
#ifndef INFINITE
#define INFINITE 0xFFFFFFFFu
#endif
#ifndef INVALID_HANDLE_VALUE
#define INVALID_HANDLE_VALUE ((HANDLE)(LONG_PTR)-1)
#endif
#endif /* ND_SHIM_NO_WIN32 */
/* ---- HRESULT helpers ---- */
#ifndef S_OK
#define S_OK ((HRESULT)0)
#endif
#ifndef S_FALSE
#define S_FALSE ((HRESULT)1)
#endif
#ifndef E_NOINTERFACE
#define E_NOINTERFACE ((HRESULT)0x80004002)
#endif
#ifndef E_POINTER
#define E_POINTER ((HRESULT)0x80004003)
#endif
#ifndef E_FAIL
#define E_FAIL ((HRESULT)0x80004005)
#endif
#ifndef E_OUTOFMEMORY
#define E_OUTOFMEMORY ((HRESULT)0x8007000E)
#endif
#ifndef E_INVALIDARG
#define E_INVALIDARG ((HRESULT)0x80070057)
#endif
#ifndef E_NOTIMPL
#define E_NOTIMPL ((HRESULT)0x80004001)
#endif
#ifndef E_UNEXPECTED
#define E_UNEXPECTED ((HRESULT)0x8000FFFF)
#endif
#ifndef CLASS_E_NOAGGREGATION
#define CLASS_E_NOAGGREGATION ((HRESULT)0x80040110)
#endif
#ifndef CLASS_E_CLASSNOTAVAILABLE
#define CLASS_E_CLASSNOTAVAILABLE ((HRESULT)0x80040111)
#endif
#ifndef FACILITY_WIN32
#define FACILITY_WIN32 7
#endif
/* winerror.h's inline function, as a macro: 0 and values that are already HRESULTs (<= 0 as a
   LONG) pass unchanged; other Win32 errors become 0x8007xxxx. */
#ifndef HRESULT_FROM_WIN32
#define HRESULT_FROM_WIN32(x) \
    ((HRESULT)(x) <= 0 ? (HRESULT)(x) : (HRESULT)((((ULONG)(x)) & 0x0000FFFFu) | (FACILITY_WIN32 << 16) | 0x80000000u))
#endif
#ifndef HRESULT_FROM_NT
#define HRESULT_FROM_NT(x) ((HRESULT)((x) | 0x10000000))
#endif
#ifndef HRESULT_CODE
#define HRESULT_CODE(hr) ((hr) & 0xFFFF)
#endif
#ifndef HRESULT_FACILITY
#define HRESULT_FACILITY(hr) (((hr) >> 16) & 0x1FFF)
#endif
#ifndef NT_SUCCESS
#define NT_SUCCESS(status) (((NTSTATUS)(status)) >= 0)
#endif
#ifndef SUCCEEDED
#define SUCCEEDED(hr) (((HRESULT)(hr)) >= 0)
#endif
#ifndef FAILED
#define FAILED(hr) (((HRESULT)(hr)) < 0)
#endif

/* ---- calling conventions and annotations: no meaning on x86-64 Linux ---- */
#ifndef STDMETHODCALLTYPE
#define STDMETHODCALLTYPE
#endif
#ifndef ND_SHIM_NO_WIN32
#ifndef WINAPI
#define WINAPI
#endif
#ifndef __stdcall
#define __stdcall
#endif
#ifndef __RPC_FAR
#define __RPC_FAR
#endif
#ifndef CALLBACK
#define CALLBACK
#endif
#ifndef APIENTRY
#define APIENTRY
#endif
#ifndef __forceinline
#define __forceinline inline __attribute__((always_inline))
#endif
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef OPTIONAL
#define OPTIONAL
#endif
#ifndef UNREFERENCED_PARAMETER
#define UNREFERENCED_PARAMETER(p) ((void)(p))
#endif
#ifndef FIELD_OFFSET
#define FIELD_OFFSET(type, field) ((LONG)offsetof(type, field))
#endif
#ifndef CONTAINING_RECORD
#define CONTAINING_RECORD(address, type, field) ((type *)((char *)(address) - offsetof(type, field)))
#endif
#endif /* ND_SHIM_NO_WIN32 */
#ifndef DECLARE_HANDLE
#define DECLARE_HANDLE(name) \
    struct name##__ {          \
        int unused;            \
    };                         \
    typedef struct name##__ *name
#endif
#ifndef EXTERN_C
#ifdef __cplusplus
#define EXTERN_C extern "C"
#else
#define EXTERN_C extern
#endif
#endif

/* ---- SAL annotations (sal.h, specstrings.h): no meaning to gcc, all empty ---- */
#include "ndsal.h"

/* ---- GUID / IID ---- */
#ifndef GUID_DEFINED
#define GUID_DEFINED
typedef struct _GUID {
    uint32_t Data1;
    uint16_t Data2;
    uint16_t Data3;
    uint8_t Data4[8];
} GUID;
#endif
#ifndef IID_DEFINED
#define IID_DEFINED
typedef GUID IID;
#endif
#ifndef REFIID
#ifdef __cplusplus
#define REFIID const IID &
#define REFGUID const GUID &
#else
#define REFIID const IID *
#define REFGUID const GUID *
#endif
#endif
#ifndef CLSID_DEFINED
#define CLSID_DEFINED
typedef GUID CLSID;
#endif
#ifndef REFCLSID
#ifdef __cplusplus
#define REFCLSID const CLSID &
#else
#define REFCLSID const CLSID *
#endif
#endif
#ifndef InlineIsEqualGUID
#define InlineIsEqualGUID(a, b) IsEqualGUID(a, b)
#endif
#ifndef IsEqualCLSID
#define IsEqualCLSID(a, b) IsEqualGUID(a, b)
#endif
#ifndef IsEqualGUID
#ifdef __cplusplus
#define IsEqualGUID(a, b) (memcmp(&(a), &(b), sizeof(GUID)) == 0)
#else
#define IsEqualGUID(a, b) (memcmp((a), (b), sizeof(GUID)) == 0)
#endif
#endif
#ifndef IsEqualIID
#define IsEqualIID(a, b) IsEqualGUID(a, b)
#endif
/* DEFINE_GUID: a declaration; a (weak) definition when INITGUID is defined (initguid.h). The
   IIDs are also defined once in libnd_shim, so a program need not define them. */
#ifndef DEFINE_GUID
#ifdef INITGUID
#define DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8) ND_SHIM_DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8)
#else
#define DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8) EXTERN_C const GUID name
#endif
#endif
#ifndef ND_SHIM_DEFINE_GUID
#ifdef __cplusplus
#define ND_SHIM_DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8) \
    extern "C" __attribute__((weak)) const GUID name = {l, w1, w2, {b1, b2, b3, b4, b5, b6, b7, b8}}
#else
#define ND_SHIM_DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8) \
    __attribute__((weak)) const GUID name = {l, w1, w2, {b1, b2, b3, b4, b5, b6, b7, b8}}
#endif
#endif
/* Older nd-shim headers' form of a declaration. */
#ifndef ND_SHIM_DECLARE_IID
#ifdef __cplusplus
#define ND_SHIM_DECLARE_IID(name) extern "C" const IID name
#else
#define ND_SHIM_DECLARE_IID(name) extern const IID name
#endif
#endif

/* ---- COM interface declaration ---- */
#ifndef interface
#define interface struct
#endif
#ifndef IFACEMETHOD
#define IFACEMETHOD(method) STDMETHOD(method)
#endif
#ifndef IFACEMETHOD_
#define IFACEMETHOD_(type, method) STDMETHOD_(type, method)
#endif
#ifdef __cplusplus
#ifndef PURE
#define PURE = 0
#endif
#ifndef STDMETHOD
#define STDMETHOD(method) virtual HRESULT STDMETHODCALLTYPE method
#endif
#ifndef STDMETHOD_
#define STDMETHOD_(type, method) virtual type STDMETHODCALLTYPE method
#endif
#ifndef THIS_
#define THIS_
#endif
#ifndef THIS
#define THIS void
#endif
#ifndef DECLARE_INTERFACE
#define DECLARE_INTERFACE(iface) interface iface
#endif
#ifndef DECLARE_INTERFACE_
#define DECLARE_INTERFACE_(iface, base) interface iface : public base
#endif
#else /* C */
#ifndef PURE
#define PURE
#endif
#ifndef STDMETHOD
#define STDMETHOD(method) HRESULT(STDMETHODCALLTYPE *method)
#endif
#ifndef STDMETHOD_
#define STDMETHOD_(type, method) type(STDMETHODCALLTYPE *method)
#endif
#ifndef THIS_
#define THIS_ INTERFACE *This,
#endif
#ifndef THIS
#define THIS INTERFACE *This
#endif
#ifndef DECLARE_INTERFACE
#define DECLARE_INTERFACE(iface) \
    typedef interface iface { const struct iface##Vtbl *lpVtbl; } iface; \
    typedef struct iface##Vtbl iface##Vtbl; \
    struct iface##Vtbl
#endif
#ifndef DECLARE_INTERFACE_
#define DECLARE_INTERFACE_(iface, base) DECLARE_INTERFACE(iface)
#endif
#endif

/* IUnknown's methods, in vtable order, for each interface that derives from it (IClassFactory
 * here, ND2's in ndspi.h): C's vtable struct lists every inherited method before the interface's
 * own (THIS_ names the INTERFACE being declared), and C++ redeclares them in the same slots. The
 * last semicolon is the user's. */
#ifndef ND_SHIM_IUNKNOWN_METHODS
#define ND_SHIM_IUNKNOWN_METHODS                                         \
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE; \
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;                                \
    STDMETHOD_(ULONG, Release)(THIS) PURE
#endif

/* ---- IUnknown ---- */
#ifndef __IUnknown_INTERFACE_DEFINED__
#define __IUnknown_INTERFACE_DEFINED__
#undef INTERFACE
#define INTERFACE IUnknown
DECLARE_INTERFACE(IUnknown)
{
    ND_SHIM_IUNKNOWN_METHODS;
};
#undef INTERFACE
#endif
ND_SHIM_DECLARE_IID(IID_IUnknown);

/* ---- IClassFactory (what DllGetClassObject gives) ---- */
#ifndef __IClassFactory_INTERFACE_DEFINED__
#define __IClassFactory_INTERFACE_DEFINED__
#undef INTERFACE
#define INTERFACE IClassFactory
DECLARE_INTERFACE_(IClassFactory, IUnknown)
{
    ND_SHIM_IUNKNOWN_METHODS;
    STDMETHOD(CreateInstance)(THIS_ IUnknown *pUnkOuter, REFIID riid, void **ppvObject) PURE;
    STDMETHOD(LockServer)(THIS_ BOOL fLock) PURE;
};
#undef INTERFACE
#endif
ND_SHIM_DECLARE_IID(IID_IClassFactory);

/* ---- OVERLAPPED ---- */
#ifndef _OVERLAPPED_DEFINED
#define _OVERLAPPED_DEFINED
typedef struct _OVERLAPPED {
    ULONG_PTR Internal;     /* the operation's status (HRESULT / NTSTATUS); ND_PENDING while pending */
    ULONG_PTR InternalHigh; /* bytes transferred */
    union {
        struct {
            DWORD Offset;
            DWORD OffsetHigh;
        };
        PVOID Pointer;
    };
    HANDLE hEvent;
} OVERLAPPED, *LPOVERLAPPED;
#endif

/* ---- SOCKET_ADDRESS (winsock2's, on struct sockaddr of <sys/socket.h>) ---- */
#ifndef _SOCKET_ADDRESS_DEFINED
#define _SOCKET_ADDRESS_DEFINED
typedef struct _SOCKET_ADDRESS {
    struct sockaddr *lpSockaddr;
    INT iSockaddrLength;
} SOCKET_ADDRESS, *PSOCKET_ADDRESS, *LPSOCKET_ADDRESS;
typedef struct _SOCKET_ADDRESS_LIST {
    INT iAddressCount;
    SOCKET_ADDRESS Address[1];
} SOCKET_ADDRESS_LIST, *PSOCKET_ADDRESS_LIST, *LPSOCKET_ADDRESS_LIST;
#endif
#ifndef SOCKADDR_INET_DEFINED
#define SOCKADDR_INET_DEFINED
typedef union _SOCKADDR_INET {
    struct sockaddr_in Ipv4;
    struct sockaddr_in6 Ipv6;
    sa_family_t si_family;
} SOCKADDR_INET;
#endif

/* ---- the Win32 part: constants, OVERLAPPED_ENTRY and the functions libnd_shim exports ---- */
#ifndef ND_SHIM_NO_WIN32
#ifndef WAIT_OBJECT_0
#define WAIT_OBJECT_0 0x00000000u
#endif
#ifndef WAIT_TIMEOUT
#define WAIT_TIMEOUT 258u
#endif
#ifndef WAIT_FAILED
#define WAIT_FAILED 0xFFFFFFFFu
#endif
#ifndef ERROR_SUCCESS
#define ERROR_SUCCESS 0u
#endif
#ifndef ERROR_INVALID_HANDLE
#define ERROR_INVALID_HANDLE 6u
#endif
#ifndef ERROR_NOT_ENOUGH_MEMORY
#define ERROR_NOT_ENOUGH_MEMORY 8u
#endif
#ifndef ERROR_INVALID_PARAMETER
#define ERROR_INVALID_PARAMETER 87u
#endif
#ifndef ERROR_OPERATION_ABORTED
#define ERROR_OPERATION_ABORTED 995u
#endif
#ifndef ERROR_IO_PENDING
#define ERROR_IO_PENDING 997u
#endif

#ifndef WAIT_ABANDONED_0
#define WAIT_ABANDONED_0 0x00000080u
#endif
#ifndef WAIT_IO_COMPLETION
#define WAIT_IO_COMPLETION 0x000000C0u
#endif
#ifndef MAXIMUM_WAIT_OBJECTS
#define MAXIMUM_WAIT_OBJECTS 64
#endif
#ifndef ERROR_NOT_SUPPORTED
#define ERROR_NOT_SUPPORTED 50u
#endif
#ifndef ERROR_ABANDONED_WAIT_0
#define ERROR_ABANDONED_WAIT_0 735u
#endif
#ifndef ERROR_IO_INCOMPLETE
#define ERROR_IO_INCOMPLETE 996u
#endif
#ifndef STATUS_WAIT_0
#define STATUS_WAIT_0 ((NTSTATUS)0x00000000L)
#endif
#ifndef STATUS_TIMEOUT
#define STATUS_TIMEOUT ((NTSTATUS)0x00000102L)
#endif
#ifndef STATUS_PENDING
#define STATUS_PENDING ((NTSTATUS)0x00000103L)
#endif

/* Internal holds the operation's status, STATUS_PENDING (ND_PENDING) while it is pending. */
#ifndef HasOverlappedIoCompleted
#define HasOverlappedIoCompleted(lpOverlapped) (((DWORD)(lpOverlapped)->Internal) != STATUS_PENDING)
#endif

#ifndef _OVERLAPPED_ENTRY_DEFINED
#define _OVERLAPPED_ENTRY_DEFINED
typedef struct _OVERLAPPED_ENTRY {
    ULONG_PTR lpCompletionKey;
    LPOVERLAPPED lpOverlapped;
    ULONG_PTR Internal; /* the packet's status */
    DWORD dwNumberOfBytesTransferred;
} OVERLAPPED_ENTRY, *LPOVERLAPPED_ENTRY;
#endif

#ifndef ND_SHIM_WIN32_FUNCTIONS
#define ND_SHIM_WIN32_FUNCTIONS
#ifdef __cplusplus
extern "C" {
#endif
/* lpEventAttributes must be NULL; named events are not supported (lpName must be NULL). */
HANDLE WINAPI CreateEventA(void *lpEventAttributes, BOOL bManualReset, BOOL bInitialState, LPCSTR lpName);
HANDLE WINAPI CreateEventW(void *lpEventAttributes, BOOL bManualReset, BOOL bInitialState, LPCWSTR lpName);
BOOL WINAPI SetEvent(HANDLE hEvent);
BOOL WINAPI ResetEvent(HANDLE hEvent);
DWORD WINAPI WaitForSingleObject(HANDLE hHandle, DWORD dwMilliseconds);
/* No APCs: bAlertable changes nothing, WAIT_IO_COMPLETION never comes. Events only. */
DWORD WINAPI WaitForSingleObjectEx(HANDLE hHandle, DWORD dwMilliseconds, BOOL bAlertable);
DWORD WINAPI WaitForMultipleObjects(DWORD nCount, const HANDLE *lpHandles, BOOL bWaitAll, DWORD dwMilliseconds);
DWORD WINAPI WaitForMultipleObjectsEx(DWORD nCount, const HANDLE *lpHandles, BOOL bWaitAll, DWORD dwMilliseconds,
                                      BOOL bAlertable);
BOOL WINAPI CloseHandle(HANDLE hObject);
HANDLE WINAPI CreateIoCompletionPort(HANDLE FileHandle, HANDLE ExistingCompletionPort, ULONG_PTR CompletionKey,
                                     DWORD NumberOfConcurrentThreads);
typedef VOID(WINAPI *LPOVERLAPPED_COMPLETION_ROUTINE)(DWORD dwErrorCode, DWORD dwNumberOfBytesTransfered,
                                                     LPOVERLAPPED lpOverlapped);
/* Binds an overlapped file of IND2Adapter::CreateOverlappedFile to libnd_shim's thread pool: each
 * completion calls Function on a pool thread with the operation's NTSTATUS (OVERLAPPED.Internal:
 * 0, STATUS_CANCELLED, ...) as dwErrorCode and InternalHigh as the byte count. Flags must be 0. */
BOOL WINAPI BindIoCompletionCallback(HANDLE FileHandle, LPOVERLAPPED_COMPLETION_ROUTINE Function, ULONG Flags);
BOOL WINAPI GetQueuedCompletionStatus(HANDLE CompletionPort, LPDWORD lpNumberOfBytesTransferred,
                                      PULONG_PTR lpCompletionKey, LPOVERLAPPED *lpOverlapped, DWORD dwMilliseconds);
BOOL WINAPI GetQueuedCompletionStatusEx(HANDLE CompletionPort, LPOVERLAPPED_ENTRY lpCompletionPortEntries, ULONG ulCount,
                                        PULONG ulNumEntriesRemoved, DWORD dwMilliseconds, BOOL fAlertable);
BOOL WINAPI PostQueuedCompletionStatus(HANDLE CompletionPort, DWORD dwNumberOfBytesTransferred,
                                       ULONG_PTR dwCompletionKey, LPOVERLAPPED lpOverlapped);
DWORD WINAPI GetLastError(void);
void WINAPI SetLastError(DWORD dwErrCode);
#ifdef __cplusplus
}
#endif
#endif
#ifndef CreateEvent
#define CreateEvent CreateEventA
#endif
#endif /* ND_SHIM_NO_WIN32 */

#endif /* ND_SHIM_NDWINBASE_H */
