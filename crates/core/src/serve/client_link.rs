//! The client side of one call, as a handler sees it through `ToolCtx`: logging, capabilities, legacy
//! server-to-client requests, and the sealed state of stateless-era input rounds (SEP-2322).
//!
//! Logging, sampling and roots are deprecated by SEP-2577 but still part of both eras we serve, so this
//! module uses rmcp's deprecated types on purpose.
#![allow(deprecated)]

use crate::error::ToolError;
use crate::tool::interaction::ClientLink;
use crate::tool::{ClientCapability, Elicitation, InputRequest, InputRequired, LogLevel};
use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, CreateMessageRequest, CreateMessageRequestParams, ElicitRequest,
    ElicitRequestParams, InputRequests, InputRequiredResult, ListRootsRequest, LoggingLevel,
    RequestStateCodec, SamplingMessage,
};
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use serde_json::Value;
use std::sync::{Arc, Mutex};

pub(crate) struct PeerClient {
    pub peer: Peer<RoleServer>,
    /// The capabilities the request's `_meta` declared; without them, the session's from `initialize`, read
    /// when a handler asks (few do) rather than copied for every call.
    pub declared: Option<ClientCapabilities>,
    /// Lowest level the client wants; `None`: it asked for no logs, so none are sent.
    pub log_threshold: Option<LogLevel>,
}

impl ClientLink for PeerClient {
    #[allow(deprecated)]
    fn log(&self, level: LogLevel, data: Value) -> BoxFuture<'static, ()> {
        let wanted = self
            .log_threshold
            .is_some_and(|threshold| level >= threshold);
        let peer = self.peer.clone();
        Box::pin(async move {
            if !wanted {
                return;
            }
            let param =
                rmcp::model::LoggingMessageNotificationParam::new(to_rmcp_level(level), data);
            if let Err(e) = peer.notify_logging_message(param).await {
                tracing::debug!("log notification not delivered: {e}");
            }
        })
    }

    fn supports(&self, capability: ClientCapability) -> bool {
        let session;
        let caps = match &self.declared {
            Some(caps) => caps,
            None => match self.peer.peer_info() {
                Some(info) => {
                    session = info;
                    &session.capabilities
                }
                None => return false,
            },
        };
        match capability {
            ClientCapability::Elicitation => caps.elicitation.is_some(),
            ClientCapability::Sampling => caps.sampling.is_some(),
            ClientCapability::Roots => caps.roots.is_some(),
        }
    }

    fn elicit(
        &self,
        message: String,
        schema: Value,
    ) -> BoxFuture<'static, Result<Elicitation, ToolError>> {
        let peer = self.peer.clone();
        let supported = self.supports(ClientCapability::Elicitation);
        Box::pin(async move {
            if !supported {
                return Err(ToolError::missing_client_capability(
                    ClientCapability::Elicitation,
                ));
            }
            let params = elicit_params(message, schema)?;
            let result = peer
                .create_elicitation(params)
                .await
                .map_err(peer_request_failed)?;
            let action = serde_json::to_value(&result.action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            Ok(Elicitation {
                action,
                content: result.content,
            })
        })
    }

    fn sample(
        &self,
        prompt: String,
        max_tokens: u32,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        let peer = self.peer.clone();
        let supported = self.supports(ClientCapability::Sampling);
        Box::pin(async move {
            if !supported {
                return Err(ToolError::missing_client_capability(
                    ClientCapability::Sampling,
                ));
            }
            let params = CreateMessageRequestParams::new(
                vec![SamplingMessage::user_text(prompt)],
                max_tokens,
            );
            let result = peer
                .create_message(params)
                .await
                .map_err(peer_request_failed)?;
            serde_json::to_value(result).map_err(|e| ToolError::internal(e.to_string()))
        })
    }
}

fn peer_request_failed(e: rmcp::ServiceError) -> ToolError {
    ToolError::unsupported(format!("the client could not answer: {e}")).with_hint(
        "in the 2026-07-28 protocol a tool returns InputRequired instead of asking mid-call",
    )
}

fn elicit_params(message: String, schema: Value) -> Result<ElicitRequestParams, ToolError> {
    let requested_schema = serde_json::from_value(schema)
        .map_err(|e| ToolError::internal(format!("elicitation schema not usable: {e}")))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    })
}

fn to_rmcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

pub(crate) fn from_rmcp_level(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

/// The legacy session's `logging/setLevel`, shared by every call of the session.
pub(crate) type SessionLogLevel = Arc<Mutex<Option<LogLevel>>>;

/// The error a tool's `E_MISSING_CAPABILITY` becomes: JSON-RPC -32021 naming what is missing.
pub(crate) fn missing_capability(error: &ToolError) -> McpError {
    let name = error
        .details()
        .get("capability")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut required = ClientCapabilities::default();
    let empty = Default::default();
    match name {
        "sampling" => required.sampling = Some(empty),
        "roots" => required.roots = Some(Default::default()),
        _ => required.elicitation = Some(Default::default()),
    }
    McpError::missing_required_client_capability(required)
}

/// Seals and opens the state a tool carries across input rounds, so a client cannot forge it.
pub(crate) struct StateSeal {
    codec: RequestStateCodec,
}

impl StateSeal {
    pub(crate) fn new() -> Self {
        // A fresh key per process: state from before a restart is refused, and the tool simply asks again.
        let key: [u8; 32] = rand::random();
        Self {
            codec: RequestStateCodec::new(key.to_vec()),
        }
    }

    pub(crate) fn open(&self, sealed: &str) -> Result<Value, McpError> {
        self.codec.open_json(sealed).map_err(|_| {
            McpError::invalid_params("requestState failed integrity verification", None)
        })
    }

    pub(crate) fn input_required(
        &self,
        input: InputRequired,
    ) -> Result<InputRequiredResult, McpError> {
        let mut requests = InputRequests::new();
        for (key, request) in input.requests {
            requests.insert(
                key,
                input_request(request)
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?,
            );
        }
        let state = match input.state {
            Some(state) => Some(self.codec.seal_json(&state).map_err(|e| {
                McpError::internal_error(format!("cannot seal requestState: {e}"), None)
            })?),
            None => None,
        };
        Ok(InputRequiredResult::new(Some(requests), state))
    }
}

fn input_request(request: InputRequest) -> Result<rmcp::model::InputRequest, ToolError> {
    Ok(match request {
        InputRequest::Elicit { message, schema } => rmcp::model::InputRequest::Elicitation(
            ElicitRequest::new(elicit_params(message, schema)?),
        ),
        InputRequest::Sample { prompt, max_tokens } => rmcp::model::InputRequest::CreateMessage(
            CreateMessageRequest::new(CreateMessageRequestParams::new(
                vec![SamplingMessage::user_text(prompt)],
                max_tokens,
            )),
        ),
        InputRequest::ListRoots => {
            rmcp::model::InputRequest::ListRoots(ListRootsRequest::default())
        }
    })
}
