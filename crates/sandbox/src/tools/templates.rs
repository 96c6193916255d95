//! list_templates: the templates create_sandbox can ask for, with their packages and sizes.

use crate::manager::Manager;
use crate::template::Manifest;
use bridge_core::{BridgeBuilder, NoArgs, ToolCtx, ToolSpec};
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::Arc;

#[derive(Debug, Serialize, JsonSchema)]
pub struct Templates {
    /// The templates by name: their pip packages, size in bytes and build time.
    pub templates: Vec<Manifest>,
    /// Where they are built (`mcp-bridges sandbox template build NAME --pip PKG==VERSION`); the server lists
    /// them when it starts.
    pub directory: String,
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    b.tool(
        ToolSpec::new(
            "list_templates",
            "List the sandbox templates: root file systems with Python packages installed (e.g. numpy, \
             pandas), each with its packages and size. Pass a name as create_sandbox's `template`.",
        )
        .title("List Sandbox Templates")
        .read_only()
        .handler_on(Arc::clone(mgr), |m, _: NoArgs, _: ToolCtx| async move {
            Ok(Templates {
                templates: m.templates.iter().map(|t| t.manifest.clone()).collect(),
                directory: crate::template::templates_dir(&m.settings.state_dir)
                    .display()
                    .to_string(),
            })
        }),
    );
}
