//! The light purity check from STYLE: no code under `core/` may name an I/O crate, read
//! the clock or use global randomness. (Reading the sources is the test's own I/O.)

use std::path::Path;

/// Code (not comments) containing one of these breaks the sans-IO rule.
const FORBIDDEN: &[&str] = &[
    "tokio",
    "quinn",
    "rusqlite",
    "Instant::now",
    "SystemTime::now",
    "thread_rng",
    "std::fs",
    "std::net",
    "std::process",
];

#[test]
fn the_core_does_no_io_and_reads_no_clock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut offences = Vec::new();
    visit(&root, &mut offences);
    assert!(offences.is_empty(), "impure code in the core:\n{}", offences.join("\n"));
}

fn visit(dir: &Path, offences: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).expect("core sources are readable");
    for entry in entries.map(|e| e.expect("directory entry")) {
        let path = entry.path();
        if path.is_dir() {
            visit(&path, offences);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tests/purity.rs") {
            let text = std::fs::read_to_string(&path).expect("source is text");
            for (n, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if !code.starts_with("//") && FORBIDDEN.iter().any(|f| code.contains(f)) {
                    offences.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
}
