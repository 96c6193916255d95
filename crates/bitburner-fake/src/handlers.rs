//! The fake game's dispatcher and method handlers. Each branch copies a real behaviour; the source is named
//! beside it (`docs/protocols/bitburner.md` section, and the game file it comes from).

use crate::GameVersion;
use crate::world::{GameServer, World};
use bridge_bitburner::path::{ExtensionSet, FileKind, resolve_file_path};
use serde_json::{Value, json};

/// What the dispatcher does with one text frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Send this frame back.
    Send(String),
    /// Send nothing: the real game throws inside its handler (invalid JSON, v2.x missing params).
    Silent,
}

/// `handleMessageEvent` in `src/RemoteFileAPI/Remote.ts` (§2.2).
pub fn dispatch(world: &mut World, version: GameVersion, text: &str) -> Reply {
    // §2.2: `JSON.parse(e.data)` without try/catch — invalid JSON is an uncaught exception, no answer.
    let Ok(message) = serde_json::from_str::<Value>(text) else {
        return Reply::Silent;
    };
    // `msg.id` is echoed verbatim, whatever its type; an absent id gives a response with no `id` key (§6).
    // A batch (array) has no `.id` and no `.method`, so it gets the unknown-message error without id (§2.2).
    let id = message.get("id").cloned();
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let params = message.get("params");
    let outcome = match handle(world, version, method, params) {
        Some(outcome) => outcome,
        None => return Reply::Silent,
    };
    Reply::Send(frame(version, id, outcome))
}

/// `JSON.stringify(new RFAMessage({result|error, id}))`: the key order differs between v2/v3.0 and dev (§2.1).
fn frame(version: GameVersion, id: Option<Value>, outcome: Result<Value, String>) -> String {
    // Written by hand: serde_json's map sorts keys, and the key order is what differs between versions.
    let (key, value) = match outcome {
        Ok(result) => ("result", result),
        Err(error) => ("error", Value::String(error)),
    };
    let id = id.map(|id| format!(",\"id\":{id}")).unwrap_or_default();
    if version == GameVersion::Dev {
        format!("{{\"jsonrpc\":\"2.0\"{id},\"{key}\":{value}}}")
    } else {
        format!("{{\"jsonrpc\":\"2.0\",\"{key}\":{value}{id}}}")
    }
}

type Outcome = Option<Result<Value, String>>;

fn handle(
    world: &mut World,
    version: GameVersion,
    method: &str,
    params: Option<&Value>,
) -> Outcome {
    let v2 = version == GameVersion::V2_6;
    match method {
        "pushFile" => push_file(world, version, params),
        "getFile" => get_file(world, version, params),
        "deleteFile" => delete_file(world, version, params),
        "getFileNames" => get_file_names(world, version, params),
        "getAllFiles" => get_all_files(world, version, params),
        "calculateRam" => calculate_ram(world, version, params),
        // Both ignore params (§3 table).
        "getDefinitionFile" => Some(Ok(json!(world.definitions))),
        "getAllServers" => Some(Ok(all_servers(world))),
        // v2.8.1 (#2004); absent from v2.6.1.
        "getSaveFile" if !v2 => Some(Ok(save_file(world))),
        // v3.0.0 (#2199).
        "getFileMetadata" if !v2 => file_metadata(world, version, params),
        "getAllFileMetadata" if !v2 => all_file_metadata(world, version, params),
        _ => Some(Err(bridge_bitburner::wire::UNKNOWN_METHOD.to_owned())),
    }
}

/// The `isFileData`/`isFileLocation`/`isFileServer` checks: bare `typeof x === "string"`; extra keys ignored.
/// v2.x reads `params.server` without a guard, so missing params throw and nothing is sent (§3.1, §8 id 36);
/// v3 answers "Missing params" / "Invalid params: …".
fn fields<'a>(
    version: GameVersion,
    params: Option<&'a Value>,
    names: &[&str],
    v2_message: &str,
) -> Option<Result<Vec<&'a str>, String>> {
    let params = match params {
        Some(p) if truthy(p) => p,
        _ if version == GameVersion::V2_6 => return None,
        _ => return Some(Err("Missing params".to_owned())),
    };
    let got: Option<Vec<&str>> = names
        .iter()
        .map(|n| params.get(*n).and_then(Value::as_str))
        .collect();
    Some(got.ok_or_else(|| match version {
        GameVersion::V2_6 => v2_message.to_owned(),
        _ => format!("Invalid params: {params}"),
    }))
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn extensions(version: GameVersion) -> ExtensionSet {
    match version {
        GameVersion::V2_6 => ExtensionSet::V2_6,
        _ => ExtensionSet::V3_0,
    }
}

/// Errors whose text changed in the v3.0 refactor (PR #2211, §3.1).
enum Failure<'a> {
    Path(&'a str),
    PathDeleteOrRam(&'a str),
    Extension(&'a str),
    Host(&'a str),
    Missing(&'a str),
}

fn failure(version: GameVersion, f: Failure<'_>) -> String {
    let v2 = version == GameVersion::V2_6;
    match f {
        Failure::Path(_) if v2 => "Invalid file path".to_owned(),
        Failure::PathDeleteOrRam(_) if v2 => "Invalid filename".to_owned(),
        Failure::Path(name) | Failure::PathDeleteOrRam(name) => {
            format!("Invalid file path: {name}")
        }
        Failure::Extension(_) if v2 => "Invalid file extension".to_owned(),
        Failure::Extension(name) => format!("Invalid file extension. Filename: {name}"),
        Failure::Host(_) if v2 => "Server hostname invalid".to_owned(),
        Failure::Host(host) => format!("Invalid hostname: {host}"),
        Failure::Missing(_) if v2 => "File doesn't exist".to_owned(),
        Failure::Missing(name) => format!("File does not exist. Filename: {name}"),
    }
}

/// Path, then host, then extension: `pushFile a.exe` on `home` gives the extension error (§8 id 6).
fn locate(
    world: &World,
    version: GameVersion,
    filename: &str,
    host: &str,
    delete_or_ram: bool,
) -> Result<(String, FileKind), String> {
    let Some(path) = resolve_file_path(filename) else {
        return Err(failure(
            version,
            if delete_or_ram {
                Failure::PathDeleteOrRam(filename)
            } else {
                Failure::Path(filename)
            },
        ));
    };
    if world.server(host).is_none() {
        return Err(failure(version, Failure::Host(host)));
    }
    match extensions(version).kind_of(&path) {
        Some(kind) => Ok((path, kind)),
        None => Err(failure(version, Failure::Extension(filename))),
    }
}

fn push_file(world: &mut World, version: GameVersion, params: Option<&Value>) -> Outcome {
    let [filename, content, host] = match fields(
        version,
        params,
        &["filename", "content", "server"],
        "Misses parameters",
    )? {
        Ok(f) => <[&str; 3]>::try_from(f).ok()?,
        Err(e) => return Some(Err(e)),
    };
    let (path, kind) = match locate(world, version, filename, host, false) {
        Ok(found) => found,
        Err(e) => return Some(Err(e)),
    };
    let server = world.server_mut(host)?;
    server.write(&path, content, kind == FileKind::Script);
    Some(Ok(json!("OK")))
}

/// `{filename, server}` of a request, checked and located as the game does; `Err` is the handler's whole answer.
fn file_location<'a>(
    world: &World,
    version: GameVersion,
    params: Option<&'a Value>,
    delete_or_ram: bool,
) -> Result<(&'a str, &'a str, String, FileKind), Outcome> {
    let [filename, host] = match fields(
        version,
        params,
        &["filename", "server"],
        "Message misses parameters",
    ) {
        None => return Err(None),
        Some(Err(e)) => return Err(Some(Err(e))),
        Some(Ok(f)) => <[&str; 2]>::try_from(f).map_err(|_| None)?,
    };
    let (path, kind) =
        locate(world, version, filename, host, delete_or_ram).map_err(|e| Some(Err(e)))?;
    Ok((filename, host, path, kind))
}

fn get_file(world: &mut World, version: GameVersion, params: Option<&Value>) -> Outcome {
    let (filename, host, path, _) = match file_location(world, version, params, false) {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    // `""` is a valid content and is sent (§8 id 16).
    Some(
        world
            .server(host)
            .and_then(|s| s.file(&path))
            .map(|f| json!(f.content))
            .ok_or_else(|| failure(version, Failure::Missing(filename))),
    )
}

fn delete_file(world: &mut World, version: GameVersion, params: Option<&Value>) -> Outcome {
    let [filename, host] = match fields(
        version,
        params,
        &["filename", "server"],
        "Message misses parameters",
    )? {
        Ok(f) => <[&str; 2]>::try_from(f).ok()?,
        Err(e) => return Some(Err(e)),
    };
    if version == GameVersion::V2_6 {
        // v2.x has no extension check: `deleteFile NUKE.exe` answers OK (§3.2, §8 id 31).
        let Some(path) = resolve_file_path(filename) else {
            return Some(Err(failure(version, Failure::PathDeleteOrRam(filename))));
        };
        let Some(server) = world.server_mut(host) else {
            return Some(Err(failure(version, Failure::Host(host))));
        };
        if let Some(i) = server.programs.iter().position(|p| *p == path) {
            server.programs.remove(i);
            return Some(Ok(json!("OK")));
        }
        let is_script = ExtensionSet::V2_6.kind_of(&path) == Some(FileKind::Script);
        return Some(match server.remove(&path, is_script) {
            Ok(()) => Ok(json!("OK")),
            Err(e) => Err(e),
        });
    }
    let (path, kind) = match locate(world, version, filename, host, true) {
        Ok(found) => found,
        Err(e) => return Some(Err(e)),
    };
    let server = world.server_mut(host)?;
    // The messages of `BaseServer.removeFile`, e.g. "Script test.js not found." (§8 id 24).
    Some(
        server
            .remove(&path, kind == FileKind::Script)
            .map(|()| json!("OK")),
    )
}

/// The server `{server}` names, checked as the game does; `Err` is the handler's whole answer.
fn server_of<'w>(
    world: &'w World,
    version: GameVersion,
    params: Option<&Value>,
) -> Result<&'w GameServer, Outcome> {
    let host = match fields(version, params, &["server"], "Message misses parameters") {
        None => return Err(None),
        Some(Err(e)) => return Err(Some(Err(e))),
        Some(Ok(f)) => f.first().copied().unwrap_or_default(),
    };
    world
        .server(host)
        .ok_or_else(|| Some(Err(failure(version, Failure::Host(host)))))
}

fn get_file_names(world: &mut World, version: GameVersion, params: Option<&Value>) -> Outcome {
    let server = match server_of(world, version, params) {
        Ok(server) => server,
        Err(answer) => return answer,
    };
    // Text files first, then scripts (§3 table, §8 id 25).
    let names: Vec<&str> = server
        .text_files
        .iter()
        .chain(&server.scripts)
        .map(|(p, _)| p.as_str())
        .collect();
    Some(Ok(json!(names)))
}

fn get_all_files(world: &mut World, version: GameVersion, params: Option<&Value>) -> Outcome {
    let server = match server_of(world, version, params) {
        Ok(server) => server,
        Err(answer) => return answer,
    };
    // Scripts first, then text files (§3 table, §8 id 17).
    let files: Vec<Value> = server
        .scripts
        .iter()
        .chain(&server.text_files)
        .map(|(p, f)| json!({"filename": p, "content": f.content}))
        .collect();
    Some(Ok(json!(files)))
}

fn calculate_ram(world: &mut World, version: GameVersion, params: Option<&Value>) -> Outcome {
    let (filename, host, path, kind) = match file_location(world, version, params, true) {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    let v2 = version == GameVersion::V2_6;
    if kind != FileKind::Script {
        return Some(Err(if v2 {
            "Filename isn't a script filename".to_owned()
        } else {
            format!("File is not a script. Filename: {filename}")
        }));
    }
    let Some(script) = world.server(host).and_then(|s| s.script(&path)) else {
        return Some(Err(failure(version, Failure::Missing(filename))));
    };
    Some(match ram_cost(&script.content) {
        Some(ram) => Ok(json!(ram)),
        None if v2 => Err("Ram cost could not be calculated".to_owned()),
        None => Err(format!(
            "Cannot calculate RAM usage of an invalid script. Filename: {filename}"
        )),
    })
}

/// A stand-in for the game's static RAM calculator: 1.6 GB base plus a few NS call costs; unbalanced braces
/// stand in for a syntax error. Matches §8 ids 4 (1.7 for one `ns.hack`) and 20 (syntax error).
pub(crate) fn ram_cost(code: &str) -> Option<f64> {
    let opens = code.matches('{').count();
    let closes = code.matches('}').count();
    if opens != closes {
        return None;
    }
    let costs = [("ns.hack(", 0.1), ("ns.grow(", 0.15), ("ns.weaken(", 0.15)];
    let ram: f64 = 1.6
        + costs
            .iter()
            .map(|(call, cost)| code.matches(call).count() as f64 * cost)
            .sum::<f64>();
    Some((ram * 100.0).round() / 100.0)
}

fn all_servers(world: &World) -> Value {
    let servers: Vec<Value> = world
        .servers
        .iter()
        .map(|s| {
            json!({
                "hostname": s.hostname,
                "hasAdminRights": s.has_admin_rights,
                "purchasedByPlayer": s.purchased_by_player,
            })
        })
        .collect();
    json!(servers)
}

/// `{identifier, binary, save}`; a binary save is one char per byte (`String.fromCharCode`), so bytes above
/// 0x7F arrive as U+0080..U+00FF and must be decoded with `charCodeAt`, not UTF-8 (§3 table).
fn save_file(world: &World) -> Value {
    let mut bytes: Vec<u8> = vec![0x1f, 0x8b, 0x08, 0x00, 0xff, 0x80];
    bytes.extend(world.servers.iter().flat_map(|s| s.hostname.bytes()));
    let save: String = bytes.iter().map(|b| char::from(*b)).collect();
    json!({"identifier": "bitburnerSave", "binary": true, "save": save})
}

fn metadata_json(path: &str, f: &crate::world::GameFile) -> Value {
    json!({"filename": path, "atime": f.atime, "mtime": f.mtime, "btime": f.btime})
}

fn file_metadata(world: &mut World, version: GameVersion, params: Option<&Value>) -> Outcome {
    let (filename, host, path, _) = match file_location(world, version, params, false) {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    Some(
        world
            .server(host)
            .and_then(|s| s.file(&path))
            .map(|f| metadata_json(&path, f))
            .ok_or_else(|| failure(version, Failure::Missing(filename))),
    )
}

fn all_file_metadata(world: &mut World, version: GameVersion, params: Option<&Value>) -> Outcome {
    let server = match server_of(world, version, params) {
        Ok(server) => server,
        Err(answer) => return answer,
    };
    let all: Vec<Value> = server
        .scripts
        .iter()
        .chain(&server.text_files)
        .map(|(p, f)| metadata_json(p, f))
        .collect();
    Some(Ok(json!(all)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(world: &mut World, version: GameVersion, frame: &str) -> Option<Value> {
        match dispatch(world, version, frame) {
            Reply::Send(text) => serde_json::from_str(&text).ok(),
            Reply::Silent => None,
        }
    }

    /// The v2.6.1 transcript of `docs/protocols/bitburner.md` §8, replayed frame by frame.
    #[test]
    fn replays_the_v2_6_transcript() {
        let mut w = World::default();
        let v = GameVersion::V2_6;
        let script = "export async function main(ns){ ns.hack('n00dles'); }";
        let steps: Vec<(Value, Option<Value>)> = vec![
            (
                json!({"jsonrpc":"2.0","id":1,"method":"getFileNames","params":{"server":"home"}}),
                Some(json!({"jsonrpc":"2.0","result":[],"id":1})),
            ),
            (
                json!({"jsonrpc":"2.0","id":2,"method":"pushFile","params":{"server":"home","filename":"test.js","content":script}}),
                Some(json!({"jsonrpc":"2.0","result":"OK","id":2})),
            ),
            (
                json!({"jsonrpc":"2.0","id":3,"method":"getFile","params":{"server":"home","filename":"test.js"}}),
                Some(json!({"jsonrpc":"2.0","result":script,"id":3})),
            ),
            (
                json!({"jsonrpc":"2.0","id":4,"method":"calculateRam","params":{"server":"home","filename":"test.js"}}),
                Some(json!({"jsonrpc":"2.0","result":1.7,"id":4})),
            ),
            (
                json!({"jsonrpc":"2.0","id":5,"method":"getFile","params":{"server":"home","filename":"nope.js"}}),
                Some(json!({"jsonrpc":"2.0","error":"File doesn't exist","id":5})),
            ),
            (
                json!({"jsonrpc":"2.0","id":6,"method":"pushFile","params":{"server":"home","filename":"a.exe","content":""}}),
                Some(json!({"jsonrpc":"2.0","error":"Invalid file extension","id":6})),
            ),
            (
                json!({"jsonrpc":"2.0","id":7,"method":"noSuchMethod","params":{}}),
                Some(json!({"jsonrpc":"2.0","error":"Unknown message received","id":7})),
            ),
            (
                json!({"jsonrpc":"2.0","id":"str-id","method":"getFileNames","params":{"server":"home"}}),
                Some(json!({"jsonrpc":"2.0","result":["test.js"],"id":"str-id"})),
            ),
            (
                json!({"jsonrpc":"2.0","method":"getFileNames","params":{"server":"home"}}),
                Some(json!({"jsonrpc":"2.0","result":["test.js"]})),
            ),
            (
                json!({"id":10,"method":"getFileNames","params":{"server":"home"}}),
                Some(json!({"jsonrpc":"2.0","result":["test.js"],"id":10})),
            ),
            (
                json!({"id":11,"method":"getFileNames","params":{"server":"nonexistent-host"}}),
                Some(json!({"jsonrpc":"2.0","error":"Server hostname invalid","id":11})),
            ),
            (
                json!({"id":12,"method":"pushFile","params":{"server":"home","filename":"/dir/sub/x.js","content":"x"}}),
                Some(json!({"jsonrpc":"2.0","result":"OK","id":12})),
            ),
            (
                json!({"id":13,"method":"pushFile","params":{"server":"home","filename":"../x.js","content":"x"}}),
                Some(json!({"jsonrpc":"2.0","error":"Invalid file path","id":13})),
            ),
            (
                json!({"id":14,"method":"pushFile","params":{"server":"home","filename":"has space.js","content":"x"}}),
                Some(json!({"jsonrpc":"2.0","error":"Invalid file path","id":14})),
            ),
            (
                json!({"id":15,"method":"pushFile","params":{"server":"home","filename":"notes.txt","content":""}}),
                Some(json!({"jsonrpc":"2.0","result":"OK","id":15})),
            ),
            (
                json!({"id":16,"method":"getFile","params":{"server":"home","filename":"notes.txt"}}),
                Some(json!({"jsonrpc":"2.0","result":"","id":16})),
            ),
            (
                json!({"id":18,"method":"calculateRam","params":{"server":"home","filename":"notes.txt"}}),
                Some(json!({"jsonrpc":"2.0","error":"Filename isn't a script filename","id":18})),
            ),
            (
                json!({"id":19,"method":"pushFile","params":{"server":"home","filename":"bad.js","content":"function main( {"}}),
                Some(json!({"jsonrpc":"2.0","result":"OK","id":19})),
            ),
            (
                json!({"id":20,"method":"calculateRam","params":{"server":"home","filename":"bad.js"}}),
                Some(json!({"jsonrpc":"2.0","error":"Ram cost could not be calculated","id":20})),
            ),
            (
                json!({"id":23,"method":"deleteFile","params":{"server":"home","filename":"test.js"}}),
                Some(json!({"jsonrpc":"2.0","result":"OK","id":23})),
            ),
            (
                json!({"id":24,"method":"deleteFile","params":{"server":"home","filename":"test.js"}}),
                Some(json!({"jsonrpc":"2.0","error":"Script test.js not found.","id":24})),
            ),
            (
                json!({"id":25,"method":"getFileNames","params":{"server":"home"}}),
                Some(
                    json!({"jsonrpc":"2.0","result":["notes.txt","dir/sub/x.js","bad.js"],"id":25}),
                ),
            ),
            (
                json!([{"id":26,"method":"getFileNames","params":{"server":"home"}}]),
                Some(json!({"jsonrpc":"2.0","error":"Unknown message received"})),
            ),
            (
                json!({"id":27,"method":"pushFile","params":{"server":"home","filename":"noext","content":"x"}}),
                Some(json!({"jsonrpc":"2.0","error":"Invalid file path","id":27})),
            ),
            (
                json!({"id":29,"method":"getFile","params":{"server":"home","filename":"/dir/sub/x.js"}}),
                Some(json!({"jsonrpc":"2.0","result":"x","id":29})),
            ),
            (
                json!({"id":30,"method":"getFile","params":{"filename":"x.js"}}),
                Some(json!({"jsonrpc":"2.0","error":"Message misses parameters","id":30})),
            ),
            (
                json!({"id":31,"method":"deleteFile","params":{"server":"home","filename":"NUKE.exe"}}),
                Some(json!({"jsonrpc":"2.0","result":"OK","id":31})),
            ),
            (
                json!({"id":1.5,"method":"getAllServers","params":{}}),
                Some(json!({"jsonrpc":"2.0","result":[
                    {"hostname":"home","hasAdminRights":true,"purchasedByPlayer":true},
                    {"hostname":"n00dles","hasAdminRights":false,"purchasedByPlayer":false},
                    {"hostname":"pserv-0","hasAdminRights":true,"purchasedByPlayer":true}],"id":1.5})),
            ),
            (json!({"jsonrpc":"2.0","id":36,"method":"getFile"}), None),
            (
                json!({"id":37,"method":"getSaveFile","params":{}}),
                Some(json!({"jsonrpc":"2.0","error":"Unknown message received","id":37})),
            ),
        ];
        for (request, expected) in steps {
            assert_eq!(run(&mut w, v, &request.to_string()), expected, "{request}");
        }
        assert_eq!(dispatch(&mut w, v, "this is not json"), Reply::Silent);
    }

    #[test]
    fn v3_errors_are_detailed_and_missing_params_are_answered() {
        let mut w = World::default();
        let v = GameVersion::V3_0;
        let cases = [
            (
                json!({"id":1,"method":"getFile"}),
                json!({"jsonrpc":"2.0","error":"Missing params","id":1}),
            ),
            (
                json!({"id":2,"method":"getFile","params":{"server":"home","filename":"../x.js"}}),
                json!({"jsonrpc":"2.0","error":"Invalid file path: ../x.js","id":2}),
            ),
            (
                json!({"id":3,"method":"deleteFile","params":{"server":"home","filename":"NUKE.exe"}}),
                json!({"jsonrpc":"2.0","error":"Invalid file extension. Filename: NUKE.exe","id":3}),
            ),
            (
                json!({"id":4,"method":"getFile","params":{"server":"nowhere","filename":"x.js"}}),
                json!({"jsonrpc":"2.0","error":"Invalid hostname: nowhere","id":4}),
            ),
            (
                json!({"id":5,"method":"getFile","params":{"server":"home","filename":"x.css"}}),
                json!({"jsonrpc":"2.0","error":"File does not exist. Filename: x.css","id":5}),
            ),
            (
                json!({"id":6,"method":"getFile","params":{"server":"home"}}),
                json!({"jsonrpc":"2.0","error":"Invalid params: {\"server\":\"home\"}","id":6}),
            ),
        ];
        for (request, expected) in cases {
            assert_eq!(
                run(&mut w, v, &request.to_string()),
                Some(expected),
                "{request}"
            );
        }
    }

    #[test]
    fn dev_puts_the_id_before_the_result() {
        let mut w = World::default();
        let reply = dispatch(
            &mut w,
            GameVersion::Dev,
            r#"{"id":1,"method":"getFileNames","params":{"server":"home"}}"#,
        );
        assert_eq!(
            reply,
            Reply::Send(r#"{"jsonrpc":"2.0","id":1,"result":[]}"#.into())
        );
    }

    #[test]
    fn binary_saves_are_one_char_per_byte() {
        let w = World::default();
        let save = save_file(&w);
        let text = save["save"].as_str().unwrap_or_default();
        let bytes: Vec<u32> = text.chars().take(6).map(u32::from).collect();
        assert_eq!(bytes, vec![0x1f, 0x8b, 0x08, 0x00, 0xff, 0x80]);
    }
}
