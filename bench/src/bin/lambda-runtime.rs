//! `lambda-runtime [--log FILE] BIN`: runs the Lambda function binary BIN
//! under the fake Runtime API (`webhooks_bench::runtime_api`) with this
//! process's environment, for scripts. Speaks JSON lines: once BIN's init
//! ended it prints `{"ready":true,"init_ms":..}` (or `{"error":..}` and exits
//! 1); then each line of stdin is one event, answered by one line on stdout:
//! `{"ok":true,"response":<the answer>}` or `{"ok":false,"error":<text>}`
//! (an invocation error or a failure such as an exit). Stdin's end stops BIN.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value};
use webhooks_bench::runtime_api::RunningFunction;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let log = match args.iter().position(|a| a == "--log") {
        Some(i) if i + 1 < args.len() => {
            let log = PathBuf::from(args.remove(i + 1));
            args.remove(i);
            log
        }
        _ => PathBuf::from("/dev/null"),
    };
    let [bin] = args.as_slice() else {
        eprintln!("usage: lambda-runtime [--log FILE] BIN  (events on stdin, one JSON a line)");
        return ExitCode::from(2);
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(run(PathBuf::from(bin), log))
}

async fn run(bin: PathBuf, log: PathBuf) -> ExitCode {
    let vars: Vec<(String, String)> = std::env::vars().collect();
    let function = match RunningFunction::start(&bin, &vars, &log).await {
        Ok(f) => f,
        Err(e) => {
            say(json!({ "error": e }));
            return ExitCode::FAILURE;
        }
    };
    say(json!({ "ready": true, "init_ms": function.init.as_secs_f64() * 1000.0 }));
    // Stdin is read on a thread of its own: the runtime serves the function meanwhile.
    let (send, mut events) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = events.recv().await {
        if line.trim().is_empty() {
            continue;
        }
        let answer = match function.invoke_outcome(line).await {
            Ok(o) if o.ok => match serde_json::from_slice::<Value>(&o.body) {
                Ok(response) => json!({ "ok": true, "response": response }),
                Err(e) => json!({ "ok": false, "error": format!("not JSON: {e}") }),
            },
            Ok(o) => json!({ "ok": false, "error": String::from_utf8_lossy(&o.body) }),
            Err(e) => json!({ "ok": false, "error": e }),
        };
        say(answer);
    }
    ExitCode::SUCCESS
}

fn say(line: Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
