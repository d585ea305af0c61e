//! The fragment table against a plain model of the protocol, over up to `MAX_SPACES` spaces.
//!
//! The unit tests beside this one walk each transition once with three spaces; a mistake that
//! only shows with many spaces, in the per-space counts behind the summary, or in how plans
//! group fragments gets past them. Here random sequences of accesses (committed or abandoned
//! half-way, as a failed copy leaves them), failed writes, resets, merges and splits run on a
//! table and on a model that keeps, per fragment, a `[bool; 16]` of valid spaces, the owner
//! and the zero mark, and that knows nothing of counts or summary words. After every step:
//!
//! - every fragment's state equals the model's;
//! - the summary equals a word built from the model with the documented layout written out
//!   as literal bit positions (bit `s`: every fragment valid in space `s`; bit `16 + s`: some
//!   fragment valid in `s`; bit 32: some fragment zero) and also equals the same word rebuilt
//!   from the table's own fragments, so the incremental counts are checked against a rescan;
//! - the lock-free fast path agrees with the model for every space and access mode.
//!
//! Each plan is compared with the model's: which fragments each source copies, in runs of
//! neighbours with one source, and which are filled, in runs of neighbours.

use super::*;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

// The literal layout below is written for 16 spaces.
const _: () = assert!(MAX_SPACES == 16);
const ALL_BIT: u32 = 0;
const ANY_BIT: u32 = 16;
const ZERO_FLAG: u64 = 1 << 32;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Frag {
    valid: [bool; 16],
    owner: Option<u8>,
    zero: bool,
}

const FRESH: Frag = Frag {
    valid: [false; 16],
    owner: None,
    zero: true,
};

impl Frag {
    fn holders(&self) -> impl Iterator<Item = u8> + '_ {
        (0..16u8).filter(|&s| self.valid[usize::from(s)])
    }

    fn as_state(&self) -> FragmentState {
        FragmentState {
            valid: SpaceSet(
                self.holders()
                    .fold(0u16, |acc, s| acc | (1u16 << u32::from(s))),
            ),
            owner: self.owner.map(SpaceId),
            zero: self.zero,
        }
    }
}

/// What the model expects one fragment of an acquire to need.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Need {
    Nothing,
    Fill,
    Copy(u8),
}

#[derive(Clone, Debug)]
enum Op {
    Access {
        a: usize,
        b: usize,
        space: u8,
        access: u8,
        first_partial: bool,
        last_partial: bool,
        /// Carry the plan out; when false the copies "failed" and nothing is committed.
        commit: bool,
    },
    Failed {
        a: usize,
        b: usize,
        space: u8,
    },
    Reset,
    Merge {
        log2: u32,
    },
    Split {
        log2: u32,
        short: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let any_space = || 0u8..16;
    prop_oneof![
        10 => (any::<usize>(), any::<usize>(), any_space(), 0u8..3, any::<bool>(), any::<bool>(),
               prop::bool::weighted(0.9))
            .prop_map(|(a, b, space, access, first_partial, last_partial, commit)| Op::Access {
                a, b, space, access, first_partial, last_partial, commit
            }),
        1 => (any::<usize>(), any::<usize>(), any_space())
            .prop_map(|(a, b, space)| Op::Failed { a, b, space }),
        1 => Just(Op::Reset),
        1 => (1u32..3).prop_map(|log2| Op::Merge { log2 }),
        1 => (1u32..3, any::<usize>()).prop_map(|(log2, short)| Op::Split { log2, short }),
    ]
}

struct Case {
    table: FragmentTable,
    model: Vec<Frag>,
    /// Spaces in use: ids `0..spaces` (the op's space id is taken modulo this).
    spaces: u8,
    /// Cost of a copy from `src` to `dst`: `cost[src][dst]`.
    cost: [[u64; 16]; 16],
}

impl Case {
    fn range(&self, a: usize, b: usize) -> Range<usize> {
        let n = self.model.len();
        let start = a % n;
        start..start + 1 + b % (n - start)
    }

    /// The model's acquire: per fragment, what is needed for `access` in `dst`.
    fn needs(&self, span: &FragmentSpan, dst: u8, access: Access) -> Vec<(usize, Need)> {
        let cost = |s: u8| self.cost[usize::from(s)][usize::from(dst)];
        let reads = |f: usize| {
            let partial = (f == span.frags.start && span.first_partial)
                || (f + 1 == span.frags.end && span.last_partial);
            access != Access::Write || partial
        };
        // Whether fragment `f` must be copied in, whoever from.
        let copied = |f: usize| {
            let frag = &self.model[f];
            reads(f) && !frag.valid[usize::from(dst)] && !frag.zero
        };
        // How many fragments from `f` on must be copied and are held by `s`.
        let run_from = |f: usize, s: u8| {
            (f..span.frags.end)
                .take_while(|&g| copied(g) && self.model[g].valid[usize::from(s)])
                .count()
        };
        // The source the previous fragment is copied from, while the run goes on.
        let mut run: Option<u8> = None;
        span.frags
            .clone()
            .map(|f| {
                let frag = &self.model[f];
                let need = if !reads(f) || frag.valid[usize::from(dst)] {
                    Need::Nothing
                } else if frag.zero {
                    Need::Fill
                } else {
                    let best = frag
                        .holders()
                        .map(cost)
                        .min()
                        .expect("a fragment that is not zero is valid somewhere");
                    // On a tie the run's source stays, so neighbours come in one copy; a new
                    // run starts from the cheapest holder with the longest run ahead, then the
                    // lowest id (`max_by_key` keeps the last of equals: reversed ids).
                    let src = match run {
                        Some(r) if frag.valid[usize::from(r)] && cost(r) <= best => r,
                        _ => frag
                            .holders()
                            .filter(|&s| cost(s) == best)
                            .map(|s| (run_from(f, s), std::cmp::Reverse(s)))
                            .max()
                            .map(|(_, std::cmp::Reverse(s))| s)
                            .expect("a cheapest holder"),
                    };
                    Need::Copy(src)
                };
                run = match need {
                    Need::Copy(src) => Some(src),
                    _ => None,
                };
                (f, need)
            })
            .collect()
    }

    fn access(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let Op::Access {
            a,
            b,
            space,
            access,
            first_partial,
            last_partial,
            commit,
        } = *op
        else {
            unreachable!("only called with accesses")
        };
        let dst = space % self.spaces;
        let access = [Access::Read, Access::ReadWrite, Access::Write][usize::from(access)];
        let span = FragmentSpan {
            frags: self.range(a, b),
            first_partial,
            last_partial,
        };
        let needs = self.needs(&span, dst, access);
        let cost = self.cost;
        let plan = self
            .table
            .plan_acquire(&span, SpaceId(dst), access, |s, d| {
                cost[s.index()][d.index()]
            });

        // The plan, fragment by fragment, must be the model's; and the runs must be maximal:
        // two neighbours with the same need are never in separate runs.
        let mut planned = vec![Need::Nothing; self.model.len()];
        for m in &plan.moves {
            prop_assert!(!m.frags.is_empty(), "empty move in {:?}", plan);
            planned[m.frags.clone()].fill(Need::Copy(m.src.0));
        }
        for r in &plan.fills {
            prop_assert!(!r.is_empty(), "empty fill in {:?}", plan);
            planned[r.clone()].fill(Need::Fill);
        }
        for &(f, need) in &needs {
            prop_assert_eq!(planned[f], need, "fragment {} of plan {:?}", f, plan);
        }
        let runs = |want: &dyn Fn(Need) -> bool| {
            let mut count = 0;
            let mut prev = Need::Nothing;
            for &(_, need) in &needs {
                if want(need) && need != prev {
                    count += 1;
                }
                prev = need;
            }
            count
        };
        prop_assert_eq!(
            plan.moves.len(),
            runs(&|n| matches!(n, Need::Copy(_))),
            "copies not grouped into maximal runs: {:?}",
            plan
        );
        prop_assert_eq!(
            plan.fills.len(),
            runs(&|n| n == Need::Fill),
            "fills not grouped into maximal runs: {:?}",
            plan
        );
        prop_assert_eq!(plan.dst, SpaceId(dst));

        if !commit {
            return Ok(());
        }
        self.table.commit_acquire(&plan);
        for (f, need) in needs {
            if need != Need::Nothing {
                let frag = &mut self.model[f];
                frag.valid[usize::from(dst)] = true;
                frag.owner.get_or_insert(dst);
            }
        }
        if access.writes() {
            self.table.mark_written(span.frags.clone(), SpaceId(dst));
            for f in span.frags {
                self.model[f] = Frag {
                    valid: std::array::from_fn(|s| s == usize::from(dst)),
                    owner: Some(dst),
                    zero: false,
                };
            }
        }
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Access { .. } => self.access(op)?,
            Op::Failed { a, b, space } => {
                let space = space % self.spaces;
                let frags = self.range(a, b);
                self.table.mark_failed(frags.clone(), SpaceId(space));
                for f in frags {
                    let frag = &mut self.model[f];
                    let others = frag.holders().any(|s| s != space);
                    // The failed copy goes unless it is the only one and cannot be refilled.
                    if others || frag.zero {
                        frag.valid[usize::from(space)] = false;
                    }
                }
            }
            Op::Reset => {
                self.table.reset();
                self.model.fill(FRESH);
            }
            Op::Merge { log2 } => {
                let factor = 1usize << log2;
                let gather = self.model.chunks(factor).any(|group| {
                    let common = (0..16).any(|s| group.iter().all(|f| f.valid[s]));
                    !common && !group.iter().all(|f| f.zero)
                });
                prop_assert_eq!(self.table.merge_needs_gather(factor), gather);
                if gather {
                    // What the buffer layer does first: read everything on the host.
                    let len = self.model.len();
                    self.access(&Op::Access {
                        a: 0,
                        b: len - 1,
                        space: 0,
                        access: 0,
                        first_partial: false,
                        last_partial: false,
                        commit: true,
                    })?;
                    prop_assert!(!self.table.merge_needs_gather(factor));
                }
                self.table = self.table.merged(factor);
                self.model = self.model.chunks(factor).map(merge).collect();
            }
            Op::Split { log2, short } => {
                let factor = 1usize << log2;
                if self.model.len() * factor > 64 {
                    return self.check();
                }
                // The buffer's last fragment may be short, so the split may leave fewer than
                // `factor` children of the last parent (but at least one).
                let count = self.model.len() * factor - short % factor;
                self.table = self.table.split(factor, count).expect("records");
                self.model = (0..count).map(|i| self.model[i / factor]).collect();
            }
        }
        self.check()
    }

    fn check(&self) -> Result<(), TestCaseError> {
        prop_assert_eq!(self.table.len(), self.model.len());
        for (f, frag) in self.model.iter().enumerate() {
            prop_assert_eq!(self.table.get(f), Some(frag.as_state()), "fragment {}", f);
        }
        prop_assert_eq!(self.table.get(self.model.len()), None);

        let expected = summary_of(&self.model);
        prop_assert_eq!(
            self.table.summary(),
            expected,
            "summary {:#x}, the model's {:#x}",
            self.table.summary(),
            expected
        );
        let rescanned: Vec<Frag> = (0..self.table.len())
            .filter_map(|f| self.table.get(f))
            .map(|s| Frag {
                valid: std::array::from_fn(|i| s.valid.0 & (1 << i) != 0),
                owner: s.owner.map(|o| o.0),
                zero: s.zero,
            })
            .collect();
        prop_assert_eq!(
            self.table.summary(),
            summary_of(&rescanned),
            "the summary drifted from the table's own fragments"
        );

        let summary = self.table.summary();
        for s in 0..16u8 {
            let everywhere = self.model.iter().all(|f| f.valid[usize::from(s)]);
            let alone = self
                .model
                .iter()
                .all(|f| f.valid[usize::from(s)] && f.holders().count() == 1 && !f.zero);
            prop_assert_eq!(resident(summary, SpaceId(s), Access::Read), everywhere);
            for w in [Access::ReadWrite, Access::Write] {
                prop_assert_eq!(resident(summary, SpaceId(s), w), alone, "space {}", s);
            }
        }
        Ok(())
    }
}

/// A group of fragments as one: valid where all are, zero if all are. The owner is the
/// group's common owner; where they differ, the lowest space holding the whole group stands
/// in (a merged fragment that holds data is never left without one).
fn merge(group: &[Frag]) -> Frag {
    let valid = std::array::from_fn(|s| group.iter().all(|f| f.valid[s]));
    let owner = match group[0].owner {
        Some(o) if group.iter().all(|f| f.owner == Some(o)) => Some(o),
        _ => (0..16u8).find(|&s| valid[usize::from(s)]),
    };
    Frag {
        valid,
        owner,
        zero: group.iter().all(|f| f.zero),
    }
}

/// The summary word with the layout written out bit by bit.
fn summary_of(frags: &[Frag]) -> u64 {
    let mut word = 0u64;
    for s in 0..16u32 {
        let i = s as usize;
        if frags.iter().all(|f| f.valid[i]) {
            word |= 1 << (ALL_BIT + s);
        }
        if frags.iter().any(|f| f.valid[i]) {
            word |= 1 << (ANY_BIT + s);
        }
    }
    if frags.iter().any(|f| f.zero) {
        word |= ZERO_FLAG;
    }
    word
}

fn cases() -> u32 {
    std::env::var("RIMMS_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    #[cfg_attr(miri, ignore = "thousands of random programs; the table has no unsafe code")]
    fn the_table_matches_a_plain_model(
        frags in 1usize..24,
        spaces in 1u8..=16,
        cost in prop::array::uniform16(prop::array::uniform16(0u64..4)),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let mut case = Case {
            table: FragmentTable::new(frags),
            model: vec![FRESH; frags],
            spaces,
            cost,
        };
        case.check()?;
        for op in &ops {
            case.apply(op)?;
        }
    }
}

/// The checks above must be able to fail.
#[test]
fn the_model_sees_a_summary_that_drifted() {
    let mut case = Case {
        table: FragmentTable::new(2),
        model: vec![FRESH; 2],
        spaces: 3,
        cost: [[1; 16]; 16],
    };
    case.check().unwrap();
    // A count that never went down: space 1 still counted as holding fragment 0.
    case.table.valid_count[1] += 1;
    case.table.held |= 1 << 1;
    assert!(case.check().is_err());
    case.table.valid_count[1] -= 1;
    case.table.held &= !(1 << 1);
    case.check().unwrap();
    // A fragment state the model did not predict.
    case.model[1].owner = Some(2);
    assert!(case.check().is_err());
}
