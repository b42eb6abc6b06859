//! What one control step reads of a job's remaining time: the completion model C(p, a) at
//! the job's progress (or Amdahl's law while no model is built), scaled by the job's
//! slowdown, with the straggler reserves added (§4.1–4.3 as the controller uses them), and
//! the raw allocation a control step picks from it.

use std::borrow::Cow;

use slotmarket_common::time::Timestamp;

use super::super::{JobInfo, SchedView};
use super::{Amdahl, CompletionModel, Control, JobProfile, Jockey, Utility};

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
}

impl Prediction {
    /// Remaining milliseconds with `a` slots.
    pub(super) fn remaining_ms(&self, a: u32) -> f64 {
        self.slowdown
            * match &self.model {
                Some(m) => m.remaining_between(self.progress, a) + self.reserve_ms(m),
                None => self.amdahl.remaining(a),
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
        m.spread_between(self.progress, a).iter().map(|r| self.slowdown * (r + reserve)).collect()
    }

    /// The predicted finish's interval with `a` slots, as offsets from now in ms.
    pub(super) fn interval_ms(&self, a: u32) -> Option<(f64, f64)> {
        let (lo, hi) = self.model.as_ref()?.interval(self.progress, a);
        Some((self.slowdown * lo, self.slowdown * hi))
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
    ) -> Prediction {
        let model = self.model_for(profile, total).cloned();
        if let Some(model) = &model {
            for (stage, &q) in profile.stages.iter_mut().zip(&model.queue_ms) {
                stage.queue_ms = q;
            }
        }
        let done: Vec<f64> =
            job.stages().map(|s| f64::from(s.completed) / f64::from(s.tasks.max(1))).collect();
        let left: Vec<u32> = job.stages().map(|s| s.tasks.saturating_sub(s.completed)).collect();
        let (reserve, quantile) = (self.config.stage_reserve, self.config.stage_reserve_quantile);
        Prediction {
            progress: self.config.indicator.progress(profile, &done),
            amdahl: Amdahl::of(profile, &done),
            slowdown: self.slowdown(now, view, profile, job),
            straggler_ms: profile.straggler_reserve_ms(&left, reserve, quantile),
            model,
        }
    }

    /// The job's own utility curve, when its spec gives one, else the policy's.
    pub(super) fn control_for(&self, job: &JobInfo<'_>) -> Cow<'_, Control> {
        match &job.spec().utility {
            Some(curve) => {
                Cow::Owned(Control { utility: Utility::from(curve), ..self.config.control.clone() })
            }
            None => Cow::Borrowed(&self.config.control),
        }
    }

    /// The raw allocation (§4.3): the smallest number of slots up to `cap` that maximises
    /// the predicted finish's utility, or its expected utility over the model's spread
    /// (`expected_utility`). Every allocation is a candidate, not only the modelled ones:
    /// picking from a grid of 15 % steps would round each raw allocation up by up to 15 %.
    pub(super) fn raw_allocation(
        &self,
        control: &Control,
        now: Timestamp,
        deadline: Timestamp,
        cap: u32,
        prediction: &Prediction,
    ) -> u32 {
        let grid: Vec<u32> = (1..=cap).collect();
        let (now_ms, deadline_ms) = (now.0 as i64, deadline.0 as i64);
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
    }
}
