//! A customer's AWS account in moto, for the AWS destinations' tests
//! (docs/decisions/destinations.md): its role, queues and event bus, made
//! and read as the customer would, with moto's account header instead of
//! the customer's credentials. Plain HTTP: the tests need no IAM SDK.

use serde_json::{json, Value};

/// The customer's account id (the service's is moto's default, [`SERVICE_ACCOUNT`]).
pub const ACCOUNT: &str = "222222222222";
/// The service's own account: moto's default, the account of the credentials
/// `webhooks-local` runs with in the tests.
pub const SERVICE_ACCOUNT: &str = "123456789012";
pub const REGION: &str = "us-east-1";

/// moto's endpoint, or a panic naming the command that starts it.
pub fn moto() -> String {
    crate::emulators::require(crate::emulators::SQS)
}

/// What `webhooks-local` needs to reach moto's STS and EventBridge too
/// (SQS's endpoint is in the environment already).
pub fn server_env() -> Vec<(&'static str, String)> {
    let moto = moto();
    vec![
        ("AWS_ENDPOINT_URL_STS", moto.clone()),
        ("AWS_ENDPOINT_URL_EVENTBRIDGE", moto.clone()),
        ("AWS_ENDPOINT_URL_SQS", moto),
        ("AWS_REGION", REGION.to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
    ]
}

/// The customer's account in moto (or, as an attacker would name it, the
/// service's own: [`Customer::service`]).
pub struct Customer {
    http: reqwest::Client,
    moto: String,
    account: &'static str,
}

fn scope(service: &str) -> String {
    format!(
        "AWS4-HMAC-SHA256 Credential=test/20260101/{REGION}/{service}/aws4_request, \
         SignedHeaders=host, Signature=0"
    )
}

fn form_encode(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

impl Default for Customer {
    fn default() -> Self {
        Self::new()
    }
}

impl Customer {
    pub fn new() -> Customer {
        Customer {
            http: reqwest::Client::new(),
            moto: moto(),
            account: ACCOUNT,
        }
    }

    /// The service's own account, made and read the same way.
    pub fn service() -> Customer {
        Customer {
            account: SERVICE_ACCOUNT,
            ..Customer::new()
        }
    }

    /// A queue's ARN in this account.
    pub fn queue(&self, name: &str) -> String {
        format!("arn:aws:sqs:{REGION}:{}:{name}", self.account)
    }

    /// A role's ARN in this account.
    pub fn role_of(&self, name: &str) -> String {
        format!("arn:aws:iam::{}:role/{name}", self.account)
    }

    pub fn queue_arn(name: &str) -> String {
        format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{name}")
    }

    pub fn bus_arn(name: &str) -> String {
        format!("arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{name}")
    }

    pub fn role_arn(name: &str) -> String {
        format!("arn:aws:iam::{ACCOUNT}:role/{name}")
    }

    fn queue_url(&self, name: &str) -> String {
        format!("{}/{}/{name}", self.moto, self.account)
    }

    async fn iam(&self, action: &str, params: &[(&str, &str)]) -> String {
        self.query("iam", "2010-05-08", action, params).await
    }

    /// A call of a query-protocol service (IAM, CloudFormation); its XML answer.
    async fn query(
        &self,
        service: &str,
        version: &str,
        action: &str,
        params: &[(&str, &str)],
    ) -> String {
        let mut pairs = vec![("Action", action), ("Version", version)];
        pairs.extend_from_slice(params);
        let response = self
            .http
            .post(&self.moto)
            .header("authorization", scope(service))
            .header("x-moto-account-id", self.account)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_encode(&pairs))
            .send()
            .await
            .expect("moto answers");
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        assert!(status.is_success(), "{service} {action}: {status} {body}");
        body
    }

    /// Deploys `template` with `parameters` as a CloudFormation stack; its
    /// output `RoleArn`.
    pub async fn stack(&self, name: &str, template: &str, parameters: &[(&str, &str)]) -> String {
        let mut params = vec![
            ("StackName".to_owned(), name.to_owned()),
            ("TemplateBody".to_owned(), template.to_owned()),
        ];
        for (i, (k, v)) in parameters.iter().enumerate() {
            params.push((
                format!("Parameters.member.{}.ParameterKey", i + 1),
                (*k).to_owned(),
            ));
            params.push((
                format!("Parameters.member.{}.ParameterValue", i + 1),
                (*v).to_owned(),
            ));
        }
        params.push((
            "Capabilities.member.1".to_owned(),
            "CAPABILITY_IAM".to_owned(),
        ));
        let borrowed: Vec<(&str, &str)> = params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.query("cloudformation", "2010-05-15", "CreateStack", &borrowed)
            .await;
        let described = self
            .query(
                "cloudformation",
                "2010-05-15",
                "DescribeStacks",
                &[("StackName", name)],
            )
            .await;
        assert!(described.contains("CREATE_COMPLETE"), "{described}");
        let start = described
            .find("<OutputValue>")
            .expect("the stack has an output")
            + "<OutputValue>".len();
        let end = described[start..].find("</OutputValue>").unwrap() + start;
        described[start..end].to_owned()
    }

    async fn json(&self, service: &str, target: &str, body: Value) -> Value {
        let (scope_name, content_type) = match service {
            "sqs" => ("sqs", "application/x-amz-json-1.0"),
            _ => ("events", "application/x-amz-json-1.1"),
        };
        let response = self
            .http
            .post(&self.moto)
            .header("authorization", scope(scope_name))
            .header("x-moto-account-id", self.account)
            .header("x-amz-target", target)
            .header("content-type", content_type)
            .body(body.to_string())
            .send()
            .await
            .expect("moto answers");
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert!(status.is_success(), "{target}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// A role the service may assume with `external_id`, allowed to send to
    /// each of `queues` and put events on each of `buses`.
    pub async fn role(&self, name: &str, external_id: &str, queues: &[&str], buses: &[&str]) {
        let condition = json!({"StringEquals": {"sts:ExternalId": external_id}});
        self.role_with(name, Some(condition), queues, buses).await
    }

    /// A role that trusts the service's account with no external-id
    /// condition (a common shape, which any external id opens), allowed to
    /// send to each of `queues`.
    pub async fn role_trusting_any_external_id(&self, name: &str, queues: &[&str]) {
        self.role_with(name, None, queues, &[]).await
    }

    async fn role_with(
        &self,
        name: &str,
        condition: Option<Value>,
        queues: &[&str],
        buses: &[&str],
    ) {
        let mut statement = json!({
            "Effect": "Allow", "Principal": {"AWS": format!("arn:aws:iam::{SERVICE_ACCOUNT}:root")},
            "Action": "sts:AssumeRole"});
        if let Some(condition) = condition {
            statement["Condition"] = condition;
        }
        let trust = json!({"Version": "2012-10-17", "Statement": [statement]});
        let _ = self
            .iam(
                "CreateRole",
                &[
                    ("RoleName", name),
                    ("AssumeRolePolicyDocument", &trust.to_string()),
                ],
            )
            .await;
        let mut statements = Vec::new();
        if !queues.is_empty() {
            let arns: Vec<String> = queues.iter().map(|q| self.queue(q)).collect();
            statements
                .push(json!({"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": arns}));
        }
        if !buses.is_empty() {
            let arns: Vec<String> = buses
                .iter()
                .map(|b| format!("arn:aws:events:{REGION}:{}:event-bus/{b}", self.account))
                .collect();
            statements
                .push(json!({"Effect": "Allow", "Action": "events:PutEvents", "Resource": arns}));
        }
        let policy = json!({"Version": "2012-10-17", "Statement": statements});
        let _ = self
            .iam(
                "PutRolePolicy",
                &[
                    ("RoleName", name),
                    ("PolicyName", "send"),
                    ("PolicyDocument", &policy.to_string()),
                ],
            )
            .await;
    }

    pub async fn create_queue(&self, name: &str) {
        let attributes = if name.ends_with(".fifo") {
            json!({"FifoQueue": "true"})
        } else {
            json!({})
        };
        self.json(
            "sqs",
            "AmazonSQS.CreateQueue",
            json!({"QueueName": name, "Attributes": attributes}),
        )
        .await;
    }

    pub async fn delete_queue(&self, name: &str) {
        self.json(
            "sqs",
            "AmazonSQS.DeleteQueue",
            json!({"QueueUrl": self.queue_url(name)}),
        )
        .await;
    }

    /// Every message now in the queue (received once, then deleted). Each
    /// is checked against the event catalogue ([`assert_catalogued`]).
    pub async fn receive(&self, name: &str) -> Vec<Value> {
        let mut all = Vec::new();
        loop {
            let got = self
                .json(
                    "sqs",
                    "AmazonSQS.ReceiveMessage",
                    json!({"QueueUrl": self.queue_url(name), "MaxNumberOfMessages": 10,
                           "MessageAttributeNames": ["All"], "MessageSystemAttributeNames": ["All"],
                           "AttributeNames": ["All"], "VisibilityTimeout": 300}),
                )
                .await;
            let messages = got["Messages"].as_array().cloned().unwrap_or_default();
            if messages.is_empty() {
                return all;
            }
            for m in &messages {
                assert_catalogued(m);
                self.json(
                    "sqs",
                    "AmazonSQS.DeleteMessage",
                    json!({"QueueUrl": self.queue_url(name), "ReceiptHandle": m["ReceiptHandle"]}),
                )
                .await;
            }
            all.extend(messages);
        }
    }

    /// Waits (bounded) until the queue has given at least `n` messages.
    pub async fn wait_for(&self, name: &str, n: usize) -> Vec<Value> {
        let started = std::time::Instant::now();
        let mut all = Vec::new();
        while all.len() < n {
            all.extend(self.receive(name).await);
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "{name}: {} of {n} messages: {all:?}",
                all.len()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        all
    }

    /// An event bus whose every event is copied to the queue `copy` (its
    /// rule's target), so a test can read what arrived on the bus.
    pub async fn bus(&self, name: &str, copy: &str) {
        self.create_queue(copy).await;
        self.json("events", "AWSEvents.CreateEventBus", json!({"Name": name}))
            .await;
        self.json(
            "events",
            "AWSEvents.PutRule",
            json!({"Name": format!("{name}-all"), "EventBusName": name,
                   "EventPattern": json!({"source": ["webhooks"]}).to_string()}),
        )
        .await;
        self.json(
            "events",
            "AWSEvents.PutTargets",
            json!({"Rule": format!("{name}-all"), "EventBusName": name,
                   "Targets": [{"Id": "copy", "Arn": self.queue(copy)}]}),
        )
        .await;
    }
}

impl Customer {
    /// A new IAM user of this account with an access key: `(key id, secret)`.
    pub async fn access_key(&self, user: &str) -> (String, String) {
        self.iam("CreateUser", &[("UserName", user)]).await;
        let xml = self.iam("CreateAccessKey", &[("UserName", user)]).await;
        (
            element(&xml, "AccessKeyId").to_owned(),
            element(&xml, "SecretAccessKey").to_owned(),
        )
    }

    /// Activates or deactivates the access key (a deactivated one is
    /// refused by STS with InvalidClientTokenId: scripts/moto_server.py).
    pub async fn set_access_key_active(&self, user: &str, key: &str, active: bool) {
        let status = if active { "Active" } else { "Inactive" };
        self.iam(
            "UpdateAccessKey",
            &[("UserName", user), ("AccessKeyId", key), ("Status", status)],
        )
        .await;
    }

    /// The sessions moto granted on `role_arn` (what the customer's
    /// CloudTrail would show): each session's name and external id.
    pub async fn sessions_of(&self, role_arn: &str) -> Vec<(String, String)> {
        let data = self.model_data().await;
        data["sts"]["AssumedRole"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["role_arn"] == role_arn)
            .map(|r| {
                (
                    r["session_name"].as_str().unwrap_or_default().to_owned(),
                    r["external_id"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// moto's model data. moto checks each attribute for JSON before it
    /// serializes them all, so a model another test changes in between
    /// (an IAM user given an access key) makes it answer 500: asked again.
    async fn model_data(&self) -> Value {
        let mut last = String::new();
        for _ in 0..20 {
            let response = self
                .http
                .get(format!("{}/moto-api/data.json", self.moto))
                .send()
                .await
                .expect("moto answers");
            let status = response.status();
            let text = response.text().await.expect("moto answers");
            if status.is_success() {
                return serde_json::from_str(&text).expect("moto's model data is JSON");
            }
            last = format!("{status}: {text}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("moto's model data, 20 times refused; the last: {last}")
    }
}

/// The text of the first `<name>` element of an XML answer.
fn element<'a>(xml: &'a str, name: &str) -> &'a str {
    let open = format!("<{name}>");
    let start = xml
        .find(&open)
        .unwrap_or_else(|| panic!("no <{name}> in {xml}"))
        + open.len();
    let end = xml[start..].find("</").unwrap() + start;
    &xml[start..end]
}

/// Panics unless the body of `message`, an SQS message the service sent
/// into a customer's queue, is of the event catalogue: a notification or a
/// destination's validation as it is, or the `detail` of an EventBridge
/// event copied to the queue (its `notification`, for a notification).
pub fn assert_catalogued(message: &Value) {
    let text = message["Body"].as_str().unwrap_or_default();
    let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let sent = match body.get("detail") {
        Some(detail) => detail.get("notification").unwrap_or(detail),
        None => &body,
    };
    if let Err(e) = crate::catalogue::check_value(sent) {
        panic!("a message off the event catalogue in a customer's queue: {e}");
    }
}

/// A message attribute's string value.
pub fn attribute<'a>(message: &'a Value, name: &str) -> &'a str {
    message["MessageAttributes"][name]["StringValue"]
        .as_str()
        .unwrap_or_else(|| panic!("no attribute {name}: {message}"))
}
