//! What one poll of the delivery queue leased: one lease per message.
//!
//! A poll makes several `ReceiveMessage` calls at once, and two of them can
//! be handed the same message: moto's emulator does it when calls overlap
//! (its receive is not atomic), and SQS, at-least-once, may do it too. Two
//! leases of one message are two deliveries of one notification, both
//! first attempts as far as they can tell, so the receiver gets it twice
//! (docs/decisions/delivery.md, 2026-11-28).

use std::collections::HashMap;

use crate::queue::Lease;

/// One message as one `ReceiveMessage` call leased it.
pub(super) struct Received {
    /// SQS's id of the message, the same in every copy of it.
    pub message_id: Option<String>,
    pub lease: Lease,
}

/// The poll's leases, one per message, in the order they came. Of a
/// message leased more than once, the copy kept is the one received last
/// (the highest receive count: the receipt handle SQS deletes by), and the
/// poll's copies count as one receive in its attempt number.
pub(super) fn once_each(received: Vec<Received>) -> Vec<Lease> {
    let mut leases: Vec<Lease> = Vec::with_capacity(received.len());
    // Where each message's lease is in `leases`, and how many copies came.
    let mut seen: HashMap<String, (usize, u32)> = HashMap::new();
    for Received { message_id, lease } in received {
        let Some(id) = message_id else {
            leases.push(lease);
            continue;
        };
        match seen.get_mut(&id) {
            None => {
                seen.insert(id, (leases.len(), 1));
                leases.push(lease);
            }
            Some((at, copies)) => {
                *copies += 1;
                tracing::debug!(notification = %lease.job.id, message_id = %id, "one message leased twice in a poll: delivered once");
                if lease.attempt > leases[*at].attempt {
                    leases[*at] = lease;
                }
            }
        }
    }
    for (at, copies) in seen.into_values() {
        let lease = &mut leases[at];
        let first = lease.job.attempts.saturating_add(1);
        lease.attempt = lease.attempt.saturating_sub(copies - 1).max(first);
    }
    leases
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::DeliveryJob;

    fn received(message: &str, notification: &str, count: u32, receipt: &str) -> Received {
        let job = DeliveryJob::new(notification.into(), "o".into(), "s".into(), "{}".into(), 1);
        Received {
            message_id: Some(message.into()),
            lease: Lease {
                attempt: job.attempts + count,
                job,
                receipt: receipt.into(),
                slot: None,
            },
        }
    }

    #[test]
    fn a_message_leased_by_two_calls_of_a_poll_is_delivered_once_by_its_latest_receipt() {
        let leases = once_each(vec![
            received("m1", "n1", 1, "r1-first"),
            received("m2", "n2", 1, "r2"),
            received("m1", "n1", 2, "r1-second"),
        ]);
        let got: Vec<_> = leases
            .iter()
            .map(|l| (l.job.id.as_str(), l.receipt.as_str(), l.attempt))
            .collect();
        // The copies count as one receive: still the first attempt.
        assert_eq!(got, [("n1", "r1-second", 1), ("n2", "r2", 1)]);
    }

    #[test]
    fn copies_count_as_one_receive_whatever_count_each_shows() {
        // moto copies the message after both calls counted it: 2 and 2.
        let leases = once_each(vec![
            received("m1", "n1", 2, "a"),
            received("m1", "n1", 2, "b"),
        ]);
        assert_eq!(leases.len(), 1);
        assert_eq!(leases[0].attempt, 1);
        // Received once before (a lease that ran out), then twice at once: the second.
        let leases = once_each(vec![
            received("m1", "n1", 3, "a"),
            received("m1", "n1", 2, "b"),
        ]);
        assert_eq!((leases[0].receipt.as_str(), leases[0].attempt), ("a", 2));
    }

    #[test]
    fn distinct_messages_of_one_notification_are_all_kept() {
        // A deferral's new message beside the old one is the queue's to
        // settle (delivery::superseded), not the poll's.
        let leases = once_each(vec![
            received("m1", "n1", 1, "a"),
            received("m2", "n1", 1, "b"),
        ]);
        assert_eq!(leases.len(), 2);
    }
}
