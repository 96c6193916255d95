//! Job ids as the VSC-Bridge client makes them: `YYYYMMDDTHHMMSSfffZ-<seq4>-<rand4hex>` (29 characters,
//! sortable, safe on Windows), and the extension's validator.

use crate::envelope::civil;

/// A job id for `now_ms`; `<seq4>` is the last four digits of the epoch milliseconds, as the MCP adapter passes
/// `Date.now()`.
pub fn job_id(now_ms: u64) -> String {
    let (date, time) = civil(now_ms);
    let compact: String = format!("{date}T{time}")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    format!(
        "{compact}Z-{:04}-{:04x}",
        now_ms % 10_000,
        rand::random::<u16>()
    )
}

/// The extension's `isValidJobId`: no `<>:"/\|?*` or control characters, no reserved device name, at most
/// 64 characters, no trailing dot or space.
pub fn is_valid_job_id(id: &str) -> bool {
    if id.is_empty() || id.len() > 64 || id.ends_with('.') || id.ends_with(' ') {
        return false;
    }
    if id
        .chars()
        .any(|c| "<>:\"/\\|?*".contains(c) || c.is_control())
        || id == "."
        || id == ".."
    {
        return false;
    }
    let stem = id.split('.').next().unwrap_or("").to_ascii_uppercase();
    let reserved = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL")
        || ((stem.starts_with("COM") || stem.starts_with("LPT"))
            && stem.len() == 4
            && stem.as_bytes()[3].is_ascii_digit());
    !reserved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_clients_shape() {
        let id = job_id(1_758_026_712_083);
        assert_eq!(id.len(), 29, "{id}");
        assert!(id.starts_with("20250916T124512083Z-2083-"), "{id}");
        assert!(is_valid_job_id(&id));
        assert!(!is_valid_job_id("COM1"));
        assert!(!is_valid_job_id("a/b"));
        assert!(!is_valid_job_id("x."));
    }
}
