//! A job's files for the master: listing and reading the outputs under a job directory
//! (`slotmarket fetch`), and removing a job's directory and its containers' directories
//! (`slotmarket cleanup` and the master's retention timer; a container's directory fit
//! for reuse is emptied and kept for a later container instead, see [`crate::recycle`]).
//! Every path is built from the job id and checked text: reads stay inside the job
//! directory (no `..`, no hidden names, no symlink that leads out) and removal touches
//! nothing but that job's directory and the named containers' directories.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};

use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::protocol::{
    MAX_OUTPUT_CHUNK, MAX_OUTPUT_FILES, OutputData, OutputFile, OutputOp, RemoveJob, check_job_path,
};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::recycle::{self, Recycled};

/// Where an agent keeps jobs' and containers' directories.
#[derive(Clone, Debug)]
pub struct JobDirs {
    /// The data directory; job `j` lives in `{data_dir}/jobs/{j}`.
    pub data_dir: PathBuf,
    /// Container `c` lives in `{containers_dir}/{c}`.
    pub containers_dir: PathBuf,
}

impl JobDirs {
    /// The directory of `job`.
    pub fn job_dir(&self, job: JobId) -> PathBuf {
        self.data_dir.join("jobs").join(job.to_string())
    }

    /// Answers one [`OutputOp`] about `job`.
    pub async fn answer(&self, job: JobId, op: &OutputOp) -> Result<OutputData, String> {
        match op {
            OutputOp::List { dir } => self.list(job, dir).await.map(OutputData::Files),
            OutputOp::Read { path, offset, max } => {
                self.read(job, path, *offset, *max).await.map(OutputData::Bytes)
            }
        }
    }

    /// `path` under `job`'s directory, checked: plain relative text whose real location
    /// (symlinks resolved) is still inside the job directory.
    async fn confined(&self, job: JobId, path: &str) -> Result<PathBuf, String> {
        check_job_path(path)?;
        let root = self.job_dir(job);
        let root = tokio::fs::canonicalize(&root)
            .await
            .map_err(|e| format!("job {job} has no directory on this node: {e}"))?;
        let real = tokio::fs::canonicalize(root.join(path))
            .await
            .map_err(|e| format!("{path} of job {job}: {e}"))?;
        if !real.starts_with(&root) {
            return Err(format!("{path} of job {job} leads outside the job directory"));
        }
        Ok(real)
    }

    /// Every regular, visible file under `dir`, sorted, with paths relative to the job
    /// directory. Symlinks are skipped: a listing never names what lies outside.
    async fn list(&self, job: JobId, dir: &str) -> Result<Vec<OutputFile>, String> {
        let start = self.confined(job, dir).await?;
        let mut files = Vec::new();
        let mut todo = vec![(start, dir.to_string())];
        while let Some((at, relative)) = todo.pop() {
            let mut entries = tokio::fs::read_dir(&at)
                .await
                .map_err(|e| format!("cannot list {relative} of job {job}: {e}"))?;
            while let Some(entry) =
                entries.next_entry().await.map_err(|e| format!("listing {relative}: {e}"))?
            {
                let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
                if name.starts_with('.') {
                    continue;
                }
                let kind = entry.file_type().await.map_err(|e| format!("listing {relative}: {e}"))?;
                let path = format!("{relative}/{name}");
                if kind.is_dir() {
                    todo.push((entry.path(), path));
                } else if kind.is_file() {
                    let len = entry.metadata().await.map_err(|e| format!("{path}: {e}"))?.len();
                    files.push(OutputFile { path, len });
                    if files.len() > MAX_OUTPUT_FILES {
                        return Err(format!(
                            "{dir} of job {job} holds more than {MAX_OUTPUT_FILES} files; fetch a narrower --path"
                        ));
                    }
                }
            }
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(files)
    }

    /// Up to `max` (at most [`MAX_OUTPUT_CHUNK`]) bytes of `path` from `offset`.
    async fn read(&self, job: JobId, path: &str, offset: u64, max: u32) -> Result<Vec<u8>, String> {
        let real = self.confined(job, path).await?;
        let mut file = tokio::fs::File::open(&real).await.map_err(|e| format!("cannot open {path}: {e}"))?;
        file.seek(SeekFrom::Start(offset)).await.map_err(|e| format!("cannot seek in {path}: {e}"))?;
        let mut data = Vec::new();
        let max = u64::from(max.min(MAX_OUTPUT_CHUNK));
        file.take(max).read_to_end(&mut data).await.map_err(|e| format!("cannot read {path}: {e}"))?;
        Ok(data)
    }

    /// Deletes the job's directory and the named containers' directories; what is
    /// already gone is fine. Returns the directories removed.
    pub async fn remove(&self, remove: &RemoveJob) -> Result<Vec<PathBuf>, String> {
        let mut removed = Vec::new();
        if remove.job_dir && remove_tree(&self.job_dir(remove.job)).await? {
            removed.push(self.job_dir(remove.job));
        }
        let (recycled, to_remove) = self.recycle_containers(&remove.containers).await;
        removed.extend(recycled);
        for (dir, at) in to_remove {
            if remove_tree(&at).await? {
                removed.push(dir);
            }
        }
        Ok(removed)
    }

    /// Moves the named containers' directories fit for reuse into the recycling pool
    /// (see [`crate::recycle`]), as one blocking call; returns the directories recycled and,
    /// for each of the others still there, its path and where it is now, to be removed.
    async fn recycle_containers(
        &self,
        containers: &[ContainerId],
    ) -> (Vec<PathBuf>, Vec<(PathBuf, PathBuf)>) {
        let dirs: Vec<PathBuf> = containers.iter().map(|container| self.container_dir(*container)).collect();
        let Some(pool) = recycle::pool_of(&self.containers_dir) else {
            return (Vec::new(), dirs.into_iter().map(|dir| (dir.clone(), dir)).collect());
        };
        let sorted = tokio::task::spawn_blocking(move || {
            let (mut recycled, mut to_remove) = (Vec::new(), Vec::new());
            for dir in dirs {
                let Some(name) = dir.file_name().map(ToOwned::to_owned) else { continue };
                match recycle::recycle(&dir, &pool, &name) {
                    Recycled::Gone => {}
                    Recycled::Pooled => recycled.push(dir),
                    Recycled::Remove(at) => to_remove.push((dir, at)),
                }
            }
            (recycled, to_remove)
        })
        .await;
        // A panicked check leaves each directory where it was or staged in the pool, which
        // the next start's sweep removes.
        sorted.unwrap_or_default()
    }

    fn container_dir(&self, container: ContainerId) -> PathBuf {
        self.containers_dir.join(container.to_string())
    }
}

/// Removes `dir` and what is under it without following symlinks (a symlink in its place
/// is removed itself, not what it points to); whether there was anything to remove.
async fn remove_tree(dir: &Path) -> Result<bool, String> {
    let meta = match tokio::fs::symlink_metadata(dir).await {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let result =
        if meta.is_dir() { tokio::fs::remove_dir_all(dir).await } else { tokio::fs::remove_file(dir).await };
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(format!("cannot remove {}: {e}", dir.display())),
    }
}

#[cfg(test)]
#[path = "job_outputs_tests.rs"]
mod tests;
