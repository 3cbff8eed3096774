//! What world mode refuses up front: a LIST body it cannot build a world from, a run longer
//! than it simulates.

use std::time::Duration;

use serde_json::Value;

use crate::schedule::timeline;
use crate::simulate::options::{MAX_SPAN, SimOptions};
use crate::trace::{Record, Trace};

/// The items of a 200 LIST body, each as JSON text; an inner error when the body does not
/// decode as JSON at all (a wire fault, which world mode notes and skips, as it does a frame
/// that does not decode; nesting deeper than 128 levels is such a body).
///
/// # Errors
/// When the body is JSON but not a list: not an object, or no `items` array
/// (`"items": null` is an empty list, as the apiserver may write it). World mode builds the
/// world from the list, and would otherwise read it as empty and delete every object.
pub(super) fn list_items(
    body: &crate::trace::Payload,
) -> Result<Result<Vec<String>, String>, String> {
    let list = match serde_json::from_slice::<Value>(body.as_bytes()) {
        Ok(list) => list,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let Value::Object(mut list) = list else {
        return Err("a 200 LIST body that is JSON but not an object (not a list)".into());
    };
    match list.remove("items") {
        Some(Value::Array(items)) => Ok(Ok(items.iter().map(Value::to_string).collect())),
        Some(Value::Null) => Ok(Ok(Vec::new())),
        Some(_) => Err("a 200 LIST body whose \"items\" is not an array".into()),
        None => Err("a 200 LIST body with no \"items\" (not a list)".into()),
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
