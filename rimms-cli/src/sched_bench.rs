//! The scheduling benchmark: pulse Doppler and SAR on simulated platforms of the CPU and two
//! accelerator cards, every call left to the scheduler (`--map auto`), submitted one after
//! another or through scopes, under each of the runtime's policies. Two platforms: cards a
//! little faster than the CPU behind a slow Zynq-HP-like link (where offloading rarely pays),
//! and much faster cards behind PCIe (where it does, once the data is on a card).
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
use crate::bench::{mib, ms};
use rimms::{CostTable, Device, LinkModel, Policy, SimConfig};
use std::time::Duration;

/// The apps the benchmark runs.
pub const APPS: [App; 2] = [App::PulseDoppler, App::Sar];

/// Every app on every platform, in table order.
pub fn cases() -> impl Iterator<Item = (App, Platform)> {
    APPS.into_iter()
        .flat_map(|app| Platform::ALL.map(|platform| (app, platform)))
}

/// The policies compared, CEDR's first.
pub fn policies() -> [Policy; 4] {
    [
        Policy::RoundRobin,
        Policy::Met,
        Policy::Eft,
        Policy::DataAwareEft,
    ]
}

/// A simulated platform: the CPU and two cards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    /// Cards that run a call in 4 µs plus 8 GB/s against the CPU's 2 µs plus 2 GB/s, on a
    /// Zynq-HP-like link (2 µs, 1.2 GB/s).
    SlowLink,
    /// Cards that run a call in 1 µs plus 50 GB/s, on a PCIe-like link (5 µs, 12 GB/s).
    FastCards,
}

impl Platform {
    /// Both, slow link first.
    pub const ALL: [Platform; 2] = [Platform::SlowLink, Platform::FastCards];

    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Platform::SlowLink => "slow-link",
            Platform::FastCards => "fast-cards",
        }
    }

    fn link_and_card(self) -> (LinkModel, LinkModel) {
        let card = |micros, bytes_per_second| LinkModel {
            latency: Duration::from_micros(micros),
            bytes_per_second,
        };
        match self {
            Platform::SlowLink => (LinkModel::ZYNQ_HP, card(4, 8e9)),
            Platform::FastCards => (LinkModel::PCIE, card(1, 50e9)),
        }
    }
}

/// The options of one configuration: `platform`'s cards, with copies that take the modelled
/// time, and its cost table (the CPU keeps the default, 2 µs plus 2 GB/s).
pub fn options(platform: Platform, policy: Policy, submit: Submit, frames: usize) -> Options {
    let (link, card) = platform.link_and_card();
    Options {
        sim: SimConfig {
            link,
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
    /// The platform.
    pub platform: Platform,
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
    for (app, platform) in cases() {
        for policy in policies() {
            for submit in [Submit::Sequential, Submit::Scoped] {
                let name = policy.name();
                progress(&format!(
                    "{} on {} {name} {}",
                    app.name(),
                    platform.name(),
                    submit.name()
                ));
                let opts = options(platform, policy.clone(), submit, frames);
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
                    platform,
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
         {:<14} {:<11} {:<15} {:>10} {:>10} {:>13} {:>10} {:>11} {:>18}\n",
        "app",
        "platform",
        "policy",
        "seq ms",
        "scoped ms",
        "seq / scoped",
        "seq MiB",
        "scoped MiB",
        "scoped ms / aware"
    );
    let find = |app: App, platform: Platform, policy: &str, submit: Submit| {
        rows.iter().find(|r| {
            r.app == app && r.platform == platform && r.policy == policy && r.submit == submit
        })
    };
    for (app, platform) in cases() {
        let aware = find(app, platform, Policy::DataAwareEft.name(), Submit::Scoped);
        for policy in policies() {
            let name = policy.name();
            let (Some(seq), Some(scoped)) = (
                find(app, platform, name, Submit::Sequential),
                find(app, platform, name, Submit::Scoped),
            ) else {
                continue;
            };
            let vs_aware = aware.map_or("–".to_string(), |a| {
                format!("{:.2}x", ratio(scoped.median, a.median))
            });
            out.push_str(&format!(
                "{:<14} {:<11} {:<15} {:>10.3} {:>10.3} {:>12.2}x {:>10.2} {:>11.2} {:>18}\n",
                app.name(),
                platform.name(),
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
