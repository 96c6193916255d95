//! Resources a bridge serves beyond its event streams (a game's files, API definitions).

use crate::error::ToolError;
use futures::future::BoxFuture;

/// A resource as listed to clients.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// A family of resources addressed by an RFC 6570 template, e.g. `bitburner://files/{server}/{filename}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceTemplateInfo {
    pub uri_template: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// The contents of one resource.
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceBody {
    Text { mime_type: String, text: String },
    Blob { mime_type: String, bytes: Vec<u8> },
}

/// Supplies resources. Several providers may serve one bridge; each answers for the URIs it owns.
pub trait ResourceProvider: Send + Sync + 'static {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ResourceInfo>, ToolError>>;

    fn templates(&self) -> Vec<ResourceTemplateInfo> {
        Vec::new()
    }

    /// `Ok(None)` means "not mine": the next provider is asked.
    fn read<'a>(&'a self, uri: &'a str) -> BoxFuture<'a, Result<Option<ResourceBody>, ToolError>>;
}
