//! The scheduling benchmark: pulse Doppler and SAR on a simulated platform of the CPU and two
//! accelerator cards behind a slow link, every call left to the scheduler (`--map auto`),
//! submitted one after another or through scopes, under each of the runtime's policies.
//!
//! What it shows is what the data-aware policy buys over CEDR's: round-robin and EFT place each
//! call without looking at where its data is, so a row's FFT, multiply and inverse FFT land on
//! different devices and every hop is a copy over the slow link; the data-aware EFT charges
//! each candidate for those copies and keeps chains where their data already is.
//!
//! The cards run the CPU's kernels on memory of their own, so their compute is no faster in
//! fact; the cost table says they are (as an accelerator would be), which is what the
//! schedulers decide on. Times are medians of whole frames, measured in one run.

use crate::apps::{self, App, AppResult, Mapping, Mode, Options, Scenario, Source, Submit};
use rimms::{CostTable, Device, LinkModel, Policy, SimConfig};
use std::time::Duration;

/// The apps the benchmark runs.
pub const APPS: [App; 2] = [App::PulseDoppler, App::Sar];

/// The policies compared, CEDR's first.
pub fn policies() -> [Policy; 4] {
    [
        Policy::RoundRobin,
        Policy::Met,
        Policy::Eft,
        Policy::DataAwareEft,
    ]
}

/// The platform: two cards on a Zynq-HP-like link whose copies take the modelled time, and a
/// cost table in which a card runs a call in 4 µs plus 8 GB/s against the CPU's 2 µs plus
/// 2 GB/s.
pub fn options(policy: Policy, submit: Submit, frames: usize) -> Options {
    let card = LinkModel {
        latency: Duration::from_micros(4),
        bytes_per_second: 8e9,
    };
    Options {
        sim: SimConfig {
            link: LinkModel::ZYNQ_HP,
            simulate_link: true,
            ..SimConfig::default()
        },
        submit,
        policy,
        costs: CostTable::default()
            .device(Device::Sim(0), card)
            .device(Device::Sim(1), card),
        ..Options::new(Mode::Rimms, Mapping::Auto).frames(frames)
    }
}

/// One configuration's figures.
#[derive(Clone, Debug)]
pub struct Row {
    /// The app.
    pub app: App,
    /// The policy's name.
    pub policy: &'static str,
    /// How independent calls were submitted.
    pub submit: Submit,
    /// Median frame time.
    pub median: Duration,
    /// Bytes moved over all frames.
    pub bytes: u64,
    /// The app's result, which every configuration must agree on.
    pub result: AppResult,
}

/// Runs every app × policy × submission; fails on an error or if two configurations of one
/// app disagree on its result.
pub fn run(frames: usize, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, String> {
    let mut rows: Vec<Row> = Vec::new();
    for app in APPS {
        for policy in policies() {
            for submit in [Submit::Sequential, Submit::Scoped] {
                let name = policy.name();
                progress(&format!("{} {name} {}", app.name(), submit.name()));
                let opts = options(policy.clone(), submit, frames);
                let run = apps::run(app, &Source::Generated(Scenario::default()), &opts)
                    .map_err(|e| format!("{} under {name}: {e}", app.name()))?
                    .run;
                if let Some(first) = rows.iter().find(|r| r.app == app) {
                    if first.result != run.result {
                        return Err(format!(
                            "{} under {name}, {}: result {:?} differs from {:?}",
                            app.name(),
                            submit.name(),
                            run.result,
                            first.result
                        ));
                    }
                }
                rows.push(Row {
                    app,
                    policy: name,
                    submit,
                    median: run.median(),
                    bytes: run.total_bytes(),
                    result: run.result,
                });
            }
        }
    }
    Ok(rows)
}

/// The table, with the ratios the benchmark is for: scoped against sequential per policy, and
/// each policy against the data-aware one.
pub fn table(rows: &[Row], frames: usize) -> String {
    let mut out = format!(
        "{frames} frames per configuration; times are the median frame, bytes the total\n\n\
         {:<14} {:<15} {:>10} {:>10} {:>17} {:>11} {:>11} {:>19}\n",
        "app",
        "policy",
        "seq ms",
        "scoped ms",
        "seq / scoped",
        "seq MiB",
        "scoped MiB",
        "scoped ms / aware"
    );
    let find = |app: App, policy: &str, submit: Submit| {
        rows.iter()
            .find(|r| r.app == app && r.policy == policy && r.submit == submit)
    };
    for app in APPS {
        let aware = find(app, Policy::DataAwareEft.name(), Submit::Scoped);
        for policy in policies() {
            let name = policy.name();
            let (Some(seq), Some(scoped)) = (
                find(app, name, Submit::Sequential),
                find(app, name, Submit::Scoped),
            ) else {
                continue;
            };
            let vs_aware = aware.map_or("–".to_string(), |a| {
                format!("{:.2}x", ratio(scoped.median, a.median))
            });
            out.push_str(&format!(
                "{:<14} {:<15} {:>10.3} {:>10.3} {:>16.2}x {:>11.2} {:>11.2} {:>19}\n",
                app.name(),
                name,
                ms(seq.median),
                ms(scoped.median),
                ratio(seq.median, scoped.median),
                mib(seq.bytes),
                mib(scoped.bytes),
                vs_aware
            ));
        }
    }
    out
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-12)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}
