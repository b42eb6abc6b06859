//! The x86-64 machinery for starting a task with `CLONE_VM | CLONE_VFORK` (as glibc's
//! `posix_spawn` does): a child stack per spawning thread, the `clone3` call that runs the
//! child on it, and the parent's signal mask around it.
//!
//! Why: without `CLONE_VM`, `clone3` copies the agent's page tables and the child then
//! faults pages in copy-on-write until it execs; that copy was the largest item of the
//! agent's launch-path profile (`docs/benchmarks.md`, "Launch path"). With `CLONE_VM` the
//! child borrows the agent's memory and with `CLONE_VFORK` the spawning thread sleeps
//! until the child has exec'd or exited, so nothing is copied. The price is the child's
//! rules (see `spawn::child`): it shares the memory other agent threads are using, so it
//! may not allocate, lock or touch anything but what was prepared for it.

use std::cell::Cell;
use std::ffi::c_void;
use std::io;

use super::CloneArgs;

/// Usable size of a child stack. The child runs a few small frames and thin system-call
/// wrappers before exec; the pages it never touches are never backed (`MAP_NORESERVE`).
const STACK_SIZE: usize = 64 * 1024;
/// An inaccessible page below the stack, so an overflow faults instead of writing into
/// whatever lies below it in the agent's memory.
const GUARD_SIZE: usize = 4096;

/// One mapped child stack with its guard page; unmapped on drop.
struct ChildStack {
    base: *mut c_void,
}

impl ChildStack {
    fn map() -> io::Result<ChildStack> {
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                GUARD_SIZE + STACK_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = ChildStack { base };
        // SAFETY: the first page of the mapping made above.
        if unsafe { libc::mprotect(base, GUARD_SIZE, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The lowest usable address (above the guard page).
    fn bottom(&self) -> u64 {
        self.base as u64 + GUARD_SIZE as u64
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: the whole mapping made in `map`, used by no child any more: a child
        // stops using it before its spawning thread wakes up (exec or exit).
        unsafe { libc::munmap(self.base, GUARD_SIZE + STACK_SIZE) };
    }
}

thread_local! {
    /// The spawning thread's child stack, kept between spawns (mapping one per task costs
    /// three system calls and its first page faults). One per thread is enough: the thread
    /// sleeps while its child runs, so it never has two children on the stack at once.
    static STACK: Cell<Option<ChildStack>> = const { Cell::new(None) };
}

/// Runs `clone3(args)` with `CLONE_VM | CLONE_VFORK` on this thread's child stack; the
/// child calls `entry(context)`, which must never return. Returns what `clone3` returned
/// (the child's pid, or -1 with `errno` set) once the child has exec'd or exited.
///
/// # Safety
/// `args` must be a valid `clone_args` whose flags include `CLONE_VM | CLONE_VFORK`;
/// `entry` must follow the child's rules (see `spawn::child`) and `context` must stay
/// valid until this returns.
pub(super) unsafe fn clone_on_child_stack(
    args: &mut CloneArgs,
    entry: unsafe extern "C" fn(*mut c_void) -> !,
    context: *mut c_void,
) -> io::Result<libc::c_long> {
    let stack = match STACK.take() {
        Some(stack) => stack,
        None => ChildStack::map()?,
    };
    args.stack = stack.bottom();
    args.stack_size = STACK_SIZE as u64;
    // Every signal blocked while the child shares this memory: a handler of the agent's
    // (tokio's, Rust's) run by the child would act on the agent's state. The clone (or, on
    // kernels without `CLONE_CLEAR_SIGHAND`, the child) resets the handlers to their
    // defaults before the child unblocks signals (see `spawn::child`).
    let old_mask = block_all_signals();
    // SAFETY: the caller's contract; the stack is mapped, unused and 16-byte aligned at
    // its top (`STACK_SIZE` is a multiple of 16).
    let ret = unsafe { raw_clone3(args, entry, context) };
    let clone_error = io::Error::last_os_error();
    restore_signals(&old_mask);
    STACK.set(Some(stack));
    if ret < 0 { Err(clone_error) } else { Ok(ret) }
}

/// `clone3` in assembly: the child wakes up on the new stack with nothing to return to,
/// so it must not go back into the Rust code that called it; it calls `entry` instead.
///
/// # Safety
/// As [`clone_on_child_stack`], with `args.stack` set.
unsafe fn raw_clone3(
    args: &mut CloneArgs,
    entry: unsafe extern "C" fn(*mut c_void) -> !,
    context: *mut c_void,
) -> libc::c_long {
    let ret: libc::c_long;
    // SAFETY: the syscall only reads `args` and writes the pidfd it points at. The kernel
    // keeps every register but rax, rcx and r11 in both processes, so the child finds
    // `entry` in r12 and `context` in r13; its stack pointer is the new stack's top
    // (16-byte aligned, so after the `call` pushes its return address `entry` sees the
    // alignment the ABI promises). `entry` never returns (`ud2` traps if it did).
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") std::ptr::from_mut(args),
            in("rsi") size_of::<CloneArgs>(),
            in("r12") entry,
            in("r13") context,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    if ret < 0 {
        // The raw syscall returns -errno; make it `errno` for the caller.
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = -ret as libc::c_int };
        return -1;
    }
    ret
}

/// Blocks every signal on this thread; returns the mask to restore.
fn block_all_signals() -> libc::sigset_t {
    // SAFETY: both sets are plain data initialised by sigfillset/pthread_sigmask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    }
}

fn restore_signals(old: &libc::sigset_t) {
    // SAFETY: a mask returned by `block_all_signals`.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}
