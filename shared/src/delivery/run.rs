//! One job on its way through [`deliver`](super): what every step reads,
//! its attempt numbered (from the history for a job kept in its line).

use crate::app::App;
use crate::history::{NotificationSummary, Trigger};
use crate::queue::{DeliveryJob, DeliveryQueue, Lease, StoreOrQueueError};

/// One job on its way through the pipeline: what every step reads.
pub struct Run<'a> {
    /// The service's state: configuration, store, history, callbacks, clock.
    pub app: &'a App,
    /// The queue the job was leased from, where it is settled.
    pub queue: &'a dyn DeliveryQueue,
    /// The job and its attempt number (numbered from the history for a job
    /// kept in its line).
    pub lease: &'a Lease,
    /// When the delivery started (epoch ms).
    pub now: i64,
    /// One draw in `[0, 1]`, spreading this job's waits and retry.
    pub random: f64,
    /// MANUAL for the first attempt of a resend or recover, SCHEDULED otherwise.
    pub trigger: Trigger,
    /// The notification's summary, read once for a job kept in its line.
    pub summary: Option<&'a NotificationSummary>,
}

impl<'a> Run<'a> {
    /// A delivery of `lease` starting now, with a fresh draw; numbered as
    /// its `line` says.
    pub fn new(
        app: &'a App,
        queue: &'a dyn DeliveryQueue,
        lease: &'a Lease,
        line: &'a Line,
    ) -> Self {
        let lease = line.numbered.as_ref().unwrap_or(lease);
        let random =
            u32::from_le_bytes(crate::secret::random_bytes::<4>()) as f64 / u32::MAX as f64;
        let trigger = match lease.attempt <= 1 {
            true => lease.job.trigger,
            false => Trigger::Scheduled,
        };
        Run {
            now: app.clock.now_ms(),
            app,
            queue,
            lease,
            random,
            trigger,
            summary: line.summary.as_ref(),
        }
    }

    /// The job being delivered.
    pub fn job(&self) -> &'a DeliveryJob {
        &self.lease.job
    }

    /// A person's resend or recover (its first attempt), not the schedule.
    pub fn manual(&self) -> bool {
        self.trigger == Trigger::Manual
    }
}

/// A job's place in its line: for a lease kept in one (an ordered
/// subscription's, on the SQS FIFO queue:
/// [`DeliveryQueue::attempts_from_history`]), its notification's summary,
/// read once, and the lease numbered from it ([`in_line`]); none for
/// another.
#[derive(Default)]
pub struct Line {
    numbered: Option<Lease>,
    summary: Option<NotificationSummary>,
}

impl Line {
    /// The line of `lease`, if it is kept in one; only the history's read
    /// can fail.
    pub async fn read(
        app: &App,
        queue: &dyn DeliveryQueue,
        lease: &Lease,
    ) -> Result<Line, StoreOrQueueError> {
        if !queue.attempts_from_history(lease) {
            return Ok(Line::default());
        }
        let summary = app.history.summary_of(&lease.job).await?;
        Ok(Line::of(lease, summary))
    }

    /// The line of `lease`, kept in one, with its notification's `summary`
    /// as read now (none recorded, or expired).
    fn of(lease: &Lease, summary: Option<NotificationSummary>) -> Line {
        Line {
            numbered: Some(in_line(lease, summary.as_ref())),
            summary,
        }
    }
}

/// The lease of a job kept in its line (SQS FIFO), its attempt numbered
/// from the history: the attempts the summary counts now, less those it
/// counted when the job was made ([`DeliveryJob::history_attempts`]), plus
/// one. Every attempt is recorded before its lease is settled, so the count
/// is never behind (the read is strongly consistent); a deferral records
/// nothing, so it counts nothing, unlike SQS's receive count. Without a
/// summary (none recorded, or expired), the queue's own count stands. A
/// resend or recover received for the first time (the queue's count is 1)
/// is its first attempt, whatever the notification's earlier message (ahead
/// of it in the line) attempted since it was queued; its retries count
/// those too.
///
/// [`DeliveryJob::history_attempts`]: crate::queue::DeliveryJob::history_attempts
fn in_line(lease: &Lease, summary: Option<&NotificationSummary>) -> Lease {
    let first_manual = lease.job.trigger == Trigger::Manual && lease.attempt <= 1;
    let attempt = match summary {
        Some(_) if first_manual => 1,
        Some(s) => s.attempts.saturating_sub(lease.job.history_attempts) + 1,
        None => lease.attempt,
    };
    Lease {
        attempt,
        ..lease.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::NotificationStatus;
    use crate::queue::DeliveryJob;

    fn summary(attempts: u32) -> NotificationSummary {
        NotificationSummary {
            id: "n".into(),
            subscription_id: "s".into(),
            event_id: "e".into(),
            event: String::new(),
            created_at: 1,
            status: NotificationStatus::Pending,
            attempts,
            last_attempt_at: None,
            next_attempt_at: None,
            last_http_status: None,
            last_code: None,
        }
    }

    fn lease(trigger: Trigger, history_attempts: u32, received: u32) -> Lease {
        let mut job = DeliveryJob::new("n".into(), "o".into(), "s".into(), "{}".into(), 1);
        job.trigger = trigger;
        job.ordered = true;
        job.history_attempts = history_attempts;
        Lease {
            job,
            attempt: received,
            receipt: "fifo:r".into(),
            slot: None,
        }
    }

    #[test]
    fn a_lease_in_line_is_numbered_from_the_history_not_the_receive_count() {
        // Received 7 times (deferrals among them), 2 attempts recorded: the third.
        let l = in_line(&lease(Trigger::Scheduled, 0, 7), Some(&summary(2)));
        assert_eq!(l.attempt, 3);
        assert_eq!(l.receipt, "fifo:r");
        // A resend queued after 4 attempts, 1 made since: its second.
        assert_eq!(
            in_line(&lease(Trigger::Manual, 4, 3), Some(&summary(5))).attempt,
            2
        );
        // Its first receive is its first attempt, whatever was attempted meanwhile.
        assert_eq!(
            in_line(&lease(Trigger::Manual, 4, 1), Some(&summary(6))).attempt,
            1
        );
        // No summary: the queue's count stands.
        assert_eq!(in_line(&lease(Trigger::Scheduled, 0, 2), None).attempt, 2);
    }
}
