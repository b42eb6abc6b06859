use std::fs;

use super::*;

struct Fixture {
    _root: tempfile::TempDir,
    outside: PathBuf,
    dirs: JobDirs,
}

/// A data directory with job j7 (`out/part-0`, `out/part-1`, `out/sub/part-2`, a hidden
/// temp file, a symlink out and a map output) and job j8, plus a secret outside.
fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("secret");
    fs::write(&outside, b"secret").unwrap();
    let dirs = JobDirs { data_dir: root.path().join("data"), containers_dir: root.path().join("containers") };
    let j7 = dirs.job_dir(JobId(7));
    fs::create_dir_all(j7.join("out/sub")).unwrap();
    fs::create_dir_all(j7.join("map-0")).unwrap();
    fs::write(j7.join("out/part-0"), b"a 1\n").unwrap();
    fs::write(j7.join("out/part-1"), b"b 22\n").unwrap();
    fs::write(j7.join("out/sub/part-2"), b"c\n").unwrap();
    fs::write(j7.join("out/.part-3.tmp"), b"half").unwrap();
    fs::write(j7.join("map-0/part-0"), b"x").unwrap();
    std::os::unix::fs::symlink(&outside, j7.join("out/leak")).unwrap();
    std::os::unix::fs::symlink(root.path(), j7.join("up")).unwrap();
    fs::create_dir_all(dirs.job_dir(JobId(8)).join("out")).unwrap();
    fs::write(dirs.job_dir(JobId(8)).join("out/part-0"), b"other").unwrap();
    Fixture { _root: root, outside, dirs }
}

fn list(dir: &str) -> OutputOp {
    OutputOp::List { dir: dir.into() }
}

fn read(path: &str, offset: u64, max: u32) -> OutputOp {
    OutputOp::Read { path: path.into(), offset, max }
}

#[tokio::test]
async fn a_listing_names_the_visible_regular_files_under_the_directory_sorted() {
    let fx = fixture();
    let Ok(OutputData::Files(files)) = fx.dirs.answer(JobId(7), &list("out")).await else { panic!("listed") };
    let named: Vec<_> = files.iter().map(|f| (f.path.as_str(), f.len)).collect();
    assert_eq!(named, [("out/part-0", 4), ("out/part-1", 5), ("out/sub/part-2", 2)]);
}

#[tokio::test]
async fn reads_come_in_bounded_chunks_from_the_offset() {
    let fx = fixture();
    let answer = fx.dirs.answer(JobId(7), &read("out/part-1", 2, 2)).await;
    assert_eq!(answer, Ok(OutputData::Bytes(b"22".to_vec())));
    let past_end = fx.dirs.answer(JobId(7), &read("out/part-1", 50, 10)).await;
    assert_eq!(past_end, Ok(OutputData::Bytes(Vec::new())));
    let big = fx.dirs.job_dir(JobId(7)).join("out/big");
    fs::write(&big, vec![b'x'; MAX_OUTPUT_CHUNK as usize + 5]).unwrap();
    let Ok(OutputData::Bytes(chunk)) = fx.dirs.answer(JobId(7), &read("out/big", 0, u32::MAX)).await else {
        panic!("read")
    };
    assert_eq!(chunk.len(), MAX_OUTPUT_CHUNK as usize);
}

#[tokio::test]
async fn nothing_outside_the_job_directory_can_be_read_or_listed() {
    let fx = fixture();
    for op in [
        read("../j8/out/part-0", 0, 10),
        read("/etc/passwd", 0, 10),
        read("out/.part-3.tmp", 0, 10),
        read("out/leak", 0, 10),
        read("up/secret", 0, 10),
        list("up"),
        list(".."),
    ] {
        let answer = fx.dirs.answer(JobId(7), &op).await;
        assert!(answer.is_err(), "{op:?} answered {answer:?}");
    }
    let err = fx.dirs.answer(JobId(7), &read("out/leak", 0, 10)).await.unwrap_err();
    assert!(err.contains("outside the job directory"), "{err}");
    let err = fx.dirs.answer(JobId(9), &list("out")).await.unwrap_err();
    assert!(err.contains("no directory on this node"), "{err}");
}

#[tokio::test]
async fn removing_a_job_deletes_only_its_directory_and_its_containers() {
    let fx = fixture();
    for c in [1, 2, 3] {
        let dir = fx.dirs.containers_dir.join(ContainerId(c).to_string());
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("stdout"), b"log").unwrap();
    }
    let order = RemoveJob { job: JobId(7), containers: vec![ContainerId(1), ContainerId(3)], job_dir: true };
    let removed = fx.dirs.remove(&order).await.unwrap();
    assert_eq!(removed.len(), 3, "{removed:?}");
    assert!(!fx.dirs.job_dir(JobId(7)).exists());
    // The symlinks inside were removed, not followed: their targets stay.
    assert_eq!(fs::read(&fx.outside).unwrap(), b"secret");
    assert!(fx.dirs.data_dir.exists());
    assert_eq!(fs::read(fx.dirs.job_dir(JobId(8)).join("out/part-0")).unwrap(), b"other");
    assert!(!fx.dirs.containers_dir.join(ContainerId(1).to_string()).exists());
    assert!(fx.dirs.containers_dir.join(ContainerId(2).to_string()).join("stdout").exists());
    // A node sharing the data directory removes only its containers.
    let j8 = RemoveJob { job: JobId(8), containers: vec![ContainerId(2)], job_dir: false };
    fx.dirs.remove(&j8).await.unwrap();
    assert!(fx.dirs.job_dir(JobId(8)).exists());
    assert!(!fx.dirs.containers_dir.join(ContainerId(2).to_string()).exists());
    // Again: nothing left, not an error.
    assert_eq!(fx.dirs.remove(&order).await.unwrap(), Vec::<PathBuf>::new());
}

#[tokio::test]
async fn a_job_directory_that_is_a_symlink_is_unlinked_not_followed() {
    let fx = fixture();
    let elsewhere = fx.dirs.data_dir.parent().unwrap().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::write(elsewhere.join("keep"), b"k").unwrap();
    std::os::unix::fs::symlink(&elsewhere, fx.dirs.job_dir(JobId(5))).unwrap();
    fx.dirs.remove(&RemoveJob { job: JobId(5), containers: vec![], job_dir: true }).await.unwrap();
    assert!(fs::symlink_metadata(fx.dirs.job_dir(JobId(5))).is_err());
    assert!(elsewhere.join("keep").exists());
}

#[tokio::test]
async fn removed_containers_fit_for_reuse_are_recycled_and_the_others_unlinked() {
    let fx = fixture();
    let pool = recycle::pool_of(&fx.dirs.containers_dir).unwrap();
    fs::create_dir_all(&pool).unwrap();
    for (container, out) in [(ContainerId(1), "first"), (ContainerId(2), "second")] {
        let dir = fx.dirs.container_dir(container);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("stdout"), out).unwrap();
        fs::write(dir.join("stderr"), b"").unwrap();
        fs::write(dir.join("scratch"), b"made by the task").unwrap();
    }
    // A log read of container 2 in flight.
    let reader = fs::File::open(fx.dirs.container_dir(ContainerId(2)).join("stdout")).unwrap();
    let order = RemoveJob { job: JobId(7), containers: vec![ContainerId(1), ContainerId(2)], job_dir: false };
    let mut removed = fx.dirs.remove(&order).await.unwrap();
    removed.sort();
    assert_eq!(removed, [fx.dirs.container_dir(ContainerId(1)), fx.dirs.container_dir(ContainerId(2))]);
    assert!(!fx.dirs.containers_dir.join(ContainerId(1).to_string()).exists());
    assert!(!fx.dirs.containers_dir.join(ContainerId(2).to_string()).exists());
    let pooled: Vec<_> = fs::read_dir(&pool).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(
        pooled,
        [std::ffi::OsString::from(ContainerId(1).to_string())],
        "the one being read is unlinked"
    );
    let recycled = pool.join(ContainerId(1).to_string());
    assert_eq!(fs::read(recycled.join("stdout")).unwrap(), b"");
    assert!(!recycled.join("scratch").exists());
    let mut old = String::new();
    std::io::Read::read_to_string(&mut &reader, &mut old).unwrap();
    assert_eq!(old, "second", "the reader still reads what it opened");
}
