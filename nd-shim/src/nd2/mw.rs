//! IND2MemoryWindow: a type-2 memory window (ibv_alloc_mw), bound and invalidated through
//! IND2QueuePair::Bind / Invalidate. Its remote token is the rkey of the last bind posted.
//!
//! A QP's release takes the windows last bound through it ([`MwBody::release_from`]): the
//! kernel's rxe holds a reference on the QP for every type-2 window bound through it (taken by
//! `rxe_do_bind_mw`, dropped only by an invalidation or the window's dealloc), and its QP destroy
//! (`rxe_destroy_qp` -> `__rxe_cleanup`) waits for the QP's references for up to 50 s before it
//! gives up with a kernel warning. So before the QP goes, such a window's verbs object is
//! deallocated (which unbinds it, as destroying its QP does on an adapter that invalidates a
//! type-2 window with its QP); the ND object lives on, and its next Bind allocates a new one.
//!
//! The vtable and C entry are in `entry_data`; the verbs window ([`RawMw`]) is `data_verbs`'.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::adapter::AdapterBody;
use super::data_verbs::RawMw;
use super::HResult;
use crate::sync::lock;

pub(crate) struct MwBody {
    adapter: Arc<AdapterBody>,
    window: Mutex<Window>,
    /// The rkey the next bind gives out, and after it the window's token.
    rkey: AtomicU32,
}

/// The verbs window and the QP it was last bound through.
struct Window {
    /// None after a QP's release took it, until the next Bind allocates another.
    mw: Option<RawMw>,
    binding: Binding,
}

/// Which QP (by number) a window was last bound through, as far as the shim knows: set when a
/// Bind is posted, cleared when that QP's release takes the window.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Binding {
    through: Option<u32>,
}

impl Binding {
    pub(crate) fn bound_through(&mut self, qp_num: u32) {
        self.through = Some(qp_num);
    }

    /// Whether the release of QP `qp_num` must take the window (its last Bind went through that
    /// QP, so the kernel may hold the QP for it); if so the binding is forgotten. A window bound
    /// through another QP since is left alone: that Bind only succeeds on a window no longer
    /// bound, and the window is the other QP's now.
    pub(crate) fn release_from(&mut self, qp_num: u32) -> bool {
        if self.through == Some(qp_num) {
            self.through = None;
            true
        } else {
            false
        }
    }
}

/// The windows a QP has bound, for its release to take (weakly held: a window released first
/// deallocates its own verbs object).
pub(crate) struct BoundWindows<T> {
    windows: Mutex<Vec<Weak<T>>>,
}

impl<T> Default for BoundWindows<T> {
    fn default() -> Self {
        BoundWindows {
            windows: Mutex::new(Vec::new()),
        }
    }
}

impl<T> BoundWindows<T> {
    /// Notes `window` once; windows already released are dropped from the list.
    pub(crate) fn note(&self, window: &Arc<T>) {
        let mut windows = lock(&self.windows);
        windows.retain(|w| w.strong_count() > 0);
        if !windows.iter().any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(window))) {
            windows.push(Arc::downgrade(window));
        }
    }

    /// The windows still alive, emptying the list.
    pub(crate) fn take(&self) -> Vec<Arc<T>> {
        std::mem::take(&mut *lock(&self.windows))
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }
}

impl MwBody {
    pub(super) fn new(adapter: Arc<AdapterBody>) -> Result<MwBody, HResult> {
        let mw = RawMw::alloc(&adapter.adapter)?;
        let rkey = mw.rkey();
        Ok(MwBody {
            adapter,
            window: Mutex::new(Window {
                mw: Some(mw),
                binding: Binding::default(),
            }),
            rkey: AtomicU32::new(rkey),
        })
    }

    /// The rkey for a new bind: the key's low byte advanced, as ibv_inc_rkey does.
    fn next_rkey(current: u32) -> u32 {
        (current & 0xFFFF_FF00) | (current.wrapping_add(1) & 0xFF)
    }

    pub(super) fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Acquire)
    }

    /// Posts a Bind of this window through QP `qp_num`: `post` gets the verbs window (allocated
    /// anew if a QP's release took the last one) and the rkey the bind gives out, and runs under
    /// the window's lock, so a QP's release cannot deallocate the window while it is posted.
    pub(super) fn bind_through(
        &self,
        qp_num: u32,
        post: impl FnOnce(&RawMw, u32) -> Result<HResult, HResult>,
    ) -> Result<HResult, HResult> {
        let mut window = lock(&self.window);
        let window = &mut *window;
        let mw = match &mut window.mw {
            Some(mw) => mw,
            None => {
                let mw = RawMw::alloc(&self.adapter.adapter)?;
                self.rkey.store(mw.rkey(), Ordering::Release);
                window.mw.insert(mw)
            }
        };
        // The provider's BIND_MW request names the window by the key it has now (`mw_rkey`,
        // from the ibv_mw), which the kernel checks against its own: after a bind that is the
        // key that bind gave out, not the one ibv_alloc_mw returned. For a type-2 window bound
        // by a work request, keeping the ibv_mw's key current is the program's job (for type 1,
        // ibv_bind_mw does it).
        // The window's token changes only once the bind is posted (a Bind refused inline leaves
        // the kernel's key as it was). A bind that completes in error leaves it too, but the
        // shim does not see that completion: the next Bind of that window then fails
        // (docs/porting-nd2.md).
        let current = self.rkey();
        mw.set_rkey(current);
        let next = Self::next_rkey(current);
        let posted = post(mw, next)?;
        self.rkey.store(next, Ordering::Release);
        window.binding.bound_through(qp_num);
        Ok(posted)
    }

    /// Called by QP `qp_num`'s release before its verbs QP is destroyed: if this window was last
    /// bound through it, its verbs object is deallocated (see the module's comment).
    pub(super) fn release_from(&self, qp_num: u32) {
        let mut window = lock(&self.window);
        if window.binding.release_from(qp_num) && window.mw.is_some() {
            // Deallocated (its drop).
            window.mw = None;
            drop(window);
            // The region it was bound to may have been released meanwhile.
            self.adapter.deferred_regions.retry(false);
        }
    }
}

impl Drop for MwBody {
    fn drop(&mut self) {
        let mw = lock(&self.window).mw.take();
        if let Some(mw) = mw {
            drop(mw);
            self.adapter.deferred_regions.retry(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qps_release_takes_only_the_windows_last_bound_through_it() {
        let mut binding = Binding::default();
        assert!(!binding.release_from(7), "never bound");
        binding.bound_through(7);
        assert!(!binding.release_from(8), "bound through another QP");
        assert!(binding.release_from(7));
        assert!(!binding.release_from(7), "taken once");
        binding.bound_through(7);
        binding.bound_through(9);
        assert!(!binding.release_from(7), "bound through QP 9 since");
        assert!(binding.release_from(9));
    }

    #[test]
    fn a_bind_advances_the_keys_low_byte_only() {
        assert_eq!(MwBody::next_rkey(0x1234_5600), 0x1234_5601);
        assert_eq!(MwBody::next_rkey(0x1234_56FF), 0x1234_5600);
    }

    #[test]
    fn bound_windows_are_noted_once_and_only_live_ones_taken() {
        let windows = BoundWindows::default();
        let kept = Arc::new(1);
        let released = Arc::new(2);
        windows.note(&kept);
        windows.note(&released);
        windows.note(&kept);
        drop(released);
        let taken = windows.take();
        assert_eq!(taken.len(), 1);
        assert!(Arc::ptr_eq(&taken[0], &kept));
        assert!(windows.take().is_empty(), "the list is emptied");
    }
}
