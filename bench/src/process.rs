//! Child processes the benchmark starts (the service, the reference
//! server) and what `/proc` tells about them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A child that prints `<prefix>http://ADDR...` on stdout once it listens.
/// Killed when dropped.
pub struct Listening {
    child: Child,
    pub addr: std::net::SocketAddr,
}

impl Listening {
    /// Spawns `command` and waits (at most 30 s) for its banner line.
    pub fn spawn(mut command: Command, prefix: &str) -> Result<Listening, String> {
        let program = command.get_program().to_string_lossy().into_owned();
        command.stdout(Stdio::piped()).stdin(Stdio::null());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        let banner = prefix.to_owned();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent {
                    if let Some(rest) = line.strip_prefix(&banner) {
                        let addr = rest
                            .trim_start_matches("http://")
                            .split('/')
                            .next()
                            .unwrap_or("")
                            .to_owned();
                        let _ = tx.send(addr);
                        sent = true;
                    }
                }
                // Keep draining so the child never blocks on a full pipe.
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(addr) => {
                let addr = addr.parse().map_err(|e| {
                    format!("{program} printed an unreadable address '{addr}': {e}")
                })?;
                Ok(Listening { child, addr })
            }
            Err(_) => {
                let _ = child.kill();
                let status = child.wait().ok();
                Err(format!(
                    "{program} did not print '{prefix}...' within 30 s (exit: {status:?})"
                ))
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `VmRSS` and `VmHWM` (peak) of a process, in KiB.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Memory {
    pub rss_kib: u64,
    pub peak_kib: u64,
}

pub fn memory(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some(Memory {
        rss_kib: field("VmRSS:")?,
        peak_kib: field("VmHWM:")?,
    })
}

/// Samples a process's RSS every 100 ms in the background; `max()` is the
/// largest sample since the sampler started.
pub struct RssSampler {
    max: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl RssSampler {
    pub fn start(pid: u32) -> RssSampler {
        let max = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (m, s) = (max.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match memory(pid) {
                    Some(mem) => {
                        m.fetch_max(mem.rss_kib, Ordering::Relaxed);
                    }
                    None => break,
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        RssSampler { max, stop }
    }

    pub fn max_kib(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A release binary of this workspace: beside the running benchmark binary
/// (both live in `target/release`), or under `dir` when given.
pub fn workspace_binary(dir: Option<&Path>, name: &str) -> PathBuf {
    binary_dir(dir).join(name)
}

/// Where [`workspace_binary`] looks: `dir`, else the running benchmark's folder.
pub fn binary_dir(dir: Option<&Path>) -> PathBuf {
    match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("target/release")),
    }
}

/// The repository root: the parent of this crate's folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ has a parent")
        .to_path_buf()
}
