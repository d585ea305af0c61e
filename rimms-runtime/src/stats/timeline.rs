//! `RIMMS_TRACE_FILE=trace.json`: a Chrome / Perfetto timeline of kernels and transfers, one
//! lane per device and per link, written when the runtime is dropped.
//!
//! Recording appends to a vector behind a mutex, only when the file was asked for; without it
//! the runtime carries `None` and pays one branch per kernel and per copy.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The environment variable that names the trace file.
pub const TRACE_FILE_ENV: &str = "RIMMS_TRACE_FILE";

struct Event {
    name: String,
    category: &'static str,
    lane: String,
    start: Duration,
    duration: Duration,
    bytes: Option<u64>,
}

pub(crate) struct Timeline {
    path: PathBuf,
    origin: Instant,
    events: Mutex<Vec<Event>>,
}

impl Timeline {
    pub(crate) fn new(path: PathBuf) -> Timeline {
        Timeline {
            path,
            origin: Instant::now(),
            events: Mutex::new(Vec::new()),
        }
    }

    fn push(&self, event: Event) {
        // A poisoned lock only means another thread panicked while pushing a whole event.
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
    }

    /// A kernel of `api` that ran on `device` from `started` for `duration`.
    pub(crate) fn kernel(&self, api: &str, device: &str, started: Instant, duration: Duration) {
        self.push(Event {
            name: api.to_string(),
            category: "kernel",
            lane: device.to_string(),
            start: started.saturating_duration_since(self.origin),
            duration,
            bytes: None,
        });
    }

    /// A copy of `bytes` from `from` to `to`.
    pub(crate) fn transfer(
        &self,
        from: &str,
        to: &str,
        bytes: usize,
        started: Instant,
        duration: Duration,
    ) {
        self.push(Event {
            name: format!("{from} -> {to}"),
            category: "transfer",
            lane: format!("link {from} -> {to}"),
            start: started.saturating_duration_since(self.origin),
            duration,
            bytes: Some(bytes as u64),
        });
    }

    /// The trace in Chrome's JSON trace-event format.
    pub(crate) fn to_json(&self) -> String {
        let events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let mut lanes: Vec<&str> = Vec::new();
        let mut out = String::from("{\"traceEvents\":[");
        for (i, e) in events.iter().enumerate() {
            let lane = match lanes.iter().position(|l| *l == e.lane) {
                Some(p) => p,
                None => {
                    lanes.push(&e.lane);
                    lanes.len() - 1
                }
            };
            if i > 0 {
                out.push(',');
            }
            let _ = write!(
                out,
                "{{\"name\":{},\"cat\":\"{}\",\"ph\":\"X\",\"pid\":1,\"tid\":{lane},\"ts\":{:.3},\"dur\":{:.3}",
                quoted(&e.name),
                e.category,
                e.start.as_secs_f64() * 1e6,
                e.duration.as_secs_f64() * 1e6,
            );
            if let Some(bytes) = e.bytes {
                let _ = write!(out, ",\"args\":{{\"bytes\":{bytes}}}");
            }
            out.push('}');
        }
        for (tid, lane) in lanes.iter().enumerate() {
            let _ = write!(
                out,
                "{}{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"args\":{{\"name\":{}}}}}",
                if events.is_empty() && tid == 0 { "" } else { "," },
                quoted(lane)
            );
        }
        out.push_str("]}");
        out
    }
}

fn quoted(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(q, "\\u{:04x}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

impl Drop for Timeline {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, self.to_json()) {
            tracing::error!(path = %self.path.display(), error = %e, "cannot write the trace file");
        }
    }
}
