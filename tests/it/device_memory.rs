//! Memory the CPU cannot address, played by a sim device with `device_memory`: the path a
//! discrete GPU takes (device addresses in the pool, copies and fills through the backend,
//! implementations that take `DevSlice`s), checked on any machine against independent
//! references and exact byte counts.

use crate::cards;

use rimms::{
    DevSlice, DevSliceMut, Device, Error, ExecMode, HeteData, KernelCtx, Runtime, SimConfig,
};

const CARD: Device = cards::SIM_CARD.device;
const SIM: Device = cards::SIM_CARD.sim;

fn card() -> SimConfig {
    SimConfig {
        device_memory: true,
        ..SimConfig::default()
    }
}

/// The CPU, a card with device memory, and a plain sim with host-addressable memory.
fn runtime() -> Runtime {
    cards::SIM_CARD.runtime(ExecMode::Tracked)
}

/// The card-generic tests, on the sim card.
mod sim_card {
    use crate::cards::{self, SIM_CARD};

    #[test]
    fn every_builtin_matches_the_cpu() {
        cards::every_builtin_on_device_memory_matches_the_cpu(&SIM_CARD);
    }

    #[test]
    fn fft_matches_a_direct_dft() {
        cards::fft_on_device_memory_matches_a_direct_dft(&SIM_CARD);
    }

    #[test]
    fn host_card_and_sim_move_exactly_the_protocols_bytes() {
        cards::host_card_and_sim_move_exactly_the_protocols_bytes(&SIM_CARD);
    }

    #[test]
    fn fresh_buffers_are_zero_filled_on_the_card_not_sent() {
        cards::fresh_buffers_are_zero_filled_on_the_card_not_sent(&SIM_CARD);
    }

    #[test]
    fn an_exhausted_pool_is_an_error_that_loses_nothing() {
        cards::an_exhausted_card_pool_is_an_error_that_loses_nothing(&SIM_CARD);
    }

    #[test]
    fn baseline_stages_every_argument_every_call() {
        cards::baseline_stages_every_argument_through_the_card_every_call(&SIM_CARD);
    }

    #[test]
    fn rows_move_at_their_own_offsets() {
        cards::rows_on_the_card_and_the_sim_move_at_their_own_offsets(&SIM_CARD);
    }
}

#[rimms::api]
fn halve(values: &[f32], #[out] half: &mut [f32]);

#[rimms::kernel(api = halve, device = cpu)]
fn halve_host(values: &[f32], #[out] half: &mut [f32]) {
    for (h, v) in half.iter_mut().zip(values) {
        *h = v / 2.0;
    }
}

/// A device implementation written by a user: it gets device addresses and stages through
/// the device's memory interface (a GPU implementation would launch a kernel on them).
#[rimms::kernel(api = halve, device = sim)]
fn halve_device(ctx: &KernelCtx, values: DevSlice<f32>, #[out] mut half: DevSliceMut<f32>) {
    let mut staged = ctx.read_device(&values).expect("read");
    for v in &mut staged {
        *v /= 2.0;
    }
    assert_eq!(half.len(), staged.len());
    ctx.copy_to_device(&staged, &mut half).expect("write");
}

#[rimms::api]
fn host_only(values: &mut [f32]);

#[rimms::kernel(api = host_only, device = [cpu, sim])]
fn host_only_impl(values: &mut [f32]) {
    values.iter_mut().for_each(|v| *v += 1.0);
}

#[test]
fn user_apis_run_in_the_form_the_device_takes() {
    let rt = runtime();
    let input: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let values = HeteData::from_slice(&rt, &input).expect("values");
    let mut half = HeteData::alloc(&rt, input.len()).expect("half");
    halve(&rt, CARD, &values, &mut half).expect("halve on the card");
    let want: Vec<f32> = input.iter().map(|v| v / 2.0).collect();
    assert_eq!(half.host().expect("host"), &want[..]);
    // The plain sim runs host code; this API has no host implementation for sims.
    let err = halve(&rt, SIM, &values, &mut half).expect_err("no host-form sim kernel");
    assert!(matches!(err, Error::NoImplementation { .. }), "{err}");
    // And an API with only host implementations is refused on the card, before anything moves.
    rt.reset_stats();
    let mut data = HeteData::from_slice(&rt, &input).expect("data");
    let err = host_only(&rt, CARD, &mut data).expect_err("no device-form kernel");
    let message = err.to_string();
    assert!(
        message.contains("sim1") || message.contains("Sim"),
        "{message}"
    );
    assert_eq!(rt.stats().total_bytes(), 0);
    host_only(&rt, SIM, &mut data).expect("host form on the plain sim");
}

#[test]
fn host_bodies_are_refused_on_device_memory() {
    let rt = runtime();
    let mut x = HeteData::from_slice(&rt, &[1.0f32; 64]).expect("x");
    let err = rt
        .launch_host(
            CARD,
            host_only::DECL,
            [rimms::KernelArg::read_write("x", &mut x)],
            |_| unreachable!("a host body never runs over device addresses"),
        )
        .expect_err("refused");
    assert!(err.to_string().contains("not host-addressable"), "{err}");
    assert_eq!(rt.stats().total_bytes(), 0, "refused before anything moved");
}

#[test]
fn a_card_cannot_also_be_host_mapped() {
    let err = Runtime::builder()
        .sim(SimConfig {
            host_mapped: true,
            ..card()
        })
        .build()
        .expect_err("contradictory config");
    assert!(err.to_string().contains("sim0"), "{err}");
}

#[test]
fn two_cards_copy_to_each_other_directly_and_both_ways_at_once() {
    let rt = Runtime::builder()
        .sim(card())
        .sim(card())
        .build()
        .expect("runtime");
    let (a, b) = (Device::Sim(0), Device::Sim(1));
    let input: Vec<f32> = (0..8192).map(|i| i as f32).collect();
    let values = HeteData::from_slice(&rt, &input).expect("values");
    let mut on_a = HeteData::alloc(&rt, input.len()).expect("on a");
    let mut on_b = HeteData::alloc(&rt, input.len()).expect("on b");
    halve(&rt, a, &values, &mut on_a).expect("halve on a");
    halve(&rt, b, &values, &mut on_b).expect("halve on b");
    rt.reset_stats();
    // Each card reads what the other wrote, at the same time: two peer copies in opposite
    // directions.
    let (mut quarter_a, mut quarter_b) = (
        HeteData::alloc(&rt, input.len()).expect("quarter a"),
        HeteData::alloc(&rt, input.len()).expect("quarter b"),
    );
    rt.scope(|s| {
        s.spawn(|rt| halve(rt, a, &on_b, &mut quarter_a));
        s.spawn(|rt| halve(rt, b, &on_a, &mut quarter_b));
    })
    .expect("scope");
    let s = rt.stats();
    let bytes = (input.len() * 4) as u64;
    assert_eq!(
        (
            s.bytes("sim1", "sim0").unwrap(),
            s.bytes("sim0", "sim1").unwrap()
        ),
        (bytes, bytes)
    );
    assert_eq!(
        s.total_bytes(),
        2 * bytes,
        "only the two card-to-card copies"
    );
    let want: Vec<f32> = input.iter().map(|v| v / 4.0).collect();
    assert_eq!(quarter_a.host().expect("host"), &want[..]);
    assert_eq!(quarter_b.host().expect("host"), &want[..]);
}
