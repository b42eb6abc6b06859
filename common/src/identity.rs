//! Who is on the other end of a connection: the role and principal carried in a peer's
//! certificate. Pure; `pki` reads them out of certificates.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ids::AccountId;

/// What a certificate allows its holder to do.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Role {
    /// The master itself (server certificate).
    Master,
    /// An agent: may only register and report.
    Agent,
    /// A user: may act on their own jobs and account.
    User,
    /// An administrator: may act on every job and grant budgets.
    Admin,
}

impl Role {
    /// Lower-case name, as written in certificates and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Agent => "agent",
            Role::User => "user",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        match s {
            "master" => Ok(Role::Master),
            "agent" => Ok(Role::Agent),
            "user" => Ok(Role::User),
            "admin" => Ok(Role::Admin),
            other => Err(format!("unknown role \"{other}\"; use agent, user or admin")),
        }
    }
}

/// A peer's role and principal (node name for agents, account name for users/admins).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Identity {
    /// What it may do.
    pub role: Role,
    /// Its name.
    pub principal: String,
}

impl Identity {
    /// The account a user or admin acts as.
    pub fn account(&self) -> AccountId {
        AccountId(self.principal.clone())
    }

    /// Whether this identity may see and act on jobs owned by `owner`.
    pub fn may_act_for(&self, owner: &AccountId) -> bool {
        self.role == Role::Admin || (self.role == Role::User && self.principal == owner.0)
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.role, self.principal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_act_only_for_themselves_and_admins_for_everyone() {
        let alice = Identity { role: Role::User, principal: "alice".into() };
        let root = Identity { role: Role::Admin, principal: "root".into() };
        let node = Identity { role: Role::Agent, principal: "alice".into() };
        assert!(alice.may_act_for(&AccountId("alice".into())));
        assert!(!alice.may_act_for(&AccountId("bob".into())));
        assert!(root.may_act_for(&AccountId("bob".into())));
        assert!(!node.may_act_for(&AccountId("alice".into())));
        assert_eq!("agent".parse::<Role>(), Ok(Role::Agent));
        assert!("boss".parse::<Role>().is_err());
    }
}
