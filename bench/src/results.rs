//! The results of one run, as the suites produced them (`results.json` is this
//! struct serialized), and the wiring from them to the report: each suite
//! describes its own targets, tables and latency bars; this module only puts
//! them in the report's order.

use serde::Serialize;

use crate::api::{self, ApiRow};
use crate::cost::{self, CostResults};
use crate::e2e::{self, E2eRow};
use crate::fanout::{self, FanoutResult};
use crate::http::{self, HttpResults, ServiceMemory};
use crate::lambda::{self, LambdaResult};
use crate::load::Summary;
use crate::noisy::{self, NoisyResult};
use crate::report::{self, LatencyBars, Report, Section, Target};
use crate::sizes::{self, SizeRow};

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    pub kernel: String,
}

impl Machine {
    pub fn detect() -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines().find_map(|l| {
                    l.strip_prefix("model name")
                        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
                })
            })
            .unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
            kernel,
        }
    }
}

/// The settings of the run, as recorded in the results.
#[derive(Debug, Clone, Serialize)]
pub struct RunSettings {
    pub concurrency: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub subscriptions: u64,
    pub messages: u64,
    pub fan_out: usize,
    pub e2e_concurrency: usize,
    pub latency_rate: u64,
    pub sustained_notifications: u64,
    pub cold_starts: usize,
    pub invocations: usize,
    pub fanout_unrelated: u64,
    pub dynamodb_unrelated: u64,
    pub fanout_events: u64,
    pub cost_operations: u64,
    pub cost_events_per_send: usize,
    pub server_log: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub generated_at: String,
    pub machine: Machine,
    pub settings: RunSettings,
    /// The reference server, measured before and after the service's scenarios.
    pub reference_runs: Vec<Summary>,
    /// Their average: what the ratios divide by.
    pub reference: Option<Summary>,
    pub api: Vec<ApiRow>,
    pub e2e: Vec<E2eRow>,
    pub service_memory: Option<ServiceMemory>,
    pub lambda: Vec<LambdaResult>,
    pub fanout: Vec<FanoutResult>,
    pub sizes: Vec<SizeRow>,
    pub cost: Option<CostResults>,
    pub noisy: Vec<NoisyResult>,
    pub targets: Vec<Target>,
    pub problems: Vec<String>,
}

impl Results {
    /// No results yet.
    pub fn new(generated_at: String, machine: Machine, settings: RunSettings) -> Results {
        Results {
            generated_at,
            machine,
            settings,
            reference_runs: vec![],
            reference: None,
            api: vec![],
            e2e: vec![],
            service_memory: None,
            lambda: vec![],
            fanout: vec![],
            sizes: vec![],
            cost: None,
            noisy: vec![],
            targets: vec![],
            problems: vec![],
        }
    }

    pub fn add_http(&mut self, http: HttpResults) {
        self.reference_runs = http.reference_runs;
        self.reference = Some(http.reference);
        self.api = http.api;
        self.e2e = http.e2e;
        self.service_memory = Some(http.service_memory);
        self.problems.extend(http.problems);
    }

    /// Every target, measured or not, in the report's order.
    pub fn evaluate_targets(&mut self) {
        let s = &self.settings;
        let mut targets = api::targets(&self.api);
        targets.extend(e2e::targets(
            &self.e2e,
            s.sustained_notifications,
            s.latency_rate,
        ));
        targets.push(lambda::init_target(&self.lambda));
        targets.push(sizes::zip_target(&self.sizes));
        targets.push(http::memory_target(self.service_memory.as_ref()));
        targets.extend(fanout::targets(&self.fanout));
        targets.push(cost::target(self.cost.as_ref()));
        targets.push(cost::http_api_target(self.cost.as_ref()));
        self.targets = targets;
    }

    pub fn report(&self) -> Report {
        Report {
            preamble: self.preamble(),
            sections: self.sections(),
            latency: self.latency_bars(),
        }
    }

    fn preamble(&self) -> String {
        let m = &self.machine;
        format!(
            "Measured {} on {} cores ({}, Linux {}).",
            self.generated_at, m.cores, m.cpu, m.kernel
        )
    }

    /// The sections of `results.md`, in order; a suite that did not run has none.
    fn sections(&self) -> Vec<Section> {
        let s = &self.settings;
        let load = api::Load {
            concurrency: s.concurrency,
            duration_s: s.duration_s,
            warmup_s: s.warmup_s,
        };
        [
            report::targets_section(&self.targets),
            self.reference
                .as_ref()
                .map(|average| api::section(&load, &self.reference_runs, average, &self.api)),
            e2e::section(&self.e2e),
            noisy::section(&self.noisy),
            self.service_memory.as_ref().map(http::memory_section),
            lambda::section(&self.lambda, s.cold_starts, s.invocations),
            fanout::section(&self.fanout),
            sizes::section(&self.sizes),
        ]
        .into_iter()
        .flatten()
        .chain(self.cost.iter().flat_map(cost::sections))
        .chain(report::problems_section(&self.problems))
        .collect()
    }

    /// The rows of the latency chart, in order.
    fn latency_bars(&self) -> Vec<LatencyBars> {
        let mut bars = api::latency_bars(self.reference.as_ref(), &self.api);
        bars.extend(e2e::latency_bars(&self.e2e));
        bars.extend(noisy::latency_bars(&self.noisy));
        bars.extend(fanout::latency_bars(&self.fanout));
        bars
    }
}
