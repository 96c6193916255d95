//! The fake game's servers and files, with the orderings the real game shows (JS `Map` insertion order:
//! overwriting a file keeps its place).

use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, PartialEq)]
pub struct GameFile {
    pub content: String,
    /// Milliseconds since the epoch, as `src/Paths/FileMetadata.ts` `plain()` reports them.
    pub btime: f64,
    pub mtime: f64,
    pub atime: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GameServer {
    pub hostname: String,
    pub ip: String,
    pub has_admin_rights: bool,
    pub purchased_by_player: bool,
    pub scripts: Vec<(String, GameFile)>,
    pub text_files: Vec<(String, GameFile)>,
    /// `.exe` files: not readable through the Remote API, but v2.x `deleteFile` removes them.
    pub programs: Vec<String>,
}

impl GameServer {
    pub fn new(hostname: &str, ip: &str, admin: bool, purchased: bool) -> Self {
        Self {
            hostname: hostname.to_owned(),
            ip: ip.to_owned(),
            has_admin_rights: admin,
            purchased_by_player: purchased,
            scripts: Vec::new(),
            text_files: Vec::new(),
            programs: Vec::new(),
        }
    }

    pub fn file(&self, path: &str) -> Option<&GameFile> {
        self.scripts
            .iter()
            .chain(&self.text_files)
            .find(|(p, _)| p == path)
            .map(|(_, f)| f)
    }

    pub fn script(&self, path: &str) -> Option<&GameFile> {
        self.scripts.iter().find(|(p, _)| p == path).map(|(_, f)| f)
    }

    /// `BaseServer.writeToContentFile`: create or overwrite in place.
    pub fn write(&mut self, path: &str, content: &str, is_script: bool) {
        let now = now_ms();
        let list = if is_script {
            &mut self.scripts
        } else {
            &mut self.text_files
        };
        match list.iter_mut().find(|(p, _)| p == path) {
            Some((_, file)) => {
                file.content = content.to_owned();
                file.mtime = now;
            }
            None => list.push((
                path.to_owned(),
                GameFile {
                    content: content.to_owned(),
                    btime: now,
                    mtime: now,
                    atime: now,
                },
            )),
        }
    }

    /// `BaseServer.removeFile` and its messages.
    pub fn remove(&mut self, path: &str, is_script: bool) -> Result<(), String> {
        let (list, label) = if is_script {
            (&mut self.scripts, "Script")
        } else {
            (&mut self.text_files, "Text file")
        };
        match list.iter().position(|(p, _)| p == path) {
            Some(i) => {
                list.remove(i);
                Ok(())
            }
            None => Err(format!("{label} {path} not found.")),
        }
    }
}

/// Every server the fake game knows, `home` first.
#[derive(Debug, Clone, PartialEq)]
pub struct World {
    pub servers: Vec<GameServer>,
    pub definitions: String,
    /// Scripts the in-game helper started (`helper.rs`).
    pub processes: Vec<crate::helper::Process>,
    pub next_pid: u64,
    /// The player's money, as the helper reports it.
    pub money: f64,
}

impl Default for World {
    fn default() -> Self {
        let mut home = GameServer::new("home", "127.0.0.1", true, true);
        home.programs.push("NUKE.exe".to_owned());
        Self {
            servers: vec![
                home,
                GameServer::new("n00dles", "34.2.1.7", false, false),
                GameServer::new("pserv-0", "21.4.8.1", true, true),
            ],
            definitions: default_definitions(),
            processes: Vec::new(),
            next_pid: 0,
            money: 1_000_000.0,
        }
    }
}

impl World {
    /// `GetServer()` in `src/Server/AllServers.ts`: by hostname, then by IP.
    pub fn server(&self, key: &str) -> Option<&GameServer> {
        self.servers
            .iter()
            .find(|s| s.hostname == key)
            .or_else(|| self.servers.iter().find(|s| s.ip == key))
    }

    pub fn server_mut(&mut self, key: &str) -> Option<&mut GameServer> {
        let index = self
            .servers
            .iter()
            .position(|s| s.hostname == key)
            .or_else(|| self.servers.iter().position(|s| s.ip == key))?;
        self.servers.get_mut(index)
    }
}

fn default_definitions() -> String {
    // Shape of `NetscriptDefinitions.d.ts`: `export` kept, as the game sends it.
    "/** Netscript API (fake game). */\n\
     export interface NS {\n  hack(host: string): Promise<number>;\n  grow(host: string): Promise<number>;\n}\n\
     export type ScriptArg = string | number | boolean;\n\
     export declare function main(ns: NS): Promise<void>;\n"
        .to_owned()
}

pub(crate) fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}
