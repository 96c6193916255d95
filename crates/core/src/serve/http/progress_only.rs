//! The transport of the peers behind the front paths (the stateless fast path's, each legacy session's): it
//! receives nothing, and the only message such a peer sends while a front call runs is that call's progress,
//! which goes to where the call gathers what its client will read. Anything else fails as undeliverable.

use rmcp::RoleServer;
use rmcp::model::{JsonRpcMessage, JsonRpcNotification, ProgressToken, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use std::future::Future;

/// Where a front path's progress notifications go.
pub(super) trait ProgressRoute: Send + 'static {
    /// What a failed send says when the peer sent something other than progress.
    const NOT_PROGRESS: &'static str;

    /// Hands `item`, a progress notification for `token`, to its call; an error when no call takes it.
    fn route(
        &self,
        token: &ProgressToken,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> std::io::Result<()>;
}

/// A send-only [`Transport`] that delivers progress through `R` and nothing else.
pub(super) struct ProgressOnly<R>(pub R);

impl<R: ProgressRoute> Transport<RoleServer> for ProgressOnly<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let token = match &item {
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ServerNotification::ProgressNotification(progress),
                ..
            }) => Some(progress.params.progress_token.clone()),
            _ => None,
        };
        let sent = match token {
            Some(token) => self.0.route(&token, item),
            None => Err(undeliverable(R::NOT_PROGRESS)),
        };
        std::future::ready(sent)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        std::future::pending().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The error of a send that has nowhere to go.
pub(super) fn undeliverable(why: &'static str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotConnected, why)
}
