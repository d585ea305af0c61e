//! `cargo bench -p rimms-cli --bench scheduling [-- FRAMES]`: pulse Doppler and SAR on the CPU
//! and two cards behind a slow link, sequential against scoped submission, under round-robin,
//! MET, EFT and the data-aware EFT; see `rimms_cli::sched_bench`.

fn main() {
    // `cargo bench` passes `--bench`; a number among the arguments sets the frames.
    let frames = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20);
    match rimms_cli::sched_bench::run(frames, |step| eprintln!("running {step}")) {
        Ok(rows) => print!("{}", rimms_cli::sched_bench::table(&rows, frames)),
        Err(e) => {
            eprintln!("scheduling benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
