//! The sequences: operations and callback answers drawn from a seed, and
//! their replayable text form.

use std::fmt;

/// Subscription slots: a slot is one callback uri (`/s<slot>` on the
/// runtime's receiver), created, re-posted and deleted by the operations.
pub const SLOTS: usize = 3;
/// Departments: an event matches the subscriptions of its department.
pub const DEPARTMENTS: u8 = 2;

/// How the callback answers one attempt of a notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `200`.
    Ok,
    /// `500`.
    Fail,
    /// `429` or `503` with `Retry-After: 1`: a receiver's pause.
    Pause(u16),
    /// `410 Gone`: the subscription is blacklisted.
    Gone,
    /// No answer within the delivery timeout.
    Slow,
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Ok => write!(f, "200"),
            Answer::Fail => write!(f, "500"),
            Answer::Pause(status) => write!(f, "{status}+retry-after"),
            Answer::Gone => write!(f, "410"),
            Answer::Slow => write!(f, "slow"),
        }
    }
}

/// What a create asks for besides the uri and filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Plain,
    Ordered,
    /// `"ordered": false`: turns ordering off on a re-post.
    Unordered,
    Rate(u32),
    /// `"rateLimit": 0`: removes the limit on a re-post.
    NoRate,
    /// `"rateLimit": 1001`: refused.
    BadRate,
    /// Only a filter of another organization: refused.
    Foreign,
    /// `"payloadFilter": {"message.to": "<recipient k>"}`: only the events to recipient `k`.
    Filter(u8),
    /// `"payloadFilter": null`: removes it on a re-post.
    NoFilter,
    /// `"signatureScheme": "v1a"`: ed25519 signatures; on a re-post of a `v1` subscription, a
    /// rotation to an ed25519 key, the old secret signing beside it (the default grace, a day).
    V1a,
}

/// What a create asks of `retrySchedule`, beside its [`Kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retries {
    /// Absent: a new subscription follows the deployment's schedule, a re-post keeps its own.
    Absent,
    /// `n` waits of 1 s: `n + 1` attempts a run.
    Own(u8),
    /// `null`: the deployment's schedule again.
    Deployment,
    /// `["13h"]`: refused (a wait past 12 h).
    Refused,
}

/// A create's `customHeaders`: `None` leaves it out (kept), `Some(None)` sends `null`
/// (removed), `Some(Some(k))` sets `{HEADER: header_value(k)}`.
pub type Headers = Option<Option<u8>>;

/// The one custom header the sequences set.
pub const HEADER: &str = "X-Differential";

/// Value `k` of [`HEADER`]: 16 characters or more, so its masked form shows its end.
pub fn header_value(k: u8) -> String {
    format!("differential-value-{k}")
}

/// Recipients an event may be to, and a payload filter may ask for.
pub const RECIPIENTS: u8 = 2;

/// Recipient `k`'s number.
pub fn recipient(k: u8) -> String {
    format!("+1555010{k}")
}

/// One event of an [`Op::Events`]: its label (also its message id), and the
/// answers the callback of each slot gives to its notification's attempts
/// (then `200`).
#[derive(Clone, Debug)]
pub struct Event {
    pub id: u32,
    pub dep: u8,
    /// An inbound message (matches its department's subscriptions); else
    /// an outbound one, which matches none.
    pub inbound: bool,
    /// Its message's recipient ([`recipient`]), which payload filters look at.
    pub to: u8,
    pub answers: Vec<(usize, Vec<Answer>)>,
}

impl Event {
    /// Its event id, message id and label: `e<id>`.
    pub fn label(&self) -> String {
        format!("e{}", self.id)
    }
}

#[derive(Clone, Debug)]
pub enum Op {
    /// `POST /webhooksubscription`: a create, or a re-post of the slot's uri.
    Create {
        slot: usize,
        kind: Kind,
        dep: u8,
        retries: Retries,
        headers: Headers,
    },
    /// Events, accepted in this order: one alone, or a burst (posted one
    /// after another without waiting for their deliveries).
    Events(Vec<Event>),
    Get {
        slot: usize,
    },
    List,
    Delete {
        slot: usize,
    },
    /// Resend the notification of event `event` to the slot's subscription.
    Resend {
        slot: usize,
        event: u32,
    },
    /// Recover the slot's FAILED notifications of the last hour.
    Recover {
        slot: usize,
    },
    /// Another organization gets, deletes and recovers the slot's subscription.
    Foreign {
        slot: usize,
    },
    /// An event, and the slot's subscription deleted as soon as the first
    /// attempt of its notification arrives (before any retry is due).
    DeleteInFlight {
        slot: usize,
        event: Event,
    },
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Create {
                slot,
                kind,
                dep,
                retries,
                headers,
            } => {
                write!(f, "create s{slot} dep-{dep}")?;
                match retries {
                    Retries::Absent => {}
                    Retries::Own(n) => write!(f, " retrySchedule=1s*{n}")?,
                    Retries::Deployment => write!(f, " retrySchedule=null")?,
                    Retries::Refused => write!(f, " retrySchedule=13h")?,
                }
                match headers {
                    None => {}
                    Some(None) => write!(f, " customHeaders=null")?,
                    Some(Some(k)) => write!(f, " customHeaders={HEADER}:{}", header_value(*k))?,
                }
                match kind {
                    Kind::Plain => Ok(()),
                    Kind::Ordered => write!(f, " ordered"),
                    Kind::Unordered => write!(f, " ordered=false"),
                    Kind::Rate(n) => write!(f, " rateLimit={n}"),
                    Kind::NoRate => write!(f, " rateLimit=0"),
                    Kind::BadRate => write!(f, " rateLimit=1001"),
                    Kind::Foreign => write!(f, " filter-of-org-2"),
                    Kind::Filter(k) => write!(f, " payloadFilter=to:{}", recipient(*k)),
                    Kind::NoFilter => write!(f, " payloadFilter=null"),
                    Kind::V1a => write!(f, " signatureScheme=v1a"),
                }
            }
            Op::Events(events) => {
                write!(f, "{}", if events.len() > 1 { "burst" } else { "event" })?;
                for e in events {
                    let direction = if e.inbound { "inbound" } else { "outbound" };
                    write!(
                        f,
                        " [{} dep-{} {direction} to:{}",
                        e.label(),
                        e.dep,
                        recipient(e.to)
                    )?;
                    for (slot, answers) in &e.answers {
                        let answers: Vec<String> = answers.iter().map(|a| a.to_string()).collect();
                        write!(f, " s{slot}:{}", answers.join(","))?;
                    }
                    write!(f, "]")?;
                }
                Ok(())
            }
            Op::Get { slot } => write!(f, "get s{slot}"),
            Op::List => write!(f, "list"),
            Op::Delete { slot } => write!(f, "delete s{slot}"),
            Op::Resend { slot, event } => write!(f, "resend s{slot} e{event}"),
            Op::Recover { slot } => write!(f, "recover s{slot}"),
            Op::Foreign { slot } => write!(f, "as org-2: get, delete, recover s{slot}"),
            Op::DeleteInFlight { slot, event } => {
                write!(
                    f,
                    "{}, then delete s{slot} at its first arrival",
                    Op::Events(vec![event.clone()])
                )
            }
        }
    }
}

/// A small deterministic generator (SplitMix64): the same seed gives the
/// same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent` %.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// `len` operations drawn from `seed`. Creates come first often enough that
/// events find subscriptions.
pub fn sequence(seed: u64, len: usize) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    // Recipients and payload filters, drawn apart from the rest.
    let mut extra = Rng::new(!seed);
    // Retry schedules, from a stream of their own for the same reason.
    let mut retries = Rng::new(seed ^ 0x7265_7472_7973);
    // Custom headers, from a stream of their own too.
    let mut headers = Rng::new(seed.rotate_left(32) ^ 0x6865_6164);
    let mut next_event = 0;
    let mut ops = Vec::with_capacity(len);
    while ops.len() < len {
        let slot = rng.below(SLOTS);
        let op = match rng.below(100) {
            // The first operations create, so later ones have something to work on.
            _ if ops.len() < 2 => create(&mut rng, &mut extra, &mut retries, &mut headers, slot),
            0..=19 => create(&mut rng, &mut extra, &mut retries, &mut headers, slot),
            20..=49 => {
                let event = event(&mut rng, &mut extra, &mut next_event, true);
                Op::Events(vec![event])
            }
            50..=59 => {
                // A burst: order and rate show only when several are queued at once.
                let dep = rng.below(DEPARTMENTS as usize) as u8;
                let n = 2 + rng.below(5);
                let events = (0..n)
                    .map(|_| {
                        let mut e = event(&mut rng, &mut extra, &mut next_event, false);
                        e.dep = dep;
                        e
                    })
                    .collect();
                Op::Events(events)
            }
            60..=67 => Op::Get { slot },
            68..=72 => Op::List,
            73..=76 => Op::Delete { slot },
            77..=79 => Op::DeleteInFlight {
                slot,
                event: event(&mut rng, &mut extra, &mut next_event, true),
            },
            80..=87 => Op::Resend {
                slot,
                event: if next_event == 0 {
                    0
                } else {
                    rng.below(next_event as usize) as u32
                },
            },
            88..=94 => Op::Recover { slot },
            _ => Op::Foreign { slot },
        };
        ops.push(op);
    }
    ops
}

fn create(rng: &mut Rng, extra: &mut Rng, retries: &mut Rng, headers: &mut Rng, slot: usize) -> Op {
    let kind = match rng.below(12) {
        0..=2 => Kind::Ordered,
        3 => Kind::Unordered,
        4 | 5 => Kind::Rate(1 + rng.below(2) as u32),
        6 => Kind::NoRate,
        7 => Kind::BadRate,
        8 => Kind::Foreign,
        // Payload filters come from their own stream: a seed's sequence is otherwise the one
        // it was before they existed (FOUND_A_DIFFERENCE replays what it found).
        // `v1a` subscriptions take half of the plain ones' share (the stream is unchanged).
        _ => match extra.below(5) {
            0 | 1 => Kind::Filter(extra.below(RECIPIENTS as usize) as u8),
            2 => Kind::NoFilter,
            3 => Kind::V1a,
            _ => Kind::Plain,
        },
    };
    let dep = rng.below(DEPARTMENTS as usize) as u8;
    let retries = match retries.below(20) {
        0..=7 => Retries::Own(if retries.chance(50) { 1 } else { 3 }),
        8 | 9 => Retries::Deployment,
        10 => Retries::Refused,
        _ => Retries::Absent,
    };
    let headers = match headers.below(4) {
        0 | 1 => Some(Some(headers.below(2) as u8)),
        2 => Some(None),
        _ => None,
    };
    Op::Create {
        slot,
        kind,
        dep,
        retries,
        headers,
    }
}

/// An event with answers for every slot. `alone`: the only event of its
/// operation, so its notifications are the only ones in flight and any
/// answer may be scripted; in a burst only slots of ordered subscriptions
/// could be told apart from concurrency, so the answers there are drawn by
/// the caller's rule ([`super::model`] takes the rest as `200`).
fn event(rng: &mut Rng, extra: &mut Rng, next: &mut u32, alone: bool) -> Event {
    let id = *next;
    *next += 1;
    let dep = rng.below(DEPARTMENTS as usize) as u8;
    let inbound = rng.chance(85);
    let to = extra.below(RECIPIENTS as usize) as u8;
    let answers = (0..SLOTS)
        .filter_map(|slot| {
            let n = rng.below(if alone { 5 } else { 3 });
            let answers: Vec<Answer> = (0..n).map(|_| answer(rng, alone)).collect();
            (!answers.is_empty()).then_some((slot, answers))
        })
        .collect();
    Event {
        id,
        dep,
        inbound,
        to,
        answers,
    }
}

fn answer(rng: &mut Rng, alone: bool) -> Answer {
    match rng.below(if alone { 12 } else { 8 }) {
        0..=2 => Answer::Ok,
        3..=4 => Answer::Fail,
        5 => Answer::Pause(429),
        6 => Answer::Pause(503),
        7 => Answer::Slow,
        8..=10 => Answer::Fail,
        _ => Answer::Gone,
    }
}
