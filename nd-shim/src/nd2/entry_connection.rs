//! The C entries (vtables) of the connection objects: provider, adapter, connector and listener.
