//! Logs go to stderr only: on the stdio transport, stdout is the protocol.

use super::LogFormat;
use std::fmt::Write as _;
use std::io::IsTerminal;
use tracing::callsite::{DefaultCallsite, Identifier};
use tracing::field::{Field, FieldSet, Value, Visit};
use tracing::metadata::Kind;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

/// What is logged unless `RUST_LOG` says otherwise. rmcp logs every stateless request's start and end and a
/// session's whole `clientInfo` at INFO (three lines a call, and a client chooses how big); our own INFO lines
/// say what a person running the bridge needs, once per session or connection.
const DEFAULT_FILTER: &str = "info,rmcp=warn";

/// Where the brief line for a JSON-RPC error answer is logged from.
const BRIEF_TARGET: &str = "bridge_core::serve";

/// How much of an error's message the brief line keeps.
const BRIEF_MESSAGE_CHARS: usize = 200;

/// Installs the global subscriber. Level from `RUST_LOG` (default [`DEFAULT_FILTER`]). Safe to call twice: the
/// second call is ignored, which tests rely on.
pub fn init_logging(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    // Colour codes only help a person at a terminal; in a client's log file they are noise.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Text => fmt.map_event_format(BriefErrorAnswers).boxed(),
        LogFormat::Json => fmt.json().map_event_format(BriefErrorAnswers).boxed(),
    };
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .try_init();
}

/// rmcp's `warn!(%id, ?error, "response error")`: every JSON-RPC error the server answers (an unknown tool, a
/// stale resource URI), at WARN with the error's whole `data`. A client's mistake is not the server's
/// warning, and the payload can be as big as the client made it.
fn is_rmcp_error_answer(meta: &Metadata<'_>) -> bool {
    meta.is_event()
        && *meta.level() == Level::WARN
        && meta.target() == "rmcp::service"
        && meta.fields().field("id").is_some()
        && meta.fields().field("error").is_some()
}

/// Formats rmcp's error answers as one INFO line of ours (request id, JSON-RPC code, the start of the message)
/// and every other event as it was. The line is written in rmcp's event's place, not dispatched anew, so it
/// shows exactly when rmcp's WARN would have (`RUST_LOG=rmcp=off` hides both).
struct BriefErrorAnswers<F>(F);

/// The metadata of the brief line: a callsite of its own, built as `tracing`'s macros build theirs.
static BRIEF_CALLSITE: DefaultCallsite = DefaultCallsite::new(&BRIEF_METADATA);
static BRIEF_METADATA: Metadata<'static> = Metadata::new(
    "answered a JSON-RPC error",
    BRIEF_TARGET,
    Level::INFO,
    Some(file!()),
    Some(line!()),
    Some(module_path!()),
    FieldSet::new(&["message", "id", "code"], Identifier(&BRIEF_CALLSITE)),
    Kind::EVENT,
);

impl<S, N, F> FormatEvent<S, N> for BriefErrorAnswers<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        if !is_rmcp_error_answer(event.metadata()) {
            return self.0.format_event(ctx, writer, event);
        }
        let mut fields = ErrorFields::default();
        event.record(&mut fields);
        let (code, message) = summarize(&fields.error);
        let set = BRIEF_METADATA.fields();
        let (Some(message_field), Some(id_field), Some(code_field)) =
            (set.field("message"), set.field("id"), set.field("code"))
        else {
            return self.0.format_event(ctx, writer, event);
        };
        let text = format_args!("answered a JSON-RPC error: {message}");
        let id = tracing::field::display(fields.id.as_str());
        let values: [(&Field, Option<&dyn Value>); 3] = [
            (&message_field, Some(&text as &dyn Value)),
            (&id_field, Some(&id as &dyn Value)),
            (&code_field, Some(&code as &dyn Value)),
        ];
        let values = set.value_set(&values);
        self.0
            .format_event(ctx, writer, &Event::new(&BRIEF_METADATA, &values))
    }
}

#[derive(Default)]
struct ErrorFields {
    id: String,
    error: String,
}

impl Visit for ErrorFields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let slot = match field.name() {
            "id" => &mut self.id,
            "error" => &mut self.error,
            _ => return,
        };
        slot.clear();
        let _ = write!(slot, "{value:?}");
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &format_args!("{value}"));
    }
}

/// The code and the message of rmcp's `ErrorData` as its derived `Debug` prints it (`ErrorData { code:
/// ErrorCode(-32602), message: "...", data: ... }`; rmcp is pinned, and a test checks the shape). Anything else
/// is kept whole, cut to [`BRIEF_MESSAGE_CHARS`].
fn summarize(error: &str) -> (i64, String) {
    let code = error
        .split_once("code: ErrorCode(")
        .and_then(|(_, rest)| rest.split_once(')'))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or(0);
    let message = error
        .split_once("message: \"")
        .and_then(|(_, rest)| rest.rsplit_once("\", data: "))
        .map_or(error, |(message, _)| message);
    let mut brief: String = message.chars().take(BRIEF_MESSAGE_CHARS).collect();
    if brief.len() < message.len() {
        brief.push('…');
    }
    (code, brief)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::ErrorData;
    use serde_json::json;

    #[test]
    fn an_error_answer_is_its_code_and_message_without_the_data() {
        let error = ErrorData::invalid_params(
            "unknown tool \"nope\"",
            Some(json!({ "payload": "x".repeat(10_000) })),
        );
        let (code, message) = summarize(&format!("{error:?}"));
        assert_eq!(code, -32602);
        assert_eq!(message, "unknown tool \\\"nope\\\"");
    }

    #[test]
    fn a_long_message_is_cut() {
        let error = ErrorData::resource_not_found("y".repeat(5_000), None);
        let (code, message) = summarize(&format!("{error:?}"));
        assert_eq!(code, -32002);
        assert_eq!(message.chars().count(), BRIEF_MESSAGE_CHARS + 1);
        assert!(message.ends_with('…'));
    }

    #[test]
    fn only_rmcp_error_answers_are_rewritten() {
        use std::sync::{Arc, Mutex};
        use tracing_subscriber::fmt::MakeWriter;

        #[derive(Clone, Default)]
        struct Captured(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if let Ok(mut out) = self.0.lock() {
                    out.extend_from_slice(buf);
                }
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        impl<'a> MakeWriter<'a> for Captured {
            type Writer = Captured;
            fn make_writer(&'a self) -> Self::Writer {
                self.clone()
            }
        }

        let captured = Captured::default();
        // The same layering as `init_logging`, into a buffer; the global dispatcher stays untouched.
        let fmt = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(captured.clone())
            .map_event_format(BriefErrorAnswers);
        let subscriber =
            tracing_subscriber::registry().with(fmt.with_filter(EnvFilter::new(DEFAULT_FILTER)));
        let error =
            ErrorData::invalid_params("unknown tool", Some(json!({"big": "z".repeat(4096)})));
        tracing::subscriber::with_default(subscriber, || {
            let id = 7;
            tracing::warn!(target: "rmcp::service", %id, ?error, "response error");
            tracing::warn!(target: "rmcp::service", "Error sending response");
        });
        let text = String::from_utf8(captured.0.lock().map(|b| b.clone()).unwrap_or_default())
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            !text.contains("zzzz"),
            "the error's data was logged: {text}"
        );
        assert!(!text.contains("response error"), "{text}");
        let brief: Vec<_> = lines
            .iter()
            .filter(|l| l.contains("answered a JSON-RPC error: unknown tool"))
            .collect();
        assert_eq!(brief.len(), 1, "{text}");
        assert!(
            brief[0].contains(" INFO ") && brief[0].contains("code=-32602"),
            "{text}"
        );
        assert!(brief[0].contains("id=7"), "{text}");
        // rmcp's other warnings are still there, as they were.
        assert!(
            text.contains("WARN") && text.contains("Error sending response"),
            "{text}"
        );
    }
}
