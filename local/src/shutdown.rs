//! Graceful shutdown of `webhooks-local serve` on SIGTERM (systemd,
//! Kubernetes, `docker stop`) or SIGINT (Ctrl-C): the server stops
//! accepting, the workers stop leasing, and the requests and deliveries in
//! flight get `WEBHOOKS_SHUTDOWN_GRACE` to finish and record their outcome.
//! What still runs then is abandoned to the queue's lease, as a crash
//! would leave it: attempted again after the restart.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// A future that resolves on the next SIGTERM or SIGINT. The handlers are
/// installed by this call (inside the runtime), so a signal that comes
/// before the future is first polled still counts.
pub fn requested() -> std::io::Result<impl Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! { _ = terminate.recv() => {}, _ = interrupt.recv() => {} }
        })
    }
    #[cfg(not(unix))]
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

/// Waits, for at most `grace` or until a second signal, for the deliveries
/// (closed by the workers once they stop leasing) and the HTTP server
/// (already told to stop) to finish.
pub async fn drain(grace: Duration, deliveries: TaskTracker, http: JoinHandle<()>) {
    tracing::info!(
        in_flight = deliveries.len(),
        ?grace,
        "stopping: the requests and deliveries in flight may finish"
    );
    let again = requested();
    let finished = async {
        deliveries.wait().await;
        let _ = http.await;
    };
    tokio::select! {
        done = tokio::time::timeout(grace, finished) => {
            if done.is_err() {
                tracing::warn!(abandoned = deliveries.len(), ?grace, "shutdown grace over: the deliveries still in flight are left to the queue");
            }
        }
        Some(()) = async { again.ok()?.await; Some(()) } => {
            tracing::warn!(abandoned = deliveries.len(), "second signal: the deliveries still in flight are left to the queue");
        }
    }
}
