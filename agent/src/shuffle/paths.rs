//! Which files the shuffle service may serve and where fetched parts land: a path
//! relative to a job directory, with normal components only, none hidden, and (when
//! opened) no symlink leading out of the job directory.

use std::path::{Component, Path, PathBuf};

use thiserror::Error;

/// Why a relative path is not served or written.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PathError {
    /// The path is empty.
    #[error("empty path")]
    Empty,
    /// The path is absolute, or has `..`, `.` or a root/prefix component.
    #[error("{0:?} is not a plain relative path (no .., no leading /)")]
    NotRelative(String),
    /// A component starts with `.`: temporary and spill files are never served.
    #[error("{0:?} names a hidden file or directory")]
    Hidden(String),
    /// The file resolves (through a symlink) to somewhere outside the job directory.
    #[error("{0:?} leads outside the job directory")]
    Escapes(String),
    /// The file or the job directory cannot be resolved (missing, unreadable).
    #[error("{path:?}: {reason}")]
    Unresolved {
        /// The relative path.
        path: String,
        /// The OS error.
        reason: String,
    },
}

/// `path` as a relative path of normal, visible components.
pub fn plain_relative(path: &str) -> Result<PathBuf, PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    let mut out = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) => {
                if name.as_encoded_bytes().first() == Some(&b'.') {
                    return Err(PathError::Hidden(path.to_string()));
                }
                out.push(name);
            }
            Component::CurDir | Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(PathError::NotRelative(path.to_string()));
            }
        }
    }
    // `Path::components` drops interior `.`; a path made only of those is refused above.
    if path.split('/').any(|part| part == "." || part == "..") {
        return Err(PathError::NotRelative(path.to_string()));
    }
    Ok(out)
}

/// The real location of `path` under `job_dir`, refused if it is not plain (see
/// [`plain_relative`]) or if symlinks take it outside `job_dir`. Blocking (file system).
pub fn resolve_confined(job_dir: &Path, path: &str) -> Result<PathBuf, PathError> {
    let relative = plain_relative(path)?;
    let unresolved =
        |err: std::io::Error| PathError::Unresolved { path: path.to_string(), reason: err.to_string() };
    let root = job_dir.canonicalize().map_err(unresolved)?;
    let real = root.join(&relative).canonicalize().map_err(unresolved)?;
    if !real.starts_with(&root) {
        return Err(PathError::Escapes(path.to_string()));
    }
    Ok(real)
}

/// Where a fetched `path` may be written under `job_dir`: its directory is created, and
/// refused if (through a symlink a task made in its job directory) it lies outside
/// `job_dir`, so an agent running as root never writes where the task could not. Answers
/// the destination with its directory resolved. Blocking (file system).
pub fn prepare_destination(job_dir: &Path, path: &str) -> Result<PathBuf, PathError> {
    let relative = plain_relative(path)?;
    let unresolved =
        |err: std::io::Error| PathError::Unresolved { path: path.to_string(), reason: err.to_string() };
    let name = relative.file_name().ok_or(PathError::Empty)?.to_owned();
    let parent = job_dir.join(&relative).parent().map(Path::to_path_buf).ok_or(PathError::Empty)?;
    std::fs::create_dir_all(&parent).map_err(unresolved)?;
    let root = job_dir.canonicalize().map_err(unresolved)?;
    let real_parent = parent.canonicalize().map_err(unresolved)?;
    if !real_parent.starts_with(&root) {
        return Err(PathError::Escapes(path.to_string()));
    }
    Ok(real_parent.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_visible_relative_paths_pass() {
        assert_eq!(plain_relative("map-1/part-2"), Ok(PathBuf::from("map-1/part-2")));
        assert_eq!(plain_relative(""), Err(PathError::Empty));
        for bad in ["../x", "map-1/../../x", "/etc/passwd", "./part", "map-1/./part-0", "a/.."] {
            assert!(matches!(plain_relative(bad), Err(PathError::NotRelative(_))), "{bad}");
        }
        for hidden in [".secret", "map-1/.spill.3.0/run-0", "map-0/.part-0.fetch"] {
            assert!(matches!(plain_relative(hidden), Err(PathError::Hidden(_))), "{hidden}");
        }
    }

    #[test]
    fn a_symlink_out_of_the_job_dir_is_refused_and_one_inside_is_served() {
        let root = tempfile::tempdir().unwrap();
        let job = root.path().join("job");
        std::fs::create_dir_all(job.join("map-0")).unwrap();
        std::fs::write(job.join("map-0/part-0"), "data").unwrap();
        std::fs::write(root.path().join("outside"), "secret").unwrap();
        std::os::unix::fs::symlink(root.path().join("outside"), job.join("map-0/part-1")).unwrap();
        std::os::unix::fs::symlink(job.join("map-0/part-0"), job.join("map-0/part-2")).unwrap();
        std::os::unix::fs::symlink(root.path(), job.join("up")).unwrap();
        assert!(resolve_confined(&job, "map-0/part-0").unwrap().ends_with("job/map-0/part-0"));
        assert!(matches!(resolve_confined(&job, "map-0/part-1"), Err(PathError::Escapes(_))));
        assert!(matches!(resolve_confined(&job, "up/outside"), Err(PathError::Escapes(_))));
        assert!(resolve_confined(&job, "map-0/part-2").is_ok());
        assert!(matches!(resolve_confined(&job, "map-0/part-9"), Err(PathError::Unresolved { .. })));
    }

    #[test]
    fn a_destination_behind_a_symlink_out_of_the_job_dir_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let job = root.path().join("job");
        std::fs::create_dir_all(&job).unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::os::unix::fs::symlink(root.path().join("etc"), job.join("map-0")).unwrap();
        assert!(matches!(prepare_destination(&job, "map-0/part-0"), Err(PathError::Escapes(_))));
        let fine = prepare_destination(&job, "map-1/part-0").unwrap();
        assert!(fine.ends_with("job/map-1/part-0") && job.join("map-1").is_dir());
        assert!(matches!(prepare_destination(&job, "../x"), Err(PathError::NotRelative(_))));
    }
}
