//! The model: what the contract says each operation answers and what becomes
//! of every notification, operation by operation, each settled before the
//! next (docs/api.md). Its observations have the runtimes' normalized shape
//! (`observe.rs`), so a difference is a plain inequality of JSON values.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::plan::{Answer, Event, Kind, Op, Retries, SLOTS};

/// Attempts in one run of the retry schedule: the first and the
/// schedule's two retries (`WEBHOOKS_RETRY_SCHEDULE`, `runtimes.rs`).
pub const ATTEMPTS_PER_RUN: u32 = 3;

/// The answers each notification's callback gives, attempt after attempt
/// (then `200`), keyed by (slot, event id): what the receivers play.
pub type Script = BTreeMap<(usize, u32), Vec<Answer>>;

#[derive(Clone, Debug)]
struct Sub {
    /// Creation number: its normalized id (`s<label>`).
    label: usize,
    active: bool,
    ordered: bool,
    rate_limit: Option<u32>,
    /// Its payload filter: only events to this recipient.
    filter: Option<u8>,
    /// The schemes of its `webhook-signature`, in order: `v1`, `v1a`, or `v1a v1` once
    /// switched from `v1` (the old secret signs for the grace period, a day: the whole run).
    signatures: &'static str,
    /// Its own retry schedule: this many waits of 1 s.
    retries: Option<u8>,
    /// Its custom header's value number (`plan::header_value`).
    headers: Option<u8>,
    dep: u8,
    streak: u32,
    last_failure: Option<(&'static str, Option<u16>)>,
    /// Its notifications by event id.
    notes: BTreeMap<u32, Note>,
}

#[derive(Clone, Debug)]
struct Note {
    status: &'static str,
    /// Each attempt: the callback's status, the failing step, the trigger.
    attempts: Vec<(Option<u16>, Option<&'static str>, &'static str)>,
    /// Why it ended without an attempt (blacklisted meanwhile).
    unsent: Option<&'static str>,
}

impl Note {
    fn pending() -> Note {
        Note {
            status: "PENDING",
            attempts: Vec::new(),
            unsent: None,
        }
    }
}

#[derive(Default)]
pub struct Model {
    slots: [Option<Sub>; SLOTS],
    created: usize,
    /// Arrivals at the receiver by (slot, event id).
    arrivals: BTreeMap<(usize, u32), u32>,
    /// The signature schemes each notification arrived with, by (slot, event id).
    signatures: BTreeMap<(usize, u32), BTreeSet<&'static str>>,
    /// The custom header values each slot's notifications arrived with ("-": none).
    headers_seen: BTreeMap<String, BTreeSet<String>>,
    script: Script,
}

/// The answers of `ops` as the receivers play them: an event alone keeps
/// every answer; in a burst only an ordered subscription's (one call at a
/// time, so its attempts' order is known), the others' notifications being
/// answered `200` (concurrent failures would make the failure streak depend
/// on the order the calls happen to take).
pub fn script(ops: &[Op]) -> Script {
    let mut model = Model::default();
    for op in ops {
        model.apply(op);
    }
    model.script
}

/// The model's observations of `ops`: one per operation, then the end state.
pub fn observe(ops: &[Op]) -> Vec<Value> {
    let mut model = Model::default();
    let mut out: Vec<Value> = ops.iter().map(|op| model.apply(op)).collect();
    out.push(model.end_state());
    out
}

impl Model {
    fn apply(&mut self, op: &Op) -> Value {
        match op {
            Op::Create {
                slot,
                kind,
                dep,
                retries,
                headers,
            } => {
                // (`retrySchedule` asked: its own or the deployment's; a refused one refuses
                // the create before anything else is looked at)
                let retries = match retries {
                    Retries::Absent => None,
                    Retries::Own(n) => Some(Some(*n)),
                    Retries::Deployment => Some(None),
                    Retries::Refused => {
                        return json!({"status": 400, "code": "VALIDATION_FAILED"});
                    }
                };
                // (`ordered` asked, `rateLimit` asked: a limit or none)
                let filter = match kind {
                    Kind::Filter(k) => Some(Some(*k)),
                    Kind::NoFilter => Some(None),
                    _ => None,
                };
                let (ordered, rate_limit) = match kind {
                    Kind::Plain | Kind::Filter(_) | Kind::NoFilter | Kind::V1a => (None, None),
                    Kind::Ordered => (Some(true), None),
                    Kind::Unordered => (Some(false), None),
                    Kind::Rate(n) => (None, Some(Some(*n))),
                    Kind::NoRate => (None, Some(None)),
                    Kind::BadRate => {
                        return json!({"status": 400, "code": "VALIDATION_FAILED"});
                    }
                    Kind::Foreign => return json!({"status": 403, "code": "NO_ENABLED_FILTERS"}),
                };
                let sub = match &mut self.slots[*slot] {
                    Some(sub) => {
                        // A re-post: same id, filters replaced, reactivated,
                        // its health cleared (docs/api.md, "Behaviour": Health); an absent
                        // `ordered` or `rateLimit` keeps what it had.
                        sub.active = true;
                        sub.streak = 0;
                        sub.last_failure = None;
                        sub.dep = *dep;
                        sub.ordered = ordered.unwrap_or(sub.ordered);
                        sub.rate_limit = rate_limit.unwrap_or(sub.rate_limit);
                        sub.filter = filter.unwrap_or(sub.filter);
                        if *kind == Kind::V1a && sub.signatures == "v1" {
                            sub.signatures = "v1a v1";
                        }
                        sub.retries = retries.unwrap_or(sub.retries);
                        sub.headers = headers.unwrap_or(sub.headers);
                        sub
                    }
                    none => {
                        self.created += 1;
                        none.insert(Sub {
                            label: self.created - 1,
                            active: true,
                            ordered: ordered.unwrap_or(false),
                            rate_limit: rate_limit.flatten(),
                            filter: filter.flatten(),
                            signatures: if *kind == Kind::V1a { "v1a" } else { "v1" },
                            retries: retries.flatten(),
                            headers: headers.flatten(),
                            dep: *dep,
                            streak: 0,
                            last_failure: None,
                            notes: BTreeMap::new(),
                        })
                    }
                };
                json!({"status": 200, "body": view(sub)})
            }
            Op::Events(events) => {
                let burst = events.len() > 1;
                let mut answers = Vec::new();
                for e in events {
                    let mut n = 0;
                    for slot in 0..SLOTS {
                        let Some(sub) = &mut self.slots[slot] else {
                            continue;
                        };
                        // A payload filter refuses the events to another recipient: nothing is made.
                        let wanted = sub.filter.is_none_or(|k| k == e.to);
                        if !(e.inbound && sub.active && sub.dep == e.dep && wanted) {
                            continue;
                        }
                        sub.notes.insert(e.id, Note::pending());
                        let kept = !burst || sub.ordered;
                        if let Some((_, script)) = e.answers.iter().find(|(s, _)| *s == slot) {
                            if kept {
                                self.script.insert((slot, e.id), script.clone());
                            }
                        }
                        n += 1;
                    }
                    answers.push(json!({"status": 202, "notifications": n}));
                }
                // Delivered in acceptance order (the order rule; an unordered
                // subscription's are all answered 200, in any order).
                for e in events {
                    for slot in 0..SLOTS {
                        let pending = self.slots[slot].as_ref().is_some_and(|s| {
                            s.notes.get(&e.id).is_some_and(|n| n.status == "PENDING")
                        });
                        if pending {
                            self.run(slot, e.id, "SCHEDULED");
                        }
                    }
                }
                json!(answers)
            }
            Op::Get { slot } => match &self.slots[*slot] {
                Some(sub) => json!({"status": 200, "body": view(sub)}),
                None => not_found("SUBSCRIPTION_NOT_FOUND"),
            },
            Op::List => {
                let mut subs: Vec<&Sub> = self.slots.iter().flatten().collect();
                subs.sort_by_key(|s| s.label);
                let content: Vec<Value> = subs.into_iter().map(view).collect();
                json!({"status": 200, "body": content})
            }
            Op::Delete { slot } => match self.slots[*slot].take() {
                Some(_) => json!({"status": 204}),
                None => not_found("SUBSCRIPTION_NOT_FOUND"),
            },
            Op::Resend { slot, event } => {
                let Some(sub) = &mut self.slots[*slot] else {
                    return not_found("SUBSCRIPTION_NOT_FOUND");
                };
                if !sub.active {
                    return conflict();
                }
                let Some(note) = sub.notes.get_mut(event) else {
                    return not_found("NOTIFICATION_NOT_FOUND");
                };
                note.status = "PENDING";
                self.run(*slot, *event, "MANUAL");
                json!({"status": 202, "body": {"uuid": "the one asked", "status": "PENDING"}})
            }
            Op::DeleteInFlight { slot, event } => {
                // The slot's notification (if any) gets its first attempt only:
                // the retry finds the subscription deleted and is dropped.
                let mut answers = self.apply(&Op::Events(vec![Event {
                    answers: event
                        .answers
                        .iter()
                        .filter(|(s, _)| s != slot)
                        .cloned()
                        .collect(),
                    ..event.clone()
                }]));
                if self.slots[*slot]
                    .as_ref()
                    .is_some_and(|s| s.notes.contains_key(&event.id))
                {
                    // Undo the model's run for the slot: one attempt, answered as scripted.
                    self.arrivals.insert((*slot, event.id), 1);
                    if let Some((_, script)) = event.answers.iter().find(|(s, _)| s == slot) {
                        self.script.insert((*slot, event.id), script.clone());
                    }
                }
                let deleted = self.apply(&Op::Delete { slot: *slot });
                answers.as_array_mut().unwrap().push(deleted);
                answers
            }
            // Tenancy: another organization's id answers as an unknown one.
            Op::Foreign { .. } => json!([
                not_found("SUBSCRIPTION_NOT_FOUND"),
                not_found("SUBSCRIPTION_NOT_FOUND"),
                not_found("SUBSCRIPTION_NOT_FOUND"),
            ]),
            Op::Recover { slot } => {
                let Some(sub) = &mut self.slots[*slot] else {
                    return not_found("SUBSCRIPTION_NOT_FOUND");
                };
                if !sub.active {
                    return conflict();
                }
                let failed: Vec<u32> = sub
                    .notes
                    .iter()
                    .filter(|(_, n)| n.status == "FAILED")
                    .map(|(e, _)| *e)
                    .collect();
                for event in &failed {
                    let sub = self.slots[*slot].as_mut().unwrap();
                    sub.notes.get_mut(event).unwrap().status = "PENDING";
                }
                // Oldest first, as recover queues them.
                for event in &failed {
                    self.run(*slot, *event, "MANUAL");
                }
                json!({"status": 202, "body": {"notifications": failed.len(), "more": false}})
            }
        }
    }

    /// One run of the retry schedule for a PENDING notification: attempts
    /// until a `2xx`, a `410` or the schedule's end.
    /// `trigger`: of the run's first attempt (its retries are `SCHEDULED`).
    fn run(&mut self, slot: usize, event: u32, trigger: &'static str) {
        let sub = self.slots[slot].as_mut().unwrap();
        if !sub.active {
            // Blacklisted meanwhile (an earlier notification's 410): given
            // up without an attempt.
            let note = sub.notes.get_mut(&event).unwrap();
            note.status = "FAILED";
            note.unsent = Some("SUBSCRIPTION_NOT_ACTIVE");
            return;
        }
        let header = sub
            .headers
            .map_or("-".to_owned(), super::plan::header_value);
        self.headers_seen
            .entry(format!("s{slot}"))
            .or_default()
            .insert(header);
        // The subscription's own schedule when it has one (read at each attempt).
        let attempts = sub.retries.map_or(ATTEMPTS_PER_RUN, |n| u32::from(n) + 1);
        for n in 0..attempts {
            let trigger = if n == 0 { trigger } else { "SCHEDULED" };
            let arrived = self.arrivals.entry((slot, event)).or_default();
            let answer = self
                .script
                .get(&(slot, event))
                .and_then(|s| s.get(*arrived as usize))
                .copied()
                .unwrap_or(Answer::Ok);
            *arrived += 1;
            self.signatures
                .entry((slot, event))
                .or_default()
                .insert(sub.signatures);
            let note = sub.notes.get_mut(&event).unwrap();
            note.unsent = None;
            // The health counts outage-like failures (no answer in time, a
            // 5xx): any other answer shows the callback up and ends the
            // count, leaving the last failure as it was (docs/api.md, "Behaviour": Health).
            let outage = match answer {
                Answer::Ok => {
                    note.attempts.push((Some(200), None, trigger));
                    note.status = "DELIVERED";
                    sub.streak = 0;
                    return;
                }
                Answer::Fail => Some(("BAD_STATUS", Some(500))),
                Answer::Pause(503) => Some(("BAD_STATUS", Some(503))),
                Answer::Slow => Some(("TIMEOUT", None)),
                Answer::Pause(_) | Answer::Gone => None,
            };
            let (status, code) = match answer {
                Answer::Fail => (Some(500), "BAD_STATUS"),
                Answer::Pause(status) => (Some(status), "BAD_STATUS"),
                Answer::Gone => (Some(410), "BAD_STATUS"),
                _ => (None, "TIMEOUT"),
            };
            note.attempts.push((status, Some(code), trigger));
            match outage {
                Some(failure) => {
                    sub.streak += 1;
                    sub.last_failure = Some(failure);
                }
                None => sub.streak = 0,
            }
            if answer == Answer::Gone {
                note.status = "FAILED";
                sub.active = false;
                return;
            }
        }
        sub.notes.get_mut(&event).unwrap().status = "FAILED";
    }

    /// What the end of the sequence shows: every notification's arrivals at
    /// its receiver, and every subscription left with its notifications.
    fn end_state(&self) -> Value {
        let arrivals: BTreeMap<String, u32> = self
            .arrivals
            .iter()
            .map(|((slot, event), n)| (format!("s{slot}/e{event}"), *n))
            .collect();
        let subs: Vec<Value> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(slot, sub)| {
                let sub = sub.as_ref()?;
                let notes: BTreeMap<String, Value> = sub
                    .notes
                    .iter()
                    .map(|(e, note)| (format!("e{e}"), note_view(note)))
                    .collect();
                Some(json!({"slot": slot, "subscription": view(sub), "notifications": notes}))
            })
            .collect();
        let signatures: BTreeMap<String, &BTreeSet<&str>> = self
            .signatures
            .iter()
            .map(|((slot, event), schemes)| (format!("s{slot}/e{event}"), schemes))
            .collect();
        json!({"arrivals": arrivals, "signatures": signatures, "subscriptions": subs, "orderKept": true,
               "rateKept": true, "oneUuidEach": true, "headersSeen": self.headers_seen})
    }
}

/// A notification as `observe::notification` normalizes its detail.
fn note_view(note: &Note) -> Value {
    let last = note.attempts.last();
    let tried: Vec<Value> = note
        .attempts
        .iter()
        .map(|(status, code, trigger)| json!([status, code, trigger]))
        .collect();
    json!({
        "status": note.status,
        "attempts": note.attempts.len(),
        "lastHttpStatus": last.and_then(|a| a.0),
        "lastCode": note.unsent.or(last.and_then(|a| a.1)),
        "tried": tried,
    })
}

/// A subscription as `observe::subscription` normalizes an answer.
fn view(sub: &Sub) -> Value {
    json!({
        "id": format!("s{}", sub.label),
        "status": if sub.active { "ACTIVE" } else { "BLACKLISTED" },
        "eventFilters": [format!("/orgId/org-1/department/dep-{}/message?direction=inbound", sub.dep)],
        "ordered": sub.ordered,
        "rateLimit": sub.rate_limit,
        "payloadFilter": sub.filter.map(|k| json!({"message.to": super::plan::recipient(k)})),
        "signatureScheme": sub.signatures.starts_with("v1a").then_some("v1a"),
        "retrySchedule": sub.retries.map(|n| vec!["1s"; n as usize]),
        "customHeaders": sub.headers.map(|k| {
            let masked = webhook_core::custom_headers::mask(&super::plan::header_value(k));
            json!({ super::plan::HEADER: masked })
        }),
        "health": {
            "state": "closed",
            "consecutiveFailures": sub.streak,
            "lastFailure": sub.last_failure.map(|(code, status)| json!({"code": code, "httpStatus": status})),
        },
    })
}

fn not_found(code: &str) -> Value {
    json!({"status": 404, "code": code})
}

fn conflict() -> Value {
    json!({"status": 409, "code": "SUBSCRIPTION_NOT_ACTIVE"})
}
