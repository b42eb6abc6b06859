//! What a container's files cost the file system, side by side on `TMPDIR` and on tmpfs
//! (`/dev/shm`): two threads, as two agents of `scripts/bench/launch.sh` on one machine,
//! each making a directory with an empty `stdout` and `stderr` in its own `ready/` and
//! renaming it into its own `containers/`, the same calls the agent makes per container
//! (`ReadyDirs::refill`, then the rename at launch). Prints microseconds per container
//! for each file system and what the difference adds to 1,000 containers. Each round
//! ends with a `syncfs`, so the journal's commit and the writeback count in its round.
//! Pick `TMPDIR` with care: on ext4 without a journal each round's removed directories
//! make the next slower (the kernel's `recently_deleted` scan).
//!
//!   cargo bench -p slotmarket-agent --bench container_files
//!   TMPDIR=/mnt/disk/tmp CONTAINERS=5000 ROUNDS=5 cargo bench -p slotmarket-agent --bench container_files

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const AGENTS: usize = 2;

fn main() {
    let containers = env_number("CONTAINERS", 3000).max(1);
    let rounds = env_number("ROUNDS", 3).max(1);
    let disk = std::env::temp_dir();
    let tmpfs = PathBuf::from("/dev/shm");
    let places: Vec<&Path> = if tmpfs.is_dir() { vec![&disk, &tmpfs] } else { vec![&disk] };
    println!("container files: {AGENTS} threads x {containers} containers, {rounds} rounds, alternating");
    let mut per_place = vec![Vec::new(); places.len()];
    for round in 1..=rounds {
        for (place, measured) in places.iter().zip(&mut per_place) {
            let (make, rename, busy) = measure(place, containers);
            measured.push(busy);
            println!(
                "round {round} {:<24} machine busy {busy:6.1} us per container; in the calls: directory and files {make:5.1}, rename {rename:5.1}",
                place.display()
            );
        }
    }
    if let [disk_us, tmpfs_us] = per_place.iter_mut().map(|m| median(m)).collect::<Vec<_>>()[..] {
        // 1,000 containers take 1,000 times the difference in microseconds of busy time:
        // the difference in milliseconds.
        let extra_ms = disk_us - tmpfs_us;
        println!(
            "median machine busy per container: {disk_us:.1} us on {}, {tmpfs_us:.1} us on tmpfs, ratio {:.2}; \
             1,000 containers take {extra_ms:.0} ms more of the machine's CPU time",
            disk.display(),
            disk_us / tmpfs_us
        );
    }
}

/// Runs `containers` containers in each of the agents' threads under `place`; returns the
/// mean microseconds per container spent making the directory and files, renaming, and
/// of the whole machine's busy time up to a `syncfs` of `place` (the journal's and
/// writeback's kernel threads too).
fn measure(place: &Path, containers: usize) -> (f64, f64, f64) {
    let busy_before = machine_busy();
    let root = tempfile::Builder::new()
        .prefix("slotmarket-container-files.")
        .tempdir_in(place)
        .expect("a bench directory");
    let threads: Vec<_> = (0..AGENTS)
        .map(|agent| {
            let work = root.path().join(format!("agent-{agent}"));
            std::thread::spawn(move || make_containers(&work, containers))
        })
        .collect();
    let (mut make, mut rename) = (Duration::ZERO, Duration::ZERO);
    for thread in threads {
        let (m, r) = thread.join().expect("a bench thread panicked");
        make += m;
        rename += r;
    }
    let synced = File::open(root.path()).expect("open the bench directory");
    // SAFETY: syncfs only reads the descriptor, which is open for the call.
    if unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&synced)) } != 0 {
        panic!("syncfs: {}", std::io::Error::last_os_error());
    }
    let busy = machine_busy().saturating_sub(busy_before);
    let per = |total: Duration| total.as_secs_f64() * 1e6 / (containers * AGENTS) as f64;
    (per(make), per(rename), per(busy))
}

fn make_containers(work: &Path, containers: usize) -> (Duration, Duration) {
    let (ready, placed) = (work.join("ready"), work.join("containers"));
    fs::create_dir_all(&ready).expect("make ready/");
    fs::create_dir_all(&placed).expect("make containers/");
    let (mut make, mut rename) = (Duration::ZERO, Duration::ZERO);
    for n in 0..containers {
        let start = Instant::now();
        let dir = ready.join(n.to_string());
        fs::create_dir(&dir).expect("make a container directory");
        // Open across the rename, as the agent holds a ready directory's files.
        let logs = ["stdout", "stderr"].map(|log| File::create(dir.join(log)).expect("make a log file"));
        let made = Instant::now();
        fs::rename(&dir, placed.join(format!("c{n}"))).expect("rename into containers/");
        rename += made.elapsed();
        make += made - start;
        drop(logs);
    }
    (make, rename)
}

fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(value) => value.parse().unwrap_or_else(|_| panic!("{name}={value} is not a number")),
        Err(_) => default,
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Time all CPUs have spent busy since boot (`/proc/stat`: user, nice, system, irq,
/// softirq), in the kernel's clock ticks converted to time.
fn machine_busy() -> Duration {
    let stat = fs::read_to_string("/proc/stat").expect("read /proc/stat");
    let cpu = stat.lines().next().expect("a cpu line");
    let ticks: u64 = cpu
        .split_whitespace()
        .skip(1)
        .take(7)
        .enumerate()
        .filter(|(field, _)| ![3, 4].contains(field)) // idle, iowait
        .map(|(_, value)| value.parse::<u64>().expect("a tick count"))
        .sum();
    // SAFETY: sysconf only reads a constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_secs_f64(ticks as f64 / per_second as f64)
}
