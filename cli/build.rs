//! Links the `slotmarket` binary as a static, position-dependent executable where the C
//! toolchain has glibc's static archives (non-PIE but dynamic where it does not): see the
//! comments below.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries rustc names for the standard library on `*-linux-gnu` (`-lgcc_s -lutil -lrt
/// -lpthread -lm -ldl -lc`), each with the static archives that stand in for it.
const STATIC_STAND_INS: &[(&str, &[&str])] = &[
    // libgcc_s is the shared unwinder; its static equivalent is libgcc_eh plus libgcc.
    ("gcc_s", &["libgcc_eh.a", "libgcc.a"]),
    ("util", &["libutil.a"]),
    ("rt", &["librt.a"]),
    ("pthread", &["libpthread.a"]),
    ("m", &["libm.a"]),
    ("dl", &["libdl.a"]),
    // libc and the compiler's runtime need each other's symbols: one group, as `gcc -static`
    // links them.
    ("c", &["libc.a", "libgcc.a", "libgcc_eh.a"]),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    // A CLI run is a few milliseconds of CPU. A PIE binary of this size starts with about
    // 13,000 relative relocations for the dynamic loader to apply (and the pages they
    // dirty); linked at a fixed address it has none. Linked statically, there is no
    // dynamic loader at all: no mapping of libc, libm and libgcc_s, no symbol look-ups,
    // no relocations of those libraries (14 % of a one-spec submit's samples). What this
    // gives up is ASLR of the CLI's own code and data (and, static, of libc's); the stack,
    // heap and mmap stay randomised; the CLI is a short-lived client that runs as the
    // invoking user. Only this binary: the master, agent and test binaries keep their PIE
    // link. `-no-pie` and `-static` are the GNU toolchain's flags: other targets keep
    // their default link.
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    // musl targets link statically already (`scripts/build-cli-musl.sh`); `-no-pie` under
    // their default static-pie start-up code crashed the binary before `main`.
    if target_os != "linux" || target_env != "gnu" {
        return;
    }
    println!("cargo:rustc-link-arg-bin=slotmarket=-no-pie");
    let same_host = std::env::var("TARGET").ok() == std::env::var("HOST").ok();
    if !same_host {
        return;
    }
    match write_static_stand_ins() {
        Some(dir) => {
            // Cargo has no per-binary `-C target-feature=+crt-static`, and rustc always
            // names the shared libraries after `-Wl,-Bdynamic`. So `-L` puts a directory
            // first in the search path whose `libc.so`, `libgcc_s.so`... are linker
            // scripts naming the static archives: with `-static` nothing shared is left
            // to link. `-L` applies to every `-l` wherever it stands on the line.
            println!("cargo:rustc-link-arg-bin=slotmarket=-L{}", dir.display());
            println!("cargo:rustc-link-arg-bin=slotmarket=-static");
        }
        None => println!(
            "cargo:warning=glibc's static archives (libc.a, libgcc_eh.a) not found: slotmarket is linked dynamically (non-PIE)"
        ),
    }
}

/// Writes the stand-in linker scripts into `OUT_DIR/static-libs` and answers that
/// directory, or `None` when the C compiler does not find every static archive (glibc's
/// static part is a separate package on some distributions).
fn write_static_stand_ins() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("OUT_DIR")?).join("static-libs");
    std::fs::create_dir_all(&dir).ok()?;
    for (name, archives) in STATIC_STAND_INS {
        let mut paths = Vec::new();
        for archive in *archives {
            paths.push(static_archive(archive)?.display().to_string());
        }
        let script =
            format!("/* slotmarket's static link: see cli/build.rs */\nGROUP ( {} )\n", paths.join(" "));
        std::fs::write(dir.join(format!("lib{name}.so")), script).ok()?;
    }
    Some(dir)
}

/// Where the C compiler (the linker driver rustc runs) finds `archive`, if it does:
/// `cc -print-file-name=libc.a` answers the bare name when it has no such file.
fn static_archive(archive: &str) -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let output = Command::new(cc).arg(format!("-print-file-name={archive}")).output().ok()?;
    let path = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    (output.status.success() && path.is_absolute() && Path::new(&path).is_file()).then_some(path)
}
