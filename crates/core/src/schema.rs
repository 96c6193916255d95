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
    object
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

    #[derive(Deserialize, JsonSchema)]
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
