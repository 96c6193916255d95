//! The game's own file-path and extension rules, so a bad name is rejected before anything is sent.
//!
//! Copied from `bitburner-src` `src/Paths/FilePath.ts` (`resolveFilePath`) and `src/Paths/Directory.ts`
//! (`oneValidCharacter`, `resolveValidatedDirectory`); see `docs/protocols/bitburner.md` §4. The game keeps the
//! final word: its extension sets differ by version, so we accept the union and let it refuse the rest.

use std::fmt;

/// Whether the game stores a file as a script or as a text file (it decides by extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Script,
    Text,
}

/// The extensions one game version accepts through the Remote API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtensionSet {
    pub scripts: &'static [&'static str],
    pub text: &'static [&'static str],
}

impl ExtensionSet {
    /// v2.6.x (`ScriptFilePath.ts` before @80119d7, `TextFilePath.ts` @e80b775).
    pub const V2_6: Self = Self {
        scripts: &[".js", ".script"],
        text: &[".txt", ".json"],
    };
    /// v2.7.0 – v2.8.x: TS/JSX scripts arrived.
    pub const V2_7: Self = Self {
        scripts: &[".js", ".jsx", ".ts", ".tsx", ".script"],
        text: &[".txt", ".json"],
    };
    /// v3.0.0+: `.css` text files arrived (#2378).
    pub const V3_0: Self = Self {
        scripts: &[".js", ".jsx", ".ts", ".tsx", ".script"],
        text: &[".txt", ".json", ".css"],
    };
    /// What the bridge checks locally: every extension any version accepts.
    pub const ANY_VERSION: Self = Self::V3_0;

    /// The game matches with `endsWith`, case-sensitively.
    pub fn kind_of(&self, path: &str) -> Option<FileKind> {
        if self.scripts.iter().any(|ext| path.ends_with(ext)) {
            Some(FileKind::Script)
        } else if self.text.iter().any(|ext| path.ends_with(ext)) {
            Some(FileKind::Text)
        } else {
            None
        }
    }

    fn describe(&self) -> String {
        let all: Vec<&str> = self.scripts.iter().chain(self.text).copied().collect();
        all.join(" ")
    }
}

/// Why a filename breaks the game's rules; the text tells the agent what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    Empty,
    ForbiddenChar(char),
    Whitespace,
    EmptyDirectoryName,
    ClimbsAboveRoot,
    NoExtension,
    BadExtension { allowed: String },
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("filename is empty or only whitespace"),
            Self::ForbiddenChar(c) => write!(
                f,
                "filename contains {c:?}; the game forbids * ? [ ] ! \\ ~ | # \" ' in paths"
            ),
            Self::Whitespace => f.write_str("filename contains a space, which the game forbids"),
            Self::EmptyDirectoryName => {
                f.write_str("filename has an empty directory name (`//` or a trailing `/`)")
            }
            Self::ClimbsAboveRoot => f.write_str("filename climbs above the root with `..`"),
            Self::NoExtension => {
                f.write_str("filename needs a name and an extension, e.g. `dir/hack.js`")
            }
            Self::BadExtension { allowed } => {
                write!(f, "the game stores only these extensions: {allowed}")
            }
        }
    }
}

impl std::error::Error for PathError {}

/// A path the game would accept, in the form it stores (no leading `/`, relative parts resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GamePath {
    pub path: String,
    pub kind: FileKind,
}

/// Validate `input` as the game does for every file method of the Remote API.
pub fn validate(input: &str, extensions: &ExtensionSet) -> Result<GamePath, PathError> {
    if input.chars().all(is_js_whitespace) {
        return Err(PathError::Empty);
    }
    let path = resolve_file_path(input).ok_or_else(|| explain(input))?;
    let kind = extensions
        .kind_of(&path)
        .ok_or_else(|| PathError::BadExtension {
            allowed: extensions.describe(),
        })?;
    Ok(GamePath { path, kind })
}

/// The game's `resolveFilePath(path, "")`: `None` where the game answers "Invalid file path".
pub fn resolve_file_path(input: &str) -> Option<String> {
    if !is_relative(input) {
        let path = input.strip_prefix('/').unwrap_or(input);
        split_file_parts(path)?;
        return Some(path.to_owned());
    }
    let (directory, file) = split_file_parts(input)?;
    let mut resolved: Vec<&str> = Vec::new();
    for segment in directory.split_terminator('/') {
        match segment {
            "." => {}
            ".." => {
                resolved.pop()?;
            }
            other => resolved.push(other),
        }
    }
    let mut out = String::new();
    for segment in resolved {
        out.push_str(segment);
        out.push('/');
    }
    out.push_str(file);
    Some(out)
}

/// JS `\s`: the game's regex class, which differs from Rust's `char::is_whitespace` (U+FEFF yes, U+0085 no).
fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{000B}' | '\u{000C}' | '\r' | ' ' | '\u{00A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

const FORBIDDEN: &[char] = &['*', '?', '[', ']', '!', '\\', '~', '|', '#', '"', '\''];

/// The game forbids the plain space only (`invalidCharacters` in v2.6.1 and v3.0 `Directory.ts` lists `" "`):
/// a tab, a no-break space or any other whitespace is an ordinary character of a name there.
fn is_valid_char(c: char) -> bool {
    c != '/' && c != ' ' && !FORBIDDEN.contains(&c)
}

/// `/(?:^|\/)\.{1,2}\//` from `Directory.ts`: a `.` or `..` directory anywhere makes the path relative.
fn is_relative(path: &str) -> bool {
    path.starts_with("./")
        || path.starts_with("../")
        || path.contains("/./")
        || path.contains("/../")
}

/// `^((?:valid+/)*)(valid+\.valid+)$`: the directory part (with its trailing `/`) and the file part.
fn split_file_parts(path: &str) -> Option<(&str, &str)> {
    let (directory, file) = match path.rfind('/') {
        Some(i) => (&path[..=i], &path[i + 1..]),
        None => ("", path),
    };
    let directory_ok = directory
        .split_terminator('/')
        .all(|segment| !segment.is_empty() && segment.chars().all(is_valid_char));
    if !directory_ok || !file.chars().all(is_valid_char) {
        return None;
    }
    let chars: Vec<char> = file.chars().collect();
    let has_name_and_extension = chars
        .iter()
        .enumerate()
        .any(|(i, c)| *c == '.' && i >= 1 && i + 1 < chars.len());
    has_name_and_extension.then_some((directory, file))
}

/// Name the first rule `input` breaks, for a message the agent can act on.
fn explain(input: &str) -> PathError {
    if let Some(c) = input.chars().find(|c| FORBIDDEN.contains(c)) {
        return PathError::ForbiddenChar(c);
    }
    if input.contains(' ') {
        return PathError::Whitespace;
    }
    let body = input.strip_prefix('/').unwrap_or(input);
    if body.contains("//") || body.starts_with('/') || body.ends_with('/') {
        return PathError::EmptyDirectoryName;
    }
    if is_relative(input) {
        return PathError::ClimbsAboveRoot;
    }
    PathError::NoExtension
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (input, what the game stores) for names it accepts; cases from `docs/protocols/bitburner.md` §4 and §8.
    const ACCEPTED: &[(&str, &str)] = &[
        ("test.js", "test.js"),
        ("/dir/sub/x.js", "dir/sub/x.js"),
        ("dir/sub/x.js", "dir/sub/x.js"),
        ("./x.js", "x.js"),
        ("a/../x.js", "x.js"),
        ("a/./b/x.js", "a/b/x.js"),
        ("notes.txt", "notes.txt"),
        ("data.json", "data.json"),
        ("style.css", "style.css"),
        ("comp.tsx", "comp.tsx"),
        ("old.script", "old.script"),
        ("archive.tar.js", "archive.tar.js"),
        ("..x.js", "..x.js"),
        ("ünïcødé/файл.js", "ünïcødé/файл.js"),
        // Only the plain space is forbidden (v2.6.1 `Directory.ts`); the game stores these as they are.
        ("tab\tx.js", "tab\tx.js"),
        ("nbsp\u{00A0}x.js", "nbsp\u{00A0}x.js"),
        ("bom\u{FEFF}x.js", "bom\u{FEFF}x.js"),
        ("a:b.js", "a:b.js"),
    ];

    /// (input, the rule it breaks).
    const REJECTED: &[(&str, PathError)] = &[
        ("", PathError::Empty),
        ("   ", PathError::Empty),
        ("\t\n", PathError::Empty),
        ("../x.js", PathError::ClimbsAboveRoot),
        ("a/../../x.js", PathError::ClimbsAboveRoot),
        ("has space.js", PathError::Whitespace),
        ("noext", PathError::NoExtension),
        (".js", PathError::NoExtension),
        ("x.", PathError::NoExtension),
        ("dir//x.js", PathError::EmptyDirectoryName),
        ("//x.js", PathError::EmptyDirectoryName),
        ("dir/", PathError::EmptyDirectoryName),
        ("a*.js", PathError::ForbiddenChar('*')),
        ("a?.js", PathError::ForbiddenChar('?')),
        ("[a].js", PathError::ForbiddenChar('[')),
        ("a].js", PathError::ForbiddenChar(']')),
        ("a!.js", PathError::ForbiddenChar('!')),
        ("a\\b.js", PathError::ForbiddenChar('\\')),
        ("~a.js", PathError::ForbiddenChar('~')),
        ("a|b.js", PathError::ForbiddenChar('|')),
        ("a#b.js", PathError::ForbiddenChar('#')),
        ("a\"b.js", PathError::ForbiddenChar('"')),
        ("a'b.js", PathError::ForbiddenChar('\'')),
    ];

    #[test]
    fn accepted_names_resolve_to_the_stored_form() {
        for (input, stored) in ACCEPTED {
            let got = validate(input, &ExtensionSet::ANY_VERSION);
            assert_eq!(
                got.as_ref().map(|p| p.path.as_str()),
                Ok(*stored),
                "input {input:?}"
            );
        }
    }

    #[test]
    fn rejected_names_name_the_broken_rule() {
        for (input, rule) in REJECTED {
            assert_eq!(
                validate(input, &ExtensionSet::ANY_VERSION).as_ref(),
                Err(rule),
                "input {input:?}"
            );
        }
    }

    #[test]
    fn extensions_follow_the_version() {
        let cases: &[(&str, ExtensionSet, Option<FileKind>)] = &[
            ("a.exe", ExtensionSet::ANY_VERSION, None),
            ("a.lit", ExtensionSet::ANY_VERSION, None),
            ("a.JS", ExtensionSet::ANY_VERSION, None),
            ("a.ts", ExtensionSet::V2_6, None),
            ("a.ts", ExtensionSet::V2_7, Some(FileKind::Script)),
            ("a.css", ExtensionSet::V2_7, None),
            ("a.css", ExtensionSet::V3_0, Some(FileKind::Text)),
            ("a.script", ExtensionSet::V2_6, Some(FileKind::Script)),
            ("a.json", ExtensionSet::V2_6, Some(FileKind::Text)),
        ];
        for (input, set, kind) in cases {
            assert_eq!(set.kind_of(input), *kind, "input {input:?}");
        }
        assert!(matches!(
            validate("a.exe", &ExtensionSet::ANY_VERSION),
            Err(PathError::BadExtension { .. })
        ));
    }

    #[test]
    fn messages_say_what_to_change() {
        let msg = PathError::BadExtension {
            allowed: ExtensionSet::V2_6.describe(),
        }
        .to_string();
        assert!(msg.contains(".js") && msg.contains(".txt"), "{msg}");
        assert!(PathError::ForbiddenChar('#').to_string().contains("'#'"));
    }
}
