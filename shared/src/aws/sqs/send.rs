//! Many jobs to the queue in as few `SendMessageBatch` calls as SQS's limits
//! allow, each job's outcome its own: what an ingest batch's outbox sends.

use std::time::Duration;

use aws_sdk_sqs::types::SendMessageBatchRequestEntry;

use super::{err, SqsCallError, SqsQueue};
use crate::queue::{DeliveryJob, QueueError};

impl SqsQueue {
    /// One `SendMessageBatch` call: the entries SQS refused, by index in
    /// `entries`, each with its error (SQS's own fault is worth retrying
    /// later, the sender's is not).
    pub(super) async fn send_entries(
        &self,
        url: &str,
        entries: Vec<SendMessageBatchRequestEntry>,
    ) -> Result<Vec<(usize, QueueError)>, SqsCallError> {
        let count = entries.len();
        let out = self
            .client
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(SqsCallError::of)?;
        let refused = out.failed().iter().map(|failed| {
            let fail = match failed.sender_fault() {
                true => err,
                false => QueueError::unavailable,
            };
            let detail = format!(
                "SendMessageBatch refused {} of {count} messages: {}",
                out.failed().len(),
                failed.message().unwrap_or(failed.code())
            );
            // Entry ids are their index (`entry`); an id SQS made up fails the first.
            (failed.id().parse().unwrap_or(0), fail(detail))
        });
        Ok(refused.collect())
    }

    /// Sends `jobs`, due now, in as few `SendMessageBatch` calls as SQS
    /// allows ([`batches`]), `concurrency` calls at a time; the outcome of
    /// each job, in order. A call that fails fails each of its jobs; an entry
    /// SQS refuses fails only its own job. Ordered jobs go to the FIFO queue
    /// when there is one, one call after another, so its lines get them in
    /// the order of `jobs`.
    pub async fn send_all(
        &self,
        jobs: &[DeliveryJob],
        concurrency: usize,
    ) -> Vec<Result<(), QueueError>> {
        let Some(ordered) = self.ordered.clone() else {
            return self
                .send_to(&self.queue_url, jobs, concurrency, false)
                .await;
        };
        let (line, rest): (Vec<usize>, Vec<usize>) =
            (0..jobs.len()).partition(|&i| jobs[i].ordered);
        if line.is_empty() {
            return self
                .send_to(&self.queue_url, jobs, concurrency, false)
                .await;
        }
        let pick = |at: &[usize]| at.iter().map(|&i| jobs[i].clone()).collect::<Vec<_>>();
        let (line_jobs, rest_jobs) = (pick(&line), pick(&rest));
        let (in_line, others) = futures_util::join!(
            self.send_to(&ordered.url, &line_jobs, 1, true),
            self.send_to(&self.queue_url, &rest_jobs, concurrency, false),
        );
        let mut outcomes: Vec<Option<Result<(), QueueError>>> = jobs.iter().map(|_| None).collect();
        for (at, outcome) in line
            .into_iter()
            .zip(in_line)
            .chain(rest.into_iter().zip(others))
        {
            outcomes[at] = Some(outcome);
        }
        outcomes
            .into_iter()
            .map(|o| o.expect("one outcome per job"))
            .collect()
    }

    /// [`Self::send_all`] to one queue: the FIFO one (`fifo`) or the standard one.
    async fn send_to(
        &self,
        url: &str,
        jobs: &[DeliveryJob],
        concurrency: usize,
        fifo: bool,
    ) -> Vec<Result<(), QueueError>> {
        use futures_util::StreamExt;
        let mut outcomes = Vec::with_capacity(jobs.len());
        // (job index, entry) of the jobs that make an entry at all.
        let mut entries = Vec::with_capacity(jobs.len());
        for (i, job) in jobs.iter().enumerate() {
            let entry = match fifo {
                true => Self::line_entry(0, job),
                false => Self::entry(0, job, Duration::ZERO),
            };
            match entry {
                Ok(entry) => {
                    entries.push((i, entry));
                    outcomes.push(Ok(()));
                }
                Err(e) => outcomes.push(Err(e)),
            }
        }
        let sizes = entries
            .iter()
            .map(|(_, e)| entry_size(e))
            .collect::<Vec<_>>();
        let calls = batches(&sizes).into_iter().map(|range| {
            let (jobs, batch): (Vec<usize>, Vec<_>) = entries[range]
                .iter()
                .enumerate()
                .map(|(id, (job, entry))| {
                    let mut entry = entry.clone();
                    entry.id = id.to_string();
                    (*job, entry)
                })
                .unzip();
            async move { (self.send_entries(url, batch).await, jobs) }
        });
        let sent = futures_util::stream::iter(calls)
            .buffer_unordered(concurrency.max(1))
            .collect::<Vec<_>>()
            .await;
        for (outcome, jobs) in sent {
            match outcome {
                Ok(refused) => {
                    for (at, e) in refused {
                        if let Some(&job) = jobs.get(at) {
                            outcomes[job] = Err(e);
                        }
                    }
                }
                Err(failure) => {
                    for job in jobs {
                        outcomes[job] = Err(failure.error());
                    }
                }
            }
        }
        outcomes
    }
}

/// `SendMessageBatch` calls in flight at once for an ingest batch's jobs:
/// a Lambda batch of events is answered sooner.
pub(crate) const INGEST_SENDS: usize = 4;
/// ... and for [`DeliveryQueue::enqueue`](crate::queue::DeliveryQueue::enqueue)
/// (an unpark, or an event posted to `webhooks-local`): one call after
/// another, so a subscription's parked jobs (up to 100 at a time) go back
/// without a burst that competes with the delivery worker's own polls. moto's
/// server, whose long polls scan the queue under its lock, stalled for
/// minutes under concurrent unparks (local/tests/it/isolation.rs).
pub(crate) const ENQUEUE_SENDS: usize = 1;
/// SQS's limits on one `SendMessageBatch`: entries, and bytes of all bodies
/// and attributes together.
const MAX_BATCH_ENTRIES: usize = 10;
const MAX_BATCH_BYTES: usize = 262_144;

/// What an entry counts toward [`MAX_BATCH_BYTES`]: its body, and each
/// attribute's name, type and value.
fn entry_size(entry: &SendMessageBatchRequestEntry) -> usize {
    let attributes = entry.message_attributes().map_or(0, |a| {
        a.iter()
            .map(|(name, v)| {
                name.len() + v.data_type().len() + v.string_value().map_or(0, str::len)
            })
            .sum()
    });
    entry.message_body().len() + attributes
}

/// Consecutive entries grouped into calls of at most [`MAX_BATCH_ENTRIES`]
/// and [`MAX_BATCH_BYTES`] (an entry over the limit alone, for SQS to refuse).
fn batches(sizes: &[usize]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, &size) in sizes.iter().enumerate() {
        if i > start && (i - start == MAX_BATCH_ENTRIES || bytes + size > MAX_BATCH_BYTES) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lengths(sizes: &[usize]) -> Vec<usize> {
        batches(sizes).into_iter().map(|r| r.len()).collect()
    }

    #[test]
    fn batches_hold_ten_entries_at_most() {
        assert_eq!(lengths(&[100; 25]), [10, 10, 5]);
        assert_eq!(lengths(&[100; 10]), [10]);
        assert!(batches(&[]).is_empty());
    }

    #[test]
    fn batches_hold_256_kib_at_most() {
        let third = MAX_BATCH_BYTES / 3;
        assert_eq!(lengths(&[third; 7]), [3, 3, 1]);
        assert_eq!(lengths(&[third + 1; 3]), [2, 1]);
        // An entry over the limit goes alone, for SQS to refuse it alone.
        assert_eq!(lengths(&[10, MAX_BATCH_BYTES + 1, 10]), [1, 1, 1]);
        let ranges = batches(&[MAX_BATCH_BYTES, 1]);
        assert_eq!(ranges, [0..1, 1..2]);
    }
}
