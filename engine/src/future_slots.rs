//! Reused homes for reconcile futures.
//!
//! A reconcile future is often kilobytes: every request it awaits is laid out inside it. A
//! fresh box per reconcile sends an allocation of that size through the allocator's slow path
//! every time: glibc serves requests past 1 KiB after merging its small free chunks and
//! sorting them into size-ordered bins, work that grows with the heap. The boxes are kept
//! instead, one per reconcile in flight and at most `bound`, and each new future is written
//! into one in place.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// A pinned box a future of type `F` can be written into.
type Slot<F> = Pin<Box<Option<F>>>;

/// The free boxes for futures of one type, at most `bound` kept.
pub(crate) struct FutureSlots<F> {
    free: Mutex<Vec<Slot<F>>>,
    bound: usize,
}

impl<F: Future> FutureSlots<F> {
    /// Keeps at most `bound` free boxes (0 keeps none: every future gets a fresh box).
    pub(crate) fn new(bound: usize) -> Arc<Self> {
        Arc::new(FutureSlots {
            free: Mutex::new(Vec::new()),
            bound,
        })
    }

    /// `future`, written into a free box (or a new one), as a future of its own that gives
    /// the box back when it is dropped, finished or not.
    pub(crate) fn hold(self: &Arc<Self>, future: F) -> Held<F> {
        let reused = self.free.lock().ok().and_then(|mut free| free.pop());
        let mut slot = reused.unwrap_or_else(|| Box::pin(None));
        slot.as_mut().set(Some(future));
        Held {
            slot: Some(slot),
            slots: Arc::clone(self),
        }
    }

    /// How many free boxes are kept now.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.free.lock().map(|free| free.len()).unwrap_or(0)
    }
}

/// A future living in a box of [`FutureSlots`]; polls it, then drops it in place.
pub(crate) struct Held<F: Future> {
    /// `None` only while being dropped.
    slot: Option<Slot<F>>,
    slots: Arc<FutureSlots<F>>,
}

impl<F: Future> Future for Held<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(slot) = self.slot.as_mut() else {
            return Poll::Pending;
        };
        let Some(future) = slot.as_mut().as_pin_mut() else {
            panic!("a reconcile future was polled after it finished");
        };
        let output = std::task::ready!(future.poll(cx));
        // What the future still holds (its request, its context) goes now, not when the
        // box is next used.
        slot.as_mut().set(None);
        Poll::Ready(output)
    }
}

impl<F: Future> Drop for Held<F> {
    fn drop(&mut self) {
        let Some(mut slot) = self.slot.take() else {
            return;
        };
        // A future dropped unfinished (cancelled, or its task gone) is dropped here.
        slot.as_mut().set(None);
        if let Ok(mut free) = self.slots.free.lock()
            && free.len() < self.slots.bound
        {
            free.push(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops, so a test sees when a held future's state is released.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn future(dropped: &Arc<AtomicUsize>, n: u32) -> impl Future<Output = u32> + use<> {
        let counted = Counted(Arc::clone(dropped));
        async move {
            let _counted = counted;
            n
        }
    }

    #[test]
    fn a_box_is_reused_and_its_future_dropped_when_it_finishes() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let slots = FutureSlots::new(2);
        let first = slots.hold(future(&dropped, 1));
        let address = first.slot.as_ref().map(|slot| &**slot as *const _);
        assert_eq!(futures_lite::future::block_on(first), 1);
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "dropped on finishing");
        assert_eq!(slots.kept(), 1, "its box came back");
        let second = slots.hold(future(&dropped, 2));
        assert_eq!(
            second.slot.as_ref().map(|slot| &**slot as *const _),
            address,
            "the same box, written in place"
        );
        assert_eq!(slots.kept(), 0);
        assert_eq!(futures_lite::future::block_on(second), 2);
    }

    #[test]
    fn an_unfinished_future_is_dropped_with_its_holder_and_the_kept_boxes_are_bounded() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let slots = FutureSlots::new(2);
        let held: Vec<_> = (0..3).map(|n| slots.hold(future(&dropped, n))).collect();
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
        drop(held);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            3,
            "every unfinished future dropped"
        );
        assert_eq!(slots.kept(), 2, "no more boxes kept than the bound");
        let none = FutureSlots::new(0);
        drop(none.hold(future(&dropped, 0)));
        assert_eq!(none.kept(), 0);
    }
}
