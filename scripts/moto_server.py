"""moto's server, with one race and one quadratic cost of its SQS fixed for the tests.

moto 5.2.5's `Queue.delete_message` rebuilds the queue's message list without
the lock that `Queue.add_message` appends under, so a message sent while a
delete runs is lost (seen: 5 of 2,000 notifications in local/tests/it/isolation.rs,
sends racing the deletes of parked jobs). Real SQS loses nothing; the tests
must not either.

Its `ReceiveMessage` checks each returned message's retention period through
`get_queue_attributes`, which computes every attribute of the queue, including
ApproximateNumberOfMessages, a scan of the whole queue: the cost grows with the
square of the queue's depth (py-spy: two thirds of moto's time in the
1,000-notification kill test of local/tests/it/delivery.rs, enough to starve it on
a loaded 2-core machine). The same rule here reads the one attribute it needs.

Started by scripts/emulators.sh (`moto_command`) in place of `moto_server`, for the shared
moto and for the one the fault test kills and restarts. Each patch checks that the code it
replaces is still the code it was written for: a moto upgrade that renames or rewrites it
stops the server at start, naming the patch, instead of silently testing unpatched moto.
"""

import functools
import inspect
import sys

import moto
from moto.server import main
from moto.sqs import models


def _require(condition, patch, what):
    if not condition:
        sys.exit(
            f"scripts/moto_server.py: the {patch} patch no longer applies to moto {moto.__version__}: "
            f"{what}. Review the patch against this moto (written for 5.2.5)."
        )


_require(
    callable(getattr(models.Queue, "delete_message", None))
    and "_messages_lock" in inspect.getsource(models.Queue.__init__)
    and "_messages_lock" not in inspect.getsource(models.Queue.delete_message),
    "delete_message lock",
    "Queue.delete_message or Queue._messages_lock changed",
)
_retention = getattr(models.SQSBackend, "is_message_valid_based_on_retention_period", None)
_require(
    callable(_retention) and "get_queue_attributes" in inspect.getsource(_retention),
    "retention check",
    "SQSBackend.is_message_valid_based_on_retention_period changed",
)

_delete_message = models.Queue.delete_message


@functools.wraps(_delete_message)
def _locked_delete_message(self, receipt_handle):
    with self._messages_lock:
        return _delete_message(self, receipt_handle)


models.Queue.delete_message = _locked_delete_message


def _retained(self, queue_name, message):
    queue = self.get_queue(queue_name)
    retain_until = queue.message_retention_period + message.sent_timestamp / 1000
    return retain_until > models.unix_time()


models.SQSBackend.is_message_valid_based_on_retention_period = _retained

if __name__ == "__main__":
    sys.exit(main())
