//! Account handlers: creating accounts and granting budget (administrators only), and
//! restoring accounts and the ledger after a restart. Each write is a `Persist` emitted
//! before the reply that announces it, as for submits.

use slotmarket_common::identity::Role;
use slotmarket_common::ids::AccountId;
use slotmarket_common::money::Credits;
use slotmarket_common::protocol::{ErrorKind, LedgerEntry, Response};

use super::Ctx;
use crate::core::accounting::{AccountError, StoredAccount};
use crate::core::command::Persist;
use crate::core::state::State;
use crate::core::{Caller, RequestId};

/// What an `AccountAddRequested` event asks for.
pub(super) struct AccountAdd {
    pub(super) account: AccountId,
    pub(super) budget: Option<Credits>,
    pub(super) members: Vec<String>,
}

/// What a `BudgetAddRequested` event asks for.
pub(super) struct BudgetAdd {
    pub(super) account: AccountId,
    pub(super) amount: Credits,
    pub(super) memo: Option<String>,
}

/// Creates an account: `Persist(Account)`, then `Persist(Ledger)` for a first budget,
/// then `Reply{AccountAdded}`.
pub(super) fn on_account_add_requested(
    state: &mut State,
    cx: &mut Ctx,
    request: RequestId,
    caller: &Caller,
    add: AccountAdd,
) {
    if caller.role != Role::Admin {
        let message = format!("{caller} may not create accounts; an admin certificate is needed");
        return cx.reply(request, Response::error(ErrorKind::Forbidden, message));
    }
    let created = state.accounts.create(add.account.clone(), add.members, add.budget, caller, cx.now);
    let (stored, entry) = match created {
        Ok(created) => created,
        Err(err) => return reply_refused(cx, request, &err),
    };
    let StoredAccount { account, members, created } = stored;
    cx.persist(Persist::Account { account, members, created });
    if let Some(entry) = entry {
        cx.persist(Persist::Ledger(entry));
    }
    match state.accounts.summary(caller, &add.account) {
        Ok(summary) => cx.reply(request, Response::AccountAdded(summary)),
        Err(err) => reply_refused(cx, request, &err),
    }
}

/// Grants budget: `Persist(Ledger)` then `Reply{BudgetAdded}`. Only administrators
/// grant; any other caller is refused the same way whatever the account, so the answer
/// reveals nothing about it.
pub(super) fn on_budget_add_requested(
    state: &mut State,
    cx: &mut Ctx,
    request: RequestId,
    caller: &Caller,
    add: BudgetAdd,
) {
    if caller.role != Role::Admin {
        let message = format!("{caller} may not grant budget; an admin certificate is needed");
        return cx.reply(request, Response::error(ErrorKind::Forbidden, message));
    }
    let BudgetAdd { account, amount, memo } = add;
    let entry = match state.accounts.grant(&account, amount, caller, memo, cx.now) {
        Ok(entry) => entry,
        Err(err) => return reply_refused(cx, request, &err),
    };
    cx.persist(Persist::Ledger(entry.clone()));
    match state.accounts.summary(caller, &account) {
        Ok(summary) => cx.reply(request, Response::BudgetAdded { entry, account: summary }),
        Err(err) => reply_refused(cx, request, &err),
    }
}

/// Restores the stored accounts and ledger (checked by the store already; anything
/// still refused is counted, see `CoreView::accounts_refused_on_replay`).
pub(super) fn on_accounts_recovered(
    state: &mut State,
    accounts: Vec<StoredAccount>,
    ledger: Vec<LedgerEntry>,
) {
    state.accounts.restore(accounts, ledger);
}

/// Answers a refused account request with the error kind its cause deserves.
/// Sets a spending rate and replies `RateSet`. A user may set only their own account's
/// rate (an account they are merely a member of is refused as not found); an admin any
/// account they may read. The rate is stored (`Persist::Rate`) before the reply, so a
/// restarted master keeps it.
pub(super) fn on_rate_set_requested(
    state: &mut State,
    cx: &mut Ctx,
    request: RequestId,
    caller: &Caller,
    account: Option<AccountId>,
    rate: Credits,
) {
    let account = account.unwrap_or_else(|| caller.account());
    let allowed = match caller.role {
        Role::User => caller.principal == account.0,
        Role::Admin => state.accounts.may_read(caller, &account),
        Role::Agent | Role::Master => false,
    };
    if !allowed {
        if caller.role == Role::User && state.accounts.may_read(caller, &account) {
            // A member sees the account, so "no account" would be false.
            let message = format!("users set only their own account's rate; an admin sets {account}'s");
            return cx.reply(request, Response::error(ErrorKind::Forbidden, message));
        }
        return reply_refused(cx, request, &AccountError::NotFound { account });
    }
    match state.accounts.set_rate(&account, rate) {
        Ok(()) => {
            cx.persist(Persist::Rate { account: account.clone(), rate });
            cx.reply(request, Response::RateSet { account, rate });
        }
        Err(err) => reply_refused(cx, request, &err),
    }
}

/// Sets a created account's income: `Persist(Income)` then `Reply{IncomeSet}`; only
/// administrators set income.
pub(super) fn on_income_set_requested(
    state: &mut State,
    cx: &mut Ctx,
    request: RequestId,
    caller: &Caller,
    account: AccountId,
    income: Credits,
) {
    if caller.role != Role::Admin {
        let message = format!("{caller} may not set income; an admin certificate is needed");
        return cx.reply(request, Response::error(ErrorKind::Forbidden, message));
    }
    if let Err(err) = state.accounts.set_income(&account, income) {
        return reply_refused(cx, request, &err);
    }
    cx.persist(Persist::Income { account: account.clone(), income });
    match state.accounts.summary(caller, &account) {
        Ok(summary) => cx.reply(request, Response::IncomeSet(summary)),
        Err(err) => reply_refused(cx, request, &err),
    }
}

fn reply_refused(cx: &mut Ctx, request: RequestId, err: &AccountError) {
    let kind = match err {
        AccountError::NotFound { .. } => ErrorKind::NotFound,
        _ => ErrorKind::BadRequest,
    };
    let mut message = err.to_string();
    if let AccountError::NotFound { account } = err {
        // A user's namesake account is implicit until created; say how to create it.
        message.push_str(&format!("; create it with `slotmarket account add {account}`"));
    }
    cx.reply(request, Response::error(kind, message));
}
