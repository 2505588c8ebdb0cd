//! openapi.yaml and the event catalogue (`catalogue/schemas/`) agree: its
//! `webhooks:` lists every kind, each with its schema, and the schemas under
//! `components/schemas` are the catalogue's files (generated from them: on a
//! mismatch this test prints the blocks to paste between the markers).

const OPENAPI: &str = include_str!("../../../openapi.yaml");

/// The lines between `# <name>:begin` and `# <name>:end` (markers excluded).
fn block(name: &str) -> &'static str {
    let begin = format!("# {name}:begin (generated: shared/tests/it/event_catalogue.rs)\n");
    let end = format!("# {name}:end");
    let start = OPENAPI
        .find(&begin)
        .unwrap_or_else(|| panic!("openapi.yaml has no line '{}'", begin.trim()))
        + begin.len();
    let stop = OPENAPI[start..]
        .find(&end)
        .unwrap_or_else(|| panic!("openapi.yaml has no line '{end}'"));
    let text = &OPENAPI[start..start + stop];
    // Up to the marker's indentation.
    &text[..text.rfind('\n').map_or(0, |i| i + 1)]
}

/// A kind's schema as openapi.yaml holds it: the file less `$schema` and
/// `$id` (the document's dialect is 2020-12 already), as JSON, which is YAML.
fn component(t: &webhooks_catalogue::EventType) -> String {
    let mut schema = t.schema_json();
    let map = schema.as_object_mut().unwrap();
    map.remove("$schema");
    map.remove("$id");
    let json = serde_json::to_string_pretty(&schema).unwrap();
    let indented = json.replace('\n', "\n      ");
    format!("    {}: {indented}\n", t.kind)
}

fn webhook(t: &webhooks_catalogue::EventType) -> String {
    let description = t.schema_json()["description"].to_string();
    let signed = t.kind != webhooks_catalogue::DESTINATION_VALIDATION;
    let parameters = if signed {
        "      parameters:\n\
         \x20       - $ref: '#/components/parameters/WebhookId'\n\
         \x20       - $ref: '#/components/parameters/WebhookTimestamp'\n\
         \x20       - $ref: '#/components/parameters/WebhookSignature'\n"
    } else {
        ""
    };
    let answer = if signed {
        "Any 2xx acknowledges it; retries as for `notification`."
    } else {
        "Not POSTed, sent as a message into the SQS queue or EventBridge bus."
    };
    format!(
        "  {kind}:\n    post:\n      summary: {kind}\n      description: {description}\n      \
         security: []\n{parameters}      requestBody:\n        required: true\n        \
         content:\n          application/json:\n            schema:\n              \
         $ref: '#/components/schemas/{kind}'\n      responses:\n        '200':\n          \
         description: {answer}\n",
        kind = t.kind
    )
}

#[test]
fn openapi_lists_every_kind_of_the_catalogue_with_its_schema() {
    let components: String = webhooks_catalogue::ALL.iter().map(component).collect();
    let webhooks: String = webhooks_catalogue::ALL.iter().map(webhook).collect();
    assert!(
        block("event-catalogue-schemas") == components,
        "openapi.yaml's catalogue schemas are not the files'; the block is:\n{components}"
    );
    assert!(
        block("event-catalogue-webhooks") == webhooks,
        "openapi.yaml's webhooks are not the catalogue's; the block is:\n{webhooks}"
    );
}
