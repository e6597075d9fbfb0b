//! How every ABI type is declared, and the layout table that declaration publishes.
//!
//! Each type is written once, inside `abi!`, with its C size and the C offset of every field.
//! From that one declaration the macro emits
//! - the `#[repr(C)]` type itself with the zerocopy derives,
//! - a compile-time assertion of its size and one of each field offset,
//! - an entry in the module's `LAYOUTS` table (the measured Rust layout), which
//!   `tests/c_layout.rs` compares with what the C compiler makes of the kernel headers.

/// Whether a Rust type stands for a C `struct` or `union`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Struct,
    Union,
}

/// How the C header names the type this Rust type stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `struct name { ... }`: C code can name it, so it is checked on its own.
    Named,
    /// `struct { ... } member;`: a type without a name but with a member name; the Rust name is
    /// made up (`<parent>_<member>`), so it is only checked through its parent.
    Unnamed,
    /// `struct { ... };` inside another record: C code reaches its members as if they were the
    /// parent's. The Rust field holding it has a made-up name that does not appear in C paths.
    Anonymous,
}

/// One field as Rust lays it out.
#[derive(Clone, Copy, Debug)]
pub struct FieldLayout {
    pub name: &'static str,
    pub offset: usize,
    /// The Rust type as written (`stringify!`), used to find nested ABI types in the table.
    pub ty: &'static str,
}

/// One type as Rust lays it out.
#[derive(Clone, Copy, Debug)]
pub struct TypeLayout {
    pub name: &'static str,
    pub kind: Kind,
    pub origin: Origin,
    pub size: usize,
    pub align: usize,
    pub fields: &'static [FieldLayout],
}

/// Declares ABI types and the module's `LAYOUTS` table.
///
/// ```text
/// abi! {
///     /// Documentation.
///     #[derive(IntoBytes, Debug)]            // extra derives where the type allows them
///     pub struct name [size 8] {             // C size; `, unnamed` / `, anonymous` see Origin
///         0 => pub first: u32,               // C offset => field
///         4 => pub second: u32,
///     }
/// }
/// ```
/// Every type gets `Clone, Copy, FromBytes, Immutable, KnownLayout`. `IntoBytes` is listed by
/// hand because it needs a padding-free struct; zerocopy does not derive it for unions.
macro_rules! abi {
    ($(
        $(#[$attr:meta])*
        pub $kind:tt $name:ident [size $size:literal $(, $origin:ident)?] {
            $( $(#[$fattr:meta])* $offset:literal => pub $field:ident : $fty:ty ),* $(,)?
        }
    )*) => {
        $(
            $crate::layout::abi_item! {
                $(#[$attr])*
                $kind $name {
                    $( $(#[$fattr])* pub $field : $fty ),*
                }
            }
            const _: () = assert!(::core::mem::size_of::<$name>() == $size);
            $( const _: () = assert!(::core::mem::offset_of!($name, $field) == $offset); )*
        )*

        /// The Rust layout of every type declared in this module, for the C layout test.
        pub const LAYOUTS: &[$crate::layout::TypeLayout] = &[$(
            $crate::layout::TypeLayout {
                name: stringify!($name),
                kind: $crate::layout::abi_kind!($kind),
                origin: $crate::layout::abi_origin!($($origin)?),
                size: ::core::mem::size_of::<$name>(),
                align: ::core::mem::align_of::<$name>(),
                fields: &[$(
                    $crate::layout::FieldLayout {
                        name: stringify!($field),
                        offset: ::core::mem::offset_of!($name, $field),
                        ty: stringify!($fty),
                    }
                ),*],
            }
        ),*];
    };
}

macro_rules! abi_item {
    ($(#[$attr:meta])* struct $name:ident { $($body:tt)* }) => {
        $(#[$attr])*
        #[repr(C)]
        #[derive(Clone, Copy, ::zerocopy::FromBytes, ::zerocopy::Immutable, ::zerocopy::KnownLayout)]
        pub struct $name { $($body)* }
    };
    ($(#[$attr:meta])* union $name:ident { $($body:tt)* }) => {
        $(#[$attr])*
        #[repr(C)]
        #[derive(Clone, Copy, ::zerocopy::FromBytes, ::zerocopy::Immutable, ::zerocopy::KnownLayout)]
        pub union $name { $($body)* }
    };
}

macro_rules! abi_kind {
    (struct) => {
        $crate::layout::Kind::Struct
    };
    (union) => {
        $crate::layout::Kind::Union
    };
}

macro_rules! abi_origin {
    () => {
        $crate::layout::Origin::Named
    };
    (unnamed) => {
        $crate::layout::Origin::Unnamed
    };
    (anonymous) => {
        $crate::layout::Origin::Anonymous
    };
}

/// Declares constants (`pub const NAME: TYPE = VALUE;`, written as in plain Rust) and the
/// module's `CONSTS` table of names and values, which the C layout test checks against the
/// headers' enumerators and macros.
macro_rules! abi_consts {
    ($( $(#[$attr:meta])* pub const $name:ident : $ty:ty = $value:expr; )*) => {
        $( $(#[$attr])* pub const $name: $ty = $value; )*

        /// Every constant of this module with its value, for the C layout test.
        pub const CONSTS: &[(&str, i128)] = &[$( (stringify!($name), $name as i128) ),*];
    };
}

pub(crate) use {abi, abi_consts, abi_item, abi_kind, abi_origin};
