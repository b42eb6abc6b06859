//! The container lifecycle both the master and the agents follow, and the table of
//! allowed transitions.
//!
//! ```text
//! New ──> Reserved ──> Allocated ──> Acquired ──> Running ──> Completed
//!  │                      ▲  │           │           ├──────> Failed
//!  └──────────────────────┘  └───────────┴───────────┴──────> Killed / Failed
//! ```
//! `New`: the master created the request. `Allocated`: bound to an agent slot. `Acquired`:
//! the agent accepted it and made its directory. `Running`: the process started. The last
//! three are terminal.
//!
//! `Reserved` is kept in the wire enum (its position is the format) but no container ever
//! enters it. A reservation is not a property of one container: DRESS holds a share of a
//! slot kind for a class of jobs, whichever containers end up using it. So reservations are
//! a slot partition the policy states with its decisions (slots of a kind held for a set
//! of jobs) and the reactor checks before it launches anything, not a container state.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a task attempt's container is in its life.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum ContainerState {
    /// The master created the request.
    New,
    /// Unused: reservations are slot partitions set by the policy, not a container state
    /// (see the module docs). Kept so the wire format stays stable.
    Reserved,
    /// The master bound it to an agent slot and sent the launch.
    Allocated,
    /// The agent accepted it and prepared its working directory.
    Acquired,
    /// The task process started.
    Running,
    /// The process exited with status 0.
    Completed,
    /// The process could not start or exited unsuccessfully.
    Failed,
    /// Preempted or cancelled: the process group was terminated.
    Killed,
}

impl ContainerState {
    /// Every state, in lifecycle order.
    pub const ALL: [ContainerState; 8] = [
        ContainerState::New,
        ContainerState::Reserved,
        ContainerState::Allocated,
        ContainerState::Acquired,
        ContainerState::Running,
        ContainerState::Completed,
        ContainerState::Failed,
        ContainerState::Killed,
    ];

    /// Whether nothing can follow this state.
    pub fn is_terminal(self) -> bool {
        matches!(self, ContainerState::Completed | ContainerState::Failed | ContainerState::Killed)
    }

    /// Whether a container may move from `self` to `next`.
    pub fn can_become(self, next: ContainerState) -> bool {
        use ContainerState::*;
        matches!(
            (self, next),
            (New, Reserved | Allocated | Killed)
                | (Reserved, Allocated | Killed)
                | (Allocated, Acquired | Failed | Killed)
                | (Acquired, Running | Failed | Killed)
                | (Running, Completed | Failed | Killed)
        )
    }

    /// Lower-case name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            ContainerState::New => "new",
            ContainerState::Reserved => "reserved",
            ContainerState::Allocated => "allocated",
            ContainerState::Acquired => "acquired",
            ContainerState::Running => "running",
            ContainerState::Completed => "completed",
            ContainerState::Failed => "failed",
            ContainerState::Killed => "killed",
        }
    }

    /// The state whose [`name`](ContainerState::name) is `name`, if any (e.g. read back
    /// from the store).
    pub fn from_name(name: &str) -> Option<ContainerState> {
        ContainerState::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for ContainerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::ContainerState::{self, *};

    #[test]
    fn every_state_is_listed_once_and_its_name_round_trips() {
        // Exhaustive on purpose: a new variant fails to compile here until it is in `ALL`.
        let position = |s: ContainerState| match s {
            New => 0,
            Reserved => 1,
            Allocated => 2,
            Acquired => 3,
            Running => 4,
            Completed => 5,
            Failed => 6,
            Killed => 7,
        };
        for (i, state) in ContainerState::ALL.into_iter().enumerate() {
            assert_eq!(position(state), i, "{state} is out of place in ALL");
            assert_eq!(ContainerState::from_name(state.name()), Some(state));
        }
        assert_eq!(ContainerState::from_name("Running"), None);
        assert_eq!(ContainerState::from_name(""), None);
    }

    #[test]
    fn the_happy_path_is_allowed() {
        let path = [New, Allocated, Acquired, Running, Completed];
        for pair in path.windows(2) {
            assert!(pair[0].can_become(pair[1]), "{} -> {}", pair[0], pair[1]);
        }
    }

    #[test]
    fn terminal_states_have_no_successors() {
        for from in [Completed, Failed, Killed] {
            assert!(from.is_terminal());
            assert!(ContainerState::ALL.iter().all(|&to| !from.can_become(to)));
        }
    }

    #[test]
    fn going_backwards_is_refused() {
        assert!(!Running.can_become(Acquired));
        assert!(!Acquired.can_become(Allocated));
        assert!(!New.can_become(Running));
    }
}
