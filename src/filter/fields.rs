//! The names a filter can use: the keys the JSON and CSV outputs already carry, nothing else.
//!
//! A message's fields are the columns of `sqos export --what messages --format csv` (the keys of
//! `sqos dissect --format jsonl`, the `sqos` object merged in, the findings as their codes); a
//! flow's are the columns of `sqos flows --format csv`; an interval row's those of `sqos export
//! --what series`. The lists live with the CSV writer ([`crate::output::csv`]); this module only
//! says which list a name belongs to, so a key added to the output is a filter field at once.

use crate::output::columns::{Column, FLOW_COLUMNS, MESSAGE_COLUMNS, SERIES_COLUMNS};

/// What a command lists, and so what a plain field name refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// SQOS messages (`dissect`, `export --what messages`, the TUI's Messages).
    Messages,
    /// Logical flows (`flows`, `plot`, `check`, `export --what flows`, the TUI's Flows).
    Flows,
    /// Per-interval rows of flows (`export --what series`).
    Series,
}

/// Whose value a field is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The SQOS message.
    Message,
    /// The logical flow (of the message, or the flow itself).
    Flow,
    /// An interval row.
    Row,
}

/// A resolved field: whose it is and its key in that object's flat JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldRef {
    pub scope: Scope,
    pub name: &'static str,
}

/// The flat columns of each scope.
pub fn names(scope: Scope) -> &'static [Column] {
    match scope {
        Scope::Message => MESSAGE_COLUMNS,
        Scope::Flow => FLOW_COLUMNS,
        Scope::Row => SERIES_COLUMNS,
    }
}

fn find(scope: Scope, name: &str) -> Option<FieldRef> {
    // A nested JSON key may be written with a dot (`observed.iops`) or as its flat CSV
    // column (`observed_iops`).
    let flat = name.replace('.', "_");
    names(scope)
        .iter()
        .find(|c| c.name == name || c.name == flat)
        .map(|c| FieldRef {
            scope,
            name: c.name,
        })
}

/// Why a name cannot be resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unresolved {
    Unknown { hint: String },
    NotHere(&'static str),
}

/// Resolve a name as written in a filter used in `ctx`.
///
/// `flow.X` is always the flow's field X; `sqos.X` the message's (the JSON's `sqos` object).
/// A plain name is a field of what the command lists, else — for messages — of the message's
/// flow, else — for flows — of the flow's messages.
pub fn resolve(ctx: Context, written: &str) -> Result<FieldRef, Unresolved> {
    let (prefix, rest) = match written.split_once('.') {
        Some((p @ ("flow" | "sqos" | "msg"), rest)) => (Some(p), rest),
        _ => (None, written),
    };
    let order: &[Scope] = match (prefix, ctx) {
        (Some("flow"), _) => &[Scope::Flow],
        (Some(_), _) => &[Scope::Message],
        (None, Context::Messages) => &[Scope::Message, Scope::Flow],
        (None, Context::Flows) => &[Scope::Flow, Scope::Message],
        (None, Context::Series) => &[Scope::Row, Scope::Flow],
    };
    if let Some(f) = order.iter().find_map(|s| find(*s, rest)) {
        return Ok(f);
    }
    if ctx == Context::Series && find(Scope::Message, rest).is_some() {
        return Err(Unresolved::NotHere(
            "interval rows have no message fields (use a flow field, `flow.…`)",
        ));
    }
    Err(Unresolved::Unknown {
        hint: suggestion(order, rest)
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default(),
    })
}

/// The closest known name, if it is close enough to be what was meant.
fn suggestion(scopes: &[Scope], name: &str) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for s in scopes {
        for n in names(*s).iter().map(|c| c.name) {
            let d = distance(name, n);
            if best.is_none_or(|(b, _)| d < b) {
                best = Some((d, n));
            }
        }
    }
    let (d, n) = best?;
    // A third of the name may be wrong, or the typed name is part of a longer one.
    (d <= name.chars().count().div_ceil(3) || (name.len() >= 4 && n.contains(name)))
        .then(|| n.to_string())
}

/// Levenshtein distance (names are short; quadratic is fine).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(ctx: Context, s: &str) -> Option<(Scope, &'static str)> {
        resolve(ctx, s).ok().map(|f| (f.scope, f.name))
    }

    #[test]
    fn plain_names_prefer_what_the_command_lists() {
        use Context::*;
        assert_eq!(r(Messages, "limit"), Some((Scope::Message, "limit")));
        assert_eq!(r(Flows, "limit"), Some((Scope::Flow, "limit")));
        assert_eq!(r(Messages, "flow.limit"), Some((Scope::Flow, "limit")));
        assert_eq!(r(Flows, "sqos.limit"), Some((Scope::Message, "limit")));
        // Not a message field: the message's flow's.
        assert_eq!(
            r(Messages, "normalized_iops"),
            Some((Scope::Flow, "normalized_iops"))
        );
        // Not a flow field: the flow's messages'.
        assert_eq!(r(Flows, "nt_status"), Some((Scope::Message, "nt_status")));
        assert_eq!(
            r(Messages, "flow.observed.iops"),
            Some((Scope::Flow, "observed_iops"))
        );
        assert_eq!(r(Series, "index"), Some((Scope::Row, "index")));
    }

    #[test]
    fn unknown_names_get_a_suggestion() {
        assert_eq!(
            resolve(Context::Messages, "lmit"),
            Err(Unresolved::Unknown {
                hint: " (did you mean `limit`?)".into()
            })
        );
        assert_eq!(
            resolve(Context::Flows, "flow.vm"),
            Err(Unresolved::Unknown {
                hint: String::new()
            })
        );
        assert!(matches!(
            resolve(Context::Series, "nt_status"),
            Err(Unresolved::NotHere(_))
        ));
    }
}
