//! `webhooks-local` publishes the API's contract: `GET /prod/openapi.yaml`, without
//! credentials, byte-for-byte the repository's `openapi.yaml`.

use crate::common;

use common::Server;
use http::StatusCode;

#[tokio::test]
async fn the_openapi_document_is_served_without_credentials() {
    let server = Server::start();
    let response = reqwest::get(server.url("/openapi.yaml")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/yaml");
    let body = response.text().await.unwrap();
    assert_eq!(body, include_str!("../../../openapi.yaml"));
    assert!(body.starts_with("openapi: 3.1"));

    let post = server
        .http
        .post(server.url("/openapi.yaml"))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(post.headers()["allow"], "GET");
    assert_eq!(post.headers()["content-type"], "application/problem+json");
}
