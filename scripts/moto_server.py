"""moto's server, with one race and the per-message costs of its SQS fixed for the tests.

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

The rest made every request cost in proportion to the queue's depth, with a large
constant: the benchmark's backlog of 10,000 queued messages (BENCHMARKS.md, issue 36)
overloaded it, and a first try at 3,000 had posts refused. Each scan of the queue
asked the clock twice per message (`Message.visible`, `Message.delayed`: a datetime
each); here it reads it once per scan, with the same comparisons (the visible
messages, and the three ApproximateNumberOf... counts). `SendMessage` built the
queue's whole attribute map (those three counts: three scans per message sent) to read
`ContentBasedDeduplication`; here, while a message is sent, the three counts are not
computed (they are not read there). `DeleteMessage` built a list of receipt handles
per queued message to find the one deleted; here it compares the handles in place,
under the lock. Timed in-process on moto's backend with 10,000 queued (half delayed), on
a loaded 2-core machine, before -> after: SendMessage 1,155 -> 0.10 ms, ReceiveMessage of
10 548 -> 9 ms (most of it moto's receipt handles, whatever the depth), DeleteMessage
11 -> 0.04 ms, GetQueueAttributes (All) 1,269 -> 1.5 ms; the counts the same.

moto checks no IAM by default: any AssumeRole succeeds, even of a role that does not exist,
and credentials it issued may do anything. AWS destinations (docs/decisions/destinations.md)
must prove the refusals the service classifies, so two more rules, with moto's own policy
evaluation: an AssumeRole is refused (AccessDenied) unless the role exists and its trust policy
allows sts:AssumeRole with the request's conditions (sts:ExternalId); and a request signed with
credentials moto issued through AssumeRole is checked against the assumed role's policies
(SQS: the queue's ARN; EventBridge: the bus's; a queue that does not exist is left to SQS's own
NonExistentQueue), a role's inline policy read whether IAM (JSON text) or CloudFormation (a
dict) made it. The trust policy's principal is not checked: every caller of this moto is its
one default user. Requests signed with any other key are unchanged.

The service's own credentials must be refusable too, as AWS refuses a deactivated key: the
service's fault, never a customer's (docs/decisions/destinations.md, "Whose fault, and
destinations that cannot be turned on the service"). An STS request signed with an IAM
user's access key whose status is Inactive is answered InvalidClientTokenId (403), as AWS
answers it.

Started by scripts/emulators.sh (`moto_command`) in place of `moto_server`, for the shared
moto and for the one the fault test kills and restarts. Each patch checks that the code it
replaces is still the code it was written for: a moto upgrade that renames or rewrites it
stops the server at start, naming the patch, instead of silently testing unpatched moto.
"""

import fnmatch
import functools
import inspect
import json
import sys
import threading

import moto
from moto.server import main
from moto.sqs import models


def _require(condition, patch, what):
    if not condition:
        sys.exit(
            f"scripts/moto_server.py: the {patch} patch no longer applies to moto {moto.__version__}: "
            f"{what}. Review the patch against this moto (written for 5.2.5)."
        )


def _source(owner, name):
    member = inspect.getattr_static(owner, name, None)
    if isinstance(member, property):
        member = member.fget
    return inspect.getsource(member) if callable(member) else ""


_require(
    "had_receipt_handle" in _source(models.Queue, "delete_message")
    and "new_messages" in _source(models.Queue, "delete_message")
    and "_messages_lock" in _source(models.Queue, "__init__")
    and "_messages_lock" not in _source(models.Queue, "delete_message")
    and "def had_receipt_handle" in inspect.getsource(models.Message)
    and "self._old_receipt_handles" in _source(models.Message, "all_receipt_handles"),
    "delete_message",
    "Queue.delete_message, Queue._messages_lock or Message's receipt handles changed",
)
_retention = getattr(models.SQSBackend, "is_message_valid_based_on_retention_period", None)
_require(
    callable(_retention) and "get_queue_attributes" in inspect.getsource(_retention),
    "retention check",
    "SQSBackend.is_message_valid_based_on_retention_period changed",
)
_require(
    "current_time > self.visible_at" in _source(models.Message, "visible")
    and "current_time < self.delayed_until" in _source(models.Message, "delayed")
    and "message.visible and not message.delayed" in _source(models.Queue, "messages")
    and "m.delayed" in _source(models.Queue, "approximate_number_of_messages_delayed")
    and "not m.visible" in _source(models.Queue, "approximate_number_of_messages_not_visible")
    and "len(self.messages)" in _source(models.Queue, "approximate_number_of_messages"),
    "one clock per scan",
    "Message.visible/delayed or Queue.messages and its counts changed",
)
_COUNTS = (
    "approximate_number_of_messages",
    "approximate_number_of_messages_delayed",
    "approximate_number_of_messages_not_visible",
)
_require(
    'queue.attributes.get("ContentBasedDeduplication")' in _source(models.SQSBackend, "send_message")
    and all("ApproximateNumberOf" in a for a in models.Queue.BASE_ATTRIBUTES[:3])
    and "getattr(self, camelcase_to_underscores(attribute))" in _source(models.Queue, "attributes"),
    "send without counts",
    "SQSBackend.send_message or Queue.attributes changed",
)


def _locked_delete_message(self, receipt_handle):
    """Queue.delete_message under the queue's lock, the handle compared in place."""
    with self._messages_lock:
        if receipt_handle in self.deleted_messages:
            # Already deleted - gracefully handle deleting it again
            return
        for i, message in enumerate(self._messages):
            if (
                message.receipt_handle == receipt_handle
                or receipt_handle in message._old_receipt_handles
            ):
                break
        else:
            raise models.ReceiptHandleIsInvalid()
        # Receipt handles are unique: one message had it. A new list, as moto
        # builds, so a scan running beside this one sees the old one whole.
        self._messages = self._messages[:i] + self._messages[i + 1 :]
        self.pending_messages.discard(message)
        self.deleted_messages.update(message.all_receipt_handles)


models.Queue.delete_message = _locked_delete_message


def _retained(self, queue_name, message):
    queue = self.get_queue(queue_name)
    retain_until = queue.message_retention_period + message.sent_timestamp / 1000
    return retain_until > models.unix_time()


models.SQSBackend.is_message_valid_based_on_retention_period = _retained


# While this thread sends a message, the queue's three message counts are not
# computed: SendMessage builds the queue's attribute map for one other attribute.
_sending = threading.local()


def _messages(self):
    now = models.unix_time_millis()
    return [m for m in self._messages if now > m.visible_at and not now < m.delayed_until]


def _delayed(self):
    if getattr(_sending, "active", False):
        return None
    now = models.unix_time_millis()
    return sum(1 for m in self._messages if now < m.delayed_until)


def _not_visible(self):
    if getattr(_sending, "active", False):
        return None
    now = models.unix_time_millis()
    return sum(1 for m in self._messages if not now > m.visible_at)


def _visible(self):
    if getattr(_sending, "active", False):
        return None
    return len(self.messages)


models.Queue.messages = property(_messages)
models.Queue.approximate_number_of_messages = property(_visible)
models.Queue.approximate_number_of_messages_delayed = property(_delayed)
models.Queue.approximate_number_of_messages_not_visible = property(_not_visible)


def _without_counts(send):
    @functools.wraps(send)
    def sending(*args, **kwargs):
        outer = getattr(_sending, "active", False)
        _sending.active = True
        try:
            return send(*args, **kwargs)
        finally:
            _sending.active = outer

    return sending


models.SQSBackend.send_message = _without_counts(models.SQSBackend.send_message)
models.SQSBackend.send_message_batch = _without_counts(models.SQSBackend.send_message_batch)

from moto.core.authorization import ActionAuthenticatorMixin  # noqa: E402
from moto.core.exceptions import AccessDeniedError, InvalidClientTokenIdError  # noqa: E402
from moto.iam import access_control  # noqa: E402
from moto.iam import models as iam_models  # noqa: E402
from moto.iam.models import iam_backends  # noqa: E402
from moto.sts import models as sts_models  # noqa: E402
from moto.utilities.utils import get_partition  # noqa: E402

_require(
    "_create_access_key(role=role_arn)" in _source(sts_models.STSBackend, "assume_role")
    and "assumed_roles" in _source(sts_models.STSBackend, "assume_role")
    and "INITIAL_NO_AUTH_ACTION_COUNT"
    in _source(ActionAuthenticatorMixin, "_authenticate_and_authorize_action")
    and "collect_policies" in _source(access_control.IAMRequestBase, "check_action_permitted")
    and "assumed_roles" in _source(access_control.AssumedRoleAccessKey, "__init__")
    and "self.access_keys" in _source(iam_models.User, "__init__")
    and "self.status" in _source(iam_models.AccessKey, "__init__"),
    "IAM of assumed roles",
    "STSBackend.assume_role, the action authenticator or the IAM request's checks changed",
)

_assume_role = sts_models.STSBackend.assume_role


def _trusted_assume_role(self, region_name, role_session_name, role_arn, policy, duration, external_id):
    """AssumeRole of an existing role whose trust policy allows it with these conditions."""
    parts = role_arn.split(":")
    account = parts[4] if len(parts) > 5 else self.account_id
    iam = iam_backends[account][get_partition(region_name)]
    try:
        role = iam.get_role_by_arn(role_arn)
    except Exception:
        raise AccessDeniedError(user_arn=f"arn:aws:iam::{self.account_id}:user/moto", action="sts:AssumeRole")
    if not _trusts(role.assume_role_policy_document, external_id):
        raise AccessDeniedError(user_arn=f"arn:aws:iam::{self.account_id}:user/moto", action="sts:AssumeRole")
    return _assume_role(self, region_name, role_session_name, role_arn, policy, duration, external_id)


def _trusts(document, external_id):
    """Whether a trust policy allows sts:AssumeRole with `external_id`: an Allow of the
    action whose conditions are all met, and no Deny. Only the conditions a role for this
    service carries are understood (StringEquals and StringLike on sts:ExternalId); any other
    is taken as unmet, so a policy this cannot read trusts nobody."""
    if isinstance(document, str):
        document = json.loads(document)
    statements = document.get("Statement", [])
    if isinstance(statements, dict):
        statements = [statements]
    allowed = False
    for statement in statements:
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if not any(fnmatch.fnmatchcase("sts:AssumeRole", a) for a in actions):
            continue
        if statement.get("Effect") == "Deny" and _conditions_met(statement, external_id):
            return False
        if statement.get("Effect") == "Allow" and _conditions_met(statement, external_id):
            allowed = True
    return allowed


def _conditions_met(statement, external_id):
    for operator, keys in statement.get("Condition", {}).items():
        for key, expected in keys.items():
            expected = [expected] if isinstance(expected, str) else expected
            if key != "sts:ExternalId" or external_id is None:
                return False
            if operator == "StringEquals" and external_id not in expected:
                return False
            if operator == "StringLike" and not any(fnmatch.fnmatchcase(external_id, e) for e in expected):
                return False
            if operator not in ("StringEquals", "StringLike"):
                return False
    return True


sts_models.STSBackend.assume_role = _trusted_assume_role

_authorize = ActionAuthenticatorMixin._authenticate_and_authorize_action


def _access_key_id(headers):
    auth = headers.get("Authorization") or ""
    start = auth.find("Credential=")
    return auth[start + len("Credential="):].split("/")[0] if start >= 0 else None


def _assumed(key):
    for account in list(sts_models.sts_backends.values()):
        for backend in list(account.values()):
            if any(r.access_key_id == key for r in backend.assumed_roles):
                return True
    return False


def _inactive(key):
    """Whether `key` is an IAM user's access key that was deactivated."""
    for account in list(iam_backends.values()):
        for backend in list(account.values()):
            for user in list(backend.users.values()):
                for access_key in list(user.access_keys):
                    if access_key.access_key_id == key:
                        return access_key.status != "Active"
    return False


class _StsInvalidClientTokenId(InvalidClientTokenIdError):
    """InvalidClientTokenId in STS's own error shape (`<ErrorResponse><Error>`): moto's
    authentication errors nest it in `<Errors>`, which the AWS SDK for Rust does not read (it
    saw a 403 with no code)."""

    def __init__(self):
        super().__init__()
        self.description = (
            '<?xml version="1.0" encoding="utf-8"?>\n'
            '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error>'
            "<Type>Sender</Type><Code>InvalidClientTokenId</Code>"
            "<Message>The security token included in the request is invalid.</Message>"
            "</Error><RequestId>moto</RequestId></ErrorResponse>"
        )


def _authorize_assumed_roles(self, iam_request_cls, resource="*"):
    key = _access_key_id(self.headers)
    if key and getattr(self, "service_name", "") == "sts" and _inactive(key):
        raise _StsInvalidClientTokenId()
    if not key or not _assumed(key):
        return _authorize(self, iam_request_cls, resource)
    action = self._get_action()
    if action == "PutEvents":
        entries = self._get_param("Entries") or [{}]
        bus = entries[0].get("EventBusName") or "default"
        resource = bus if bus.startswith("arn:") else f"arn:aws:events:{self.region}:{self.current_account}:event-bus/{bus}"
    elif resource == "*" and getattr(self, "service_name", "") == "sqs":
        return None  # no such queue: SQS answers NonExistentQueue
    request = iam_request_cls(
        account_id=self.current_account,
        method=self.method,
        path=self.raw_path,
        data=self.data,
        body=self.raw_body,
        headers=self.headers,
        action=action,
    )
    # The signature is not recomputed: moto's SigV4 check does not survive every SDK's signing.
    request.check_action_permitted(resource)
    return None


ActionAuthenticatorMixin._authenticate_and_authorize_action = _authorize_assumed_roles

_require(
    'policy["policy_document"]' in _source(access_control.IAMPolicy, "__init__"),
    "IAM of assumed roles",
    "IAMPolicy.__init__ changed",
)
_policy_init = access_control.IAMPolicy.__init__


def _policy_of_any_form(self, policy):
    """A role's inline policy made by CloudFormation is kept as a dict, not the JSON text
    IAMPolicy reads (moto never evaluated one before these rules)."""
    if isinstance(policy, dict) and "policy_document" not in policy:
        policy = json.dumps(policy)
    _policy_init(self, policy)


access_control.IAMPolicy.__init__ = _policy_of_any_form

if __name__ == "__main__":
    sys.exit(main())
