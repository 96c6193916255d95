//! Reading a field or two of a JSON text that is not decoded whole: one refused for its size, or for what it
//! would take decoded ([`crate::link::json_cost`]), whose answer's id is still wanted. What is not asked for is
//! skipped unread (serde's `IgnoredAny`), so a peer cannot make the read itself costly.

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A number or a string, read as it is; anything else reads as none, an array or an object skipped unread
/// however large (a peer can pose one as an id).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Scalar(pub Option<Value>);

impl Scalar {
    /// The string it holds, if it is one.
    pub fn into_string(self) -> Option<String> {
        match self.0 {
            Some(Value::String(s)) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Read;
        impl<'de> Visitor<'de> for Read {
            type Value = Scalar;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_u64<E>(self, n: u64) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(n))))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(n))))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(n))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Scalar, E> {
                Ok(Scalar(Some(Value::from(s))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
                Ok(Scalar(None))
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar(None))
            }
        }
        d.deserialize_any(Read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_and_strings_are_read_and_anything_else_is_none() {
        let read = |text: &str| serde_json::from_str::<Scalar>(text).unwrap_or_default().0;
        assert_eq!(read("7"), Some(json!(7)));
        assert_eq!(read("-7"), Some(json!(-7)));
        assert_eq!(read("1.5"), Some(json!(1.5)));
        assert_eq!(read(r#""r-9""#), Some(json!("r-9")));
        for none in ["true", "null", "[1,[2,{\"a\":3}]]", "{\"id\":1}"] {
            assert_eq!(read(none), None, "{none}");
        }
        assert_eq!(
            serde_json::from_str::<Scalar>(r#""s""#)
                .map(Scalar::into_string)
                .ok(),
            Some(Some("s".to_owned()))
        );
        assert_eq!(
            serde_json::from_str::<Scalar>("7")
                .map(Scalar::into_string)
                .ok(),
            Some(None)
        );
    }
}
