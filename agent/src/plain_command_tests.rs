//! Which command lines are plain commands, their words and where the child looks for the
//! program. What the child then does with them is tested in `process_tests.rs`.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use super::{PlainCommand, parse, plain_command, shell_is_dash};

const PATH: &str = "/opt/tools/bin:/usr/bin:/bin";

fn argv(words: &[&str]) -> Vec<OsString> {
    words.iter().map(OsString::from).collect()
}

fn in_path(name: &str) -> Vec<PathBuf> {
    ["/opt/tools/bin", "/usr/bin", "/bin"].iter().map(|dir| PathBuf::from(dir).join(name)).collect()
}

fn parse_in_path(line: &str) -> Option<PlainCommand> {
    parse(line, Some(OsStr::new(PATH)))
}

#[test]
fn a_lone_program_is_split_at_blanks_and_looked_for_in_each_path_entry() {
    let parsed = parse_in_path("  work\t--in=a,b  -n 3 x@y:z+1%  ");
    let expected = argv(&["work", "--in=a,b", "-n", "3", "x@y:z+1%"]);
    assert_eq!(parsed, Some(PlainCommand { candidates: in_path("work"), argv: expected }));
}

#[test]
fn a_program_given_as_a_path_is_tried_as_written() {
    let parsed = parse_in_path("bin/run 1").unwrap();
    assert_eq!(parsed.candidates, [PathBuf::from("bin/run")]);
    assert_eq!(parsed.argv, argv(&["bin/run", "1"]));
    assert_eq!(parse("/opt/x", None).unwrap().candidates, [PathBuf::from("/opt/x")]);
}

#[test]
fn the_search_stops_where_dash_would_search_differently() {
    let candidates = |path: &str| parse("work", Some(OsStr::new(path))).map(|plain| plain.candidates);
    assert_eq!(candidates("/a:/b::/c"), Some(vec![PathBuf::from("/a/work"), PathBuf::from("/b/work")]));
    assert_eq!(candidates("/a:bin:/c"), Some(vec![PathBuf::from("/a/work")]));
    assert_eq!(candidates("/a:/usr/bin%builtin:/c"), Some(vec![PathBuf::from("/a/work")]));
    assert_eq!(candidates(":/a"), None, "the working directory first: all left to the shell");
    assert_eq!(parse("work", None), None, "no PATH");
}

#[test]
fn quotes_are_removed_and_keep_blanks_and_empty_words() {
    let line = r#"work --dir "/data/jobs/j7" '{a b}; $x' "" a"b c"'d'e "*?[]~#;&|<>(){}!'""#;
    let parsed = parse_in_path(line).unwrap();
    let expected = ["work", "--dir", "/data/jobs/j7", "{a b}; $x", "", "ab cde", "*?[]~#;&|<>(){}!'"];
    assert_eq!(parsed.argv, argv(&expected));
    assert_eq!(parse_in_path("'work' x").unwrap().argv, argv(&["work", "x"]));
}

/// The arguments `/bin/sh` makes of `args` (its `printf` prints each, NUL-terminated).
fn shell_words(args: &str) -> Vec<OsString> {
    let output = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("printf '%s\\0' {args}"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{args}");
    let text = String::from_utf8(output.stdout).unwrap();
    text.split_terminator('\0').map(OsString::from).collect()
}

#[test]
fn the_arguments_are_the_ones_the_shell_makes() {
    for args in [
        "a  b\tc",
        r#"--dir "/data/jobs/j7" '{a b}; $x' a"b c"'d'e"#,
        r#""*?[]~#;&|<>(){}!'" 'say "hi"'"#,
        "x=1 -n 3 @%+,:./",
        "a '' \"\" b",
    ] {
        let parsed = parse_in_path(&format!("work {args}")).unwrap();
        assert_eq!(parsed.argv[1..], shell_words(args), "{args}");
    }
}

/// Asserts that each of `lines` is left to the shell.
fn assert_left_to_the_shell(lines: &[&str]) {
    for line in lines {
        assert_eq!(parse_in_path(line), None, "{line:?}");
    }
}

#[test]
fn quotes_the_shell_would_expand_in_or_leave_open_go_to_the_shell() {
    assert_left_to_the_shell(&[
        r#"work "$HOME""#,
        r#"work "`id`""#,
        r#"work "a\"b""#,
        r#"work "a\\b""#,
        "work 'open",
        "work \"open",
        "work 'a\nb'",
        "work 'é'",
        "\"\" x",
        "'true' x",
    ]);
}

#[test]
fn shell_syntax_goes_to_the_shell() {
    assert_left_to_the_shell(&[
        "",
        "work $HOME",
        "work a\\ b",
        "work `x`",
        "work *",
        "work a?",
        "work [ab]",
        "work ~",
        "work # note",
        "work; work",
        "work & work",
        "work | work",
        "work > out",
        "work < in",
        "work\\ x",
        "(work)",
        "{ work; }",
        "! work",
        "work\nwork",
        "work é",
    ]);
}

#[test]
fn assignments_builtins_and_reserved_words_go_to_the_shell() {
    assert_left_to_the_shell(&[
        "FOO=1 work",
        "true",
        "echo hi",
        "cd /",
        "exec work",
        "exit 3",
        "kill 1",
        "test -e x",
        "if",
        "while",
    ]);
    // `=` after the first word is an ordinary argument.
    assert!(parse_in_path("dd if=a of=b").is_some());
}

#[test]
fn plain_commands_are_taken_only_where_sh_is_dash() {
    let path = Some(OsStr::new(PATH));
    assert_eq!(plain_command("work", path), parse("work", path).filter(|_| shell_is_dash()));
}
