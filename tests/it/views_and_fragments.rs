//! Buffer views and fragment metadata against a hostile user: programs of host views, kernels
//! on views split at fragment boundaries, partial-fragment writes and resets, fragment sizes
//! changed between steps (down to one byte, up to 2^62), secure buffers whose ciphertext sits
//! in an untrusted space, checksums on, tiny device pools that force windows and evictions,
//! and memory the CPU cannot address. Every step is checked against a plain `Vec` model that
//! shares no code with the runtime: a step either does what it says or fails with a typed
//! error that changed nothing, and every copy agrees at the end (`validate`).

use rimms::{
    ApiDecl, DevSliceMut, Device, Error, HeteData, HeteSliceMut, KernelArg, KernelCtx, Runtime,
    SecureKey, SimConfig,
};

static ADD: ApiDecl = ApiDecl::new("views_add");

/// `v[i] += k` on `device`, through a host body.
fn add_on(
    rt: &Runtime,
    device: Device,
    v: &mut HeteSliceMut<'_, u32>,
    k: u32,
) -> rimms::Result<()> {
    rt.launch_host(device, &ADD, [KernelArg::read_write("v", v)], |[v]| {
        let v = v.into_slice_mut::<u32>()?;
        v.iter_mut().for_each(|x| *x = x.wrapping_add(k));
        Ok(())
    })
}

/// `y[i] += k` where the memory is not host-addressable: read back, added, written again.
#[rimms::api]
fn views_add_card(k: u32, y: &mut [u32]) -> rimms::Result<()>;

#[rimms::kernel(api = views_add_card, device = sim)]
fn views_add_card_sim(
    ctx: &KernelCtx<'_>,
    k: u32,
    mut y: DevSliceMut<'_, u32>,
) -> rimms::Result<()> {
    let mut host = ctx.read_device(&y.as_dev_slice())?;
    host.iter_mut().for_each(|v| *v = v.wrapping_add(k));
    ctx.copy_to_device(&host, &mut y)
}

/// A small deterministic generator (the programs must replay from their seed).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// What a program's runtime looks like.
#[derive(Clone, Copy, Debug)]
struct Setup {
    checksums: bool,
    secure: bool,
    host_mapped: bool,
    card: bool,
    pool: usize,
}

/// One random program of `STEPS` steps over three buffers, checked against its model.
fn random_program(seed: u64, setup: Setup) {
    const N: usize = 3000;
    const STEPS: usize = 100;
    let mut builder = Runtime::builder()
        .host_pool(8 << 20)
        .granule(1024)
        .checksums(setup.checksums)
        .sim(SimConfig {
            pool_bytes: setup.pool,
            host_mapped: setup.host_mapped,
            device_memory: setup.card,
            ..SimConfig::default()
        });
    if setup.secure {
        builder = builder.trust("sim0", false);
    }
    let rt = builder.build().expect("runtime");
    let sim = rt.space_of(Device::Sim(0)).expect("sim0");
    let key = SecureKey::generate();
    let mut rng = Lcg(seed);
    let mut models: Vec<Vec<u32>> = (0..3u32)
        .map(|k| (0..N as u32).map(|i| i * 10 + k).collect())
        .collect();
    let mut xs: Vec<HeteData<u32>> = models
        .iter()
        .map(|m| match setup.secure {
            true => HeteData::from_slice_secure(&rt, m, &key),
            false => HeteData::from_slice(&rt, m),
        })
        .collect::<rimms::Result<_>>()
        .expect("buffers");
    let mut log = Vec::new();
    let context = |log: &[String]| format!("seed {seed} {setup:?}\n{}", log.join("\n"));
    for step in 0..STEPS {
        let which = rng.below(3);
        let (x, m) = (&mut xs[which], &mut models[which]);
        let (a, b) = (rng.below(N + 1), rng.below(N + 1));
        let (lo, hi) = (a.min(b), a.max(b));
        let op = rng.below(13);
        let k = step as u32 + 1;
        log.push(format!(
            "step {step}: buffer {which}, op {op}, {lo}..{hi}, fragment {}",
            x.fragment_bytes()
        ));
        let before = m.clone();
        let mut model = |f: &mut dyn FnMut(&mut Vec<u32>)| f(m);
        let outcome: rimms::Result<()> = match op {
            0 => x
                .slice_mut(lo..hi)
                .and_then(|mut v| {
                    let s = v.host_mut()?;
                    s.iter_mut()
                        .enumerate()
                        .for_each(|(i, e)| *e = e.wrapping_mul(3) ^ i as u32);
                    Ok(())
                })
                .map(|()| {
                    model(&mut |m| {
                        m[lo..hi]
                            .iter_mut()
                            .enumerate()
                            .for_each(|(i, e)| *e = e.wrapping_mul(3) ^ i as u32)
                    })
                }),
            1 => x
                .slice_mut(lo..hi)
                .and_then(|mut v| v.host_write().map(|s| s.fill(k)))
                .map(|()| model(&mut |m| m[lo..hi].fill(k))),
            2 => {
                let how = rng.below(3);
                x.slice_mut(lo..hi)
                    .and_then(|mut v| match how {
                        0 if setup.card => views_add_card(&rt, Device::Sim(0), k, &mut v),
                        0 => add_on(&rt, Device::Sim(0), &mut v, k),
                        // The CPU using a host-mapped sim's memory in place (`at`).
                        1 if setup.host_mapped => rt.launch_host(
                            Device::Cpu,
                            &ADD,
                            [KernelArg::read_write("v", &mut v).at(sim)],
                            |[v]| {
                                let v = v.into_slice_mut::<u32>()?;
                                v.iter_mut().for_each(|x| *x = x.wrapping_add(k));
                                Ok(())
                            },
                        ),
                        _ => add_on(&rt, Device::Cpu, &mut v, k),
                    })
                    .map(|()| {
                        model(&mut |m| m[lo..hi].iter_mut().for_each(|e| *e = e.wrapping_add(k)))
                    })
            }
            3 => x
                .slice_mut(lo..hi)
                .and_then(|mut v| v.reset())
                .map(|()| model(&mut |m| m[lo..hi].fill(0))),
            4 => {
                x.reset();
                model(&mut |m| m.fill(0));
                Ok(())
            }
            5 => x.fragment(4 << rng.below(13)),
            6 => x.prefetch(Device::Sim(0)),
            7 => x.prefetch_async(Device::Sim(0)).map(drop),
            8 => x.validate(),
            9 => x.slice(lo..hi).and_then(|v| {
                let got = v.host()?;
                assert_eq!(got, &m[lo..hi], "a read of {lo}..{hi}: {}", context(&log));
                Ok(())
            }),
            11 => x
                .slice_mut(lo..hi)
                .and_then(|mut v| v.host_fill(|s| s.fill(k)))
                .map(|()| model(&mut |m| m[lo..hi].fill(k))),
            // A fill that unwinds half-way keeps every other valid copy: where one exists its
            // bytes are read back unchanged; where the host held the only one, the half that
            // was written stays written. Nothing else changes.
            12 => {
                let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    x.slice_mut(lo..hi).and_then(|mut v| {
                        v.host_fill(|s| {
                            let half = s.len() / 2;
                            s[..half].fill(k);
                            panic!("a fill that fails half-way");
                        })
                    })
                }));
                match unwound {
                    Ok(result) => result.map(|()| unreachable!("the fill returned")),
                    Err(_) => x.slice(lo..hi).and_then(|v| {
                        let half = (hi - lo) / 2;
                        let got = v.host()?;
                        for (i, (&g, &old)) in got.iter().zip(&m[lo..hi]).enumerate() {
                            let written = i < half && g == k;
                            assert!(
                                g == old || written,
                                "element {}: {g}, was {old}: {}",
                                lo + i,
                                context(&log)
                            );
                        }
                        m[lo..hi].copy_from_slice(got);
                        Ok(())
                    }),
                }
            }
            // Two halves split on a fragment boundary, written in one call.
            _ if setup.card => Ok(()),
            _ => {
                let per_fragment = x.fragment_bytes() / 4;
                let mid = (rng.below(N + 1) / per_fragment * per_fragment).min(N);
                x.split_at_mut(mid)
                    .and_then(|(mut l, mut r)| {
                        let args = [
                            KernelArg::read_write("l", &mut l),
                            KernelArg::read_write("r", &mut r),
                        ];
                        rt.launch_host(Device::Sim(0), &ADD, args, |[l, r]| {
                            l.into_slice_mut::<u32>()?
                                .iter_mut()
                                .for_each(|e| *e ^= 0x55);
                            r.into_slice_mut::<u32>()?
                                .iter_mut()
                                .for_each(|e| *e ^= 0xaa);
                            Ok(())
                        })
                    })
                    .map(|()| {
                        model(&mut |m| {
                            m[..mid].iter_mut().for_each(|e| *e ^= 0x55);
                            m[mid..].iter_mut().for_each(|e| *e ^= 0xaa);
                        })
                    })
            }
        };
        match outcome {
            Ok(()) => {}
            // A pool too small for the step, or plaintext refused in an untrusted space: the
            // step changed nothing.
            Err(e @ (Error::DoesNotFit { .. } | Error::Untrusted { .. })) => {
                *m = before;
                log.push(format!("  refused: {e}"));
            }
            Err(e) => panic!("unexpected error {e}: {}", context(&log)),
        }
        // Not after every step: a read brings everything to the host, which would hide the
        // states the next step should start from.
        if rng.below(5) == 0 {
            let got = x
                .to_vec()
                .unwrap_or_else(|e| panic!("to_vec: {e}: {}", context(&log)));
            assert_eq!(got, *m, "{}", context(&log));
        }
    }
    for (x, m) in xs.iter().zip(&models) {
        x.validate()
            .unwrap_or_else(|e| panic!("validate: {e}: {}", context(&log)));
        assert_eq!(&x.to_vec().expect("contents"), m, "{}", context(&log));
    }
}

#[test]
fn random_programs_of_views_and_fragment_sizes_match_their_models() {
    let setups = [
        (true, false, false, false, 4 << 20),
        (true, false, true, false, 24 << 10),
        (false, false, true, false, 24 << 10),
        (true, true, false, false, 24 << 10),
        (false, true, true, false, 4 << 20),
        (false, false, false, false, 20 << 10),
        (true, false, false, true, 24 << 10),
        (false, true, false, true, 4 << 20),
    ]
    .map(|(checksums, secure, host_mapped, card, pool)| Setup {
        checksums,
        secure,
        host_mapped,
        card,
        pool,
    });
    for seed in 0..12 {
        for setup in setups {
            random_program(seed, setup);
        }
    }
}

/// One-byte fragments, split after byte 7: each half written by its own argument of one call.
#[test]
fn one_byte_fragments_split_anywhere_and_written_in_one_call() {
    let rt = Runtime::builder()
        .checksums(true)
        .sim(SimConfig::default())
        .build()
        .expect("runtime");
    let values: Vec<u8> = (0..=255).collect();
    let mut x = HeteData::from_slice(&rt, &values).expect("x");
    x.fragment(1).expect("one-byte fragments");
    let (mut a, mut b) = x.split_at_mut(7).expect("split");
    let args = [
        KernelArg::read_write("a", &mut a),
        KernelArg::read_write("b", &mut b),
    ];
    rt.launch_host(Device::Sim(0), &ADD, args, |[a, b]| {
        a.into_slice_mut::<u8>()?
            .iter_mut()
            .for_each(|x| *x = x.wrapping_add(1));
        b.into_slice_mut::<u8>()?
            .iter_mut()
            .for_each(|x| *x = x.wrapping_add(2));
        Ok(())
    })
    .expect("call");
    let want: Vec<u8> = (0..=255u8)
        .map(|i| i.wrapping_add(if i < 7 { 1 } else { 2 }))
        .collect();
    assert_eq!(x.to_vec().expect("x"), want);
    x.validate().expect("copies agree");
}

/// The largest fragment sizes: one fragment holds the whole buffer, and changing back keeps
/// every value.
#[test]
fn a_fragment_far_larger_than_the_buffer_keeps_its_values() {
    for (checksums, bytes) in [(false, 1usize << 62), (true, 1 << 63)] {
        let rt = Runtime::builder()
            .checksums(checksums)
            .sim(SimConfig::default())
            .build()
            .expect("runtime");
        let values: Vec<u32> = (0..3000).collect();
        let mut x = HeteData::from_slice(&rt, &values).expect("x");
        x.fragment(bytes).expect("a huge fragment");
        assert_eq!(x.fragment_count(), 1);
        x.prefetch(Device::Sim(0)).expect("prefetch");
        add_on(&rt, Device::Sim(0), &mut x.as_slice_mut(), 1).expect("call");
        x.slice_mut(5..7).expect("view").reset().expect("reset");
        x.fragment(4096).expect("back to 4 KiB");
        let want: Vec<u32> = (0..3000)
            .map(|i| if (5..7).contains(&i) { 0 } else { i + 1 })
            .collect();
        assert_eq!(x.to_vec().expect("x"), want, "fragment {bytes}");
        x.validate().expect("copies agree");
    }
}

/// Threads each own a chunk (split on fragment boundaries) and mix host views and calls on a
/// sim and the CPU, while another thread's calls press on the sim's small pool.
#[test]
fn threads_on_chunks_of_one_buffer_keep_their_own_values() {
    for (checksums, host_mapped, pool) in [
        (true, false, 24 << 10),
        (true, true, 24 << 10),
        (false, true, 16 << 10),
    ] {
        let rt = Runtime::builder()
            .granule(1024)
            .checksums(checksums)
            .sim(SimConfig {
                pool_bytes: pool,
                host_mapped,
                ..SimConfig::default()
            })
            .build()
            .expect("runtime");
        const N: usize = 4096;
        let values: Vec<u32> = (0..N as u32).collect();
        let mut x = HeteData::from_slice(&rt, &values).expect("x");
        x.fragment(1024).expect("fragment");
        let mut others: Vec<HeteData<u32>> = (0..3)
            .map(|_| HeteData::from_slice(&rt, &values).expect("other"))
            .collect();
        std::thread::scope(|s| {
            for (t, mut chunk) in x.chunks_mut(N / 4).expect("chunks").into_iter().enumerate() {
                let rt = &rt;
                s.spawn(move || {
                    let first = (t * N / 4) as u32;
                    let mut model: Vec<u32> = (first..first + (N / 4) as u32).collect();
                    for i in 0..40u32 {
                        let outcome = match i % 4 {
                            0 => chunk.host_mut().map(|h| {
                                h.iter_mut().for_each(|e| *e = e.wrapping_mul(3));
                                model.iter_mut().for_each(|e| *e = e.wrapping_mul(3));
                            }),
                            1 => add_on(rt, Device::Sim(0), &mut chunk, i)
                                .map(|()| model.iter_mut().for_each(|e| *e = e.wrapping_add(i))),
                            2 => add_on(rt, Device::Cpu, &mut chunk, i)
                                .map(|()| model.iter_mut().for_each(|e| *e = e.wrapping_add(i))),
                            _ => chunk
                                .host()
                                .map(|h| assert_eq!(h, &model[..], "chunk {t}, step {i}")),
                        };
                        match outcome {
                            Ok(()) | Err(Error::DoesNotFit { .. }) => {}
                            Err(e) => panic!("chunk {t}, step {i}: {e}"),
                        }
                    }
                    assert_eq!(chunk.host().expect("chunk"), &model[..]);
                });
            }
            s.spawn(|| {
                for i in 0..60 {
                    let other = &mut others[i % 3];
                    match add_on(&rt, Device::Sim(0), &mut other.as_slice_mut(), 1) {
                        Ok(()) | Err(Error::DoesNotFit { .. }) => {}
                        Err(e) => panic!("pressure: {e}"),
                    }
                }
            });
        });
        x.validate().expect("copies agree");
    }
}

/// A buffer keeps its memory system (and a card's device memory) alive: after the runtime is
/// dropped its values are read, compared and moved as before.
#[test]
fn a_buffer_outlives_its_runtime_handle() {
    for card in [false, true] {
        let rt = Runtime::builder()
            .checksums(true)
            .sim(SimConfig {
                device_memory: card,
                host_mapped: !card,
                ..SimConfig::default()
            })
            .build()
            .expect("runtime");
        let values: Vec<u32> = (0..5000).collect();
        let mut x = HeteData::from_slice(&rt, &values).expect("x");
        match card {
            true => views_add_card(&rt, Device::Sim(0), 7, &mut x),
            false => add_on(&rt, Device::Sim(0), &mut x.as_slice_mut(), 7),
        }
        .expect("call");
        drop(rt);
        let want: Vec<u32> = values.iter().map(|v| v + 7).collect();
        assert_eq!(x.to_vec().expect("x"), want);
        x.prefetch(Device::Sim(0)).expect("prefetch");
        x.validate().expect("copies agree");
    }
}

/// A `host_fill` whose closure panics part-way keeps the last valid copy: the newest values
/// live only on sim0 (a call wrote them there), the fill writes one element on the host and
/// unwinds, and the buffer still reads the values sim0 held, as a host loop that unwinds does.
/// Views of a whole buffer and of part of one, with checksums off and on.
#[test]
fn a_host_fill_that_panics_keeps_the_last_valid_copy() {
    for (checksums, part) in [(false, false), (true, false), (false, true), (true, true)] {
        let rt = Runtime::builder()
            .checksums(checksums)
            .sim(SimConfig::default())
            .build()
            .expect("runtime");
        let values: Vec<u32> = (0..3000).collect();
        let mut x = HeteData::from_slice(&rt, &values).expect("x");
        add_on(&rt, Device::Sim(0), &mut x.as_slice_mut(), 7).expect("call");
        let want: Vec<u32> = values.iter().map(|v| v + 7).collect();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let fill = |s: &mut [u32]| {
                s[0] = 99;
                panic!("the fill fails part-way");
            };
            match part {
                false => x.host_fill(fill),
                true => x.slice_mut(1024..2048).expect("view").host_fill(fill),
            }
        }));
        assert!(unwound.is_err(), "the fill unwound");
        let got = x.to_vec().expect("x");
        let lost = got.iter().zip(&want).position(|(g, w)| g != w);
        assert_eq!(
            lost, None,
            "checksums {checksums}, part {part}: the last valid copy was lost (first wrong element)"
        );
        x.validate().expect("copies agree");
    }
}
