//! Where a job's parts live under its `job_dir`: `map-{i}/part-{r}` written by map task
//! `i` for reducer `r`, and `out/part-{r}` written by reduce task `r`. Readers open these
//! exact names only, so temporary and spill files (hidden names) are never read.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};

/// The directory map task `map` writes into.
pub fn map_dir(job_dir: &Path, map: u32) -> PathBuf {
    job_dir.join(format!("map-{map}"))
}

/// The part map task `map` writes for reducer `reducer`.
pub fn map_part(job_dir: &Path, map: u32, reducer: u32) -> PathBuf {
    map_dir(job_dir, map).join(format!("part-{reducer}"))
}

/// The part generator task `task` writes into its output directory `dir`.
pub fn generated_part(dir: &Path, task: u32) -> PathBuf {
    dir.join(format!("part-{task}"))
}

/// The part reduce task `reducer` writes.
pub fn out_part(job_dir: &Path, reducer: u32) -> PathBuf {
    job_dir.join("out").join(format!("part-{reducer}"))
}

static SPILL_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Creates a fresh hidden directory `map-{map}/.spill.PID.N` for a map attempt's sorted
/// runs. The map removes it when it ends; one left by a killed attempt is never read.
pub fn create_spill_dir(job_dir: &Path, map: u32) -> Result<PathBuf> {
    let unique = SPILL_COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = map_dir(job_dir, map).join(format!(".spill.{}.{unique}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Every map's part for `reducer`, `map-{i}/part-{reducer}` for `i` in `0..maps`, in map
/// order. The reducer is told how many maps there were rather than listing what happens to
/// be there: a part a map wrote where this task cannot see it (an agent that does not share
/// the data directory) must fail the reduce, not shrink its input.
pub fn map_parts_for(job_dir: &Path, reducer: u32, maps: u32) -> Result<Vec<PathBuf>> {
    if maps == 0 {
        bail!("--maps must be at least 1");
    }
    let parts = (0..maps).map(|map| map_part(job_dir, map, reducer)).collect();
    require_all(job_dir, parts, "map outputs")
}

/// Parts a task named in advance; fails if any is not a regular file, naming every missing
/// one (the first [`MISSING_NAMED`]) relative to `dir` and saying what usually causes it.
pub fn require_all(dir: &Path, parts: Vec<PathBuf>, what: &str) -> Result<Vec<PathBuf>> {
    let missing: Vec<&PathBuf> = parts.iter().filter(|part| !part.is_file()).collect();
    if missing.is_empty() {
        return Ok(parts);
    }
    let mut names: Vec<String> = missing
        .iter()
        .take(MISSING_NAMED)
        .map(|part| part.strip_prefix(dir).unwrap_or(part).display().to_string())
        .collect();
    if missing.len() > MISSING_NAMED {
        names.push(format!("and {} more", missing.len() - MISSING_NAMED));
    }
    bail!(
        "{} of {} {what} missing in {}: {}. Did the tasks that write them complete, and on \
         agents sharing this data directory? Every agent must use the same shared data \
         directory (data_dir) for jobs whose stages pass data, or run in local data mode \
         (data_mode = \"local\"), where missing parts are fetched from the agents holding them",
        missing.len(),
        parts.len(),
        dir.display(),
        names.join(", ")
    )
}

/// How many missing parts an error names before it only counts the rest.
pub const MISSING_NAMED: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_parts_are_the_named_maps_in_order_and_extra_maps_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        for map in [0, 1, 2, 7] {
            std::fs::create_dir_all(map_dir(dir.path(), map)).unwrap();
            std::fs::write(map_part(dir.path(), map, 1), "").unwrap();
        }
        let parts = map_parts_for(dir.path(), 1, 3).unwrap();
        assert_eq!(parts, [0, 1, 2].map(|m| map_part(dir.path(), m, 1)));
    }

    #[test]
    fn every_missing_part_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(map_dir(dir.path(), 1)).unwrap();
        std::fs::write(map_part(dir.path(), 1, 0), "").unwrap();
        let err = map_parts_for(dir.path(), 0, 4).unwrap_err().to_string();
        assert!(err.starts_with("3 of 4 map outputs missing in "), "{err}");
        assert!(err.contains(": map-0/part-0, map-2/part-0, map-3/part-0. "), "{err}");
        assert!(err.contains("shared data directory"), "{err}");
        assert!(map_parts_for(dir.path(), 0, 0).unwrap_err().to_string().contains("--maps"));
    }

    #[test]
    fn a_long_list_of_missing_parts_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let err = map_parts_for(dir.path(), 2, 20).unwrap_err().to_string();
        assert!(err.starts_with("20 of 20 map outputs missing"), "{err}");
        assert!(err.contains("map-7/part-2, and 12 more."), "{err}");
        assert!(!err.contains("map-8/"), "{err}");
    }
}
