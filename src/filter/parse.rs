//! The display filter grammar (docs/filter.md), parsed by recursive descent into an [`Expr`]:
//!
//! ```text
//! expr    = or
//! or      = and { ("or" | "||") and }
//! and     = unary { ("and" | "&&") unary }
//! unary   = ("not" | "!") unary | "(" expr ")" | test
//! test    = FIELD [ CMP value | "contains" value | ("matches" | "~") STRING
//!                 | "in" "{" value { [","] value } "}" ]
//! CMP     = "==" | "eq" | "!=" | "ne" | ">" | "gt" | ">=" | "ge" | "<" | "lt" | "<=" | "le"
//! value   = STRING | WORD
//! ```

use regex::{Regex, RegexBuilder};
use uuid::Uuid;

use super::error::{FilterError, Span};
use super::fields::{resolve, Context, FieldRef, Unresolved};
use super::lex::{tokenize, Tok, Token};
use super::shortcut::Shortcut;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Contains,
}

/// A value written in a filter, with the readings it allows.
#[derive(Clone, Debug)]
pub struct Literal {
    pub text: String,
    pub int: Option<i128>,
    pub float: Option<f64>,
    pub boolean: Option<bool>,
    pub uuid: Option<Uuid>,
}

impl Literal {
    pub fn new(text: &str) -> Self {
        let int = parse_int(text);
        let float = int
            .map(|i| i as f64)
            .or_else(|| text.parse::<f64>().ok().filter(|f| f.is_finite()));
        let boolean = match text.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        };
        Literal {
            text: text.to_string(),
            int,
            float,
            boolean,
            uuid: Uuid::parse_str(text).ok(),
        }
    }
}

fn parse_int(t: &str) -> Option<i128> {
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t),
    };
    let v = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => i128::from_str_radix(hex, 16).ok()?,
        None if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            digits.parse().ok()?
        }
        None => return None,
    };
    Some(if neg { -v } else { v })
}

#[derive(Clone, Debug)]
pub enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    /// The field is present (not null, not an empty list).
    Exists(FieldRef),
    Cmp {
        field: FieldRef,
        op: CmpOp,
        value: Literal,
    },
    In {
        field: FieldRef,
        values: Vec<Literal>,
    },
    Matches {
        field: FieldRef,
        regex: Regex,
    },
    /// A command-line shortcut (`--flow`, `--vm`, `--finding`, `--time`).
    Shortcut(Shortcut),
}

impl Expr {
    pub fn and(a: Expr, b: Expr) -> Expr {
        Expr::And(Box::new(a), Box::new(b))
    }
    pub fn or(a: Expr, b: Expr) -> Expr {
        Expr::Or(Box::new(a), Box::new(b))
    }

    /// Every field the expression reads.
    pub fn fields(&self, out: &mut Vec<FieldRef>) {
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => {
                a.fields(out);
                b.fields(out);
            }
            Expr::Not(a) => a.fields(out),
            Expr::Exists(f) => out.push(*f),
            Expr::Cmp { field, .. } | Expr::In { field, .. } | Expr::Matches { field, .. } => {
                out.push(*field)
            }
            Expr::Shortcut(_) => {}
        }
    }

    /// Every shortcut in the expression.
    pub fn shortcuts<'a>(&'a self, out: &mut Vec<&'a Shortcut>) {
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => {
                a.shortcuts(out);
                b.shortcuts(out);
            }
            Expr::Not(a) => a.shortcuts(out),
            Expr::Shortcut(s) => out.push(s),
            _ => {}
        }
    }
}

/// How deeply `(` and `not` may nest. The parser recurses once a level, so it has to stop
/// somewhere; a filter someone writes never comes near (a fuzzed one 3,700 levels deep
/// overflowed the stack).
pub const MAX_NESTING: usize = 100;

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    pos: usize,
    ctx: Context,
    /// `unary`s under way: the nesting level.
    depth: usize,
}

/// Parse a `-Y` expression for a command that lists `ctx`.
pub fn parse(src: &str, ctx: Context) -> Result<Expr, FilterError> {
    let toks = tokenize(src)?;
    if toks.is_empty() {
        return Err(FilterError::Empty);
    }
    let mut p = Parser {
        src,
        toks,
        pos: 0,
        ctx,
        depth: 0,
    };
    let e = p.or()?;
    if let Some(t) = p.peek() {
        let at = t.span;
        return Err(p.expected("`and`, `or` or the end of the filter", at));
    }
    Ok(e)
}

fn is_kw(t: &Tok, words: &[&str]) -> bool {
    match t {
        Tok::Word(w) => words.iter().any(|k| w.eq_ignore_ascii_case(k)),
        Tok::Sym(s) => words.contains(s),
        _ => false,
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn end_span(&self) -> Span {
        Span::new(self.src.len(), self.src.len())
    }

    fn describe(&self, at: Span) -> String {
        match self.src.get(at.start..at.end) {
            Some(s) if !s.is_empty() => format!("`{s}`"),
            _ => "the end of the filter".into(),
        }
    }

    fn expected(&self, expected: &'static str, at: Span) -> FilterError {
        FilterError::Expected {
            expected,
            found: self.describe(at),
            at,
        }
    }

    fn eat(&mut self, words: &[&str]) -> bool {
        if self.peek().is_some_and(|t| is_kw(&t.tok, words)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.and()?;
        while self.eat(&["or", "||"]) {
            e = Expr::or(e, self.and()?);
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.unary()?;
        while self.eat(&["and", "&&"]) {
            e = Expr::and(e, self.unary()?);
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        if self.depth > MAX_NESTING {
            if let Some(t) = self.peek() {
                return Err(FilterError::TooDeep {
                    max: MAX_NESTING,
                    at: t.span,
                });
            }
        }
        self.depth += 1;
        let e = self.nested();
        self.depth -= 1;
        e
    }

    /// `not X`, `( X )` or a test: what `unary` parses, one level down.
    fn nested(&mut self) -> Result<Expr, FilterError> {
        if self.eat(&["not", "!"]) {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        let Some(t) = self.next() else {
            return Err(self.expected("a field, `not` or `(`", self.end_span()));
        };
        match t.tok {
            Tok::LParen => {
                let e = self.or()?;
                match self.next() {
                    Some(Token {
                        tok: Tok::RParen, ..
                    }) => Ok(e),
                    Some(t) => Err(self.expected("`)`", t.span)),
                    None => Err(self.expected("`)`", self.end_span())),
                }
            }
            Tok::Word(ref w) if !is_kw(&t.tok, KEYWORDS) => self.test(w, t.span),
            _ => Err(self.expected("a field name", t.span)),
        }
    }

    fn field(&self, name: &str, at: Span) -> Result<FieldRef, FilterError> {
        resolve(self.ctx, name).map_err(|e| match e {
            Unresolved::Unknown { hint } => FilterError::UnknownField {
                name: name.to_string(),
                hint,
                at,
            },
            Unresolved::NotHere(why) => FilterError::NotHere {
                name: name.to_string(),
                why,
                at,
            },
        })
    }

    fn value(&mut self) -> Result<(Literal, Span), FilterError> {
        match self.next() {
            Some(Token {
                tok: Tok::Str(s),
                span,
            }) => Ok((Literal::new(&s), span)),
            // A keyword is not a value (quote it to mean the word).
            Some(Token {
                tok: Tok::Word(w),
                span,
            }) if !KEYWORDS.iter().any(|k| w.eq_ignore_ascii_case(k)) => {
                Ok((Literal::new(&w), span))
            }
            Some(t) => Err(self.expected("a value", t.span)),
            None => Err(self.expected("a value", self.end_span())),
        }
    }

    fn test(&mut self, name: &str, at: Span) -> Result<Expr, FilterError> {
        let field = self.field(name, at)?;
        let Some(t) = self.peek().cloned() else {
            return Ok(Expr::Exists(field));
        };
        let op = match &t.tok {
            Tok::Sym("==") => Some(CmpOp::Eq),
            Tok::Sym("!=") => Some(CmpOp::Ne),
            Tok::Sym(">") => Some(CmpOp::Gt),
            Tok::Sym(">=") => Some(CmpOp::Ge),
            Tok::Sym("<") => Some(CmpOp::Lt),
            Tok::Sym("<=") => Some(CmpOp::Le),
            Tok::Word(w) => match w.to_ascii_lowercase().as_str() {
                "eq" => Some(CmpOp::Eq),
                "ne" => Some(CmpOp::Ne),
                "gt" => Some(CmpOp::Gt),
                "ge" => Some(CmpOp::Ge),
                "lt" => Some(CmpOp::Lt),
                "le" => Some(CmpOp::Le),
                "contains" => Some(CmpOp::Contains),
                _ => None,
            },
            _ => None,
        };
        if let Some(op) = op {
            self.pos += 1;
            let (value, _) = self.value()?;
            return Ok(Expr::Cmp { field, op, value });
        }
        if is_kw(&t.tok, &["matches", "~"]) {
            self.pos += 1;
            let (lit, span) = self.value()?;
            // Wireshark's `matches` is case-insensitive; so is ours.
            let regex = RegexBuilder::new(&lit.text)
                .case_insensitive(true)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| FilterError::BadRegex {
                    msg: regex_message(&e),
                    at: span,
                })?;
            return Ok(Expr::Matches { field, regex });
        }
        if is_kw(&t.tok, &["in"]) {
            self.pos += 1;
            match self.next() {
                Some(Token {
                    tok: Tok::LBrace, ..
                }) => {}
                Some(t) => return Err(self.expected("`{`", t.span)),
                None => return Err(self.expected("`{`", self.end_span())),
            }
            let mut values = Vec::new();
            loop {
                match self.peek().map(|t| &t.tok) {
                    Some(Tok::RBrace) => {
                        self.pos += 1;
                        break;
                    }
                    Some(Tok::Comma) if !values.is_empty() => self.pos += 1,
                    None => return Err(self.expected("`}`", self.end_span())),
                    _ => values.push(self.value()?.0),
                }
            }
            return Ok(Expr::In { field, values });
        }
        if matches!(t.tok, Tok::Word(_) | Tok::Str(_)) && !is_kw(&t.tok, KEYWORDS) {
            return Err(self.expected(
                "a comparison (`==`, `!=`, `>`, `contains`, `matches`, `in`…)",
                t.span,
            ));
        }
        Ok(Expr::Exists(field))
    }
}

/// Words with a meaning of their own: never field names.
const KEYWORDS: &[&str] = &[
    "and", "or", "not", "eq", "ne", "gt", "ge", "lt", "le", "contains", "matches", "in",
];

/// The regex crate's message, on one line.
fn regex_message(e: &regex::Error) -> String {
    let s = e.to_string();
    s.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('^') && !l.starts_with("regex parse"))
        .unwrap_or("invalid")
        .trim_start_matches("error: ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> FilterError {
        match parse(s, Context::Messages) {
            Err(e) => e,
            Ok(e) => panic!("{s} parsed as {e:?}"),
        }
    }

    #[test]
    fn nesting_stops_at_its_bound_with_an_error_not_a_stack_overflow() {
        let deep = |n: usize| format!("{}limit > 1{}", "(".repeat(n), ")".repeat(n));
        assert!(parse(&deep(MAX_NESTING), Context::Messages).is_ok());
        let nots = format!("{}limit > 1", "! ".repeat(MAX_NESTING));
        assert!(parse(&nots, Context::Messages).is_ok());
        // The fuzzed input's shape, and far deeper: the error names the first level too many.
        let mixed = "!(".repeat(20_000);
        let e = err(&mixed);
        assert_eq!(
            e.span(),
            Some(Span {
                start: 101,
                end: 102
            }),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "`(` and `not` nest deeper than 100 levels here"
        );
        let e = err(&deep(MAX_NESTING + 1));
        assert_eq!(
            e.span(),
            Some(Span {
                start: 101,
                end: 106
            })
        );
    }

    #[test]
    fn precedence_not_and_or() {
        let e = parse(
            "not limit > 1 and reservation == 2 or frame < 3",
            Context::Messages,
        )
        .expect("parses");
        let Expr::Or(a, _) = e else {
            panic!("or at the top: {e:?}")
        };
        let Expr::And(n, _) = *a else {
            panic!("and under or")
        };
        assert!(matches!(*n, Expr::Not(_)));
    }

    #[test]
    fn literals_have_their_readings() {
        let l = Literal::new("0x10");
        assert_eq!((l.int, l.float), (Some(16), Some(16.0)));
        let l = Literal::new("-2.5");
        assert_eq!((l.int, l.float), (None, Some(-2.5)));
        assert_eq!(Literal::new("TRUE").boolean, Some(true));
        assert!(Literal::new("06608EA2-8B2A-4C3B-9E2B-1D0E5F2A9C11")
            .uuid
            .is_some());
        assert_eq!(Literal::new("vm01").float, None);
        assert_eq!(Literal::new("inf").float, None);
    }

    #[test]
    fn errors_point_at_the_token() {
        let e = err("limit >");
        assert_eq!(e.span(), Some(Span::new(7, 7)));
        assert!(e.to_string().contains("expected a value"), "{e}");
        let e = err("limit > 1 and");
        assert!(e.to_string().contains("a field"), "{e}");
        let e = err("(limit > 1");
        assert!(e.to_string().contains("`)`"), "{e}");
        let e = err("limit 5");
        assert_eq!(e.span(), Some(Span::new(6, 7)));
        let e = err("initiator_name matches \"(\"");
        assert!(matches!(e, FilterError::BadRegex { .. }), "{e:?}");
        assert_eq!(e.span(), Some(Span::new(23, 26)));
        let e = err("limit > 1 )");
        assert_eq!(e.span(), Some(Span::new(10, 11)));
        assert_eq!(parse("  ", Context::Flows).err(), Some(FilterError::Empty));
        let e = err("and");
        assert!(e.to_string().contains("a field name"), "{e}");
    }

    #[test]
    fn in_sets_with_or_without_commas() {
        let e = parse("limit in {1, 2 3}", Context::Messages).expect("parses");
        let Expr::In { values, .. } = e else {
            panic!("in")
        };
        assert_eq!(values.len(), 3);
        assert!(parse("limit in {1", Context::Messages).is_err());
    }
}
