//! Identifier newtypes. Every id that crosses a module or the wire has its own type so
//! a job id can never be passed where an agent id is meant.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! define_id {
    ($(#[$doc:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }
    };
}

define_id!(
    /// A job admitted by the master; allocated in submission order, never reused.
    JobId(u64), "j"
);
define_id!(
    /// A stage's position in its job's spec (0-based).
    StageId(u32), "s"
);
define_id!(
    /// One try at running a task; the first attempt is 1. A re-run gets the next number,
    /// so reports about an older attempt can be recognised and ignored.
    AttemptId(u32), "a"
);
define_id!(
    /// The container of one task attempt; unique across the whole cluster's lifetime.
    ContainerId(u64), "c"
);
define_id!(
    /// An agent's registration with the master; a reconnecting agent gets a new id.
    AgentId(u32), "n"
);

/// A task: the `index`-th task of stage `stage` of job `job`. Displays as `j7.s0.t3`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskId {
    /// The job the task belongs to.
    pub job: JobId,
    /// The stage within the job.
    pub stage: StageId,
    /// The task's index within its stage (0-based); substituted as `{task}`.
    pub index: u32,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.t{}", self.job, self.stage, self.index)
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An account: the principal named in a user's or admin's certificate.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AccountId(pub String);

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_display_with_their_prefix() {
        let task = TaskId { job: JobId(7), stage: StageId(0), index: 3 };
        assert_eq!(task.to_string(), "j7.s0.t3");
        assert_eq!(ContainerId(12).to_string(), "c12");
        assert_eq!(format!("{:?}", AgentId(2)), "n2");
    }
}
