//! Each transition of the protocol on a bare fragment table, with a hand-written cost table.
//! Summary words are written as literal bit layouts (bit `s`: every fragment valid in space
//! `s`; bit `16 + s`: some fragment valid in `s`; bit 32: some fragment zero), never with the
//! implementation's own constants, so a wrong constant cannot agree with itself.

mod model;

use super::*;

/// The summary bit layout these tests spell out assumes 16 spaces.
const _: () = assert!(MAX_SPACES == 16);

const HOST: SpaceId = SpaceId(0);
const DEV: SpaceId = SpaceId(1);
const OTHER: SpaceId = SpaceId(2);

/// Every link costs the same, so ties decide: the lowest space id.
fn flat(_: SpaceId, _: SpaceId) -> u64 {
    1
}

fn whole(frags: usize) -> FragmentSpan {
    FragmentSpan {
        frags: 0..frags,
        first_partial: false,
        last_partial: false,
    }
}

/// Runs an access to completion the way the buffer layer does: plan, commit, mark.
fn access(t: &mut FragmentTable, span: &FragmentSpan, s: SpaceId, a: Access) -> AcquirePlan {
    let plan = t.plan_acquire(span, s, a, flat);
    t.commit_acquire(&plan);
    t.note_moves(&plan);
    if a.writes() {
        t.mark_written(span.frags.clone(), s);
    }
    plan
}

fn state(valid: &[SpaceId], owner: Option<SpaceId>, zero: bool) -> FragmentState {
    FragmentState {
        valid: valid.iter().fold(SpaceSet::EMPTY, |s, &x| s.with(x)),
        owner,
        zero,
    }
}

#[test]
fn fresh_fragments_are_zero_and_valid_nowhere() {
    let t = FragmentTable::new(3);
    assert_eq!(t.get(1), Some(state(&[], None, true)));
    assert_eq!(t.summary(), 1 << 32);
}

#[test]
fn reading_zero_fills_in_place_and_keeps_the_mark() {
    let mut t = FragmentTable::new(4);
    let plan = access(&mut t, &whole(4), DEV, Access::Read);
    assert!(plan.moves.is_empty(), "zero data must never be transferred");
    assert_eq!(
        plan.fills.to_vec(),
        vec![0..4],
        "one fill for the contiguous run"
    );
    assert_eq!(t.get(0), Some(state(&[DEV], Some(DEV), true)));
    // A second space fills its own copy too: still no transfer.
    let plan = access(&mut t, &whole(4), HOST, Access::Read);
    assert!(plan.moves.is_empty());
    assert_eq!(plan.fills.to_vec(), vec![0..4]);
    assert_eq!(t.get(3), Some(state(&[HOST, DEV], Some(DEV), true)));
}

#[test]
fn read_miss_copies_from_the_valid_space_and_keeps_it_valid() {
    let mut t = FragmentTable::new(2);
    access(&mut t, &whole(2), HOST, Access::Write);
    let plan = access(&mut t, &whole(2), DEV, Access::Read);
    assert_eq!(
        plan.moves.to_vec(),
        vec![Move {
            src: HOST,
            frags: 0..2
        }]
    );
    assert_eq!(t.get(0), Some(state(&[HOST, DEV], Some(HOST), false)));
}

#[test]
fn read_hit_plans_nothing() {
    let mut t = FragmentTable::new(2);
    access(&mut t, &whole(2), DEV, Access::Write);
    assert!(t
        .plan_acquire(&whole(2), DEV, Access::Read, flat)
        .is_empty());
}

#[test]
fn read_write_copies_in_then_leaves_the_writer_alone_valid() {
    let mut t = FragmentTable::new(2);
    access(&mut t, &whole(2), HOST, Access::Write);
    access(&mut t, &whole(2), OTHER, Access::Read);
    let plan = access(&mut t, &whole(2), DEV, Access::ReadWrite);
    assert_eq!(
        plan.moves.to_vec(),
        vec![Move {
            src: HOST,
            frags: 0..2
        }]
    );
    assert_eq!(t.get(1), Some(state(&[DEV], Some(DEV), false)));
}

#[test]
fn write_discard_moves_nothing() {
    let mut t = FragmentTable::new(3);
    access(&mut t, &whole(3), HOST, Access::Write);
    let plan = access(&mut t, &whole(3), DEV, Access::Write);
    assert!(plan.is_empty());
    assert_eq!(t.get(2), Some(state(&[DEV], Some(DEV), false)));
}

/// A write looks only at its edges: a one-fragment span covered in part at both ends is
/// one copy, not two; an empty span, whatever its flags say, is no copy at all.
#[test]
fn a_partial_write_plans_each_edge_once_and_an_empty_span_nothing() {
    let mut t = FragmentTable::new(4);
    access(&mut t, &whole(4), HOST, Access::Write);
    let span = |frags: Range<usize>| FragmentSpan {
        frags,
        first_partial: true,
        last_partial: true,
    };
    let plan = t.plan_acquire(&span(2..3), DEV, Access::Write, flat);
    assert_eq!(
        plan.moves.to_vec(),
        vec![Move {
            src: HOST,
            frags: 2..3
        }]
    );
    for empty in [2..2, 4..4] {
        let plan = t.plan_acquire(&span(empty.clone()), DEV, Access::Write, flat);
        assert!(plan.is_empty(), "{empty:?}: {plan:?}");
    }
}

#[test]
fn partial_write_is_a_read_write_for_the_partial_fragments_only() {
    let mut t = FragmentTable::new(4);
    access(&mut t, &whole(4), HOST, Access::Write);
    let span = FragmentSpan {
        frags: 0..4,
        first_partial: true,
        last_partial: true,
    };
    let plan = t.plan_acquire(&span, DEV, Access::Write, flat);
    assert_eq!(
        plan.moves.to_vec(),
        vec![
            Move {
                src: HOST,
                frags: 0..1
            },
            Move {
                src: HOST,
                frags: 3..4
            }
        ]
    );
}

#[test]
fn the_cheapest_source_wins_and_ties_go_to_the_lowest_id() {
    let mut t = FragmentTable::new(1);
    access(&mut t, &whole(1), DEV, Access::Write);
    access(&mut t, &whole(1), OTHER, Access::Read);
    let into_host =
        |cost: fn(SpaceId, SpaceId) -> u64| t.plan_acquire(&whole(1), HOST, Access::Read, cost);
    assert_eq!(into_host(flat).moves[0].src, DEV);
    assert_eq!(
        into_host(|s, _| if s == OTHER { 1 } else { 5 }).moves[0].src,
        OTHER
    );
}

/// Where sources tie, a new run starts from the one that holds more of what follows: bytes one
/// source can serve come in one copy (the peer scenario: sim1 → sim0 8 KiB in one copy, not
/// host → sim0 and sim1 → sim0 4 KiB each). A cheaper source still wins over a longer run.
#[test]
fn a_tie_goes_to_the_source_that_holds_the_longer_run() {
    let mut t = FragmentTable::new(3);
    // Fragment 0 on HOST and OTHER, fragments 1..3 on OTHER alone.
    access(&mut t, &whole(3), OTHER, Access::Write);
    let first = FragmentSpan {
        frags: 0..1,
        first_partial: false,
        last_partial: false,
    };
    access(&mut t, &first, HOST, Access::Read);
    let plan = t.plan_acquire(&whole(3), DEV, Access::Read, flat);
    assert_eq!(
        plan.moves.to_vec(),
        vec![Move {
            src: OTHER,
            frags: 0..3
        }]
    );
    let host_cheaper = |s: SpaceId, _: SpaceId| if s == HOST { 1 } else { 2 };
    let plan = t.plan_acquire(&whole(3), DEV, Access::Read, host_cheaper);
    assert_eq!(
        plan.moves.to_vec(),
        vec![
            Move {
                src: HOST,
                frags: 0..1
            },
            Move {
                src: OTHER,
                frags: 1..3
            },
        ]
    );
}

#[test]
fn neighbours_with_one_source_coalesce_and_others_split() {
    let mut t = FragmentTable::new(6);
    access(&mut t, &whole(6), HOST, Access::Write);
    // Fragments 2..4 now live on DEV only, 5 on OTHER only.
    let span = |r: Range<usize>| FragmentSpan {
        frags: r,
        first_partial: false,
        last_partial: false,
    };
    access(&mut t, &span(2..4), DEV, Access::Write);
    access(&mut t, &span(5..6), OTHER, Access::Write);
    // Fragment 1 is already valid on OTHER: it splits the host run.
    access(&mut t, &span(1..2), OTHER, Access::Read);
    let plan = t.plan_acquire(&whole(6), OTHER, Access::Read, flat);
    assert_eq!(
        plan.moves.to_vec(),
        vec![
            Move {
                src: HOST,
                frags: 0..1
            },
            Move {
                src: DEV,
                frags: 2..4
            },
            Move {
                src: HOST,
                frags: 4..5
            },
        ]
    );
}

#[test]
fn the_summary_gives_the_fast_path_exactly() {
    let mut t = FragmentTable::new(2);
    access(&mut t, &whole(2), DEV, Access::Write);
    let s = t.summary();
    assert!(resident(s, DEV, Access::Read));
    assert!(resident(s, DEV, Access::ReadWrite));
    assert!(resident(s, DEV, Access::Write));
    assert!(!resident(s, HOST, Access::Read));
    // A replica elsewhere: reads still hit, writes must invalidate it.
    access(&mut t, &whole(2), HOST, Access::Read);
    let s = t.summary();
    assert!(resident(s, DEV, Access::Read) && resident(s, HOST, Access::Read));
    assert!(!resident(s, DEV, Access::Write));
    // One fragment elsewhere only: no whole-buffer read hit in DEV.
    let one = FragmentSpan {
        frags: 1..2,
        first_partial: false,
        last_partial: false,
    };
    access(&mut t, &one, OTHER, Access::Write);
    assert!(!resident(t.summary(), DEV, Access::Read));
    // Zero-marked data materialised only in DEV: reads hit, writes must clear the mark.
    let mut z = FragmentTable::new(1);
    access(&mut z, &whole(1), DEV, Access::Read);
    assert!(resident(z.summary(), DEV, Access::Read));
    assert!(!resident(z.summary(), DEV, Access::Write));
}

#[test]
fn a_failed_write_drops_the_untrusted_copy_unless_it_is_the_only_one() {
    let mut t = FragmentTable::new(2);
    access(&mut t, &whole(2), HOST, Access::Write);
    let plan = t.plan_acquire(&whole(2), DEV, Access::ReadWrite, flat);
    t.commit_acquire(&plan);
    t.mark_failed(0..2, DEV);
    assert_eq!(t.get(0), Some(state(&[HOST], Some(HOST), false)));
    t.mark_failed(0..2, HOST);
    assert_eq!(t.get(0), Some(state(&[HOST], Some(HOST), false)));
    // Zero data can always be recreated by a fill: a failed write drops even the only copy.
    let mut z = FragmentTable::new(1);
    let plan = z.plan_acquire(&whole(1), DEV, Access::ReadWrite, flat);
    z.commit_acquire(&plan);
    z.mark_failed(0..1, DEV);
    assert_eq!(z.get(0), Some(state(&[], Some(DEV), true)));
}

#[test]
fn reset_makes_everything_zero_without_moving() {
    let mut t = FragmentTable::new(3);
    access(&mut t, &whole(3), DEV, Access::Write);
    t.reset();
    assert_eq!(t.get(2), Some(state(&[], None, true)));
    assert!(t
        .plan_acquire(&whole(3), HOST, Access::Read, flat)
        .moves
        .is_empty());
}

#[test]
fn merging_takes_common_validity_and_asks_for_a_gather_when_there_is_none() {
    let mut t = FragmentTable::new(4);
    access(&mut t, &whole(4), HOST, Access::Write);
    access(
        &mut t,
        &FragmentSpan {
            frags: 0..1,
            first_partial: false,
            last_partial: false,
        },
        DEV,
        Access::Read,
    );
    assert!(!t.merge_needs_gather(2));
    let merged = t.merged(2);
    assert_eq!(merged.len(), 2);
    assert_eq!(merged.get(0), Some(state(&[HOST], Some(HOST), false)));
    access(
        &mut t,
        &FragmentSpan {
            frags: 3..4,
            first_partial: false,
            last_partial: false,
        },
        DEV,
        Access::Write,
    );
    assert!(t.merge_needs_gather(2), "fragments 2 and 3 share no space");
    // Zero fragments never need gathering.
    assert!(!FragmentTable::new(4).merge_needs_gather(4));
}

#[test]
fn splitting_inherits_the_parent_state() {
    let mut t = FragmentTable::new(2);
    access(
        &mut t,
        &FragmentSpan {
            frags: 1..2,
            first_partial: false,
            last_partial: false,
        },
        DEV,
        Access::Write,
    );
    let split = t.split(4, 7).expect("seven records");
    assert_eq!(split.len(), 7);
    assert_eq!(split.get(3), Some(state(&[], None, true)));
    assert_eq!(split.get(4), Some(state(&[DEV], Some(DEV), false)));
    // Some fragment valid in DEV (bit 16 + 1), some zero (bit 32), none valid everywhere.
    assert_eq!(split.summary(), 1 << 32 | 1 << 17);
}

/// Splitting into more records than a process can allocate is `None` (the caller's error),
/// found without touching memory: the reservation overflows.
#[test]
fn splitting_into_too_many_records_is_none() {
    let t = FragmentTable::new(2);
    assert!(t.split(usize::MAX / 4, usize::MAX / 2).is_none());
    assert!(FragmentTable::try_new(usize::MAX / 2).is_none());
}

#[test]
fn spans_know_their_partial_ends() {
    // 4 fragments of 16 bytes, the last only 8 bytes long (buffer of 56).
    assert_eq!(
        FragmentSpan::of(0..56, 4, 56),
        FragmentSpan {
            frags: 0..4,
            first_partial: false,
            last_partial: false
        }
    );
    assert_eq!(
        FragmentSpan::of(8..40, 4, 56),
        FragmentSpan {
            frags: 0..3,
            first_partial: true,
            last_partial: true
        }
    );
    let single = FragmentSpan::of(16..20, 4, 56);
    assert_eq!(single.frags, 1..2);
    assert!(single.is_partial(1));
}

#[test]
fn a_withdrawn_summary_lets_no_access_through_the_fast_path() {
    for space in (0..MAX_SPACES as u8).map(SpaceId) {
        for access in [Access::Read, Access::ReadWrite, Access::Write] {
            assert!(!resident(WITHDRAWN, space, access), "{space:?} {access:?}");
        }
    }
}

#[test]
fn summary_bits_are_laid_out_per_space() {
    // Space 2's bits (2 and 18) must not collide with the zero flag (32), nor space 15's
    // (15 and 31).
    let mut t = FragmentTable::new(2);
    let first = FragmentSpan {
        frags: 0..1,
        first_partial: false,
        last_partial: false,
    };
    access(&mut t, &first, OTHER, Access::Read);
    assert_eq!(
        t.summary(),
        1 << 32 | 1 << 18,
        "zero everywhere, filled in space 2"
    );
    access(&mut t, &whole(2), OTHER, Access::Write);
    assert_eq!(
        t.summary(),
        1 << 2 | 1 << 18,
        "written by space 2: no zero flag"
    );
    assert!(resident(t.summary(), OTHER, Access::Write));
    let last = SpaceId(15);
    access(&mut t, &first, last, Access::Write);
    assert_eq!(t.summary(), 1 << 18 | 1 << 31);
    access(&mut t, &whole(2), last, Access::Read);
    assert_eq!(t.summary(), 1 << 15 | 1 << 18 | 1 << 31);
    t.reset();
    assert_eq!(t.summary(), 1 << 32);
}

#[test]
fn valid_counts_go_down_when_copies_are_dropped() {
    let mut t = FragmentTable::new(3);
    access(&mut t, &whole(3), HOST, Access::Write);
    access(&mut t, &whole(3), DEV, Access::Read);
    assert_eq!(t.summary(), 0b11 | 0b11 << 16);
    // The host writes again: DEV's copies are gone, from the summary too.
    access(&mut t, &whole(3), HOST, Access::Write);
    assert_eq!(t.summary(), 1 | 1 << 16);
    assert!(resident(t.summary(), HOST, Access::Write));
    assert!(!resident(t.summary(), DEV, Access::Read));
    // A failed write drops DEV's copy of fragment 0 again after a read brought it back.
    access(&mut t, &whole(3), DEV, Access::Read);
    t.mark_failed(0..1, DEV);
    assert_eq!(t.summary(), 1 | 1 << 16 | 1 << 17);
}

#[test]
fn separate_zero_runs_are_separate_fills() {
    // Fragments 1 and 4 written on the host; 0, 2..4 and 5 still zero.
    let mut t = FragmentTable::new(6);
    for f in [1, 4] {
        let span = FragmentSpan {
            frags: f..f + 1,
            first_partial: false,
            last_partial: false,
        };
        access(&mut t, &span, HOST, Access::Write);
    }
    let plan = t.plan_acquire(&whole(6), DEV, Access::Read, flat);
    assert_eq!(plan.fills.to_vec(), vec![0..1, 2..4, 5..6]);
    assert_eq!(
        plan.moves.to_vec(),
        vec![
            Move {
                src: HOST,
                frags: 1..2
            },
            Move {
                src: HOST,
                frags: 4..5
            }
        ]
    );
}

#[test]
fn a_merged_fragment_with_data_keeps_an_owner() {
    // Fragment 0 written on the host, fragment 1 on DEV; both then read on OTHER and DEV.
    let mut t = FragmentTable::new(2);
    let one = |f: usize| FragmentSpan {
        frags: f..f + 1,
        first_partial: false,
        last_partial: false,
    };
    access(&mut t, &one(0), HOST, Access::Write);
    access(&mut t, &one(1), DEV, Access::Write);
    access(&mut t, &whole(2), OTHER, Access::Read);
    access(&mut t, &whole(2), DEV, Access::Read);
    assert!(!t.merge_needs_gather(2));
    // The owners differ, so no single writer is known: the lowest space holding the whole
    // merged fragment (DEV) stands in, rather than `None`, which means "never touched".
    assert_eq!(
        t.merged(2).get(0),
        Some(state(&[DEV, OTHER], Some(DEV), false))
    );
    // One common owner is kept even where it is not the lowest holder.
    let mut u = FragmentTable::new(2);
    access(&mut u, &whole(2), OTHER, Access::Write);
    access(&mut u, &whole(2), DEV, Access::Read);
    assert_eq!(
        u.merged(2).get(0),
        Some(state(&[DEV, OTHER], Some(OTHER), false))
    );
}

/// Four fragments in DEV: 0 zero-marked, 1 and 2 written there alone, 3 read in from the host.
/// Evicting DEV writes back the run 1..3 in one copy and drops 0 and 3 for free; afterwards
/// the host holds 1 and 2, nothing is valid in DEV, and 0 is still zero.
#[test]
fn eviction_writes_back_only_the_last_copies_and_drops_the_rest() {
    let mut t = FragmentTable::new(4);
    access(&mut t, &whole(4), DEV, Access::Read);
    let span = |f: usize| FragmentSpan {
        frags: f..f + 1,
        first_partial: false,
        last_partial: false,
    };
    access(&mut t, &span(1), DEV, Access::Write);
    access(&mut t, &span(2), DEV, Access::Write);
    access(&mut t, &span(3), HOST, Access::Write);
    access(&mut t, &span(3), DEV, Access::Read);
    let plan = t.plan_evict(DEV);
    assert_eq!(plan.write_back, vec![1..3]);
    assert_eq!(plan.dropped, vec![0..1, 3..4]);
    t.commit_evict(&plan, Some(HOST));
    assert_eq!(t.get(0), Some(state(&[], Some(DEV), true)));
    assert_eq!(t.get(1), Some(state(&[HOST], Some(HOST), false)));
    assert_eq!(t.get(2), Some(state(&[HOST], Some(HOST), false)));
    assert_eq!(t.get(3), Some(state(&[HOST], Some(HOST), false)));
    // Nothing valid in DEV any more (bit 1 and bit 17 clear); host holds 1..4 (bit 16),
    // fragment 0 is zero (bit 32).
    assert_eq!(t.summary(), 1 << 16 | 1 << 32);
}

/// A space that holds nothing of the buffer plans nothing; evicting a copy that every
/// fragment has elsewhere moves nothing and leaves the other copies as they were.
#[test]
fn eviction_of_a_redundant_copy_moves_nothing() {
    let mut t = FragmentTable::new(2);
    access(&mut t, &whole(2), HOST, Access::Write);
    let empty = t.plan_evict(DEV);
    assert!(empty.write_back.is_empty() && empty.dropped.is_empty());
    access(&mut t, &whole(2), DEV, Access::Read);
    let plan = t.plan_evict(DEV);
    assert!(plan.write_back.is_empty());
    assert_eq!(plan.dropped, vec![0..2]);
    t.commit_evict(&plan, None);
    assert_eq!(t.get(1), Some(state(&[HOST], Some(HOST), false)));
    assert_eq!(t.summary(), 1 | 1 << 16);
}

/// The owner history: after a frame of "written on the device, read on the host", a write on
/// the device predicts the host; a change of pattern changes the prediction; fragments that
/// disagree, and a history too short, predict nothing; a resident read notes nothing.
#[test]
fn a_write_predicts_the_space_that_copied_the_bytes_after_the_last_write_there() {
    let mut t = FragmentTable::new(4);
    // Nothing known yet.
    access(&mut t, &whole(4), DEV, Access::Write);
    assert_eq!(t.predict_after(0..4, DEV), None, "one write says nothing");
    // Frame 1: the host reads what the device wrote, then the device writes again.
    access(&mut t, &whole(4), HOST, Access::Read);
    access(&mut t, &whole(4), DEV, Access::Write);
    assert_eq!(t.predict_after(0..4, DEV), Some(HOST));
    // A resident read (nothing to copy) is no use worth noting: the host still comes next.
    access(&mut t, &whole(4), DEV, Access::Read);
    assert_eq!(t.predict_after(0..4, DEV), Some(HOST));
    // The bytes go to another device instead, on fragments 2..4 only.
    access(&mut t, &whole(4), HOST, Access::Read);
    let back = FragmentSpan {
        frags: 2..4,
        first_partial: false,
        last_partial: false,
    };
    access(&mut t, &whole(4), DEV, Access::Write);
    access(&mut t, &back, OTHER, Access::Read);
    access(&mut t, &whole(4), DEV, Access::Write);
    assert_eq!(t.predict_after(2..4, DEV), Some(OTHER));
    assert_eq!(t.predict_after(0..2, DEV), Some(HOST));
    assert_eq!(
        t.predict_after(0..4, DEV),
        None,
        "fragments that disagree predict nothing"
    );
    // A writer never predicts itself, and a space with no history predicts nothing.
    assert_eq!(t.predict_after(0..4, OTHER), None);
    // `hete_Reset` keeps the history: where the bytes went is still where they will go.
    t.reset();
    assert_eq!(t.predict_after(0..2, DEV), Some(HOST));
}

/// The owner history read back entry by entry: the space after the writer's previous entry,
/// however far back that is; nothing after a rewrite (the writer twice in a row); and
/// fragments whose histories differ only in entries older than that agree.
#[test]
fn a_prediction_reads_the_history_back_to_the_writers_previous_entry() {
    let mut t = FragmentTable::new(2);
    // Oldest first: DEV, HOST, OTHER, DEV. The previous DEV is three entries back, and HOST
    // came right after it.
    for space in [DEV, HOST, OTHER, DEV] {
        t.note_use(0..1, space);
    }
    assert_eq!(t.predict_after(0..1, DEV), Some(HOST));

    // Written again in place before its bytes were used: nothing comes after DEV now.
    let mut r = FragmentTable::new(1);
    r.note_use(0..1, DEV);
    r.note_rewrite(0..1, DEV);
    assert_eq!(r.predict_after(0..1, DEV), None);

    // Fragment 0: OTHER, DEV, HOST, DEV; fragment 1: DEV, HOST, DEV. Their words differ
    // (OTHER in fragment 0's oldest entry), but both say HOST follows DEV.
    let mut d = FragmentTable::new(2);
    d.note_use(0..1, OTHER);
    for space in [DEV, HOST, DEV] {
        d.note_use(0..2, space);
    }
    assert_eq!(d.predict_after(0..2, DEV), Some(HOST));
}

/// A buffer of no fragment holds every byte it has everywhere: a read of it is resident in
/// every space, with nothing to plan.
#[test]
fn an_empty_table_is_resident_for_reads_in_every_space() {
    let t = FragmentTable::new(0);
    for space in (0..MAX_SPACES as u8).map(SpaceId) {
        assert!(resident(t.summary(), space, Access::Read), "{space:?}");
    }
}
