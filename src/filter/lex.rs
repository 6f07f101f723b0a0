//! Tokens of a display filter, each with the byte span it came from (for the caret under an
//! error).

use super::error::{FilterError, Span};

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    LParen,
    RParen,
    LBrace,
    RBrace,
    Comma,
    /// `==`, `!=`, `>`, `>=`, `<`, `<=`, `~`, `&&`, `||`, `!` as written.
    Sym(&'static str),
    /// A quoted string, unescaped.
    Str(String),
    /// Anything else made of word characters: field names, keywords (`and`, `contains`…),
    /// numbers, bare values (GUIDs, `ip:port`).
    Word(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Characters a bare word is made of: field names (`flow.initiator_name`), numbers (`-1.5`,
/// `0x1f`), GUIDs, `ip:port`, `*` in finding globs.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | ':' | '-' | '+' | '/' | '*' | '@' | '#')
}

/// Splits `src` into tokens.
pub fn tokenize(src: &str) -> Result<Vec<Token>, FilterError> {
    let mut out = Vec::new();
    let mut it = src.char_indices().peekable();
    while let Some(&(i, c)) = it.peek() {
        if c.is_whitespace() {
            it.next();
            continue;
        }
        let one = |tok| Token {
            tok,
            span: Span::new(i, i + c.len_utf8()),
        };
        match c {
            '(' | ')' | '{' | '}' | ',' => {
                it.next();
                out.push(one(match c {
                    '(' => Tok::LParen,
                    ')' => Tok::RParen,
                    '{' => Tok::LBrace,
                    '}' => Tok::RBrace,
                    _ => Tok::Comma,
                }));
            }
            '"' | '\'' => {
                it.next();
                let mut s = String::new();
                let mut end = None;
                while let Some((j, d)) = it.next() {
                    match d {
                        _ if d == c => {
                            end = Some(j + 1);
                            break;
                        }
                        '\\' => match it.next() {
                            Some((_, 'n')) => s.push('\n'),
                            Some((_, 't')) => s.push('\t'),
                            Some((_, e)) => s.push(e),
                            None => break,
                        },
                        _ => s.push(d),
                    }
                }
                let Some(end) = end else {
                    return Err(FilterError::UnterminatedString {
                        at: Span::new(i, src.len()),
                    });
                };
                out.push(Token {
                    tok: Tok::Str(s),
                    span: Span::new(i, end),
                });
            }
            '=' | '!' | '>' | '<' | '~' | '&' | '|' => {
                it.next();
                let next = it.peek().map(|&(_, d)| d);
                let (sym, len): (&'static str, usize) = match (c, next) {
                    ('=', Some('=')) => ("==", 2),
                    ('!', Some('=')) => ("!=", 2),
                    ('>', Some('=')) => (">=", 2),
                    ('<', Some('=')) => ("<=", 2),
                    ('&', Some('&')) => ("&&", 2),
                    ('|', Some('|')) => ("||", 2),
                    // A single `=` is accepted as `==` (what fingers type in a hurry).
                    ('=', _) => ("==", 1),
                    ('!', _) => ("!", 1),
                    ('>', _) => (">", 1),
                    ('<', _) => ("<", 1),
                    ('~', _) => ("~", 1),
                    _ => {
                        return Err(FilterError::BadChar {
                            ch: c,
                            at: Span::new(i, i + 1),
                        })
                    }
                };
                if len == 2 {
                    it.next();
                }
                out.push(Token {
                    tok: Tok::Sym(sym),
                    span: Span::new(i, i + len),
                });
            }
            _ if is_word_char(c) => {
                let mut end = i;
                let mut w = String::new();
                while let Some(&(j, d)) = it.peek() {
                    if !is_word_char(d) {
                        break;
                    }
                    w.push(d);
                    end = j + d.len_utf8();
                    it.next();
                }
                out.push(Token {
                    tok: Tok::Word(w),
                    span: Span::new(i, end),
                });
            }
            _ => {
                return Err(FilterError::BadChar {
                    ch: c,
                    at: Span::new(i, i + c.len_utf8()),
                })
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s)
            .expect("tokens")
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn words_symbols_and_strings() {
        assert_eq!(
            toks(r#"sqos.limit>=100&&!(name == "a \"b\"")"#),
            vec![
                Tok::Word("sqos.limit".into()),
                Tok::Sym(">="),
                Tok::Word("100".into()),
                Tok::Sym("&&"),
                Tok::Sym("!"),
                Tok::LParen,
                Tok::Word("name".into()),
                Tok::Sym("=="),
                Tok::Str("a \"b\"".into()),
                Tok::RParen,
            ]
        );
        assert_eq!(
            toks("src == 10.0.0.11:445"),
            vec![
                Tok::Word("src".into()),
                Tok::Sym("=="),
                Tok::Word("10.0.0.11:445".into()),
            ]
        );
    }

    #[test]
    fn spans_point_at_the_source() {
        let t = tokenize("a  ==  'x'").expect("tokens");
        assert_eq!(t[1].span, Span::new(3, 5));
        assert_eq!(t[2].span, Span::new(7, 10));
    }

    #[test]
    fn errors() {
        assert_eq!(
            tokenize("name == \"abc"),
            Err(FilterError::UnterminatedString {
                at: Span::new(8, 12)
            })
        );
        assert!(matches!(
            tokenize("a & b"),
            Err(FilterError::BadChar { ch: '&', .. })
        ));
        assert!(matches!(
            tokenize("a $ b"),
            Err(FilterError::BadChar { ch: '$', .. })
        ));
    }
}
