//! Label selectors, applied server-side by the simulated apiserver (the subset the
//! apiserver accepts: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`).

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

/// A selector that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad label selector {selector:?}: {message}")]
pub struct SelectorError {
    /// The selector.
    pub selector: String,
    /// What is wrong.
    pub message: String,
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0u32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn set(values: &str) -> Option<Vec<String>> {
    let inner = values.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl Selector {
    /// Parses a selector; the empty string selects everything.
    ///
    /// # Errors
    /// [`SelectorError`] naming the requirement that does not parse.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let fail = |message: String| SelectorError {
            selector: selector.to_owned(),
            message,
        };
        let mut requirements = Vec::new();
        if selector.trim().is_empty() {
            return Ok(Selector(requirements));
        }
        for part in split_top_level(selector) {
            let part = part.trim();
            let key_ok = |k: &str| !k.is_empty() && !k.contains([' ', '=', '!', '(', ')']);
            let requirement = if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once(" notin ") {
                let values = set(v).ok_or_else(|| fail(format!("{part:?}: expected (a,b)")))?;
                Requirement::NotIn(k.trim().to_owned(), values)
            } else if let Some((k, v)) = part.split_once(" in ") {
                let values = set(v).ok_or_else(|| fail(format!("{part:?}: expected (a,b)")))?;
                Requirement::In(k.trim().to_owned(), values)
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::DoesNotExist(k.trim().to_owned())
            } else {
                Requirement::Exists(part.to_owned())
            };
            let key = match &requirement {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::In(k, _)
                | Requirement::NotIn(k, _)
                | Requirement::Exists(k)
                | Requirement::DoesNotExist(k) => k,
            };
            if !key_ok(key) {
                return Err(fail(format!("{part:?}: bad key {key:?}")));
            }
            requirements.push(requirement);
        }
        Ok(Selector(requirements))
    }

    /// Whether `labels` satisfy every requirement.
    #[must_use]
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn equality_set_and_existence_requirements_all_must_hold() {
        let s = Selector::parse("app=cell, tier in (a, b),!legacy,zone,env!=prod").unwrap();
        let ok = labels(&[("app", "cell"), ("tier", "b"), ("zone", "z1")]);
        assert!(s.matches(&ok));
        let mut wrong_tier = ok.clone();
        wrong_tier.insert("tier".into(), "c".into());
        assert!(!s.matches(&wrong_tier));
        let mut legacy = ok.clone();
        legacy.insert("legacy".into(), String::new());
        assert!(!s.matches(&legacy));
        let mut prod = ok;
        prod.insert("env".into(), "prod".into());
        assert!(!s.matches(&prod));
    }

    #[test]
    fn empty_selects_everything_and_garbage_is_an_error() {
        assert!(Selector::parse("").unwrap().matches(&labels(&[])));
        assert!(Selector::parse("a in b").is_err());
        assert!(Selector::parse("=x").is_err());
        assert!(
            Selector::parse("x notin (a)")
                .unwrap()
                .matches(&labels(&[]))
        );
    }
}
