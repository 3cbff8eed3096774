//! A compact, sorted, read-only string map for labels, annotations and selectors.

use std::fmt;

use compact_str::CompactString;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

/// A read-only `String -> String` map stored as one sorted boxed slice of inline-capable
/// strings (up to 24 bytes each without a heap allocation).
///
/// Labels and annotations are small and read far more often than written; a `BTreeMap` node
/// costs about 0.5 KB even for one entry, which would dominate the heap of a cached pod. A
/// `null` or absent map reads as empty; a duplicate key keeps its last value, as JSON does.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct StringMap(Box<[(CompactString, CompactString)]>);

impl StringMap {
    /// An empty map.
    #[must_use]
    pub fn new() -> Self {
        StringMap::default()
    }

    /// The value of `key`, if present.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|index| self.0[index].1.as_str())
    }

    /// Whether `key` is present.
    #[must_use]
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the map has no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    fn from_entries(mut entries: Vec<(CompactString, CompactString)>) -> Self {
        // Stable sort keeps input order among equal keys, so the dedup below can keep the last.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(CompactString, CompactString)> = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            match out.last_mut() {
                Some(last) if last.0 == key => last.1 = value,
                _ => out.push((key, value)),
            }
        }
        StringMap(out.into_boxed_slice())
    }
}

impl<K: Into<CompactString>, V: Into<CompactString>> FromIterator<(K, V)> for StringMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        StringMap::from_entries(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl fmt::Debug for StringMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<'de> Deserialize<'de> for StringMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor;

        impl<'de> Visitor<'de> for MapVisitor {
            type Value = StringMap;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings to strings, or null")
            }

            fn visit_unit<E>(self) -> Result<StringMap, E> {
                Ok(StringMap::new())
            }

            fn visit_none<E>(self) -> Result<StringMap, E> {
                Ok(StringMap::new())
            }

            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<StringMap, D::Error> {
                d.deserialize_map(MapVisitor)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringMap, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some((key, value)) = map.next_entry::<CompactString, CompactString>()? {
                    entries.push((key, value));
                }
                Ok(StringMap::from_entries(entries))
            }
        }

        deserializer.deserialize_option(MapVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_absent_read_as_empty() {
        let map: StringMap = serde_json::from_str("null").unwrap();
        assert!(map.is_empty());
    }

    #[test]
    fn lookups_work_whatever_the_input_order() {
        let map: StringMap = serde_json::from_str(r#"{"b":"2","a":"1","c":"3"}"#).unwrap();
        assert_eq!(map.get("a"), Some("1"));
        assert_eq!(map.get("c"), Some("3"));
        assert_eq!(map.get("d"), None);
        assert_eq!(
            map.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn duplicate_key_keeps_the_last_value() {
        let map: StringMap = serde_json::from_str(r#"{"a":"1","a":"2"}"#).unwrap();
        assert_eq!(map.len(), 1);
        assert_eq!(map.get("a"), Some("2"));
    }

    #[test]
    fn non_string_value_is_an_error() {
        assert!(serde_json::from_str::<StringMap>(r#"{"a":1}"#).is_err());
    }
}
