//! The SQLite schema and its version. Every change is a new step appended to
//! [`MIGRATIONS`]; never edit a released step.

use rusqlite::Connection;

use super::StoreError;

/// Step `i` brings a database from version `i` to `i + 1`; version 0 is an empty file.
pub(super) const MIGRATIONS: &[&str] = &[
    V1,
    V2_JOBS_AND_HISTORY,
    ACCOUNTS_AND_LEDGER,
    DEADLINE_PURCHASES,
    DP_RATES_AND_INCOME,
    CLUSTER_CAPACITY,
    LOCAL_NODES,
    JOB_CLEANUP,
    JOB_ID_RESERVATION,
    CONTAINER_PHASES,
];

/// The version this build writes: the number of migration steps.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub(super) const V1: &str = "
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY,
    account      TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    spec_json    TEXT    NOT NULL,
    submitted_ms INTEGER NOT NULL,
    state        TEXT    NOT NULL,
    started_ms   INTEGER,
    finished_ms  INTEGER,
    message      TEXT
);
-- The latest state of every container (one task attempt each).
CREATE TABLE containers (
    id          INTEGER PRIMARY KEY,
    job         INTEGER NOT NULL REFERENCES jobs(id),
    stage       INTEGER NOT NULL,
    task        INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    node        TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    at_ms       INTEGER NOT NULL,
    exit_code   INTEGER,
    message     TEXT
);
CREATE INDEX containers_by_job ON containers(job);
-- Every transition with its time: the task history estimates and profiles learn from.
CREATE TABLE transitions (
    container INTEGER NOT NULL,
    state     TEXT    NOT NULL,
    at_ms     INTEGER NOT NULL
);
CREATE INDEX transitions_by_container ON transitions(container);
";

/// Deadlines, owners and task counts on jobs (so ended jobs are listed from the store
/// alone), and the history of ended jobs. Existing rows are filled in from what they have.
const V2_JOBS_AND_HISTORY: &str = "
ALTER TABLE jobs ADD COLUMN owner TEXT;
ALTER TABLE jobs ADD COLUMN deadline_ms INTEGER;
ALTER TABLE jobs ADD COLUMN tasks_total INTEGER;
ALTER TABLE jobs ADD COLUMN tasks_completed INTEGER;
UPDATE jobs SET owner = account;
UPDATE jobs SET tasks_total =
    (SELECT COALESCE(SUM(json_extract(value, '$.tasks')), 0) FROM json_each(jobs.spec_json, '$.stage'));
UPDATE jobs SET tasks_completed =
    (SELECT COUNT(*) FROM containers c WHERE c.job = jobs.id AND c.state = 'completed');
CREATE INDEX jobs_by_state ON jobs(state);
-- One row per ended job, at most a configured number per name (older ones are deleted).
CREATE TABLE job_history (
    job         INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL,
    record_json TEXT    NOT NULL
);
CREATE INDEX job_history_by_name ON job_history(name, job);
";

/// Accounts and their append-only ledger. Balances are not stored: they are the sums of
/// the entries, recomputed (and checked) at every start. Triggers refuse any UPDATE or
/// DELETE of a ledger row, so not even a bug can rewrite history.
const ACCOUNTS_AND_LEDGER: &str = "
CREATE TABLE accounts (
    name         TEXT    PRIMARY KEY,
    created_ms   INTEGER NOT NULL,
    members_json TEXT    NOT NULL
);
-- kind 'grant': detail = granting principal; kind 'charge': detail = reason, job if any.
CREATE TABLE ledger (
    seq          INTEGER PRIMARY KEY,
    account      TEXT    NOT NULL REFERENCES accounts(name),
    at_ms        INTEGER NOT NULL,
    amount_micro INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    job          INTEGER,
    detail       TEXT    NOT NULL,
    memo         TEXT
);
CREATE INDEX ledger_by_account ON ledger(account, seq);
CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
";

/// MRM deadline purchases are ledger entries of kind `deadline` naming their job; job
/// listings read a job's price from them, so they are indexed by job.
const DEADLINE_PURCHASES: &str = "
CREATE INDEX ledger_deadline_by_job ON ledger(job) WHERE kind = 'deadline';
";

/// DP spending rates (set by users) and incomes (set by administrators), one row per
/// account, so a restarted master keeps them. Not a foreign key: a user may set a rate on
/// their implicit account before an administrator creates it.
const DP_RATES_AND_INCOME: &str = "
CREATE TABLE account_settings (
    account      TEXT    PRIMARY KEY,
    rate_micro   INTEGER,
    income_micro INTEGER
);
";

/// The cluster's slots last seen offered (MRM), one row, so a restarted master can
/// quote before its agents reconnect.
const CLUSTER_CAPACITY: &str = "
CREATE TABLE cluster_capacity (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    map_slots    INTEGER NOT NULL,
    reduce_slots INTEGER NOT NULL
);
";

/// Nodes whose agents keep their own data directory, with its id: after a restart, a
/// node holding outputs that does not come back, or comes back with another directory,
/// has lost them.
const LOCAL_NODES: &str = "
CREATE TABLE local_nodes (
    node   TEXT PRIMARY KEY,
    dir_id TEXT NOT NULL
);
";

/// Removal of ended jobs' directories from the agents (see `store::cleanup`): the jobs
/// whose removal is planned, and per node the removals not yet sent.
const JOB_CLEANUP: &str = "
CREATE TABLE jobs_cleaned (
    job   INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL
);
CREATE TABLE job_cleanup (
    job  INTEGER NOT NULL,
    node TEXT    NOT NULL,
    PRIMARY KEY (job, node)
);
";

/// The highest job id a master may have handed out (one row): a restarted master issues
/// ids above it, so a job lost with an unsynced suffix of the WAL never has its id reused
/// (see the store's module header).
const JOB_ID_RESERVATION: &str = "
CREATE TABLE job_id_reservation (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    until INTEGER NOT NULL
);
";

/// The time of each phase on the container's own row, in place of a `transitions` row
/// per state: one write per reported state instead of two, and no second index to
/// maintain (most of the master's CPU per task was these writes). A phase keeps its first
/// time; `ended_ms` stays when `at_ms` later moves (outputs lost after completion).
const CONTAINER_PHASES: &str = "
ALTER TABLE containers ADD COLUMN allocated_ms INTEGER;
ALTER TABLE containers ADD COLUMN acquired_ms INTEGER;
ALTER TABLE containers ADD COLUMN running_ms INTEGER;
ALTER TABLE containers ADD COLUMN ended_ms INTEGER;
UPDATE containers SET
    allocated_ms = (SELECT MIN(at_ms) FROM transitions t WHERE t.container = containers.id AND t.state = 'allocated'),
    acquired_ms = (SELECT MIN(at_ms) FROM transitions t WHERE t.container = containers.id AND t.state = 'acquired'),
    running_ms = (SELECT MIN(at_ms) FROM transitions t WHERE t.container = containers.id AND t.state = 'running'),
    ended_ms = (SELECT MIN(at_ms) FROM transitions t WHERE t.container = containers.id
                AND t.state IN ('completed', 'failed', 'killed'));
DROP TABLE transitions;
";

/// Brings a database to [`SCHEMA_VERSION`], one step per transaction, or refuses a file
/// written by a newer build.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if !(0..=SCHEMA_VERSION).contains(&version) {
        return Err(StoreError::SchemaVersion { found: version, supported: SCHEMA_VERSION });
    }
    for (from, step) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(step)?;
        tx.pragma_update(None, "user_version", from as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
}
