#!/usr/bin/env python3
"""The test build and the binaries' build share one feature set of every dependency.

scripts/test.sh builds the tests (`cargo nextest run --no-run`: the default members with their
dev-dependencies) and then the binaries (`cargo build -p webhooks-local -p webhooks-bench
-p webhooks-lambda`, no dev-dependencies). Cargo resolves features per build: a feature that
only a dev-dependency turns on makes the second build compile that crate, and everything above
it (webhook-core, every binary), again. bench/Cargo.toml asks for those features; this check
fails naming any package whose features differ between the two builds.

    scripts/one-feature-set.py PACKAGE...   # compare with the build of these binaries'
                                            # packages (cargo tree, nothing compiled)
    scripts/one-feature-set.py --self-test  # a planted difference is reported
"""

import subprocess
import sys

TESTS = ["-e", "normal,build,dev"]
BINARIES = ["-e", "normal,build"]  # with `-p PACKAGE` for each package named


def features(lines):
    """`{p} {f}` lines of `cargo tree --prefix none` -> {"name version": {features}}."""
    found = {}
    for line in lines:
        parts = line.replace(" (*)", "").replace(" (proc-macro)", "").split()
        if len(parts) < 2:
            continue
        package = f"{parts[0]} {parts[1]}"
        rest = [p for p in parts[2:] if not p.startswith("(")]
        found.setdefault(package, set()).update(rest[-1].split(",") if rest else [])
    return found


def tree(args):
    out = subprocess.run(["cargo", "tree", "--locked", "--prefix", "none", "-f", "{p} {f}", *args],
                         check=True, capture_output=True, text=True).stdout
    return features(out.splitlines())


def differences(tests, binaries):
    return [f"{p}: only the test build has {sorted(tests[p] - binaries[p])}, "
            f"only the binaries' {sorted(binaries[p] - tests[p])}"
            for p in sorted(binaries) if p in tests and tests[p] != binaries[p]]


def self_test():
    tests = features(["reqwest v0.13.5 json,rustls", "uuid v1.29.1 v4 (*)"])
    binaries = features(["reqwest v0.13.5 rustls", "uuid v1.29.1 v4"])
    found = differences(tests, binaries)
    assert found == ["reqwest v0.13.5: only the test build has ['json'], only the binaries' []"], found
    assert differences(tests, tests) == []
    print("self-test: a feature only the test build turns on: reported")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if not sys.argv[1:]:
        sys.exit("usage: one-feature-set.py PACKAGE... | --self-test")
    packages = [arg for name in sys.argv[1:] for arg in ("-p", name)]
    found = differences(tree(TESTS), tree(packages + BINARIES))
    for line in found:
        print(f"one-feature-set: {line}", file=sys.stderr)
    if found:
        print("one-feature-set: ask for these features in bench/Cargo.toml (see its comment)",
              file=sys.stderr)
        sys.exit(1)
    print("one-feature-set: the test build and the binaries' build share every dependency's features")


if __name__ == "__main__":
    main()
