//! `RIMMS_TRACE`: one `tracing` event per transfer, carrying its reason, whose bytes add up to
//! what the stats report.

use crate::common::finishes;
use rimms::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig};
use std::sync::{Arc, Mutex, OnceLock};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

#[derive(Default, Debug, Clone)]
struct Transfer {
    from: String,
    to: String,
    bytes: u64,
    reason: String,
}

impl Visit for Transfer {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "bytes" {
            self.bytes = value;
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "from" => self.from = value.to_string(),
            "to" => self.to = value.to_string(),
            _ => {}
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "reason" {
            self.reason = format!("{value:?}");
        }
    }
}

#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<Transfer>>>);

impl<S: tracing::Subscriber> Layer<S> for Collect {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() == "rimms::transfer" {
            let mut t = Transfer::default();
            event.record(&mut t);
            self.0.lock().expect("lock").push(t);
        }
    }
}

fn pipeline(rt: &Runtime) {
    let x = HeteData::from_slice(rt, &vec![Complex32::new(1.0, 0.0); 2048]).expect("x");
    let mut y = HeteData::alloc(rt, 2048).expect("y");
    rt.fft(Device::Sim(0), FftDirection::Forward, 1024, &x, &mut y)
        .expect("fft");
    let _ = y.host().expect("host");
}

#[test]
fn every_transfer_is_one_event_with_its_reason() {
    let collect = Collect::default();
    let subscriber = tracing_subscriber::registry().with(collect.clone());
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .trace(true)
        .build()
        .expect("rt");
    tracing::subscriber::with_default(subscriber, || pipeline(&rt));
    let events = collect.0.lock().expect("lock").clone();
    let stats = rt.stats();
    assert_eq!(events.len() as u64, stats.total_copies());
    assert_eq!(
        events.iter().map(|e| e.bytes).sum::<u64>(),
        stats.total_bytes()
    );
    assert_eq!(
        (events[0].from.as_str(), events[0].to.as_str()),
        ("host", "sim0")
    );
    assert!(
        events[0].reason.contains("kernel fft, argument input"),
        "{:?}",
        events[0]
    );
    assert!(events[1].reason.contains("host view"), "{:?}", events[1]);
}

#[test]
fn tracing_off_emits_nothing() {
    let collect = Collect::default();
    let subscriber = tracing_subscriber::registry().with(collect.clone());
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .trace(false)
        .build()
        .expect("rt");
    tracing::subscriber::with_default(subscriber, || pipeline(&rt));
    assert!(collect.0.lock().expect("lock").is_empty());
    assert_eq!(rt.stats().total_copies(), 2);
}

/// A layer of the program's that, on each event of `target`, reads the first element of
/// `buffer` through the runtime (once the program has put it there).
struct ReadsOnEvent {
    target: &'static str,
    buffer: Arc<OnceLock<HeteData<Complex32>>>,
    seen: Arc<Mutex<Vec<Complex32>>>,
}

impl<S: tracing::Subscriber> Layer<S> for ReadsOnEvent {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != self.target {
            return;
        }
        if let Some(buffer) = self.buffer.get() {
            let first = buffer.host().expect("read from the subscriber")[0];
            self.seen.lock().expect("lock").push(first);
        }
    }
}

/// Runs `program` with a [`ReadsOnEvent`] layer as this thread's subscriber, on a thread of
/// its own with a liveness bound; returns what the layer read.
fn read_on_events(
    target: &'static str,
    program: impl FnOnce(&Arc<OnceLock<HeteData<Complex32>>>) + Send + 'static,
) -> Vec<Complex32> {
    finishes(target, move || {
        let buffer = Arc::new(OnceLock::new());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let layer = ReadsOnEvent {
            target,
            buffer: buffer.clone(),
            seen: seen.clone(),
        };
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || program(&buffer));
        let seen = seen.lock().expect("lock").clone();
        seen
    })
}

/// A subscriber is the program's code and may use the runtime: here it reads the buffer whose
/// copy back from sim0 it is told of, on the thread making the copy. The event goes out once
/// the buffer's lock is released (emitted under it, the read waited for that lock forever).
#[test]
fn a_subscriber_may_read_the_buffer_whose_transfer_it_is_told_of() {
    let seen = read_on_events("rimms::transfer", |buffer| {
        let rt = Runtime::builder()
            .sim(SimConfig::default())
            .trace(true)
            .build()
            .expect("rt");
        let mut y = HeteData::from_slice(&rt, &[Complex32::new(1.0, 0.0); 64]).expect("y");
        rt.scale(Device::Sim(0), Complex32::new(3.0, 0.0), &mut y)
            .expect("y on sim0 alone");
        let y = buffer.get_or_init(|| y);
        assert_eq!(y.host().expect("y")[0], Complex32::new(3.0, 0.0));
    });
    assert_eq!(
        seen,
        [Complex32::new(3.0, 0.0)],
        "one copy back, read after it"
    );
}

/// The same for an eviction: the evictor holds the evicted buffer's lock and the lock of the
/// buffer it makes room for, and the subscriber reads the evicted one.
#[test]
fn a_subscriber_may_read_the_buffer_whose_eviction_it_is_told_of() {
    const GRANULE: usize = 4096;
    const N: usize = GRANULE / std::mem::size_of::<Complex32>();
    let seen = read_on_events("rimms::evict", |buffer| {
        let rt = Runtime::builder()
            .host_pool(1 << 20)
            .granule(GRANULE)
            .sim(SimConfig {
                pool_bytes: GRANULE,
                ..SimConfig::default()
            })
            .trace(true)
            .build()
            .expect("rt");
        let mut a = HeteData::from_slice(&rt, &[Complex32::new(1.0, 0.0); N]).expect("a");
        let mut b = HeteData::<Complex32>::alloc(&rt, N).expect("b");
        rt.scale(Device::Sim(0), Complex32::new(2.0, 0.0), &mut a)
            .expect("a on sim0 alone");
        buffer.get_or_init(|| a);
        rt.scale(Device::Sim(0), Complex32::new(1.0, 0.0), &mut b)
            .expect("b evicts a");
    });
    assert_eq!(
        seen,
        [Complex32::new(2.0, 0.0)],
        "a written back, then read"
    );
}
