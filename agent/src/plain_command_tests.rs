//! Which command lines start without a shell, and what they exec. Programs live in a
//! temporary directory used as `PATH`, so the results do not depend on the machine's.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{PlainCommand, parse, plain_command, shell_is_dash};

/// A file at `dir/name` with `content`, made executable or not.
fn file(dir: &Path, name: &str, content: &[u8], executable: bool) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    let mode = if executable { 0o755 } else { 0o644 };
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn script(dir: &Path, name: &str) -> PathBuf {
    file(dir, name, b"#!/bin/sh\nexit 0\n", true)
}

fn argv(words: &[&str]) -> Vec<OsString> {
    words.iter().map(OsString::from).collect()
}

#[test]
fn a_lone_program_is_split_at_blanks_and_found_in_path() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(dir.path(), "work");
    let parsed = parse("  work\t--in=a,b  -n 3 x@y:z+1%  ", Some(dir.path().as_os_str()), Path::new("/"));
    assert_eq!(
        parsed,
        Some(PlainCommand { program, argv: argv(&["work", "--in=a,b", "-n", "3", "x@y:z+1%"]) })
    );
}

#[test]
fn an_elf_program_is_started_directly_and_the_first_path_entry_wins() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let program = file(first.path(), "tool", b"\x7fELF\x02\x01\x01", true);
    script(second.path(), "tool");
    let path = std::env::join_paths([first.path(), second.path()]).unwrap();
    let parsed = parse("tool", Some(&path), Path::new("/")).unwrap();
    assert_eq!(parsed.program, program);
    assert_eq!(parsed.argv, argv(&["tool"]));
}

#[test]
fn a_program_given_as_a_path_is_found_from_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    let program = script(&dir.path().join("bin"), "run");
    let parsed = parse("bin/run 1", None, dir.path()).unwrap();
    assert_eq!(parsed.program, program);
    assert_eq!(parsed.argv, argv(&["bin/run", "1"]));
    let absolute = format!("{} 1", program.display());
    assert_eq!(parse(&absolute, None, Path::new("/")).unwrap().program, program);
}

#[test]
fn quotes_are_removed_and_keep_blanks_and_empty_words() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(dir.path(), "work");
    let path = Some(dir.path().as_os_str());
    let line = r#"work --dir "/data/jobs/j7" '{a b}; $x' "" a"b c"'d'e "*?[]~#;&|<>(){}!'""#;
    let parsed = parse(line, path, Path::new("/")).unwrap();
    assert_eq!(parsed.program, program);
    let expected = ["work", "--dir", "/data/jobs/j7", "{a b}; $x", "", "ab cde", "*?[]~#;&|<>(){}!'"];
    assert_eq!(parsed.argv, argv(&expected));
    assert_eq!(parse("'work' x", path, Path::new("/")).unwrap().argv, argv(&["work", "x"]));
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
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "work");
    let path = Some(dir.path().as_os_str());
    for args in [
        "a  b\tc",
        r#"--dir "/data/jobs/j7" '{a b}; $x' a"b c"'d'e"#,
        r#""*?[]~#;&|<>(){}!'" 'say "hi"'"#,
        "x=1 -n 3 @%+,:./",
        "a '' \"\" b",
    ] {
        let parsed = parse(&format!("work {args}"), path, Path::new("/")).unwrap();
        assert_eq!(parsed.argv[1..], shell_words(args), "{args}");
    }
}

/// Asserts that each of `lines` is left to the shell, where `work` is a program on `PATH`.
fn assert_left_to_the_shell(lines: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "work");
    for line in lines {
        assert_eq!(parse(line, Some(dir.path().as_os_str()), Path::new("/")), None, "{line:?}");
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
        "(work)",
        "{ work; }",
        "! work",
        "work\nwork",
        "work é",
    ]);
}

#[test]
fn assignments_builtins_and_reserved_words_go_to_the_shell() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["true", "echo", "cd", "exec", "exit", "kill", "test", "if", "while"] {
        script(dir.path(), name);
    }
    let path = Some(dir.path().as_os_str());
    for line in
        ["FOO=1 work", "true", "echo hi", "cd /", "exec work", "exit 3", "kill 1", "test -e x", "if", "while"]
    {
        assert_eq!(parse(line, path, Path::new("/")), None, "{line:?}");
    }
    // `=` after the first word is an ordinary argument.
    script(dir.path(), "dd");
    assert!(parse("dd if=a of=b", path, Path::new("/")).is_some());
}

#[test]
fn what_the_shell_would_treat_differently_goes_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = Some(dir.path().as_os_str());
    assert_eq!(parse("", path, Path::new("/")), None, "an empty line");
    assert_eq!(parse("missing", path, Path::new("/")), None, "not found: the shell says so, exit 127");
    assert_eq!(parse("work", None, Path::new("/")), None, "no PATH");
    file(dir.path(), "plain", b"#!/bin/sh\n", false);
    assert_eq!(parse("plain", path, Path::new("/")), None, "not executable");
    file(dir.path(), "text", b"echo hi\n", true);
    assert_eq!(parse("text", path, Path::new("/")), None, "no #! or ELF header: dash runs it itself");
    std::fs::create_dir(dir.path().join("folder")).unwrap();
    assert_eq!(parse("folder", path, Path::new("/")), None, "a directory");
}

#[test]
fn a_path_that_dash_would_search_differently_goes_to_the_shell() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "work");
    let after = |entry: &str| {
        let mut path = OsString::from(entry);
        path.push(":");
        path.push(dir.path());
        parse("work", Some(&path), Path::new("/"))
    };
    assert_eq!(after(""), None, "an empty entry (the working directory) before the program");
    assert_eq!(after("bin"), None, "a relative entry before the program");
    assert_eq!(after("/usr/bin%builtin"), None, "dash's % suffix before the program");
    assert!(after("/nonexistent").is_some(), "an absolute entry without the program is skipped");
}

#[test]
fn plain_commands_are_taken_only_where_sh_is_dash() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "work");
    let path = Some(dir.path().as_os_str());
    let expected = parse("work", path, Path::new("/")).filter(|_| shell_is_dash());
    assert_eq!(plain_command("work", path, Path::new("/")), expected);
}
