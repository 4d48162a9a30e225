//! Release notices: a second connection per node, opened when a caller first
//! waits for a key held there, that only subscribes (RESP3 push messages).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Client, ProtocolVersion, PushInfo, PushKind, Value};

use super::{Node, Target};

pub(super) enum Notices {
    Unused,
    Open(ConnectionManager),
    /// A cluster, or a server that cannot push (no RESP3 before Redis 6):
    /// its waiters retry on their timers alone.
    Unsupported,
}

/// Where notices go: called with (channel, message) for every one received.
pub type NoticeSink = Arc<dyn Fn(&[u8], &[u8]) + Send + Sync>;

impl Node {
    /// Subscribes to release notices for `channel`, opening the notice
    /// connection on first use; notices go to `sink`. False when this node
    /// cannot deliver them (the caller then relies on its retry timer).
    pub async fn subscribe(&self, channel: &str, sink: &NoticeSink, timeout: Duration) -> bool {
        let Target::Single(client, config) = &self.target else {
            return false;
        };
        let mut notices = self.notices.lock().await;
        if self.is_closed() {
            return false;
        }
        if matches!(*notices, Notices::Unused) {
            let info = client.get_connection_info().clone();
            let redis = info
                .redis_settings()
                .clone()
                .set_protocol(ProtocolVersion::RESP3);
            let Ok(resp3) = Client::open(info.set_redis_settings(redis)) else {
                *notices = Notices::Unsupported;
                return false;
            };
            let sink = sink.clone();
            let config = config
                .clone()
                .set_automatic_resubscription()
                .set_push_sender(move |push: PushInfo| {
                    if push.kind == PushKind::Message {
                        if let (Some(Value::BulkString(ch)), Some(Value::BulkString(msg))) =
                            (push.data.first(), push.data.get(1))
                        {
                            sink(ch, msg);
                        }
                    }
                    Ok::<(), redis::aio::SendError>(())
                });
            match tokio::time::timeout(timeout, resp3.get_connection_manager_with_config(config))
                .await
            {
                // close() ran meanwhile: drop the new connection at once.
                Ok(Ok(_)) if self.is_closed() => return false,
                Ok(Ok(con)) => *notices = Notices::Open(con),
                // A server without HELLO 3 will not learn it on a retry.
                Ok(Err(e))
                    if e.kind()
                        == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
                {
                    *notices = Notices::Unsupported;
                    return false;
                }
                _ => return false,
            }
        }
        let Notices::Open(con) = &mut *notices else {
            return false;
        };
        matches!(
            tokio::time::timeout(timeout, con.subscribe(channel)).await,
            Ok(Ok(()))
        )
    }

    /// Ends the subscription to `channel` unless `still_wanted()` says a new
    /// waiter came meanwhile (checked under the same lock a subscribe takes).
    pub async fn unsubscribe(
        &self,
        channel: &str,
        still_wanted: impl Fn() -> bool,
        timeout: Duration,
    ) {
        let mut notices = self.notices.lock().await;
        if still_wanted() {
            return;
        }
        if let Notices::Open(con) = &mut *notices {
            let _ = tokio::time::timeout(timeout, con.unsubscribe(channel)).await;
        }
    }
}
