//! Packing launches into `Launch` messages by encoded size, so that no message to an
//! agent passes its frame limit however large each launch is.

use slotmarket_common::protocol::{DEFAULT_MAX_FRAME, Launch};

/// The bytes a `Launch` message may take: half the agents' default frame limit (or of
/// a smaller limit the server is given), leaving room for the frame's own overhead.
pub(super) fn launch_budget(max_frame: usize) -> usize {
    max_frame.min(DEFAULT_MAX_FRAME) / 2
}

/// A group of launches to send in one message, and a launch after it that is too large
/// to send at all (with its encoded size).
pub(super) type LaunchChunk = (Vec<Launch>, Option<(Launch, usize)>);

/// Splits `batch` in order into messages whose launches encode to at most `budget`
/// bytes together; a launch alone over `budget` ends the chunk before it and is handed
/// back instead of being packed.
pub(super) fn pack_launches(batch: Vec<Launch>, budget: usize) -> Vec<LaunchChunk> {
    // A `Vec` encodes as a varint length (at most 5 bytes for a u32) and its elements.
    const LENGTH_PREFIX: usize = 5;
    let mut chunks = Vec::new();
    let mut chunk = Vec::new();
    let mut used = LENGTH_PREFIX;
    for launch in batch {
        let size = postcard::to_allocvec(&launch).map_or(usize::MAX, |bytes| bytes.len());
        if size.saturating_add(LENGTH_PREFIX) > budget {
            chunks.push((std::mem::take(&mut chunk), Some((launch, size))));
            used = LENGTH_PREFIX;
            continue;
        }
        if used + size > budget {
            chunks.push((std::mem::take(&mut chunk), None));
            used = LENGTH_PREFIX;
        }
        used += size;
        chunk.push(launch);
    }
    if !chunk.is_empty() {
        chunks.push((chunk, None));
    }
    chunks
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use slotmarket_common::ids::{AttemptId, ContainerId, JobId, StageId, TaskId};
    use slotmarket_common::protocol::{MasterToAgent, encode_frame};
    use slotmarket_common::spec::{SlotKind, TaskVars};

    use super::*;

    fn launch_with_input(container: u64, input_bytes: usize) -> Launch {
        let task = TaskId { job: JobId(1), stage: StageId(0), index: 0 };
        Launch {
            container: ContainerId(container),
            task,
            attempt: AttemptId(1),
            slot: SlotKind::Map,
            command: "true".into(),
            vars: TaskVars {
                job: JobId(1),
                stage: "map".into(),
                task: 0,
                tasks: 1,
                attempt: AttemptId(1),
                input: Some("x".repeat(input_bytes)),
                stage_tasks: BTreeMap::new().into(),
            },
            account: "alice".into(),
        }
    }

    #[test]
    fn launches_are_packed_by_encoded_size_under_the_agents_frame_limit() {
        let budget = launch_budget(DEFAULT_MAX_FRAME);
        // Ten 300 KB launches: by count they would be one message of 3 MB.
        let batch: Vec<Launch> = (1..=10).map(|c| launch_with_input(c, 300_000)).collect();
        let chunks = pack_launches(batch, budget);
        let mut order = Vec::new();
        for (chunk, oversized) in &chunks {
            assert!(oversized.is_none());
            let message = MasterToAgent::Launch(chunk.clone());
            let frame = encode_frame(&message, DEFAULT_MAX_FRAME).unwrap();
            assert!(frame.len() <= budget + 16, "{} bytes", frame.len());
            order.extend(chunk.iter().map(|l| l.container.0));
        }
        assert_eq!(order, (1..=10).collect::<Vec<_>>(), "every launch, in order");
        assert_eq!(chunks.len(), 10, "one 300 KB launch per message under a 512 KiB budget");
        // Small launches still share messages.
        let small = pack_launches((1..=100).map(|c| launch_with_input(c, 10)).collect(), budget);
        assert_eq!(small.len(), 1);
    }

    #[test]
    fn a_launch_over_the_budget_is_handed_back_not_packed() {
        let batch = vec![launch_with_input(1, 10), launch_with_input(2, 5000), launch_with_input(3, 10)];
        let chunks = pack_launches(batch, 1000);
        let sent: Vec<Vec<u64>> =
            chunks.iter().map(|(c, _)| c.iter().map(|l| l.container.0).collect()).collect();
        assert_eq!(sent, vec![vec![1], vec![3]]);
        let (launch, size) = chunks[0].1.as_ref().expect("the large launch");
        assert_eq!(launch.container, ContainerId(2));
        assert!(*size > 5000);
    }
}
