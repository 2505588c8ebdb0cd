//! Resource limits, through the real binary: oversized bodies (declared and streamed),
//! oversized headers, URIs and queries, 10,000 filters, deeply nested JSON, a handshake
//! callback that never answers or trickles bytes, and a callback that answers a
//! notification with 100 MB. Each is refused or cut off at a small bound, and the server
//! keeps serving afterwards. Nothing here asserts a duration: bounds are proven by status
//! codes (`TIMEOUT`) and by counting bytes.

use crate::common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use http::StatusCode;
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MAX_BODY: usize = 64 * 1024;
const HUNDRED_MB: u64 = 100 * 1024 * 1024;

/// The server still answers a normal request.
async fn assert_healthy(server: &Server) {
    let (status, _) = server.get("/webhooksubscription/all", "org-1").await;
    assert_eq!(status, StatusCode::OK, "the server stopped serving");
}

fn create_request(server: &Server) -> reqwest::RequestBuilder {
    server
        .req(Method::POST, "/webhooksubscription", "org-1")
        .header("content-type", "application/json")
}

#[tokio::test]
async fn oversized_bodies_are_refused_without_reading_them() {
    let server = Server::start();
    let receiver = Receiver::start(Handshake::Echo).await;
    // Declared: refused from the Content-Length alone.
    let padding = "x".repeat(MAX_BODY);
    let body =
        json!({"uri": receiver.uri("/h"), "eventFilters": [inbound("org-1", "d")], "pad": padding});
    let (status, problem) = send(create_request(&server).json(&body)).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE"))
    );
    // Just at the limit is read (and is then just a bad request).
    let (status, _) = send(create_request(&server).body(vec![b' '; MAX_BODY])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Streamed without a length (chunked): the server stops reading past the limit.
    // Count how much of a 100 MB body the client could hand over before the server
    // answered and hung up.
    let (pulled, answer) = stream_chunked_body(&server, HUNDRED_MB).await;
    // The server answers 413 and closes; the close may reset the connection before the
    // client reads the answer (unread upload data makes the kernel send RST), so an empty
    // answer is fine too. What matters is how much was taken.
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 413"),
        "answer to a streamed 100 MB body: {answer:.200}"
    );
    assert!(
        pulled < 32 * 1024 * 1024,
        "{pulled} bytes of a 100 MB body were taken"
    );
    println!("streamed body: {pulled} of {HUNDRED_MB} bytes taken before the server cut it off");
    assert_eq!(
        receiver.hits(),
        0,
        "an oversized request reached the handshake"
    );
    assert_healthy(&server).await;
}

/// POSTs a chunked body of `total` bytes on raw TCP; returns how many body bytes the
/// kernel accepted before the server closed the connection, and the server's answer.
async fn stream_chunked_body(server: &Server, total: u64) -> (u64, String) {
    let addr = server
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/prod")
        .to_owned();
    let stream = TcpStream::connect(&addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST /prod/webhooksubscription HTTP/1.1\r\nhost: {addr}\r\nx-api-key: {}\r\n\
         authorization: Bearer {}\r\ncontent-type: application/json\r\n\
         transfer-encoding: chunked\r\n\r\n",
        server.key,
        server.token("org-1")
    );
    let writer = tokio::spawn(async move {
        let mut sent = 0u64;
        if write.write_all(head.as_bytes()).await.is_err() {
            return sent;
        }
        let data = vec![b' '; 64 * 1024];
        let chunk = [format!("{:x}\r\n", data.len()).as_bytes(), &data, b"\r\n"].concat();
        while sent < total {
            if write.write_all(&chunk).await.is_err() {
                return sent;
            }
            sent += data.len() as u64;
        }
        let _ = write.write_all(b"0\r\n\r\n").await;
        sent
    });
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), read.read_to_end(&mut answer)).await;
    drop(read);
    let sent = tokio::time::timeout(Duration::from_secs(60), writer)
        .await
        .expect("the upload neither finished nor was cut off")
        .unwrap();
    (sent, String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test]
async fn ten_thousand_filters_are_refused_before_any_handshake() {
    let server = Server::start();
    let receiver = Receiver::start(Handshake::Echo).await;
    // Real filters: far over the body limit.
    let filters: Vec<String> = (0..10_000)
        .map(|i| contact("org-1", &format!("d{i}")))
        .collect();
    let (status, problem) = send(
        create_request(&server).json(&json!({"uri": receiver.uri("/h"), "eventFilters": filters})),
    )
    .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE"))
    );
    // 10,000 tiny ones fit in the body limit and are refused by count, with one error
    // (not 10,000) in the answer.
    let tiny: Vec<&str> = vec!["/"; 10_000];
    let (status, problem) = send(
        create_request(&server).json(&json!({"uri": receiver.uri("/h"), "eventFilters": tiny})),
    )
    .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("VALIDATION_FAILED"))
    );
    assert_eq!(problem["errors"].as_array().unwrap().len(), 1, "{problem}");
    assert!(problem.to_string().len() < 1024);
    // 21 distinct valid filters: one over the limit.
    let over: Vec<String> = (0..21)
        .map(|i| contact("org-1", &format!("d{i}")))
        .collect();
    let (status, problem) = send(
        create_request(&server).json(&json!({"uri": receiver.uri("/h"), "eventFilters": over})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(
        receiver.hits(),
        0,
        "the handshake ran for a refused request"
    );
    assert_healthy(&server).await;
}

#[tokio::test]
async fn deeply_nested_and_huge_json_values_are_refused_cleanly() {
    let server = Server::start();
    for body in [
        "[".repeat(MAX_BODY - 1),
        format!("{{\"uri\": {}}}", "[".repeat(10_000)),
        format!("{{\"eventFilters\": [{}]}}", "1,".repeat(20_000) + "1"),
    ] {
        let (status, problem) = send(create_request(&server).body(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
        assert!(
            problem.to_string().len() < 2048,
            "the answer echoes the input"
        );
    }
    assert_healthy(&server).await;
}

#[tokio::test]
async fn oversized_headers_uris_and_queries_are_bounded() {
    let server = Server::start();
    // One huge header, and very many headers: refused by the HTTP layer (431) or the
    // connection is closed; never a 5xx, and the server keeps serving.
    let huge = "h".repeat(1024 * 1024);
    let one_huge = server
        .req(Method::GET, "/webhooksubscription/all", "org-1")
        .header("x-filler", huge.as_str())
        .send()
        .await;
    let mut many = server.req(Method::GET, "/webhooksubscription/all", "org-1");
    for i in 0..10_000 {
        many = many.header(format!("x-h{i}"), "v");
    }
    for (what, result) in [
        ("one 1 MB header", one_huge),
        ("10,000 headers", many.send().await),
    ] {
        if let Ok(response) = result {
            assert_eq!(
                response.status(),
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "{what}"
            );
        }
    }
    // A huge API key or token is refused without echoing it.
    let (status, problem) = send(
        server
            .http
            .get(server.url("/webhooksubscription/all"))
            .header("x-api-key", "k".repeat(16 * 1024))
            .bearer_auth(server.token("org-1")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(problem.to_string().len() < 1024);
    let (status, problem) = send(
        server
            .http
            .get(server.url("/webhooksubscription/all"))
            .header("x-api-key", &server.key)
            .bearer_auth("t".repeat(64 * 1024)),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(problem.to_string().len() < 1024);

    // A 32 KiB path and a 32 KiB id: 404, with only a bounded part of it echoed.
    let long = "p".repeat(32 * 1024);
    for path in [
        format!("/{long}"),
        format!("/webhooksubscription/{long}"),
        format!("/message/getmessagebyid/{long}"),
    ] {
        let (status, problem) = server.get(&path, "org-1").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(problem.to_string().len() < 1024, "{path:.40}: echoed");
    }
    // A query with 4,000 sort orders (the most a 64 KiB URI holds).
    let sort = vec!["sort=uri,desc"; 4_000].join("&");
    let (status, page) = server
        .get(&format!("/webhooksubscription/all?{sort}"), "org-1")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["sort"].as_array().unwrap().len(), 1);
    let bad_sort = vec!["sort=nope"; 5_000].join("&");
    let (status, problem) = server
        .get(&format!("/webhooksubscription/all?{bad_sort}"), "org-1")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        problem["errors"].as_array().unwrap().len(),
        1,
        "one error per parameter"
    );
    assert!(
        problem.to_string().len() < 2048,
        "5,000 bad sort values made a {}-byte answer",
        problem.to_string().len()
    );
    assert_healthy(&server).await;
}

/// A callback on raw TCP: counts connections; `Silent` never answers, `Trickle` sends a
/// status line and then a byte every 50 ms, `Huge` echoes the handshake and answers every
/// POST with a 100 MB body, counting the bytes the kernel took.
#[derive(Clone, Copy)]
enum Misbehaviour {
    Silent,
    Trickle,
    Huge,
}

struct RawCallback {
    port: u16,
    connections: Arc<AtomicUsize>,
    written: Arc<AtomicU64>,
    closed: Arc<AtomicUsize>,
}

impl RawCallback {
    async fn start(mode: Misbehaviour) -> RawCallback {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let written = Arc::new(AtomicU64::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let (c, w, d) = (connections.clone(), written.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let (w, d) = (w.clone(), d.clone());
                tokio::spawn(async move {
                    misbehave(stream, mode, w).await;
                    d.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        RawCallback {
            port,
            connections,
            written,
            closed,
        }
    }

    fn uri(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }
}

async fn misbehave(mut stream: TcpStream, mode: Misbehaviour, written: Arc<AtomicU64>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    match mode {
        Misbehaviour::Silent => {
            let mut sink = [0u8; 1024];
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        }
        Misbehaviour::Trickle => {
            if stream.write_all(b"HTTP/1.1 200 OK\r\n").await.is_err() {
                return;
            }
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if stream.write_all(b"x").await.is_err() {
                    return;
                }
            }
        }
        Misbehaviour::Huge if text.starts_with("get ") => {
            let token = text
                .lines()
                .find_map(|l| l.strip_prefix("validation-token:"))
                .unwrap_or("")
                .trim()
                .to_owned();
            let _ = stream
                .write_all(
                    format!("HTTP/1.1 200 OK\r\nvalidation-token: {token}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await;
        }
        Misbehaviour::Huge => {
            let header = format!("HTTP/1.1 200 OK\r\ncontent-length: {HUNDRED_MB}\r\n\r\n");
            if stream.write_all(header.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b'z'; 64 * 1024];
            let mut left = HUNDRED_MB;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                match stream.write(&chunk[..n]).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        written.fetch_add(n as u64, Ordering::SeqCst);
                        left -= n as u64;
                    }
                }
            }
        }
    }
}

#[tokio::test]
async fn a_handshake_callback_that_never_answers_or_trickles_times_out() {
    let server = Server::start_with(&[("WEBHOOKS_HANDSHAKE_TIMEOUT_MS", "500")]);
    for mode in [Misbehaviour::Silent, Misbehaviour::Trickle] {
        let callback = RawCallback::start(mode).await;
        // The outer limit only turns a missing bound into a failure instead of a hang.
        let (status, problem) = tokio::time::timeout(
            Duration::from_secs(60),
            server.create("org-1", &callback.uri(), &[&inbound("org-1", "d")]),
        )
        .await
        .expect("the handshake was not bounded by its timeout");
        assert_eq!(
            (status, problem["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("TIMEOUT")),
            "{problem}"
        );
        assert_eq!(callback.connections.load(Ordering::SeqCst), 1);
    }
    // An axum receiver that sleeps for an hour before answering: the same.
    let hanging = Receiver::start(Handshake::Hang).await;
    let (status, problem) = tokio::time::timeout(
        Duration::from_secs(60),
        server.create("org-1", &hanging.uri("/h"), &[&inbound("org-1", "d")]),
    )
    .await
    .expect("the handshake was not bounded by its timeout");
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("TIMEOUT"))
    );
    let (_, page) = server.get("/webhooksubscription/all", "org-1").await;
    assert_eq!(
        page["totalElements"], 0,
        "a failed handshake stored something"
    );
}

#[tokio::test]
async fn a_hundred_megabyte_delivery_response_is_not_read() {
    let server = Server::start_with(&[("WEBHOOKS_RETRY_SCHEDULE", "1h")]);
    let callback = RawCallback::start(Misbehaviour::Huge).await;
    let (status, sub) = server
        .create("org-1", &callback.uri(), &[&inbound("org-1", "d")])
        .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    let event = json!({"eventId": "big", "type": "message.inbound", "organizationId": "org-1",
                       "departmentId": "d", "message": {"id": "m"}});
    let (status, body) = send(server.req(Method::POST, "/events", "org-1").json(&event)).await;
    assert_eq!(
        (status, body["notifications"].as_u64()),
        (StatusCode::ACCEPTED, Some(1))
    );
    // Handshake + one delivery; wait until the delivery's connection is over (the service
    // hung up, or - without the bound - read all 100 MB).
    tokio::time::timeout(Duration::from_secs(120), async {
        while callback.closed.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the delivery connection was never closed");
    let written = callback.written.load(Ordering::SeqCst);
    println!(
        "100 MB response: the callback could write {written} bytes before the service hung up"
    );
    assert!(
        written < 32 * 1024 * 1024,
        "{written} bytes of a 100 MB response were taken"
    );
    assert_eq!(callback.connections.load(Ordering::SeqCst), 2);
    assert_healthy(&server).await;
}
