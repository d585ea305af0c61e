//! `RIMMS_TRACE`: one `tracing` event per transfer, carrying its reason, whose bytes add up to
//! what the stats report.

use rimms::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig};
use std::sync::{Arc, Mutex};
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
