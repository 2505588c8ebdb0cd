//! The size alarm: no Rust file a person edits is over [`SIZE_ALARM`] lines (an alarm, not a
//! rule to split by: a file that long is worth a look for the concepts it holds). Every `.rs`
//! file of the workspace counts, tests, `bench/`, `testkit/` and `fuzz/` included; only build
//! output (`target/`) and hidden folders are left out. A file may stay longer only when
//! [`EXCEPTIONS`] names it with its reason, and an exception that is no longer needed is
//! reported too, so the list cannot rot.

use std::path::{Path, PathBuf};

/// A file this long is worth a look.
const SIZE_ALARM: usize = 800;

/// Files allowed past the alarm, by path from the workspace root, each with why.
const EXCEPTIONS: &[(&str, &str)] = &[];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Every `.rs` file under `dir` but build output and hidden folders, as paths from `root`
/// with `/` between their parts.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if name != "target" && name != "node_modules" && !name.starts_with('.') {
                rust_files(root, &path, out);
            }
        } else if name.ends_with(".rs") {
            let rel = path.strip_prefix(root).unwrap();
            let parts: Vec<_> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(parts.join("/"));
        }
    }
}

/// What the alarm reports for these files (path and line count), given the exceptions.
fn alarms(files: &[(String, usize)], exceptions: &[(&str, &str)]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (path, lines) in files {
        let excepted = exceptions.iter().any(|(name, _)| name == path);
        if *lines > SIZE_ALARM && !excepted {
            wrong.push(format!(
                "{path} has {lines} lines: more than {SIZE_ALARM}, worth splitting by what it holds"
            ));
        }
    }
    for (name, reason) in exceptions {
        match files.iter().find(|(path, _)| path == name) {
            Some((_, lines)) if *lines > SIZE_ALARM => {}
            Some((_, lines)) => wrong.push(format!(
                "{name} is an exception ({reason}) but has {lines} lines: remove it from EXCEPTIONS"
            )),
            None => wrong.push(format!(
                "{name} is an exception ({reason}) but no such file: remove it from EXCEPTIONS"
            )),
        }
    }
    wrong
}

fn every_rust_file() -> Vec<(String, usize)> {
    let root = workspace();
    let mut paths = Vec::new();
    rust_files(&root, &root, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(root.join(&path)).unwrap();
            (path, text.lines().count())
        })
        .collect()
}

#[test]
fn no_rust_file_is_over_the_size_alarm_but_the_listed_exceptions() {
    let files = every_rust_file();
    // The walk reaches every part of the workspace a person edits.
    for part in [
        "shared/src/",
        "shared/tests/",
        "functions/",
        "local/src/",
        "local/tests/",
        "receiver/",
        "testkit/",
        "bench/",
        "fuzz/",
    ] {
        assert!(
            files.iter().any(|(path, _)| path.starts_with(part)),
            "the walk found no Rust file under {part}"
        );
    }
    let wrong = alarms(&files, EXCEPTIONS);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_long_file_and_a_stale_exception_are_reported() {
    let files = vec![
        ("local/tests/it/long.rs".to_owned(), SIZE_ALARM + 1),
        ("bench/src/short.rs".to_owned(), SIZE_ALARM),
        ("bench/src/listed.rs".to_owned(), SIZE_ALARM + 100),
    ];
    let wrong = alarms(
        &files,
        &[
            ("bench/src/listed.rs", "a reason"),
            ("bench/src/short.rs", "split since"),
            ("bench/src/gone.rs", "deleted since"),
        ],
    );
    assert_eq!(
        wrong,
        [
            "local/tests/it/long.rs has 801 lines: more than 800, worth splitting by what it holds",
            "bench/src/short.rs is an exception (split since) but has 800 lines: remove it from EXCEPTIONS",
            "bench/src/gone.rs is an exception (deleted since) but no such file: remove it from EXCEPTIONS",
        ]
    );
}
