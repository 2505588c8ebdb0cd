#!/usr/bin/env python3
"""The first deploy, rehearsed offline (issue 37; docs/deploy-aws.md, "What is proven before
you deploy, and what only your account can show").

    deploy-rehearsal.py --bin-dir DIR [--webhooks-local BIN]   the rehearsal and the check
    deploy-rehearsal.py --bin-dir DIR ... --self-test          the same, then proof that each
                                                               check can fail

Run with the tools venv's python (aws-sam-translator, boto3) and moto running
(AWS_ENDPOINT_URL_SQS, scripts/emulators.sh `start_moto`); DIR holds the function binaries,
webhooks-local (the callback receiver, tokens, signatures) and lambda-runtime (the fake Lambda
Runtime API of bench/src/runtime_api.rs): `cargo build -p webhooks-local -p <function>...` and
`cargo build -p webhooks-bench --bin lambda-runtime`. What it does:

1. Transforms template.yaml offline with aws-sam-translator, as `sam deploy` would after
   `sam package` (CodeUri rewritten to an S3 artifact), with the rehearsal's parameters (plus
   any `--parameter KEY=VALUE`, e.g. FixedSourceAddresses=true), and once more with
   ApiType=http.
2. Creates each stack in moto's CloudFormation: conditions evaluated, the resource types moto
   cannot create set aside (SET_ASIDE names each and what proves it instead), then reads the
   stack's outputs, each function's environment and its role's inline policies back.
3. Runs the real function binaries behind the fake Lambda Runtime API, each with the
   environment the stack gives it (plus the test settings in TEST_ENV only), against the
   stack's own tables and queues: the authorizer, create a subscription (the handshake
   reaches a receiver on this machine), post an event to EventsQueue, ingest it, deliver it
   (the receiver checks the signature), read it back by message id and in the history, and
   every other API function once. Each binary records its AWS calls
   (WEBHOOKS_RECORD_AWS_CALLS, shared/src/aws/call_log.rs).
4. Least privilege: every recorded call (IAM action, table or index or queue ARN, the
   partition keys for dynamodb:LeadingKeys) must be allowed by its function's inline policies
   (conditions included); every statement must be used by a call or listed in KEPT with the
   reason; no `*` action, no `*` resource; the managed policies SAM attaches are listed in
   MANAGED with their reasons. And no function may sts:AssumeRole a role of the stack's own
   account, with any external id, while a customer's role in another account stays
   assumable with an id of the stack's prefix (check_own_account: Allow and Deny statements,
   their resources and their sts:ExternalId conditions evaluated).
5. Fixed source addresses (check_fixed_addresses): every callback POST came from a function
   of VPC_FUNCTIONS; with FixedSourceAddresses=true those functions are in the stack's two
   private subnets, each routed to a NAT gateway of its own zone whose Elastic IP is in the
   FixedSourceAddresses output, their roles allow what Lambda does to attach them (ENI
   actions on their subnets, security group and interfaces) and no other role has an EC2
   action; with it false, no function is in a VPC, no role names EC2, and no output or EC2
   resource exists.

--self-test then shows each check failing: one action removed from one policy, one table ARN
replaced by the other table's, one function's environment variable renamed, the Deny of the
stack's own roles removed from deliver-notifications' policy; and, on FixedSourceAddresses=true
stacks (created, not run): deliver-notifications' ENI policy removed, create-subscription
taken out of the VPC, a private subnet routed to the other zone's NAT gateway.
"""

import argparse
import base64
import copy
import fnmatch
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
import zipfile
from pathlib import Path

from harness import Receiver, mint_token, signature_ok

ROOT = Path(__file__).resolve().parent.parent
ACCOUNT = "123456789012"
REGION = "us-east-1"
JWT_SECRET = "rehearsal-hs256-secret"
ORG = "org-1"
ARTIFACT_BUCKET = "rehearsal-artifacts"

# The rehearsal's parameters: an external identity provider with an HS256 secret (the tests
# mint tokens with it; Cognito cannot be created here, see SET_ASIDE), and a one-step retry
# schedule (the failing callback's job reaches the dead-letter queue inside the rehearsal:
# deliver-notifications' DLQ statement is used).
PARAMETERS = {
    "IdentityProvider": "external",
    "JwtHs256Secret": JWT_SECRET,
    "RetrySchedule": "1s",
    "ExpiryNotice": "7d",
}

# Settings the stack does not give a function, added by the rehearsal only: the fake
# Runtime API, the emulator endpoint and dummy credentials, callbacks on this machine over
# http (a deployment's callbacks are public https), and the call recorder.
TEST_ENV = (
    "AWS_LAMBDA_RUNTIME_API",
    "AWS_LAMBDA_FUNCTION_NAME",
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_EC2_METADATA_DISABLED",
    "WEBHOOKS_ALLOW_HTTP_CALLBACKS",
    "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS",
    "WEBHOOKS_RECORD_AWS_CALLS",
    "PATH",
)

# The resource types moto's CloudFormation cannot create (or not as SAM writes them), and
# what proves each instead.
SET_ASIDE = {
    "AWS::ApiGateway::": "the REST API (SAM's OpenAPI Body; moto needs a Name): cfn-lint and "
    "`sam validate --lint` (test.sh, template lint); its paths against routes.rs "
    "(shared/tests/it/architecture.rs, check-docs.py); the authorizer and every function run "
    "here with API Gateway's events. Gateway responses, usage plan and key: only an account",
    "AWS::ApiGatewayV2::": "the HTTP API option: cfn-lint; its authorizer (payload 2.0, API "
    "keys in the table) runs here against the ApiType=http stack",
    "AWS::Cognito::": "the user pool and its clients: cfn-lint; the pre-token trigger "
    "(shared/tests/it/lambda_pre_token.rs); sign-in only in an account",
    "AWS::CloudWatch::Alarm": "cfn-lint; the metrics they watch are AWS's own (SQS, Lambda)",
    "AWS::CloudWatch::Dashboard": "cfn-lint; the EMF lines it charts (telemetry/emf.rs tests)",
    "AWS::Lambda::EventInvokeConfig": "cfn-lint (remind-expiring is idempotent, "
    "reminders.rs tests)",
    "AWS::Lambda::Permission": "cfn-lint; who may invoke a function is API Gateway's, "
    "EventBridge's and Cognito's business: only an account",
    "AWS::SNS::Subscription": "cfn-lint (an e-mail address confirms it)",
}

# Managed policies SAM attaches to every role it generates, and why each is kept.
MANAGED = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": "logs:CreateLogGroup, "
    "CreateLogStream, PutLogEvents on `*`: SAM attaches it to every role it generates; a "
    "narrower one (the function's log group) needs roles written by hand (docs/deploy-aws.md)",
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess": "X-Ray's PutTraceSegments and "
    "PutTelemetryRecords support no resource-level permission: `*` is the narrowest",
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole": "Lambda's event "
    "source mapping polls the queue with the function's role (ReceiveMessage, DeleteMessage, "
    "GetQueueAttributes on `*`): SAM attaches it to a function with an SQS event; a narrower "
    "one needs roles written by hand (docs/deploy-aws.md)",
}

# Statements no recorded call uses, kept with their reason: (function, the statement's
# actions, its resource's logical id) -> why.
KEPT = {
    ("DeliverNotificationsFunction", "ChangeMessageVisibility,DeleteMessage,SendMessage", "DeliveryQueue"):
        "a failed attempt's retry sent again with its delay, deferrals (in-flight cap, open "
        "breaker) and parked jobs queued again: not reached by the rehearsal's one failed "
        "attempt; shared/tests/aws/lambda_queue_events/ drives them against moto",
    ("RemindExpiringFunction", "GetItem,PutItem,BatchWriteItem", "MessagesTable"):
        "the outbox of a reminder, for an organization with an operational subscription "
        "(reminders.rs, shared/tests/aws/lambda_queue_events/); the rehearsal's has none",
    ("RemindExpiringFunction", "SendMessage", "DeliveryQueue"):
        "the same reminder's delivery job",
    ("RemindExpiringFunction", "SendMessage", "OrderedDeliveryQueue"):
        "the same reminder's delivery job, for an ordered operational subscription",
    ("DeliverNotificationsFunction", "ChangeMessageVisibility,SendMessage", "OrderedDeliveryQueue"):
        "an ordered notification's retry or deferral kept in its line (its visibility), and an "
        "operational notification to an ordered subscription: the rehearsal's ordered "
        "notification is delivered at once; shared/tests/aws/lambda_queue_events/ drives "
        "the retries against moto",
    ("DeliverNotificationsFunction", "SendMessage", "OrderedDeliveryDeadLetterQueue"):
        "an ordered notification given up on (the same test)",
    ("CreateSubscriptionFunction", "AssumeRole", "arn:aws:iam::*:role/*"):
        "an AWS destination's validation assumes the customer's role (only with an external id "
        "of the stack's prefix): the rehearsal has no customer account; "
        "local/tests/it/destinations.rs and shared/tests/aws/lambda_destinations.rs prove it "
        "against moto's STS, which scripts/moto_server.py makes check the trust policy",
    ("DeliverNotificationsFunction", "AssumeRole", "arn:aws:iam::*:role/*"):
        "the same, to deliver into an AWS destination (the same tests)",
    ("RecoverNotificationsFunction", "SendMessage", "OrderedDeliveryQueue"):
        "the recover of an ordered subscription's failed notifications: the rehearsal's "
        "failing subscription is unordered",
}


# The functions that call customers, and so run in the VPC with FixedSourceAddresses=true:
# the rehearsal checks that every callback POST comes from one of them.
VPC_FUNCTIONS = {
    "CreateSubscriptionFunction": "the callback handshake, an AWS destination's validation "
    "(its STS AssumeRole and test send)",
    "DeliverNotificationsFunction": "notification POSTs, sends into AWS destinations",
}

# What Lambda does with a VPC function's role when it creates or updates the function (no
# call of the function's own code): proved by check_fixed_addresses, not by recorded calls.
LAMBDA_ENI_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)

# Actions IAM authorizes on no narrower resource than `*`, with the reason.
UNSCOPED = {
    "ec2:DescribeNetworkInterfaces": "EC2's Describe actions support no resource-level "
    "permission; Lambda requires it on `*` (Lambda developer guide, configuration-vpc)",
    "ec2:DescribeSubnets": "the same",
}


def log(*args):
    print("deploy-rehearsal:", *args, flush=True)


class Failure(Exception):
    pass


# ------------------------------------------------------------------------------------------
# 1. The template, transformed and made creatable


def transform(text, parameters):
    from samtranslator.translator.transform import transform as sam_transform
    from samtranslator.yaml_helper import yaml_parse

    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    template = yaml_parse(text)
    # What `sam package` does: the code is an artifact in a bucket.
    template["Globals"]["Function"]["CodeUri"] = f"s3://{ARTIFACT_BUCKET}/functions.zip"

    class NoManagedPolicies:
        def load(self):
            return {}

    import logging

    logging.getLogger("samtranslator").setLevel(logging.ERROR)
    return sam_transform(template, dict(parameters), NoManagedPolicies())


def refs(x):
    """The logical ids an expression names."""
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "Ref" and isinstance(v, str):
                yield v
            elif k == "Fn::GetAtt":
                yield v[0] if isinstance(v, list) else v.split(".")[0]
            elif k == "Fn::Sub":
                s = v if isinstance(v, str) else v[0]
                for m in re.findall(r"\$\{([^}!]+)\}", s):
                    yield m.split(".")[0]
                yield from refs(v)
            else:
                yield from refs(v)
    elif isinstance(x, list):
        for v in x:
            yield from refs(v)


def creatable(cfn, parameters):
    """The template as CloudFormation would create it with these parameters (conditions
    evaluated), the types moto cannot create set aside. Returns it, with what was set aside."""
    t = copy.deepcopy(cfn)
    values = {k: v.get("Default") for k, v in t.get("Parameters", {}).items()}
    values.update(parameters)

    def value(x):
        if isinstance(x, dict) and "Ref" in x:
            return values[x["Ref"]]
        return x

    conditions = {}

    def cond(x):
        (k, v), = x.items()
        if k == "Fn::Equals":
            return value(v[0]) == value(v[1])
        if k == "Fn::Not":
            return not cond(v[0])
        if k == "Fn::And":
            return all(cond(c) for c in v)
        if k == "Fn::Or":
            return any(cond(c) for c in v)
        if k == "Condition":
            return conditions[v] if v in conditions else cond(t["Conditions"][v])
        raise Failure(f"condition {x} not understood")

    for name, c in t.get("Conditions", {}).items():
        conditions[name] = cond(c)
    novalue = {"Ref": "AWS::NoValue"}

    def fold(x):
        if isinstance(x, dict):
            if len(x) == 1 and "Fn::If" in x:
                c, a, b = x["Fn::If"]
                return fold(a if conditions[c] else b)
            return {k: fold(v) for k, v in x.items() if fold(v) != novalue}
        if isinstance(x, list):
            return [fold(v) for v in x if fold(v) != novalue]
        return x

    for section in ("Resources", "Outputs"):
        for name in [k for k, r in t.get(section, {}).items() if not conditions.get(r.get("Condition"), True)]:
            del t[section][name]
        t[section] = fold(t.get(section, {}))
    t.pop("Rules", None)  # checked by `sam validate`; moto does not read them
    aside = {}
    for name, r in list(t["Resources"].items()):
        for prefix, proof in SET_ASIDE.items():
            if r["Type"].startswith(prefix):
                aside[name] = r["Type"]
                del t["Resources"][name]
    outputs_aside = []
    for name, o in list(t.get("Outputs", {}).items()):
        if set(refs(o)) & set(aside):
            outputs_aside.append(name)
            del t["Outputs"][name]
    for name, r in t["Resources"].items():
        if "DependsOn" in r:
            d = r["DependsOn"] if isinstance(r["DependsOn"], list) else [r["DependsOn"]]
            r["DependsOn"] = [x for x in d if x not in aside]
        left = set(refs(r)) & set(aside)
        if left:
            raise Failure(f"{name} needs {sorted(left)}, which moto cannot create")
    return t, aside, outputs_aside


# ------------------------------------------------------------------------------------------
# 2. The stack in moto


def client(service):
    import boto3

    return boto3.client(service, endpoint_url=os.environ["AWS_ENDPOINT_URL_SQS"], region_name=REGION)


def create_stack(name, template, parameters):
    s3 = client("s3")
    try:
        s3.create_bucket(Bucket=ARTIFACT_BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\n")
    s3.put_object(Bucket=ARTIFACT_BUCKET, Key="functions.zip", Body=buf.getvalue())
    cf = client("cloudformation")
    declared = template.get("Parameters", {})
    cf.create_stack(
        StackName=name,
        TemplateBody=json.dumps(template),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items() if k in declared],
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
    )
    deadline = time.time() + 60
    while True:
        stack = cf.describe_stacks(StackName=name)["Stacks"][0]
        if not stack["StackStatus"].endswith("IN_PROGRESS"):
            break
        if time.time() > deadline:
            raise Failure(f"stack {name}: still {stack['StackStatus']} after 60 s")
        time.sleep(0.2)
    if stack["StackStatus"] != "CREATE_COMPLETE":
        failed = [
            f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason')}"
            for e in cf.describe_stack_events(StackName=name)["StackEvents"]
            if "FAILED" in e["ResourceStatus"]
        ]
        raise Failure(f"stack {name}: {stack['StackStatus']} {failed}")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    physical = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cf.describe_stack_resources(StackName=name)["StackResources"]
    }
    lam, iam = client("lambda"), client("iam")
    functions = {}
    for logical, r in template["Resources"].items():
        if r["Type"] != "AWS::Lambda::Function":
            continue
        conf = lam.get_function_configuration(FunctionName=physical[logical])
        role = conf["Role"].rsplit("/", 1)[1]
        policies = [
            iam.get_role_policy(RoleName=role, PolicyName=p)["PolicyDocument"]
            for p in iam.list_role_policies(RoleName=role)["PolicyNames"]
        ]
        policies = [policy_document(p) for p in policies]
        managed = [p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]]
        functions[logical] = {
            "name": conf["FunctionName"],
            "binary": r.get("Metadata", {}).get("BuildProperties", {}).get("Binary"),
            # Lambda's variables are strings (moto keeps a Number parameter's int).
            "env": {k: str(v) for k, v in conf.get("Environment", {}).get("Variables", {}).items()},
            # What Lambda itself sets, from the function's configuration.
            "lambda_env": {
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(conf["MemorySize"]),
                "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
                "AWS_LAMBDA_LOG_GROUP_NAME": (conf.get("LoggingConfig") or {}).get("LogGroup", ""),
                "AWS_LAMBDA_LOG_STREAM_NAME": "rehearsal",
                "_HANDLER": conf.get("Handler", ""),
            },
            "policies": policies,
            "managed": managed,
            "subnets": (conf.get("VpcConfig") or {}).get("SubnetIds") or [],
            "security_groups": (conf.get("VpcConfig") or {}).get("SecurityGroupIds") or [],
        }
    return {"name": name, "outputs": outputs, "physical": physical, "functions": functions,
            "resources": template["Resources"]}


def policy_document(p):
    """A role policy as moto answers it: a dict, JSON (URL-encoded or not), or the repr of
    the dict its CloudFormation resolved."""
    if isinstance(p, dict):
        return p
    p = urllib.parse.unquote(p)
    try:
        return json.loads(p)
    except ValueError:
        import ast

        return ast.literal_eval(p)


def delete_stack(name):
    try:
        client("cloudformation").delete_stack(StackName=name)
    except Exception:
        pass


# ------------------------------------------------------------------------------------------
# 3. The functions, run as Lambda runs them


class Function:
    """A function's binary under the fake Lambda Runtime API (bench/src/runtime_api.rs, through
    its `lambda-runtime` binary in the bin dir: events in, answers out, one JSON a line)."""

    def __init__(self, logical, spec, bin_dir, extra_env, log_dir):
        self.logical = logical
        self.spec = spec
        binary = Path(bin_dir) / spec["binary"]
        runtime = Path(bin_dir) / "lambda-runtime"
        for path, package in ((binary, spec["binary"]), (runtime, "webhooks-bench --bin lambda-runtime")):
            if not path.exists():
                raise Failure(f"{logical}: no binary {path} (cargo build -p {package})")
        env = {k: v for k, v in os.environ.items() if k in TEST_ENV}
        env.update(spec["lambda_env"])
        env.update(spec["env"])
        env.update(extra_env)
        env["AWS_LAMBDA_FUNCTION_NAME"] = spec["name"]
        self.log = Path(log_dir) / f"{logical}.log"
        self.process = subprocess.Popen([str(runtime), "--log", str(self.log), str(binary)], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self.answer()
        if "error" in ready:
            raise Failure(f"{logical} ({spec['binary']}) failed at init: {ready['error']}; "
                          f"log: {self.log}: {self.log.read_text()[-1500:]}")

    def answer(self):
        line = self.process.stdout.readline()
        if not line:
            raise Failure(f"{self.logical}: lambda-runtime exited: {self.process.wait()}")
        return json.loads(line)

    def invoke(self, event):
        self.process.stdin.write(json.dumps(event) + "\n")
        self.process.stdin.flush()
        answer = self.answer()
        if not answer["ok"]:
            raise Failure(f"{self.logical}: invocation error {answer['error']}")
        return answer["response"]

    def stop(self):
        self.process.stdin.close()
        self.process.wait()


def sample(name):
    return json.loads((ROOT / "events" / f"{name}.json").read_text())


def api_event(context, method, path, resource, path_parameters=None, query=None, body=None):
    """An API Gateway REST proxy event, as the stage sends it after the authorizer."""
    event = sample("create-subscription-ok")
    event["httpMethod"] = method
    event["path"] = path
    event["resource"] = resource
    event["pathParameters"] = path_parameters
    event["queryStringParameters"] = query
    event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
    event["body"] = json.dumps(body) if body is not None else None
    event["requestContext"].update(httpMethod=method, resourcePath=resource, path=f"/prod{path}")
    event["requestContext"]["authorizer"] = dict(context, principalId=context["sub"], integrationLatency=0)
    return event


def answer(response, expect, what):
    status = response.get("statusCode")
    body = response.get("body") or ""
    if response.get("isBase64Encoded"):
        body = base64.b64decode(body).decode()
    if status != expect:
        raise Failure(f"{what}: {status}, expected {expect}: {body[:500]}")
    return json.loads(body) if body.strip().startswith(("{", "[")) else body


def sqs_event(queue_arn, messages):
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {k: str(v) for k, v in m.get("Attributes", {}).items()},
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }


def receive(sqs, url, want, seconds=15):
    """Up to `want` messages of the queue at `url` (the event source mapping's poll)."""
    got, deadline = [], time.time() + seconds
    while len(got) < want and time.time() < deadline:
        r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                AttributeNames=["All"], VisibilityTimeout=60)
        got += r.get("Messages", [])
    return got


def queue_arn(url):
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{url.rsplit('/', 1)[1]}"


def verify_signature(webhooks_local, secret, post):
    if not signature_ok(webhooks_local, secret, post):
        raise Failure("the notification's signature does not verify with the subscription's secret")


def rehearse(stack, bin_dir, work, webhooks_local=None, http_api=False):
    """Runs the functions against the stack. Returns nothing; raises Failure."""
    fns = stack["functions"]
    outputs = stack["outputs"]
    record = {"WEBHOOKS_RECORD_AWS_CALLS": str(Path(work) / "calls.jsonl"),
              "WEBHOOKS_ALLOW_HTTP_CALLBACKS": "true", "WEBHOOKS_ALLOW_PRIVATE_CALLBACKS": "true",
              "AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL_SQS"]}
    running = {}
    # (function, callback POSTs before its invocation, after it): check_callers.
    stack["invocations"] = []

    class Counted:
        def __init__(self, f):
            self.f = f

        def invoke(self, event):
            before = len(receiver.posts)
            try:
                return self.f.invoke(event)
            finally:
                stack["invocations"].append((self.f.logical, before, len(receiver.posts)))

    def fn(logical):
        if logical not in running:
            if logical not in fns:
                raise Failure(f"the stack has no {logical}")
            running[logical] = Function(logical, fns[logical], bin_dir, record, work)
        return Counted(running[logical])

    receiver = Receiver(webhooks_local, work)
    sqs = client("sqs")
    try:
        token = mint_token(webhooks_local, JWT_SECRET, ORG)
        if http_api:
            # The HTTP API option: its keys in the stack's subscriptions table, created as the
            # operator does (webhooks-local api-keys), read by the authorizer.
            env = dict(os.environ, WEBHOOKS_SUBSCRIPTIONS_TABLE=outputs["SubscriptionsTableName"],
                       WEBHOOKS_MESSAGES_TABLE=outputs["MessagesTableName"],
                       AWS_ENDPOINT_URL=os.environ["AWS_ENDPOINT_URL_SQS"])
            env.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
            out = subprocess.run([webhooks_local, "api-keys", "create", "--org", ORG], env=env,
                                 capture_output=True, text=True, check=True).stdout
            key = out.strip()  # stdout holds the key alone
            event = json.loads(json.dumps(sample("authorizer-http-request"))
                               .replace("TOKEN_PLACEHOLDER", token).replace("API_KEY_PLACEHOLDER", key))
            auth = fn("AuthorizerFunction").invoke(event)
            if auth.get("isAuthorized") is not True or auth["context"].get("orgId") != ORG:
                raise Failure(f"the authorizer refused the HTTP API's key and token: {auth}")
            log("HTTP API: the authorizer allowed a key of the stack's table and a token")
            return
        event = json.loads(json.dumps(sample("authorizer-request")).replace("TOKEN_PLACEHOLDER", token))
        auth = fn("AuthorizerFunction").invoke(event)
        if auth.get("policyDocument", {}).get("Statement", [{}])[0].get("Effect") != "Allow":
            raise Failure(f"the authorizer denied a valid token: {auth}")
        context = auth["context"]
        if context.get("orgId") != ORG:
            raise Failure(f"the authorizer's context names {context.get('orgId')}, not {ORG}")

        def call(logical, method, path, resource, expect, **kw):
            return answer(fn(logical).invoke(api_event(context, method, path, resource, **kw)), expect,
                          f"{logical} {method} {path}")

        # A subscription: the handshake reaches the receiver.
        expires = int(time.time() * 1000) + 3 * 86_400_000  # inside ExpiryNotice: remind-expiring
        ok_filter = f"/orgId/{ORG}/department/dep-1/message?direction=inbound"
        created = call("CreateSubscriptionFunction", "POST", "/webhooksubscription", "/webhooksubscription", 200,
                       body={"uri": f"{receiver.base}/hook", "eventFilters": [ok_filter],
                             "expiresDateInMillies": expires})
        sub_id = created["id"]
        # Updated with another filter (the filter index items of the old one are deleted).
        call("CreateSubscriptionFunction", "POST", "/webhooksubscription", "/webhooksubscription", 200,
             body={"uri": f"{receiver.base}/hook", "eventFilters": [ok_filter, f"/orgId/{ORG}/department/dep-2/message?direction=inbound"],
                   "expiresDateInMillies": expires})
        call("CreateSubscriptionFunction", "POST", "/webhooksubscription", "/webhooksubscription", 200,
             body={"uri": f"{receiver.base}/hook", "eventFilters": [ok_filter], "expiresDateInMillies": expires})
        failing = call("CreateSubscriptionFunction", "POST", "/webhooksubscription", "/webhooksubscription", 200,
                       body={"uri": f"{receiver.base}/fail", "eventFilters": [ok_filter],
                             "expiresDateInMillies": expires})
        # An ordered subscription: its notifications go to the FIFO queue.
        ordered = call("CreateSubscriptionFunction", "POST", "/webhooksubscription", "/webhooksubscription", 200,
                       body={"uri": f"{receiver.base}/ordered", "eventFilters": [ok_filter],
                             "expiresDateInMillies": expires, "ordered": True})
        if ordered.get("ordered") is not True:
            raise Failure(f"create-subscription did not keep ordered: {ordered}")
        sid = {"id": sub_id}
        listed = call("ListSubscriptionsFunction", "GET", "/webhooksubscription/all", "/webhooksubscription/all", 200)
        ids = {s["id"] for s in listed.get("content", [])}
        if not {sub_id, failing["id"]} <= ids:
            raise Failure(f"list-subscriptions does not list the subscriptions created: {listed}")
        call("GetSubscriptionFunction", "GET", f"/webhooksubscription/{sub_id}", "/webhooksubscription/{id}", 200,
             path_parameters=sid)
        secret = call("GetSubscriptionSecretFunction", "GET", f"/webhooksubscription/{sub_id}/secret",
                      "/webhooksubscription/{id}/secret", 200, path_parameters=sid)["key"]
        log(f"created subscription {sub_id} (handshake to {receiver.base}/hook), listed and read it")

        # An event, posted as a producer posts it, ingested, delivered.
        envelope = json.loads(sample("ingest-events-sqs")["Records"][0]["body"])
        envelope["eventId"] = f"evt-{uuid.uuid4()}"
        message_id = envelope["message"]["id"] = f"msg-{uuid.uuid4()}"
        sqs.send_message(QueueUrl=outputs["EventsQueueUrl"], MessageBody=json.dumps(envelope))
        events = receive(sqs, outputs["EventsQueueUrl"], 1)
        if len(events) != 1:
            raise Failure(f"the event posted to EventsQueueUrl is not there ({len(events)} messages)")
        r = fn("IngestEventsFunction").invoke(sqs_event(queue_arn(outputs["EventsQueueUrl"]), events))
        if r.get("batchItemFailures"):
            raise Failure(f"ingest-events failed the event: {r}")
        jobs = receive(sqs, outputs["DeliveryQueueUrl"], 2)
        if len(jobs) != 2:
            raise Failure(f"ingest-events queued {len(jobs)} jobs on DeliveryQueueUrl, not 2")
        r = fn("DeliverNotificationsFunction").invoke(sqs_event(queue_arn(outputs["DeliveryQueueUrl"]), jobs))
        delivered = receiver.wait_for(lambda path, _: path == "/hook", 15)
        if not delivered:
            raise Failure("deliver-notifications posted nothing to the callback")
        verify_signature(webhooks_local, secret, delivered)
        log("an event posted to EventsQueue was ingested, delivered and its signature verified")
        if r.get("batchItemFailures"):
            raise Failure(f"deliver-notifications failed records: {r}")
        line = receive(sqs, outputs["OrderedDeliveryQueueUrl"], 1)
        if len(line) != 1:
            raise Failure(f"ingest-events queued {len(line)} jobs on OrderedDeliveryQueueUrl, not 1")
        r = fn("DeliverNotificationsFunction").invoke(
            sqs_event(queue_arn(outputs["OrderedDeliveryQueueUrl"]), line))
        if not receiver.wait_for(lambda path, _: path == "/ordered", 15) or r.get("batchItemFailures"):
            raise Failure(f"deliver-notifications did not deliver the ordered notification: {r}")
        ordered_nid = json.loads(line[0]["Body"])["id"]
        # Lambda's mapping deletes a record left out of batchItemFailures: the line's next can go.
        sqs.delete_message(QueueUrl=outputs["OrderedDeliveryQueueUrl"], ReceiptHandle=line[0]["ReceiptHandle"])
        log("the ordered subscription's notification went through the FIFO queue and was delivered")

        # Read back: by message id, and in the history.
        call("GetMessageFunction", "GET", f"/message/getmessagebyid/{message_id}",
             "/message/getmessagebyid/{messageId}", 200, path_parameters={"messageId": message_id})
        history = call("ListNotificationsFunction", "GET", f"/webhooksubscription/{sub_id}/notifications",
                       "/webhooksubscription/{id}/notifications", 200, path_parameters=sid)
        entries = history.get("content", history if isinstance(history, list) else [])
        if not entries:
            raise Failure(f"the history of {sub_id} is empty: {history}")
        notification = entries[0]
        nid = notification.get("notificationId") or notification.get("id") or notification.get("uuid")
        if notification.get("status") != "DELIVERED":
            raise Failure(f"the notification is {notification.get('status')}, not DELIVERED: {notification}")
        log(f"read back: message {message_id}, notification {nid} DELIVERED in the history")
        call("GetNotificationFunction", "GET", f"/webhooksubscription/{sub_id}/notifications/{nid}",
             "/webhooksubscription/{id}/notifications/{uuid}", 200, path_parameters={"id": sub_id, "uuid": nid})
        identity = call("GetDestinationIdentityFunction", "GET", "/webhooksubscription/destination-identity",
                        "/webhooksubscription/destination-identity", 200)
        prefix = stack["functions"]["GetDestinationIdentityFunction"]["env"]["WEBHOOKS_DESTINATION_EXTERNAL_ID_PREFIX"]
        if not identity.get("externalId", "").startswith(f"{prefix}-") or identity.get("accountId") != ACCOUNT:
            raise Failure(f"get-destination-identity: not this stack's external id and account: {identity}")
        call("GetDeliveryStatsFunction", "GET", f"/webhooksubscription/{sub_id}/stats",
             "/webhooksubscription/{id}/stats", 200, path_parameters=sid)
        call("ResendNotificationFunction", "POST", f"/webhooksubscription/{sub_id}/notifications/{nid}/resend",
             "/webhooksubscription/{id}/notifications/{uuid}/resend", 202,
             path_parameters={"id": sub_id, "uuid": nid})
        oid = ordered["id"]
        call("ResendNotificationFunction", "POST", f"/webhooksubscription/{oid}/notifications/{ordered_nid}/resend",
             "/webhooksubscription/{id}/notifications/{uuid}/resend", 202,
             path_parameters={"id": oid, "uuid": ordered_nid})
        if len(receive(sqs, outputs["OrderedDeliveryQueueUrl"], 1)) != 1:
            raise Failure("the ordered notification's resend is not on OrderedDeliveryQueueUrl")
        fid = failing["id"]
        now = int(time.time() * 1000)
        call("RecoverNotificationsFunction", "POST", f"/webhooksubscription/{fid}/recover",
             "/webhooksubscription/{id}/recover", 202, path_parameters={"id": fid},
             body={"since": now - 3_600_000})
        call("RotateSubscriptionSecretFunction", "POST", f"/webhooksubscription/{sub_id}/secret/rotate",
             "/webhooksubscription/{id}/secret/rotate", 200, path_parameters=sid)
        fn("RemindExpiringFunction").invoke(sample("remind-expiring-scheduled"))
        call("DeleteSubscriptionFunction", "DELETE", f"/webhooksubscription/{fid}", "/webhooksubscription/{id}",
             204, path_parameters={"id": fid})
        page = fn("ConsoleFunction").invoke(sample("console-page"))
        if page.get("statusCode") != 200:
            raise Failure(f"console: {page.get('statusCode')}")
        log("every other API function answered (get, list, secret, rotate, resend, recover, stats, "
            "destination identity, "
            "delete, console) and remind-expiring ran")
        stack["posts"] = len(receiver.posts)
    finally:
        for f in running.values():
            f.stop()
        receiver.stop()


# ------------------------------------------------------------------------------------------
# 4. Least privilege


def iam_calls(record):
    """(IAM action, resource ARN, partition keys) of one recorded request."""
    target = record["target"]
    body = record.get("body") or {}
    service, _, op = target.partition(".")
    out = []
    if service.startswith("DynamoDB"):
        def arn(table, index=None):
            a = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"
            return f"{a}/index/{index}" if index else a

        def pk(table, item):
            # Both tables' partition key is `pk` (template.yaml, aws/dynamodb/keys.rs).
            v = (item or {}).get("pk", {})
            return [v.get("S", v.get("N", json.dumps(v)))] if v else []

        if op in ("GetItem", "DeleteItem", "UpdateItem"):
            out.append((f"dynamodb:{op}", arn(body["TableName"]), pk(body["TableName"], body.get("Key"))))
        elif op == "PutItem":
            out.append(("dynamodb:PutItem", arn(body["TableName"]), pk(body["TableName"], body.get("Item"))))
        elif op in ("Query", "Scan"):
            keys = []
            expr = body.get("KeyConditionExpression", "")
            names = body.get("ExpressionAttributeNames", {})
            for name, placeholder in re.findall(r"(#?\w+)\s*=\s*(:\w+)", expr):
                if names.get(name, name) == "pk":
                    keys += pk(body["TableName"], {"pk": body["ExpressionAttributeValues"][placeholder]})
            out.append((f"dynamodb:{op}", arn(body["TableName"], body.get("IndexName")), keys))
        elif op in ("BatchGetItem", "BatchWriteItem"):
            for table, items in body["RequestItems"].items():
                keys = []
                if op == "BatchGetItem":
                    keys = [k for key in items["Keys"] for k in pk(table, key)]
                else:
                    for w in items:
                        item = w.get("PutRequest", {}).get("Item") or w.get("DeleteRequest", {}).get("Key")
                        keys += pk(table, item)
                out.append((f"dynamodb:{op}", arn(table), keys))
        elif op in ("TransactWriteItems", "TransactGetItems"):
            kinds = {"ConditionCheck": "ConditionCheckItem", "Put": "PutItem", "Update": "UpdateItem",
                     "Delete": "DeleteItem", "Get": "GetItem"}
            for item in body["TransactItems"]:
                (kind, spec), = item.items()
                out.append((f"dynamodb:{kinds[kind]}", arn(spec["TableName"]),
                            pk(spec["TableName"], spec.get("Key") or spec.get("Item"))))
        else:
            out.append((f"dynamodb:{op}", arn(body.get("TableName", "*")), []))
    elif service == "AmazonSQS":
        action = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage",
                  "ChangeMessageVisibilityBatch": "ChangeMessageVisibility"}.get(op, op)
        url = body.get("QueueUrl") or body.get("QueueName", "")
        out.append((f"sqs:{action}", queue_arn(url), []))
    else:
        out.append((target or record.get("uri"), "?", []))
    return out


def as_list(x):
    return x if isinstance(x, list) else [x]


def condition_holds(condition, keys):
    for operator, tests in (condition or {}).items():
        for key, patterns in tests.items():
            if key != "dynamodb:LeadingKeys":
                return False  # a condition this check does not understand never holds
            patterns = as_list(patterns)
            match = {"ForAllValues:StringLike": fnmatch.fnmatchcase,
                     "ForAllValues:StringEquals": lambda a, b: a == b}.get(operator)
            if match is None or not all(any(match(k, p) for p in patterns) for k in keys):
                return False
    return True


def allowed_by(statement, action, resource, keys):
    if statement.get("Effect") != "Allow":
        return False
    if not any(fnmatch.fnmatch(action.lower(), a.lower()) for a in as_list(statement.get("Action", []))):
        return False
    if not any(fnmatch.fnmatchcase(resource, r) for r in as_list(statement.get("Resource", []))):
        return False
    return condition_holds(statement.get("Condition"), keys)


def check_least_privilege(stacks, recordings, policy_stacks=None):
    """Every failure, as lines naming the function and the call. Calls are checked against
    the role of their own stack (or of `policy_stacks`, the same template changed: tables and
    queues are compared by logical id); statements (the same in every stack) must be used by
    a call of some stack."""
    problems = []
    used = {}
    policy_stacks = policy_stacks or stacks
    for stack, policy_stack, records in zip(stacks, policy_stacks, recordings):
        by_name = {spec["name"]: logical for logical, spec in stack["functions"].items()}
        logical_of = logical_names(stack)
        for record in records:
            logical = by_name.get(record["function"])
            if logical is None:
                problems.append(f"a call from {record['function']}, not a function of the stack")
                continue
            statements = [
                dict(s, Resource=[logical_arn(policy_stack, r) for r in as_list(s.get("Resource", []))])
                for p in policy_stack["functions"][logical]["policies"] for s in as_list(p["Statement"])
            ]
            for action, resource, keys in iam_calls(record):
                hits = [i for i, s in enumerate(statements)
                        if allowed_by(s, action, logical_arn(stack, resource), keys)]
                used.setdefault(logical, set()).update(hits)
                if not hits:
                    problems.append(
                        f"{logical} ({stack['functions'][logical]['binary']}): {action} on "
                        f"{logical_of(resource)} ({resource}), partition keys {keys[:3]}, is not allowed "
                        f"by its role (the call: {record['target']})")
    stack = policy_stacks[0]
    logical_of = logical_names(stack)
    for logical, spec in stack["functions"].items():
        statements = [s for p in spec["policies"] for s in as_list(p["Statement"])]
        for i, s in enumerate(statements):
            actions = as_list(s.get("Action", []))
            resources = as_list(s.get("Resource", []))
            if any(a == "*" or a.endswith(":*") for a in actions):
                problems.append(f"{logical}: statement {i} allows every action ({actions})")
            if "*" in resources and not all(a in UNSCOPED for a in actions):
                problems.append(f"{logical}: statement {i} allows {actions} on every resource")
            # A Deny grants nothing: no call has to use it.
            if s.get("Effect") == "Deny":
                continue
            # Lambda's own use of a VPC function's role: check_fixed_addresses.
            if all(a in LAMBDA_ENI_ACTIONS for a in actions):
                continue
            if i not in used.get(logical, set()):
                key = (logical, ",".join(a.split(":")[1] for a in actions), ",".join(map(logical_of, resources)))
                if key not in KEPT:
                    problems.append(f"{logical}: statement {i} ({key[1]} on {key[2]}) is used by no "
                                    f"recorded call and not listed in KEPT with a reason: {key}")
        for arn in spec["managed"]:
            if arn not in MANAGED:
                problems.append(f"{logical}: managed policy {arn} is not listed in MANAGED with a reason")
    return problems + check_own_account(stack)


def external_id_condition_holds(condition, external_id):
    """Whether a statement's conditions hold for an AssumeRole with `external_id`: only
    StringEquals and StringLike on sts:ExternalId are understood; any other never holds."""
    for operator, tests in (condition or {}).items():
        for key, patterns in tests.items():
            match = {"StringLike": fnmatch.fnmatchcase, "StringEquals": lambda a, b: a == b}.get(operator)
            if key != "sts:ExternalId" or match is None:
                return False
            if not any(match(external_id, p) for p in as_list(patterns)):
                return False
    return True


def may_assume(statements, role_arn, external_id):
    """IAM's verdict on sts:AssumeRole of `role_arn` with `external_id`: an Allow that matches
    and no Deny that matches (a Deny's conditions, if any, must hold too)."""
    def matches(s):
        return (any(fnmatch.fnmatch("sts:assumerole", a.lower()) for a in as_list(s.get("Action", [])))
                and any(fnmatch.fnmatchcase(role_arn, r) for r in as_list(s.get("Resource", [])))
                and external_id_condition_holds(s.get("Condition"), external_id))
    if any(s.get("Effect") == "Deny" and matches(s) for s in statements):
        return False
    return any(s.get("Effect") == "Allow" and matches(s) for s in statements)


def check_own_account(stack):
    """No function may assume a role of the stack's own account (a tenant could otherwise
    point a destination at the service's own queues through a role that trusts the account),
    with an id of the stack's prefix or any other; a function that assumes roles still may
    assume a customer's, in another account, with an id of the prefix (else the check proves
    nothing)."""
    problems = []
    prefix = stack["name"]
    own = f"arn:aws:iam::{ACCOUNT}:role/service-role-trusting-its-account"
    customer = "arn:aws:iam::222222222222:role/webhooks-delivery"
    for logical, spec in stack["functions"].items():
        statements = [s for p in spec["policies"] for s in as_list(p["Statement"])]
        if not any(may_assume(statements, customer, f"{prefix}-{u}") for u in ("x", uuid.uuid4())):
            continue
        for external_id in (f"{prefix}-{uuid.uuid4()}", "anything"):
            if may_assume(statements, own, external_id):
                problems.append(f"{logical}: may sts:AssumeRole {own}, a role of the stack's own "
                                f"account, with external id {external_id!r}")
    return problems


def check_callers(stack, vpc_functions=VPC_FUNCTIONS):
    """Every callback POST of the rehearsal arrived while a function of `vpc_functions` ran:
    no other function calls customers, so none other needs the fixed addresses."""
    problems = []
    for i in range(stack.get("posts", 0)):
        during = [f for f, before, after in stack["invocations"] if before <= i < after]
        if not during:
            problems.append(f"callback POST {i} arrived while no function ran")
        elif during[0] not in vpc_functions:
            problems.append(f"{during[0]} called a customer's callback (POST {i}) but is not in "
                            f"VPC_FUNCTIONS: with FixedSourceAddresses=true it would not use the "
                            f"published addresses")
    return problems


def check_fixed_addresses(stack, on):
    """The network FixedSourceAddresses makes, read back from moto's EC2 (on), or its absence
    (off). Returns the problems, each naming the function or resource."""
    problems = []
    fns, outputs = stack["functions"], stack["outputs"]

    def statements(spec):
        return [s for p in spec["policies"] for s in as_list(p["Statement"])]

    def ec2_actions(spec):
        return sorted({a for s in statements(spec) for a in as_list(s.get("Action", []))
                       if a.lower().startswith("ec2:")})

    if not on:
        for logical, spec in fns.items():
            if spec["subnets"]:
                problems.append(f"{logical}: in subnets {spec['subnets']} with FixedSourceAddresses=false")
            if ec2_actions(spec):
                problems.append(f"{logical}: its role allows {ec2_actions(spec)} with FixedSourceAddresses=false")
        ec2_resources = sorted(k for k, r in stack["resources"].items() if r["Type"].startswith("AWS::EC2::"))
        if ec2_resources:
            problems.append(f"EC2 resources with FixedSourceAddresses=false: {ec2_resources}")
        if "FixedSourceAddresses" in outputs:
            problems.append("the FixedSourceAddresses output exists with FixedSourceAddresses=false")
        return problems

    ec2 = client("ec2")

    def routes_of(subnet_id):
        """The routes of the subnet's table. moto's CloudFormation records no association for
        a SubnetRouteTableAssociation: which table is read from the template as created, its
        routes from EC2."""
        def physical(v):
            return stack["physical"].get(v.get("Ref")) if isinstance(v, dict) else v
        tables = [physical(r["Properties"]["RouteTableId"]) for r in stack["resources"].values()
                  if r["Type"] == "AWS::EC2::SubnetRouteTableAssociation"
                  and physical(r["Properties"]["SubnetId"]) == subnet_id]
        if not tables:
            return [], []
        found = ec2.describe_route_tables(RouteTableIds=tables)["RouteTables"]
        return [t["RouteTableId"] for t in found], [r for t in found for r in t["Routes"]]

    addresses = [a for a in outputs.get("FixedSourceAddresses", "").split(",") if a]
    if len(set(addresses)) != 2:
        problems.append(f"the FixedSourceAddresses output is {addresses!r}, not two addresses")
    nat_ips = set()
    arn = f"arn:aws:ec2:{REGION}:{ACCOUNT}"
    for logical, spec in fns.items():
        if logical not in VPC_FUNCTIONS:
            if spec["subnets"] or ec2_actions(spec):
                problems.append(f"{logical}: in subnets {spec['subnets']}, role's EC2 actions "
                                f"{ec2_actions(spec)}: only VPC_FUNCTIONS belong in the VPC")
            continue
        if len(spec["subnets"]) != 2 or len(spec["security_groups"]) != 1:
            problems.append(f"{logical}: subnets {spec['subnets']}, security groups "
                            f"{spec['security_groups']}: not in the egress VPC's two private subnets")
            continue
        subnets = ec2.describe_subnets(SubnetIds=spec["subnets"])["Subnets"]
        if len({s["AvailabilityZone"] for s in subnets}) != 2:
            problems.append(f"{logical}: its subnets are in one availability zone")
        for subnet in subnets:
            where = f"{logical}: subnet {subnet['SubnetId']} ({subnet['AvailabilityZone']})"
            tables, all_routes = routes_of(subnet["SubnetId"])
            routes = [r for r in all_routes if r.get("DestinationCidrBlock") == "0.0.0.0/0"]
            if [r for r in routes if r.get("GatewayId", "").startswith("igw-")]:
                problems.append(f"{where}: routed to an internet gateway (a public subnet)")
            nats = [r["NatGatewayId"] for r in routes if r.get("NatGatewayId")]
            if len(nats) != 1:
                problems.append(f"{where}: default routes to NAT gateways {nats}, not one")
                continue
            nat = ec2.describe_nat_gateways(NatGatewayIds=nats)["NatGateways"][0]
            nat_subnet = ec2.describe_subnets(SubnetIds=[nat["SubnetId"]])["Subnets"][0]
            if nat_subnet["AvailabilityZone"] != subnet["AvailabilityZone"]:
                problems.append(f"{where}: routed to NAT gateway {nat['NatGatewayId']} of another zone "
                                f"({nat_subnet['AvailabilityZone']})")
            nat_ips.update(a.get("PublicIp") for a in nat.get("NatGatewayAddresses", []))
            if not any(r.get("GatewayId", "").startswith("igw-") and r.get("DestinationCidrBlock") == "0.0.0.0/0"
                       for r in routes_of(nat["SubnetId"])[1]):
                problems.append(f"{where}: NAT gateway {nat['NatGatewayId']}'s subnet has no route to the internet")
            endpoints = ec2.describe_vpc_endpoints(
                Filters=[{"Name": "service-name", "Values": [f"com.amazonaws.{REGION}.dynamodb"]}])["VpcEndpoints"]
            if not any(t in e.get("RouteTableIds", []) for e in endpoints for t in tables):
                problems.append(f"{where}: no DynamoDB gateway endpoint on its route table")
        group = ec2.describe_security_groups(GroupIds=spec["security_groups"])["SecurityGroups"][0]
        if group.get("IpPermissions"):
            problems.append(f"{logical}: security group {group['GroupId']} lets traffic in: {group['IpPermissions']}")
        # What Lambda does with the role to attach the function (else the deploy fails).
        needed = [(a, f"{arn}:subnet/{s}") for s in spec["subnets"]
                  for a in ("ec2:CreateNetworkInterface",)]
        needed += [("ec2:CreateNetworkInterface", f"{arn}:security-group/{spec['security_groups'][0]}"),
                   ("ec2:CreateNetworkInterface", f"{arn}:network-interface/eni-0123"),
                   ("ec2:DescribeNetworkInterfaces", "*"), ("ec2:DescribeSubnets", "*"),
                   ("ec2:DeleteNetworkInterface", f"{arn}:network-interface/eni-0123"),
                   ("ec2:AssignPrivateIpAddresses", f"{arn}:network-interface/eni-0123"),
                   ("ec2:UnassignPrivateIpAddresses", f"{arn}:network-interface/eni-0123")]
        for action, resource in needed:
            if not any(allowed_by(s, action, resource, []) for s in statements(spec)):
                problems.append(f"{logical}: its role does not allow {action} on {resource}, which "
                                f"Lambda needs to attach it to its subnets")
    if nat_ips != set(addresses):
        problems.append(f"the NAT gateways' addresses {sorted(nat_ips)} are not the output's {addresses}")
    return problems


def logical_arn(stack, arn):
    """`arn` with the stack's physical table and queue names replaced by their logical ids."""
    for logical, physical in stack["physical"].items():
        name = physical.rsplit("/", 1)[-1]
        if name and (arn.endswith(f"/{name}") or arn.endswith(f":{name}") or f"/{name}/" in arn):
            return arn.replace(name, logical)
    return arn


def logical_names(stack):
    """A table or queue ARN (or name, or URL) -> its logical id in the template."""
    names = {physical.rsplit("/", 1)[-1]: logical for logical, physical in stack["physical"].items()}

    def name(resource):
        last = resource.rsplit("/", 1)[-1] if ":table/" in resource else resource.rsplit(":", 1)[-1]
        last = last.rsplit("/", 1)[-1]
        return names.get(last, resource)

    return name


# ------------------------------------------------------------------------------------------


def run(text, bin_dir, webhooks_local, work, label):
    """Both stacks rehearsed from template text; returns (stacks, recordings)."""
    stacks, recordings = [], []
    for i, extra in enumerate([{}, {"ApiType": "http"}]):
        parameters = dict(PARAMETERS, **extra)
        cfn = transform(text, parameters)
        template, aside, outputs_aside = creatable(cfn, parameters)
        name = f"webhooks-{label}-{i}-{uuid.uuid4().hex[:6]}"
        log(f"{name}: {len(cfn['Resources'])} resources transformed ({extra or 'default API'}), "
            f"{len(aside)} set aside ({', '.join(sorted(set(aside.values())))}), outputs set aside: "
            f"{', '.join(outputs_aside) or 'none'}")
        stack = create_stack(name, template, parameters)
        log(f"{name}: CREATE_COMPLETE, outputs {sorted(stack['outputs'])}")
        on = parameters.get("FixedSourceAddresses") == "true"
        stack_work = Path(work) / name
        stack_work.mkdir()
        try:
            problems = check_fixed_addresses(stack, on)
            if problems:
                raise Failure("fixed source addresses: " + "; ".join(problems))
            rehearse(stack, bin_dir, stack_work, webhooks_local, http_api="ApiType" in extra)
            problems = check_callers(stack)
            if problems:
                raise Failure("; ".join(problems))
        finally:
            delete_stack(name)
        in_vpc = sorted(k for k, f in stack["functions"].items() if f["subnets"])
        log(f"{name}: fixed source addresses {'on: ' + stack['outputs']['FixedSourceAddresses'] if on else 'off'}; "
            f"functions in the VPC: {', '.join(in_vpc) or 'none'}; callback POSTs: {stack.get('posts', 0)}, "
            f"each from one of {', '.join(sorted(VPC_FUNCTIONS))}")
        calls = stack_work / "calls.jsonl"
        records = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
        stacks.append(stack)
        recordings.append(records)
    return stacks, recordings


def summary(stacks, recordings):
    for stack, records in zip(stacks, recordings):
        by_name = {spec["name"]: logical for logical, spec in stack["functions"].items()}
        seen = {}
        for r in records:
            for action, resource, _ in iam_calls(r):
                seen.setdefault(by_name.get(r["function"], r["function"]), set()).add(
                    f"{action} {resource.rsplit(':', 1)[-1]}")
        for logical in sorted(seen):
            log(f"  {logical}: {', '.join(sorted(seen[logical]))}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--webhooks-local", default=None)
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--parameter", action="append", default=[], metavar="KEY=VALUE",
                        help="a template parameter over the rehearsal's, e.g. FixedSourceAddresses=true")
    args = parser.parse_args()
    for p in args.parameter:
        key, sep, value = p.partition("=")
        if not sep:
            sys.exit(f"deploy-rehearsal: --parameter {p!r} is not KEY=VALUE")
        PARAMETERS[key] = value
    if "AWS_ENDPOINT_URL_SQS" not in os.environ:
        sys.exit("deploy-rehearsal: moto is not running (source scripts/emulators.sh; start_moto)")
    webhooks_local = args.webhooks_local or str(Path(args.bin_dir) / "webhooks-local")
    text = (ROOT / "template.yaml").read_text()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="deploy-rehearsal-") as work:
        try:
            stacks, recordings = run(text, args.bin_dir, webhooks_local, work, "main")
        except Failure as e:
            sys.exit(f"deploy-rehearsal: FAILED: {e}")
        log(f"{sum(map(len, recordings))} AWS calls recorded:")
        summary(stacks, recordings)
        problems = check_least_privilege(stacks, recordings)
        if problems:
            sys.exit("deploy-rehearsal: least privilege FAILED:\n  " + "\n  ".join(problems))
        assuming = [logical for logical, spec in stacks[0]["functions"].items()
                    if may_assume([s for p in spec["policies"] for s in as_list(p["Statement"])],
                                  "arn:aws:iam::222222222222:role/r", f"{stacks[0]['name']}-x")]
        log(f"least privilege: every call allowed by its function's role, every statement used "
            f"(Lambda's ENI actions: check_fixed_addresses), "
            f"no `*` but {', '.join(UNSCOPED)} ({len(MANAGED)} managed policies listed with reasons); the functions that "
            f"assume customers' roles ({', '.join(sorted(assuming))}) may assume none of the "
            f"stack's own account")
        if args.self_test:
            self_test(text, stacks, recordings, args.bin_dir, webhooks_local, work)
    log(f"passed in {time.time() - started:.1f} s")


def self_test(text, stacks, recordings, bin_dir, webhooks_local, work):
    def stack_with(mutated, label):
        parameters = PARAMETERS
        template, _, _ = creatable(transform(mutated, parameters), parameters)
        name = f"webhooks-{label}-{uuid.uuid4().hex[:6]}"
        stack = create_stack(name, template, parameters)
        delete_stack(name)
        return stack

    def expect(problems, *words):
        hit = [p for p in problems if all(w in p for w in words)]
        if not hit:
            sys.exit(f"deploy-rehearsal: self-test FAILED: no failure naming {words}: {problems}")
        log(f"self-test: {hit[0]}")

    # One action removed from one policy.
    block = "      LoggingConfig:\n        LogGroup: !Ref IngestEventsLogGroup"
    assert block in text
    start = text.index(block)
    section = text[start:text.index("      Events:", start)]
    mutated_section = section.replace("                - dynamodb:PutItem\n", "", 1)
    assert mutated_section != section
    mutated = text[:start] + mutated_section + text[start + len(section):]
    stack = stack_with(mutated, "no-putitem")
    expect(check_least_privilege(stacks[:1], recordings[:1], [stack]), "IngestEventsFunction", "dynamodb:PutItem")

    # One table ARN replaced by the other table's.
    start = text.index("  GetMessageFunction:")
    section = text[start:text.index("      Events:", start)]
    mutated_section = section.replace("!GetAtt MessagesTable.Arn", "!GetAtt SubscriptionsTable.Arn")
    assert mutated_section != section
    mutated = text[:start] + mutated_section + text[start + len(section):]
    stack = stack_with(mutated, "wrong-table")
    expect(check_least_privilege(stacks[:1], recordings[:1], [stack]), "GetMessageFunction", "dynamodb:GetItem",
           "MessagesTable")

    # The Deny of the stack's own roles removed from deliver-notifications' policy.
    start = text.index("  DeliverNotificationsFunctionRole:")
    section = text[start:text.index("      Tags:", start)]
    deny = ("              - Effect: Deny\n                Action: sts:AssumeRole\n"
            "                Resource: !Sub \"arn:${AWS::Partition}:iam::${AWS::AccountId}:role/*\"\n")
    mutated_section = section.replace(deny, "", 1)
    assert mutated_section != section
    mutated = text[:start] + mutated_section + text[start + len(section):]
    stack = stack_with(mutated, "own-roles")
    expect(check_own_account(stack), "DeliverNotificationsFunction", "stack's own account")

    # One function's environment variable renamed: the rehearsal itself fails, naming it.
    start = text.index("  IngestEventsFunction:")
    section = text[start:text.index("      Policies:", start)]
    mutated_section = section.replace("WEBHOOKS_DELIVERY_QUEUE_URL:", "WEBHOOKS_DELIVERY_QUEUE:", 1)
    assert mutated_section != section
    mutated = text[:start] + mutated_section + text[start + len(section):]
    try:
        run(mutated, bin_dir, webhooks_local, Path(work), "renamed-env")
    except Failure as e:
        if "IngestEventsFunction" not in str(e):
            sys.exit(f"deploy-rehearsal: self-test FAILED: the renamed variable failed elsewhere: {e}")
        log(f"self-test: renamed WEBHOOKS_DELIVERY_QUEUE_URL of ingest-events: {str(e)[:300]}")
    else:
        sys.exit("deploy-rehearsal: self-test FAILED: the rehearsal passed with a variable renamed")

    # A callback POST from a function left out of VPC_FUNCTIONS.
    expect(check_callers(stacks[0], {"CreateSubscriptionFunction": ""}), "DeliverNotificationsFunction",
           "VPC_FUNCTIONS")

    # Fixed source addresses: stacks created with the option on (whatever the run's), not run.
    on = dict(PARAMETERS, FixedSourceAddresses="true")

    def fixed_addresses(mutated, label, *, off_too=False):
        template, _, _ = creatable(transform(mutated, on), on)
        name = f"webhooks-{label}-{uuid.uuid4().hex[:6]}"
        stack = create_stack(name, template, on)
        try:
            return check_fixed_addresses(stack, True), off_too and check_fixed_addresses(stack, False)
        finally:
            delete_stack(name)

    def mutate(anchor, end, old, new):
        start = text.index(anchor)
        stop = text.index(end, start)
        section = text[start:stop]
        assert old in section, (anchor, old)
        return text[:start] + section.replace(old, new, 1) + text[stop:]

    problems, off_problems = fixed_addresses(text, "fixed", off_too=True)
    if problems:
        sys.exit(f"deploy-rehearsal: self-test FAILED: the FixedSourceAddresses=true stack: {problems}")
    log("self-test: a FixedSourceAddresses=true stack passes check_fixed_addresses")
    expect(off_problems, "with FixedSourceAddresses=false")
    # deliver-notifications' ENI policy left out (its condition never true here).
    expect(fixed_addresses(mutate("  DeliverNotificationsFunctionRole:", "      Tags:",
                                  "- UseFixedSourceAddresses", "- UseHttpApi"), "no-eni")[0],
           "DeliverNotificationsFunction", "ec2:CreateNetworkInterface")
    # create-subscription out of the VPC.
    expect(fixed_addresses(mutate("  CreateSubscriptionFunction:", "      Events:",
                                  "- UseFixedSourceAddresses", "- UseHttpApi"), "no-vpc")[0],
           "CreateSubscriptionFunction", "not in the egress VPC")
    # Zone B's private subnet routed to zone A's NAT gateway.
    expect(fixed_addresses(mutate("  EgressPrivateRouteB:", "\n\n", "EgressNatGatewayB", "EgressNatGatewayA"),
                           "cross-zone")[0], "another zone")
    log("self-test: each check fails when it should")


if __name__ == "__main__":
    main()
