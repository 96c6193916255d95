//! The file tools of the seed design: one tool, one Remote API method.

use super::Ctx;
use super::args::{FileArgs, ServerArgs, WriteArgs, game_path};
use crate::resources::file_uri;
use crate::wire::Method;
use bridge_core::{Rendered, ToolError, ToolSpec, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileList {
    pub server: String,
    /// Paths without a leading `/`; the game lists text files first, then scripts.
    pub files: Vec<String>,
    pub count: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileContent {
    pub server: String,
    pub filename: String,
    pub content: String,
    pub bytes: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Written {
    pub server: String,
    /// The path as the game stores it.
    pub filename: String,
    pub bytes: usize,
    /// The resource that now holds the file.
    pub uri: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    pub server: String,
    pub filename: String,
    pub deleted: bool,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FileEntry {
    pub filename: String,
    pub content: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AllFiles {
    pub server: String,
    /// Scripts first, then text files (the game's order).
    pub files: Vec<FileEntry>,
    pub count: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Ram {
    pub server: String,
    pub filename: String,
    /// RAM one thread of the script needs, in GB.
    pub ram_gb: f64,
}

fn unexpected(method: Method, got: &Value) -> ToolError {
    let mut shown = got.to_string();
    shown.truncate(200);
    ToolError::remote(format!(
        "the game answered {} with an unexpected value: {shown}",
        method.name()
    ))
}

impl Ctx {
    pub async fn list_files(&self, args: ServerArgs) -> Result<FileList, ToolError> {
        let value = self.link.call(Method::GetFileNames, args.params()).await?;
        let files: Vec<String> = serde_json::from_value(value.clone())
            .map_err(|_| unexpected(Method::GetFileNames, &value))?;
        Ok(FileList {
            server: args.server,
            count: files.len(),
            files,
        })
    }

    pub async fn read_file(&self, args: FileArgs) -> Result<FileContent, ToolError> {
        let (path, params) = args.params()?;
        let value = self.link.call(Method::GetFile, params).await?;
        let Value::String(content) = value else {
            return Err(unexpected(Method::GetFile, &value));
        };
        Ok(FileContent {
            server: args.server,
            filename: path,
            bytes: content.len(),
            content,
        })
    }

    pub async fn write_file(&self, args: WriteArgs) -> Result<Written, ToolError> {
        let path = game_path("filename", &args.filename)?;
        check::max_bytes("content", &args.content, self.limits.file_write_max_bytes)?;
        let bytes = args.content.len();
        let params = Map::from_iter([
            ("filename".to_owned(), Value::from(path.as_str())),
            ("content".to_owned(), Value::String(args.content)),
            ("server".to_owned(), Value::from(args.server.as_str())),
        ]);
        self.link.call(Method::PushFile, params).await?;
        let uri = file_uri(&args.server, &path);
        self.hub.resource_updated(&uri);
        Ok(Written {
            server: args.server,
            filename: path,
            bytes,
            uri,
        })
    }

    pub async fn delete_file(&self, args: FileArgs) -> Result<Deleted, ToolError> {
        let (path, params) = args.params()?;
        self.link.call(Method::DeleteFile, params).await?;
        self.hub.resource_updated(&file_uri(&args.server, &path));
        Ok(Deleted {
            server: args.server,
            filename: path,
            deleted: true,
        })
    }

    pub async fn get_all_files(&self, args: ServerArgs) -> Result<AllFiles, ToolError> {
        let value = self.link.call(Method::GetAllFiles, args.params()).await?;
        let files: Vec<FileEntry> = serde_json::from_value(value.clone())
            .map_err(|_| unexpected(Method::GetAllFiles, &value))?;
        Ok(AllFiles {
            server: args.server,
            count: files.len(),
            files,
        })
    }

    pub async fn calculate_ram(&self, args: FileArgs) -> Result<Ram, ToolError> {
        let (path, params) = args.params()?;
        let value = self.link.call(Method::CalculateRam, params).await?;
        let ram_gb = value
            .as_f64()
            .ok_or_else(|| unexpected(Method::CalculateRam, &value))?;
        Ok(Ram {
            server: args.server,
            filename: path,
            ram_gb,
        })
    }
}

pub fn specs(ctx: &Ctx) -> Vec<ToolSpec> {
    let budget = ctx.budget(1, ctx.link.config().rpc_timeout);
    let list = ToolSpec::new(
        "list_files",
        "List the script and text files on an in-game server (game method getFileNames).",
    )
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: ServerArgs, _| async move {
        c.list_files(args).await
    });

    let read = ToolSpec::new(
        "read_file",
        "Read one script or text file from an in-game server (game method getFile). The text result is the \
         file's content.",
    )
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_with_text_on(ctx.clone(), |c, args: FileArgs, _| async move {
        let out = c.read_file(args).await?;
        Ok(Rendered {
            text: out.content.clone(),
            value: out,
        })
    });

    let write = ToolSpec::new(
        "write_file",
        "Create or overwrite a script or text file on an in-game server (game method pushFile). Extensions: \
         .js .jsx .ts .tsx .script .txt .json .css (.ts/.jsx/.tsx need game v2.7+, .css v3.0+).",
    )
    .destructive()
    .idempotent()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: WriteArgs, _| async move { c.write_file(args).await });

    let delete = ToolSpec::new(
        "delete_file",
        "Delete a script or text file from an in-game server (game method deleteFile). A running script \
         cannot be deleted.",
    )
    .destructive()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: FileArgs, _| async move { c.delete_file(args).await });

    let all = ToolSpec::new(
        "get_all_files",
        "Read every script and text file of an in-game server at once (game method getAllFiles).",
    )
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: ServerArgs, _| async move {
        c.get_all_files(args).await
    });

    let ram = ToolSpec::new(
        "calculate_ram",
        "RAM in GB one thread of a script needs (game method calculateRam). The script and the files it \
         imports must already be on that server: write them first.",
    )
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: FileArgs, _| async move { c.calculate_ram(args).await });

    vec![list, read, write, delete, all, ram]
}
