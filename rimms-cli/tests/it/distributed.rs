//! Pulse Doppler across ranks at a size CEDR's inputs do not reach: every rank finds the
//! simulated target, the map at 2–4 ranks matches the map at one within the apps' tolerance,
//! and the network carries exactly the corner turn's analytic minimum plus the peaks.

use crate::common::across_ranks;
use rimms::Device;
use rimms_cli::apps::{distributed, pulse_doppler, sar};
use rimms_dist::{corner_turn_bytes, Distribution, Rank};

const BLOCK_ROWS: Distribution = Distribution::BlockRows;

#[test]
fn pulse_doppler_across_ranks_finds_the_target_with_the_fewest_bytes() {
    let (m, n) = (256, 512);
    let params = pulse_doppler::Params {
        delay: 300,
        doppler_bin: -37,
        seed: 7,
    };
    let burst = pulse_doppler::simulate(m, n, &params).expect("simulate");
    let (pulses, pulse, truth) = (&burst.pulses, &burst.pulse, burst.bins);
    let mut reference: Option<Vec<f32>> = None;
    for ranks in 1..=4 {
        let found = across_ranks(ranks, |cl| {
            let detection =
                distributed::pulse_doppler(cl, Device::Cpu, pulses, pulse, m, BLOCK_ROWS, false);
            (detection, cl.net_bytes())
        });
        let turn = corner_turn_bytes(m, 2 * n, 8, ranks);
        for (rank, (detection, sent)) in found.into_iter().enumerate() {
            let detection = detection.unwrap_or_else(|e| panic!("np {ranks} rank {rank}: {e}"));
            assert_eq!(
                (detection.doppler_bin, detection.range_bin),
                truth,
                "np {ranks} rank {rank}"
            );
            assert!(detection.target);
            // The corner turn's blocks, and each rank's peak (3 × 8 bytes) to every other.
            let minimum: Vec<u64> = (0..ranks)
                .map(|to| turn[rank][to] + if to == rank { 0 } else { 24 })
                .collect();
            assert_eq!(sent, minimum, "np {ranks} rank {rank}");
        }
        let maps = across_ranks(ranks, |cl| {
            distributed::pulse_doppler(cl, Device::Cpu, pulses, pulse, m, BLOCK_ROWS, true)
                .expect("run")
                .map
        });
        let map = maps
            .into_iter()
            .next()
            .flatten()
            .expect("rank 0 has the map");
        match &reference {
            None => reference = Some(map),
            Some(one) => {
                let scale = one.iter().copied().fold(0.0f32, f32::max);
                for (i, (a, b)) in map.iter().zip(one).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 * scale,
                        "np {ranks} cell {i}: {a} vs {b}"
                    );
                }
            }
        }
    }
}

/// A 2048 × 2048 scene across 1, 2 and 4 ranks: the brightest pixel at a scatterer's range,
/// the image at 2 and 4 ranks the image at one, and on the network exactly two corner turns,
/// the peaks, and the image's rows gathered on rank 0.
#[test]
fn sar_across_ranks_of_a_2048_scene_focuses_the_ranges_with_the_fewest_bytes() {
    let size = sar::Size {
        slow: 2048,
        fast: 2048,
    };
    let scene = sar::Scene::default();
    let raw = size.echoes(&scene);
    let h = size.azimuth_filter();
    let columns: Vec<f64> = scene
        .scatterers
        .iter()
        .map(|s| size.expected_column(s))
        .collect();
    let mut reference: Option<Vec<f32>> = None;
    for ranks in [1, 2, 4] {
        let found = across_ranks(ranks, |cl| {
            let image = distributed::sar(cl, Device::Cpu, &raw, size, &h, BLOCK_ROWS, true);
            (image, cl.net_bytes())
        });
        let turn = corner_turn_bytes(size.slow, size.fast, 8, ranks);
        let back = corner_turn_bytes(size.fast, size.slow, 8, ranks);
        let mut image = None;
        for (rank, (found, sent)) in found.into_iter().enumerate() {
            let found = found.unwrap_or_else(|e| panic!("np {ranks} rank {rank}: {e}"));
            assert!(
                columns
                    .iter()
                    .any(|c| (found.peak_col as f64 - c).abs() <= 1.5),
                "np {ranks} rank {rank}: the brightest pixel (column {}) is at none of {columns:?}",
                found.peak_col
            );
            let my_rows = Distribution::BlockRows
                .rows_of(Rank(rank as u16), size.slow, ranks)
                .iter()
                .map(|r| r.len())
                .sum::<usize>();
            let minimum: Vec<u64> = (0..ranks)
                .map(|to| {
                    let peaks = if to == rank { 0 } else { 24 };
                    let gathered = if to == 0 && rank != 0 {
                        (my_rows * size.fast * 4) as u64
                    } else {
                        0
                    };
                    turn[rank][to] + back[rank][to] + peaks + gathered
                })
                .collect();
            assert_eq!(sent, minimum, "np {ranks} rank {rank}");
            image = image.or(found.image);
        }
        let image = image.expect("rank 0 has the image");
        match &reference {
            None => reference = Some(image),
            Some(one) => {
                let scale = one.iter().copied().fold(0.0f32, f32::max);
                for (i, (a, b)) in image.iter().zip(one).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 * scale,
                        "np {ranks} pixel {i}: {a} vs {b}"
                    );
                }
            }
        }
    }
}

/// `rimms ARGS` with `env`: its exit code, standard output and standard error.
fn rimms(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rimms"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("the rimms binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn rimms_run_across_ranks_reports_the_target_and_bytes_at_the_minimum() {
    let (code, stdout, stderr) = rimms(
        &[
            "run",
            "pulse-doppler",
            "--ranks",
            "3",
            "--size",
            "256x128",
            "--frames",
            "2",
            "--json",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let burst =
        pulse_doppler::simulate(256, 128, &pulse_doppler::Params::default()).expect("simulate");
    let (z, x) = burst.bins;
    assert_eq!(
        report["result"],
        format!("Doppler bin {z}, range bin {x}"),
        "{report}"
    );
    let turn = corner_turn_bytes(256, 256, 8, 3);
    let minimum: Vec<Vec<u64>> = (0..3)
        .map(|from| {
            (0..3)
                .map(|to| turn[from][to] + if from == to { 0 } else { 24 })
                .collect()
        })
        .collect();
    let sent: Vec<Vec<u64>> = serde_json::from_value(report["sent"].clone()).expect("sent");
    assert_eq!(sent, minimum);
    assert_eq!(report["ranks"], 3);
    assert_eq!(report["job"], "threads");
}

/// `--dist block-cyclic:5` at 3 ranks: the same target, and on the network each rank's
/// pulses in each other rank's range bins (counted here from block-cyclic's definition) and
/// the peaks.
#[test]
fn rimms_run_with_rows_block_cyclic_reports_the_target_and_bytes_at_the_minimum() {
    let (code, stdout, stderr) = rimms(
        &[
            "run",
            "pulse-doppler",
            "--ranks",
            "3",
            "--size",
            "64x128",
            "--dist",
            "block-cyclic:5",
            "--frames",
            "1",
            "--json",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let burst =
        pulse_doppler::simulate(64, 128, &pulse_doppler::Params::default()).expect("simulate");
    let (z, x) = burst.bins;
    assert_eq!(
        report["result"],
        format!("Doppler bin {z}, range bin {x}"),
        "{report}"
    );
    assert_eq!(report["dist"], "block-cyclic:5");
    let owned = |rows: usize, rank: usize| (0..rows).filter(|r| r / 5 % 3 == rank).count() as u64;
    let minimum: Vec<Vec<u64>> = (0..3)
        .map(|from| {
            (0..3)
                .map(|to| match from == to {
                    true => 0,
                    false => owned(64, from) * owned(256, to) * 8 + 24,
                })
                .collect()
        })
        .collect();
    let sent: Vec<Vec<u64>> = serde_json::from_value(report["sent"].clone()).expect("sent");
    assert_eq!(sent, minimum);
}

#[test]
fn sar_across_ranks_writes_the_image_a_single_rank_run_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (one, four) = (dir.path().join("one.txt"), dir.path().join("four.txt"));
    let args = |out: &std::path::Path| {
        vec![
            "run".to_string(),
            "sar".into(),
            "--frames".into(),
            "1".into(),
            "--out".into(),
            out.display().to_string(),
        ]
    };
    let single = args(&one);
    let (code, _, stderr) = rimms(&single.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let mut across = args(&four);
    across.extend(["--ranks".to_string(), "4".into()]);
    let (code, stdout, stderr) = rimms(&across.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("across 4 ranks"), "{stdout}");
    let read = |path: &std::path::Path| -> Vec<f32> {
        std::fs::read_to_string(path)
            .expect("image file")
            .split_whitespace()
            .map(|v| v.parse().expect("a number"))
            .collect()
    };
    let (a, b) = (read(&one), read(&four));
    assert_eq!(a.len(), 256 * 512);
    assert_eq!(b.len(), a.len());
    let scale = a.iter().copied().fold(0.0f32, f32::max);
    for (i, (p, q)) in a.iter().zip(&b).enumerate() {
        assert!((p - q).abs() <= 1e-4 * scale, "pixel {i}: {p} vs {q}");
    }
}

#[test]
fn runs_across_ranks_refuse_what_they_cannot_do_by_name() {
    for (args, says) in [
        (
            vec!["run", "fzf", "--ranks", "2"],
            "fzf does not run across ranks",
        ),
        (
            vec!["run", "sar", "--ranks", "2", "--map", "sim"],
            "--map is not taken across ranks",
        ),
        (vec!["run", "sar", "--ranks", "65"], "--ranks takes 1 … 64"),
        (
            vec!["run", "sar", "--ranks", "2", "--dist", "replicated"],
            "one owner per row",
        ),
        (
            vec!["run", "sar", "--ranks", "2", "--dist", "block-cyclic:0"],
            "at least one row",
        ),
        (
            vec!["run", "sar", "--ranks", "2", "--dist", "diagonal"],
            "block-rows, block-cyclic:ROWS",
        ),
        (vec!["run", "sar", "--dist", "block-rows"], "give --ranks N"),
        (vec!["bench", "--dist", "block-rows"], "go with --ranks"),
        (
            vec!["run", "pulse-doppler", "--ranks", "4", "--size", "2x64"],
            "simulates at least 2 pulses",
        ),
        (
            vec![
                "run",
                "pulse-doppler",
                "--ranks",
                "4",
                "--size",
                "3x64",
                "--doppler-bin",
                "0",
            ],
            "4 ranks for 3 rows",
        ),
    ] {
        let (code, _, stderr) = rimms(&args, &[]);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// A build without the feature `mpi` started by `mpirun` says so, instead of running one
/// copy of the whole job per process.
#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_under_mpirun_says_how_to_get_one() {
    let (code, _, stderr) = rimms(&["run", "sar"], &[("OMPI_COMM_WORLD_SIZE", "2")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("built without MPI"), "{stderr}");
    assert!(stderr.contains("--features mpi"), "{stderr}");
}

#[test]
fn bench_across_rank_counts_tabulates_speedups_and_bytes_at_the_minimum() {
    let (code, stdout, stderr) = rimms(
        &[
            "bench",
            "--ranks",
            "1,2,3",
            "--app",
            "pulse-doppler",
            "--size",
            "64x64",
            "--frames",
            "1",
            "--json",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(stdout.trim()).expect("a JSON array");
    assert_eq!(rows.len(), 3);
    for (row, ranks) in rows.iter().zip([1u64, 2, 3]) {
        assert_eq!(row["ranks"], ranks);
        let sent: Vec<Vec<u64>> =
            serde_json::from_value(row["report"]["sent"].clone()).expect("sent");
        let minimum: Vec<Vec<u64>> =
            serde_json::from_value(row["report"]["minimum"].clone()).expect("minimum");
        assert_eq!(sent, minimum, "{ranks} ranks");
        let turn = corner_turn_bytes(64, 128, 8, ranks as usize);
        let expected: Vec<Vec<u64>> = (0..ranks as usize)
            .map(|f| {
                (0..ranks as usize)
                    .map(|t| turn[f][t] + if f == t { 0 } else { 24 })
                    .collect()
            })
            .collect();
        assert_eq!(minimum, expected, "{ranks} ranks");
    }
    let (code, stdout, stderr) = rimms(
        &[
            "bench",
            "--ranks",
            "1,2",
            "--app",
            "sar",
            "--size",
            "64x64",
            "--frames",
            "1",
            "--modelled",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("modelled from in-process ranks"),
        "{stdout}"
    );
    assert!(
        stdout.contains("10 GbE: 1.25 GB/s, 10 µs; 100 Gb/s IB: 12.5 GB/s, 1.5 µs"),
        "{stdout}"
    );
    let (code, _, stderr) = rimms(&["bench", "--ranks", "2", "--app", "fzf"], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("fzf does not run across ranks"), "{stderr}");
}

/// The same burst with its rows spread other ways at np 3 (uneven: 256 pulses, 1024 range
/// bins): the target's bins and the map of block rows at one rank, and on the network exactly
/// each rank's rows in each other rank's columns (counted here from the distribution's
/// definition) plus the peaks.
#[test]
fn pulse_doppler_with_rows_block_cyclic_or_on_one_rank_finds_the_same_map() {
    let (m, n, ranks) = (256, 512, 3);
    let params = pulse_doppler::Params {
        delay: 300,
        doppler_bin: -37,
        seed: 7,
    };
    let burst = pulse_doppler::simulate(m, n, &params).expect("simulate");
    let (pulses, pulse) = (&burst.pulses, &burst.pulse);
    let one = across_ranks(1, |cl| {
        distributed::pulse_doppler(cl, Device::Cpu, pulses, pulse, m, BLOCK_ROWS, true)
            .expect("run")
            .map
    })
    .remove(0)
    .expect("the map");
    let scale = one.iter().copied().fold(0.0f32, f32::max);
    for dist in [
        Distribution::BlockCyclic { block: 5 },
        Distribution::BlockCyclic { block: 1 },
        Distribution::OnRank(Rank(1)),
    ] {
        let owned = |rows: usize, rank: usize| {
            (0..rows)
                .filter(|&r| match dist {
                    Distribution::BlockCyclic { block } => r / block % ranks == rank,
                    Distribution::OnRank(owner) => usize::from(owner.0) == rank,
                    _ => unreachable!("only these are tried"),
                })
                .count() as u64
        };
        let found = across_ranks(ranks, |cl| {
            let detection =
                distributed::pulse_doppler(cl, Device::Cpu, pulses, pulse, m, dist, true);
            (detection, cl.net_bytes())
        });
        for (rank, (detection, sent)) in found.into_iter().enumerate() {
            let detection = detection.unwrap_or_else(|e| panic!("{dist} rank {rank}: {e}"));
            assert_eq!(
                (detection.doppler_bin, detection.range_bin),
                burst.bins,
                "{dist} rank {rank}"
            );
            // Pulses × 2n complex samples turned to 2n range bins × pulses, then the peaks and
            // the map (4-byte cells) gathered on rank 0.
            let minimum: Vec<u64> = (0..ranks)
                .map(|to| match to == rank {
                    true => 0,
                    false => {
                        let turned = owned(m, rank) * owned(2 * n, to) * 8;
                        let gathered = if to == 0 {
                            owned(2 * n, rank) * m as u64 * 4
                        } else {
                            0
                        };
                        turned + 24 + gathered
                    }
                })
                .collect();
            assert_eq!(sent, minimum, "{dist} rank {rank}");
            if let Some(map) = detection.map {
                for (i, (a, b)) in map.iter().zip(&one).enumerate() {
                    assert!((a - b).abs() <= 1e-4 * scale, "{dist} cell {i}: {a} vs {b}");
                }
            } else {
                assert_ne!(rank, 0, "rank 0 has the map");
            }
        }
    }
}

/// `--size` up to 65536 × 65536 is 32 GiB of generated input: where the process cannot have
/// that much memory (here 4 GB of address space), the run fails naming the size, and does not
/// abort with "memory allocation … failed" halfway into generating it.
#[test]
fn generated_input_larger_than_memory_is_an_error_not_an_abort() {
    for app in ["pulse-doppler", "sar"] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 4000000 && exec \"$@\"")
            .arg("sh")
            .arg(env!("CARGO_BIN_EXE_rimms"))
            .args(["run", app, "--ranks", "2", "--size", "65536x65536"])
            .args(["--frames", "1"])
            .output()
            .expect("sh runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{app}: {stderr}");
        assert_eq!(out.status.code(), Some(2), "{app}: {stderr}");
        assert!(
            stderr.contains("--size 65536x65536") && stderr.contains("memory"),
            "{app}: {stderr}"
        );
    }
}
