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

/// The indices of the `map-{i}` directories under `job_dir`, ascending.
pub fn map_indices(job_dir: &Path) -> Result<Vec<u32>> {
    let entries = std::fs::read_dir(job_dir)
        .with_context(|| format!("cannot list job directory {}", job_dir.display()))?;
    let mut maps = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list job directory {}", job_dir.display()))?;
        let name = entry.file_name();
        let Some(index) = name.to_str().and_then(|n| n.strip_prefix("map-")).and_then(|i| i.parse().ok())
        else {
            continue;
        };
        if entry.path().is_dir() {
            maps.push(index);
        }
    }
    maps.sort_unstable();
    Ok(maps)
}

/// Every map's part for `reducer`, in map order. Fails if there are no map directories or
/// a map directory lacks the part: a completed map writes a part for every reducer, even
/// an empty one, so a missing part means a map did not complete.
pub fn map_parts_for(job_dir: &Path, reducer: u32) -> Result<Vec<PathBuf>> {
    let maps = map_indices(job_dir)?;
    if maps.is_empty() {
        bail!("no map-* directories under {}: have the map tasks run?", job_dir.display());
    }
    maps.into_iter()
        .map(|map| {
            let part = map_part(job_dir, map, reducer);
            if part.is_file() {
                Ok(part)
            } else {
                bail!("{} is missing: did map {map} complete, with as many reducers?", part.display())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_parts_are_found_in_numeric_order() {
        let dir = tempfile::tempdir().unwrap();
        for map in [10, 2, 0] {
            std::fs::create_dir_all(map_dir(dir.path(), map)).unwrap();
            std::fs::write(map_part(dir.path(), map, 1), "").unwrap();
        }
        std::fs::create_dir_all(dir.path().join("map-x")).unwrap();
        std::fs::create_dir_all(dir.path().join("out")).unwrap();
        let parts = map_parts_for(dir.path(), 1).unwrap();
        assert_eq!(parts, [0, 2, 10].map(|m| map_part(dir.path(), m, 1)));
        let err = map_parts_for(dir.path(), 0).unwrap_err().to_string();
        assert!(err.contains("map-0/part-0 is missing"), "{err}");
    }

    #[test]
    fn no_maps_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(map_parts_for(dir.path(), 0).unwrap_err().to_string().contains("no map-* directories"));
    }
}
