//! A core/v1 Secret as the apiserver's decoder sees it: `stringData` is write-only
//! convenience, folded into `data` (base64) and never stored, as `Convert_v1_Secret_To_core_Secret`
//! does; and `data` is `[]byte`, so each value must be standard base64 and is stored in its
//! canonical encoding.
//!
//! The wording of the errors is the apiserver's: the JSON decoder's message, wrapped as
//! `Secret in version "v1" cannot be handled as a Secret: …`, a 400 `BadRequest`.
//!
//! Updates are validated as `ValidateSecretUpdate` and `ValidateConfigMapUpdate` do: a
//! Secret's `type` never changes, and an object marked `immutable` keeps its data and its
//! mark.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::kinds::KindDescriptor;
use super::status::{ApiStatus, go_json_type};

/// Folds `stringData` into `data` and canonicalises `data`, in place; on an error the body
/// is unchanged. A `stringData` key overwrites the `data` key of the same name; `stringData`
/// is then removed. An absent or empty `type` is defaulted to `Opaque` (`SetDefaults_Secret`).
pub(super) fn fold(body: &mut Value) -> Result<(), ApiStatus> {
    let Some(obj) = body.as_object_mut() else {
        return Ok(());
    };
    let mut data = Map::new();
    match obj.get("data") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (key, value) in m {
                let text = match value {
                    // Go's decoder leaves a null element as a nil slice, stored as no bytes.
                    Value::Null => String::new(),
                    Value::String(s) => STANDARD.encode(go_std_decode(s).map_err(|at| {
                        decode_error(&format!("illegal base64 data at input byte {at}"))
                    })?),
                    other => return Err(type_error(other, "data", "[]uint8")),
                };
                data.insert(key.clone(), Value::String(text));
            }
        }
        Some(other) => return Err(type_error(other, "data", "map[string][]uint8")),
    }
    match obj.get("stringData") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (key, value) in m {
                let text = match value {
                    Value::Null => "",
                    Value::String(s) => s.as_str(),
                    other => return Err(type_error(other, "stringData", "string")),
                };
                data.insert(key.clone(), Value::String(STANDARD.encode(text.as_bytes())));
            }
        }
        Some(other) => return Err(type_error(other, "stringData", "map[string]string")),
    }
    obj.remove("stringData");
    if data.is_empty() {
        obj.remove("data");
    } else {
        obj.insert("data".into(), Value::Object(data));
    }
    if obj
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        obj.insert("type".into(), "Opaque".into());
    }
    Ok(())
}

/// A patch whose result does not decode: the apiserver's patcher answers 422 on the field
/// `patch`, quoting the patched object (`applyPatchToCurrentObject`).
pub(super) fn patch_error(patched: &Value, decode: ApiStatus) -> ApiStatus {
    let rendered = serde_json::to_string(patched).unwrap_or_default();
    ApiStatus::invalid(
        ("", ""),
        "",
        &[(
            "patch",
            "FieldValueInvalid",
            format!("Invalid value: {rendered:?}: {}", decode.message),
        )],
    )
}

/// The two core/v1 kinds this module knows: both guard their data when `immutable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DataKind {
    /// core/v1 Secret: decoded by [`fold`]; `type` is immutable too.
    Secret,
    /// core/v1 ConfigMap: `binaryData` is guarded with `data`.
    ConfigMap,
}

impl DataKind {
    /// The kind `desc` serves, when it is one of the two.
    pub(super) fn of(desc: &KindDescriptor) -> Option<Self> {
        match (
            desc.group.as_str(),
            desc.version.as_str(),
            desc.kind.as_str(),
        ) {
            ("", "v1", "Secret") => Some(Self::Secret),
            ("", "v1", "ConfigMap") => Some(Self::ConfigMap),
            _ => None,
        }
    }
}

/// The update rules of Secrets and ConfigMaps, in the order Go checks them; every broken
/// rule is one cause of a 422 `Invalid`.
pub(super) fn validate_update(
    kind: DataKind,
    old: &Value,
    new: &Value,
) -> Vec<(&'static str, &'static str, String)> {
    // Go compares decoded maps: an absent and an empty one are both read as none here.
    fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
        match v.get(name) {
            Some(Value::Object(m)) if m.is_empty() => None,
            Some(Value::Null) | None => None,
            Some(other) => Some(other),
        }
    }
    fn type_of(v: &Value) -> &str {
        v.get("type").and_then(Value::as_str).unwrap_or("")
    }
    let mut errs = Vec::new();
    if kind == DataKind::Secret {
        let (was, is) = (type_of(old), type_of(new));
        if was != is {
            errs.push((
                "type",
                "FieldValueInvalid",
                format!("Invalid value: {is:?}: field is immutable"),
            ));
        }
    }
    if old.get("immutable") == Some(&Value::Bool(true)) {
        const GUARDED: &str = "Forbidden: field is immutable when `immutable` is set";
        if new.get("immutable") != Some(&Value::Bool(true)) {
            errs.push(("immutable", "FieldValueForbidden", GUARDED.into()));
        }
        let guarded: &[&'static str] = match kind {
            DataKind::Secret => &["data"],
            DataKind::ConfigMap => &["data", "binaryData"],
        };
        for &name in guarded {
            if field(old, name) != field(new, name) {
                errs.push((name, "FieldValueForbidden", GUARDED.into()));
            }
        }
    }
    errs
}

/// `json: cannot unmarshal number into Go struct field Secret.stringData of type string`.
fn type_error(value: &Value, field: &str, go_type: &str) -> ApiStatus {
    let json_type = go_json_type(value);
    decode_error(&format!(
        "json: cannot unmarshal {json_type} into Go struct field Secret.{field} of type {go_type}"
    ))
}

fn decode_error(message: &str) -> ApiStatus {
    ApiStatus::bad_request(format!(
        "Secret in version \"v1\" cannot be handled as a Secret: {message}"
    ))
}

/// Go's `base64.StdEncoding.Decode`: padding required, `\r` and `\n` skipped anywhere,
/// trailing bits ignored. The error is the input offset Go's `CorruptInputError` carries
/// (the base64 crate has no mode that skips newlines or reports Go's offsets).
fn go_std_decode(text: &str) -> Result<Vec<u8>, usize> {
    let src = text.as_bytes();
    let is_newline = |c: u8| c == b'\n' || c == b'\r';
    let sextet = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    // One quantum of four symbols per round; each round consumes at least one byte, so the
    // loop ends within `src.len()` rounds.
    loop {
        let mut quantum = [0u8; 4];
        let mut filled = 0;
        let mut done = false;
        while filled < 4 {
            if si == src.len() {
                if filled == 0 {
                    return Ok(out);
                }
                // Padding is required, so a short final quantum is corrupt at its start.
                return Err(si - filled);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = sextet(c) {
                quantum[filled] = v;
                filled += 1;
                continue;
            }
            if is_newline(c) {
                continue;
            }
            if c != b'=' || filled < 2 {
                return Err(si - 1);
            }
            if filled == 2 {
                // "==" is expected; the first is consumed.
                while si < src.len() && is_newline(src[si]) {
                    si += 1;
                }
                if si == src.len() {
                    return Err(src.len());
                }
                if src[si] != b'=' {
                    return Err(si - 1);
                }
                si += 1;
            }
            while si < src.len() && is_newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                return Err(si);
            }
            done = true;
            break;
        }
        let val = u32::from(quantum[0]) << 18
            | u32::from(quantum[1]) << 12
            | u32::from(quantum[2]) << 6
            | u32::from(quantum[3]);
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        // `filled` symbols make `filled - 1` bytes (4 → 3, 3 → 2, 2 → 1).
        out.extend_from_slice(&bytes[..filled - 1]);
        if done {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_decoding_offsets_and_leniency() {
        assert_eq!(go_std_decode("YWJj").unwrap(), b"abc");
        assert_eq!(go_std_decode("YWJjZA==").unwrap(), b"abcd");
        assert_eq!(go_std_decode("YWJjZGU=").unwrap(), b"abcde");
        assert_eq!(go_std_decode("").unwrap(), b"");
        // Newlines anywhere, and non-zero trailing bits, as Go's non-strict decoder.
        assert_eq!(go_std_decode("YW\nJj\r\n").unwrap(), b"abc");
        assert_eq!(go_std_decode("YR==").unwrap(), b"a");
        // Go's CorruptInputError offsets.
        assert_eq!(go_std_decode("YQ"), Err(0));
        assert_eq!(go_std_decode("YWJjZA"), Err(4));
        assert_eq!(go_std_decode("YQ="), Err(3));
        assert_eq!(go_std_decode("not base64!"), Err(3));
        assert_eq!(go_std_decode("Y==="), Err(1));
        assert_eq!(go_std_decode("YQ==YQ=="), Err(4));
        assert_eq!(go_std_decode("YQ=x"), Err(2));
    }

    #[test]
    fn string_data_folds_into_data_and_is_not_kept() {
        let mut s = json!({"kind": "Secret", "data": {"a": "YQ==", "b": "Yg==", "n": "YW\nJj"},
            "stringData": {"b": "over", "c": "new"}});
        fold(&mut s).unwrap();
        assert_eq!(
            s,
            json!({"kind": "Secret", "type": "Opaque",
                "data": {"a": "YQ==", "b": "b3Zlcg==", "c": "bmV3", "n": "YWJj"}})
        );
        let mut only = json!({"type": "kubernetes.io/tls", "stringData": {"k": ""}});
        fold(&mut only).unwrap();
        assert_eq!(
            only,
            json!({"type": "kubernetes.io/tls", "data": {"k": ""}})
        );
        // An error leaves the body as it was.
        let bad = json!({"data": {"a": "YQ=="}, "stringData": {"b": true}});
        let mut kept = bad.clone();
        assert!(fold(&mut kept).is_err());
        assert_eq!(kept, bad);
    }

    #[test]
    fn a_secrets_type_and_immutable_data_stay() {
        let old = json!({"type": "Opaque", "data": {"a": "YQ=="}, "immutable": true});
        let same = old.clone();
        assert!(validate_update(DataKind::Secret, &old, &same).is_empty());
        let changed = json!({"type": "kubernetes.io/tls", "data": {"a": "Yg=="}});
        let fields: Vec<&str> = validate_update(DataKind::Secret, &old, &changed)
            .iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(fields, ["type", "immutable", "data"]);
        // A ConfigMap has no type rule but guards binaryData too; a mutable one is free.
        let cm = json!({"immutable": true, "binaryData": {"b": "AA=="}});
        let fields: Vec<&str> =
            validate_update(DataKind::ConfigMap, &cm, &json!({"immutable": true}))
                .iter()
                .map(|e| e.0)
                .collect();
        assert_eq!(fields, ["binaryData"]);
        assert!(
            validate_update(
                DataKind::ConfigMap,
                &json!({"data": {}}),
                &json!({"data": {"k": "v"}})
            )
            .is_empty()
        );
    }

    #[test]
    fn bad_values_are_the_decoders_400() {
        let message = |body: Value| {
            let mut body = body;
            let status = fold(&mut body).unwrap_err();
            assert_eq!(status.code, 400);
            status.message
        };
        assert_eq!(
            message(json!({"stringData": {"k": 1}})),
            "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal number into Go struct field Secret.stringData of type string"
        );
        assert_eq!(
            message(json!({"stringData": "x"})),
            "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal string into Go struct field Secret.stringData of type map[string]string"
        );
        assert_eq!(
            message(json!({"data": {"k": 7}})),
            "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal number into Go struct field Secret.data of type []uint8"
        );
        assert_eq!(
            message(json!({"data": {"k": "plain text"}})),
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 5"
        );
    }
}
