//! The polling loop for queues that are read by the process itself (the
//! SQLite queue, SQS under `webhooks-local --backend aws`): lease due jobs
//! in batches and [`deliver`](super::deliver) up to `concurrency` at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};

use crate::app::App;
use crate::queue::{DeliveryQueue, Outbox};

/// Runs delivery for a queue until `shutdown` resolves. `app.delivery_wake`
/// is notified when new jobs are enqueued, so they go out without waiting
/// for the next poll.
pub async fn run_workers(
    app: Arc<App>,
    queue: Arc<dyn DeliveryQueue>,
    outbox: Arc<dyn Outbox>,
    concurrency: usize,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(concurrency));
    // When every permit is taken, wait for this many before leasing again.
    let batch = u32::try_from((concurrency / 4).max(1)).unwrap_or(1);
    let wake: Arc<Notify> = app.delivery_wake.clone();
    let visibility = app.config.delivery_timeout * 2 + Duration::from_secs(5);
    tokio::pin!(shutdown);
    loop {
        let free = permits.available_permits().clamp(1, 256);
        let per_subscription = app.in_flight.cap();
        let leases = match queue.receive(free, per_subscription, visibility).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the delivery queue");
                Vec::new()
            }
        };
        let idle = leases.is_empty();
        for lease in leases {
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => p.expect("semaphore is never closed"),
                _ = &mut shutdown => return,
            };
            let (app, queue, outbox) = (app.clone(), queue.clone(), outbox.clone());
            tokio::spawn(async move {
                if let Err(e) = super::deliver(&app, queue.as_ref(), outbox.as_ref(), &lease).await
                {
                    tracing::error!(error = %e, notification = %lease.job.id, "cannot settle a delivery");
                }
                drop(permit);
            });
        }
        if idle {
            tokio::select! {
                _ = wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = &mut shutdown => return,
            }
        } else if permits.available_permits() == 0 {
            // Saturated: lease the next batch as soon as a share of the
            // deliveries in flight is done, not at the next poll tick.
            tokio::select! {
                done = permits.acquire_many(batch) => drop(done),
                _ = &mut shutdown => return,
            }
        }
    }
}
