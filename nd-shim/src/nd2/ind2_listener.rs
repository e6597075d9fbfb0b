//! IND2Listener over the Rust API's [`Listener`]; GetConnectionRequest hands the next request to
//! an IND2Connector (checked by kind) and completes through the OVERLAPPED. Its C entries are
//! `entry_connection.rs`.

#![forbid(unsafe_code)]

use super::ind2_connector::EndpointBody;
use crate::Listener;

pub(crate) type ListenerBody = EndpointBody<Listener>;
