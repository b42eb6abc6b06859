//! Seeded trace generators for the papers' workloads. Each emits jobs one at a time, so
//! half a million of them never sit in memory, and the same parameters and seed always
//! give the same trace.
//!
//! - [`Mrm`]: MRM's Table 1 mix (§6): nine bins of map/reduce task counts, Poisson
//!   arrivals, half the jobs delay-sensitive (§6.3), optional deadlines.
//! - [`Dress`]: a DRESS-style congested mix (§V): jobs every few seconds, a given share
//!   of them small-demand (at most θ = 10 % of the cluster's containers).
//! - [`Dp`]: DP-style users (§4) each submitting a continuous stream of jobs big enough
//!   to fill the cluster, the next one as soon as the previous ends.
//!
//! Task lengths are not given by the papers; the defaults below are ours and every one
//! is a flag. A job's tasks within a stage share a mean (DRESS §III: tasks of a phase run
//! alike), drawn per job between half and one and a half times the base length.

use slotmarket_common::spec::JobClass;
use slotmarket_common::workload_mix::{MRM_TABLE_1, alone_s};

use super::rng::Rng;
use super::workload::{Dist, Durations, TraceJob, TraceStage};

/// Parameters of the MRM mix.
#[derive(Clone, Debug)]
pub struct Mrm {
    /// Jobs to generate.
    pub jobs: u64,
    /// Mean time between arrivals in seconds (MRM: 16–200; 50 is its medium load).
    pub interarrival_s: f64,
    /// Base map task length in seconds.
    pub map_s: f64,
    /// Base reduce task length in seconds.
    pub reduce_s: f64,
    /// Coefficient of variation of task lengths within a stage.
    pub cv: f64,
    /// Share of delay-sensitive jobs (the rest are delay-tolerant); `None`: no classes.
    pub sensitive_share: Option<f64>,
    /// Deadline = arrival + factor × the job's length on an otherwise idle cluster of
    /// `map_slots`/`reduce_slots` (twice the factor for delay-tolerant jobs, MRM's k = 2);
    /// `None`: no deadlines.
    pub deadline_factor: Option<f64>,
    /// Map slots of the cluster the deadlines assume.
    pub map_slots: u32,
    /// Reduce slots of the cluster the deadlines assume.
    pub reduce_slots: u32,
    /// Distinct users (`u1`..).
    pub users: u32,
    /// Seed.
    pub seed: u64,
    /// Distinct programs (`prog0`..), each job one of them by name with the program's
    /// own task length (spread over 0.5–1.5 × the base) and ±10 % per job, so that runs
    /// share a history as the paper's four job types do; 0: every job its own name and a
    /// length drawn between 0.5 and 1.5 × the base.
    pub programs: u32,
}

impl Default for Mrm {
    fn default() -> Mrm {
        Mrm {
            jobs: 100,
            interarrival_s: 50.0,
            map_s: 20.0,
            reduce_s: 30.0,
            cv: 0.2,
            sensitive_share: Some(0.5),
            deadline_factor: Some(2.0),
            map_slots: 80,
            reduce_slots: 80,
            users: 10,
            seed: 1,
            programs: 0,
        }
    }
}

impl Mrm {
    /// Emits the jobs in arrival order.
    pub fn generate<E>(&self, mut emit: impl FnMut(TraceJob) -> Result<(), E>) -> Result<(), E> {
        let mut rng = Rng::new(self.seed);
        let mut at = 0.0;
        for n in 0..self.jobs {
            if n > 0 {
                at += rng.exponential(self.interarrival_s);
            }
            let (maps, reduces) = mrm_bin(&mut rng);
            let unit = rng.unit();
            let program = (self.programs > 0).then(|| rng.range(0, self.programs - 1));
            let scale = match program {
                None => 0.5 + unit,
                Some(p) => (0.5 + (f64::from(p) + 0.5) / f64::from(self.programs)) * (0.9 + 0.2 * unit),
            };
            let (map_mean, reduce_mean) = (self.map_s * scale, self.reduce_s * scale);
            let class = self.sensitive_share.map(|share| {
                if rng.chance(share) { JobClass::DelaySensitive } else { JobClass::DelayTolerant }
            });
            let user = format!("u{}", rng.range(1, self.users.max(1)));
            let deadline_s = self.deadline_factor.map(|f| {
                let alone =
                    alone_s([(maps, self.map_slots, map_mean), (reduces, self.reduce_slots, reduce_mean)]);
                let f = if class == Some(JobClass::DelayTolerant) { 2.0 * f } else { f };
                round_ms(at + f * alone)
            });
            let stages = map_reduce(maps, reduces, map_mean, reduce_mean, self.cv);
            emit(TraceJob {
                class,
                deadline_s,
                name: program.map(|p| format!("prog{p}")),
                ..TraceJob::new(format!("j{}", n + 1), round_ms(at), user, stages)
            })?;
        }
        Ok(())
    }
}

/// Draws a bin of MRM Table 1 by its share of jobs, then the task counts within it.
fn mrm_bin(rng: &mut Rng) -> (u32, u32) {
    let mut pick = rng.range(1, 100);
    for bin in MRM_TABLE_1 {
        if pick <= bin.percent {
            return (rng.range(bin.maps[0], bin.maps[1]), bin.reduces);
        }
        pick -= bin.percent;
    }
    (1, 0)
}

/// Parameters of the DRESS-style congested mix.
#[derive(Clone, Debug)]
pub struct Dress {
    /// Jobs to generate.
    pub jobs: u64,
    /// Time between submissions in seconds (DRESS: 5, fixed).
    pub interarrival_s: f64,
    /// Share of small-demand jobs (DRESS: 10–40 %).
    pub small_share: f64,
    /// Containers in the cluster (A_c); demands are sized against it.
    pub containers: u32,
    /// Small-demand bound as a share of `containers` (DRESS θ = 10 %).
    pub theta: f64,
    /// Base map task length in seconds.
    pub map_s: f64,
    /// Base reduce task length in seconds.
    pub reduce_s: f64,
    /// Coefficient of variation of task lengths within a stage.
    pub cv: f64,
    /// Seed.
    pub seed: u64,
}

impl Default for Dress {
    fn default() -> Dress {
        Dress {
            jobs: 20,
            interarrival_s: 5.0,
            small_share: 0.3,
            containers: 40,
            theta: 0.1,
            map_s: 30.0,
            reduce_s: 20.0,
            cv: 0.2,
            seed: 1,
        }
    }
}

impl Dress {
    /// Emits the jobs in arrival order. A job demanding `d` containers has `d` map tasks
    /// and ⌈d/10⌉ reduce tasks. Small jobs are delay-sensitive in queue `small`, large
    /// ones delay-tolerant in queue `large`, so per-class metrics separate them and
    /// `capacity` with `--set queues.small=δ` is DRESS's static reservation.
    pub fn generate<E>(&self, mut emit: impl FnMut(TraceJob) -> Result<(), E>) -> Result<(), E> {
        let mut rng = Rng::new(self.seed);
        let bound = ((self.theta * f64::from(self.containers)).floor() as u32).max(1);
        for n in 0..self.jobs {
            let small = rng.chance(self.small_share);
            let demand = if small {
                rng.range(1, bound)
            } else {
                rng.range(bound + 1, self.containers.max(bound + 1))
            };
            let scale = 0.5 + rng.unit();
            let stages =
                map_reduce(demand, demand.div_ceil(10), self.map_s * scale, self.reduce_s * scale, self.cv);
            let (class, queue) =
                if small { (JobClass::DelaySensitive, "small") } else { (JobClass::DelayTolerant, "large") };
            let user = format!("u{}", n % 5 + 1);
            let at = round_ms(n as f64 * self.interarrival_s);
            let job = TraceJob::new(format!("j{}", n + 1), at, user, stages);
            emit(TraceJob { class: Some(class), queue: Some(queue.to_string()), ..job })?;
        }
        Ok(())
    }
}

/// Parameters of the DP-style user streams.
#[derive(Clone, Debug)]
pub struct Dp {
    /// Jobs to generate over all users.
    pub jobs: u64,
    /// Users, each with its own queue (DP: 2–80).
    pub users: u32,
    /// Map tasks per job (DP: as many as the cluster has slots).
    pub maps: u32,
    /// Reduce tasks per job.
    pub reduces: u32,
    /// Map task length in seconds.
    pub map_s: f64,
    /// Reduce task length in seconds.
    pub reduce_s: f64,
    /// Coefficient of variation of task lengths.
    pub cv: f64,
    /// Pause between a user's jobs in seconds.
    pub think_s: f64,
    /// Seed.
    pub seed: u64,
}

impl Default for Dp {
    fn default() -> Dp {
        Dp {
            jobs: 100,
            users: 10,
            maps: 80,
            reduces: 1,
            map_s: 60.0,
            reduce_s: 30.0,
            cv: 0.1,
            think_s: 0.0,
            seed: 1,
        }
    }
}

impl Dp {
    /// Emits round after round: every user's first job at time 0, then each user's next
    /// job following its previous one.
    pub fn generate<E>(&self, mut emit: impl FnMut(TraceJob) -> Result<(), E>) -> Result<(), E> {
        let mut rng = Rng::new(self.seed);
        let users = u64::from(self.users.max(1));
        for n in 0..self.jobs {
            let (user, round) = (n % users + 1, n / users);
            let name = format!("user{user:02}");
            let scale = 0.9 + 0.2 * rng.unit();
            let stages =
                map_reduce(self.maps, self.reduces, self.map_s * scale, self.reduce_s * scale, self.cv);
            let mut j = TraceJob::new(format!("{name}-{}", round + 1), 0.0, name.clone(), stages);
            j.queue = Some(name.clone());
            if round > 0 {
                j.follows = Some(format!("{name}-{round}"));
                j.think_s = (self.think_s > 0.0).then_some(self.think_s);
            }
            emit(j)?;
        }
        Ok(())
    }
}

/// A map stage and, if `reduces > 0`, a reduce stage behind its barrier.
fn map_reduce(maps: u32, reduces: u32, map_mean: f64, reduce_mean: f64, cv: f64) -> Vec<TraceStage> {
    let dist = |mean: f64| {
        let mean = round_ms(mean);
        if cv > 0.0 {
            Durations::Drawn(Dist::Normal { mean, sd: round_ms(cv * mean) })
        } else {
            Durations::Fixed(mean)
        }
    };
    TraceStage::map_reduce(maps, dist(map_mean), reduces, dist(reduce_mean))
}

/// Rounds seconds to milliseconds, so traces print short numbers.
fn round_ms(secs: f64) -> f64 {
    (secs * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::workload::Trace;

    fn collect(
        generate: impl FnOnce(&mut dyn FnMut(TraceJob) -> Result<(), ()>) -> Result<(), ()>,
    ) -> Vec<TraceJob> {
        let mut jobs = Vec::new();
        generate(&mut |j| {
            jobs.push(j);
            Ok(())
        })
        .unwrap();
        jobs
    }

    #[test]
    fn the_mrm_mix_follows_table_1_and_repeats_for_a_seed() {
        let mrm = Mrm { jobs: 20_000, seed: 3, ..Mrm::default() };
        let jobs = collect(|e| mrm.generate(e));
        assert_eq!(jobs, collect(|e| mrm.generate(e)));
        let single = jobs.iter().filter(|j| j.stages[0].tasks == 1 && j.stages.len() == 1).count();
        assert!((0.36..0.40).contains(&(single as f64 / 20_000.0)), "{single}");
        let biggest = jobs.iter().filter(|j| j.stages.len() == 2 && j.stages[1].tasks == 30).count();
        assert!((0.03..0.05).contains(&(biggest as f64 / 20_000.0)), "{biggest}");
        let mean_gap = jobs.last().unwrap().arrival_s / 19_999.0;
        assert!((mean_gap - 50.0).abs() < 2.0, "{mean_gap}");
        let sensitive = jobs.iter().filter(|j| j.class == Some(JobClass::DelaySensitive)).count();
        assert!((0.48..0.52).contains(&(sensitive as f64 / 20_000.0)));
        assert!(jobs.iter().all(|j| j.deadline_s.unwrap() > j.arrival_s));
        Trace::new(jobs).expect("a valid trace");
    }

    #[test]
    fn the_dress_mix_has_the_asked_share_of_small_jobs() {
        let dress = Dress { jobs: 2000, small_share: 0.4, ..Dress::default() };
        let jobs = collect(|e| dress.generate(e));
        let small: Vec<&TraceJob> = jobs.iter().filter(|j| j.queue.as_deref() == Some("small")).collect();
        assert!((0.37..0.43).contains(&(small.len() as f64 / 2000.0)));
        assert!(small.iter().all(|j| j.stages[0].tasks <= 4));
        assert!(jobs.iter().filter(|j| j.queue.as_deref() == Some("large")).all(|j| j.stages[0].tasks > 4));
        assert_eq!(jobs[3].arrival_s, 15.0);
        Trace::new(jobs).expect("a valid trace");
    }

    #[test]
    fn dp_users_each_submit_a_chain_of_jobs() {
        let dp = Dp { jobs: 7, users: 3, ..Dp::default() };
        let jobs = collect(|e| dp.generate(e));
        let ids: Vec<(&str, Option<&str>)> =
            jobs.iter().map(|j| (j.id.as_str(), j.follows.as_deref())).collect();
        assert_eq!(ids[0], ("user01-1", None));
        assert_eq!(ids[3], ("user01-2", Some("user01-1")));
        assert_eq!(ids[6], ("user01-3", Some("user01-2")));
        assert_eq!(jobs[4].queue.as_deref(), Some("user02"));
        let trace = Trace::new(jobs).expect("a valid trace");
        assert_eq!(trace.follows(6), Some(3));
    }
}
