//! Arguments checked against a tool's generated schema before anything is sent: unknown, missing and mistyped
//! parameters, enums, ranges and lengths. Each error names the parameter and what it must be. A numeric string
//! where a number is wanted is accepted as that number (models often send `"5"`), as the core does for typed
//! tools.

use bridge_core::ToolError;
use serde_json::{Map, Value};

pub fn check(schema: &Map<String, Value>, args: Value) -> Result<Map<String, Value>, ToolError> {
    let mut args = match args {
        Value::Null => Map::new(),
        Value::Object(map) => map,
        other => {
            return Err(ToolError::invalid_argument(
                "arguments",
                format!("arguments must be an object, got {other}"),
            ));
        }
    };
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if let Some(unknown) = args.keys().find(|k| !properties.contains_key(*k)) {
        let known: Vec<&str> = properties.keys().map(String::as_str).collect();
        return Err(ToolError::invalid_argument(
            unknown,
            format!(
                "unknown parameter `{unknown}`; this tool takes: {}",
                if known.is_empty() {
                    "no parameters".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        ));
    }
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if args.get(name).is_none_or(Value::is_null) {
            return Err(ToolError::invalid_argument(
                name,
                format!("missing required parameter `{name}`"),
            ));
        }
    }
    for (name, prop) in properties {
        if let Some(value) = args.get_mut(name) {
            if value.is_null() {
                continue;
            }
            check_value(name, prop, value)?;
        }
    }
    Ok(args)
}

fn check_value(name: &str, prop: &Value, value: &mut Value) -> Result<(), ToolError> {
    let bad = |msg: String| ToolError::invalid_argument(name, format!("parameter `{name}` {msg}"));
    let ty = prop.get("type").and_then(Value::as_str);
    if matches!(ty, Some("number" | "integer"))
        && let Value::String(s) = value
        && let Ok(n) = s.trim().parse::<f64>()
        && let Some(num) = serde_json::Number::from_f64(n)
    {
        *value = if n.fract() == 0.0 && n.abs() < 9.0e15 {
            #[allow(clippy::cast_possible_truncation)]
            Value::from(n as i64)
        } else {
            Value::Number(num)
        };
    }
    let type_ok = match ty {
        Some("string") => value.is_string(),
        Some("number") => value.is_number(),
        Some("integer") => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        Some("boolean") => value.is_boolean(),
        Some("array") => value.is_array(),
        Some("object") => value.is_object(),
        _ => true,
    };
    if !type_ok {
        return Err(bad(format!(
            "must be {} {}, got {}",
            if ty == Some("integer") { "an" } else { "a" },
            ty.unwrap_or("value"),
            kind(value)
        )));
    }
    if let Some(allowed) = prop.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(bad(format!(
            "must be one of {}, got {value}",
            list.join(", ")
        )));
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = prop.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(bad(format!("must be at least {min}, got {n}")));
        }
        if let Some(max) = prop.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(bad(format!("must be at most {max}, got {n}")));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = prop.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            return Err(bad(format!(
                "must have at least {min} characters, got {len}"
            )));
        }
        if let Some(max) = prop.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            return Err(bad(format!(
                "must have at most {max} characters, got {len}"
            )));
        }
    }
    Ok(())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Map<String, Value> {
        json!({"type":"object","properties":{
            "line":{"type":"integer","minimum":1},
            "mode":{"type":"string","enum":["a","b"]},
            "name":{"type":"string","maxLength":3}},
            "required":["line"],"additionalProperties":false})
        .as_object()
        .unwrap()
        .clone()
    }

    fn field(e: &ToolError) -> String {
        e.details()["field"].as_str().unwrap().to_owned()
    }

    #[test]
    fn every_rule_names_the_parameter() {
        let s = schema();
        assert_eq!(field(&check(&s, json!({})).unwrap_err()), "line");
        assert_eq!(field(&check(&s, json!({"line": "x"})).unwrap_err()), "line");
        assert_eq!(field(&check(&s, json!({"line": 0})).unwrap_err()), "line");
        assert_eq!(
            field(&check(&s, json!({"line": 1, "mode": "c"})).unwrap_err()),
            "mode"
        );
        assert_eq!(
            field(&check(&s, json!({"line": 1, "name": "long"})).unwrap_err()),
            "name"
        );
        assert_eq!(
            field(&check(&s, json!({"line": 1, "zzz": 1})).unwrap_err()),
            "zzz"
        );
        assert_eq!(check(&s, json!({"line": "7"})).unwrap()["line"], 7);
    }
}
