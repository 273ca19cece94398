//! [`Notifications`]: what wakes a process that follows other processes' writes.
//!
//! A follower catches up from a change-log table after every wake, so a notification only
//! says "look now": a lost one (the listening connection broke and was made again) costs at
//! most one [`Notifications::wait`] timeout, never a write.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use tokio_postgres::{AsyncMessage, Client, Config};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::DbError;
use crate::postgres::PgRuntime;

enum Event {
    Notified,
    Lost,
}

struct Listener {
    runtime: Arc<PgRuntime>,
    config: Config,
    tls: MakeRustlsConnect,
    channel: String,
    /// The listening connection; `None` while PostgreSQL cannot be reached.
    client: Option<Client>,
    events: Receiver<Event>,
    sender: Sender<Event>,
}

/// Wakes a follower: on PostgreSQL when a writer calls `pg_notify` on the channel (see
/// [`crate::Database::notify`]), on `SQLite` only when the wait times out.
pub struct Notifications {
    listener: Option<Listener>,
}

impl std::fmt::Debug for Notifications {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Notifications")
            .field(
                "channel",
                &self.listener.as_ref().map(|listener| &listener.channel),
            )
            .finish()
    }
}

impl Notifications {
    pub(crate) fn polling() -> Self {
        Self { listener: None }
    }

    pub(crate) fn listen(
        runtime: Arc<PgRuntime>,
        config: Config,
        tls: MakeRustlsConnect,
        channel: &str,
    ) -> Result<Self, DbError> {
        if channel.is_empty()
            || !channel
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
        {
            return Err(DbError::Statement(format!(
                "channel {channel:?} is not a plain lower-case identifier"
            )));
        }
        let (sender, events) = channel_pair();
        let mut listener = Listener {
            runtime,
            config,
            tls,
            channel: channel.to_owned(),
            client: None,
            events,
            sender,
        };
        listener.subscribe()?;
        Ok(Self {
            listener: Some(listener),
        })
    }

    /// Whether a notification can wake this follower before the timeout (PostgreSQL), or
    /// only the timeout can (`SQLite`).
    #[must_use]
    pub fn is_listening(&self) -> bool {
        self.listener.is_some()
    }

    /// Blocks until a notification arrives or `timeout` passes; returns whether it was a
    /// notification. Notifications that arrived meanwhile are taken together. When the
    /// listening connection broke, it is made again here (and this returns `false` after
    /// `timeout`, so the caller catches up with what it may have missed).
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let Some(listener) = &mut self.listener else {
            std::thread::sleep(timeout);
            return false;
        };
        if listener.client.is_none() && listener.subscribe().is_err() {
            std::thread::sleep(timeout);
            return false;
        }
        match listener.events.recv_timeout(timeout) {
            Ok(Event::Notified) => {
                while let Ok(Event::Notified) = listener.events.try_recv() {}
                true
            }
            Ok(Event::Lost) => {
                listener.client = None;
                false
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => false,
        }
    }
}

fn channel_pair() -> (Sender<Event>, Receiver<Event>) {
    channel()
}

impl Listener {
    fn subscribe(&mut self) -> Result<(), DbError> {
        let config = self.config.clone();
        let tls = self.tls.clone();
        let sender = self.sender.clone();
        let listen = format!("LISTEN {}", self.channel);
        let client = self.runtime.run(async move {
            let (client, mut connection) = config
                .connect(tls)
                .await
                .map_err(|error| DbError::Unavailable(error.to_string()))?;
            tokio::spawn(async move {
                loop {
                    let message =
                        std::future::poll_fn(|context| connection.poll_message(context)).await;
                    match message {
                        Some(Ok(AsyncMessage::Notification(_))) => {
                            if sender.send(Event::Notified).is_err() {
                                return;
                            }
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => {
                            let _ = sender.send(Event::Lost);
                            return;
                        }
                    }
                }
            });
            client.batch_execute(&listen).await?;
            Ok::<_, DbError>(client)
        })??;
        self.client = Some(client);
        Ok(())
    }
}
