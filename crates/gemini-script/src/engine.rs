//! The script state shared by all requests: live entries, the default reply, the log.

use serde::{Deserialize, Serialize};

use crate::{
    log::{AnsweredBy, LoggedRequest},
    render::{self, Plan},
    reply::Reply,
    script::{Entry, Repeat, Script},
    template::RequestCtx,
};

/// Shown when a script has no default reply and nothing matched.
const FALLBACK_TEXT: &str = "(gemini-script: no scripted reply matched this request)";

/// An entry still in the script, as the state route reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryState {
    /// Position of the entry in the script.
    pub index: usize,
    /// The entry's label.
    pub name: Option<String>,
    /// Requests it will still answer; `None` means forever.
    pub remaining: Option<u32>,
}

struct Live {
    index: usize,
    entry: Entry,
    remaining: Option<u32>,
}

/// Mutable server state; every method is quick and never awaits.
#[derive(Default)]
pub(crate) struct Engine {
    entries: Vec<Live>,
    next_index: usize,
    default: Option<Reply>,
    log: Vec<LoggedRequest>,
    /// Keep at most this many requests in the log (the newest); `None`: all of them.
    log_limit: Option<usize>,
    seq: u64,
}

impl Engine {
    pub(crate) fn new(script: Script) -> Self {
        let mut engine = Self::default();
        engine.load(script);
        engine
    }

    /// Replaces the script; the request log is kept.
    pub(crate) fn load(&mut self, script: Script) {
        self.entries.clear();
        self.next_index = 0;
        self.default = script.default;
        for entry in script.replies {
            self.push(entry);
        }
    }

    /// Appends an entry after the remaining ones.
    pub(crate) fn push(&mut self, entry: Entry) {
        let remaining = match entry.repeat {
            Repeat::Times(n) => Some(n.get()),
            Repeat::Forever => None,
        };
        self.entries.push(Live {
            index: self.next_index,
            entry,
            remaining,
        });
        self.next_index += 1;
    }

    /// Empties the script and the log.
    pub(crate) fn reset(&mut self) {
        self.load(Script::default());
        self.log.clear();
    }

    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Model requests answered so far (logged or not).
    pub(crate) fn served(&self) -> u64 {
        self.seq
    }

    /// Whether requests are logged at all (a log limit of 0 keeps none).
    pub(crate) fn keeps_log(&self) -> bool {
        self.log_limit != Some(0)
    }

    /// Keeps at most `limit` requests in the log from now on (the newest); `None`: all.
    pub(crate) fn set_log_limit(&mut self, limit: Option<usize>) {
        self.log_limit = limit;
        self.trim_log();
    }

    pub(crate) fn record(&mut self, request: LoggedRequest) {
        if self.keeps_log() {
            self.log.push(request);
            self.trim_log();
        }
    }

    fn trim_log(&mut self) {
        if let Some(limit) = self.log_limit
            && self.log.len() > limit
        {
            let excess = self.log.len() - limit;
            self.log.drain(..excess);
        }
    }

    pub(crate) fn requests(&self) -> &[LoggedRequest] {
        &self.log
    }

    /// The log so far, leaving it empty.
    pub(crate) fn take_requests(&mut self) -> Vec<LoggedRequest> {
        std::mem::take(&mut self.log)
    }

    pub(crate) fn clear_requests(&mut self) {
        self.log.clear();
    }

    pub(crate) fn default_reply(&self) -> Option<&Reply> {
        self.default.as_ref()
    }

    /// How many entries can still answer.
    pub(crate) fn entry_count(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn state(&self) -> Vec<EntryState> {
        self.entries
            .iter()
            .map(|l| EntryState {
                index: l.index,
                name: l.entry.name.clone(),
                remaining: l.remaining,
            })
            .collect()
    }

    /// Chooses and renders the answer: the first entry that matches and can be
    /// rendered (its count is then used up by one), else the default reply.
    pub(crate) fn pick(&mut self, ctx: &RequestCtx<'_>, response_id: &str) -> (AnsweredBy, Plan) {
        let found = self.entries.iter().enumerate().find_map(|(pos, live)| {
            if !live.entry.matcher.matches(ctx.model, ctx.raw, ctx.body) {
                return None;
            }
            render::render(&live.entry.reply, ctx, response_id).map(|plan| (pos, plan))
        });
        if let Some((pos, plan)) = found {
            let live = &mut self.entries[pos];
            let answered = AnsweredBy::Entry {
                index: live.index,
                name: live.entry.name.clone(),
            };
            if let Some(n) = &mut live.remaining {
                *n -= 1;
                if *n == 0 {
                    self.entries.remove(pos);
                }
            }
            return (answered, plan);
        }
        // A default reply whose calls cannot be resolved for this request falls back too.
        let plan = self
            .default
            .as_ref()
            .and_then(|d| render::render(d, ctx, response_id))
            .unwrap_or_else(|| render::text(FALLBACK_TEXT, ctx, response_id));
        (AnsweredBy::Default, plan)
    }
}
