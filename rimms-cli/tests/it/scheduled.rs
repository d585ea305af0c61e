//! Pulse Doppler and SAR with their independent calls submitted through scopes, and with every
//! call left to the scheduler: the results must equal the sequential CPU run's, scoped
//! submission must move exactly what sequential does, and the data-aware policy must move fewer
//! bytes than round-robin on the scheduling benchmark's platform.

use rimms::{Policy, SimConfig};
use rimms_cli::apps::{self, AppResult, Mapping, Mode, Options, Scenario, Source, Submit};
use rimms_cli::sched_bench;

fn run(app: apps::App, opts: &Options) -> apps::Run<AppResult> {
    apps::run(app, &Source::Generated(Scenario::default()), opts)
        .unwrap_or_else(|e| panic!("{} on {:?}: {e}", app.name(), opts.mapping))
        .run
}

#[test]
fn scoped_submission_moves_what_sequential_does_and_agrees() {
    for app in sched_bench::APPS {
        let with = |submit| Options {
            submit,
            ..Options::new(Mode::Rimms, Mapping::Sim).frames(2)
        };
        let seq = run(app, &with(Submit::Sequential));
        let scoped = run(app, &with(Submit::Scoped));
        assert_eq!(scoped.result, seq.result, "{}", app.name());
        // The same bytes over the same links; scoped calls over following rows merge, and a
        // merged call's acquire copies its whole range at once, so in no more copies.
        let bytes = |run: &apps::Run<AppResult>| {
            run.links
                .iter()
                .map(|l| (l.from.clone(), l.to.clone(), l.bytes))
                .collect::<Vec<_>>()
        };
        assert_eq!(bytes(&scoped), bytes(&seq), "{}", app.name());
        for (s, q) in scoped.links.iter().zip(&seq.links) {
            assert!(s.copies <= q.copies, "{}: {s:?} vs {q:?}", app.name());
        }
    }
}

#[test]
fn every_policy_finds_what_the_cpu_finds_and_data_aware_moves_less_than_round_robin() {
    for (app, platform) in sched_bench::cases() {
        let reference = run(app, &Options::new(Mode::Rimms, Mapping::Cpu));
        let mut bytes = Vec::new();
        for policy in sched_bench::policies() {
            for submit in [Submit::Sequential, Submit::Scoped] {
                // The benchmark's platform without the modelled link time, to keep this quick.
                let mut opts = sched_bench::options(platform, policy.clone(), submit, 1);
                opts.sim = SimConfig {
                    simulate_link: false,
                    ..opts.sim
                };
                let r = run(app, &opts);
                let what = format!(
                    "{} on {} under {} {}",
                    app.name(),
                    platform.name(),
                    policy.name(),
                    submit.name()
                );
                assert_eq!(r.result, reference.result, "{what}");
                bytes.push((policy.clone(), submit, r.total_bytes()));
            }
        }
        for submit in [Submit::Sequential, Submit::Scoped] {
            let of = |p: Policy| {
                bytes
                    .iter()
                    .find(|(q, s, _)| *q == p && *s == submit)
                    .map(|(_, _, b)| *b)
                    .unwrap()
            };
            let (aware, rr) = (of(Policy::DataAwareEft), of(Policy::RoundRobin));
            assert!(
                aware < rr,
                "{} on {} {}: data-aware moved {aware} bytes, round-robin {rr}",
                app.name(),
                platform.name(),
                submit.name()
            );
        }
    }
}

#[test]
fn native_mode_on_auto_says_it_has_no_scheduler() {
    let opts = Options::new(Mode::Native, Mapping::Auto);
    let err = apps::run(
        apps::App::PulseDoppler,
        &Source::Generated(Scenario::default()),
        &opts,
    )
    .unwrap_err();
    assert!(err.to_string().contains("no scheduler"), "{err}");
}
