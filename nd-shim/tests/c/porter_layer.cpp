// A program whose own Win32 layer is wchar_t-based, as ports of Microsoft's ND examples carry
// one: WCHAR is wchar_t, LONGLONG is int64_t, its own LARGE_INTEGER, TCHAR, L"" literals and a
// wmain-like entry. It includes the ND headers with ND_SHIM_NO_WIN32 and calls through
// IND2Adapter. nd2_headers.rs compiles it (g++ -fsyntax-only) as is and with ND_HEADERS_FIRST
// (the ND headers before the layer): the ND headers must declare none of the layer's names.
#include <cstdint>
#include <cstdio>
#include <cwchar>

#ifdef ND_HEADERS_FIRST
#define ND_SHIM_NO_WIN32
#include "ndsupport.h"
#endif

// ---- the porter's layer ----
typedef wchar_t WCHAR;
typedef WCHAR *LPWSTR;
typedef const WCHAR *LPCWSTR;
typedef WCHAR TCHAR;
typedef long long LONGLONG;
typedef unsigned long long ULONGLONG;
typedef uint32_t DWORD;
typedef int32_t LONG;
typedef int32_t BOOL;
typedef void *HANDLE;
typedef union _LARGE_INTEGER {
    struct {
        DWORD LowPart;
        LONG HighPart;
    } u;
    LONGLONG QuadPart;
} LARGE_INTEGER;
#define TRUE 1
#define FALSE 0
#define INFINITE 0xFFFFFFFF
#define WINAPI
#define _T(x) L##x
#define CONTAINING_RECORD(a, t, f) ((t *)((char *)(a) - (size_t)&((t *)0)->f))
#define UNREFERENCED_PARAMETER(p) ((void)(p))
static BOOL QueryPerformanceCounter(LARGE_INTEGER *counter)
{
    counter->QuadPart = 1;
    return TRUE;
}

#ifndef ND_HEADERS_FIRST
#define ND_SHIM_NO_WIN32
#include "ndsupport.h"
#endif

static HRESULT query(IND2Adapter *adapter, ND2_ADAPTER_INFO *info)
{
    ULONG size = sizeof(*info);
    info->InfoVersion = ND_VERSION_2;
    return adapter->Query(info, &size);
}

static int wmain_like(int argc, WCHAR **argv)
{
    LARGE_INTEGER start;
    QueryPerformanceCounter(&start);
    const TCHAR *name = _T("porter");
    LPCWSTR text = L"ND2 through IND2Adapter";
    std::wprintf(L"%ls: %ls (%d args) at %lld\n", name, text, argc, (long long)start.QuadPart);
    UNREFERENCED_PARAMETER(argv);
    IND2Adapter *adapter = NULL;
    struct sockaddr_in address = {};
    address.sin_family = AF_INET;
    HRESULT hr = NdOpenAdapter(IID_IND2Adapter, (const struct sockaddr *)&address, sizeof(address),
                               (VOID **)&adapter);
    if (FAILED(hr)) {
        return 1;
    }
    ND2_ADAPTER_INFO info;
    hr = query(adapter, &info);
    ULONGLONG id = info.AdapterId;
    adapter->Release();
    return SUCCEEDED(hr) && id != 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    WCHAR arg0[] = L"porter-layer";
    WCHAR *wargv[] = {arg0, NULL};
    UNREFERENCED_PARAMETER(argv);
    return wmain_like(argc, wargv);
}
