//! `webhooks-local`'s delivery workers: the polling loop for the queues the
//! process reads itself (the SQLite queue, SQS under `--backend aws`). It
//! leases due jobs in batches and hands each to the one delivery use case,
//! [`delivery::deliver`], up to `concurrency` at once. (The Lambda runtime
//! is handed its batches by SQS: `lambda::queues`.)

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use webhook_core::app::App;
use webhook_core::delivery;
use webhook_core::queue::{DeliveryQueue, Outbox};

/// Leases and delivers until `stop` is cancelled. Every delivery runs in
/// `deliveries`, which is closed once nothing more will be leased: the
/// caller waits on it to let the calls in flight finish and settle (a
/// graceful shutdown). `app.delivery_wake` is notified when new jobs are
/// enqueued, so they go out without waiting for the next poll.
pub async fn run_workers(
    app: Arc<App>,
    queue: Arc<dyn DeliveryQueue>,
    outbox: Arc<dyn Outbox>,
    concurrency: usize,
    stop: CancellationToken,
    deliveries: TaskTracker,
) {
    let permits = Arc::new(Semaphore::new(concurrency));
    // When every permit is taken, wait for this many before leasing again.
    let batch = u32::try_from((concurrency / 4).max(1)).unwrap_or(1);
    let wake: Arc<Notify> = app.delivery_wake.clone();
    // A queue that caps leases (SQLite) leases nothing more of a
    // subscription at its cap until one of its deliveries is settled, and a
    // FIFO queue nothing more of a line: each settled delivery wakes the
    // loop, so a busy subscription is limited by its cap and its callback,
    // not by the poll interval.
    let freed = Arc::new(Notify::new());
    let wake_on_settle = queue.wakes_on_settle();
    let visibility = app.config.delivery_timeout * 2 + Duration::from_secs(5);
    while !stop.is_cancelled() {
        let free = permits.available_permits().clamp(1, 256);
        let per_subscription = app.in_flight.cap();
        // Not raced with `stop`: a receive is short (SQS long-polls 1 s) and
        // the jobs it leased would otherwise sit out their lease.
        let leases = match queue.receive(free, per_subscription, visibility).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(part = "queue", error = %e, "cannot read the delivery queue");
                Vec::new()
            }
        };
        let idle = leases.is_empty();
        for lease in leases {
            // At most `free` were leased, so a permit is there (or soon is).
            let permit = permits.clone().acquire_owned().await;
            let permit = permit.expect("semaphore is never closed");
            let (app, queue, outbox) = (app.clone(), queue.clone(), outbox.clone());
            let freed = freed.clone();
            deliveries.spawn(async move {
                if let Err(e) = delivery::deliver(&app, queue.as_ref(), outbox.as_ref(), &lease).await
                {
                    tracing::error!(part = e.part(), error = %e, notification = %lease.job.id, "cannot settle a delivery");
                }
                drop(permit);
                if wake_on_settle {
                    freed.notify_one();
                }
            });
        }
        if idle {
            tokio::select! {
                _ = wake.notified() => {}
                _ = freed.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = stop.cancelled() => {}
            }
        } else if permits.available_permits() == 0 {
            // Saturated: lease the next batch as soon as a share of the
            // deliveries in flight is done, not at the next poll tick.
            tokio::select! {
                done = permits.acquire_many(batch) => drop(done),
                _ = stop.cancelled() => {}
            }
        }
    }
    // Nothing more will be leased: what was is in `deliveries`.
    deliveries.close();
}
