//! The C entries of opening and closing a context, the device, the ops tables and the queries.
