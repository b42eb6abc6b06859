//! The syncer groups the batches asked for while a sync runs into the next sync; held
//! acknowledgements come out in order, only up to the durable batch.

use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use super::*;

/// A sync that tells the test it started and waits for the test's go-ahead.
fn gated_sync()
-> (impl FnMut() -> io::Result<()> + Send + 'static, std_mpsc::Receiver<()>, std_mpsc::Sender<()>) {
    let (started_tx, started) = std_mpsc::channel();
    let (go, go_rx) = std_mpsc::channel::<()>();
    let sync = move || {
        started_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        Ok(())
    };
    (sync, started, go)
}

fn next(durable: &mut mpsc::UnboundedReceiver<Durable>) -> u64 {
    for _ in 0..500 {
        if let Ok(report) = durable.try_recv() {
            return report.unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no durability report within 5 s");
}

#[test]
fn batches_asked_for_during_a_sync_share_the_next_one() {
    let (sync, started, go) = gated_sync();
    let (tx, mut durable) = mpsc::unbounded_channel();
    let syncer = Syncer::spawn(sync, tx).unwrap();
    syncer.request(1);
    started.recv_timeout(Duration::from_secs(5)).unwrap();
    // The first sync is running: these three wait for one more.
    syncer.request(2);
    syncer.request(3);
    syncer.request(4);
    go.send(()).unwrap();
    assert_eq!(next(&mut durable), 1);
    started.recv_timeout(Duration::from_secs(5)).unwrap();
    go.send(()).unwrap();
    assert_eq!(next(&mut durable), 4, "one sync covers 2, 3 and 4");
    // Nothing more is wanted: no third sync starts.
    assert!(started.recv_timeout(Duration::from_millis(100)).is_err());
    // An old batch number asks for nothing new.
    syncer.request(3);
    assert!(started.recv_timeout(Duration::from_millis(100)).is_err());
    drop(go);
    drop(syncer);
}

#[test]
fn a_failed_sync_is_reported_and_nothing_after_it_counts() {
    let (tx, mut durable) = mpsc::unbounded_channel();
    let syncer = Syncer::spawn(|| Err(io::Error::other("disk gone")), tx).unwrap();
    syncer.request(1);
    for _ in 0..500 {
        if let Ok(report) = durable.try_recv() {
            assert_eq!(report.unwrap_err().to_string(), "disk gone");
            drop(syncer);
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the failure was not reported");
}

#[test]
fn dropping_the_syncer_finishes_the_syncs_asked_for() {
    let (tx, mut durable) = mpsc::unbounded_channel();
    let syncs = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&syncs);
    let syncer = Syncer::spawn(
        move || {
            *counted.lock().unwrap() += 1;
            Ok(())
        },
        tx,
    )
    .unwrap();
    syncer.request(7);
    drop(syncer);
    assert!(*syncs.lock().unwrap() >= 1);
    let mut last = 0;
    while let Ok(report) = durable.try_recv() {
        last = report.unwrap();
    }
    assert_eq!(last, 7);
}

#[test]
fn held_items_come_out_in_order_up_to_the_durable_batch() {
    let mut held = Held::new();
    held.push(1, "reply a");
    held.push(2, "reply b");
    held.push(2, "job end");
    held.push(4, "reply c");
    assert!(held.release(0).is_empty());
    assert_eq!(held.release(1), vec!["reply a"]);
    assert_eq!(held.release(3), vec!["reply b", "job end"]);
    assert!(!held.is_empty());
    assert!(held.any(|item| *item == "reply c"));
    assert_eq!(held.release(9), vec!["reply c"]);
    assert!(held.is_empty());
    held.push(10, "late");
    assert_eq!(held.drain_all(), vec!["late"]);
}
