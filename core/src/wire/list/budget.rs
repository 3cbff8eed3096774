//! A memory budget for one decode: a serde `Deserializer` wrapper that charges what the
//! decoded value will hold as serde builds it, and fails the decode as soon as the charge
//! passes the budget — before the memory is taken, not after (issue 17).
//!
//! What is charged, as serde hands it to the value being built:
//! - each element of a sequence, `size_of` the element's type (a `Vec<T>` slot);
//! - each entry of a map, `size_of` its key and value types (a struct's fields are not
//!   entries: its size is charged where it is held, as an element or a list slot);
//! - each string or byte string handed over, its length (member names are not charged).
//!
//! Skipped values (`IgnoredAny`, unknown fields) cost nothing, as serde_json skips them
//! without building anything. What is not seen: a `Vec`'s spare capacity (up to twice its
//! elements while it grows), a `Box`'s allocation of a single value, and the allocator's
//! own overhead per block. So the charge is a floor of what the value holds, close to it for
//! the shapes that amplify (many small elements), and the decoder's bound is on the charge.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// How much one decode may charge, and how much it has.
#[derive(Debug)]
pub(crate) struct Budget {
    used: Cell<u64>,
    limit: Cell<u64>,
    /// The decode failed because of the budget (and not for a reason of its own).
    exceeded: Cell<bool>,
}

thread_local! {
    /// The budget [`Budgeted`] charges: serde_json's stream reader, which says where a value
    /// ended, builds values with no seed, so the budget cannot travel as an argument.
    static CURRENT: Budget = const {
        Budget {
            used: Cell::new(0),
            limit: Cell::new(u64::MAX),
            exceeded: Cell::new(false),
        }
    };
}

impl Budget {
    fn charge<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        let used = self.used.get().saturating_add(bytes as u64);
        self.used.set(used);
        if used > self.limit.get() {
            self.exceeded.set(true);
            return Err(E::custom(format_args!(
                "decoding would hold more than {} bytes",
                self.limit.get()
            )));
        }
        Ok(())
    }
}

/// What a decode under [`within`] charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Spent {
    /// Bytes charged.
    pub(crate) used: u64,
    /// The decode ran out of budget: its error is the budget's, not the input's.
    pub(crate) exceeded: bool,
}

/// Runs `decode`, in which every [`Budgeted`] value is charged against `limit` bytes in all.
pub(crate) fn within<R>(limit: u64, decode: impl FnOnce() -> R) -> (R, Spent) {
    CURRENT.with(|b| {
        b.used.set(0);
        b.limit.set(limit);
        b.exceeded.set(false);
    });
    let result = decode();
    let spent = CURRENT.with(|b| {
        let spent = Spent {
            used: b.used.get(),
            exceeded: b.exceeded.get(),
        };
        b.limit.set(u64::MAX);
        spent
    });
    (result, spent)
}

/// `seed` run on `d` with every value charged to the budget of the enclosing [`within`] (or
/// to no limit outside one): for a value decoded from bytes held back, such as a frame's
/// object that came before its type.
pub(crate) fn deserialize_seed<'de, S, D>(seed: S, d: D) -> Result<S::Value, D::Error>
where
    S: DeserializeSeed<'de>,
    D: Deserializer<'de>,
{
    CURRENT.with(|budget| seed.deserialize(Counted { inner: d, budget }))
}

/// A `T` decoded with every value charged to the budget of the enclosing [`within`] (or to
/// no limit outside one).
#[derive(Debug)]
pub(crate) struct Budgeted<T>(pub(crate) T);

impl<'de, T: de::Deserialize<'de>> de::Deserialize<'de> for Budgeted<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        CURRENT.with(|budget| T::deserialize(Counted { inner: d, budget }).map(Budgeted))
    }
}

/// A deserializer whose every value is charged to `budget`.
struct Counted<'b, D> {
    inner: D,
    budget: &'b Budget,
}

/// A visitor whose strings, sequences and maps are charged; `fields: false` for a struct's
/// map, whose entries are its inline fields.
struct CountedVisitor<'b, V> {
    inner: V,
    budget: &'b Budget,
    entries: bool,
}

struct CountedSeed<'b, S> {
    inner: S,
    budget: &'b Budget,
}

struct CountedSeq<'b, A> {
    inner: A,
    budget: &'b Budget,
}

struct CountedMap<'b, A> {
    inner: A,
    budget: &'b Budget,
    entries: bool,
}

struct CountedEnum<'b, A> {
    inner: A,
    budget: &'b Budget,
}

impl<'b, V> CountedVisitor<'b, V> {
    fn new(inner: V, budget: &'b Budget) -> Self {
        CountedVisitor {
            inner,
            budget,
            entries: true,
        }
    }
}

macro_rules! forward_plain {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method(CountedVisitor::new(visitor, self.budget))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Counted<'_, D> {
    type Error = D::Error;

    forward_plain! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32
        deserialize_i64 deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32
        deserialize_u64 deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char
        deserialize_str deserialize_string deserialize_bytes deserialize_byte_buf
        deserialize_option deserialize_unit deserialize_seq deserialize_map
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner
            .deserialize_unit_struct(name, CountedVisitor::new(visitor, self.budget))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner
            .deserialize_newtype_struct(name, CountedVisitor::new(visitor, self.budget))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner
            .deserialize_tuple(len, CountedVisitor::new(visitor, self.budget))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner
            .deserialize_tuple_struct(name, len, CountedVisitor::new(visitor, self.budget))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = CountedVisitor {
            inner: visitor,
            budget: self.budget,
            entries: false,
        };
        self.inner.deserialize_struct(name, fields, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner
            .deserialize_enum(name, variants, CountedVisitor::new(visitor, self.budget))
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        // A member name picks a field; nothing of it is kept.
        self.inner.deserialize_identifier(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        // Skipped without building anything.
        self.inner.deserialize_ignored_any(visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident: $ty:ty)*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

macro_rules! charged_visit {
    ($($method:ident: $ty:ty)*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.budget.charge::<E>(v.len())?;
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for CountedVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool: bool visit_i8: i8 visit_i16: i16 visit_i32: i32 visit_i64: i64
        visit_i128: i128 visit_u8: u8 visit_u16: u16 visit_u32: u32 visit_u64: u64
        visit_u128: u128 visit_f32: f32 visit_f64: f64 visit_char: char
    }

    charged_visit! {
        visit_str: &str visit_borrowed_str: &'de str visit_string: String
        visit_bytes: &[u8] visit_borrowed_bytes: &'de [u8] visit_byte_buf: Vec<u8>
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Counted {
            inner: d,
            budget: self.budget,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Counted {
            inner: d,
            budget: self.budget,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(CountedSeq {
            inner: seq,
            budget: self.budget,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(CountedMap {
            inner: map,
            budget: self.budget,
            entries: self.entries,
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(CountedEnum {
            inner: data,
            budget: self.budget,
        })
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for CountedSeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Counted {
            inner: d,
            budget: self.budget,
        })
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for CountedSeq<'_, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        let seed = CountedSeed {
            inner: seed,
            budget: self.budget,
        };
        let element = self.inner.next_element_seed(seed)?;
        if element.is_some() {
            // Charged once the element is there: an empty sequence holds nothing.
            self.budget.charge::<A::Error>(size_of::<T::Value>())?;
        }
        Ok(element)
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for CountedMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        if !self.entries {
            // A struct's member name: which field, nothing kept.
            return self.inner.next_key_seed(seed);
        }
        let key = self.inner.next_key_seed(CountedSeed {
            inner: seed,
            budget: self.budget,
        })?;
        if key.is_some() {
            self.budget.charge::<A::Error>(size_of::<K::Value>())?;
        }
        Ok(key)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        if self.entries {
            self.budget.charge::<A::Error>(size_of::<T::Value>())?;
        }
        self.inner.next_value_seed(CountedSeed {
            inner: seed,
            budget: self.budget,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

impl<'b, 'de, A: EnumAccess<'de>> EnumAccess<'de> for CountedEnum<'b, A> {
    type Error = A::Error;
    type Variant = CountedEnum<'b, A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        // The variant's name picks it, like a member name: not charged.
        let (value, variant) = self.inner.variant_seed(seed)?;
        Ok((
            value,
            CountedEnum {
                inner: variant,
                budget: self.budget,
            },
        ))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for CountedEnum<'_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.inner.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.newtype_variant_seed(CountedSeed {
            inner: seed,
            budget: self.budget,
        })
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.inner
            .tuple_variant(len, CountedVisitor::new(visitor, self.budget))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        let visitor = CountedVisitor {
            inner: visitor,
            budget: self.budget,
            entries: false,
        };
        self.inner.struct_variant(fields, visitor)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn charged<T: de::DeserializeOwned>(json: &str, limit: u64) -> (Result<T, String>, u64, bool) {
        let (result, spent) = within(limit, || {
            serde_json::from_str::<Budgeted<T>>(json).map_err(|e| e.to_string())
        });
        (result.map(|b| b.0), spent.used, spent.exceeded)
    }

    #[test]
    fn charges_elements_entries_and_strings() {
        let (v, used, over) = charged::<Vec<u64>>("[1,2,3]", 1000);
        assert_eq!(v.unwrap(), [1, 2, 3]);
        assert_eq!((used, over), (24, false));
        let (m, used, _) = charged::<BTreeMap<String, String>>(r#"{"ab":"cde"}"#, 1000);
        assert_eq!(m.unwrap().len(), 1);
        // Two `String`s of 24 bytes, plus the 2 + 3 bytes handed over.
        assert_eq!(used, 48 + 5);
    }

    #[test]
    fn a_struct_is_charged_where_it_is_held_and_skipped_members_cost_nothing() {
        #[derive(serde::Deserialize)]
        #[allow(dead_code)]
        struct S {
            a: u64,
            b: Option<u64>,
        }
        let (s, used, _) = charged::<Vec<S>>(r#"[{"a":1,"b":2,"ignored":["xxxxxxxx"]}]"#, 1000);
        assert!(s.is_ok());
        assert_eq!(used, size_of::<S>() as u64);
    }

    #[test]
    fn stops_at_the_budget() {
        let json = format!("[{}]", vec!["[]"; 1000].join(","));
        let (v, used, over) = charged::<Vec<Vec<u8>>>(&json, 240);
        assert!(over);
        assert!(v.unwrap_err().contains("more than 240 bytes"));
        assert!(used <= 240 + 24, "{used}");
    }
}
