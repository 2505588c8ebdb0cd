//! The emulators the AWS tests run against (DynamoDB Local, moto's SQS),
//! started by `scripts/test.sh`. A test that needs one and does not find it
//! fails with instructions; it never passes vacuously.

use std::sync::atomic::{AtomicUsize, Ordering};

pub const DYNAMODB: &str = "AWS_ENDPOINT_URL_DYNAMODB";
pub const SQS: &str = "AWS_ENDPOINT_URL_SQS";

/// The endpoint in `var`, or a panic saying how to start the emulator.
pub fn require(var: &str) -> String {
    let start = if var == SQS {
        "start_moto"
    } else {
        "start_dynamodb"
    };
    match std::env::var(var) {
        Ok(endpoint) if !endpoint.trim().is_empty() => endpoint,
        _ => panic!(
            "{var} is not set: these tests need an emulator. Run them through \
             ./scripts/test.sh, or in a shell: `source scripts/emulators.sh && {start}`, \
             then cargo test (stop it with stop_emulators)."
        ),
    }
}

/// A name no other test of any run uses: `<label>-<pid>-<nanos>-<n>`.
pub fn unique_name(label: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    format!(
        "{label}-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// `WEBHOOKS_TEST_BACKEND=aws`: the tests that run on either backend use DynamoDB Local and
/// moto (and fail, naming the command that starts them, when they are not there). Unset or
/// `sqlite`: SQLite.
pub fn aws_backend() -> bool {
    match std::env::var("WEBHOOKS_TEST_BACKEND").as_deref() {
        Err(_) | Ok("") | Ok("sqlite") => false,
        Ok("aws") => {
            require(DYNAMODB);
            true
        }
        Ok(other) => panic!("WEBHOOKS_TEST_BACKEND={other}: expected sqlite or aws"),
    }
}
