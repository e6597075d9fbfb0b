/* A program linked against libnd_shim and against another Win32 layer (other_win32.c) that
   defines CreateEventA, SetEvent and CloseHandle too. Its own calls, declared by nd-shim's
   ndwinbase.h, must reach libnd_shim's (an nd-shim event that WaitForSingleObject, which only
   libnd_shim defines, sees signalled; the other library's functions not run); the other library's
   calls of its own names must reach its own. Exit status 0 when both hold. */
#include <stdio.h>

#include "ndsupport.h"

int other_calls(void);
int other_selftest(void);

int main(void)
{
    HANDLE event = CreateEventA(NULL, TRUE, FALSE, NULL);
    BOOL set = SetEvent(event);
    DWORD waited = WaitForSingleObject(event, 0);
    BOOL closed = CloseHandle(event);
    int program_ok = event != NULL && set == TRUE && waited == WAIT_OBJECT_0 && closed == TRUE && other_calls() == 0;
    printf("program's CreateEventA/SetEvent/CloseHandle -> %s\n",
           program_ok ? "libnd_shim" : "NOT libnd_shim");
    int other_ok = other_selftest();
    printf("the other library's own calls -> %s\n", other_ok ? "its own" : "NOT its own");
    return program_ok && other_ok ? 0 : 1;
}
