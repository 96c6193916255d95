//! A panicking handler must still answer its call: the panic is caught at the call's boundary and becomes
//! an `E_INTERNAL` result, counted like any other outcome.

use futures::FutureExt;
use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

/// Runs `fut`; a panic inside it becomes `Err` with the panic's message.
pub(crate) async fn caught<F: Future>(fut: F) -> Result<F::Output, String> {
    // Unwind safety: the future is dropped after a panic, and what it shared (a link, a map) is either behind
    // a lock that recovers from poisoning or not touched again by this call.
    AssertUnwindSafe(fut).catch_unwind().await.map_err(message)
}

pub(crate) fn message(payload: Box<dyn Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
