/*
 * The three entry points rxe_rs's ThreadSanitizer build calls that GCC 12's libtsan (Debian 12's
 * libtsan2, which the rig suite sanitized-tsan preloads) lacks: the LLVM of current rustc
 * instruments a copy or a fill the compiler emits itself (Rust's copy_nonoverlapping, a struct
 * assignment) as a call to __tsan_memcpy/__tsan_memmove/__tsan_memset instead of to
 * memcpy/memmove/memset. LLVM's runtime implements them as its interceptors of
 * memcpy/memmove/memset (check the ranges, then copy); here each calls the libc function, which
 * the preloaded libtsan intercepts, to the same effect. Built without builtins, so that each stays
 * a call (a jump through the PLT to the interceptor), and preloaded after libtsan (without it,
 * loading the TSan librxe_rs fails: "undefined symbol: __tsan_memset"). tests/sanitize-build.sh:
 *   gcc -shared -fPIC -O2 -fno-builtin -o libtsan-rig-mem.so tests/tsan-rig-mem.c
 */
#include <string.h>

void *__tsan_memcpy(void *dst, const void *src, size_t n);
void *__tsan_memmove(void *dst, const void *src, size_t n);
void *__tsan_memset(void *dst, int c, size_t n);

void *__tsan_memcpy(void *dst, const void *src, size_t n)
{
	return memcpy(dst, src, n);
}

void *__tsan_memmove(void *dst, const void *src, size_t n)
{
	return memmove(dst, src, n);
}

void *__tsan_memset(void *dst, int c, size_t n)
{
	return memset(dst, c, n);
}
