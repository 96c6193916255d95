//! JSON Schema for tool inputs and outputs, and the leniency models need: numbers sent as strings.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

pub(crate) fn input_schema<T: JsonSchema>() -> Map<String, Value> {
    root_schema::<T>(SchemaSettings::draft2020_12())
}

pub(crate) fn output_schema<T: JsonSchema>() -> Map<String, Value> {
    root_schema::<T>(SchemaSettings::draft2020_12().for_serialize())
}

fn root_schema<T: JsonSchema>(settings: SchemaSettings) -> Map<String, Value> {
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut object = match serde_json::to_value(schema) {
        Ok(Value::Object(object)) => object,
        // schemars always produces an object for a root schema; `true` would mean "anything".
        _ => Map::new(),
    };
    // Clients show the tool's description; a Rust type name as title, or the argument struct's doc comment
    // (meant for Rust readers), is noise to a model.
    object.remove("title");
    object.remove("description");
    object
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    for value in object.values_mut() {
        strip_numeric_formats(value);
    }
    let mut root = Value::Object(object);
    make_portable(&mut root, Position::Root, 0);
    match root {
        Value::Object(object) => object,
        _ => Map::new(),
    }
}

/// The `format`s schemars writes for Rust's integer and float types. JSON Schema defines none of them, and the
/// TypeScript SDK's validator warns about each unknown format on every `tools/list`; `type`, `minimum` and
/// `maximum` already say what they meant.
const RUST_NUMERIC_FORMATS: [&str; 14] = [
    "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32",
    "uint64", "uint128", "float", "double",
];

fn strip_numeric_formats(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if object
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| RUST_NUMERIC_FORMATS.contains(&f))
            {
                object.remove("format");
            }
            object.values_mut().for_each(strip_numeric_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_numeric_formats),
        _ => {}
    }
}

/// Where a subschema sits, which decides how it may be rewritten.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Position {
    Root,
    /// A property its object does not list in `required`: absent already means "none", so `null` need not be
    /// spelled (serde reads a missing `Option` as `None`, and serialises one as absent only when it is not
    /// required, i.e. with `skip_serializing_if`).
    OptionalProperty,
    /// Under `not`, where "anything" is the meaning wanted.
    Not,
    Other,
}

/// Rewrites what schemars writes into shapes every host reads the same way (the MCP Inspector's `--strict`
/// portability lint is the reference, Gemini's single-`type` dialect the strictest reader):
/// - a boolean schema (`items: true` for a `Vec<Value>`) becomes an object: `true` an explicit "any JSON
///   value" (`anyOf` of the six types), `false` `{"not": {}}`; `additionalProperties: false` and its kin stay;
/// - a schema that constrains nothing (a `Value` field with only a description) says "any JSON value" too;
/// - an optional property's `null` (`"type": ["integer", "null"]`, or an `anyOf` branch `{"type": "null"}`)
///   is dropped: the property is simply optional;
/// - any other `type` array (a required nullable output field, `Vec<Option<T>>`) becomes an `anyOf` with one
///   `type` per branch, the same contract.
fn make_portable(schema: &mut Value, position: Position, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match schema {
        Value::Bool(true) => *schema = Value::Object(Map::new()),
        Value::Bool(false) => *schema = serde_json::json!({"not": {}}),
        _ => {}
    }
    let Value::Object(node) = schema else {
        return;
    };
    let required: Vec<String> = node
        .get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for key in SUBSCHEMA_MAP_KEYWORDS {
        let Some(Value::Object(map)) = node.get_mut(key) else {
            continue;
        };
        for (name, sub) in map.iter_mut() {
            let position = if key == "properties" && !required.contains(name) {
                Position::OptionalProperty
            } else {
                Position::Other
            };
            make_portable(sub, position, depth + 1);
        }
    }
    for key in SUBSCHEMA_LIST_KEYWORDS {
        if let Some(Value::Array(subs)) = node.get_mut(key) {
            for sub in subs {
                make_portable(sub, Position::Other, depth + 1);
            }
        }
    }
    for key in SUBSCHEMA_KEYWORDS {
        match node.get_mut(key) {
            Some(Value::Bool(_)) if BOOLEAN_VALUED_KEYWORDS.contains(&key) => {}
            // `items: [..]` is the pre-2020 spelling of `prefixItems`.
            Some(Value::Array(subs)) if key == "items" => {
                for sub in subs {
                    make_portable(sub, Position::Other, depth + 1);
                }
            }
            Some(sub) => {
                let position = if key == "not" {
                    Position::Not
                } else {
                    Position::Other
                };
                make_portable(sub, position, depth + 1);
            }
            None => {}
        }
    }
    if position == Position::OptionalProperty {
        drop_null(node);
    }
    split_type_union(node);
    if position != Position::Not && !constrains(node) {
        node.insert("anyOf".into(), any_json_value());
    }
}

/// Keywords whose value is one subschema.
const SUBSCHEMA_KEYWORDS: [&str; 12] = [
    "items",
    "contains",
    "not",
    "propertyNames",
    "if",
    "then",
    "else",
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
    "contentSchema",
];
/// Keywords whose value is a list of subschemas.
const SUBSCHEMA_LIST_KEYWORDS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value maps names to subschemas.
const SUBSCHEMA_MAP_KEYWORDS: [&str; 5] = [
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];
/// Where `true`/`false` is the usual spelling (`additionalProperties: false`), not a schema hosts object to.
const BOOLEAN_VALUED_KEYWORDS: [&str; 4] = [
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
];
/// Keywords that say something about the value; a schema with none of them accepts anything.
const CONSTRAINING_KEYWORDS: [&str; 42] = [
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "items",
    "prefixItems",
    "contains",
    "additionalItems",
    "unevaluatedItems",
    "properties",
    "patternProperties",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "dependentSchemas",
    "dependencies",
    "$ref",
    "$dynamicRef",
];
/// Keywords that describe the whole value, or the document, and stay beside an `anyOf` rather than in each
/// branch.
const NOT_PER_BRANCH: [&str; 11] = [
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "$schema",
    "$id",
    "$defs",
];

fn constrains(node: &Map<String, Value>) -> bool {
    node.keys()
        .any(|k| CONSTRAINING_KEYWORDS.contains(&k.as_str()))
        || (node.contains_key("if") && (node.contains_key("then") || node.contains_key("else")))
}

/// "Any JSON value", spelled so that every branch names its type (`integer` is a `number`).
fn any_json_value() -> Value {
    Value::Array(
        ["string", "number", "boolean", "object", "array", "null"]
            .into_iter()
            .map(|t| serde_json::json!({ "type": t }))
            .collect(),
    )
}

fn is_null_only(schema: &Value) -> bool {
    schema.as_object().is_some_and(|o| {
        o.get("type").and_then(Value::as_str) == Some("null")
            && o.keys()
                .all(|k| k == "type" || NOT_PER_BRANCH.contains(&k.as_str()))
    })
}

/// An optional property's `null` alternative, which absence already expresses.
fn drop_null(node: &mut Map<String, Value>) {
    let mut dropped = false;
    if let Some(Value::Array(types)) = node.get_mut("type") {
        let before = types.len();
        types.retain(|t| t.as_str() != Some("null"));
        dropped = types.len() < before && !types.is_empty();
        if types.is_empty() {
            // `type: ["null"]`: nothing else to say, leave it as it was.
            types.push(Value::String("null".into()));
        }
    }
    if dropped && let Some(Value::Array(values)) = node.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(mut branches)) = node.remove(key) else {
            continue;
        };
        let before = branches.len();
        branches.retain(|b| !is_null_only(b));
        if branches.is_empty() {
            // The property could only ever be null: keep that.
            branches.push(serde_json::json!({"type": "null"}));
        }
        dropped |= branches.len() < before;
        // One alternative left: it is the property's schema, unless its keywords collide with the
        // property's own (then it stays a one-branch `anyOf`, which every host reads).
        match branches.as_slice() {
            [Value::Object(only)]
                if branches.len() < before && only.keys().all(|k| !node.contains_key(k)) =>
            {
                let only = only.clone();
                node.extend(only);
            }
            _ => {
                node.insert(key.into(), Value::Array(branches));
            }
        }
    }
    if dropped && node.get("default").is_some_and(Value::is_null) {
        node.remove("default");
    }
}

/// `"type": [A, B]` as `anyOf: [{type: A, ..}, {type: B, ..}]`: each branch keeps the node's assertions (those
/// for another type do not apply to it), the annotations stay outside.
fn split_type_union(node: &mut Map<String, Value>) {
    let Some(Value::Array(types)) = node.get("type") else {
        return;
    };
    let types: Vec<Value> = types.clone();
    if let [only] = types.as_slice() {
        node.insert("type".into(), only.clone());
        return;
    }
    if types.is_empty() {
        node.remove("type");
        return;
    }
    let assertions: Map<String, Value> = node
        .iter()
        .filter(|(k, _)| k.as_str() != "type" && !NOT_PER_BRANCH.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    node.retain(|k, _| NOT_PER_BRANCH.contains(&k.as_str()));
    let branches = types
        .into_iter()
        .map(|t| {
            if t.as_str() == Some("null") {
                serde_json::json!({"type": "null"})
            } else {
                let mut branch = Map::new();
                branch.insert("type".into(), t);
                branch.extend(assertions.clone());
                Value::Object(branch)
            }
        })
        .collect();
    node.insert("anyOf".into(), Value::Array(branches));
}

/// Replaces strings that hold numbers (or booleans) with numbers (or booleans) wherever the schema asks for
/// one. Anything that does not parse is left alone, so the deserialiser reports it with the field's name.
pub(crate) fn coerce_numeric_strings(value: &mut Value, schema: &Value) {
    coerce(value, schema, schema, 0);
}

const MAX_DEPTH: usize = 32;

fn coerce(value: &mut Value, schema: &Value, root: &Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let schema = resolve(schema, root);
    match value {
        Value::Object(fields) => {
            let Some(props) = find_keyword(schema, root, "properties").and_then(Value::as_object)
            else {
                return;
            };
            for (key, field) in fields.iter_mut() {
                if let Some(field_schema) = props.get(key) {
                    coerce(field, field_schema, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = find_keyword(schema, root, "items") {
                for item in items {
                    coerce(item, item_schema, root, depth + 1);
                }
            }
        }
        Value::String(text) => {
            if let Some(replacement) = scalar_from_string(text, schema, root) {
                *value = replacement;
            }
        }
        _ => {}
    }
}

fn scalar_from_string(text: &str, schema: &Value, root: &Value) -> Option<Value> {
    let types = allowed_types(schema, root);
    if types.iter().any(|t| t == "string") {
        return None;
    }
    let trimmed = text.trim();
    if types.iter().any(|t| t == "integer") {
        if let Ok(n) = trimmed.parse::<i64>() {
            return Some(Value::from(n));
        }
        if let Ok(n) = trimmed.parse::<u64>() {
            return Some(Value::from(n));
        }
    }
    if types.iter().any(|t| t == "number")
        && let Some(n) = trimmed
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
    {
        return Some(Value::Number(n));
    }
    if types.iter().any(|t| t == "boolean") {
        match trimmed {
            "true" => return Some(Value::Bool(true)),
            "false" => return Some(Value::Bool(false)),
            _ => {}
        }
    }
    None
}

/// The `type`s a schema allows, looking through `anyOf`/`oneOf` (how schemars writes `Option<T>` and enums).
fn allowed_types(schema: &Value, root: &Value) -> Vec<String> {
    let schema = resolve(schema, root);
    let mut out = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) => out.push(t.clone()),
        Some(Value::Array(ts)) => {
            out.extend(ts.iter().filter_map(Value::as_str).map(str::to_owned))
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alternatives)) = schema.get(key) {
            for alternative in alternatives {
                out.extend(allowed_types(alternative, root));
            }
        }
    }
    out
}

/// A keyword of the schema, or of the first `anyOf`/`oneOf` alternative that has it (`Option<Struct>`).
fn find_keyword<'a>(schema: &'a Value, root: &'a Value, keyword: &str) -> Option<&'a Value> {
    let schema = resolve(schema, root);
    if let Some(found) = schema.get(keyword) {
        return Some(found);
    }
    ["anyOf", "oneOf"]
        .iter()
        .filter_map(|key| schema.get(*key).and_then(Value::as_array))
        .flatten()
        .find_map(|alternative| resolve(alternative, root).get(keyword))
}

/// Follows a local `$ref` (`#/$defs/Name`); anything else is returned as it is.
fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
        return schema;
    };
    reference
        .strip_prefix('#')
        .and_then(|pointer| root.pointer(pointer))
        .unwrap_or(schema)
}

/// serde names the offending field for unknown and missing fields; the agent should see that name.
pub(crate) fn field_named_in_serde_error(message: &str) -> Option<String> {
    for marker in ["unknown field `", "missing field `", "duplicate field `"] {
        if let Some(rest) = message.split(marker).nth(1) {
            return rest.split('`').next().map(str::to_owned);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        count: u32,
        ratio: Option<f64>,
        name: String,
        flag: Option<bool>,
        nested: Option<Inner>,
        list: Option<Vec<i32>>,
    }

    #[derive(Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        slot: u8,
    }

    #[test]
    fn strict_schema_forbids_unknown_fields() {
        let schema = input_schema::<Args>();
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["type"], json!("object"));
    }

    #[test]
    fn no_args_schema_is_strict_and_silent() {
        let schema = input_schema::<crate::NoArgs>();
        assert_eq!(schema["additionalProperties"], json!(false));
        assert!(
            schema.get("description").is_none(),
            "a Rust doc comment is not for the model"
        );
        assert!(schema.get("title").is_none());
    }

    #[derive(Deserialize, Serialize, JsonSchema)]
    #[allow(dead_code)]
    struct Numbers {
        a: u64,
        b: u32,
        c: i64,
        d: f64,
        e: Option<u8>,
        f: Vec<u16>,
        when: String,
    }

    #[test]
    fn no_rust_numeric_formats_but_bounds_stay() {
        for schema in [input_schema::<Numbers>(), output_schema::<Numbers>()] {
            let text = Value::Object(schema.clone()).to_string();
            assert!(!text.contains("\"format\""), "{text}");
            assert_eq!(schema["properties"]["a"]["minimum"], json!(0), "{text}");
            assert_eq!(schema["properties"]["a"]["type"], json!("integer"));
        }
    }

    /// The shapes hosts stumbled on (issue 25, "What hosts show"): `items: true` from a `Vec<Value>`, a bare
    /// `Value`, `["integer", "null"]` from an `Option`, `anyOf` with a null branch from an `Option<Struct>`.
    #[derive(Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Offending {
        /// Arguments of any JSON type.
        args: Vec<Value>,
        /// A free value.
        data: Value,
        /// A count, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cursor: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nested: Option<Inner>,
        /// Sent as null when unknown (no skip_serializing_if).
        reason: Option<String>,
        slots: Vec<Option<u8>>,
    }

    /// What the MCP Inspector's `--strict` lint reports, as errors or warnings: a boolean where a schema
    /// belongs, a `type` array, a schema that constrains nothing.
    fn lint(schema: &Value, keyword: Option<&str>, path: &str, findings: &mut Vec<String>) {
        match schema {
            Value::Bool(_) if !keyword.is_some_and(|k| BOOLEAN_VALUED_KEYWORDS.contains(&k)) => {
                findings.push(format!("{path}: boolean schema"));
            }
            Value::Object(node) => {
                if node.get("type").is_some_and(Value::is_array) {
                    findings.push(format!("{path}: type union"));
                }
                if keyword != Some("not") && !constrains(node) {
                    findings.push(format!("{path}: constrains nothing"));
                }
                for key in SUBSCHEMA_MAP_KEYWORDS {
                    if let Some(Value::Object(map)) = node.get(key) {
                        for (name, sub) in map {
                            lint(sub, Some(key), &format!("{path}.{key}.{name}"), findings);
                        }
                    }
                }
                for key in SUBSCHEMA_LIST_KEYWORDS {
                    if let Some(Value::Array(subs)) = node.get(key) {
                        for (i, sub) in subs.iter().enumerate() {
                            lint(sub, Some(key), &format!("{path}.{key}[{i}]"), findings);
                        }
                    }
                }
                for key in SUBSCHEMA_KEYWORDS {
                    if let Some(sub) = node.get(key) {
                        lint(sub, Some(key), &format!("{path}.{key}"), findings);
                    }
                }
            }
            _ => {}
        }
    }

    fn findings(schema: &Map<String, Value>) -> Vec<String> {
        let mut found = Vec::new();
        lint(&Value::Object(schema.clone()), None, "", &mut found);
        found
    }

    #[test]
    fn schemars_alone_writes_the_offending_shapes() {
        // The test below means something only if schemars still writes them.
        let raw = serde_json::to_value(
            SchemaSettings::draft2020_12()
                .into_generator()
                .into_root_schema_for::<Offending>(),
        )
        .unwrap_or_default();
        let Value::Object(raw) = raw else {
            panic!("not an object: {raw}")
        };
        let found = findings(&raw).join("\n");
        assert!(
            found.contains(".properties.args.items: boolean schema"),
            "{found}"
        );
        assert!(found.contains(".properties.limit: type union"), "{found}");
        assert!(
            found.contains(".properties.data: constrains nothing"),
            "{found}"
        );
    }

    #[test]
    fn input_and_output_schemas_pass_the_portability_lint() {
        for schema in [input_schema::<Offending>(), output_schema::<Offending>()] {
            let text = Value::Object(schema.clone()).to_string();
            assert_eq!(findings(&schema), Vec::<String>::new(), "{text}");
            // A free value is still free: every JSON type, null included.
            let any = json!([{"type": "string"}, {"type": "number"}, {"type": "boolean"},
                {"type": "object"}, {"type": "array"}, {"type": "null"}]);
            assert_eq!(
                schema["properties"]["args"]["items"]["anyOf"], any,
                "{text}"
            );
            assert_eq!(schema["properties"]["data"]["anyOf"], any, "{text}");
            assert_eq!(
                schema["properties"]["data"]["description"],
                json!("A free value.")
            );
        }
    }

    #[test]
    fn an_optional_property_is_its_plain_type_and_not_required() {
        for schema in [input_schema::<Offending>(), output_schema::<Offending>()] {
            let text = Value::Object(schema.clone()).to_string();
            let props = &schema["properties"];
            assert_eq!(props["limit"]["type"], json!("integer"), "{text}");
            assert_eq!(props["limit"]["minimum"], json!(0), "{text}");
            assert_eq!(props["limit"]["description"], json!("A count, if any."));
            assert!(props["limit"].get("default").is_none(), "{text}");
            assert_eq!(props["cursor"]["type"], json!("string"), "{text}");
            // Option<Struct>: schemars's `anyOf: [{$ref}, {type: null}]` becomes the reference.
            assert_eq!(props["nested"]["$ref"], json!("#/$defs/Inner"), "{text}");
            assert!(props["nested"].get("anyOf").is_none(), "{text}");
            let required = schema.get("required").cloned().unwrap_or(json!([]));
            for optional in ["limit", "cursor", "nested"] {
                assert!(
                    !required
                        .as_array()
                        .is_some_and(|r| r.contains(&json!(optional)))
                );
            }
        }
    }

    #[test]
    fn a_required_nullable_output_keeps_null_as_an_any_of_branch() {
        // Serialised as `"reason": null`, so the output schema must admit null: hosts validate
        // structuredContent against it.
        let schema = output_schema::<Offending>();
        let text = Value::Object(schema.clone()).to_string();
        assert!(
            schema["required"]
                .as_array()
                .is_some_and(|r| r.contains(&json!("reason")))
        );
        assert_eq!(
            schema["properties"]["reason"]["anyOf"],
            json!([{"type": "string"}, {"type": "null"}]),
            "{text}"
        );
        assert_eq!(
            schema["properties"]["slots"]["items"]["anyOf"],
            json!([{"type": "integer", "minimum": 0, "maximum": 255}, {"type": "null"}]),
            "{text}"
        );
    }

    #[derive(Serialize, JsonSchema)]
    #[allow(dead_code)]
    struct DefaultedOutput {
        /// Serialised as null when none: `default` alone does not skip it.
        #[serde(default)]
        note: Option<String>,
        #[serde(flatten)]
        more: FlattenedPart,
    }

    #[derive(Serialize, JsonSchema)]
    #[allow(dead_code)]
    struct FlattenedPart {
        extra: Option<u32>,
    }

    #[test]
    fn an_output_option_that_is_serialised_as_null_admits_null() {
        let schema = output_schema::<DefaultedOutput>();
        let text = Value::Object(schema.clone()).to_string();
        let value = serde_json::to_value(DefaultedOutput {
            note: None,
            more: FlattenedPart { extra: None },
        })
        .unwrap_or_default();
        assert_eq!(value, json!({"note": null, "extra": null}));
        for field in ["note", "extra"] {
            let property = &schema["properties"][field];
            let admits_null = property["anyOf"]
                .as_array()
                .is_some_and(|branches| branches.contains(&json!({"type": "null"})));
            assert!(admits_null, "{field}: {text}");
        }
    }

    #[test]
    fn additional_properties_false_stays_a_boolean() {
        let schema = input_schema::<Offending>();
        assert_eq!(schema["additionalProperties"], json!(false));
    }

    #[test]
    fn coercion_cases() {
        let schema = Value::Object(input_schema::<Args>());
        let cases = [
            (json!({"count": "5"}), json!({"count": 5})),
            (json!({"count": " 7 "}), json!({"count": 7})),
            (json!({"ratio": "0.5"}), json!({"ratio": 0.5})),
            (json!({"name": "12"}), json!({"name": "12"})),
            (json!({"flag": "true"}), json!({"flag": true})),
            (json!({"count": "five"}), json!({"count": "five"})),
            (
                json!({"nested": {"slot": "3"}}),
                json!({"nested": {"slot": 3}}),
            ),
            (json!({"list": ["1", "2"]}), json!({"list": [1, 2]})),
            (json!({"bogus": "1"}), json!({"bogus": "1"})),
        ];
        for (mut input, expected) in cases {
            coerce_numeric_strings(&mut input, &schema);
            assert_eq!(input, expected);
        }
    }

    #[test]
    fn serde_field_names_are_found() {
        assert_eq!(
            field_named_in_serde_error("unknown field `bogus`, expected `text`").as_deref(),
            Some("bogus")
        );
        assert_eq!(
            field_named_in_serde_error("missing field `filename`").as_deref(),
            Some("filename")
        );
        assert_eq!(field_named_in_serde_error("invalid type: string"), None);
    }
}
