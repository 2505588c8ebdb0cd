//! The one Lambda binary's choice of function (`WEBHOOKS_FUNCTION`) and what
//! a function builds on its first invocation (`lambda::function`).

use std::sync::atomic::{AtomicUsize, Ordering};

use webhook_core::lambda::function::{OnFirstUse, VAR};
use webhook_core::lambda::Function;

/// The `WEBHOOKS_FUNCTION` values template.yaml deploys, in its order.
fn deployed() -> Vec<String> {
    let template = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    std::fs::read_to_string(template)
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("WEBHOOKS_FUNCTION:"))
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
fn every_function_of_the_template_is_one_the_binary_serves_and_no_other() {
    let deployed = deployed();
    for name in &deployed {
        let function = Function::parse(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(function.name(), name);
    }
    let mut known: Vec<&str> = Function::ALL.iter().map(|f| f.name()).collect();
    let mut deployed: Vec<&str> = deployed.iter().map(String::as_str).collect();
    known.sort_unstable();
    deployed.sort_unstable();
    assert_eq!(known, deployed, "each function once in template.yaml");
}

#[test]
fn a_name_that_is_no_function_is_refused_naming_the_variable_and_the_functions() {
    for name in ["", "nope", "Authorizer", "get-message ", "webhooks-lambda"] {
        let e = Function::parse(name).expect_err(name).to_string();
        assert!(
            e.starts_with(&format!("{VAR}={name:?} is no function")),
            "{e}"
        );
        assert!(e.contains("authorizer") && e.contains("get-message"), "{e}");
    }
}

#[tokio::test]
async fn what_is_built_on_first_use_is_built_once_for_concurrent_first_invocations() {
    let builds = AtomicUsize::new(0);
    let lazy = OnFirstUse::new(7u32);
    let build = |start: &u32| {
        let start = *start;
        let builds = &builds;
        async move {
            builds.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            start * 6
        }
    };
    let (a, b) = tokio::join!(lazy.get(build), lazy.get(build));
    assert_eq!((*a, *b), (42, 42));
    assert_eq!(*lazy.get(build).await, 42);
    assert_eq!(builds.load(Ordering::SeqCst), 1);
}
