//! GUIDs, and the IIDs of `ndspi.h` defined once here: the headers declare them `extern`, so
//! every program that links `-lnd_shim` shares these (as it would link uuid.lib on Windows).

// The C names of the headers.
#![allow(non_upper_case_globals)]

/// GUID / IID, in the layout of `ndwinbase.h`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guid {
    pub data1: u32,
    pub data2: u16,
    pub data3: u16,
    pub data4: [u8; 8],
}

impl Guid {
    pub const fn new(data1: u32, data2: u16, data3: u16, data4: [u8; 8]) -> Guid {
        Guid {
            data1,
            data2,
            data3,
            data4,
        }
    }
}

#[no_mangle]
pub static IID_IUnknown: Guid = Guid::new(0x0000_0000, 0x0000, 0x0000, [0xc0, 0, 0, 0, 0, 0, 0, 0x46]);
#[no_mangle]
pub static IID_IND2Overlapped: Guid = Guid::new(
    0xabf72719,
    0xb016,
    0x4a40,
    [0xa6, 0xf7, 0x62, 0x27, 0x91, 0xa7, 0x04, 0x4c],
);
#[no_mangle]
pub static IID_IND2CompletionQueue: Guid = Guid::new(
    0x20cc445e,
    0x64a0,
    0x4cbb,
    [0xaa, 0x75, 0xf6, 0xa7, 0x25, 0x1f, 0xda, 0x9e],
);
#[no_mangle]
pub static IID_IND2SharedReceiveQueue: Guid = Guid::new(
    0xaabd67dc,
    0x459a,
    0x4db1,
    [0x82, 0x6b, 0x56, 0xcf, 0xcc, 0x27, 0x88, 0x83],
);
#[no_mangle]
pub static IID_IND2MemoryWindow: Guid = Guid::new(
    0x070fe1f5,
    0x0ab5,
    0x4361,
    [0x88, 0xdb, 0x97, 0x4b, 0xa7, 0x04, 0xd4, 0xb9],
);
#[no_mangle]
pub static IID_IND2MemoryRegion: Guid = Guid::new(
    0x55dfea2f,
    0xbc56,
    0x4982,
    [0x8a, 0x45, 0x03, 0x01, 0xbe, 0x46, 0xc4, 0x13],
);
#[no_mangle]
pub static IID_IND2QueuePair: Guid = Guid::new(
    0xeef2f332,
    0xb75d,
    0x4063,
    [0xbc, 0xe3, 0x3a, 0x0b, 0xad, 0x2d, 0x02, 0xce],
);
#[no_mangle]
pub static IID_IND2Connector: Guid = Guid::new(
    0x7dd615c4,
    0x6b4c,
    0x4866,
    [0x95, 0x0c, 0xf3, 0xb1, 0xd2, 0x5a, 0x53, 0x02],
);
#[no_mangle]
pub static IID_IND2Listener: Guid = Guid::new(
    0x65d23d83,
    0x3a57,
    0x4e02,
    [0x86, 0xa4, 0x35, 0x01, 0x65, 0xc2, 0xd1, 0x30],
);
#[no_mangle]
pub static IID_IND2Adapter: Guid = Guid::new(
    0xd89c798c,
    0x4823,
    0x4d69,
    [0x84, 0x6c, 0xdf, 0xdc, 0xcf, 0xf9, 0xe5, 0xf3],
);
#[no_mangle]
pub static IID_IND2Provider: Guid = Guid::new(
    0x49eae6c1,
    0x76c4,
    0x46d0,
    [0x80, 0x03, 0x5c, 0x2e, 0xaa, 0x2c, 0x9a, 0x8e],
);

// COM's class factory, what DllGetClassObject gives.
#[no_mangle]
pub static IID_IClassFactory: Guid = Guid::new(
    0x00000001,
    0x0000,
    0x0000,
    [0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46],
);
/// nd-shim's provider class (ndsupport.h): the CLSID DllGetClassObject answers.
#[no_mangle]
pub static CLSID_NdShimProvider: Guid = Guid::new(
    0x1369fba5,
    0x7c7a,
    0x41c8,
    [0xa9, 0xe1, 0xe9, 0xa7, 0xa4, 0x62, 0x72, 0x41],
);

// ND1's IIDs (ndspi.h's ND1 half): declared so that ND1 fallbacks link; no object has them,
// but the memory window's, which is IID_IND2MemoryWindow's value.
#[no_mangle]
pub static IID_INDOverlapped: Guid = Guid::new(
    0xc859e15e,
    0x75e2,
    0x4fe3,
    [0x8d, 0x6d, 0x0d, 0xff, 0x36, 0xf0, 0x24, 0x42],
);
#[no_mangle]
pub static IID_INDCompletionQueue: Guid = Guid::new(
    0x1245a633,
    0x2a32,
    0x473a,
    [0x83, 0x0c, 0xe0, 0x5d, 0x1f, 0x86, 0x9d, 0x02],
);
#[no_mangle]
pub static IID_INDMemoryWindow: Guid = Guid::new(
    0x070fe1f5,
    0x0ab5,
    0x4361,
    [0x88, 0xdb, 0x97, 0x4b, 0xa7, 0x04, 0xd4, 0xb9],
);
#[no_mangle]
pub static IID_INDEndpoint: Guid = Guid::new(
    0xdbd00eab,
    0xb679,
    0x44a9,
    [0xbd, 0x65, 0xe8, 0x2f, 0x3d, 0xe1, 0x2d, 0x1a],
);
#[no_mangle]
pub static IID_INDConnector: Guid = Guid::new(
    0x1bcaf2d1,
    0xe274,
    0x4aeb,
    [0xac, 0x57, 0xcd, 0x5d, 0x43, 0x76, 0xe0, 0xb7],
);
#[no_mangle]
pub static IID_INDListen: Guid = Guid::new(
    0xbb902588,
    0xba3f,
    0x4441,
    [0x9f, 0xe1, 0x3b, 0x67, 0x95, 0xe4, 0xe6, 0x68],
);
#[no_mangle]
pub static IID_INDAdapter: Guid = Guid::new(
    0xa023c5a0,
    0x5b73,
    0x43bc,
    [0x8d, 0x20, 0x33, 0xaa, 0x07, 0xe9, 0x51, 0x0f],
);
#[no_mangle]
pub static IID_INDProvider: Guid = Guid::new(
    0x0c5dd316,
    0x5fdf,
    0x47e6,
    [0xb2, 0xd0, 0x2a, 0x6e, 0xda, 0x8d, 0x39, 0xdd],
);

// The exports above, at the version node ND_SHIM_0 (crate::exports).
crate::exports::version_node!(
    "IID_IUnknown",
    "IID_IND2Overlapped",
    "IID_IND2CompletionQueue",
    "IID_IND2SharedReceiveQueue",
    "IID_IND2MemoryWindow",
    "IID_IND2MemoryRegion",
    "IID_IND2QueuePair",
    "IID_IND2Connector",
    "IID_IND2Listener",
    "IID_IND2Adapter",
    "IID_IND2Provider",
    "IID_IClassFactory",
    "CLSID_NdShimProvider",
    "IID_INDOverlapped",
    "IID_INDCompletionQueue",
    "IID_INDMemoryWindow",
    "IID_INDEndpoint",
    "IID_INDConnector",
    "IID_INDListen",
    "IID_INDAdapter",
    "IID_INDProvider",
);
