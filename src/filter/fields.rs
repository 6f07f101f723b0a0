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

/// The message keys among `fields`, each once (what [`super::Subject::wanting`] takes).
pub fn message_keys(fields: &[FieldRef]) -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = fields
        .iter()
        .filter(|f| f.scope == Scope::Message)
        .map(|f| f.name)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
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
    let typed: Vec<char> = name.chars().collect();
    let (d, n) = closest(scopes, &typed, true)?;
    // A third of the name may be wrong, or the typed name is part of a longer one.
    (d <= typed.len().div_ceil(3) || (name.len() >= 4 && n.contains(name))).then(|| n.to_string())
}

/// The first known name at the smallest distance from `typed`, and that distance.
fn closest(
    scopes: &[Scope],
    typed: &[char],
    skip_by_length: bool,
) -> Option<(usize, &'static str)> {
    let mut work = Levenshtein::default();
    let mut best: Option<(usize, &'static str)> = None;
    for n in scopes.iter().flat_map(|s| names(*s)).map(|c| c.name) {
        // The distance is at least the difference in length, so a name that cannot come
        // strictly closer than the best so far need not be measured: the same answer, without
        // a quadratic walk per known name for every unknown one.
        if skip_by_length && best.is_some_and(|(b, _)| typed.len().abs_diff(n.chars().count()) >= b)
        {
            continue;
        }
        let d = work.distance(typed, n);
        if best.is_none_or(|(b, _)| d < b) {
            best = Some((d, n));
        }
    }
    best
}

/// Levenshtein distance (names are short; quadratic is fine), with its rows kept between calls.
#[derive(Default)]
struct Levenshtein {
    b: Vec<char>,
    prev: Vec<usize>,
    cur: Vec<usize>,
}

impl Levenshtein {
    fn distance(&mut self, a: &[char], b: &str) -> usize {
        self.b.clear();
        self.b.extend(b.chars());
        let n = self.b.len();
        self.prev.clear();
        self.prev.extend(0..=n);
        for (i, ca) in a.iter().enumerate() {
            self.cur.clear();
            self.cur.push(i + 1);
            for (j, cb) in self.b.iter().enumerate() {
                let sub = self.prev[j] + usize::from(ca != cb);
                let next = sub.min(self.prev[j + 1] + 1).min(self.cur[j] + 1);
                self.cur.push(next);
            }
            std::mem::swap(&mut self.prev, &mut self.cur);
        }
        self.prev[n]
    }
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

    #[test]
    fn skipping_names_by_length_keeps_the_closest() {
        // Every known name with a letter dropped, changed or added, some prefixes and strays:
        // the first name at the smallest distance is the one found when every name is measured.
        let mut typed: Vec<String> = vec!["".into(), "x".into(), "zzzzzzzzzzzzzzzzzzzzzzzz".into()];
        for s in [Scope::Message, Scope::Flow, Scope::Row] {
            for c in names(s) {
                let n = c.name;
                typed.push(n[1..].to_string());
                typed.push(format!("{n}s"));
                typed.push(n.replacen('_', "", 1));
                typed.push(n[..n.len() / 2].to_string());
            }
        }
        for scopes in [
            &[Scope::Message, Scope::Flow][..],
            &[Scope::Row, Scope::Flow],
        ] {
            for t in &typed {
                let chars: Vec<char> = t.chars().collect();
                assert_eq!(
                    closest(scopes, &chars, true),
                    closest(scopes, &chars, false),
                    "{t}"
                );
            }
        }
        let mut work = Levenshtein::default();
        assert_eq!(work.distance(&['k', 'i', 't', 't', 'e', 'n'], "sitting"), 3);
    }
}
