//! A compact, sorted, read-only string map for labels, annotations and selectors.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

/// Entries whose offsets fit inline, without an allocation of their own.
const INLINE_ENTRIES: usize = 6;

/// A read-only `String -> String` map: every key and value back to back in one string, in
/// key order, plus the offsets that cut it into entries.
///
/// Labels and annotations are small and read far more often than written. A map of one
/// string per key and value costs one allocation per long string, and each is a cache miss
/// when a cached object is dropped long after it was built; here a map costs one allocation
/// (two past `INLINE_ENTRIES` entries or 64 KiB of text), and dropping it reads nothing. A
/// `null` or absent map reads as empty; a duplicate key keeps its last value, as JSON does.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct StringMap {
    /// Key 0, value 0, key 1, value 1, … with no separators.
    text: Box<str>,
    /// Where each key and each value ends in `text`.
    ends: Ends,
}

/// The end offsets of a [`StringMap`]'s strings. The representation is a function of the
/// entries (inline exactly when they fit), so derived equality and hashing are by content.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Ends {
    /// Up to `INLINE_ENTRIES` entries of text shorter than 64 KiB; unused slots are 0.
    Inline {
        strings: u8,
        ends: [u16; 2 * INLINE_ENTRIES],
    },
    /// Anything larger.
    Heap(Box<[u32]>),
}

impl Default for Ends {
    fn default() -> Self {
        Ends::Inline {
            strings: 0,
            ends: [0; 2 * INLINE_ENTRIES],
        }
    }
}

impl Ends {
    fn strings(&self) -> usize {
        match self {
            Ends::Inline { strings, .. } => usize::from(*strings),
            Ends::Heap(ends) => ends.len(),
        }
    }

    fn end(&self, index: usize) -> usize {
        match self {
            Ends::Inline { ends, .. } => ends.get(index).map_or(0, |&end| usize::from(end)),
            Ends::Heap(ends) => ends.get(index).map_or(0, |&end| end as usize),
        }
    }
}

impl StringMap {
    /// An empty map.
    #[must_use]
    pub fn new() -> Self {
        StringMap::default()
    }

    /// The value of `key`, if present.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        let mut low = 0;
        let mut high = self.len();
        while low < high {
            let mid = low + (high - low) / 2;
            match self.key(mid).cmp(key) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Some(self.value(mid)),
            }
        }
        None
    }

    /// Whether `key` is present.
    #[must_use]
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ends.strings() / 2
    }

    /// Whether the map has no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        (0..self.len()).map(|index| (self.key(index), self.value(index)))
    }

    fn string(&self, index: usize) -> &str {
        let start = match index {
            0 => 0,
            _ => self.ends.end(index - 1),
        };
        // Offsets are built from whole strings, so they are always in bounds and on char
        // boundaries; `get` keeps even a broken invariant from panicking.
        self.text
            .get(start..self.ends.end(index))
            .unwrap_or_default()
    }

    fn key(&self, index: usize) -> &str {
        self.string(2 * index)
    }

    fn value(&self, index: usize) -> &str {
        self.string(2 * index + 1)
    }

    fn from_entries<K: AsRef<str>, V: AsRef<str>>(mut entries: Vec<(K, V)>) -> Self {
        // Stable sort keeps input order among equal keys, so the dedup keeps the last.
        entries.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let mut kept: Vec<(K, V)> = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            match kept.last_mut() {
                Some(last) if last.0.as_ref() == key.as_ref() => last.1 = value,
                _ => kept.push((key, value)),
            }
        }
        let size: usize = kept
            .iter()
            .map(|(k, v)| k.as_ref().len() + v.as_ref().len())
            .sum();
        let mut text = String::with_capacity(size);
        let mut ends = Vec::with_capacity(2 * kept.len());
        for (key, value) in &kept {
            for part in [key.as_ref(), value.as_ref()] {
                text.push_str(part);
                ends.push(text.len());
            }
        }
        let ends = if kept.len() <= INLINE_ENTRIES && size <= usize::from(u16::MAX) {
            let mut inline = [0u16; 2 * INLINE_ENTRIES];
            for (slot, end) in inline.iter_mut().zip(&ends) {
                *slot = u16::try_from(*end).unwrap_or(u16::MAX);
            }
            Ends::Inline {
                strings: u8::try_from(ends.len()).unwrap_or(u8::MAX),
                ends: inline,
            }
        } else {
            // Text past 4 GiB would need wider offsets; no label or annotation set is that big
            // (the apiserver caps a whole object at a few MiB), so saturating is only a guard.
            Ends::Heap(
                ends.iter()
                    .map(|&end| u32::try_from(end).unwrap_or(u32::MAX))
                    .collect(),
            )
        };
        StringMap {
            text: text.into_boxed_str(),
            ends,
        }
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for StringMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        StringMap::from_entries(iter.into_iter().collect())
    }
}

impl fmt::Debug for StringMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// A string read from the input: borrowed when the input holds it verbatim (no escapes), so
/// decoding a map copies each string once, into the map's text.
struct Text<'a>(Cow<'a, str>);

impl AsRef<str> for Text<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;

        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }

        deserializer.deserialize_str(TextVisitor)
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
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(8).min(64));
                while let Some(entry) = map.next_entry::<Text<'de>, Text<'de>>()? {
                    entries.push(entry);
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
    fn large_maps_and_escaped_strings_read_back() {
        let mut json = String::from("{");
        for i in (0..40).rev() {
            json.push_str(&format!(r#""key-{i:02}":"value \"{i}\" \u00e9","#));
        }
        json.push_str(r#""empty":""}"#);
        let map: StringMap = serde_json::from_str(&json).unwrap();
        assert_eq!(map.len(), 41);
        assert_eq!(map.get("key-07"), Some("value \"7\" \u{e9}"));
        assert_eq!(map.get("empty"), Some(""));
        assert_eq!(map.iter().next(), Some(("empty", "")));
        assert_eq!(map.get("key-40"), None);
    }

    #[test]
    fn equal_content_is_equal_whatever_the_input_order() {
        let a: StringMap = [("x", "1"), ("y", "2")].into_iter().collect();
        let b: StringMap = serde_json::from_str(r#"{"y":"2","x":"1"}"#).unwrap();
        assert_eq!(a, b);
        assert_eq!(format!("{a:?}"), r#"{"x": "1", "y": "2"}"#);
        assert_eq!(StringMap::new(), serde_json::from_str("{}").unwrap());
    }

    #[test]
    fn non_string_value_is_an_error() {
        assert!(serde_json::from_str::<StringMap>(r#"{"a":1}"#).is_err());
    }
}
