//! Distributed programs on real runtimes that every transport must carry out alike: each runs
//! as one rank of a job and checks its own part (values against independent references on the
//! rank that gathers them, bytes it sent each peer against the analytic minimum, errors it
//! must report), returning what went wrong. The in-process tests (`cluster.rs`) and the MPI
//! launcher (`mpi_ranks.rs`) run the same list; every program keeps the ranks' collectives in
//! step, failures included, so the next one starts clean on the same transport.

use rimms_dist::{
    corner_turn_bytes, Cluster, ClusterError, Distribution, Rank, TransportError, SEAL_BYTES,
};
use rimms_runtime::{Complex32, Device, FftDirection, HeteSliceMut, Runtime, SecureKey};
use std::ops::Range;

/// One program, as one rank.
pub type Program = fn(&Cluster<'_>) -> Result<(), String>;

/// Every program, by name.
pub const PROGRAMS: &[(&str, Program)] = &[
    ("corner_turn_10x7", |cl| corner_turn(cl, 10, 7, BLOCK_ROWS)),
    ("corner_turn_64x1536", |cl| {
        corner_turn(cl, 64, 1536, BLOCK_ROWS)
    }),
    ("corner_turn_block_cyclic", |cl| {
        corner_turn(
            cl,
            12,
            9,
            (
                Distribution::BlockCyclic { block: 2 },
                Distribution::BlockCyclic { block: 1 },
            ),
        )
    }),
    ("corner_turn_onto_one_rank", |cl| {
        corner_turn(
            cl,
            8,
            6,
            (Distribution::BlockRows, Distribution::OnRank(Rank(0))),
        )
    }),
    ("owner_computes_block_rows", |cl| {
        owner_computes(cl, Distribution::BlockRows)
    }),
    ("owner_computes_block_cyclic", |cl| {
        owner_computes(cl, Distribution::BlockCyclic { block: 2 })
    }),
    ("read_cache", read_cache),
    ("secure_read", secure_read),
    ("compute_on_another_rank", compute_on_another_rank),
    ("fft_2d", fft_2d),
    ("drift", drift),
    ("failing_kernel", failing_kernel),
    (
        "corner_turn_failing_on_one_rank",
        corner_turn_failing_on_one_rank,
    ),
    ("one_envelope_twice", one_envelope_twice),
    ("random_programs", |cl| {
        let dists = [
            Distribution::BlockRows,
            Distribution::BlockCyclic { block: 2 },
            Distribution::Replicated,
            Distribution::OnRank(Rank(0)),
        ];
        // Every seed runs on every rank whatever an earlier one found: the ranks stay in step.
        let outcomes: Vec<Result<(), String>> = (0..8u64)
            .map(|seed| {
                let rows = 4 + (seed as usize * 5) % 8;
                let cols = if seed % 2 == 0 { 16 } else { 1536 };
                random_program(cl, seed, dists[seed as usize % 4], rows, cols)
            })
            .collect();
        outcomes.into_iter().collect()
    }),
];

/// One step of a random distributed program.
#[derive(Clone, Debug)]
enum Step {
    /// Rows written by their owners with values from a seed.
    Write {
        rows: std::ops::Range<usize>,
        seed: u32,
    },
    /// `reader` fetches rows and checks them.
    Read {
        reader: usize,
        rows: std::ops::Range<usize>,
    },
    /// Every copy but the owners' forgotten.
    Flush,
}

/// A program drawn from `seed` alone, so every rank draws the same.
fn steps(seed: u64, ranks: usize, rows: usize, len: usize) -> Vec<Step> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        // xorshift64*: a plain generator every rank runs alike.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as usize
    };
    (0..len)
        .map(|_| {
            let (a, b) = (next() % (rows + 1), next() % (rows + 1));
            let range = a.min(b)..a.max(b);
            match next() % 7 {
                0..=2 => Step::Write {
                    rows: range,
                    seed: next() as u32,
                },
                3..=5 => Step::Read {
                    reader: next() % ranks,
                    rows: range,
                },
                _ => Step::Flush,
            }
        })
        .collect()
}

/// The owners of `row`, written out from each distribution's rule (not asked of the crate).
fn owners_of(dist: Distribution, row: usize, rows: usize, ranks: usize) -> u64 {
    match dist {
        Distribution::BlockRows => {
            let owner = blocks(rows, ranks)
                .iter()
                .position(|b| b.contains(&row))
                .unwrap_or(0);
            1 << owner
        }
        Distribution::BlockCyclic { block } => 1 << (row / block % ranks),
        Distribution::Replicated => (1u64 << ranks) - 1,
        Distribution::OnRank(rank) => 1 << rank.0,
    }
}

/// A random program against a sequential model: the values every read sees, and the bytes
/// each rank sends each peer after every step, from the model's own record of which ranks hold
/// each row (a read sends each row its reader lacks, once, from the owner if it holds the row,
/// else from the lowest rank that does). A rank that sees a difference runs the program to its
/// end before reporting the first one, so that the others are not left waiting for it.
pub fn random_program(
    cl: &Cluster<'_>,
    seed: u64,
    dist: Distribution,
    rows: usize,
    cols: usize,
) -> Result<(), String> {
    let (me, ranks) = (usize::from(cl.rank().0), cl.ranks());
    if matches!(dist, Distribution::BlockRows) && ranks > rows {
        return Ok(());
    }
    let value = |seed: u32, r: usize, c: usize| {
        seed.wrapping_mul(2_654_435_761) ^ (r as u32) << 12 ^ c as u32
    };
    let mut buf = cl.alloc::<u32>(rows, cols, dist).map_err(err)?;
    let mut model = vec![0u32; rows * cols];
    let mut valid: Vec<u64> = vec![(1u64 << ranks) - 1; rows];
    let mut expected = vec![0u64; ranks];
    let segments = segments_of(dist, rows, ranks);
    let mut resident: Vec<bool> = segments
        .iter()
        .map(|s| owners_of(dist, s.start, rows, ranks) >> me & 1 == 1)
        .collect();
    let start = cl.net_bytes();
    // Row `r` to `reader` where it lacks it: from the owner if it holds it, else from the
    // lowest rank that does; this rank's bytes to the reader grow where it is the source.
    let receive = |valid: &mut Vec<u64>, expected: &mut Vec<u64>, r: usize, reader: usize| {
        if valid[r] >> reader & 1 == 1 {
            return;
        }
        let owner = owners_of(dist, r, rows, ranks).trailing_zeros() as usize;
        let from = if valid[r] >> owner & 1 == 1 {
            owner
        } else {
            valid[r].trailing_zeros() as usize
        };
        if from == me {
            expected[reader] += (cols * 4) as u64;
        }
        valid[r] |= 1 << reader;
    };
    let mut first_difference: Result<(), String> = Ok(());
    let mut note = |outcome: Result<(), String>| {
        if first_difference.is_ok() {
            first_difference = outcome;
        }
    };
    for (i, step) in steps(seed, ranks, rows, 20).into_iter().enumerate() {
        let what = format!("seed {seed} ({dist:?}, {rows} × {cols}), step {i} {step:?}");
        match &step {
            Step::Write {
                rows: range,
                seed: s,
            } => {
                let s = *s;
                // The ranks that write a row first hold its newest bytes (a kernel may read
                // what it writes): after a flush, a replicated row comes to its other owners.
                for r in range.clone() {
                    let owners = owners_of(dist, r, rows, ranks);
                    for writer in (0..ranks).filter(|w| owners >> w & 1 == 1) {
                        receive(&mut valid, &mut expected, r, writer);
                    }
                }
                cl.compute(&mut buf, range.clone(), true, "write", |_, rs, mut view| {
                    let host = view.host_write()?;
                    for (k, r) in rs.enumerate() {
                        for c in 0..cols {
                            host[k * cols + c] = value(s, r, c);
                        }
                    }
                    Ok(())
                })
                .map_err(|e| format!("{what}: {e}"))?;
                for r in range.clone() {
                    for c in 0..cols {
                        model[r * cols + c] = value(s, r, c);
                    }
                    valid[r] = owners_of(dist, r, rows, ranks);
                }
            }
            Step::Read {
                reader,
                rows: range,
            } => {
                let reader = *reader;
                cl.fetch(&mut buf, |r| {
                    if usize::from(r.0) == reader {
                        range.clone()
                    } else {
                        0..0
                    }
                })
                .map_err(|e| format!("{what}: {e}"))?;
                for r in range.clone() {
                    receive(&mut valid, &mut expected, r, reader);
                }
                if me == reader {
                    for (k, segment) in segments.iter().enumerate() {
                        if segment.start < range.end && range.start < segment.end {
                            resident[k] = true;
                        }
                    }
                    let want = &model[range.start * cols..range.end * cols];
                    let got = cl
                        .read(&buf, range.clone())
                        .map_err(|e| format!("{what}: {e}"))?;
                    note(check(&what, got == want, || {
                        "the values read differ from the model".into()
                    }));
                    // A view of one owner's rows is the same bytes, in place; rows of several
                    // owners are refused as a view.
                    let one_owner = segments
                        .iter()
                        .any(|s| s.start <= range.start && range.end <= s.end);
                    match cl.here(&buf, range.clone()) {
                        Ok(view) => {
                            let got = view.host().map_err(|e| e.to_string())?;
                            note(check(&what, one_owner || range.is_empty(), || {
                                "a view across owners".into()
                            }));
                            note(check(&what, got == want, || {
                                "the values viewed differ from the model".into()
                            }));
                        }
                        Err(ClusterError::AcrossOwners { .. }) if !one_owner => {}
                        Err(e) => return Err(format!("{what}: {e}")),
                    }
                }
            }
            Step::Flush => {
                cl.flush(&mut buf).map_err(|e| format!("{what}: {e}"))?;
                // Owners holding a row keep it (every rank of a replicated buffer); the other
                // copies go.
                for (r, v) in valid.iter_mut().enumerate() {
                    let owners = owners_of(dist, r, rows, ranks);
                    if *v & owners != 0 {
                        *v &= owners;
                    }
                }
            }
        }
        let sent = sent_since(cl, &start);
        note(check(&what, sent == expected, || {
            format!("sent {sent:?}, the model says {expected:?}")
        }));
        // Every call settles its buffer: copies of others' rows this rank no longer holds give
        // their memory back.
        for (k, segment) in segments.iter().enumerate() {
            let mine = owners_of(dist, segment.start, rows, ranks) >> me & 1 == 1;
            let holds = segment.clone().any(|r| valid[r] >> me & 1 == 1);
            resident[k] = mine || (resident[k] && holds);
        }
        let want: usize = segments
            .iter()
            .zip(&resident)
            .filter(|(_, &kept)| kept)
            .map(|(s, _)| s.len() * cols * 4)
            .sum();
        note(check(&what, buf.resident_bytes() == want, || {
            format!(
                "keeps {} bytes, the model says {want}",
                buf.resident_bytes()
            )
        }));
    }
    // After a flush, a rank keeps its own rows and nothing else: its baseline.
    cl.flush(&mut buf).map_err(err)?;
    let baseline = (0..rows)
        .filter(|&r| owners_of(dist, r, rows, ranks) >> me & 1 == 1)
        .count()
        * cols
        * 4;
    note(check(
        &format!("seed {seed} ({dist:?}), after the last flush"),
        buf.resident_bytes() == baseline,
        || {
            format!(
                "keeps {} bytes, its own rows are {baseline}",
                buf.resident_bytes()
            )
        },
    ));
    first_difference
}

/// The runs of rows with one set of owners: what a rank keeps apart.
fn segments_of(dist: Distribution, rows: usize, ranks: usize) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for r in 0..rows {
        match runs.last_mut() {
            Some(run)
                if owners_of(dist, run.start, rows, ranks) == owners_of(dist, r, rows, ranks) =>
            {
                run.end += 1
            }
            _ => runs.push(r..r + 1),
        }
    }
    runs
}

/// What this rank has sent each peer since `start`, a reading of `Cluster::net_bytes`.
fn sent_since(cl: &Cluster<'_>, start: &[u64]) -> Vec<u64> {
    cl.net_bytes()
        .iter()
        .zip(start)
        .map(|(a, b)| a - b)
        .collect()
}

/// A kernel that writes [`value`]`(r, c)` into its rows `r` of `cols` columns.
fn fill_values(
    cols: usize,
) -> impl FnMut(&Runtime, Range<usize>, HeteSliceMut<'_, f32>) -> rimms_runtime::Result<()> {
    move |_, rs, mut view| {
        let host = view.host_write()?;
        for (i, r) in rs.enumerate() {
            for c in 0..cols {
                host[i * cols + c] = value(r, c);
            }
        }
        Ok(())
    }
}

fn check(what: &str, ok: bool, detail: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: {}", detail()))
    }
}

fn value(r: usize, c: usize) -> f32 {
    (r * 1000 + c) as f32
}

fn err(e: ClusterError) -> String {
    e.to_string()
}

/// The rows of each rank under block rows, from the rule written out: the first
/// `rows % ranks` ranks one row more.
fn blocks(rows: usize, ranks: usize) -> Vec<std::ops::Range<usize>> {
    let mut start = 0;
    (0..ranks)
        .map(|r| {
            let n = rows / ranks + usize::from(r < rows % ranks);
            start += n;
            start - n..start
        })
        .collect()
}

const BLOCK_ROWS: (Distribution, Distribution) = (Distribution::BlockRows, Distribution::BlockRows);

/// The transpose's values on rank 0, and each rank's bytes equal to the analytic minimum: to
/// each other rank, the elements of its rows of the source in that rank's rows of the
/// transpose (for block rows, `corner_turn_bytes`'s figures too).
fn corner_turn(
    cl: &Cluster<'_>,
    rows: usize,
    cols: usize,
    (from, to): (Distribution, Distribution),
) -> Result<(), String> {
    let (me, ranks) = (usize::from(cl.rank().0), cl.ranks());
    if ranks > rows.min(cols) {
        return Ok(());
    }
    let mut a = cl.alloc::<f32>(rows, cols, from).map_err(err)?;
    let mut t = cl.alloc::<f32>(cols, rows, to).map_err(err)?;
    let owned = |dist, n, rank: usize| {
        (0..n)
            .filter(|&r| owners_of(dist, r, n, ranks) >> rank & 1 == 1)
            .count()
    };
    let minimum: Vec<u64> = (0..ranks)
        .map(|peer| match peer == me {
            true => 0,
            false => (owned(from, rows, me) * owned(to, cols, peer) * 4) as u64,
        })
        .collect();
    if (from, to) == BLOCK_ROWS {
        check(
            "the minimum",
            minimum == corner_turn_bytes(rows, cols, 4, ranks)[me],
            || format!("{minimum:?} is not corner_turn_bytes's"),
        )?;
    }
    cl.compute(&mut a, 0..rows, true, "fill", fill_values(cols))
        .map_err(err)?;
    let before = cl.net_bytes();
    cl.corner_turn(&mut a, &mut t).map_err(err)?;
    let sent = sent_since(cl, &before);
    check("bytes per peer", sent == minimum, || {
        format!("sent {sent:?}, the minimum is {minimum:?}")
    })?;
    cl.gather(&mut t, Rank(0)).map_err(err)?;
    if cl.rank() == Rank(0) {
        let whole = cl.read(&t, 0..cols).map_err(err)?;
        for c in 0..cols {
            for r in 0..rows {
                check("transpose", whole[c * rows + r] == value(r, c), || {
                    format!("[{c}][{r}] is {}, not {}", whole[c * rows + r], value(r, c))
                })?;
            }
        }
    }
    Ok(())
}

/// Each row written by its owner, uneven where the ranks do not divide the rows.
fn owner_computes(cl: &Cluster<'_>, dist: Distribution) -> Result<(), String> {
    let (rows, ranks) = (10, cl.ranks());
    let mut a = cl.alloc::<u32>(rows, 4, dist).map_err(err)?;
    let me = u32::from(cl.rank().0);
    cl.compute(&mut a, 0..rows, true, "who", |_, _, mut view| {
        view.host_write()?.fill(me + 1);
        Ok(())
    })
    .map_err(err)?;
    cl.gather(&mut a, Rank(0)).map_err(err)?;
    if me == 0 {
        let whole = cl.read(&a, 0..rows).map_err(err)?;
        for row in 0..rows {
            let owner = match dist {
                Distribution::BlockRows => {
                    blocks(rows, ranks).iter().position(|b| b.contains(&row))
                }
                Distribution::BlockCyclic { block } => Some(row / block % ranks),
                _ => None,
            };
            let expected = owner.map_or(0, |o| o as u32 + 1);
            check(
                "owner",
                whole[row * 4..row * 4 + 4] == [expected; 4],
                || format!("{dist:?} row {row} was written by {:?}", whole[row * 4]),
            )?;
        }
    }
    Ok(())
}

/// Rows of rank 0 written on the last rank (an explicit placement): valid there alone, so
/// rank 0's next call on them, which reads them, first receives exactly those rows from the
/// last rank; a placement over two owners' rows is refused on every rank.
fn compute_on_another_rank(cl: &Cluster<'_>) -> Result<(), String> {
    let (ranks, cols) = (cl.ranks(), 256);
    let rows = 2 * ranks;
    let last = Rank((ranks - 1) as u16);
    let mut a = cl
        .alloc::<f32>(rows, cols, Distribution::BlockRows)
        .map_err(err)?;
    cl.compute_on(last, &mut a, 0..2, "placed", fill_values(cols))
        .map_err(err)?;
    check(
        "written on the last rank",
        a.valid_on(0) == Some(rimms_dist::RankSet::only(last)),
        || format!("row 0 valid on {:?}", a.valid_on(0)),
    )?;
    let start = cl.net_bytes();
    cl.compute(&mut a, 0..2, true, "add one", |_, _, mut view| {
        view.host_mut()?.iter_mut().for_each(|v| *v += 1.0);
        Ok(())
    })
    .map_err(err)?;
    let sent = sent_since(cl, &start);
    let want: Vec<u64> = (0..ranks)
        .map(|to| match cl.rank() == last && to == 0 && last != Rank(0) {
            true => (2 * cols * 4) as u64,
            false => 0,
        })
        .collect();
    check("bytes to the owner", sent == want, || {
        format!("sent {sent:?}, want {want:?}")
    })?;
    cl.gather(&mut a, Rank(0)).map_err(err)?;
    if cl.rank() == Rank(0) {
        let got = cl.read(&a, 0..2).map_err(err)?;
        for r in 0..2 {
            for c in 0..cols {
                check(
                    "placed then added",
                    got[r * cols + c] == value(r, c) + 1.0,
                    || format!("[{r}][{c}] is {}", got[r * cols + c]),
                )?;
            }
        }
    }
    if ranks > 1 {
        match cl.compute_on(last, &mut a, 1..3, "across", |_, _, _| Ok(())) {
            Err(ClusterError::AcrossOwners {
                rows: Range { start: 1, end: 3 },
                ..
            }) => {}
            other => return Err(format!("a placement over two owners: {other:?}")),
        }
    }
    Ok(())
}

/// A secure buffer on rank 0 read by every rank: the values arrive, and each peer gets the
/// rows' bytes plus one seal per fragment (a row of 256 `f32`s is one fragment); its corner
/// turn into a secure transpose carries one seal per block.
fn secure_read(cl: &Cluster<'_>) -> Result<(), String> {
    let (rows, cols) = (8, 256);
    // Every rank must hold the same key: here a fixed one, as a job would read it from its
    // secrets.
    let key = SecureKey::new([7u8; 32]);
    let mut a = cl
        .alloc_secure::<f32>(rows, cols, Distribution::OnRank(Rank(0)), &key)
        .map_err(err)?;
    cl.compute(&mut a, 0..rows, false, "fill", fill_values(cols))
        .map_err(err)?;
    let start = cl.net_bytes();
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    let sent = sent_since(cl, &start);
    let me = cl.rank();
    let sealed = (rows * cols * 4 + rows * SEAL_BYTES) as u64;
    let want: Vec<u64> = (0..cl.ranks())
        .map(|to| match me == Rank(0) && to != 0 {
            true => sealed,
            false => 0,
        })
        .collect();
    check("sealed bytes per peer", sent == want, || {
        format!("sent {sent:?}, rows and seals are {want:?}")
    })?;
    let got = cl.read(&a, 0..rows).map_err(err)?;
    for r in 0..rows {
        for c in 0..cols {
            check("secure values", got[r * cols + c] == value(r, c), || {
                format!("[{r}][{c}] is {}, not {}", got[r * cols + c], value(r, c))
            })?;
        }
    }
    // A corner turn of secure buffers: the transpose arrives, and each off-diagonal block
    // carries one seal in a slot of whole elements (28 bytes: seven f32s).
    let mut t = cl
        .alloc_secure::<f32>(cols, rows, Distribution::BlockRows, &key)
        .map_err(err)?;
    let start = cl.net_bytes();
    cl.corner_turn(&mut a, &mut t).map_err(err)?;
    let sent = sent_since(cl, &start);
    let ranks = cl.ranks();
    let mine = usize::from(me.0);
    let want: Vec<u64> = (0..ranks)
        .map(|to| {
            // All rows are rank 0's: it alone sends, each rank its block of columns.
            let theirs = (0..cols)
                .filter(|&c| owners_of(Distribution::BlockRows, c, cols, ranks) >> to & 1 == 1)
                .count();
            match mine == 0 && to != 0 && theirs > 0 {
                true => (rows * theirs * 4 + SEAL_BYTES) as u64,
                false => 0,
            }
        })
        .collect();
    check("sealed corner turn bytes per peer", sent == want, || {
        format!("sent {sent:?}, blocks and seals are {want:?}")
    })?;
    cl.gather(&mut t, Rank(0)).map_err(err)?;
    if me == Rank(0) {
        let whole = cl.read(&t, 0..cols).map_err(err)?;
        for c in 0..cols {
            for r in 0..rows {
                check(
                    "sealed transpose",
                    whole[c * rows + r] == value(r, c),
                    || format!("[{c}][{r}] is {}, not {}", whole[c * rows + r], value(r, c)),
                )?;
            }
        }
    }
    // And back, from block rows over every rank: each rank's sealed blocks open on the others.
    let mut back = cl
        .alloc_secure::<f32>(rows, cols, Distribution::BlockRows, &key)
        .map_err(err)?;
    cl.corner_turn(&mut t, &mut back).map_err(err)?;
    cl.gather(&mut back, Rank(0)).map_err(err)?;
    if me == Rank(0) {
        let whole = cl.read(&back, 0..rows).map_err(err)?;
        check(
            "sealed turn back",
            (0..rows * cols).all(|i| whole[i] == value(i / cols, i % cols)),
            || "the values differ after two sealed corner turns".into(),
        )?;
    }
    Ok(())
}

/// A buffer on rank 0 read by every rank: sent once to each, nothing the second time, again
/// after a flush, and every time with the receive cache off.
fn read_cache(cl: &Cluster<'_>) -> Result<(), String> {
    let (rows, cols) = (8, 256);
    let whole = (rows * cols * 4) as u64;
    let start = cl.net_bytes();
    let mut a = cl
        .alloc::<f32>(rows, cols, Distribution::OnRank(Rank(0)))
        .map_err(err)?;
    cl.compute(&mut a, 0..rows, false, "fill", |_, _, mut view| {
        view.host_write()?.fill(2.5);
        Ok(())
    })
    .map_err(err)?;
    let mut sent = Vec::new();
    let since = |cl: &Cluster<'_>| sent_since(cl, &start);
    let own = if cl.rank() == Rank(0) {
        whole as usize
    } else {
        0
    };
    check("memory before any read", a.resident_bytes() == own, || {
        format!("keeps {} bytes, its own rows are {own}", a.resident_bytes())
    })?;
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    sent.push(since(cl));
    check(
        "memory holding a copy",
        a.resident_bytes() == whole as usize,
        || format!("keeps {} bytes, the buffer is {whole}", a.resident_bytes()),
    )?;
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    sent.push(since(cl));
    cl.flush(&mut a).map_err(err)?;
    // A flush gives the copies' memory back: each rank is at its baseline again.
    check("memory after a flush", a.resident_bytes() == own, || {
        format!("keeps {} bytes, its own rows are {own}", a.resident_bytes())
    })?;
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    sent.push(since(cl));
    cl.cache(false);
    cl.flush(&mut a).map_err(err)?;
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    let sum: f32 = cl
        .here(&a, 0..rows)
        .map_err(err)?
        .host()
        .map_err(|e| e.to_string())?
        .iter()
        .sum();
    let mut b = cl
        .alloc::<f32>(rows, cols, Distribution::Replicated)
        .map_err(err)?;
    cl.compute(&mut b, 0..rows, true, "use", |_, _, mut view| {
        view.host_write()?.fill(sum);
        Ok(())
    })
    .map_err(err)?;
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    sent.push(since(cl));
    cl.cache(true);
    check("values", sum == 2.5 * (rows * cols) as f32, || {
        format!("sum {sum}")
    })?;
    let once: Vec<u64> = (0..cl.ranks())
        .map(|to| {
            if cl.rank() == Rank(0) && to != 0 {
                whole
            } else {
                0
            }
        })
        .collect();
    for (i, (what, times)) in [
        ("the first read", 1),
        ("a second read (sends nothing)", 1),
        ("a read after a flush (sends again)", 2),
        ("reads with the cache off (each sends)", 4),
    ]
    .into_iter()
    .enumerate()
    {
        let expected: Vec<u64> = once.iter().map(|b| b * times).collect();
        check(what, sent[i] == expected, || {
            format!("sent {:?}, expected {expected:?}", sent[i])
        })?;
    }
    Ok(())
}

/// Rows, corner turn, rows: the runtime's FFT on each rank's rows against a naive 2-D DFT.
fn fft_2d(cl: &Cluster<'_>) -> Result<(), String> {
    let (rows, cols) = (8, 16);
    if cl.ranks() > rows {
        return Ok(());
    }
    let input =
        |r: usize, c: usize| Complex32::new((r * 3 + c) as f32 % 7.0, (r + 2 * c) as f32 % 5.0);
    let mut a = cl
        .alloc::<Complex32>(rows, cols, Distribution::BlockRows)
        .map_err(err)?;
    let mut t = cl
        .alloc::<Complex32>(cols, rows, Distribution::BlockRows)
        .map_err(err)?;
    cl.compute(&mut a, 0..rows, true, "fft rows", |rt, rs, mut view| {
        let host = view.host_write()?;
        for (i, r) in rs.enumerate() {
            for c in 0..cols {
                host[i * cols + c] = input(r, c);
            }
        }
        rt.fft_in_place(Device::Cpu, FftDirection::Forward, cols, &mut view)?;
        Ok(())
    })
    .map_err(err)?;
    cl.corner_turn(&mut a, &mut t).map_err(err)?;
    cl.compute(&mut t, 0..cols, true, "fft columns", |rt, _, mut view| {
        rt.fft_in_place(Device::Cpu, FftDirection::Forward, rows, &mut view)?;
        Ok(())
    })
    .map_err(err)?;
    cl.gather(&mut t, Rank(0)).map_err(err)?;
    if cl.rank() != Rank(0) {
        return Ok(());
    }
    let got = cl.read(&t, 0..cols).map_err(err)?;
    for (k, l) in (0..rows).flat_map(|k| (0..cols).map(move |l| (k, l))) {
        let (mut re, mut im) = (0.0f64, 0.0f64);
        for (r, c) in (0..rows).flat_map(|r| (0..cols).map(move |c| (r, c))) {
            let x = input(r, c);
            let angle = -2.0
                * std::f64::consts::PI
                * ((k * r) as f64 / rows as f64 + (l * c) as f64 / cols as f64);
            let (xr, xi) = (f64::from(x.re), f64::from(x.im));
            re += xr * angle.cos() - xi * angle.sin();
            im += xr * angle.sin() + xi * angle.cos();
        }
        let g = got[l * rows + k];
        let off = ((f64::from(g.re) - re).powi(2) + (f64::from(g.im) - im).powi(2)).sqrt();
        check("2-D DFT", off < 1e-3, || {
            format!("[{l}][{k}] is {g}, the DFT {re}+{im}i")
        })?;
    }
    Ok(())
}

/// Rank 1 writes fewer rows than the others: every rank fails at that call, naming rank 1.
fn drift(cl: &Cluster<'_>) -> Result<(), String> {
    if cl.ranks() < 2 {
        return Ok(());
    }
    cl.check_drift(true);
    let mut a = cl
        .alloc::<f32>(9, 4, Distribution::BlockCyclic { block: 1 })
        .map_err(err)?;
    let rows = if cl.rank() == Rank(1) { 0..5 } else { 0..9 };
    match cl.compute(&mut a, rows, true, "scale", |_, _, _| Ok(())) {
        Err(ClusterError::Transport {
            call,
            source: TransportError::Drift { ranks, .. },
        }) if call.contains("(scale on rows") && ranks == vec![Rank(1)] => Ok(()),
        other => Err(format!(
            "expected a drift at the scale call naming rank 1, got {other:?}"
        )),
    }
}

/// A kernel that fails on rank 1 alone fails the call on every rank: rank 1 with the kernel's
/// error, the others with a drift naming rank 1.
fn failing_kernel(cl: &Cluster<'_>) -> Result<(), String> {
    if cl.ranks() < 2 {
        return Ok(());
    }
    cl.check_drift(true);
    let mut a = cl
        .alloc::<Complex32>(4, 8, Distribution::BlockCyclic { block: 1 })
        .map_err(err)?;
    let outcome = cl.compute(&mut a, 0..4, true, "fft", |rt, rows, mut view| {
        // 3 points do not divide a row of 8: only the rank owning row 1 asks for it.
        let points = if rows.start == 1 { 3 } else { 8 };
        rt.fft_in_place(Device::Cpu, FftDirection::Forward, points, &mut view)?;
        Ok(())
    });
    match (cl.rank(), outcome) {
        (
            Rank(1),
            Err(ClusterError::Runtime {
                call,
                rank: Rank(1),
                ..
            }),
        ) if call.contains("fft on rows 0..4") => Ok(()),
        (
            me,
            Err(ClusterError::Transport {
                source: TransportError::Drift { ranks, .. },
                ..
            }),
        ) if me != Rank(1) && ranks == vec![Rank(1)] => Ok(()),
        (_, other) => Err(format!(
            "expected the call to fail on every rank, got {other:?}"
        )),
    }
}

/// A corner turn that rank 1 alone refuses before the exchange (its destination has the wrong
/// shape there): every rank fails it naming rank 1, none enters the all-to-all (under MPI the
/// others' would never complete and the job would abort), and the next turn, alike on every
/// rank, gives the transpose: its blocks, not the failed turn's. Drift checks off, as in
/// release builds, so nothing but the vote keeps the ranks in step.
fn corner_turn_failing_on_one_rank(cl: &Cluster<'_>) -> Result<(), String> {
    let ranks = cl.ranks();
    if ranks < 2 {
        return Ok(());
    }
    cl.check_drift(false);
    let (rows, cols) = (8, 12);
    let mut a = cl
        .alloc::<f32>(rows, cols, Distribution::BlockRows)
        .map_err(err)?;
    let mut t = cl
        .alloc::<f32>(cols, rows, Distribution::BlockRows)
        .map_err(err)?;
    let mut wrong = cl
        .alloc::<f32>(cols, rows + 1, Distribution::BlockRows)
        .map_err(err)?;
    // Turn 1's values, which turn 2 must not see.
    cl.compute(&mut a, 0..rows, true, "fill 1", |_, rs, mut view| {
        view.host_write()?.fill(-(rs.start as f32) - 1.0);
        Ok(())
    })
    .map_err(err)?;
    let dst = if cl.rank() == Rank(1) {
        &mut wrong
    } else {
        &mut t
    };
    match cl.corner_turn(&mut a, dst) {
        Err(ClusterError::FailedBefore { failed, .. })
            if failed.iter().map(|(rank, _)| *rank).eq([Rank(1)]) => {}
        other => {
            return Err(format!(
                "expected turn 1 to fail before the exchange naming rank 1, got {other:?}"
            ))
        }
    }
    cl.compute(&mut a, 0..rows, true, "fill 2", fill_values(cols))
        .map_err(err)?;
    cl.corner_turn(&mut a, &mut t).map_err(err)?;
    let mine = blocks(cols, ranks)[usize::from(cl.rank().0)].clone();
    let got = cl.read(&t, mine.clone()).map_err(err)?;
    for (i, c) in mine.enumerate() {
        for r in 0..rows {
            let v = got[i * rows + r];
            check("turn 2's transpose", v == value(r, c), || {
                format!("[{c}][{r}] is {v}, not {}", value(r, c))
            })?;
        }
    }
    Ok(())
}

/// Rank 0 sends rank 1 the same row twice under one envelope (a fetch, a flush, the same fetch
/// again: no write between, so one buffer, one range, one epoch) while rank 1 is still busy
/// with a call of its own, so both messages arrive before either receive is posted. Each
/// receive takes its own, in the order sent; a transport that kept one early message per
/// envelope lost the first, and rank 1's second fetch then waited out its timeout.
fn one_envelope_twice(cl: &Cluster<'_>) -> Result<(), String> {
    if cl.ranks() < 2 {
        return Ok(());
    }
    // No agreement after each call, or rank 0 could not run ahead of rank 1.
    cl.check_drift(false);
    let ranks = cl.ranks();
    let mut a = cl
        .alloc::<u32>(ranks, 4, Distribution::BlockRows)
        .map_err(err)?;
    let mut b = cl
        .alloc::<u32>(ranks, 4, Distribution::BlockRows)
        .map_err(err)?;
    cl.compute(&mut a, 0..1, true, "fill a", |_, _, mut view| {
        view.host_write()?.fill(7);
        Ok(())
    })
    .map_err(err)?;
    cl.compute(&mut b, 1..2, true, "slow fill b", |_, _, mut view| {
        std::thread::sleep(std::time::Duration::from_millis(300));
        view.host_write()?.fill(9);
        Ok(())
    })
    .map_err(err)?;
    let to_rank_1 = |r: Rank| if r == Rank(1) { 0..1 } else { 0..0 };
    cl.fetch(&mut a, to_rank_1).map_err(err)?;
    cl.flush(&mut a).map_err(err)?;
    cl.fetch(&mut a, to_rank_1).map_err(err)?;
    if cl.rank() == Rank(1) {
        let row = cl.read(&a, 0..1).map_err(err)?;
        check(
            "row 0 as rank 1 received it the second time",
            row == [7; 4],
            || format!("{row:?}"),
        )?;
    }
    Ok(())
}
