//! The C entries of protection domains, memory regions and windows, address handles and multicast.
