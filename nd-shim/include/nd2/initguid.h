/*
 * initguid.h (nd-shim): as Windows' initguid.h, makes the DEFINE_GUIDs that follow (in this
 * translation unit) definitions instead of declarations. Include it before the headers whose
 * GUIDs it should define (they have include guards):
 *     #include <initguid.h>
 *     #include <ndspi.h>      // IID_IND2Adapter, ... defined here
 * The definitions are weak (Windows' selectany): several translation units may define the same
 * GUID. libnd_shim defines the ND IIDs too, so a program never needs this header for them.
 */
#ifndef INITGUID
#define INITGUID
#endif
#include "ndwinbase.h"
#undef DEFINE_GUID
#define DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8) \
    ND_SHIM_DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8)
