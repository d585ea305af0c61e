//! Every app on the FPGA mappings (the register-level emulator unless `RIMMS_FPGA_BOARD` names
//! a board): the tracked runtime keeps the data the FPGA and the CPU share in the u-dma-buf,
//! so it moves nothing at all — the least any code can move, and what hand-written driver code
//! (native mode, its buffers in the u-dma-buf too) moves — while baseline stages every FPGA
//! call's arguments through the u-dma-buf as CEDR does; all three find the same result.

use rimms_cli::apps::{self, App, Mapping, Mode, Options, Scenario, Source};

#[test]
fn rimms_and_native_move_nothing_on_the_fpga_mappings_and_agree_with_baseline() {
    for app in App::ALL {
        for mapping in [Mapping::Fpga, Mapping::FpgaCpu] {
            let run = |mode| {
                apps::run(
                    app,
                    &Source::Generated(Scenario::default()),
                    &Options::new(mode, mapping).frames(2),
                )
                .unwrap_or_else(|e| panic!("{} {mode:?} on {mapping:?}: {e}", app.name()))
                .run
            };
            let (baseline, rimms, native) =
                (run(Mode::Baseline), run(Mode::Rimms), run(Mode::Native));
            let what = format!("{} on {}", app.name(), mapping.name());
            assert_eq!(rimms.result, baseline.result, "{what}");
            assert_eq!(native.result, baseline.result, "{what}: native");
            assert_eq!(rimms.total_bytes(), 0, "{what}: {:?}", rimms.links);
            assert_eq!(native.total_bytes(), 0, "{what}: native {:?}", native.links);
            assert_eq!(
                native.allocations, rimms.allocations,
                "{what}: one buffer each"
            );
            let (to, from) = (
                baseline.bytes("host", "udmabuf0"),
                baseline.bytes("udmabuf0", "host"),
            );
            assert_eq!(baseline.total_bytes(), to + from, "{what}");
            // zip3x has no FFT, so on fpga-cpu it runs on the CPU alone; every other case has
            // FPGA steps, whose arguments baseline copies in and whose outputs it copies out.
            if app == App::Zip3x && mapping == Mapping::FpgaCpu {
                assert_eq!(baseline.total_bytes(), 0, "{what}");
            } else {
                assert!(to > 0 && from > 0, "{what}: {:?}", baseline.links);
            }
        }
    }
}
