//! VSC-Bridge's parameter metadata as strict JSON Schema (the mapping of its `paramsToJsonSchema`, made strict:
//! integer types, ranges, lengths, enums with their type, defaults), with the parameter hints in each property's
//! description, where clients show them to the model.

use serde_json::{Map, Value, json};

pub fn input_schema(params: &Value, hints: &Value) -> Result<Map<String, Value>, String> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    if let Some(params) = params.as_object() {
        for (name, p) in params {
            properties.insert(name.clone(), property(name, p, hints.get(name))?);
            if p.get("required").and_then(Value::as_bool) == Some(true) {
                required.push(Value::String(name.clone()));
            }
        }
    } else if !params.is_null() {
        return Err("params must be a mapping".into());
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    Ok(schema)
}

fn property(name: &str, p: &Value, hint: Option<&Value>) -> Result<Value, String> {
    let ty = p.get("type").and_then(Value::as_str).unwrap_or("string");
    let mut s = Map::new();
    match ty {
        "string" => {
            s.insert("type".into(), json!("string"));
            copy(
                p,
                &mut s,
                &[
                    ("minLength", "minLength"),
                    ("maxLength", "maxLength"),
                    ("pattern", "pattern"),
                ],
            );
        }
        "number" | "integer" => {
            let integer =
                ty == "integer" || p.get("integer").and_then(Value::as_bool) == Some(true);
            s.insert(
                "type".into(),
                json!(if integer { "integer" } else { "number" }),
            );
            copy(
                p,
                &mut s,
                &[
                    ("min", "minimum"),
                    ("max", "maximum"),
                    ("minimum", "minimum"),
                    ("maximum", "maximum"),
                ],
            );
        }
        "boolean" => {
            s.insert("type".into(), json!("boolean"));
        }
        "array" => {
            s.insert("type".into(), json!("array"));
            let items = p.get("items").cloned().unwrap_or_else(|| json!({}));
            s.insert("items".into(), items);
        }
        "object" => {
            s.insert("type".into(), json!("object"));
        }
        "enum" => {
            let Some(values) = p
                .get("values")
                .and_then(Value::as_array)
                .filter(|v| !v.is_empty())
            else {
                return Err(format!("param `{name}`: an enum needs `values`"));
            };
            if values.iter().all(Value::is_string) {
                s.insert("type".into(), json!("string"));
            }
            s.insert("enum".into(), Value::Array(values.clone()));
        }
        other => return Err(format!("param `{name}`: unknown type `{other}`")),
    }
    if let Some(default) = p.get("default") {
        s.insert("default".into(), default.clone());
    }
    let text = describe(p, hint);
    if !text.is_empty() {
        s.insert("description".into(), json!(text));
    }
    if let Some(examples) = hint
        .and_then(|h| h.get("examples"))
        .filter(|e| e.is_array())
    {
        s.insert("examples".into(), examples.clone());
    }
    Ok(Value::Object(s))
}

fn copy(p: &Value, s: &mut Map<String, Value>, keys: &[(&str, &str)]) {
    for (from, to) in keys {
        if let Some(v) = p.get(*from) {
            s.insert((*to).into(), v.clone());
        }
    }
}

fn describe(p: &Value, hint: Option<&Value>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let base = p.get("description").and_then(Value::as_str);
    let hint_desc = hint
        .and_then(|h| h.get("description"))
        .and_then(Value::as_str);
    if let Some(d) = base.or(hint_desc) {
        parts.push(d.trim().to_owned());
    }
    if let (Some(b), Some(h)) = (base, hint_desc)
        && b.trim() != h.trim()
    {
        parts.push(h.trim().to_owned());
    }
    let Some(hint) = hint else {
        return parts.join(". ");
    };
    if let Some(examples) = hint.get("examples").and_then(Value::as_array) {
        let shown: Vec<String> = examples.iter().map(|e| e.to_string()).collect();
        parts.push(format!("Examples: {}", shown.join(", ")));
    }
    if let Some(note) = hint.get("note").and_then(Value::as_str) {
        parts.push(format!("Note: {}", note.trim()));
    }
    if let Some(pitfalls) = hint.get("pitfalls").and_then(Value::as_array) {
        let list: Vec<&str> = pitfalls.iter().filter_map(Value::as_str).collect();
        parts.push(format!("Pitfalls: {}", list.join("; ")));
    }
    if let Some(langs) = hint.get("language_specific").and_then(Value::as_object) {
        let list: Vec<String> = langs
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}: {}",
                    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                )
            })
            .collect();
        parts.push(format!("By language: {}", list.join("; ")));
    }
    parts.join(". ")
}
