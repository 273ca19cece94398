//! `streetlevel requests list|resolve`: the privacy requests people sent with the report form
//! (`{web_url}/report?image_key=<id>`), for operators' own tooling, on a data directory's
//! `SQLite` file or with `--database-url` on PostgreSQL, also while servers run on it.
//! Resolving with `--apply-blur` blurs the request's box as an administrator's blur edit
//! would (a new blurred original; the cached thumbnails removed from the shared `media/`).

use std::io::Write as _;
use std::sync::{Arc, RwLock};

use anyhow::Context;
use streetlevel_import::{Privacy, PrivacyRequest, RequestState};
use streetlevel_model::{Clock as _, SystemClock, Timestamp};

use crate::takedown::{DataArgs, open_store};

/// `streetlevel requests` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum RequestsCommand {
    /// List requests, one a line, tab-separated: number, received (UTC), state, image, kind,
    /// seconds to handle (or waiting so far), box (left,top,width,height as shares of the
    /// picture, or -), contact (or -), text (escaped: one line).
    List {
        #[command(flatten)]
        data: DataArgs,
        /// Only requests in this state: open, done or refused.
        #[arg(long)]
        state: Option<String>,
        /// How many to list (open ones oldest first, others newest first).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Resolve an open request as done or refused.
    Resolve {
        #[command(flatten)]
        data: DataArgs,
        /// The request's number.
        id: u64,
        /// done or refused.
        #[arg(long)]
        state: String,
        /// Blur the request's box first (a blur request with a box drawn).
        #[arg(long)]
        apply_blur: bool,
    },
}

fn open(data: &DataArgs) -> anyhow::Result<Privacy> {
    let store = Arc::new(RwLock::new(open_store(data)?));
    Privacy::open(store, &data.data).context("cannot open the privacy tables")
}

fn line(request: &PrivacyRequest, now: i64) -> String {
    let area = request.area.map_or_else(
        || String::from("-"),
        |area| format!("{},{},{},{}", area.left, area.top, area.width, area.height),
    );
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        request.id,
        Timestamp(request.created_at).to_iso8601(),
        request.state.as_str(),
        request.image,
        request.kind.as_str(),
        request.handling_millis(now) / 1000,
        area,
        request.contact.as_deref().map_or_else(
            || String::from("-"),
            |contact| contact.escape_debug().to_string()
        ),
        request.reason.escape_debug()
    )
}

/// Runs `streetlevel requests <command>`.
pub fn run(command: RequestsCommand) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match command {
        RequestsCommand::List { data, state, limit } => {
            let state = state
                .as_deref()
                .map(|text| {
                    RequestState::parse(text).with_context(|| {
                        format!("unknown state {text:?}: use open, done or refused")
                    })
                })
                .transpose()?;
            let now = SystemClock.now().millis();
            for request in open(&data)?.requests(state, limit)? {
                writeln!(out, "{}", line(&request, now))?;
            }
        }
        RequestsCommand::Resolve {
            data,
            id,
            state,
            apply_blur,
        } => {
            let state = RequestState::parse(&state)
                .filter(|state| *state != RequestState::Open)
                .with_context(|| format!("unknown state {state:?}: use done or refused"))?;
            let (request, edit) = open(&data)?
                .resolve(id, state, "command line", apply_blur)
                .with_context(|| format!("request {id} was not resolved"))?;
            writeln!(out, "{}", line(&request, SystemClock.now().millis()))?;
            if let Some(edit) = edit {
                writeln!(
                    out,
                    "blur edit {} {} on image {} (purge the CDN key image/{})",
                    edit.id,
                    edit.state.as_str(),
                    edit.image,
                    edit.image
                )?;
            }
        }
    }
    Ok(())
}
