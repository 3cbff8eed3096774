//! What world mode refuses up front: a LIST body it cannot build a world from, a run longer
//! than it simulates.

use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::schedule::timeline;
use crate::simulate::options::{MAX_SPAN, SimOptions};
use crate::trace::{Record, Trace};

/// The items of a 200 LIST body, each as its JSON text borrowed from the body (no tree of
/// the whole body is built: a LIST of 100k pods is hundreds of MB); an inner error (what the
/// body is, as "LIST body …" goes on) when the
/// body does not decode as JSON at all (a wire fault, which world mode notes and skips, as it
/// does a frame that does not decode; nesting deeper than 128 levels is such a body), or
/// when it names `items` twice (the core refuses such a body in a replay, so world mode
/// skips it as the same wire fault instead of keeping one of the two).
///
/// # Errors
/// When the body is JSON but not a list: not an object, or no `items` array
/// (`"items": null` is an empty list, as the apiserver may write it). World mode builds the
/// world from the list, and would otherwise read it as empty and delete every object.
pub(super) fn list_items(
    body: &crate::trace::Payload,
) -> Result<Result<Vec<&str>, String>, String> {
    #[derive(serde::Deserialize)]
    struct Shape<'a> {
        #[serde(borrow, default)]
        items: Option<&'a RawValue>,
    }
    let bytes = body.as_bytes();
    let object = bytes.trim_ascii_start().starts_with(b"{");
    let shape = match object.then(|| serde_json::from_slice::<Shape<'_>>(bytes)) {
        Some(Ok(shape)) => shape,
        Some(Err(e)) if e.to_string().starts_with("duplicate field `items`") => {
            return Ok(Err("names \"items\" twice, which the core refuses".into()));
        }
        Some(Err(e)) => return Ok(Err(format!("is not JSON ({e})"))),
        // Tell a body that is not JSON from one that is JSON but not a list.
        None => {
            return match serde_json::from_slice::<Nested>(bytes) {
                Err(e) => Ok(Err(format!("is not JSON ({e})"))),
                Ok(_) => Err("a 200 LIST body that is JSON but not an object (not a list)".into()),
            };
        }
    };
    let Some(items) = shape.items else {
        return Err("a 200 LIST body with no \"items\" (not a list)".into());
    };
    if items.get() == "null" {
        return Ok(Ok(Vec::new()));
    }
    match serde_json::from_str::<Vec<&RawValue>>(items.get()) {
        Ok(items) => Ok(Ok(items.into_iter().map(RawValue::get).collect())),
        Err(_) => Err("a 200 LIST body whose \"items\" is not an array".into()),
    }
}

/// Refuses a trace world mode cannot use, naming the line: a 200 LIST body that is JSON but
/// not a list (world mode builds the world from it, and would otherwise read it as empty and
/// delete everything), or a run longer than [`MAX_SPAN`].
///
/// # Errors
/// The first such record, with its line.
pub fn validate(trace: &Trace, opts: &SimOptions) -> Result<(), crate::TraceError> {
    let err = |line: usize, message: String| crate::TraceError {
        file: trace.name.clone(),
        line,
        message,
    };
    for entry in &trace.entries {
        if let Record::List {
            status: 200,
            body,
            transport_error: None,
        } = &entry.record
        {
            // A body that is not JSON at all is a wire fault, noted in the run.
            let _ = list_items(body).map_err(|m| err(entry.line, m))?;
        }
    }
    let records = timeline(&trace.entries);
    if let Some((at, entry)) = records.iter().find(|(at, _)| at.since_origin() > MAX_SPAN) {
        return Err(err(
            entry.line,
            format!(
                "the trace reaches {at}, past the {} s world mode simulates",
                MAX_SPAN.as_secs()
            ),
        ));
    }
    let (last, last_line) = records.last().map_or((Duration::ZERO, 0), |(at, entry)| {
        (at.since_origin(), entry.line)
    });
    if last + opts.settle > MAX_SPAN {
        // Named at the last record (no line for a trace with none, or a generated one).
        return Err(err(
            last_line,
            format!(
                "the last record at {}s plus --settle {}s is past the {} s world mode simulates",
                last.as_secs_f64(),
                opts.settle.as_secs_f64(),
                MAX_SPAN.as_secs()
            ),
        ));
    }
    Ok(())
}

/// Any JSON value, read without building it, but through `deserialize_any` at every level
/// so serde_json's recursion limit (128) applies as it does when the core decodes the body.
/// (`IgnoredAny` skips nested values iteratively, with no limit, so a body 100k arrays deep
/// would pass as "JSON" here while the core refuses it as not JSON.)
pub(crate) struct Nested;

impl<'de> de::Deserialize<'de> for Nested {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NestedVisitor)
    }
}

struct NestedVisitor;

impl<'de> Visitor<'de> for NestedVisitor {
    type Value = Nested;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_str<E>(self, _: &str) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_unit<E>(self) -> Result<Nested, E> {
        Ok(Nested)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Nested, A::Error> {
        while seq.next_element::<Nested>()?.is_some() {}
        Ok(Nested)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Nested, A::Error> {
        while map.next_entry::<de::IgnoredAny, Nested>()?.is_some() {}
        Ok(Nested)
    }
}

#[cfg(test)]
mod tests {
    use super::Nested;

    #[test]
    fn nesting_past_the_recursion_limit_is_not_json() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(serde_json::from_str::<Nested>(&deep(100)).is_ok());
        assert!(serde_json::from_str::<Nested>(&deep(200)).is_err());
        assert!(serde_json::from_str::<Nested>(r#"[1,"a",{"k":[null,true,2.5]}]"#).is_ok());
    }
}
