//! IND2Listener over the Rust API's [`Listener`]; GetConnectionRequest hands the next request to
//! an IND2Connector (checked by kind) and completes through the OVERLAPPED. Its C entries are
//! `entry_connection.rs`.

#![forbid(unsafe_code)]

use std::sync::Arc;

use super::adapter::AdapterBody;
use super::win32::OverlappedFile;
use super::Overlapped;
use crate::Listener;

pub(crate) struct ListenerBody {
    _adapter: Arc<AdapterBody>,
    pub(super) file: Arc<OverlappedFile>,
    pub(super) listener: Listener,
}

impl ListenerBody {
    pub(super) fn new(adapter: Arc<AdapterBody>, file: Arc<OverlappedFile>) -> ListenerBody {
        let listener = Listener::new(&adapter.adapter);
        ListenerBody {
            _adapter: adapter,
            file,
            listener,
        }
    }
}

impl Overlapped for ListenerBody {
    fn cancel(&self) {
        self.listener.cancel();
    }
}
