/* Another Win32 layer in the same process as libnd_shim: a shared library that defines its own
   CreateEventA, SetEvent and CloseHandle (versioned OTHER_WIN32_1 by other_win32.map, as a
   library with a version script of its own is) and calls them itself. Each of its functions
   counts its calls and answers with a sentinel, so a caller can tell whose definition it
   reached. */
#include <stddef.h>

#define OTHER_EVENT ((void *)0x0DDE7E47)
#define OTHER_TRUE 7

static int calls;

void *CreateEventA(void *attributes, int manual, int initial, const char *name)
{
    (void)attributes, (void)manual, (void)initial, (void)name;
    calls++;
    return OTHER_EVENT;
}

int SetEvent(void *event)
{
    calls++;
    return event == OTHER_EVENT ? OTHER_TRUE : 0;
}

int CloseHandle(void *handle)
{
    calls++;
    return handle == OTHER_EVENT ? OTHER_TRUE : 0;
}

/* How many times this library's functions ran. */
int other_calls(void)
{
    return calls;
}

/* The library's own use of its functions: 1 if each call reached this library's definition. */
int other_selftest(void)
{
    int before = calls;
    void *event = CreateEventA(NULL, 1, 0, NULL);
    int set = SetEvent(event);
    int closed = CloseHandle(event);
    return event == OTHER_EVENT && set == OTHER_TRUE && closed == OTHER_TRUE && calls == before + 3;
}
