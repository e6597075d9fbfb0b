//! Every public ND2 header (include/nd2/*.h) compiles first and alone in a C++ translation unit
//! and in a C one (g++ / gcc -fsyntax-only -Wall -Wextra -Werror), as is, under ND_SHIM_NO_WIN32
//! and under INITGUID; and one unit per language checks what the headers promise (sizes, codes,
//! macros, SAL annotations as ND programs write them), including the types of the full Win32 face
//! (LONGLONG `long long`, WCHAR as Wine's winnt.h types it). A porter's program with its own
//! wchar_t-based Win32 layer (tests/c/porter_layer.cpp) compiles with the headers under
//! ND_SHIM_NO_WIN32, its layer before them and after them. The compilers run in parallel; a host
//! without them skips the test (it says so).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

mod common;
use common::have;

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include/nd2")
}

fn headers() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(include_dir())
        .expect("include/nd2")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".h"))
        .collect();
    names.sort();
    names
}

#[derive(Clone, Copy)]
enum Lang {
    C,
    Cxx,
}

/// Starts the compiler on `source` (written to a file of its own).
fn start(lang: Lang, name: &str, source: &str) -> (String, Child) {
    let dir = std::env::temp_dir().join(format!("nd2-headers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (compiler, ext, std) = match lang {
        Lang::C => ("gcc", "c", "-std=c11"),
        Lang::Cxx => ("g++", "cpp", "-std=c++11"),
    };
    let file = dir.join(format!("{name}.{ext}"));
    std::fs::write(&file, source).unwrap();
    let child = Command::new(compiler)
        .args([std, "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(include_dir())
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (format!("{compiler} {name}"), child)
}

/// What the headers promise, checked at compile time; the same text in C and C++.
const PROMISES: &str = r#"
#define ND_SHIM_LEGACY_SAL
#include "ndsupport.h"
#include "initguid.h"
DEFINE_GUID(GUID_NdShimHeaderTest, 0x01234567, 0x89ab, 0xcdef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef);
#ifdef __cplusplus
#define CHECK(e) static_assert(e, #e)
#define REF(g) g
#else
#define CHECK(e) _Static_assert(e, #e)
#define REF(g) &g /* REFGUID is a pointer in C */
#endif
CHECK(sizeof(ULONG) == 4 && sizeof(LONG) == 4 && sizeof(DWORD) == 4 && sizeof(ULONG_PTR) == sizeof(void *));
CHECK(sizeof(ND2_ADAPTER_INFO) == 96 && sizeof(ND2_ADAPTER_INFO32) == 88);
CHECK(sizeof(ND2_RESULT) == 32 && sizeof(ND2_SGE) == 16);
CHECK(sizeof(ND_ADAPTER_INFO1) == 128 && sizeof(ND_RESULT) == 16 && sizeof(ND_SGE) == 24);
CHECK(sizeof(ND_MW_DESCRIPTOR) == 20);
CHECK(sizeof(OVERLAPPED) == 32 && sizeof(OVERLAPPED_ENTRY) == 32 && sizeof(LARGE_INTEGER) == 8);
CHECK(sizeof(GUID) == 16);
CHECK(HRESULT_FROM_WIN32(ERROR_SUCCESS) == S_OK);
CHECK(HRESULT_FROM_WIN32(ERROR_INVALID_PARAMETER) == E_INVALIDARG);
CHECK(HRESULT_FROM_WIN32(ERROR_NOT_ENOUGH_MEMORY) == (HRESULT)0x80070008);
CHECK(HRESULT_FROM_WIN32(E_FAIL) == E_FAIL);
CHECK(STATUS_CANCELLED == ND_CANCELED && STATUS_PENDING == ND_PENDING && STATUS_SUCCESS == ND_SUCCESS);
CHECK(STATUS_DATA_OVERRUN == ND_DATA_OVERRUN && STATUS_BUFFER_OVERFLOW == ND_BUFFER_OVERFLOW);
CHECK(STATUS_CONNECTION_REFUSED == ND_CONNECTION_REFUSED && STATUS_INVALID_PARAMETER == ND_INVALID_PARAMETER);
CHECK(STATUS_DATA_ERROR == (NTSTATUS)0xC000003E && STATUS_BAD_NETWORK_NAME == (NTSTATUS)0xC00000CC);
CHECK(STATUS_ADDRESS_ALREADY_ASSOCIATED == (NTSTATUS)0xC0000238);
CHECK(STATUS_CONNECTION_DISCONNECTED == (NTSTATUS)0xC000020C);
CHECK(ND_LOCAL_LENGTH == ND_DATA_OVERRUN && ND_INVALIDATION_ERROR == ND_INVALID_DEVICE_REQUEST);
CHECK(WAIT_ABANDONED_0 == 0x80 && ERROR_ABANDONED_WAIT_0 == 735 && MAXIMUM_WAIT_OBJECTS == 64);
CHECK(FIELD_OFFSET(OVERLAPPED, hEvent) == 24);

typedef struct Request {
    int tag;
    OVERLAPPED ov;
} Request;

/* The annotations as Microsoft's ND headers and programs write them. */
static HRESULT annotated(_In_ const void *in, _Out_ ULONG *out, _Inout_ SIZE_T *io, _In_opt_ void *opt,
                         _Out_opt_ ULONG *oopt, _Outptr_ void **pp, _In_reads_(n) const BYTE *r, SIZE_T n,
                         _Out_writes_(n) BYTE *w, __in const void *a, __out ULONG *b, __inout ULONG *c,
                         __in_opt void *d, __out_opt void *e, __deref_out void **f,
                         __in_bcount(n) const void *g, __out_bcount(n) void *h,
                         __out_bcount_part_opt(n, n) void *i, __in_ecount_opt(n) const void *j,
                         _In_bytecount_(n) const void *k, _Out_opt_bytecap_post_bytecount_(n, n) void *l,
                         _Deref_out_ void **m)
{
    UNREFERENCED_PARAMETER(in); UNREFERENCED_PARAMETER(out); UNREFERENCED_PARAMETER(io);
    UNREFERENCED_PARAMETER(opt); UNREFERENCED_PARAMETER(oopt); UNREFERENCED_PARAMETER(pp);
    UNREFERENCED_PARAMETER(r); UNREFERENCED_PARAMETER(w); UNREFERENCED_PARAMETER(a);
    UNREFERENCED_PARAMETER(b); UNREFERENCED_PARAMETER(c); UNREFERENCED_PARAMETER(d);
    UNREFERENCED_PARAMETER(e); UNREFERENCED_PARAMETER(f); UNREFERENCED_PARAMETER(g);
    UNREFERENCED_PARAMETER(h); UNREFERENCED_PARAMETER(i); UNREFERENCED_PARAMETER(j);
    UNREFERENCED_PARAMETER(k); UNREFERENCED_PARAMETER(l); UNREFERENCED_PARAMETER(m);
    UNREFERENCED_PARAMETER(n);
    return S_OK;
}

int uses(OVERLAPPED *ov);
int uses(OVERLAPPED *ov)
{
    Request *req = CONTAINING_RECORD(ov, Request, ov);
    LARGE_INTEGER li;
    li.QuadPart = 1;
    (void)annotated;
    return req->tag + (int)li.LowPart + (HasOverlappedIoCompleted(ov) ? 1 : 0) +
           (IsEqualGUID(REF(GUID_NdShimHeaderTest), REF(IID_IND2Adapter)) ? 1 : 0);
}
"#;

#[test]
fn each_header_compiles_first_and_alone_in_c_and_cxx() {
    if !have("gcc") || !have("g++") {
        eprintln!("nd2_headers: gcc or g++ missing; skipped");
        return;
    }
    let mut runs = Vec::new();
    for header in headers() {
        let stem = header.trim_end_matches(".h").to_string();
        for (variant, prelude) in [
            ("alone", ""),
            ("no-win32", "#define ND_SHIM_NO_WIN32\n"),
            ("initguid", "#define INITGUID\n"),
        ] {
            let source = format!("{prelude}#include \"{header}\"\n");
            for lang in [Lang::C, Lang::Cxx] {
                runs.push(start(lang, &format!("{stem}-{variant}"), &source));
            }
        }
    }
    for lang in [Lang::C, Lang::Cxx] {
        runs.push(start(lang, "promises", PROMISES));
    }
    // The ND headers first, then the C++ library: the SAL macros must not break it.
    let before_std = "#include \"ndsupport.h\"\n#include \"initguid.h\"\n#include <algorithm>\n#include <atomic>\n\
        #include <chrono>\n#include <condition_variable>\n#include <cstdio>\n#include <istream>\n#include <map>\n\
        #include <memory>\n#include <mutex>\n#include <regex>\n#include <string>\n#include <thread>\n#include <utility>\n\
        #include <vector>\n";
    runs.push(start(Lang::Cxx, "before-std", before_std));
    let before_libc = "#include \"ndsupport.h\"\n#include <link.h>\n#include <envz.h>\n#include <linux/stat.h>\n\
        #include <pthread.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <sys/epoll.h>\n#include <unistd.h>\n";
    runs.push(start(Lang::C, "before-libc", before_libc));
    // A program with its own Win32 layer (other signatures, other spellings): ND_SHIM_NO_WIN32
    // keeps ours out of its way.
    let own_layer = "#include <stdint.h>\n\
        typedef void *HANDLE;\ntypedef uint32_t DWORD;\ntypedef int32_t BOOL;\n\
        #define WAIT_OBJECT_0 ((DWORD)0)\n#define STATUS_PENDING ((DWORD)0x103)\n\
        #define HasOverlappedIoCompleted(o) ((o)->Internal != STATUS_PENDING)\n\
        HANDLE CreateEventA(void *attributes, BOOL manual, BOOL initial, const char *name, int mine);\n\
        DWORD WaitForMultipleObjects(DWORD n, HANDLE *h, BOOL all, DWORD ms, int mine);\n\
        typedef struct _OVERLAPPED_ENTRY { int mine; } OVERLAPPED_ENTRY;\n\
        #define ND_SHIM_NO_WIN32\n#include \"ndsupport.h\"\n#include \"initguid.h\"\n";
    for lang in [Lang::C, Lang::Cxx] {
        runs.push(start(lang, "own-layer", own_layer));
    }
    // The full face types what Windows and Wine type the same way as they do.
    let full_face_cxx = "#include \"ndsupport.h\"\n#include <type_traits>\n\
        static_assert(std::is_same<LONGLONG, long long>::value, \"LONGLONG\");\n\
        static_assert(std::is_same<ULONGLONG, unsigned long long>::value, \"ULONGLONG\");\n\
        static_assert(std::is_same<decltype(LARGE_INTEGER::QuadPart), LONGLONG>::value, \"QuadPart\");\n\
        static_assert(std::is_same<WCHAR, char16_t>::value, \"WCHAR (Wine: char16_t in C++)\");\n\
        static LPCWSTR text = u\"wide\";\nLPCWSTR wide();\nLPCWSTR wide() { return text; }\n";
    runs.push(start(Lang::Cxx, "full-face-types", full_face_cxx));
    let full_face_c = "#include \"ndsupport.h\"\n\
        _Static_assert(_Generic((LONGLONG)0, long long: 1, default: 0), \"LONGLONG\");\n\
        _Static_assert(_Generic((ULONGLONG)0, unsigned long long: 1, default: 0), \"ULONGLONG\");\n\
        _Static_assert(_Generic((WCHAR)0, unsigned short: 1, default: 0), \"WCHAR (Wine: unsigned short in C)\");\n";
    runs.push(start(Lang::C, "full-face-types", full_face_c));
    // A porter's wchar_t-based layer, before the ND headers and after them.
    let porter = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/porter_layer.cpp"))
        .expect("tests/c/porter_layer.cpp");
    runs.push(start(Lang::Cxx, "porter-layer-first", &porter));
    runs.push(start(
        Lang::Cxx,
        "porter-layer-after",
        &format!("#define ND_HEADERS_FIRST\n{porter}"),
    ));
    let mut failed = Vec::new();
    for (what, child) in runs {
        let out = child.wait_with_output().unwrap();
        if !out.status.success() {
            failed.push(format!("{what}:\n{}", String::from_utf8_lossy(&out.stderr)));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
