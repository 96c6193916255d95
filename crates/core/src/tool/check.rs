//! Argument checks schemars cannot express. Each error names the field and the limit.

use crate::error::ToolError;
use std::fmt::Display;

/// Rejects empty and whitespace-only strings.
pub fn non_empty(field: &str, value: &str) -> Result<(), ToolError> {
    if value.trim().is_empty() {
        return Err(ToolError::invalid_argument(
            field,
            format!("`{field}` must not be empty or only whitespace"),
        ));
    }
    Ok(())
}

/// The longest path a tool takes, in bytes: Linux's `PATH_MAX` counts the terminating NUL.
pub const MAX_PATH_BYTES: usize = 4095;

/// Rejects what no file system takes as a path: empty, holding a NUL byte (which the system would refuse
/// with a bare "Invalid argument" naming nothing), or longer than [`MAX_PATH_BYTES`].
pub fn path(field: &str, value: &str) -> Result<(), ToolError> {
    non_empty(field, value)?;
    if let Some(at) = value.find('\0') {
        return Err(ToolError::invalid_argument(
            field,
            format!("`{field}` holds a NUL byte (at byte {at}), which no path may hold"),
        ));
    }
    if value.len() > MAX_PATH_BYTES {
        return Err(ToolError::invalid_argument(
            field,
            format!(
                "`{field}` is {} bytes; a path may be at most {MAX_PATH_BYTES}",
                value.len()
            ),
        )
        .with_details(serde_json::json!({"limit": MAX_PATH_BYTES})));
    }
    Ok(())
}

/// Rejects strings longer than `limit` bytes (UTF-8).
pub fn max_bytes(field: &str, value: &str, limit: usize) -> Result<(), ToolError> {
    if value.len() > limit {
        return Err(ToolError::too_large(format!(
            "`{field}` is {} bytes; the limit is {limit} bytes",
            value.len()
        ))
        .with_hint(format!(
            "send `{field}` in pieces of at most {limit} bytes, or raise the limit"
        ))
        .with_details(serde_json::json!({"field": field, "limit": limit, "actual": value.len()})));
    }
    Ok(())
}

/// Rejects values outside `min..=max`.
pub fn in_range<T: PartialOrd + Display>(
    field: &str,
    value: T,
    min: T,
    max: T,
) -> Result<(), ToolError> {
    if value < min || value > max {
        return Err(ToolError::invalid_argument(
            field,
            format!("`{field}` is {value}; it must be between {min} and {max}"),
        )
        .with_details(serde_json::json!({"min": min.to_string(), "max": max.to_string()})));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn whitespace_only_is_empty() {
        for bad in ["", " ", "\t\n"] {
            let e = non_empty("filename", bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument);
            assert!(e.message().contains("filename"));
        }
        assert!(non_empty("filename", "a.js").is_ok());
    }

    #[test]
    fn byte_limit_counts_utf8_bytes() {
        assert!(max_bytes("content", "ééé", 6).is_ok());
        let e = max_bytes("content", "éééé", 6).unwrap_err();
        assert_eq!(e.code(), ErrorCode::TooLarge);
        assert_eq!(e.details()["limit"], 6);
        assert_eq!(e.details()["field"], "content");
    }

    #[test]
    fn a_path_with_a_nul_or_past_path_max_is_refused_naming_the_field() {
        for bad in [
            "a\0b".to_owned(),
            "x".repeat(MAX_PATH_BYTES + 1),
            " ".into(),
        ] {
            let e = path("path", &bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument);
            assert_eq!(e.details()["field"], "path");
        }
        assert!(path("path", &"x".repeat(MAX_PATH_BYTES)).is_ok());
    }

    #[test]
    fn range_names_both_bounds() {
        let e = in_range("limit", 0, 1, 1000).unwrap_err();
        assert!(e.message().contains("between 1 and 1000"));
        assert!(in_range("limit", 5, 1, 1000).is_ok());
    }
}
