//! Standard base64 (RFC 4648, padded), the encoding file bytes travel in over the link.
//!
//! The Lua client has its own copy of this codec; CC's JSON escapes every byte >= 0x7F as `\u00XX`, which
//! would inflate binary data about sixfold, so bytes cross the link as base64 text instead.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid base64 at byte {position}")]
pub struct DecodeError {
    pub position: usize,
}

pub fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

pub fn decode(text: &str) -> Result<Vec<u8>, DecodeError> {
    STANDARD.decode(text).map_err(|e| DecodeError {
        position: match e {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            base64::DecodeError::InvalidLength(len) => len,
            base64::DecodeError::InvalidPadding => text.len(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, coded) in cases {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).unwrap(), plain.as_bytes());
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
    }

    #[test]
    fn rejects_garbage() {
        assert!(decode("Zm9").is_err());
        assert!(decode("Zm9!").is_err());
        assert!(decode("Zg==Zg==").is_err());
    }
}
