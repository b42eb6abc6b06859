//! MRM on the live cluster: quotes answered in credits for clients, a submit that buys a
//! deadline (offer, admission and charge in one core step, so no other event can come
//! between the feasibility check and the promise), and the predicted finish of admitted
//! deadline jobs for status.

use std::collections::HashMap;

use slotmarket_common::ids::{AccountId, JobId};
use slotmarket_common::money::{Credits, MICROS_PER_CREDIT};
use slotmarket_common::protocol::{
    ChoiceRefusal, DeadlineChoice, ErrorKind, ErrorReply, Purchase, QuoteInfo, QuotePoint, Response,
    SLOT_MS_PER_CREDIT,
};
use slotmarket_common::spec::{JobSpec, SlotKind, format_rfc3339};
use slotmarket_common::time::Timestamp;

use super::command::Persist;
use super::quote::{AdmissionMode, Choice, Offer, Quote, QuoteError};
use super::reactor::{self, Ctx};
use super::{Caller, Core, RequestId};

/// The price in credits of `price_ms` slot-milliseconds of curve price, rounded up to
/// the micro-credit (and at least one: a deadline is never free).
pub fn price_credits(price_ms: f64) -> Credits {
    let micros = (price_ms / SLOT_MS_PER_CREDIT * MICROS_PER_CREDIT as f64).ceil();
    Credits((micros as i64).max(1))
}

/// The slot-milliseconds of curve price `credits` pays for (negative counts as zero).
pub fn credits_slot_ms(credits: Credits) -> f64 {
    credits.micros().max(0) as f64 * SLOT_MS_PER_CREDIT / MICROS_PER_CREDIT as f64
}

/// The message a quote or a choice gets while `[admission] mode = "none"`.
const ADMISSION_OFF: &str = "MRM admission is off on this master ([admission] mode = \"none\"); submit \
     without --earliest/--deadline/--max-price, or ask the administrator to set mode = \"mrm\"";

impl Core {
    /// The `[admission]` settings this core runs with.
    pub fn admission(&self) -> &super::AdmissionSettings {
        &self.config.admission
    }

    /// The quote for `spec` at `now` as a client sees it (prices in credits), or why
    /// there is none: admission off, a job that cannot be estimated, a cluster without
    /// slots of a kind it needs.
    pub fn quote_info(&mut self, now: Timestamp, spec: &JobSpec) -> Result<QuoteInfo, ErrorReply> {
        if self.config.admission.mode == AdmissionMode::None {
            return Err(ErrorReply::new(ErrorKind::BadRequest, ADMISSION_OFF));
        }
        if let Err(e) = slotmarket_common::spec::validate(spec) {
            return Err(ErrorReply::new(ErrorKind::BadRequest, e.to_string()));
        }
        let now = self.latest.max(now);
        let quote =
            self.quote(now, spec).map_err(|e| ErrorReply::new(ErrorKind::BadRequest, e.to_string()))?;
        Ok(quote_info(now, &quote, self.config.admission.pi_level))
    }

    /// When each admitted deadline job is expected to finish under the admission model at
    /// `now` (remaining work under its estimate, rescaled by how its tasks ran, in EDF
    /// order on the cluster's slots). Empty while admission is off.
    pub fn predicted_finishes(&mut self, now: Timestamp) -> HashMap<JobId, Timestamp> {
        if self.config.admission.mode == AdmissionMode::None {
            return HashMap::new();
        }
        let now = self.latest.max(now);
        let settings = self.config.admission;
        self.market.predicted_finishes(now, &self.state, &settings)
    }

    /// `SubmitChoosing`: checks the caller and the spec, prices the choice against the
    /// admitted jobs, and either refuses it with the best alternative or admits the job
    /// with the deadline bought and charges its account, all in this one step.
    pub(super) fn on_choice_submitted(
        &mut self,
        cx: &mut Ctx,
        request: RequestId,
        caller: &Caller,
        spec: JobSpec,
        choice: DeadlineChoice,
    ) {
        let reply = |cx: &mut Ctx, response| cx.reply(request, response);
        if self.config.admission.mode == AdmissionMode::None {
            return reply(cx, Response::error(ErrorKind::BadRequest, ADMISSION_OFF));
        }
        let account = match reactor::check_submit(&self.state, cx, caller, &spec) {
            Ok(account) => account,
            Err((kind, message)) => return reply(cx, Response::error(kind, message)),
        };
        if spec.deadline.is_some() {
            let message = "the spec names a deadline and the submit buys one; remove `deadline` from the \
                           spec or submit without a choice";
            return reply(cx, Response::error(ErrorKind::BadRequest, message));
        }
        let balance = self.state.accounts.get(&account).map_or(Credits::ZERO, |a| a.balance());
        let offer = match self.priced_choice(cx.now, &spec, choice, &account, balance) {
            Ok(offer) => offer,
            Err(response) => return reply(cx, *response),
        };
        let price = price_credits(offer.price_ms);
        let job = JobId(self.state.next_job);
        // Charged in memory first: if the ledger refuses, nothing is admitted.
        let entry = match self.state.accounts.purchase_deadline(&account, price, job, offer.deadline, cx.now)
        {
            Ok(entry) => entry,
            Err(e) => return reply(cx, Response::error(ErrorKind::BadRequest, e.to_string())),
        };
        let admitted = reactor::admit(&mut self.state, cx, caller, account, spec, Some(offer.deadline));
        debug_assert_eq!(admitted, job, "the charge names the id admission allocates");
        // After `JobAdmitted`, in the same batch: one store transaction holds both.
        cx.persist(Persist::Ledger(entry));
        if let Some(j) = self.state.jobs.get_mut(&job) {
            j.purchase = Some((price, price));
        }
        let purchase = Purchase { job, deadline: offer.deadline, price, earliest: offer.earliest };
        reply(cx, Response::Purchased(purchase));
    }

    /// The offer `choice` buys for `spec` within `balance`, or the refusal to answer.
    fn priced_choice(
        &mut self,
        now: Timestamp,
        spec: &JobSpec,
        choice: DeadlineChoice,
        account: &AccountId,
        balance: Credits,
    ) -> Result<Offer, Box<Response>> {
        let settings = self.config.admission;
        let asked = match choice {
            DeadlineChoice::Earliest => Choice::Earliest,
            DeadlineChoice::Deadline(at) => Choice::Deadline(at),
            DeadlineChoice::MaxPrice(max) => Choice::MaxPrice(credits_slot_ms(max.min(balance))),
        };
        let result = self.market.quote(now, &self.state, &settings, spec, asked);
        let (_, offer) = match result {
            Ok(found) => found,
            Err(QuoteError::Infeasible { asked, .. }) => {
                let reason = format!("deadline {} is not feasible now", format_rfc3339(asked));
                return Err(Box::new(self.refusal(now, spec, reason, balance)));
            }
            Err(QuoteError::Unaffordable { max_ms, floor_ms }) => {
                // The most the buyer allowed as they wrote it: priced back from slot-ms it
                // would round up (a maximum of 0 read as 0.000001).
                let max = match choice {
                    DeadlineChoice::MaxPrice(max) => max.min(balance),
                    _ => price_credits(max_ms),
                };
                let floor = price_credits(floor_ms);
                let reason = format!(
                    "no deadline costs at most {max} (the maximum asked or account {account}'s balance of \
                     {balance}); the cheapest costs {floor}"
                );
                return Err(Box::new(self.refusal(now, spec, reason, balance)));
            }
            Err(e) => return Err(Box::new(Response::error(ErrorKind::BadRequest, e.to_string()))),
        };
        let price = price_credits(offer.price_ms);
        if price > balance {
            let reason = format!(
                "the deadline {} costs {price} but account {account} holds {balance}",
                format_rfc3339(offer.deadline)
            );
            return Err(Box::new(self.refusal(now, spec, reason, balance)));
        }
        Ok(offer)
    }

    /// A refusal carrying the best alternatives now: the earliest feasible finish with
    /// its price, and the earliest deadline `balance` buys; the reason names both.
    fn refusal(&mut self, now: Timestamp, spec: &JobSpec, reason: String, balance: Credits) -> Response {
        let settings = self.config.admission;
        let earliest =
            self.market.quote(now, &self.state, &settings, spec, Choice::Earliest).ok().map(|(_, offer)| {
                QuotePoint { deadline: offer.deadline, price: price_credits(offer.price_ms) }
            });
        let within = Choice::MaxPrice(credits_slot_ms(balance));
        let affordable = self
            .market
            .quote(now, &self.state, &settings, spec, within)
            .ok()
            .map(|(_, offer)| QuotePoint { deadline: offer.deadline, price: price_credits(offer.price_ms) })
            .filter(|point| point.price <= balance);
        let mut reason = reason;
        if let Some(point) = earliest {
            reason.push_str(&format!(
                "; the earliest feasible finish now is {} at {}",
                format_rfc3339(point.deadline),
                point.price
            ));
        }
        match affordable {
            Some(point) => reason.push_str(&format!(
                "; the balance of {balance} buys {} at {}",
                format_rfc3339(point.deadline),
                point.price
            )),
            None => reason.push_str(&format!("; the balance of {balance} buys no deadline")),
        }
        Response::ChoiceRefused(ChoiceRefusal { reason, earliest, affordable })
    }
}

/// `quote` as the wire carries it.
fn quote_info(now: Timestamp, quote: &Quote, pi_level: f64) -> QuoteInfo {
    let point =
        |(deadline, price_ms): (Timestamp, f64)| QuotePoint { deadline, price: price_credits(price_ms) };
    let task_ms = |kind| {
        let phase = quote.estimate.phase(kind);
        (phase.task_ms.round() as u64, phase.task_upper_ms.round() as u64)
    };
    let earliest_price = quote.curve.first().map_or(quote.work_ms, |&(_, price)| price);
    QuoteInfo {
        at: now,
        work_ms: quote.estimate.work_ms().round() as u64,
        work_upper_ms: quote.work_ms.round() as u64,
        pi_level,
        map_task_ms: task_ms(SlotKind::Map),
        reduce_task_ms: task_ms(SlotKind::Reduce),
        earliest: point((quote.earliest, earliest_price)),
        curve: quote.curve.iter().copied().map(point).collect(),
        admitted: u32::try_from(quote.admitted).unwrap_or(u32::MAX),
        assumed_slots: quote.assumed_slots.map(|[map, reduce]| (map, reduce)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_convert_at_one_credit_per_slot_hour_rounding_up() {
        assert_eq!(price_credits(3_600_000.0), Credits::from_credits(1));
        assert_eq!(price_credits(1.0), Credits(1), "a fraction of a micro-credit rounds up");
        assert_eq!(price_credits(0.0), Credits(1), "never free");
        assert_eq!(credits_slot_ms(Credits::from_credits(2)), 7_200_000.0);
        assert_eq!(credits_slot_ms(Credits(-5)), 0.0);
    }
}
