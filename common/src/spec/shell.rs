//! What `/bin/sh` makes of a command template's literal text, as far as quoting goes:
//! the quoting context at each placeholder, and a value quoted so that it stays one piece
//! of data in that context (never code, never split into several words).

/// Where in `sh` syntax a placeholder stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Context {
    /// Outside any quotes: a value must become exactly one word with no expansion.
    Bare,
    /// Inside `'...'`: only the closing quote is special.
    SingleQuoted,
    /// Inside `"..."`: `$`, backquote, `"` and `\` are special.
    DoubleQuoted,
    /// Where quoting nests or is not parsed: inside `$(...)`, backquotes, `${...}`,
    /// `$'...'`, a here-document, a comment, right after a backslash, or right after a
    /// `$` (which would turn a quoted value into `$'...'`). No quoting is safe there.
    Nested,
}

/// An open construct on the way to the current point.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Frame {
    Single,
    Double,
    /// `$(` (and plain parentheses inside it, so that `)` closes the right one).
    Substitution,
    Backquote,
    /// `${`.
    Parameter,
    /// `$'`.
    AnsiC,
    /// `#` to the end of the line.
    Comment,
    /// Everything after `<<`: here-documents are not followed, the rest counts as nested.
    HereDoc,
}

/// Follows the literal text of a command, piece by piece, keeping its quoting context.
#[derive(Debug, Default)]
pub(crate) struct Lexer {
    stack: Vec<Frame>,
    /// The previous character was an unquoted backslash.
    escaped: bool,
    /// The previous character was a `$` that could start an expansion.
    dollar: bool,
    /// The previous character, to tell `#` at a word's start (a comment) from one inside.
    previous: Option<char>,
}

impl Lexer {
    /// Reads literal text that the shell will see verbatim.
    pub(crate) fn feed(&mut self, text: &str) {
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            let next = chars.peek().copied();
            let expands = !self.escaped && !matches!(self.stack.last(), Some(Frame::Single | Frame::AnsiC));
            let consumed = self.step(c, next);
            if consumed {
                chars.next();
            }
            self.dollar = c == '$' && expands && !consumed;
            self.previous = Some(c);
        }
    }

    /// Notes that a placeholder's value was inserted: it is balanced and ends a word part.
    pub(crate) fn value_inserted(&mut self) {
        self.escaped = false;
        self.dollar = false;
        self.previous = Some('x');
    }

    /// The quoting context at the current point.
    pub(crate) fn context(&self) -> Context {
        let nested = |f: &Frame| !matches!(f, Frame::Single | Frame::Double);
        if self.escaped || self.dollar || self.stack.iter().any(nested) {
            return Context::Nested;
        }
        match self.stack.last() {
            None => Context::Bare,
            Some(Frame::Single) => Context::SingleQuoted,
            _ => Context::DoubleQuoted,
        }
    }

    /// Takes one character; answers whether `next` was consumed with it.
    fn step(&mut self, c: char, next: Option<char>) -> bool {
        if self.escaped {
            self.escaped = false;
            return false;
        }
        match self.stack.last().copied() {
            Some(Frame::HereDoc) => false,
            Some(Frame::Comment) => {
                if c == '\n' {
                    self.stack.pop();
                }
                false
            }
            Some(Frame::Single) => {
                if c == '\'' {
                    self.stack.pop();
                }
                false
            }
            Some(Frame::AnsiC) => {
                match c {
                    '\\' => self.escaped = true,
                    '\'' => _ = self.stack.pop(),
                    _ => {}
                }
                false
            }
            Some(Frame::Double) => match c {
                '\\' => {
                    self.escaped = true;
                    false
                }
                '"' => {
                    self.stack.pop();
                    false
                }
                _ => self.expansion(c, next),
            },
            top => self.unquoted(c, next, top),
        }
    }

    /// A character outside quotes (at the top level or inside `$(`, backquotes, `${`).
    fn unquoted(&mut self, c: char, next: Option<char>, top: Option<Frame>) -> bool {
        let word_start = self.previous.is_none_or(|p| p.is_whitespace() || ";&|()<>".contains(p));
        match c {
            '\\' => self.escaped = true,
            '\'' => self.stack.push(Frame::Single),
            '"' => self.stack.push(Frame::Double),
            '#' if word_start => self.stack.push(Frame::Comment),
            '<' if next == Some('<') => {
                self.stack.push(Frame::HereDoc);
                return true;
            }
            '(' if top == Some(Frame::Substitution) => self.stack.push(Frame::Substitution),
            ')' if top == Some(Frame::Substitution) => _ = self.stack.pop(),
            '}' if top == Some(Frame::Parameter) => _ = self.stack.pop(),
            '$' if next == Some('\'') => {
                self.stack.push(Frame::AnsiC);
                return true;
            }
            _ => return self.expansion(c, next),
        }
        false
    }

    /// `$(`, `${` and backquotes, which open a nested context in and out of `"..."`.
    fn expansion(&mut self, c: char, next: Option<char>) -> bool {
        match (c, next) {
            ('$', Some('(')) => self.stack.push(Frame::Substitution),
            ('$', Some('{')) => self.stack.push(Frame::Parameter),
            ('`', _) if self.stack.last() == Some(&Frame::Backquote) => _ = self.stack.pop(),
            ('`', _) => self.stack.push(Frame::Backquote),
            _ => return false,
        }
        c == '$'
    }
}

/// Whether `value` means the same bare, in quotes or anywhere else: non-empty and made
/// only of characters no shell context treats specially.
pub(crate) fn is_plain(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"_./:=+,@%-".contains(&b))
}

/// `value` quoted for `context` so the shell reads it back unchanged as (part of) one
/// word, or `None` where no quoting is safe. Plain values are inserted as they are.
pub(crate) fn quote(value: &str, context: Context) -> Option<String> {
    if is_plain(value) {
        return Some(value.to_string());
    }
    match context {
        Context::Bare => Some(format!("'{}'", value.replace('\'', r"'\''"))),
        Context::SingleQuoted => Some(value.replace('\'', r"'\''")),
        Context::DoubleQuoted => {
            let mut out = String::with_capacity(value.len() + 8);
            for c in value.chars() {
                if matches!(c, '$' | '`' | '"' | '\\') {
                    out.push('\\');
                }
                out.push(c);
            }
            Some(out)
        }
        Context::Nested => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context_after(text: &str) -> Context {
        let mut lexer = Lexer::default();
        lexer.feed(text);
        lexer.context()
    }

    #[test]
    fn quoting_context_follows_quotes_and_escapes() {
        assert_eq!(context_after("echo "), Context::Bare);
        assert_eq!(context_after("echo '"), Context::SingleQuoted);
        assert_eq!(context_after("echo \"a"), Context::DoubleQuoted);
        assert_eq!(context_after("echo \"a\\\"b"), Context::DoubleQuoted);
        assert_eq!(context_after("echo 'a\"' x"), Context::Bare);
        assert_eq!(context_after("echo \"it's\" "), Context::Bare);
        assert_eq!(context_after("echo \\"), Context::Nested);
        assert_eq!(context_after("echo \\' "), Context::Bare);
        assert_eq!(context_after("echo $"), Context::Nested);
        assert_eq!(context_after("echo \"a$"), Context::Nested);
        assert_eq!(context_after("echo \\$"), Context::Bare);
        assert_eq!(context_after("echo '$"), Context::SingleQuoted);
        assert_eq!(context_after("echo $x "), Context::Bare);
    }

    #[test]
    fn nested_constructs_are_recognised_and_left() {
        assert_eq!(context_after("echo $(cat "), Context::Nested);
        assert_eq!(context_after("echo \"$(cat \""), Context::Nested);
        assert_eq!(context_after("echo $( (a) ) "), Context::Bare);
        assert_eq!(context_after("echo $((1 + (2))) "), Context::Bare);
        assert_eq!(context_after("echo `cat "), Context::Nested);
        assert_eq!(context_after("echo `cat` "), Context::Bare);
        assert_eq!(context_after("echo ${x:-"), Context::Nested);
        assert_eq!(context_after("echo ${x} "), Context::Bare);
        assert_eq!(context_after("echo $'a\\'"), Context::Nested);
        assert_eq!(context_after("echo $'a\\'b' "), Context::Bare);
        assert_eq!(context_after("echo x # don't "), Context::Nested);
        assert_eq!(context_after("echo x # don't\necho "), Context::Bare);
        assert_eq!(context_after("echo a#b "), Context::Bare);
        assert_eq!(context_after("cat <<EOF\n"), Context::Nested);
    }

    #[test]
    fn values_are_quoted_for_their_context() {
        assert_eq!(quote("/data/in-1.txt", Context::Nested).as_deref(), Some("/data/in-1.txt"));
        assert_eq!(quote("", Context::Bare).as_deref(), Some("''"));
        assert_eq!(quote("a b'c", Context::Bare).as_deref(), Some(r"'a b'\''c'"));
        assert_eq!(quote("a b'c", Context::SingleQuoted).as_deref(), Some(r"a b'\''c"));
        assert_eq!(quote("$x `y` \"z\" \\", Context::DoubleQuoted).as_deref(), Some(r#"\$x \`y\` \"z\" \\"#));
        assert_eq!(quote("a b", Context::Nested), None);
    }
}
