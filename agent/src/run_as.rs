//! Which Unix user a task runs as. By default every task runs as the agent's own user,
//! whoever submitted it. An agent running as root may map accounts to Unix users
//! (`[run_as]` in `agent.toml`, the key `"*"` for every other account); a task is then
//! started as its account's user (supplementary groups, group, then user switched in the
//! child before exec), and an account with no mapping is refused.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};

use slotmarket_common::ids::AccountId;
use thiserror::Error;

/// The `[run_as]` key that applies to accounts not listed.
pub const ANY_ACCOUNT: &str = "*";

/// Why the mapping cannot be used.
#[derive(Debug, Error)]
pub enum RunAsError {
    /// A mapping is configured but the agent is not root, so it could not switch users.
    #[error(
        "[run_as] maps accounts to Unix users, but the agent runs as uid {0}, not root, and cannot switch users; remove [run_as] (tasks then run as the agent's user) or run the agent as root"
    )]
    NotRoot(u32),
    /// A mapped Unix user does not exist.
    #[error("[run_as]: Unix user {user:?} (for account {account:?}) does not exist")]
    UnknownUser {
        /// The account key.
        account: String,
        /// The user name.
        user: String,
    },
    /// The account of a task has no mapping and there is no `"*"` entry.
    #[error("account {0} has no Unix user in this agent's [run_as] (and there is no \"*\" entry)")]
    Unmapped(AccountId),
}

/// A Unix user a task may run as, resolved when the agent starts.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct UnixUser {
    /// The name.
    pub name: String,
    /// The user id.
    pub uid: libc::uid_t,
    /// The primary group id.
    pub gid: libc::gid_t,
    /// Every group the user is in (primary included), for `setgroups`.
    pub groups: Vec<libc::gid_t>,
}

/// The accounts-to-users mapping, resolved. Empty: tasks run as the agent's user.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct RunAs {
    users: BTreeMap<String, UnixUser>,
}

impl RunAs {
    /// Resolves `mapping` (account, or `"*"`, to a user name). A non-empty mapping needs an
    /// agent running as root (`euid`) and users that exist.
    pub fn resolve(mapping: &BTreeMap<String, String>, euid: u32) -> Result<RunAs, RunAsError> {
        if mapping.is_empty() {
            return Ok(RunAs::default());
        }
        if euid != 0 {
            return Err(RunAsError::NotRoot(euid));
        }
        let mut users = BTreeMap::new();
        for (account, user) in mapping {
            let resolved = lookup_user(user)
                .ok_or_else(|| RunAsError::UnknownUser { account: account.clone(), user: user.clone() })?;
            users.insert(account.clone(), resolved);
        }
        Ok(RunAs { users })
    }

    /// The user tasks of `account` run as: `None` for the agent's own user (no mapping),
    /// an error for an account the mapping does not cover.
    pub fn user_for(&self, account: &AccountId) -> Result<Option<&UnixUser>, RunAsError> {
        if self.users.is_empty() {
            return Ok(None);
        }
        match self.users.get(&account.0).or_else(|| self.users.get(ANY_ACCOUNT)) {
            Some(user) => Ok(Some(user)),
            None => Err(RunAsError::Unmapped(account.clone())),
        }
    }
}

/// Looks `name` up in the user database (`getpwnam_r`), with its groups.
pub fn lookup_user(name: &str) -> Option<UnixUser> {
    let c_name = CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value to be overwritten by getpwnam_r.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; buf's length is passed with it.
    let rc = unsafe { libc::getpwnam_r(c_name.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() {
        return None;
    }
    // SAFETY: getpwnam_r succeeded, so pw_name points to a NUL-terminated string in buf.
    let name = unsafe { CStr::from_ptr(pwd.pw_name) }.to_string_lossy().into_owned();
    let groups = group_list(&c_name, pwd.pw_gid);
    Some(UnixUser { name, uid: pwd.pw_uid, gid: pwd.pw_gid, groups })
}

/// The groups of user `name` whose primary group is `gid` (`getgrouplist`).
fn group_list(name: &CStr, gid: libc::gid_t) -> Vec<libc::gid_t> {
    let mut count: libc::c_int = 32;
    loop {
        let mut groups = vec![0 as libc::gid_t; count.max(1) as usize];
        let before = count;
        // SAFETY: groups holds `count` entries; getgrouplist writes at most that many and
        // sets `count` to the number needed.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        if rc >= 0 {
            groups.truncate(count.max(0) as usize);
            return groups;
        }
        if count <= before {
            // Nothing more can be learnt; the primary group alone is still right.
            return vec![gid];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(a, u)| (a.to_string(), u.to_string())).collect()
    }

    fn account(name: &str) -> AccountId {
        AccountId(name.into())
    }

    #[test]
    fn without_a_mapping_tasks_run_as_the_agent_whoever_submits() {
        let run_as = RunAs::resolve(&BTreeMap::new(), 1000).unwrap();
        assert_eq!(run_as.user_for(&account("alice")).unwrap(), None);
    }

    #[test]
    fn a_mapping_needs_root() {
        let err = RunAs::resolve(&mapping(&[("alice", "root")]), 1000).unwrap_err();
        assert!(matches!(err, RunAsError::NotRoot(1000)));
        assert!(err.to_string().contains("remove [run_as]"), "{err}");
    }

    #[test]
    fn accounts_map_to_their_user_then_to_the_default_and_others_are_refused() {
        let run_as = RunAs::resolve(&mapping(&[("alice", "root"), ("*", "nobody")]), 0).unwrap();
        let alice = run_as.user_for(&account("alice")).unwrap().unwrap();
        assert_eq!((alice.name.as_str(), alice.uid, alice.gid), ("root", 0, 0));
        assert!(alice.groups.contains(&0));
        let bob = run_as.user_for(&account("bob")).unwrap().unwrap();
        assert_eq!(bob.name, "nobody");
        assert_eq!(Some(bob), lookup_user("nobody").as_ref());

        let only_alice = RunAs::resolve(&mapping(&[("alice", "nobody")]), 0).unwrap();
        let err = only_alice.user_for(&account("bob")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "account bob has no Unix user in this agent's [run_as] (and there is no \"*\" entry)"
        );
    }

    #[test]
    fn an_unknown_user_is_named() {
        let err = RunAs::resolve(&mapping(&[("alice", "no-such-user-here")]), 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "[run_as]: Unix user \"no-such-user-here\" (for account \"alice\") does not exist"
        );
    }
}
