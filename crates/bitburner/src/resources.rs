//! The NetScript definitions and every server's files as MCP resources, so a client can read them without a
//! tool call. `bitburner://files/{server}/{path}`; segments are percent-encoded where URIs need it.

use crate::tools::Ctx;
use crate::tools::args::FileArgs;
use bridge_core::ToolError;
use bridge_core::resource::{ResourceBody, ResourceInfo, ResourceProvider, ResourceTemplateInfo};
use futures::future::BoxFuture;

pub const DEFINITIONS_URI: &str = "bitburner://definitions/NetscriptDefinitions.d.ts";
const FILES_PREFIX: &str = "bitburner://files/";

/// The resource URI of one file.
pub fn file_uri(server: &str, path: &str) -> String {
    let encoded: Vec<String> = path.split('/').map(encode).collect();
    format!("{FILES_PREFIX}{}/{}", encode(server), encoded.join("/"))
}

/// `(server, path)` of a file URI.
pub fn parse_file_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix(FILES_PREFIX)?;
    let (server, path) = rest.split_once('/')?;
    let path: Option<Vec<String>> = path.split('/').map(decode).collect();
    Some((decode(server)?, path?.join("/")))
}

fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn mime_for(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("js" | "jsx" | "script") => "text/javascript",
        Some("ts" | "tsx") => "text/typescript",
        Some("json") => "application/json",
        Some("css") => "text/css",
        _ => "text/plain",
    }
}

/// Serves the resources from the live game.
pub struct GameResources {
    pub ctx: Ctx,
}

impl ResourceProvider for GameResources {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ResourceInfo>, ToolError>> {
        Box::pin(async move {
            let mut all = vec![ResourceInfo {
                uri: DEFINITIONS_URI.to_owned(),
                name: "NetscriptDefinitions.d.ts".to_owned(),
                description: Some(
                    "TypeScript declarations of the connected game's NetScript API".to_owned(),
                ),
                mime_type: Some("text/typescript".to_owned()),
            }];
            // Only `home` is listed: other servers are reachable through the template, and listing them all
            // would cost one request per server on every resources/list.
            if self.ctx.link.is_connected() {
                let home = crate::tools::args::ServerArgs {
                    server: "home".to_owned(),
                };
                if let Ok(list) = self.ctx.list_files(home).await {
                    all.extend(list.files.into_iter().map(|f| ResourceInfo {
                        uri: file_uri("home", &f),
                        description: Some(format!("{f} on home")),
                        mime_type: Some(mime_for(&f).to_owned()),
                        name: f,
                    }));
                }
            }
            Ok(all)
        })
    }

    fn templates(&self) -> Vec<ResourceTemplateInfo> {
        vec![ResourceTemplateInfo {
            uri_template: "bitburner://files/{server}/{+path}".to_owned(),
            name: "Game file".to_owned(),
            description: Some(
                "A script or text file on an in-game server, e.g. bitburner://files/home/hack.js"
                    .to_owned(),
            ),
            mime_type: None,
        }]
    }

    fn read<'a>(&'a self, uri: &'a str) -> BoxFuture<'a, Result<Option<ResourceBody>, ToolError>> {
        Box::pin(async move {
            if uri == DEFINITIONS_URI {
                let text = self.ctx.definitions().await?;
                return Ok(Some(ResourceBody::Text {
                    mime_type: "text/typescript".to_owned(),
                    text: text.as_str().to_owned(),
                }));
            }
            let Some((server, path)) = parse_file_uri(uri) else {
                return Ok(None);
            };
            let (path, text) = self
                .ctx
                .file_content(&FileArgs {
                    filename: path,
                    server,
                })
                .await?;
            Ok(Some(ResourceBody::Text {
                mime_type: mime_for(&path).to_owned(),
                text,
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_round_trip() {
        for (server, path) in [
            ("home", "hack.js"),
            ("I.I.I.I", "lib/a b%.js"),
            ("home", "ünï/x.txt"),
        ] {
            let uri = file_uri(server, path);
            assert!(uri.starts_with(FILES_PREFIX) && !uri.contains(' '), "{uri}");
            assert_eq!(
                parse_file_uri(&uri),
                Some((server.to_owned(), path.to_owned()))
            );
        }
        assert_eq!(
            file_uri("home", "dir/x.js"),
            "bitburner://files/home/dir/x.js"
        );
        assert_eq!(parse_file_uri("bitburner://definitions/x"), None);
    }
}
