//! What one control step reads of a job's remaining time: the completion model C(p, a) at
//! the job's progress (or Amdahl's law while no model is built), scaled by the job's
//! slowdown, with the straggler reserves added (§4.1–4.3 as the controller uses them), and
//! the raw allocation a control step picks from it.

use std::borrow::Cow;

use slotmarket_common::time::Timestamp;

use super::super::{JobInfo, SchedView};
use super::control::slack_at;
use super::{Amdahl, CompletionModel, Control, JobProfile, Jockey, SloState, Utility};

/// A job's remaining time at one control step, as a function of its allocation.
pub(super) struct Prediction {
    /// The simulated model, once built; Amdahl's law stands in until then.
    pub(super) model: Option<CompletionModel>,
    /// Amdahl's law over the job's profile.
    pub(super) amdahl: Amdahl,
    /// The job's progress by the configured indicator.
    pub(super) progress: f64,
    /// How much slower than its profile the job runs.
    pub(super) slowdown: f64,
    /// Time kept in hand for one straggler on the stages left (`stage_reserve`), in ms.
    pub(super) straggler_ms: f64,
    /// With `stage_reserve_chance`: what a straggler on the stages left may add, as
    /// `(probability, extra ms)` ([`JobProfile::straggler_outcomes`]); empty otherwise.
    pub(super) straggler_outcomes: Vec<(f64, f64)>,
    /// The pace check's factor on C(p, a) (`pace_floor`; 1 without it).
    pub(super) pace: f64,
    /// The pace check's factor on the reserves: `pace` with `pace_scales_reserves`,
    /// else 1.
    pub(super) pace_reserve: f64,
    /// The pace check's sums up to this step: run time and the model's expectation of
    /// it, in ms ([`SloState::pace_clock_ms`], [`SloState::pace_model_ms`]).
    pub(super) pace_sums: (f64, f64),
}

impl Prediction {
    /// Remaining milliseconds with `a` slots.
    pub(super) fn remaining_ms(&self, a: u32) -> f64 {
        self.remaining_ms_with_reserve(a, 1.0)
    }

    /// Remaining milliseconds with `a` slots when only `share` of the reserves is kept
    /// ([`JockeyConfig::all_in_reserve`](super::JockeyConfig::all_in_reserve)); without
    /// a model there is no reserve to leave out.
    pub(super) fn remaining_ms_with_reserve(&self, a: u32, share: f64) -> f64 {
        match &self.model {
            Some(m) => {
                self.slowdown
                    * (self.pace * m.remaining_between(self.progress, a)
                        + share.max(0.0) * self.pace_reserve * self.reserve_ms(m))
            }
            None => self.pace * self.slowdown * self.amdahl.remaining(a),
        }
    }

    /// Whether the model was built with its spread, so it can be read as a distribution.
    pub(super) fn has_spread(&self) -> bool {
        self.model.as_ref().is_some_and(|m| !m.spread_ms.is_empty())
    }

    /// The model's spread of remaining milliseconds with `a` slots (empty without one).
    pub(super) fn spread_ms(&self, a: u32) -> Vec<f64> {
        let Some(m) = &self.model else { return Vec::new() };
        let reserve = self.reserve_ms(m);
        let (pace, reserve) = (self.pace, self.pace_reserve * reserve);
        m.spread_between(self.progress, a).iter().map(|r| self.slowdown * (pace * r + reserve)).collect()
    }

    /// With `a` slots, the remaining milliseconds if no task left straggles past its
    /// profile (C(p, a) and the model's tail reserve) and if one does (the larger of
    /// the tail reserve and what the straggler adds, for each of
    /// [`straggler_outcomes`](Self::straggler_outcomes)), with their probabilities;
    /// empty without a model.
    pub(super) fn outcomes_ms(&self, a: u32) -> Vec<(f64, f64)> {
        let Some(m) = &self.model else { return Vec::new() };
        let base = self.pace * m.remaining_between(self.progress, a);
        let (tail, paced) = (m.tail_reserve(self.progress), self.pace_reserve);
        let straggles = self.straggler_outcomes.iter().map(|o| o.0).sum::<f64>();
        let mut outcomes = Vec::with_capacity(self.straggler_outcomes.len() + 1);
        outcomes.push(((1.0 - straggles).max(0.0), self.slowdown * (base + paced * tail)));
        let with = |&(p, extra): &(f64, f64)| (p, self.slowdown * (base + paced * tail.max(extra)));
        outcomes.extend(self.straggler_outcomes.iter().map(with));
        outcomes
    }

    /// The predicted finish's interval with `a` slots, as offsets from now in ms.
    pub(super) fn interval_ms(&self, a: u32) -> Option<(f64, f64)> {
        let (lo, hi) = self.model.as_ref()?.interval(self.progress, a);
        let scale = self.pace * self.slowdown;
        Some((scale * lo, scale * hi))
    }

    /// Whether the job ran ahead of its model since the `last` control step: its tasks
    /// ran faster than profiled (slowdown below 1) and its remaining time under the
    /// allocation that step sized fell by more than the time that passed. A job as
    /// heavy as profiled, or one waiting on a straggler (its progress, and so C(p, a),
    /// stands still while the clock runs), is not ahead. `false` without an earlier
    /// model-based step to compare with.
    pub(super) fn ran_ahead(&self, now: Timestamp, slack: f64, last: &SloState) -> bool {
        let (Some(_), Some(at), Some(finish)) = (last.smoothed, last.stepped_at, last.reserved_finish) else {
            return false;
        };
        if self.slowdown >= 1.0 || slack <= 0.0 {
            return false;
        }
        // The last step predicted `at + slack × before`; on the model's pace `before`
        // would have shrunk by the time since.
        let before = finish.0.saturating_sub(at.0) as f64 / slack;
        let elapsed = now.0.saturating_sub(at.0) as f64;
        self.remaining_ms(last.target.max(1)) < before - elapsed
    }

    /// What is added to C(p, a): the model's tail reserve or the stage reserve, the larger.
    fn reserve_ms(&self, model: &CompletionModel) -> f64 {
        model.tail_reserve(self.progress).max(self.straggler_ms)
    }
}

impl Jockey {
    /// What this control step predicts of `job`'s remaining time; fills `profile`'s
    /// queueing times from the model once it is built.
    pub(super) fn predict(
        &mut self,
        now: Timestamp,
        view: &SchedView<'_>,
        profile: &mut JobProfile,
        job: &JobInfo<'_>,
        total: u32,
        last: &SloState,
    ) -> Prediction {
        let model = self.model_for(profile, total).cloned();
        if let Some(model) = &model {
            for (stage, &q) in profile.stages.iter_mut().zip(&model.queue_ms) {
                stage.queue_ms = q;
            }
        }
        let done: Vec<f64> =
            job.stages().map(|s| f64::from(s.completed) / f64::from(s.tasks.max(1))).collect();
        let left = self.exposed_to_stragglers(profile, job);
        let (reserve, quantile) = (self.config.stage_reserve, self.config.stage_reserve_quantile);
        let progress = self.config.indicator.progress(profile, &done);
        let slowdown = self.slowdown(now, view, profile, job);
        let (pace, pace_sums) = self.pace(now, last, model.as_ref(), progress, slowdown);
        Prediction {
            progress,
            amdahl: Amdahl::of(profile, &done),
            slowdown,
            pace,
            pace_reserve: if self.config.pace_scales_reserves { pace } else { 1.0 },
            pace_sums,
            straggler_ms: profile.straggler_reserve_ms(&left, reserve, quantile),
            straggler_outcomes: match self.config.stage_reserve_chance {
                Some(_) => profile.straggler_outcomes(&left, reserve),
                None => Vec::new(),
            },
            model,
        }
    }

    /// The pace check (`pace_floor`): how much longer the run took to reach `progress`
    /// than the model expected, within `pace_floor..=pace_ceiling`, and the sums it is
    /// read from brought up to `now` ([`SloState::pace_clock_ms`]). Over each interval
    /// between model-based steps the model expects the fall of C(p, a) from the last
    /// step's progress to this one's, at the slots the job ran on on average (its
    /// guarantee and spare slots: what it ran is what it progressed on), times the
    /// slowdown (which the pace should not count twice). Two control intervals at pace
    /// 1 weigh in first, so that the first steps' noise moves it little. (1, zeros)
    /// with the check off.
    fn pace(
        &self,
        now: Timestamp,
        last: &SloState,
        model: Option<&CompletionModel>,
        progress: f64,
        slowdown: f64,
    ) -> (f64, (f64, f64)) {
        if self.config.pace_floor <= 0.0 {
            return (1.0, (0.0, 0.0));
        }
        let (mut clock, mut expected) = (last.pace_clock_ms, last.pace_model_ms);
        if let (Some(m), Some(_), Some(at)) = (model, last.smoothed, last.stepped_at) {
            let elapsed = now.0.saturating_sub(at.0);
            let ran = (last.used_slot_ms + last.spare_slot_ms).saturating_sub(last.ran_slot_ms);
            if elapsed > 0 {
                let slots = ((ran as f64 / elapsed as f64).round() as u32).max(1);
                let fall = m.remaining_between(last.progress, slots) - m.remaining_between(progress, slots);
                // `pace_decay`: the earlier intervals fade, so the pace reads the recent run.
                let decay = self.config.pace_decay;
                if decay < 1.0 {
                    (clock, expected) = (decay * clock, decay * expected);
                }
                clock += elapsed as f64;
                expected += slowdown * fall.max(0.0);
            }
        }
        let prior = 2.0 * self.config.interval_ms as f64;
        let pace =
            ((clock + prior) / (expected + prior)).clamp(self.config.pace_floor, self.config.pace_ceiling);
        (pace, (clock, expected))
    }

    /// Tasks left per stage for the stage reserve ([`JobProfile::straggler_reserve_ms`]):
    /// none for a stage whose profile holds at least `stage_reserve_below` task times
    /// (with the setting on). The reserve prices a straggler the profile never showed
    /// in a stage, from the job's pooled ratios; a stage profiled from that many tasks
    /// shows its own tail, which C(p, a) already draws, and pricing the job's worst
    /// ratio on it again (a wide stage has the largest mean) holds a large reserve,
    /// and the allocation it takes, for as long as the stage runs. With
    /// `stage_reserve_until_started`, none for a stage whose tasks have all started.
    fn exposed_to_stragglers(&self, profile: &JobProfile, job: &JobInfo<'_>) -> Vec<u32> {
        let below = self.config.stage_reserve_below as usize;
        job.stages()
            .zip(&profile.stages)
            .map(|(s, stage)| {
                let seen_enough = below > 0 && stage.run_ms.len() >= below;
                let all_started = self.config.stage_reserve_until_started && s.pending() == 0;
                if seen_enough || all_started { 0 } else { s.tasks.saturating_sub(s.completed) }
            })
            .collect()
    }

    /// Control steps in a row, this one included, at which the job ran ahead of its
    /// model ([`Prediction::ran_ahead`]); 0 with `ahead_steps` off.
    pub(super) fn ahead_steps(&self, now: Timestamp, last: &SloState, prediction: &Prediction) -> u32 {
        // The last step's predicted finish was made with the slack at its own progress.
        let slack = self.slack_at(last.progress);
        let ahead = self.config.ahead_steps > 0 && prediction.ran_ahead(now, slack, last);
        if ahead { last.ahead_steps + 1 } else { 0 }
    }

    /// The slack at `progress`: the control's, or with `slack_at_end` the one between
    /// them ([`slack_at`]).
    pub(super) fn slack_at(&self, progress: f64) -> f64 {
        slack_at(self.config.control.slack, self.config.slack_at_end, progress)
    }

    /// The control for `job` at `progress`: the job's own utility curve, when its spec
    /// gives one, else the policy's; the slack at that progress.
    pub(super) fn control_for(&self, job: &JobInfo<'_>, progress: f64) -> Cow<'_, Control> {
        let slack = self.slack_at(progress);
        match &job.spec().utility {
            Some(curve) => {
                Cow::Owned(Control { utility: Utility::from(curve), slack, ..self.config.control.clone() })
            }
            None if slack == self.config.control.slack => Cow::Borrowed(&self.config.control),
            None => Cow::Owned(Control { slack, ..self.config.control.clone() }),
        }
    }

    /// The raw allocation (§4.3): the smallest number of slots up to `cap` that maximises
    /// the predicted finish's utility, or its expected utility over the model's spread
    /// (`expected_utility`). Every allocation is a candidate, not only the modelled ones:
    /// picking from a grid of 15 % steps would round each raw allocation up by up to 15 %.
    /// A job running ahead of its model (`ahead`) is sized with `ahead_slack` when set,
    /// and one sized at `cap` is sized again with `slack_at_cap` when that is smaller.
    pub(super) fn raw_allocation(
        &self,
        control: &Control,
        now: Timestamp,
        deadline: Timestamp,
        cap: u32,
        prediction: &Prediction,
        ahead: bool,
    ) -> u32 {
        let grid: Vec<u32> = (1..=cap).collect();
        let (now_ms, deadline_ms) = (now.0 as i64, deadline.0 as i64);
        let sized = |control: &Control| {
            if let (Some(tolerance), Some(_)) = (self.config.stage_reserve_chance, &prediction.model) {
                return control
                    .weighted_allocation(now_ms, deadline_ms, &grid, |a| prediction.outcomes_ms(a), tolerance)
                    .unwrap_or(cap);
            }
            match self.config.expected_utility {
                Some(tolerance) if prediction.has_spread() => control.expected_allocation(
                    now_ms,
                    deadline_ms,
                    &grid,
                    |a| prediction.spread_ms(a),
                    tolerance,
                ),
                _ => control.raw_allocation(now_ms, deadline_ms, &grid, |a| prediction.remaining_ms(a)),
            }
            .unwrap_or(cap)
        };
        let with_slack = |slack| Control { slack, ..control.clone() };
        let control = match self.config.ahead_slack {
            Some(slack) if ahead => Cow::Owned(with_slack(slack)),
            _ => Cow::Borrowed(control),
        };
        match (sized(&control), self.config.slack_at_cap) {
            (raw, Some(slack)) if raw == cap && slack < control.slack => sized(&with_slack(slack)),
            (raw, _) => raw,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::BUCKETS;
    use super::*;

    const MINUTE_MS: f64 = 60_000.0;

    /// A job of 100 minutes on 10 slots at progress 0, its remaining time falling in
    /// step with its progress, seen at `progress` with `slowdown`.
    fn job_at(progress: f64, slowdown: f64) -> Prediction {
        let row = (0..BUCKETS).map(|b| (1.0 - b as f64 / BUCKETS as f64) * 100.0 * MINUTE_MS).collect();
        let model = CompletionModel {
            name: "dag".into(),
            newest_run: 1,
            allocations: vec![10],
            remaining_ms: vec![row],
            queue_ms: Vec::new(),
            interval_ms: Vec::new(),
            reserve_ms: Vec::new(),
            spread_ms: Vec::new(),
        };
        let amdahl = Amdahl { serial_ms: 0.0, work_ms: 0.0 };
        let (straggler_ms, straggler_outcomes, pace, pace_sums) = (0.0, Vec::new(), 1.0, (0.0, 0.0));
        Prediction {
            model: Some(model),
            amdahl,
            progress,
            slowdown,
            straggler_ms,
            straggler_outcomes,
            pace,
            pace_reserve: 1.0,
            pace_sums,
        }
    }

    /// The last step, at time 0 and progress 0 with a slowdown of 0.9: 90 minutes left
    /// on the 10 slots it sized, predicted (slack 1.2) to finish at 108 minutes.
    fn last_step() -> SloState {
        let remaining = job_at(0.0, 0.9).remaining_ms(10);
        SloState {
            smoothed: Some(10.0),
            target: 10,
            stepped_at: Some(Timestamp(0)),
            reserved_finish: Some(Timestamp((1.2 * remaining) as u64)),
            ..SloState::default()
        }
    }

    #[test]
    fn a_lighter_job_whose_remaining_time_falls_faster_than_the_clock_ran_ahead() {
        let ten_minutes = Timestamp(10 * 60_000);
        // Ten minutes on, 0.2 of the work done: 72 minutes left where the model's pace
        // leaves 80.
        assert!(job_at(0.2, 0.9).ran_ahead(ten_minutes, 1.2, &last_step()));
        // 0.1 done: 81 minutes left, behind the model's 80.
        assert!(!job_at(0.1, 0.9).ran_ahead(ten_minutes, 1.2, &last_step()));
        // Waiting on a straggler, its progress stands still: not ahead however light.
        assert!(!job_at(0.0, 0.9).ran_ahead(Timestamp(20 * 60_000), 1.2, &last_step()));
    }

    #[test]
    fn a_job_as_heavy_as_profiled_or_without_an_earlier_step_is_not_ahead() {
        let ten_minutes = Timestamp(10 * 60_000);
        // Far ahead of the model's pace, but its tasks ran as slowly as profiled or
        // slower: what it gained is not lighter work.
        assert!(!job_at(0.5, 1.0).ran_ahead(ten_minutes, 1.2, &last_step()));
        assert!(!job_at(0.5, 1.3).ran_ahead(ten_minutes, 1.2, &last_step()));
        // No model-based step before this one: nothing to compare with.
        let first = SloState { smoothed: None, ..last_step() };
        assert!(!job_at(0.5, 0.9).ran_ahead(ten_minutes, 1.2, &first));
    }

    #[test]
    fn the_pace_check_reads_how_much_faster_than_its_model_the_run_got_where_it_is() {
        let jockey =
            |floor: f64| Jockey::new(super::super::JockeyConfig { pace_floor: floor, ..Default::default() });
        let model = job_at(0.0, 1.0).model;
        // Ten minutes on 10 slots (100 slot-minutes run) from progress 0 to 0.4: the
        // model expected 40 minutes, at a slowdown of 1.
        let last = SloState {
            smoothed: Some(10.0),
            stepped_at: Some(Timestamp(0)),
            used_slot_ms: 100 * 60_000,
            ..SloState::default()
        };
        let ten_minutes = Timestamp(10 * 60_000);
        let (pace, sums) = jockey(0.2).pace(ten_minutes, &last, model.as_ref(), 0.4, 1.0);
        assert_eq!(sums, (10.0 * MINUTE_MS, 40.0 * MINUTE_MS));
        // Two control intervals at pace 1 weigh in: (10 + 2) / (40 + 2).
        assert!((pace - 12.0 / 42.0).abs() < 1e-12, "{pace}");
        // Within its floor; off, 1 and no sums.
        assert_eq!(jockey(0.5).pace(ten_minutes, &last, model.as_ref(), 0.4, 1.0).0, 0.5);
        assert_eq!(jockey(0.0).pace(ten_minutes, &last, model.as_ref(), 0.4, 1.0), (1.0, (0.0, 0.0)));
        // Tasks twice as slow as profiled: the slowdown has that, the pace only the rest.
        let (slower, _) = jockey(0.2).pace(ten_minutes, &last, model.as_ref(), 0.2, 2.0);
        assert!((slower - 12.0 / 42.0).abs() < 1e-12, "{slower}");
        // Waiting on a straggler (no progress) it is slower than its model, but the
        // ceiling (1) keeps the check from raising predictions.
        assert_eq!(jockey(0.2).pace(ten_minutes, &last, model.as_ref(), 0.0, 1.0).0, 1.0);
        // No earlier model-based step: nothing measured yet.
        let first = SloState { smoothed: None, ..last };
        assert_eq!(jockey(0.2).pace(ten_minutes, &first, model.as_ref(), 0.4, 1.0), (1.0, (0.0, 0.0)));
    }

    #[test]
    fn a_job_sized_at_its_cap_is_sized_again_with_the_slack_at_cap() {
        // 100 minutes left on one slot, 20 on ten (the critical path), in between as 1/a.
        let rows = [100.0, 20.0].map(|m| vec![m * MINUTE_MS; BUCKETS]);
        let model = CompletionModel {
            allocations: vec![1, 10],
            remaining_ms: rows.to_vec(),
            ..job_at(0.0, 1.0).model.unwrap()
        };
        let job = Prediction { model: Some(model), ..job_at(0.0, 1.0) };
        let jockey =
            |slack_at_cap| Jockey::new(super::super::JockeyConfig { slack_at_cap, ..Default::default() });
        let control = Control { slack: 1.2, dead_zone_ms: 0, ..Control::default() };
        let raw = |slack_at_cap, deadline_minutes: f64| {
            let deadline = Timestamp((deadline_minutes * MINUTE_MS) as u64);
            jockey(slack_at_cap).raw_allocation(&control, Timestamp(0), deadline, 10, &job, false)
        };
        // 23 minutes: late at every allocation with the slack (24 at ten slots), so the
        // law gives the cap; without the slack eight slots (22.2 minutes) are on time.
        assert_eq!(raw(None, 23.0), 10);
        assert_eq!(raw(Some(1.0), 23.0), 8);
        // A slack at the cap as large as the law's changes nothing.
        assert_eq!(raw(Some(1.2), 23.0), 10);
        // 30 minutes: seven slots (23.8 minutes, 28.6 with the slack) are on time below
        // the cap, and the slack at the cap is not read.
        assert_eq!(raw(None, 30.0), 7);
        assert_eq!(raw(Some(1.0), 30.0), 7);
    }

    #[test]
    fn the_all_in_test_can_keep_a_share_of_the_reserves() {
        // 50 minutes left at progress 0.5 on 10 slots, 10 minutes of stage reserve,
        // slowdown 1.2: 72 minutes in all, 60 + 6 with half the reserve, 60 without.
        let job = Prediction { straggler_ms: 10.0 * MINUTE_MS, ..job_at(0.5, 1.2) };
        assert!((job.remaining_ms(10) - 72.0 * MINUTE_MS).abs() < 1e-6);
        assert_eq!(job.remaining_ms_with_reserve(10, 1.0), job.remaining_ms(10));
        assert!((job.remaining_ms_with_reserve(10, 0.5) - 66.0 * MINUTE_MS).abs() < 1e-6);
        assert!((job.remaining_ms_with_reserve(10, 0.0) - 60.0 * MINUTE_MS).abs() < 1e-6);
        // Without a model (Amdahl's law) there is no reserve to leave out.
        let amdahl = Prediction { model: None, ..job_at(0.5, 1.2) };
        assert_eq!(amdahl.remaining_ms_with_reserve(10, 0.0), amdahl.remaining_ms(10));
    }

    #[test]
    fn a_decaying_pace_reads_the_recent_intervals_more_than_the_early_ones() {
        let jockey = |decay: f64| {
            Jockey::new(super::super::JockeyConfig {
                pace_floor: 0.2,
                pace_decay: decay,
                ..Default::default()
            })
        };
        let model = job_at(0.0, 1.0).model;
        // Earlier steps summed 30 minutes of run where the model expected 90 (well
        // ahead); then ten minutes on 10 slots from progress 0.4 to 0.45, where the
        // model expected a few (behind).
        let last = SloState {
            smoothed: Some(10.0),
            stepped_at: Some(Timestamp(0)),
            progress: 0.4,
            used_slot_ms: 100 * 60_000,
            pace_clock_ms: 30.0 * MINUTE_MS,
            pace_model_ms: 90.0 * MINUTE_MS,
            ..SloState::default()
        };
        let m = model.as_ref().unwrap();
        let fall = m.remaining_between(0.4, 10) - m.remaining_between(0.45, 10);
        assert!(fall > 0.0 && fall < 10.0 * MINUTE_MS, "{fall}");
        let (ten_minutes, prior) = (Timestamp(10 * 60_000), 2.0 * MINUTE_MS);
        // Since the start: (30 + 10 + 2) / (90 + fall + 2).
        let (since_start, sums) = jockey(1.0).pace(ten_minutes, &last, model.as_ref(), 0.45, 1.0);
        assert_eq!(sums, (40.0 * MINUTE_MS, 90.0 * MINUTE_MS + fall));
        assert!((since_start - (42.0 * MINUTE_MS) / (sums.1 + prior)).abs() < 1e-12, "{since_start}");
        // Halved at every step: (15 + 10 + 2) / (45 + fall + 2), nearer the recent pace.
        let (recent, sums) = jockey(0.5).pace(ten_minutes, &last, model.as_ref(), 0.45, 1.0);
        assert_eq!(sums, (25.0 * MINUTE_MS, 45.0 * MINUTE_MS + fall));
        assert!((recent - (27.0 * MINUTE_MS) / (sums.1 + prior)).abs() < 1e-12, "{recent}");
        assert!(recent > since_start + 0.05, "{recent} {since_start}");
    }

    #[test]
    fn the_pace_scales_the_reserves_only_when_asked() {
        // 50 minutes left at progress 0.5 on 10 slots, and 10 minutes of stage reserve.
        let job = Prediction { straggler_ms: 10.0 * MINUTE_MS, pace: 0.5, ..job_at(0.5, 1.0) };
        assert_eq!(job.remaining_ms(10), 35.0 * MINUTE_MS);
        let paced = Prediction { pace_reserve: 0.5, ..job };
        assert_eq!(paced.remaining_ms(10), 30.0 * MINUTE_MS);
    }
}
