//! The API's endpoints, described once: method and path of each. Both
//! runtimes use this table: `webhooks-local` resolves a request's method and
//! path against it ([`Route::resolve`]); each Lambda function serves one
//! [`Endpoint`] and takes the id from API Gateway's `pathParameters`, named
//! as in the path ([`Route::for_endpoint`]). `template.yaml` declares the
//! same paths.

use std::sync::LazyLock;

use http::{Method, StatusCode};

use crate::ids::{MessageId, NotificationId, SubscriptionId};

use crate::error::{ApiError, ErrorCode};

/// API Gateway's stage; paths are accepted with or without it.
pub const STAGE_PREFIX: &str = "/prod";
/// Ids in paths are at most this many characters.
pub const MAX_ID_LEN: usize = 256;

/// An endpoint of the API, whatever its ids: what a Lambda function serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /webhooksubscription`: create, or update the caller's subscription with the same `uri`.
    CreateSubscription,
    /// `GET /webhooksubscription/all`: a page of the caller's subscriptions.
    ListSubscriptions,
    /// `GET /webhooksubscription/{id}`.
    GetSubscription,
    /// `DELETE /webhooksubscription/{id}`.
    DeleteSubscription,
    /// `GET /webhooksubscription/{id}/secret`: the current signing secret.
    GetSubscriptionSecret,
    /// `POST /webhooksubscription/{id}/secret/rotate`: a new signing secret.
    RotateSubscriptionSecret,
    /// `GET /message/getmessagebyid/{messageId}`.
    GetMessage,
    /// `GET /webhooksubscription/{id}/notifications`: a page of the subscription's notifications.
    ListNotifications,
    /// `GET /webhooksubscription/{id}/notifications/{uuid}`: one, with its attempts and payload.
    GetNotification,
    /// `POST /webhooksubscription/{id}/notifications/{uuid}/resend`: send it again now.
    ResendNotification,
    /// `POST /webhooksubscription/{id}/recover`: send the failed notifications of a window again.
    RecoverNotifications,
    /// `GET /webhooksubscription/{id}/stats`: delivery figures per hour.
    GetDeliveryStats,
    /// `GET /webhooksubscription/destination-identity`: what a customer's role
    /// for AWS destinations trusts (the organization's external id).
    GetDestinationIdentity,
    /// `POST /events`: event ingestion over HTTP (`webhooks-local`; on AWS,
    /// events arrive on SQS and this is no function).
    IngestEvent,
    /// `GET /event-types`: the event catalogue, every kind with its schema.
    ListEventTypes,
    /// `GET /event-types/{kind}`: one kind of the catalogue.
    GetEventType,
}

impl Endpoint {
    /// Every endpoint, each once (checked against the exhaustive match in
    /// this module's tests).
    pub const ALL: [Endpoint; 16] = [
        Endpoint::CreateSubscription,
        Endpoint::ListSubscriptions,
        Endpoint::GetSubscription,
        Endpoint::DeleteSubscription,
        Endpoint::GetSubscriptionSecret,
        Endpoint::RotateSubscriptionSecret,
        Endpoint::GetMessage,
        Endpoint::ListNotifications,
        Endpoint::GetNotification,
        Endpoint::ResendNotification,
        Endpoint::RecoverNotifications,
        Endpoint::GetDeliveryStats,
        Endpoint::GetDestinationIdentity,
        Endpoint::IngestEvent,
        Endpoint::ListEventTypes,
        Endpoint::GetEventType,
    ];

    /// The endpoint's HTTP method.
    pub fn method(self) -> Method {
        match self {
            Endpoint::ListSubscriptions
            | Endpoint::GetSubscription
            | Endpoint::GetSubscriptionSecret
            | Endpoint::GetMessage
            | Endpoint::ListNotifications
            | Endpoint::GetNotification
            | Endpoint::GetDeliveryStats
            | Endpoint::GetDestinationIdentity
            | Endpoint::ListEventTypes
            | Endpoint::GetEventType => Method::GET,
            Endpoint::CreateSubscription
            | Endpoint::RotateSubscriptionSecret
            | Endpoint::ResendNotification
            | Endpoint::RecoverNotifications
            | Endpoint::IngestEvent => Method::POST,
            Endpoint::DeleteSubscription => Method::DELETE,
        }
    }

    /// The path template below the stage, e.g. `/webhooksubscription/{id}`.
    /// `{name}` is a path parameter (API Gateway's name for it too).
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::CreateSubscription => "/webhooksubscription",
            Endpoint::ListSubscriptions => "/webhooksubscription/all",
            Endpoint::GetSubscription | Endpoint::DeleteSubscription => "/webhooksubscription/{id}",
            Endpoint::GetSubscriptionSecret => "/webhooksubscription/{id}/secret",
            Endpoint::RotateSubscriptionSecret => "/webhooksubscription/{id}/secret/rotate",
            Endpoint::GetMessage => "/message/getmessagebyid/{messageId}",
            Endpoint::ListNotifications => "/webhooksubscription/{id}/notifications",
            Endpoint::GetNotification => "/webhooksubscription/{id}/notifications/{uuid}",
            Endpoint::ResendNotification => "/webhooksubscription/{id}/notifications/{uuid}/resend",
            Endpoint::RecoverNotifications => "/webhooksubscription/{id}/recover",
            Endpoint::GetDeliveryStats => "/webhooksubscription/{id}/stats",
            Endpoint::GetDestinationIdentity => "/webhooksubscription/destination-identity",
            Endpoint::IngestEvent => "/events",
            Endpoint::ListEventTypes => "/event-types",
            Endpoint::GetEventType => "/event-types/{kind}",
        }
    }

    /// The names of the path's parameters, in order (API Gateway's names).
    pub fn parameters(self) -> Vec<&'static str> {
        self.path()
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .collect()
    }

    /// The endpoint's name as metrics and traces label it (`route`).
    pub fn label(self) -> &'static str {
        match self {
            Endpoint::CreateSubscription => "create_subscription",
            Endpoint::ListSubscriptions => "list_subscriptions",
            Endpoint::GetSubscription => "get_subscription",
            Endpoint::DeleteSubscription => "delete_subscription",
            Endpoint::GetSubscriptionSecret => "get_subscription_secret",
            Endpoint::RotateSubscriptionSecret => "rotate_subscription_secret",
            Endpoint::GetMessage => "get_message",
            Endpoint::ListNotifications => "list_notifications",
            Endpoint::GetNotification => "get_notification",
            Endpoint::ResendNotification => "resend_notification",
            Endpoint::RecoverNotifications => "recover_notifications",
            Endpoint::GetDeliveryStats => "get_delivery_stats",
            Endpoint::GetDestinationIdentity => "get_destination_identity",
            Endpoint::IngestEvent => "ingest_event",
            Endpoint::ListEventTypes => "list_event_types",
            Endpoint::GetEventType => "get_event_type",
        }
    }
}

/// The `route` label of a request, resolved from its method and path
/// (`unmatched` when no endpoint fits).
pub fn label_of(method: &Method, path: &str) -> &'static str {
    Route::resolve(method, path).map_or("unmatched", |r| r.endpoint().label())
}

/// A resolved request: the endpoint, with its id where it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `POST /webhooksubscription`.
    CreateSubscription,
    /// `GET /webhooksubscription/all`.
    ListSubscriptions,
    /// `GET /webhooksubscription/{id}`.
    GetSubscription(SubscriptionId),
    /// `DELETE /webhooksubscription/{id}`.
    DeleteSubscription(SubscriptionId),
    /// `GET /webhooksubscription/{id}/secret`.
    GetSubscriptionSecret(SubscriptionId),
    /// `POST /webhooksubscription/{id}/secret/rotate`.
    RotateSubscriptionSecret(SubscriptionId),
    /// `GET /message/getmessagebyid/{messageId}`.
    GetMessage(MessageId),
    /// `GET /webhooksubscription/{id}/notifications`.
    ListNotifications(SubscriptionId),
    /// `GET /webhooksubscription/{id}/notifications/{uuid}`.
    GetNotification(SubscriptionId, NotificationId),
    /// `POST /webhooksubscription/{id}/notifications/{uuid}/resend`.
    ResendNotification(SubscriptionId, NotificationId),
    /// `POST /webhooksubscription/{id}/recover`.
    RecoverNotifications(SubscriptionId),
    /// `GET /webhooksubscription/{id}/stats`.
    GetDeliveryStats(SubscriptionId),
    /// `GET /webhooksubscription/destination-identity`.
    GetDestinationIdentity,
    /// `POST /events`.
    IngestEvent,
    /// `GET /event-types`.
    ListEventTypes,
    /// `GET /event-types/{kind}`.
    GetEventType(String),
}

impl Route {
    /// The route of `endpoint` with its path parameters' values, in order
    /// (it must have one for each parameter of its path).
    fn new(endpoint: Endpoint, ids: Vec<String>) -> Option<Route> {
        if ids.len() != endpoint.parameters().len() {
            return None;
        }
        let mut ids = ids.into_iter();
        let mut id = || ids.next();
        Some(match endpoint {
            Endpoint::CreateSubscription => Route::CreateSubscription,
            Endpoint::ListSubscriptions => Route::ListSubscriptions,
            Endpoint::GetSubscription => Route::GetSubscription(id()?.into()),
            Endpoint::DeleteSubscription => Route::DeleteSubscription(id()?.into()),
            Endpoint::GetSubscriptionSecret => Route::GetSubscriptionSecret(id()?.into()),
            Endpoint::RotateSubscriptionSecret => Route::RotateSubscriptionSecret(id()?.into()),
            Endpoint::GetMessage => Route::GetMessage(id()?.into()),
            Endpoint::ListNotifications => Route::ListNotifications(id()?.into()),
            Endpoint::GetNotification => Route::GetNotification(id()?.into(), id()?.into()),
            Endpoint::ResendNotification => Route::ResendNotification(id()?.into(), id()?.into()),
            Endpoint::RecoverNotifications => Route::RecoverNotifications(id()?.into()),
            Endpoint::GetDeliveryStats => Route::GetDeliveryStats(id()?.into()),
            Endpoint::GetDestinationIdentity => Route::GetDestinationIdentity,
            Endpoint::IngestEvent => Route::IngestEvent,
            Endpoint::ListEventTypes => Route::ListEventTypes,
            Endpoint::GetEventType => Route::GetEventType(id()?),
        })
    }

    /// The endpoint the route resolves to, without its ids.
    pub fn endpoint(&self) -> Endpoint {
        match self {
            Route::CreateSubscription => Endpoint::CreateSubscription,
            Route::ListSubscriptions => Endpoint::ListSubscriptions,
            Route::GetSubscription(_) => Endpoint::GetSubscription,
            Route::DeleteSubscription(_) => Endpoint::DeleteSubscription,
            Route::GetSubscriptionSecret(_) => Endpoint::GetSubscriptionSecret,
            Route::RotateSubscriptionSecret(_) => Endpoint::RotateSubscriptionSecret,
            Route::GetMessage(_) => Endpoint::GetMessage,
            Route::ListNotifications(_) => Endpoint::ListNotifications,
            Route::GetNotification(..) => Endpoint::GetNotification,
            Route::ResendNotification(..) => Endpoint::ResendNotification,
            Route::RecoverNotifications(_) => Endpoint::RecoverNotifications,
            Route::GetDeliveryStats(_) => Endpoint::GetDeliveryStats,
            Route::GetDestinationIdentity => Endpoint::GetDestinationIdentity,
            Route::IngestEvent => Endpoint::IngestEvent,
            Route::ListEventTypes => Endpoint::ListEventTypes,
            Route::GetEventType(_) => Endpoint::GetEventType,
        }
    }

    /// The route's HTTP method.
    pub fn method(&self) -> Method {
        self.endpoint().method()
    }

    /// Matches a method and path (with or without the stage) against the
    /// table: unknown paths are 404, known paths with another method 405.
    /// A literal segment beats a parameter (`/webhooksubscription/all`).
    pub fn resolve(method: &Method, path: &str) -> Result<Route, ApiError> {
        let path = path
            .strip_prefix(STAGE_PREFIX)
            .filter(|p| p.is_empty() || p.starts_with('/'))
            .unwrap_or(path);
        let path = path.strip_suffix('/').unwrap_or(path);
        let segments: Vec<&str> = path.split('/').skip(1).collect();
        // The matching templates with the most literal segments.
        let matches: Vec<(usize, Endpoint, Vec<&str>)> = TEMPLATES
            .iter()
            .filter_map(|(e, t)| match_template(t, &segments).map(|(l, id)| (l, *e, id)))
            .collect();
        let best = matches
            .iter()
            .map(|(l, _, _)| *l)
            .max()
            .ok_or_else(|| route_not_found(path))?;
        let candidates: Vec<_> = matches.iter().filter(|(l, _, _)| *l == best).collect();
        let Some((_, endpoint, raw)) = candidates.iter().find(|(_, e, _)| e.method() == method)
        else {
            let allow = candidates
                .iter()
                .map(|(_, e, _)| e.method().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(method_not_allowed(method, &allow));
        };
        let mut ids = Vec::with_capacity(raw.len());
        for raw in raw {
            let decoded = percent_encoding::percent_decode_str(raw)
                .decode_utf8_lossy()
                .into_owned();
            if decoded.is_empty() || decoded.chars().count() > MAX_ID_LEN {
                return Err(route_not_found(path));
            }
            ids.push(decoded);
        }
        Route::new(*endpoint, ids).ok_or_else(|| route_not_found(path))
    }

    /// The route of a function that serves `endpoint`, whose ids (if any)
    /// are the path parameters `parameter(name)` API Gateway extracted.
    pub fn for_endpoint<'a>(
        endpoint: Endpoint,
        method: &Method,
        parameter: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Route, ApiError> {
        if *method != endpoint.method() {
            return Err(method_not_allowed(method, endpoint.method().as_str()));
        }
        let ids = endpoint
            .parameters()
            .into_iter()
            .filter_map(|name| {
                parameter(name)
                    .filter(|id| !id.is_empty() && id.len() <= MAX_ID_LEN)
                    .map(str::to_owned)
            })
            .collect();
        Route::new(endpoint, ids).ok_or_else(|| {
            ApiError::not_found(
                ErrorCode::RouteNotFound,
                "the request has no valid id path parameter",
            )
        })
    }
}

/// Whether `segments` fit `template`: the number of literal segments, and
/// the raw values of its parameters.
/// Each endpoint's path template, split into segments once (a request is
/// matched against all of them).
static TEMPLATES: LazyLock<Vec<(Endpoint, Vec<&'static str>)>> = LazyLock::new(|| {
    Endpoint::ALL
        .into_iter()
        .map(|e| (e, e.path().split('/').skip(1).collect()))
        .collect()
});

fn match_template<'a>(template: &[&str], segments: &[&'a str]) -> Option<(usize, Vec<&'a str>)> {
    if template.len() != segments.len() {
        return None;
    }
    let mut literals = 0;
    let mut ids = Vec::new();
    for (part, segment) in template.iter().zip(segments) {
        if part.starts_with('{') {
            ids.push(*segment);
        } else if part == segment {
            literals += 1;
        } else {
            return None;
        }
    }
    Some((literals, ids))
}

fn method_not_allowed(method: &Method, allow: &str) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::MethodNotAllowed,
        format!("{method} is not allowed here; allowed: {allow}"),
    )
    .with_header(http::header::ALLOW, allow.to_owned())
}

/// `404 ROUTE_NOT_FOUND` for `path` (shown cut to 200 characters).
pub fn route_not_found(path: &str) -> ApiError {
    let shown: String = path.chars().take(200).collect();
    ApiError::not_found(
        ErrorCode::RouteNotFound,
        format!("no resource at '{STAGE_PREFIX}{shown}'"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Endpoint::ALL` holds every endpoint once: a new endpoint fails to
    /// compile here until it has its place.
    #[test]
    fn all_endpoints_are_listed_once() {
        let place = |e: Endpoint| match e {
            Endpoint::CreateSubscription => 0,
            Endpoint::ListSubscriptions => 1,
            Endpoint::GetSubscription => 2,
            Endpoint::DeleteSubscription => 3,
            Endpoint::GetSubscriptionSecret => 4,
            Endpoint::RotateSubscriptionSecret => 5,
            Endpoint::GetMessage => 6,
            Endpoint::ListNotifications => 7,
            Endpoint::GetNotification => 8,
            Endpoint::ResendNotification => 9,
            Endpoint::RecoverNotifications => 10,
            Endpoint::GetDeliveryStats => 11,
            Endpoint::GetDestinationIdentity => 12,
            Endpoint::IngestEvent => 13,
            Endpoint::ListEventTypes => 14,
            Endpoint::GetEventType => 15,
        };
        for (i, e) in Endpoint::ALL.into_iter().enumerate() {
            assert_eq!(place(e), i, "{e:?}");
        }
    }

    #[test]
    fn routes_with_and_without_stage() {
        let id = "00000000-0000-4000-8000-000000000001".to_owned();
        for prefix in ["", "/prod"] {
            let r = |m: Method, p: &str| Route::resolve(&m, &format!("{prefix}{p}"));
            assert_eq!(
                r(Method::POST, "/webhooksubscription"),
                Ok(Route::CreateSubscription)
            );
            assert_eq!(
                r(Method::GET, "/webhooksubscription/all"),
                Ok(Route::ListSubscriptions)
            );
            assert_eq!(
                r(Method::GET, &format!("/webhooksubscription/{id}")),
                Ok(Route::GetSubscription(id.as_str().into()))
            );
            assert_eq!(
                r(Method::DELETE, &format!("/webhooksubscription/{id}/")),
                Ok(Route::DeleteSubscription(id.as_str().into()))
            );
            assert_eq!(
                r(Method::GET, &format!("/webhooksubscription/{id}/secret")),
                Ok(Route::GetSubscriptionSecret(id.as_str().into()))
            );
            assert_eq!(
                r(
                    Method::POST,
                    &format!("/webhooksubscription/{id}/secret/rotate")
                ),
                Ok(Route::RotateSubscriptionSecret(id.as_str().into()))
            );
            assert_eq!(
                r(Method::GET, "/message/getmessagebyid/m%201"),
                Ok(Route::GetMessage("m 1".into()))
            );
            assert_eq!(r(Method::POST, "/events"), Ok(Route::IngestEvent));
            assert_eq!(r(Method::GET, "/event-types"), Ok(Route::ListEventTypes));
            assert_eq!(
                r(Method::GET, "/event-types/message.inbound"),
                Ok(Route::GetEventType("message.inbound".to_owned()))
            );
            assert_eq!(
                r(Method::GET, "/webhooksubscription/destination-identity"),
                Ok(Route::GetDestinationIdentity),
                "the literal beats the subscription id"
            );
            assert_eq!(
                r(
                    Method::POST,
                    &format!("/webhooksubscription/{id}/notifications/n%2F1/resend")
                ),
                Ok(Route::ResendNotification(id.as_str().into(), "n/1".into()))
            );
            assert_eq!(
                r(Method::GET, &format!("/webhooksubscription/{id}/stats")),
                Ok(Route::GetDeliveryStats(id.as_str().into()))
            );
        }
        assert_eq!(
            Route::resolve(&Method::GET, "/prod/nothing")
                .unwrap_err()
                .code,
            "ROUTE_NOT_FOUND"
        );
        assert_eq!(
            Route::resolve(&Method::GET, "/production/webhooksubscription/all")
                .unwrap_err()
                .code,
            "ROUTE_NOT_FOUND"
        );
        let e = Route::resolve(&Method::PUT, "/prod/webhooksubscription").unwrap_err();
        assert_eq!(
            (e.status, e.code.as_str()),
            (StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED")
        );
        assert_eq!(e.headers[0].1, "POST");
        let e = Route::resolve(&Method::POST, "/prod/webhooksubscription/x").unwrap_err();
        assert_eq!(e.headers[0].1, "GET, DELETE");
        let e = Route::resolve(&Method::DELETE, "/prod/webhooksubscription/all").unwrap_err();
        assert_eq!(e.headers[0].1, "GET", "the literal beats the parameter");
    }

    #[test]
    fn every_endpoint_names_its_id_parameter_as_api_gateway_does() {
        assert_eq!(Endpoint::GetMessage.parameters(), ["messageId"]);
        assert_eq!(Endpoint::GetSubscriptionSecret.parameters(), ["id"]);
        assert_eq!(Endpoint::GetNotification.parameters(), ["id", "uuid"]);
        assert!(Endpoint::ListSubscriptions.parameters().is_empty());
        for endpoint in Endpoint::ALL {
            let concrete = endpoint
                .path()
                .replace("{id}", "x")
                .replace("{messageId}", "x")
                .replace("{uuid}", "y")
                .replace("{kind}", "k");
            assert_eq!(
                Route::resolve(&endpoint.method(), &concrete).map(|r| r.endpoint()),
                Ok(endpoint)
            );
        }
    }
}
