//! Parts of `NetscriptDefinitions.d.ts` (~300 KB, ~75k tokens): one declaration by name, or the lines that
//! mention a term. Line-based: the file is the game's generated declarations, one member per line, and braces
//! in its doc comments come in pairs.

use bridge_core::ToolError;

/// Matches shown by one search; more are counted, not shown.
pub const MAX_MATCHES: usize = 200;
/// A matching line is shown up to this many bytes.
const MAX_LINE_BYTES: usize = 300;
/// The list of names an unknown `namespace` error shows, in bytes.
const MAX_NAMES_BYTES: usize = 4000;

const KINDS: [&str; 6] = [
    "interface ",
    "type ",
    "enum ",
    "class ",
    "namespace ",
    "function ",
];

/// The name a top-level declaration line declares (`export interface NS {` → `NS`).
fn declared_name(line: &str) -> Option<&str> {
    if line.starts_with([' ', '\t']) {
        return None;
    }
    let mut rest = line;
    for prefix in ["export ", "declare ", "const "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = KINDS.iter().find_map(|k| rest.strip_prefix(k))?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Every top-level declaration: (name, first line index).
fn declarations(text: &str) -> Vec<(&str, usize)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| declared_name(line).map(|n| (n, i)))
        .collect()
}

/// A part of the file, and the file's line number (1-based) of its first line.
pub struct Section {
    pub text: String,
    pub first_line: usize,
}

/// The declaration named `name`, with the doc comment right above it.
pub fn namespace(text: &str, name: &str) -> Result<Section, ToolError> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = declarations(text)
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, i)| i)
    else {
        return Err(unknown_namespace(text, name));
    };
    let mut first = start;
    if first > 0 && lines[first - 1].trim_end().ends_with("*/") {
        while first > 0 && !lines[first - 1].trim_start().starts_with("/**") {
            first -= 1;
        }
        first = first.saturating_sub(1);
    }
    let mut depth: i64 = 0;
    let mut opened = false;
    let mut last = start;
    for (i, line) in lines.iter().enumerate().skip(start) {
        opened |= line.contains('{');
        depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
        last = i;
        let ends = if opened {
            depth <= 0
        } else {
            line.trim_end().ends_with(';')
        };
        if ends {
            break;
        }
    }
    let mut out = lines[first..=last].join("\n");
    out.push('\n');
    Ok(Section {
        text: out,
        first_line: first + 1,
    })
}

fn unknown_namespace(text: &str, name: &str) -> ToolError {
    let mut names: Vec<&str> = declarations(text).into_iter().map(|(n, _)| n).collect();
    names.sort_unstable();
    names.dedup();
    let mut shown = String::new();
    for n in &names {
        if shown.len() + n.len() + 1 > MAX_NAMES_BYTES {
            shown.push_str(" …");
            break;
        }
        if !shown.is_empty() {
            shown.push(' ');
        }
        shown.push_str(n);
    }
    ToolError::invalid_argument(
        "namespace",
        format!("the definitions declare no `{name}`; they declare: {shown}"),
    )
    .with_hint(
        "use one of the names listed (case-sensitive), or `search` for a method name such as `getServerMaxRam`",
    )
}

/// Result of a search: the text to show and how many lines matched.
pub struct Found {
    pub text: String,
    pub matches: usize,
}

/// The lines containing `term` (case-insensitive) as `L<n> [<declaration>]: <line>`, numbered from
/// `first_line` (the file's numbering when `text` is a [`Section`] of it).
pub fn search(text: &str, term: &str, first_line: usize) -> Found {
    let needle = term.to_lowercase();
    let mut current = "";
    let mut out = String::new();
    let mut matches = 0;
    for (i, line) in text.lines().enumerate() {
        if let Some(name) = declared_name(line) {
            current = name;
        }
        if !line.to_lowercase().contains(&needle) {
            continue;
        }
        matches += 1;
        if matches > MAX_MATCHES {
            continue;
        }
        let mut shown = line.trim();
        if shown.len() > MAX_LINE_BYTES {
            let mut end = MAX_LINE_BYTES;
            while !shown.is_char_boundary(end) {
                end -= 1;
            }
            shown = &shown[..end];
        }
        out.push_str(&format!("L{} [{current}]: {shown}\n", first_line + i));
    }
    if matches > MAX_MATCHES {
        out.push_str(&format!(
            "[{matches} lines match; the first {MAX_MATCHES} are shown: search for something narrower, or \
             take a `namespace`]\n"
        ));
    }
    Found { text: out, matches }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFS: &str = "/** Hacknet API */\n\
export interface Hacknet {\n  /** Count. {@link NS} */\n  numNodes(): number;\n}\n\
export type ScriptArg = string | number;\n\
/**\n * The NS object.\n */\n\
export interface NS {\n  readonly hacknet: Hacknet;\n  getServerMaxRam(host: string): number;\n  nested: {\n    a: number;\n  };\n}\n\
export declare enum ToastVariant {\n  SUCCESS = \"success\",\n}\n";

    #[test]
    fn a_namespace_is_its_whole_declaration_with_its_doc_comment() {
        let text = |name| namespace(DEFS, name).map(|s| s.text).unwrap_or_default();
        let ns = text("NS");
        assert!(
            ns.starts_with("/**\n * The NS object.\n */\nexport interface NS {"),
            "{ns}"
        );
        assert!(ns.ends_with("  };\n}\n"), "{ns}");
        assert!(!ns.contains("ToastVariant"));
        let hacknet = text("Hacknet");
        assert!(hacknet.starts_with("/** Hacknet API */") && hacknet.contains("numNodes"));
        assert_eq!(
            text("ScriptArg"),
            "export type ScriptArg = string | number;\n"
        );
        assert!(text("ToastVariant").contains("SUCCESS"));
    }

    #[test]
    fn an_unknown_namespace_lists_the_names() {
        let e = namespace(DEFS, "Nope").err();
        assert!(e.is_some_and(|e| e.message().contains("Hacknet NS ScriptArg ToastVariant")));
    }

    #[test]
    fn search_names_the_line_and_its_declaration() {
        let found = search(DEFS, "maxram", 1);
        assert_eq!(found.matches, 1);
        assert_eq!(
            found.text,
            "L12 [NS]: getServerMaxRam(host: string): number;\n"
        );
        let ns = namespace(DEFS, "NS")
            .map(|s| (s.first_line, search(&s.text, "maxram", s.first_line).text));
        assert_eq!(
            ns.ok(),
            Some((
                7,
                "L12 [NS]: getServerMaxRam(host: string): number;\n".to_owned()
            )),
            "a search inside a namespace keeps the file's line numbers"
        );
    }
}
