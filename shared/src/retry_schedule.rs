//! A subscription's own retry schedule (`retrySchedule`, issue 46): the
//! waits after its failed attempts, in place of the deployment's
//! `WEBHOOKS_RETRY_SCHEDULE`. Bounded so that every runtime keeps it as
//! written: whole seconds (SQS delays and visibility are whole seconds),
//! each wait at most 12 h (SQS's longest visibility, the default's longest
//! wait), all of them at most 48 h (well inside the delivery queue's 4 days
//! of retention), at most 20 waits (docs/decisions/retry-schedule.md).

use std::time::Duration;

use crate::config::parse_duration;

/// The most waits a schedule holds.
pub const MAX_WAITS: usize = 20;
/// The shortest wait.
pub const MIN_WAIT: Duration = Duration::from_secs(1);
/// The longest wait.
pub const MAX_WAIT: Duration = Duration::from_secs(12 * 3600);
/// The longest sum of the waits.
pub const MAX_TOTAL: Duration = Duration::from_secs(48 * 3600);

/// A valid schedule: `waits()[n - 1]` is the wait after failed attempt `n`;
/// past its end the notification is dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule(Vec<Duration>);

/// Why a schedule is refused: the item it names (none for the whole list)
/// and what is wrong, for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError {
    /// The index of the wait at fault; none when the list as a whole is.
    pub item: Option<usize>,
    /// What is wrong with it.
    pub message: String,
}

impl RetrySchedule {
    /// A schedule as the API takes it: a list of waits, each a duration
    /// like `"5s"`, `"2m"`, `"1h"` or a whole number of seconds.
    pub fn parse(value: &serde_json::Value) -> Result<Self, ScheduleError> {
        let whole = |message: String| ScheduleError {
            item: None,
            message,
        };
        let items = value.as_array().ok_or_else(|| {
            whole("must be a list of waits such as \"5s\", \"2m\", \"1h\" or seconds".into())
        })?;
        let waits = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                wait(item).map_err(|message| ScheduleError {
                    item: Some(i),
                    message,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(waits).map_err(whole)
    }

    /// The schedule as stored ([`Self::stored`]); an error says why not.
    pub fn from_stored(text: &str) -> Result<Self, String> {
        let waits = text
            .split(',')
            .map(parse_duration)
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(bad) = waits.iter().find(|w| check_wait(**w).is_err()) {
            return Err(format!("{bad:?} is not a wait"));
        }
        Self::new(waits)
    }

    /// The list's own limits: at least one wait, at most [`MAX_WAITS`],
    /// [`MAX_TOTAL`] in all.
    fn new(waits: Vec<Duration>) -> Result<Self, String> {
        if waits.is_empty() {
            return Err("must hold at least one wait".into());
        }
        if waits.len() > MAX_WAITS {
            return Err(format!("must hold at most {MAX_WAITS} waits"));
        }
        let total: Duration = waits.iter().sum();
        if total > MAX_TOTAL {
            return Err(format!(
                "its waits add up to {}, more than the {} allowed",
                text(total),
                text(MAX_TOTAL)
            ));
        }
        Ok(RetrySchedule(waits))
    }

    /// The waits, in order.
    pub fn waits(&self) -> &[Duration] {
        &self.0
    }

    /// How it is stored and returned: `"5s,2m,1h"` (the form of
    /// `WEBHOOKS_RETRY_SCHEDULE`).
    pub fn stored(&self) -> String {
        self.texts().join(",")
    }

    /// Each wait in its shortest form, as the API returns them.
    pub fn texts(&self) -> Vec<String> {
        self.0.iter().map(|d| text(*d)).collect()
    }
}

/// One wait of the API's list.
fn wait(item: &serde_json::Value) -> Result<Duration, String> {
    let d = match item {
        serde_json::Value::Number(n) => n
            .as_u64()
            .map(Duration::from_secs)
            .ok_or_else(|| format!("{n} is not a whole number of seconds"))?,
        serde_json::Value::String(s) => parse_duration(s)?,
        other => {
            return Err(format!(
                "{other} is not a wait such as \"5s\", \"2m\" or 30"
            ))
        }
    };
    check_wait(d).map(|()| d)
}

fn check_wait(d: Duration) -> Result<(), String> {
    if d.subsec_nanos() != 0 {
        return Err(format!("{d:?} is not a whole number of seconds"));
    }
    if d < MIN_WAIT || d > MAX_WAIT {
        return Err(format!(
            "{} is outside {} to {}",
            text(d),
            text(MIN_WAIT),
            text(MAX_WAIT)
        ));
    }
    Ok(())
}

/// Whole seconds in the largest unit that divides them: `90s`, `2m`, `12h`.
fn text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => "0s".into(),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secs(s: &[u64]) -> Vec<Duration> {
        s.iter().copied().map(Duration::from_secs).collect()
    }

    #[test]
    fn waits_are_durations_or_seconds_in_their_shortest_form() {
        let s = RetrySchedule::parse(&json!(["5s", 90, "120s", "2h", "3600000ms"])).unwrap();
        assert_eq!(s.waits(), secs(&[5, 90, 120, 7200, 3600]));
        assert_eq!(s.stored(), "5s,90s,2m,2h,1h");
        assert_eq!(RetrySchedule::from_stored(&s.stored()).unwrap(), s);
    }

    #[test]
    fn each_limit_holds_and_one_past_it_is_refused() {
        let at = |v| RetrySchedule::parse(&v);
        assert!(at(json!(["1s", "12h"])).is_ok());
        assert!(at(json!(vec!["1s"; MAX_WAITS])).is_ok());
        assert!(
            at(json!(["12h", "12h", "12h", "12h"])).is_ok(),
            "48 h in all"
        );
        let item = |v, i| assert_eq!(at(v).unwrap_err().item, Some(i));
        item(json!(["5s", 0]), 1);
        item(json!(["5s", "43201s"]), 1);
        item(json!(["1500ms"]), 0);
        item(json!([-1]), 0);
        item(json!([1.5]), 0);
        item(json!(["soon"]), 0);
        item(json!([null]), 0);
        let whole = |v| assert_eq!(at(v).unwrap_err().item, None);
        whole(json!(vec!["1s"; MAX_WAITS + 1]));
        whole(json!(["12h", "12h", "12h", "12h", "1s"]));
        whole(json!([]));
        whole(json!("5s,2m"));
        assert!(RetrySchedule::from_stored("5s,13h").is_err());
        assert!(RetrySchedule::from_stored("").is_err());
    }

    proptest::proptest! {
        /// Whatever it is given, a schedule is accepted exactly when it is within every
        /// limit, and what is accepted survives its stored and returned forms unchanged.
        #[test]
        fn accepted_exactly_within_the_limits_and_kept_as_given(
            // Mostly waits within the limits, so that lists are often accepted.
            waits in proptest::collection::vec(
                proptest::prop_oneof![1 => 0u64..50_000, 9 => 1u64..9_000],
                0..24,
            )
        ) {
            let within = !waits.is_empty()
                && waits.len() <= MAX_WAITS
                && waits.iter().all(|w| (1..=43_200).contains(w))
                && waits.iter().sum::<u64>() <= 48 * 3600;
            match RetrySchedule::parse(&json!(waits)) {
                Ok(s) => {
                    proptest::prop_assert!(within, "{waits:?} accepted");
                    proptest::prop_assert_eq!(s.waits(), secs(&waits));
                    proptest::prop_assert_eq!(&RetrySchedule::from_stored(&s.stored()).unwrap(), &s);
                    proptest::prop_assert_eq!(&RetrySchedule::parse(&json!(s.texts())).unwrap(), &s);
                }
                Err(_) => proptest::prop_assert!(!within, "{waits:?} refused"),
            }
        }
    }
}
