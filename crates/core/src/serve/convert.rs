//! The one place where the core's types become rmcp's wire types.

use crate::bridge::{PromptMessage, PromptRole, PromptSpec};
use crate::error::{ERROR_META_KEY, ToolError};
use crate::resource::{ResourceBody, ResourceInfo, ResourceTemplateInfo};
use crate::tool::{Content, TaskSupport, ToolOutput, ToolSpec};
use rmcp::model::{
    CallToolResult, ContentBlock, MetaObject, Prompt, PromptArgument, Resource, ResourceContents,
    ResourceTemplate, Role, TASKS_EXTENSION_ID, Tool, ToolAnnotations,
};
use serde_json::value::RawValue;
use std::sync::Arc;

pub(crate) fn tool(spec: &ToolSpec) -> Tool {
    let a = spec.annotations;
    let mut annotations = ToolAnnotations::new()
        .read_only(a.read_only)
        .destructive(a.destructive && !a.read_only)
        .idempotent(a.idempotent)
        .open_world(a.open_world);
    annotations.title = spec.title.clone();
    let mut tool = Tool::new_with_raw(
        spec.name.clone(),
        Some(spec.description.clone().into()),
        Arc::new(spec.input_schema.clone()),
    )
    .with_annotations(annotations);
    if let Some(title) = &spec.title {
        tool = tool.with_title(title.clone());
    }
    if let Some(output) = &spec.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(output.clone()));
    }
    if let Some(support) = task_support(spec.task_support) {
        // rmcp's `Tool` has no `execution` field (2025-11-25's `execution.taskSupport`), and the tasks extension
        // lets the server decide per call; the tool's `_meta` under the extension's id says which tools may
        // become tasks, in the same words: `{"taskSupport": "optional" | "required"}`.
        let mut meta = serde_json::Map::new();
        meta.insert(
            TASKS_EXTENSION_ID.to_owned(),
            serde_json::json!({ TASK_SUPPORT_FIELD: support }),
        );
        tool.meta = Some(MetaObject(meta));
    }
    tool
}

/// The field of a tool's `_meta[io.modelcontextprotocol/tasks]` that says whether its calls may become tasks.
pub(crate) const TASK_SUPPORT_FIELD: &str = "taskSupport";

fn task_support(support: TaskSupport) -> Option<&'static str> {
    match support {
        TaskSupport::Never => None,
        TaskSupport::Optional => Some("optional"),
        TaskSupport::Required => Some("required"),
    }
}

pub(crate) fn content(c: &Content) -> ContentBlock {
    owned_content(c.clone())
}

// By value: a tool's result is moved into the wire form, not copied (the text can be large).
fn owned_content(c: Content) -> ContentBlock {
    match c {
        Content::Text(text) => ContentBlock::text(text),
        Content::Json(json) => ContentBlock::text(json.get()),
        Content::Image { base64, mime_type } => ContentBlock::image(base64, mime_type),
        Content::Audio { base64, mime_type } => ContentBlock::audio(base64, mime_type),
        Content::Resource {
            uri,
            mime_type,
            text,
        } => ContentBlock::resource(ResourceContents::TextResourceContents {
            uri,
            mime_type: Some(mime_type),
            text,
            meta: None,
        }),
        Content::ResourceLink {
            uri,
            name,
            mime_type,
            description,
            size,
        } => {
            let mut link = Resource::new(uri, name);
            link.mime_type = mime_type;
            link.description = description;
            link.size = size;
            ContentBlock::resource_link(link)
        }
    }
}

/// The result of a finished call, in rmcp's form: a [`Content::Json`] block's text parsed into
/// `structuredContent`, for paths where rmcp writes the answer.
pub(crate) fn success(output: ToolOutput) -> CallToolResult {
    let (result, structured) = success_raw(output);
    with_structured(result, structured)
}

/// [`success`], with the `structuredContent` a [`Content::Json`] block stands for kept beside the result as
/// its text, for a writer that puts it into the answer as it is ([`super::inline::write_result`]).
pub(crate) fn success_raw(output: ToolOutput) -> (CallToolResult, Option<Box<RawValue>>) {
    let mut structured = None;
    let mut content = Vec::with_capacity(output.content.len());
    for block in output.content {
        match block {
            Content::Json(json) if output.structured.is_none() && structured.is_none() => {
                content.push(ContentBlock::text(json.get()));
                structured = Some(json.into_raw());
            }
            block => content.push(owned_content(block)),
        }
    }
    let mut result = CallToolResult::success(content);
    result.structured_content = output.structured;
    (result, structured)
}

/// `result` with `structured` (JSON text) parsed into its `structuredContent`. Text that is valid JSON
/// still fails to parse when a number is out of a double's range: then the call fails, as a result the
/// client could not read would.
pub(crate) fn with_structured(
    mut result: CallToolResult,
    structured: Option<Box<RawValue>>,
) -> CallToolResult {
    let Some(structured) = structured else {
        return result;
    };
    match serde_json::from_str(structured.get()) {
        Ok(value) => {
            result.structured_content = Some(value);
            result
        }
        Err(e) => failure(&ToolError::internal(format!(
            "the result's structuredContent is not readable JSON: {e}"
        ))),
    }
}

/// An error result every client delivers intact: no `structuredContent` (the TypeScript SDK validates it against
/// the tool's `outputSchema` even when `isError` is true, and turns a mismatch into a protocol error that hides
/// the code and the hint), the text `[CODE] message — hint` for the model, and the machine-readable object in
/// `_meta` under [`ERROR_META_KEY`], which every SDK passes through untouched.
pub(crate) fn failure(error: &ToolError) -> CallToolResult {
    let error = error.shortened();
    let mut result = CallToolResult::error(vec![ContentBlock::text(error.to_string())]);
    let mut meta = serde_json::Map::new();
    meta.insert(ERROR_META_KEY.to_owned(), error.to_structured());
    result.meta = Some(MetaObject(meta));
    result
}

pub(crate) fn resource(info: &ResourceInfo) -> Resource {
    let mut resource = Resource::new(info.uri.clone(), info.name.clone());
    resource.description = info.description.clone();
    resource.mime_type = info.mime_type.clone();
    resource
}

pub(crate) fn resource_template(info: &ResourceTemplateInfo) -> ResourceTemplate {
    let mut template = ResourceTemplate::new(info.uri_template.clone(), info.name.clone());
    template.description = info.description.clone();
    template.mime_type = info.mime_type.clone();
    template
}

pub(crate) fn resource_body(uri: &str, body: ResourceBody) -> ResourceContents {
    match body {
        ResourceBody::Text { mime_type, text } => ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some(mime_type),
            text,
            meta: None,
        },
        ResourceBody::Blob { mime_type, bytes } => ResourceContents::BlobResourceContents {
            uri: uri.to_owned(),
            mime_type: Some(mime_type),
            blob: base64_encode(&bytes),
            meta: None,
        },
    }
}

pub(crate) fn prompt(spec: &PromptSpec) -> Prompt {
    let arguments: Vec<PromptArgument> = spec
        .arguments
        .iter()
        .map(|(name, description, required)| {
            PromptArgument::new(name.clone())
                .with_description(description.clone())
                .with_required(*required)
        })
        .collect();
    Prompt::new(
        spec.name.clone(),
        Some(spec.description.clone()),
        (!arguments.is_empty()).then_some(arguments),
    )
}

pub(crate) fn prompt_message(m: &PromptMessage) -> rmcp::model::PromptMessage {
    let role = match m.role {
        PromptRole::User => Role::User,
        PromptRole::Assistant => Role::Assistant,
    };
    rmcp::model::PromptMessage::new(role, content(&m.content))
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
