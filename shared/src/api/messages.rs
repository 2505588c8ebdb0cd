//! Message lookup for clients that received a notification.

use super::problem::store_problem;
use crate::app::App;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::ids::MessageId;
use crate::model::Message;
use crate::retention::messages_since;

/// `GET /message/getmessagebyid/{messageId}`: only the caller's
/// organization's messages, and only within `WEBHOOKS_MESSAGE_RETENTION`.
pub async fn get_message(app: &App, caller: &Caller, id: &MessageId) -> Result<Message, ApiError> {
    app.store
        .get_message(&caller.org_id, id.as_str(), messages_since(app))
        .await
        .map_err(store_problem)?
        .ok_or_else(|| ApiError::not_found(ErrorCode::MessageNotFound, "no message with this id"))
}
