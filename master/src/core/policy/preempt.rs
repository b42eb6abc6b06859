//! Shared arithmetic of the share-based policies (`fair`, `capacity`): max-min fair
//! shares, the deficit of starved groups and the excess of over-share ones, and the
//! choice of which containers to kill: the newest first, since they have done the least
//! work that a kill throws away.

use std::collections::BTreeMap;

use slotmarket_common::ids::{ContainerId, JobId};
use slotmarket_common::spec::SlotKind;

use super::{KillReason, Preemption, SchedView};

/// Slack for float shares, so 2.9999999 slots count as 3.
const EPSILON: f64 = 1e-9;

/// Max-min fair shares of `total` slots among `demands`: no one gets more than it asks,
/// and what the small ones leave is split evenly among the rest.
pub(super) fn max_min_shares(total: f64, demands: &[u32]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by_key(|&i| demands[i]);
    let mut shares = vec![0.0; demands.len()];
    let mut left = total;
    for (done, &i) in order.iter().enumerate() {
        let even = left / (demands.len() - done) as f64;
        let share = f64::from(demands[i]).min(even);
        shares[i] = share;
        left -= share;
    }
    shares
}

/// Slots a group is owed now: its share rounded down, less what it runs, at most what it
/// could start (`ready`).
pub(super) fn deficit(share: f64, running: u32, ready: u32) -> u32 {
    let owed = (share + EPSILON).floor() as u32;
    owed.saturating_sub(running).min(ready)
}

/// Tasks a group runs beyond its share rounded up. Rounding the two ways apart keeps a
/// fractional share from bouncing a slot between groups.
pub(super) fn excess(share: f64, running: u32) -> u32 {
    let allowed = (share - EPSILON).ceil().max(0.0) as u32;
    running.saturating_sub(allowed)
}

/// Kills of `kind` already sent and not yet confirmed: those slots are on their way back.
pub(super) fn kills_in_flight(view: &SchedView<'_>, kind: SlotKind) -> u32 {
    view.live_unordered().filter(|c| c.kind == kind && c.kill_sent).count() as u32
}

/// Up to `budget` kills: from each victim group in the order given, up to its quota of
/// its newest live containers of `kind`. `group` says which group a job belongs to.
pub(super) fn newest_of<K: Ord + Copy>(
    view: &SchedView<'_>,
    kind: SlotKind,
    victims: &[(K, u32)],
    group: impl Fn(JobId) -> Option<K>,
    mut budget: u32,
    reason: KillReason,
) -> Vec<Preemption> {
    if budget == 0 || victims.is_empty() {
        return Vec::new();
    }
    // Walked in the table's own (hash) order: only each victim group is sorted below.
    let mut by_group: BTreeMap<K, Vec<ContainerId>> = BTreeMap::new();
    for c in view.live_unordered().filter(|c| c.kind == kind && !c.kill_sent && c.agent.is_some()) {
        if let Some(k) = group(c.task.job) {
            by_group.entry(k).or_default().push(c.container);
        }
    }
    let mut out = Vec::new();
    for &(k, quota) in victims {
        let Some(containers) = by_group.get_mut(&k) else { continue };
        // Container ids grow with launch order, so the highest is the newest.
        containers.sort_unstable_by(|a, b| b.cmp(a));
        for &container in containers.iter().take(quota.min(budget) as usize) {
            out.push(Preemption { container, reason });
            budget -= 1;
        }
        if budget == 0 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_min_shares_give_small_demands_in_full_and_split_the_rest() {
        assert_eq!(max_min_shares(6.0, &[16, 3]), vec![3.0, 3.0]);
        assert_eq!(max_min_shares(10.0, &[1, 20, 20]), vec![1.0, 4.5, 4.5]);
        assert_eq!(max_min_shares(10.0, &[2, 3]), vec![2.0, 3.0]);
        assert!(max_min_shares(4.0, &[]).is_empty());
    }

    #[test]
    fn deficit_and_excess_round_apart() {
        assert_eq!(deficit(4.5, 2, 10), 2);
        assert_eq!(deficit(4.5, 2, 1), 1);
        assert_eq!(excess(4.5, 6), 1);
        assert_eq!(excess(4.5, 5), 0);
        assert_eq!(deficit(2.9999999999, 0, 5), 3);
        assert_eq!(excess(0.0, 2), 2);
    }
}
