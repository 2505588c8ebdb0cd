"""moto's server, with one race of its SQS fixed for the tests.

moto 5.2.5's `Queue.delete_message` rebuilds the queue's message list without
the lock that `Queue.add_message` appends under, so a message sent while a
delete runs is lost (seen: 5 of 2,000 notifications in local/tests/isolation.rs,
sends racing the deletes of parked jobs). Real SQS loses nothing; the tests
must not either. Started by scripts/emulators.sh in place of `moto_server`.
"""

import functools
import sys

from moto.server import main
from moto.sqs import models

_delete_message = models.Queue.delete_message


@functools.wraps(_delete_message)
def _locked_delete_message(self, receipt_handle):
    with self._messages_lock:
        return _delete_message(self, receipt_handle)


models.Queue.delete_message = _locked_delete_message

if __name__ == "__main__":
    sys.exit(main())
