// The lifetime of the page shown: one AbortController for everything it
// asks, so leaving it (or showing it again) aborts its requests; timers
// that stop with it; polling that never overlaps itself; and "latest"
// slots, so that an older answer never overwrites a newer one.

/** A view's context: the route's ids and helpers bound to its lifetime. */
export function view(params) {
  const controller = new AbortController();
  const timers = [];
  const ctx = {
    params,
    /** Aborted when the view is left or shown again. */
    signal: controller.signal,
    alive: () => !controller.signal.aborted,
    /** Calls `fn` every `ms` while the view is shown; a tick while the previous call still runs is skipped. */
    every(ms, fn) {
      let running = false;
      timers.push(setInterval(async () => {
        if (running || !ctx.alive()) return;
        running = true;
        try {
          await fn();
        } finally {
          running = false;
        }
      }, ms));
    },
    /**
     * A slot for one kind of request (the list, the chart…): each call
     * aborts the previous one of the slot and returns the signal for the
     * new one. Once that signal is aborted (a newer request of the slot, or
     * the view left), its answer must be dropped.
     */
    latest() {
      let last = null;
      return () => {
        if (last) last.abort();
        last = new AbortController();
        return AbortSignal.any([controller.signal, last.signal]);
      };
    },
    stop() {
      controller.abort();
      timers.forEach(clearInterval);
    },
  };
  return ctx;
}
