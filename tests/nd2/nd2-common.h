/*
 * nd2-common.h: what the ND2 example programs share. Plain ND2 as a Windows program writes it;
 * only the includes and the POSIX argument parsing differ from a Windows build.
 */
#ifndef ND2_COMMON_H
#define ND2_COMMON_H

#include <ndsupport.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK_HR(call)                                                                            \
    do {                                                                                          \
        HRESULT hr_ = (call);                                                                     \
        if (FAILED(hr_)) {                                                                        \
            fprintf(stderr, "%s:%d: %s failed: 0x%08x\n", __FILE__, __LINE__, #call, (unsigned)hr_); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

#define EXPECT(cond)                                                                              \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                  \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

/* An IPv4 sockaddr_in from "a.b.c.d" and a port; exits on a bad address. */
static inline sockaddr_in nd2_ipv4(const char *ip, unsigned short port)
{
    sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1) {
        fprintf(stderr, "bad IPv4 address: %s\n", ip);
        exit(2);
    }
    return sin;
}

/* CLOCK_MONOTONIC in microseconds: for the figures the programs print. */
static inline double nd2_now_us()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/*
 * Waits for overlapped requests the two ways ND2 programs do: through the completion port the
 * adapter's overlapped file is bound to (useIocp), or through the OVERLAPPED's event and
 * GetOverlappedResult(FALSE). Two OVERLAPPEDs: Ov() for one request at a time, CqOv() for a CQ
 * notification that may stay armed meanwhile (never waited for at the same time as Ov()).
 */
class Nd2Waiter {
public:
    Nd2Waiter(HANDLE overlappedFile, bool useIocp) : m_port(NULL), m_useIocp(useIocp)
    {
        memset(&m_ov, 0, sizeof m_ov);
        memset(&m_cqOv, 0, sizeof m_cqOv);
        if (useIocp) {
            m_port = CreateIoCompletionPort(overlappedFile, NULL, 7, 0);
            EXPECT(m_port != NULL);
        } else {
            m_ov.hEvent = CreateEventA(NULL, FALSE, FALSE, NULL);
            m_cqOv.hEvent = CreateEventA(NULL, FALSE, FALSE, NULL);
            EXPECT(m_ov.hEvent != NULL && m_cqOv.hEvent != NULL);
        }
    }

    ~Nd2Waiter()
    {
        if (m_port)
            CloseHandle(m_port);
        if (m_ov.hEvent)
            CloseHandle(m_ov.hEvent);
        if (m_cqOv.hEvent)
            CloseHandle(m_cqOv.hEvent);
    }

    OVERLAPPED *Ov() { return &m_ov; }
    OVERLAPPED *CqOv() { return &m_cqOv; }

    /* The final status of the request `issued` returned for `object` with Ov(). */
    HRESULT Wait(IND2Overlapped *object, HRESULT issued) { return Wait(object, issued, &m_ov); }

    /* The final status of the request `issued` returned for `object` with `want` (ours). */
    HRESULT Wait(IND2Overlapped *object, HRESULT issued, OVERLAPPED *want)
    {
        if (issued != ND_PENDING)
            return issued;
        if (m_useIocp) {
            DWORD bytes = 0;
            ULONG_PTR key = 0;
            OVERLAPPED *ov = NULL;
            BOOL ok = GetQueuedCompletionStatus(m_port, &bytes, &key, &ov, INFINITE);
            EXPECT(ov == want);
            EXPECT(key == 7);
            HRESULT hr = object->GetOverlappedResult(want, FALSE);
            EXPECT((ok != FALSE) == SUCCEEDED(hr));
            return hr;
        }
        /* An auto-reset event: the wait consumes the signal, then the result is final. */
        EXPECT(WaitForSingleObject(want->hEvent, INFINITE) == WAIT_OBJECT_0);
        HRESULT hr = object->GetOverlappedResult(want, FALSE);
        EXPECT(hr != ND_PENDING);
        return hr;
    }

    HANDLE Port() { return m_port; }

private:
    HANDLE m_port;
    bool m_useIocp;
    OVERLAPPED m_ov;
    OVERLAPPED m_cqOv;
};

#endif /* ND2_COMMON_H */
