//! Links the `slotmarket` binary as a position-dependent executable: see the comment below.

fn main() {
    // A CLI run is a few milliseconds of CPU, and a PIE binary of this size starts with
    // about 13,000 relative relocations for the dynamic loader to apply (and the pages
    // they dirty). Linked at a fixed address it has none. What this gives up is ASLR of
    // the CLI's own code and data (libraries, stack and heap stay randomised); the CLI is
    // a short-lived client that runs as the invoking user. Only this binary: the master,
    // agent and test binaries keep their PIE link. `-no-pie` is the GNU toolchain's flag:
    // other targets keep their default link.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=slotmarket=-no-pie");
    }
}
